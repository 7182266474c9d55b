#!/usr/bin/env python3
"""The gateway against its peers: connlab proxy vs HAProxy (mode tcp), and nat vs direct.

Usage (root): scripts/bench_gateway.py [--reps N] [--duration S] [--rate R] [--modes a,b] > gateway.csv

Builds four network namespaces on one bridge (client 198.18.0.4, gateway .1, nginx
backend .2; .3 unused), serves the paper's web file set (`connlab webset generate
--model paper`) from nginx (one worker) and, per repetition and in turn, runs the HTTP
workload (`connlab load --protocol http --manifest`, keep-alive connections):

  direct   client -> nginx
  proxy    client -> connlab gateway --mode proxy -> nginx
  proxy-splice  the same with --splice (pipes and splice(2) instead of user buffers)
  haproxy  client -> haproxy (mode tcp, balance source, one thread) -> nginx
  nat      client -> connlab gateway --mode nat --masquerade (nftables DNAT) -> nginx

Each mode gets a closed-loop run (64 connections, one request outstanding each: the
highest rate) and an open-loop run at --rate (latency at equal load). The gateway
process (connlab or haproxy) is pinned to CPU 1, nginx and the client to CPU 0; its
CPU time is read from /proc/PID/stat around each run, the same way for both. nat has
no gateway process (the kernel forwards in softirq), so its CPU column is empty; RPS
steers the gateway interface's receive processing to CPU 1 in every mode, so nat's
forwarding runs on the gateway's CPU too.
Prints one CSV row per run. Needs a release build, nginx, haproxy and nft.
"""
import argparse, csv, json, os, sys, tempfile
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gwlab import BIN, Lab, cpu_s, haproxy_tcp_cfg, nginx_conf, sh, start, stop

VIP, BACKEND = "198.18.0.1:80", "198.18.0.2:8080"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--duration", type=int, default=5)
    ap.add_argument("--rate", type=int, default=2000)
    ap.add_argument("--modes", default="direct,proxy,proxy-splice,haproxy,nat",
                    help="comma-separated subset of direct, proxy, proxy-splice, haproxy, nat")
    a = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("needs root (network namespaces, nftables)")
    w = csv.writer(sys.stdout)
    w.writerow(["rep", "mode", "load", "completed", "errors", "req_per_s", "mbit_s", "p50_us", "p99_us",
                "mean_us", "gateway_cpu_s", "gateway_cpu_us_per_req", "requests_per_gateway_cpu_s"])
    tmp = tempfile.mkdtemp(prefix="connlab-gw-bench-")
    os.chmod(tmp, 0o755)  # nginx workers run as nobody
    procs = []
    with Lab(["gw", "b1", "spare", "c1"]) as lab:
        inns = lab.inns
        # Receive processing of the gateway's interface on CPU 1 (RPS), where the
        # gateway process runs: nat's forwarding (softirq, no process) then uses
        # the same CPU as the user-space gateways instead of the client's CPU 0.
        lab.rps("gw", 2)
        try:
            sh(BIN, "webset", "generate", f"{tmp}/www", "--model", "paper")
            conf = nginx_conf(tmp, "nginx", BACKEND, f"{tmp}/www")
            procs.append(start(inns("b1", "taskset", "-c", "0", "nginx", "-c", conf)))
            haproxy_tcp_cfg(f"{tmp}/haproxy.cfg", VIP, [BACKEND], balance="source")
            gateways = {
                "direct": (None, BACKEND),
                "proxy": (inns("gw", "taskset", "-c", "1", BIN, "gateway", "--mode", "proxy", "--listen", VIP,
                               "--backend", BACKEND, "--policy", "source-hash"), VIP),
                "proxy-splice": (inns("gw", "taskset", "-c", "1", BIN, "gateway", "--mode", "proxy", "--listen",
                                      VIP, "--backend", BACKEND, "--policy", "source-hash", "--splice"), VIP),
                "haproxy": (inns("gw", "taskset", "-c", "1", "haproxy", "-db", "-f", f"{tmp}/haproxy.cfg"), VIP),
                "nat": (inns("gw", BIN, "gateway", "--mode", "nat", "--listen", VIP, "--backend", BACKEND,
                             "--policy", "ip-mod", "--masquerade"), VIP),
            }
            modes = a.modes.split(",")
            unknown = [m for m in modes if m not in gateways]
            if unknown:
                sys.exit(f"--modes: unknown {unknown}; choose from {', '.join(gateways)}")
            for rep in range(1, a.reps + 1):
                for mode in modes:
                    cmd, target = gateways[mode]
                    gw = None
                    if cmd:
                        gw = start(cmd, ready="gateway:" if BIN in cmd else None)
                    try:
                        for load, flags in [("closed", ["--rate", "max", "--depth", "1"]),
                                            ("open", ["--rate", str(a.rate)])]:
                            out = f"{tmp}/{mode}-{load}-{rep}.json"
                            pid = gw.pid if gw and mode != "nat" else None
                            before = cpu_s(pid)
                            sh(*inns("c1", BIN, "load", "--target", target, "--protocol", "http", "--manifest",
                                     f"{tmp}/www", "-c", "64", *flags, "-d", f"{a.duration}s", "--warmup", "1s",
                                     "--cpu", "0", "--json", out))
                            after = cpu_s(pid)
                            r = json.load(open(out))
                            s = r["service_latency_us"]
                            done = r["requests"]["measured_completed"]
                            gcpu = None if before is None else after - before
                            per_req = "" if gcpu is None else round(gcpu / max(r["requests"]["completed"], 1) * 1e6, 2)
                            per_cpu = "" if not gcpu else round(r["requests"]["completed"] / gcpu)
                            w.writerow([rep, mode, load, done, sum(r["requests"]["errors"].values()),
                                        round(r["achieved_rate_per_s"], 1), round(r["throughput_mbit_s"], 1),
                                        round(s["p50"], 1), round(s["p99"], 1), round(s["mean"], 1),
                                        "" if gcpu is None else round(gcpu, 3), per_req, per_cpu])
                            sys.stdout.flush()
                    finally:
                        if gw:
                            stop(gw)
        finally:
            for p in procs:
                stop(p)


if __name__ == "__main__":
    main()
