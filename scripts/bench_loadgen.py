#!/usr/bin/env python3
"""Benchmarks of `connlab load` (issue 3), each measured side by side in one run.

  pacing  open loop at 20,000 req/s over 1,000 connections, ratio 1/4, against
          `connlab serve --engine epoll --cpu 1`; writer on CPU 0, reader on CPU 1:
          send_lag p50/p99/p99.9 and send_deviation stddev/max.
  scale   epoll server, 100 and 19,000 connections (ratio 1/16, 2,000 req/s), from one
          source address and from four: set-up rate, and user-space memory per
          connection on each side (peak RSS slope between the two sizes).
  locality  the locality paper's Table 3 shape: every engine at 400, 2,000 and 10,000
          connections, ratio 1, 2,000 req/s, 128 B / 10 KiB; server on CPU 1, client
          writer on CPU 0 and reader on CPU 1: service latency mean/median/stddev.

The cost per request against wrk is an experiment file now:
  connlab sweep experiments/peers-loadgen-vs-wrk.toml

Usage: scripts/bench_loadgen.py {pacing,scale,locality} [--reps N] [--duration S] > out.csv
Needs a release build (target/release/connlab).
"""
import argparse, csv, json, os, signal, subprocess, sys, tempfile, time

BIN = os.environ.get("CONNLAB", "target/release/connlab")


def serve(tmp, engine="epoll", cpu="1", extra=()):
    stats = os.path.join(tmp, f"serve-{time.time_ns()}.json")
    p = subprocess.Popen([BIN, "serve", "--engine", engine, "--listen", "127.0.0.1:0", "--cpu", cpu,
                          "--stats", stats, *extra], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    addr = p.stdout.readline().strip().split()[-1]
    return p, addr, stats


def stop(p, stats):
    p.send_signal(signal.SIGTERM)
    p.wait(timeout=30)
    with open(stats) as f:
        return json.load(f)


def load(args, tmp):
    out = os.path.join(tmp, f"load-{time.time_ns()}.json")
    timef = os.path.join(tmp, "time")
    subprocess.run(["/usr/bin/time", "-f", "%U %S", "-o", timef, BIN, "load", *args, "--json", out],
                   check=False, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    with open(out) as f:
        r = json.load(f)
    with open(timef) as f:
        u, s = map(float, f.read().split()[-2:])
    return r, u + s


def pacing(a, tmp, w):
    w.writerow(["part", "rep", "completed", "errors", "send_lag_p50_us", "send_lag_p99_us", "send_lag_p999_us",
                "send_lag_max_us", "send_deviation_stddev_us", "send_deviation_max_us", "service_p50_us",
                "service_p99_us", "writer_cpu", "reader_cpu"])
    for rep in range(a.reps):
        p, addr, stats = serve(tmp)
        r, _ = load(["--target", addr, "-c", "1000", "--active-ratio", "1/4", "--rate", "20000",
                     "-d", f"{a.duration}s", "--cpu", "0,1"], tmp)
        stop(p, stats)
        l, d, s = r["send_lag_us"], r["send_deviation_us"], r["service_latency_us"]
        w.writerow(["pacing", rep, r["requests"]["completed"], sum(r["requests"]["errors"].values()), l["p50"], l["p99"],
                    l["p999"], l["max"], round(d["stddev"], 2), round(d["max"], 1), s["p50"], s["p99"],
                    r["placement"]["writer_cpu"], r["placement"]["reader_cpu"]])
        sys.stdout.flush()


def scale(a, tmp, w):
    w.writerow(["part", "source_addrs", "connections", "established", "setup_s", "setup_rate_per_s",
                "client_max_rss_kib", "server_max_rss_kib", "errors"])
    for src in (["--source-addrs", "127.0.0.1"], ["--source-addrs", "127.0.0.2-127.0.0.5"]):
        rows = {}
        for n in (100, 19000):
            p, addr, stats = serve(tmp)
            r, _ = load(["--target", addr, "-c", str(n), "--active-ratio", "1/16", "--rate", "2000",
                         "-d", f"{a.duration}s", *src], tmp)
            s = stop(p, stats)
            c = r["connections"]
            rows[n] = (r["client_max_rss_kib"], s["max_rss_kib"])
            w.writerow(["scale", src[1], n, c["established"], round(c["setup_s"], 3), round(c["setup_rate_per_s"]),
                        r["client_max_rss_kib"], s["max_rss_kib"], sum(r["requests"]["errors"].values())])
            sys.stdout.flush()
        dn = 19000 - 100
        print(f"scale {src[1]}: bytes per connection: client {(rows[19000][0] - rows[100][0]) * 1024 / dn:.0f}, "
              f"server {(rows[19000][1] - rows[100][1]) * 1024 / dn:.0f}", file=sys.stderr)


def locality(a, tmp, w):
    w.writerow(["part", "rep", "engine", "connections", "established", "completed", "errors", "mean_us", "median_us",
                "stddev_us", "p99_us", "max_us", "send_lag_p99_us", "server_cpu_s", "server_max_rss_kib"])
    for rep in range(a.reps):
        for n in (400, 2000, 10000):
            for engine in ("processes", "threads", "select", "poll", "epoll"):
                p, addr, stats = serve(tmp, engine=engine)
                r, _ = load(["--target", addr, "-c", str(n), "--active-ratio", "1", "--rate", "2000",
                             "--request-size", "128", "--response-size", "10KiB", "-d", f"{a.duration}s",
                             "--cpu", "0,1"], tmp)
                s = stop(p, stats)
                l = r["service_latency_us"]
                w.writerow(["locality", rep, engine, n, r["connections"]["established"], r["requests"]["completed"],
                            sum(r["requests"]["errors"].values()), round(l["mean"], 1), l["p50"],
                            round(l["stddev"], 1), l["p99"], l["max"], r["send_lag_us"]["p99"],
                            round(s["cpu_user_s"] + s["cpu_sys_s"], 2), s["max_rss_kib"]])
                print(f"locality {engine} {n}: mean {l['mean']:.0f} us, median {l['p50']} us, "
                      f"stddev {l['stddev']:.0f} us", file=sys.stderr)
                sys.stdout.flush()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("part", choices=["pacing", "scale", "locality"])
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--duration", type=int, default=10)
    a = ap.parse_args()
    w = csv.writer(sys.stdout, lineterminator="\n")
    with tempfile.TemporaryDirectory(prefix="connlab-bench-") as tmp:
        os.chmod(tmp, 0o755)
        {"pacing": pacing, "scale": scale, "locality": locality}[a.part](a, tmp, w)


if __name__ == "__main__":
    main()
