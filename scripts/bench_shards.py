#!/usr/bin/env python3
"""Two shards merged against one process, with the noise of two single runs beside it.

Usage: scripts/bench_shards.py [--reps N] [--duration S] > shards.csv
Needs a release build (target/release/connlab). Starts one `connlab serve --engine
epoll` on loopback (CPU 1) and, per repetition, runs: a single `connlab load`, two
shards (`--shard 1/2`, `--shard 2/2`, one `--start-at`) merged with `connlab merge`,
and a second single run. Prints one CSV row per run: counts and latency percentiles.
"""
import argparse, csv, json, os, subprocess, sys, tempfile, time

BIN = os.environ.get("CONNLAB", "target/release/connlab")
WORKLOAD = ["-c", "2000", "--active-ratio", "1/16", "--rate", "2000", "--request-size", "128",
            "--response-size", "10KiB", "--warmup", "1s", "--cpu", "0"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--duration", type=int, default=10)
    a = ap.parse_args()
    w = csv.writer(sys.stdout)
    w.writerow(["rep", "run", "measured_sent", "measured_completed", "errors", "mean_us", "p50_us",
                "p90_us", "p99_us", "p999_us", "send_dev_stddev_us", "start_skew_ms"])
    with tempfile.TemporaryDirectory(prefix="connlab-shards-") as tmp:
        srv = subprocess.Popen([BIN, "serve", "--engine", "epoll", "--listen", "127.0.0.1:0", "--cpu", "1"],
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        try:
            addr = srv.stdout.readline().strip().removeprefix("listening on ")
            flags = ["--target", addr, "-d", f"{a.duration}s"] + WORKLOAD
            for rep in range(1, a.reps + 1):
                runs = []
                for name in ["single-a", "shards-2", "single-b"]:
                    out = os.path.join(tmp, f"{name}-{rep}.json")
                    if name.startswith("single"):
                        subprocess.run([BIN, "load", *flags, "--json", out], check=True,
                                       stderr=subprocess.DEVNULL)
                    else:
                        at = f"{time.time() + 2:.3f}"
                        parts = [os.path.join(tmp, f"shard{i}-{rep}.json") for i in (1, 2)]
                        procs = [subprocess.Popen([BIN, "load", *flags, "--shard", f"{i}/2", "--start-at", at,
                                                   "--json", p], stderr=subprocess.DEVNULL)
                                 for i, p in zip((1, 2), parts)]
                        for p in procs:
                            if p.wait() != 0:
                                sys.exit("a shard failed")
                        subprocess.run([BIN, "merge", *parts, "--json", out], check=True,
                                       stderr=subprocess.DEVNULL)
                    r = json.load(open(out))
                    s = r["service_latency_us"]
                    w.writerow([rep, name, r["requests"]["measured_sent"], r["requests"]["measured_completed"],
                                sum(r["requests"]["errors"].values()), round(s["mean"], 1), round(s["p50"], 1),
                                round(s["p90"], 1), round(s["p99"], 1), round(s["p999"], 1),
                                round(r["send_deviation_us"]["stddev"], 2),
                                (r.get("merged") or {}).get("start_skew_ms", "")])
                    sys.stdout.flush()
        finally:
            srv.terminate()
            srv.wait(timeout=30)


if __name__ == "__main__":
    main()
