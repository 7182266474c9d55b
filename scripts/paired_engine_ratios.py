#!/usr/bin/env python3
"""Paired io_uring-over-epoll ratios of a locality sweep (analysis only).

`connlab report` gives every peers experiment its ratios to the baselines
(columns ratio_median, ratio_min, ratio_max of `--format csv`); a locality
sweep such as experiments/uring-polling.toml reports each engine on its own.
This reads that sweep's point files and prints, per connection count, the
ratio of two engines' throughput and requests per server CPU second in each
repetition (measured back to back): median, lowest and highest.

The report cannot give these yet: a locality claim (`[[paper.claims]]` with
`versus`) pairs throughput by round, but no claim metric is the server's
requests per CPU second, and uring-polling.toml states no claims.

  connlab sweep experiments/uring-polling.toml --out results/uring-polling
  scripts/paired_engine_ratios.py results/uring-polling [uring epoll]
"""
import argparse
import glob
import json
import os
import re
import statistics


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("results", help="the sweep's --out directory")
    parser.add_argument("numerator", nargs="?", default="uring", help="engine (default uring)")
    parser.add_argument("denominator", nargs="?", default="epoll",
                        help="engine (default epoll)")
    args = parser.parse_args()
    root, num, den = args.results, args.numerator, args.denominator
    if not os.path.isdir(os.path.join(root, "points")):
        parser.error(f"{root}: no points/ directory (not a sweep's --out directory)")
    points = {}
    for path in glob.glob(os.path.join(root, "points", "*.json")):
        m = re.match(r"(\w+)-c(\d+)-.*-rep(\d+)\.json$", os.path.basename(path))
        if not m:
            continue
        d = json.load(open(path))
        points[(m[1], int(m[2]), int(m[3]))] = (
            d["load"]["achieved_rate_per_s"], d["server"]["requests_per_cpu_s"])
    print("measure,numerator,denominator,connections,repetitions,median,min,max")
    for conns in sorted({k[1] for k in points}):
        reps = sorted(k[2] for k in points if k[0] == num and k[1] == conns
                      and (den, conns, k[2]) in points)
        for measure, i in (("throughput", 0), ("requests_per_server_cpu_s", 1)):
            r = [points[(num, conns, n)][i] / points[(den, conns, n)][i] for n in reps]
            if r:
                print(f"{measure},{num},{den},{conns},{len(r)},"
                      f"{statistics.median(r):.3f},{min(r):.3f},{max(r):.3f}")


if __name__ == "__main__":
    main()
