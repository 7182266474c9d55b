#!/usr/bin/env python3
"""Where a server's CPU time goes, from a `perf record -g` profile.

Analysis only (the measurements themselves are `connlab sweep` files). It
splits the samples of one process into the work every server must do for a
request on TCP, and what its I/O model and code add on top:

  tcp-send   inclusive share of tcp_sendmsg (with loopback, the delivery into
             the peer's socket runs here too: the softirq of the transmit)
  tcp-recv   inclusive share of tcp_recvmsg (copy to the caller, ACK work)
  splice     inclusive share of splice_to_socket / tcp_splice_read
  sleep      inclusive share of schedule (blocking in the wait and waking)
  user       samples in user space (the program and its libraries)
  rest       everything else in the kernel: system call entry, readiness
             (epoll, poll, io_uring's rings and task work), timers

The first three are the floor no I/O model removes; `overhead / floor` says
how far a program is from it, and two programs' floors bound the ratio any
change of I/O model can reach.

A profile is a perf.data file, or the text of

  perf report -i DATA --children --sort sym --stdio -g none

saved as NAME.report.txt (what `profile = true` in a peers experiment writes
next to each perf.data; the text needs neither perf nor the binaries). A
directory stands for its *.report.txt files, and its *.perf.data files that
have no report beside them. One CSV row per profile on stdout.

  perf record -e cpu-clock -F 4000 -g -p PID -o server.data -- sleep 4
  scripts/perf_split.py server.data [more.data ...]
  scripts/perf_split.py results/peers-serve-vs-nginx/profiles
"""
import argparse
import os
import subprocess

FLOOR = {
    "tcp-send": ["tcp_sendmsg"],
    "tcp-recv": ["tcp_recvmsg"],
    "splice": ["splice_to_socket", "tcp_splice_read"],
}
NAMES = ["tcp-send", "tcp-recv", "splice", "sleep", "user", "rest"]
REPORT = ".report.txt"
DATA = ".perf.data"


def report_text(path: str) -> str:
    """The `perf report --children --sort sym` text of a profile."""
    if path.endswith(REPORT):
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()
    return subprocess.run(
        ["perf", "report", "-i", path, "--children", "--sort", "sym",
         "--stdio", "-g", "none"],
        capture_output=True, text=True, check=True).stdout


def parse(text: str) -> tuple[dict[str, float], float]:
    """Symbol -> inclusive (children) percentage, and the percentage of the
    samples taken in the kernel (the self shares of its `[k]` symbols)."""
    shares: dict[str, float] = {}
    kernel = 0.0
    for line in text.splitlines():
        parts = line.split()
        if (len(parts) >= 4 and parts[0].endswith("%") and parts[1].endswith("%")
                and parts[2] in ("[k]", "[.]")):
            shares.setdefault(parts[3], float(parts[0].rstrip("%")))
            if parts[2] == "[k]":
                kernel += float(parts[1].rstrip("%"))
    return shares, kernel


def split(path: str) -> dict[str, float]:
    """The shares described in the module documentation, in percent."""
    shares, kernel = parse(report_text(path))
    row = {name: sum(shares.get(s, 0.0) for s in syms) for name, syms in FLOOR.items()}
    row["sleep"] = shares.get("schedule", 0.0)
    row["user"] = max(0.0, 100.0 - kernel)
    row["rest"] = max(0.0, 100.0 - sum(row.values()))
    return row


def profiles_in(directory: str) -> list[str]:
    """The profiles of a directory: each report, else its perf.data."""
    names = sorted(os.listdir(directory))
    reports = {n[: -len(REPORT)] for n in names if n.endswith(REPORT)}
    found = []
    for n in names:
        if n.endswith(REPORT) or (n.endswith(DATA) and n[: -len(DATA)] not in reports):
            found.append(os.path.join(directory, n))
    return found


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("profiles", nargs="+", metavar="PROFILE",
                        help="perf.data files, NAME.report.txt files, or directories of them")
    args = parser.parse_args()
    paths = []
    for p in args.profiles:
        if os.path.isdir(p):
            found = profiles_in(p)
            if not found:
                parser.error(f"{p}: no *{REPORT} or *{DATA} in it")
            paths += found
        elif os.path.isfile(p):
            paths.append(p)
        else:
            parser.error(f"{p}: no such profile")
    print("profile," + ",".join(NAMES) + ",overhead_over_floor")
    for path in paths:
        try:
            row = split(path)
        except (OSError, subprocess.CalledProcessError) as e:
            parser.exit(1, f"{parser.prog}: {path}: {e}\n")
        floor = row["tcp-send"] + row["tcp-recv"] + row["splice"]
        over = (100.0 - floor) / floor if floor else float("nan")
        print(path + "," + ",".join(f"{row[n]:.1f}" for n in NAMES) + f",{over:.2f}")


if __name__ == "__main__":
    main()
