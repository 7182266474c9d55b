#!/bin/bash
# Many connections through the I/O server on loopback: CPU and latency by --send-buffer mode.
B=/work/main/target/release/connlab
OUT=/tmp/scale
head -c 32 /dev/urandom > $OUT/key
taskset -c 1 $B serve --engine epoll --listen 127.0.0.1:7070 > $OUT/serve.log 2>&1 &
SP=$!
sleep 0.5
for rep in ${REPS:-1 2}; do
for mode in ${MODES:-share 4x off direct}; do
  if [ $mode != direct ]; then
    if [ $mode = off ]; then args="--send-limit off"; else args="--send-buffer ${mode//_/:}"; fi
    taskset -c 1 $B singleip io-server --listen 127.0.0.1:8000 --nodes 127.0.0.1:7000 --key $OUT/key $args --stats $OUT/io-$mode-$rep.json > $OUT/io.out 2>&1 &
    IP=$!; sleep 0.3
    taskset -c 1 $B singleip app-node --io-server 127.0.0.1:7000 --key $OUT/key --forward 127.0.0.1:7070 --port 8000 --max-streams 20000 > $OUT/node.out 2>&1 &
    NP=$!; sleep 0.5
    target=127.0.0.1:8000
  else
    target=127.0.0.1:7070
  fi
  t0=$( [ $mode != direct ] && awk '{print $14+$15}' /proc/$IP/stat || echo 0)
  taskset -c 0 $B load --target $target -c 5000 --active-ratio 1/10 --rate 5000 --response-size 10KiB -d 8s --json $OUT/load-$mode-$rep.json > $OUT/load-$mode-$rep.out 2>&1
  if [ $mode != direct ]; then
    t1=$(awk '{print $14+$15}' /proc/$IP/stat)
    echo "$mode rep $rep io-server cpu ticks $((t1-t0))"
    kill -INT $NP; sleep 0.3; kill -INT $IP; wait $IP 2>/dev/null; wait $NP 2>/dev/null
  fi
  python3 -c "
import json; d=json.load(open('$OUT/load-$mode-$rep.json'))
def f(k):
  x=d
  for p in k.split('.'): x=x.get(p,{}) if isinstance(x,dict) else {}
  return x
print('$mode', '$rep', {k:v for k,v in d.items() if not isinstance(v,(dict,list))})
" 2>&1 | head -3
done
done
kill $SP
