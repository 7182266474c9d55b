#!/usr/bin/env python3
"""Per-repetition ratios of the issue-18 peer comparisons (analysis only).

Reads the point files of the sweeps `connlab sweep experiments/<file>.toml --out
ROOT/<file>` wrote and prints, for each pair of contenders (and io_uring
against epoll in uring-polling), the ratio of requests per CPU second of
each repetition measured back to back: median, lowest and highest.

  scripts/peer_ratios.py ROOT > ratios.csv
"""
import json, glob, os, statistics, sys
PAIRS = {
 'peers-serve-vs-nginx': [('uring','epoll'),('uring','nginx-return'),('epoll','nginx-return')],
 'peers-loadgen-vs-wrk': [('connlab-load','wrk'),('connlab-load-uring','wrk')],
 'peers-gateway-vs-haproxy': [('proxy','haproxy'),('proxy-splice','haproxy'),('proxy-uring','haproxy')],
 'peers-relay-vs-haproxy': [('relay','haproxy')],
}
root = sys.argv[1]
print('experiment,measure,numerator,denominator,size_or_connections,repetitions,median,min,max')
for exp, pairs in PAIRS.items():
    pts = {}
    for f in glob.glob(f'{root}/{exp}/points/*.json'):
        d = json.load(open(f)); p = d['params']
        pts[(p['contender'], p['body_bytes'], p['repetition'])] = d['requests_per_cpu_s']
    sizes = sorted({k[1] for k in pts})
    for a, b in pairs:
        for s in sizes:
            r = [pts[(a,s,i)]/pts[(b,s,i)] for i in range(1,10) if (a,s,i) in pts and (b,s,i) in pts]
            if r:
                print(f'{exp},requests_per_cpu_s,{a},{b},{s},{len(r)},{statistics.median(r):.3f},{min(r):.3f},{max(r):.3f}')
# locality kind: uring-polling
exp='uring-polling'
pts={}
for f in glob.glob(f'{root}/{exp}/points/*.json'):
    d=json.load(open(f)); p=d['params']
    eng=os.path.basename(f).split('-')[0]
    rep=int(os.path.basename(f).split('rep')[1].split('.')[0])
    conns=int(os.path.basename(f).split('-c')[1].split('-')[0])
    pts[(eng,conns,rep)]=(d['load']['achieved_rate_per_s'] if 'achieved_rate_per_s' in d['load'] else None, d['server']['requests_per_cpu_s'])
for conns in sorted({k[1] for k in pts}):
    for m,idx in (('throughput',0),('requests_per_server_cpu_s',1)):
        r=[pts[('uring',conns,i)][idx]/pts[('epoll',conns,i)][idx] for i in range(1,10) if ('uring',conns,i) in pts and ('epoll',conns,i) in pts]
        if r: print(f'{exp},{m},uring,epoll,{conns},{len(r)},{statistics.median(r):.3f},{min(r):.3f},{max(r):.3f}')
