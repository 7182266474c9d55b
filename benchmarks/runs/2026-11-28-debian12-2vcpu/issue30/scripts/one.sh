#!/bin/bash
# one.sh TAG ENGINE N: one 10 s run at 500 req/s, profile CPU 1 for 5 s
set -u
B=/work/tgt-main/release/connlab
cd /tmp/pp
ulimit -n 20000
T=$1; E=$2; N=$3; P=7172
$B serve --engine $E --cpu 1 --listen 127.0.0.1:$P > serve-$T.log 2>&1 &
S=$!
sleep 1
$B load --target 127.0.0.1:$P -c $N --rate 500 --request-size 128 --response-size 10KiB --duration 10s --warmup 3s --cpu 0 --json load-$T.json > load-$T.log 2>&1 &
L=$!
sleep 6
perf record -q -e cpu-clock -F 2000 -C 1 -g -o rec-$T.data -- sleep 5 >/dev/null 2>&1
wait $L
kill -INT $S; wait $S
echo "$T mean_us $(python3 -c "import json;d=json.load(open('load-$T.json'));print(round(d['service_latency_us']['mean'],1), round(d['service_latency_us']['p50'],1))")"
perf report -i rec-$T.data --no-children --sort comm --stdio 2>/dev/null | grep -E "^\s+[0-9.]+%" | head -5 | tr -s ' ' | tr '\n' ';'; echo
