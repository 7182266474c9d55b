#!/usr/bin/env python3
"""The gateway's own limit (load-balancing paper, part (b)): 2, 4 and 6 backends behind
connlab's proxy, HAProxy and connlab's nat mode, highest request rate and traffic.

Usage (root): scripts/bench_gateway_limit.py [--backends 2,4,6] [--duration S] > limit.csv

Namespaces on one bridge: gateway 198.18.0.1, one client host, N nginx backends (one
worker each, paper file set, no quota). One closed-loop run per (backends, mode): 128
keep-alive connections from one client, each with one request outstanding, so the
offered load is as high as the path allows. The gateway (pinned to CPU 1, with its
interface's receive processing steered there by RPS) balances round robin: one client
host would put every connection on one backend under ip-mod or source hashing. Per-CPU
busy time from /proc/stat over the run says which side saturated: CPU 1 busy near 100%
means the gateway is the limit; CPU 0 (client and backends) near 100% means it is not.
"""
import argparse, csv, json, os, sys, tempfile, time
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gwlab import BIN, Lab, cpu_s, haproxy_tcp_cfg, nginx_conf, sh, start, stop


def cpu_busy():
    """(busy, total) jiffies of cpu0 and cpu1."""
    out = []
    for line in open("/proc/stat"):
        if line.startswith(("cpu0 ", "cpu1 ")):
            v = [int(x) for x in line.split()[1:]]
            idle = v[3] + v[4]
            out.append((sum(v) - idle, sum(v)))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--backends", default="2,4,6")
    ap.add_argument("--duration", type=int, default=5)
    a = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("needs root (network namespaces, nftables)")
    counts = [int(x) for x in a.backends.split(",")]
    most = max(counts)
    w = csv.writer(sys.stdout)
    w.writerow(["backends", "mode", "completed", "errors", "req_per_s", "mbit_s", "p50_us", "p99_us",
                "gateway_cpu_share", "cpu0_busy", "cpu1_busy"])
    tmp = tempfile.mkdtemp(prefix="connlab-gw-limit-")
    os.chmod(tmp, 0o755)  # nginx workers run as nobody
    backends = [f"b{i}" for i in range(1, most + 1)]
    with Lab(["gw", "c1", *backends]) as lab:
        lab.rps("gw", 2)
        for b in backends:
            lab.rps(b, 1)
        sh(BIN, "webset", "generate", f"{tmp}/www", "--model", "paper")
        procs = []
        try:
            for b in backends:
                conf = nginx_conf(tmp, b, f"{lab.addr(b)}:8080", f"{tmp}/www")
                procs.append(start(lab.inns(b, "taskset", "-c", "0", "nginx", "-c", conf)))
            vip = f"{lab.addr('gw')}:80"
            for n in counts:
                pool = [f"{lab.addr(b)}:8080" for b in backends[:n]]
                cfg = haproxy_tcp_cfg(f"{tmp}/haproxy-{n}.cfg", vip, pool)
                flags = [x for b in pool for x in ("--backend", b)]
                modes = {
                    "proxy": lab.inns("gw", "taskset", "-c", "1", BIN, "gateway", "--mode", "proxy", "--listen",
                                      vip, *flags, "--policy", "round-robin"),
                    "haproxy": lab.inns("gw", "taskset", "-c", "1", "haproxy", "-db", "-f", cfg),
                    "nat": lab.inns("gw", "taskset", "-c", "1", BIN, "gateway", "--mode", "nat", "--listen", vip,
                                    *flags, "--policy", "round-robin", "--masquerade"),
                }
                for mode, cmd in modes.items():
                    gw = start(cmd, ready="gateway:" if BIN in cmd else None)
                    try:
                        out = f"{tmp}/{mode}-{n}.json"
                        before_gw = cpu_s(gw.pid)
                        before = cpu_busy()
                        t0 = time.time()
                        sh(*lab.inns("c1", "taskset", "-c", "0", BIN, "load", "--target", vip, "--protocol", "http",
                                     "--manifest", f"{tmp}/www", "-c", "128", "--rate", "max", "--depth", "1",
                                     "-d", f"{a.duration}s", "--warmup", "1s", "--json", out))
                        wall = time.time() - t0
                        after = cpu_busy()
                        gw_cpu = (cpu_s(gw.pid) - before_gw) / wall
                        busy = [(x[0] - y[0]) / max(x[1] - y[1], 1) for x, y in zip(after, before)]
                        r = json.load(open(out))
                        s = r["service_latency_us"]
                        w.writerow([n, mode, r["requests"]["measured_completed"],
                                    sum(r["requests"]["errors"].values()), round(r["achieved_rate_per_s"], 1),
                                    round(r["throughput_mbit_s"], 1), round(s["p50"], 1), round(s["p99"], 1),
                                    "" if mode == "nat" else round(gw_cpu, 3), round(busy[0], 3),
                                    round(busy[1], 3)])
                        sys.stdout.flush()
                    finally:
                        stop(gw)
        finally:
            for p in procs:
                stop(p)


if __name__ == "__main__":
    main()
