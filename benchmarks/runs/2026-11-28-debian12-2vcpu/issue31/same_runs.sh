#!/usr/bin/env bash
# Issue 31: the same measurements before (fddc477) and after the
# restructuring give the same verdicts and ratios: `connlab run --quick`, a
# locality quick sweep and a peers quick sweep, each run by the old binary
# then the new one, on a quiet machine. Usage (from the checkout's root):
#   same_runs.sh OLD_CONNLAB NEW_CONNLAB OUT_DIR
set -uo pipefail
old=$1 new=$2 out=$3
mkdir -p "$out"
for which in old new; do
  bin=${!which}
  "$bin" run --quick --out "$out/run-$which" >"$out/run-$which.txt" 2>&1
  echo "run --quick ($which): exit $?"
done
for exp in locality-table3 peers-serve-vs-nginx; do
  for which in old new; do
    bin=${!which}
    "$bin" sweep "experiments/$exp.toml" --quick --fresh --out "$out/$exp-$which" \
      >"$out/$exp-$which.log" 2>&1
    echo "$exp ($which): exit $?"
    "$bin" report "$out/$exp-$which" --format csv -o "$out/$exp-$which.csv" 2>/dev/null
    "$bin" report "$out/$exp-$which" -o "$out/$exp-$which.html" 2>/dev/null
  done
done
