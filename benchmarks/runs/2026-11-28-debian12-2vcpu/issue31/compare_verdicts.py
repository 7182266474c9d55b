#!/usr/bin/env python3
"""Issue 31: the claim verdicts of two locality reports (CSV from `connlab
report --format csv`), side by side: one line per claim, its verdict class
before and after. Usage: compare_verdicts.py OLD.csv NEW.csv"""
import csv
import sys


def verdicts(path):
    out = {}
    for r in csv.DictReader(open(path)):
        if r.get("kind") != "claim":
            continue
        v = r["claim_verdict"]
        for cls in ("holds", "does not hold", "cannot be judged here", "cannot be measured here"):
            if v.startswith(cls):
                out[r["claim_text"]] = cls
                break
    return out


old, new = verdicts(sys.argv[1]), verdicts(sys.argv[2])
same = 0
for text in old:
    mark = "same" if old[text] == new.get(text) else "DIFFERS"
    same += mark == "same"
    print(f"{mark:8} {old[text]:25} -> {new.get(text, '?'):25} {text[:70]}")
print(f"{same} of {len(old)} claims: the same verdict")
