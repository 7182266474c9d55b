#!/usr/bin/python3
"""Plots of the SAPS experiment (issue 8 part 5) from scripts/bench_singleip.py's output.

Usage: scripts/plot_singleip.py DIR [DIR ...]
(Debian's python3 with python3-matplotlib: apt-get install python3-matplotlib)

For each results directory (e.g. benchmarks/runs/.../singleip/emulator-reno) writes
  timelines.png   time against TCP sequence number (relative) per stream, one panel per
                  system found (io16k, io16k-4x, iooff, nat, ...) and foreground size (the paper's figures 8-12)
  throughput.png  per-stream throughput over time (100 ms bins), same panels
  foreground.png  the 100 KB foreground transfer alone, all systems on one set of axes
from the repetition-1 files c-<system>-fg<size>-rep1.{timeline,bins}.csv.
"""
import csv, os, sys
from collections import defaultdict

try:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
except ImportError:
    sys.exit("needs matplotlib: apt-get install python3-matplotlib")

# Panel order; systems found in a directory but not listed here follow.
ORDER = ["io16k", "io16k-4x", "io16k-h1.5", "io16k-auto", "iooff", "nat"]


def systems_in(d):
    found = {f.split("-fg")[0][2:] for f in os.listdir(d) if f.startswith("c-") and f.endswith("-rep1.timeline.csv")}
    return [s for s in ORDER if s in found] + sorted(found - set(ORDER))
SIZES = [("fg100k", "100 KB foreground"), ("fg100000k", "100 MB foreground")]
COLOURS = {"fg": "tab:red", "bg1": "tab:blue", "bg2": "tab:green"}


def rows(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def label(ax, title, xlabel, ylabel, fontsize=7, markerscale=1):
    ax.set_title(title)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.legend(fontsize=fontsize, markerscale=markerscale)


def save(fig, d, name):
    fig.tight_layout()
    fig.savefig(os.path.join(d, name), dpi=90)
    plt.close(fig)


def panel_grid(title, ncols):
    fig, axes = plt.subplots(len(SIZES), max(ncols, 1), figsize=(5 * max(ncols, 3), 8), squeeze=False)
    fig.suptitle(title)
    return fig, axes


def panels(d, axes, systems, kind):
    """(axes, panel title, path) of every panel whose repetition-1 file of `kind`
    (timeline, bins) exists; the other panels are hidden."""
    for i, (size, title) in enumerate(SIZES):
        for j, system in enumerate(systems):
            ax = axes[i][j]
            path = os.path.join(d, f"c-{system}-{size}-rep1.{kind}.csv")
            if os.path.exists(path):
                yield ax, f"{system}, {title}", path
            else:
                ax.set_visible(False)


def plot_dir(d):
    name = os.path.basename(os.path.normpath(d))
    done = 0
    systems = systems_in(d)
    fig, axes = panel_grid(f"{name}: time against TCP sequence number, per stream (repetition 1)", len(systems))
    for ax, title, path in panels(d, axes, systems, "timeline"):
        by = defaultdict(lambda: ([], []))
        lost = defaultdict(lambda: ([], []))
        for r in rows(path):
            target = lost if r.get("fate", "sent") != "sent" else by
            target[r["stream"]][0].append(float(r["t_s"]))
            target[r["stream"]][1].append(int(r["seq_rel"]) / 1e6)
        for s, (t, q) in sorted(by.items()):
            ax.plot(t, q, ".", ms=1, color=COLOURS.get(s), label=s)
        for s, (t, q) in sorted(lost.items()):
            ax.plot(t, q, "x", ms=3, color="black", label=f"{s} dropped")
        label(ax, title, "time (s)", "sequence (MB)", markerscale=3)
        done += 1
    save(fig, d, "timelines.png")
    fig, axes = panel_grid(f"{name}: per-stream throughput over time, 100 ms bins (repetition 1)", len(systems))
    for ax, title, path in panels(d, axes, systems, "bins"):
        by = defaultdict(list)
        for r in rows(path):
            by[r["stream"]].append((float(r["t_s"]), float(r["mbit_s"])))
        for s, pts in sorted(by.items()):
            pts.sort()
            ax.plot([p[0] for p in pts], [p[1] for p in pts], color=COLOURS.get(s), label=s, lw=1)
        label(ax, title, "time (s)", "Mbit/s")
    save(fig, d, "throughput.png")
    plot_foreground(d, name, systems)
    return done


def plot_foreground(d, name, systems):
    """The 100 KB foreground transfer alone, every system on one set of axes: time since
    its first packet against its sequence number, drops marked (the paper's close-ups)."""
    fig, ax = plt.subplots(figsize=(8, 5))
    drawn = False
    for k, system in enumerate(systems):
        path = os.path.join(d, f"c-{system}-fg100k-rep1.timeline.csv")
        if not os.path.exists(path):
            continue
        pts = [r for r in rows(path) if r["stream"] == "fg"]
        if not pts:
            continue
        t0 = min(float(r["t_s"]) for r in pts)
        sent = [(1000 * (float(r["t_s"]) - t0), int(r["seq_rel"]) / 1e3) for r in pts if r.get("fate", "sent") == "sent"]
        lost = [(1000 * (float(r["t_s"]) - t0), int(r["seq_rel"]) / 1e3) for r in pts if r.get("fate", "sent") != "sent"]
        colour = f"C{k}"
        ax.plot([p[0] for p in sent], [p[1] for p in sent], ".", ms=3, color=colour, label=system)
        if lost:
            ax.plot([p[0] for p in lost], [p[1] for p in lost], "x", ms=5, color=colour, label=f"{system} dropped")
        drawn = True
    if drawn:
        label(ax, f"{name}: the 100 KB foreground transfer beside two 100 MB streams (repetition 1)",
              "time since its first packet (ms)", "sequence (KB)", fontsize=8)
        save(fig, d, "foreground.png")
    else:
        plt.close(fig)


def main():
    if len(sys.argv) < 2 or sys.argv[1] in ("-h", "--help"):
        print(__doc__)
        sys.exit(0 if len(sys.argv) >= 2 else 2)
    for d in sys.argv[1:]:
        if not os.path.isdir(d):
            sys.exit(f"{d}: not a directory")
        n = plot_dir(d)
        print(f"{d}: {n} timeline panels -> timelines.png, throughput.png, foreground.png")


if __name__ == "__main__":
    main()
