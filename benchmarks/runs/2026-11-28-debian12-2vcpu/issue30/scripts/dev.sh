#!/bin/bash
# Where do the worst sends come from? 2,000 req/s to epoll, scheduler trace of the client CPU.
set -u
B=/work/tgt-main/release/connlab
cd /tmp/pp
ulimit -n 20000
P=7173
$B serve --engine epoll --cpu 1 --listen 127.0.0.1:$P > serve-dev.log 2>&1 &
S=$!
sleep 1
$B load --target 127.0.0.1:$P -c 2000 --rate 2000 --request-size 128 --response-size 10KiB --duration 12s --warmup 2s --cpu 0 --json load-dev.json --records rec-dev.csv > load-dev.log 2>&1 &
L=$!
sleep 4
perf sched record -q -C 0 -o sched-dev.data -- sleep 8 >/dev/null 2>&1
wait $L
kill -INT $S; wait $S
python3 -c "import json;d=json.load(open('load-dev.json'));print(d['send_deviation_us']); print(d['send_lag_us'])"
