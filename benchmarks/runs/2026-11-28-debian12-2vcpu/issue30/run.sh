#!/bin/bash
# Issue 30 re-runs, one after another on a quiet machine.
cd /work/main
B=/work/tgt-main/release/connlab
O=results/issue30
date -u +"start %FT%TZ" > $O/log.txt
/tmp/pp/ab.sh > $O/findings-ab.txt 2>&1
date -u +"ab done %FT%TZ" >> $O/log.txt
$B sweep experiments/gateway-limit.toml --out $O/gateway-limit > $O/gateway-limit.sweep.txt 2>&1
date -u +"gateway-limit done %FT%TZ" >> $O/log.txt
$B sweep experiments/polling-cost.toml --quick --out $O/polling-cost-quick > $O/polling-cost-quick.sweep.txt 2>&1
date -u +"polling-cost-quick done %FT%TZ" >> $O/log.txt
$B sweep experiments/pipeline-tables.toml --out $O/pipeline-tables > $O/pipeline-tables.sweep.txt 2>&1
date -u +"pipeline-tables done %FT%TZ" >> $O/log.txt
$B sweep experiments/singleip-saps.toml --quick --out $O/singleip-saps-quick > $O/singleip-saps-quick.sweep.txt 2>&1
date -u +"singleip-saps-quick done %FT%TZ" >> $O/log.txt
$B sweep experiments/locality-table3.toml --quick --out $O/locality-table3-quick > $O/locality-table3-quick.sweep.txt 2>&1
date -u +"locality-table3-quick done %FT%TZ" >> $O/log.txt
$B sweep experiments/gateway-web.toml --out $O/gateway-web > $O/gateway-web.sweep.txt 2>&1
date -u +"gateway-web done %FT%TZ" >> $O/log.txt
