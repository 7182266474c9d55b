#!/bin/bash
# Clean A/B checks for the two findings (quiet machine):
# 1. process-per-connection at 400 and 10,000 with the VM's DAMON on and off;
# 2. the writer's worst sends under SCHED_OTHER and SCHED_FIFO.
cd /tmp/pp
D=/sys/kernel/mm/damon/admin/kdamonds/0
for i in 1 2 3; do
  for st in on off; do
    [ "$(cat $D/state)" = "$st" ] || echo $st > $D/state
    ./one.sh ab-$st-p10k-$i processes 10000
    ./one.sh ab-$st-p400-$i processes 400
  done
done
[ "$(cat $D/state)" = on ] || echo on > $D/state
for i in 1 2; do
  ./dev.sh | head -1 | sed "s/^/other$i /"
  cp sched-dev.data sched-other$i.data
  ./dev-fifo.sh | head -1 | sed "s/^/fifo$i /"
  cp sched-dev-fifo.data sched-fifo$i.data
done
