#!/usr/bin/env python3
"""Issue 31: each contender's ratio to each baseline in peers reports (CSV
from `connlab report --format csv`), with its verdict, one column per
report. Usage: peer_ratios.py A.csv [B.csv ...]"""
import csv
import sys

table = {}
for i, path in enumerate(sys.argv[1:]):
    for r in csv.DictReader(open(path)):
        if r["kind"] != "contender" or not r["baseline"] or r["contender"] == r["baseline"]:
            continue
        key = (int(r["body_bytes"]), r["contender"], r["baseline"])
        ratio = r["ratio_median"] or "-"
        table.setdefault(key, {})[i] = f"{ratio} {r['verdict'] or ''}".strip()
heads = [p.split("/")[-1] for p in sys.argv[1:]]
print(f"{'body':>6} {'contender':13} {'baseline':13} " + " ".join(f"{h:32}" for h in heads))
for (b, c, base), cols in sorted(table.items()):
    print(f"{b:>6} {c:13} {base:13} " + " ".join(f"{cols.get(i, '?'):32}" for i in range(len(heads))))
