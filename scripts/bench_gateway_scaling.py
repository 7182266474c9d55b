#!/usr/bin/env python3
"""The load-balancing paper's experiment: one CPU-capped web server direct, against two
behind the gateway (nftables NAT, the paper's ip-mod policy), load stepped to saturation.

Usage (root): scripts/bench_gateway_scaling.py [--quota 25%] [--rates 500,1000,...]
              [--gateway nat|proxy|haproxy] [--skip-direct] > scaling.csv

--gateway picks what balances the two backends: connlab's nat mode (default, the
paper's ip-mod), connlab's proxy mode (ip-mod), or HAProxy (mode tcp, balance source).

Namespaces on one bridge: gateway 198.18.0.1, backends .2 and .3, clients .4-.7 (four
client hosts, so that ip-mod, which keys on the low byte of the client address, has
clients for both backends: .4 and .6 go to backend 0, .5 and .7 to backend 1). Every
backend is nginx (one worker) serving the paper's file set under `connlab cap --cpu
QUOTA`, so the backends, not the two shared cores, are the bottleneck (the paper's
servers were far slower than its gateway). For each configuration and rate, four load
shards (one per client host, `--start-at`, merged) send the HTTP workload open loop
(`connlab load --protocol http --manifest`, 32 keep-alive connections each), and each
backend's CPU time over the same window is read from /proc for the processes of its
cgroup. One CSV row per (configuration, rate).
"""
import argparse, csv, json, os, subprocess, sys, tempfile, time
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gwlab import BIN, Lab, group_cpu_s, haproxy_tcp_cfg, nginx_conf, sh, start, stop

CLIENTS = ["c1", "c2", "c3", "c4"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quota", default="25%")
    ap.add_argument("--rates", default="1000,2000,3000,4000,4500,5000,6000,7000,8000,9000,10000,11000,12000")
    ap.add_argument("--duration", type=int, default=5)
    ap.add_argument("--gateway", choices=["nat", "proxy", "haproxy"], default="nat")
    ap.add_argument("--skip-direct", action="store_true")
    ap.add_argument("--no-gateway-rps", action="store_true",
                    help="leave the gateway interface's receive processing where the kernel puts it")
    a = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("needs root (network namespaces, cgroups, nftables)")
    rates = [int(r) for r in a.rates.split(",")]
    w = csv.writer(sys.stdout)
    w.writerow(["config", "offered_per_s", "achieved_per_s", "completed", "errors", "mean_us", "p50_us", "p99_us",
                "mbit_s", "backend0_cpu_s", "backend1_cpu_s", "window_s", "backend0_cpu_share",
                "backend1_cpu_share", "quota"])
    tmp = tempfile.mkdtemp(prefix="connlab-gw-scaling-")
    os.chmod(tmp, 0o755)  # nginx workers run as nobody
    with Lab(["gw", "b0", "b1", *CLIENTS]) as lab:
        # Receive processing on the gateway's CPU for the gateway, and on the
        # backends' CPU (0, where nginx runs) for the backends, in both
        # configurations: otherwise packets forwarded by the gateway would be
        # received on CPU 1 and the backends' network-stack work would vanish
        # from their CPU time (measured: 29-36% of the direct backend's).
        if not a.no_gateway_rps:
            lab.rps("gw", 2)
        lab.rps("b0", 1)
        lab.rps("b1", 1)
        sh(BIN, "webset", "generate", f"{tmp}/www", "--model", "paper")
        backends = {}
        caps = []
        try:
            for b in ["b0", "b1"]:
                conf = nginx_conf(tmp, b, f"{lab.addr(b)}:8080", f"{tmp}/www")
                # `ip netns exec` remounts /sys (hiding the cgroup mounts), so the
                # quota is set up outside and the namespace entered inside it.
                p = start(["taskset", "-c", "0", BIN, "cap", "--cpu", a.quota, "--name", b, "--",
                           *lab.inns(b, "nginx", "-c", conf)])
                caps.append(p)
                backends[b] = f"/sys/fs/cgroup/cpu/connlab-{p.pid}-{b}/cgroup.procs"
                if not os.path.exists(backends[b]):
                    sys.exit(f"no cgroup for {b}: {backends[b]}")
            vip = f"{lab.addr('gw')}:80"
            pool = [f"{lab.addr(b)}:8080" for b in ["b0", "b1"]]
            if a.gateway == "haproxy":
                cfg = haproxy_tcp_cfg(f"{tmp}/haproxy.cfg", vip, pool, balance="source")
                gw_cmd = lab.inns("gw", "taskset", "-c", "1", "haproxy", "-db", "-f", cfg)
            else:
                gw_cmd = lab.inns("gw", "taskset", "-c", "1", BIN, "gateway", "--mode", a.gateway, "--listen", vip,
                                  "--backend", pool[0], "--backend", pool[1], "--policy", "ip-mod",
                                  *(["--masquerade"] if a.gateway == "nat" else []))
            configs = {}
            if not a.skip_direct:
                configs["one-direct"] = (None, pool[0])
            configs[f"two-{a.gateway}"] = (gw_cmd, vip)
            for name, (cmd, target) in configs.items():
                gw = start(cmd, ready="gateway:" if cmd and BIN in cmd else None) if cmd else None
                try:
                    for rate in rates:
                        row = step(lab, tmp, name, target, rate, a.duration, backends)
                        w.writerow(row + [a.quota])
                        sys.stdout.flush()
                finally:
                    if gw:
                        stop(gw)
        finally:
            for p in caps:
                stop(p)


def step(lab, tmp, name, target, rate, duration, backends):
    at = time.time() + 3
    files = []
    procs = []
    for i, c in enumerate(CLIENTS):
        out = f"{tmp}/{name}-{rate}-{i + 1}.json"
        files.append(out)
        procs.append(subprocess.Popen(lab.inns(
            c, "taskset", "-c", "0", BIN, "load", "--target", target, "--protocol", "http", "--manifest",
            f"{tmp}/www", "-c", "128", "--rate", str(rate), "--shard", f"{i + 1}/4", "--start-at", f"{at:.3f}",
            "-d", f"{duration}s", "--warmup", "1s", "--json", out), stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL))
    # Backend CPU over the measured window (after the 1 s warm-up).
    time.sleep(max(0.0, at + 1 - time.time()))
    before = {b: group_cpu_s(f) for b, f in backends.items()}
    t0 = time.time()
    time.sleep(duration)
    after = {b: group_cpu_s(f) for b, f in backends.items()}
    window = time.time() - t0
    for p in procs:
        if p.wait() != 0:
            sys.exit(f"a load shard failed at {name} {rate}/s")
    merged = f"{tmp}/{name}-{rate}.json"
    sh(BIN, "merge", *files, "--json", merged)
    r = json.load(open(merged))
    s = r["service_latency_us"]
    cpu = {b: after[b] - before[b] for b in backends}
    return [name, rate, round(r["achieved_rate_per_s"], 1), r["requests"]["measured_completed"],
            sum(r["requests"]["errors"].values()), round(s["mean"], 1), round(s["p50"], 1), round(s["p99"], 1),
            round(r["throughput_mbit_s"], 1), round(cpu["b0"], 3), round(cpu["b1"], 3), round(window, 3),
            round(cpu["b0"] / window, 3), round(cpu["b1"] / window, 3)]


if __name__ == "__main__":
    main()
