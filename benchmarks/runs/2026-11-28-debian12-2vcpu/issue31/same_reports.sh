#!/usr/bin/env bash
# Issue 31: the same results directory gives the same CSV report before and
# after the restructuring (fddc477) — for every kind with a directory at hand.
# Usage: same_reports.sh OLD_CONNLAB NEW_CONNLAB   (run from the checkout's root)
set -uo pipefail
old=$1 new=$2 tmp=$(mktemp -d)
dirs=(
  results/issue28/locality-table3 results/issue30/gateway-web results/issue30/gateway-limit
  results/issue30/polling-cost-quick results/issue30/pipeline-tables-quick
  results/issue30/singleip-saps-quick
  benchmarks/runs/2026-11-26-debian12-2vcpu/issue18-second/peers-serve-vs-nginx
  benchmarks/runs/2026-11-26-debian12-2vcpu/issue18-second/peers-loadgen-vs-wrk
  benchmarks/runs/2026-11-26-debian12-2vcpu/issue18-second/loadgen-pacing
)
for d in "${dirs[@]}"; do
  [ -d "$d" ] || { echo "skip $d (absent)"; continue; }
  n=$(echo "$d" | tr / _)
  "$old" report "$d" --format csv -o "$tmp/$n.old.csv" 2>/dev/null
  "$new" report "$d" --format csv -o "$tmp/$n.new.csv" 2>/dev/null
  if cmp -s "$tmp/$n.old.csv" "$tmp/$n.new.csv"; then
    echo "same   $(wc -l <"$tmp/$n.new.csv") rows  $d"
  else
    echo "DIFFER $d"; diff "$tmp/$n.old.csv" "$tmp/$n.new.csv" | head -5
  fi
done
rm -rf "$tmp"
