#!/bin/sh
# Issue 33's record on the 2-vCPU VM: epoll and io_uring with 1 and 2 workers
# against nginx with 1 and 2 worker processes, in one sweep, with nothing else
# running. Run from the checkout with a release build on PATH as `connlab`.
set -eu
here=$(dirname "$0")
out=${1:-results/issue33}
connlab sweep experiments/scaling.toml --out "$out/scaling" 2>&1 | tee "$here/scaling.sweep.txt"
connlab report "$out/scaling" --format markdown -o "$here/scaling.md"
connlab report "$out/scaling" --format csv -o "$here/scaling.csv"
connlab report "$out/scaling" -o "$here/scaling.html"
# connlab run with two loops per event engine, CPU for CPU against threads.
connlab run --workers 2 --engines epoll,uring,threads --out "$out/run-w2" \
  > "$here/run-w2.txt" 2> "$here/run-w2.stderr.txt" || true
