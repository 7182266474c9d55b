#!/bin/bash
# cost.sh TAG ENGINE N: page-table memory and server CPU per request
set -u
B=/work/tgt-main/release/connlab
cd /tmp/pp
ulimit -n 20000
T=$1; E=$2; N=$3; P=7174
pt0=$(awk '/^PageTables:/{print $2}' /proc/meminfo)
$B serve --engine $E --cpu 1 --listen 127.0.0.1:$P > serve-$T.log 2>&1 &
S=$!
sleep 1
$B load --target 127.0.0.1:$P -c $N --rate 500 --request-size 128 --response-size 10KiB --duration 10s --warmup 3s --cpu 0 --json load-$T.json > load-$T.log 2>&1 &
L=$!
sleep 5
pt1=$(awk '/^PageTables:/{print $2}' /proc/meminfo)
# server tree CPU (clock ticks) at 5 s and at 12 s into the run: 7 s of steady load
c0=$( (cat /proc/$S/stat; for c in $(pgrep -P $S); do cat /proc/$c/stat 2>/dev/null; done) | awk '{s+=$14+$15} END {print s}')
sleep 7
c1=$( (cat /proc/$S/stat; for c in $(pgrep -P $S); do cat /proc/$c/stat 2>/dev/null; done) | awk '{s+=$14+$15} END {print s}')
wait $L
kill -INT $S; wait $S
hz=$(getconf CLK_TCK)
python3 - "$T" "$pt0" "$pt1" "$c0" "$c1" "$hz" <<PY
import json,sys
t,pt0,pt1,c0,c1,hz=sys.argv[1],int(sys.argv[2]),int(sys.argv[3]),int(sys.argv[4]),int(sys.argv[5]),int(sys.argv[6])
d=json.load(open(f"load-{t}.json"))
print(f"{t} mean_us {d['service_latency_us']['mean']:.1f} p50 {d['service_latency_us']['p50']:.1f} page_tables_MiB +{(pt1-pt0)/1024:.1f} server_cpu_us_per_req {(c1-c0)/hz/7/500*1e6:.1f}")
PY
