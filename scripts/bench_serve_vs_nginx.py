#!/usr/bin/env python3
"""Side-by-side: `wrk -t1 -c100` against `connlab serve --protocol http` (each engine)
and against nginx (one worker, access log off) serving bodies of the same size.

Servers are pinned to CPU 1 and wrk to CPU 0, so each side has a core. nginx serves a static
file with open_file_cache ("nginx") and, for bodies that fit a config token, from a
`return 200 "..."` directive ("nginx-return", its cheapest path). Server CPU is
read from the kernel: /proc/<worker>/stat for nginx, getrusage (children included)
through connlab's --stats JSON. Prints one CSV row per run to stdout (tidy, pandas
ready) and a summary of medians and ratios to stderr.

Usage: scripts/bench_serve_vs_nginx.py [--duration 10] [--reps 3] [--bodies 128,10240]
       [--engines epoll,poll,select,threads,processes] [--connlab target/release/connlab]
Needs: nginx and wrk (apt-get install nginx-light wrk), a release build of connlab.
"""
import argparse, csv, json, os, re, shutil, signal, socket, statistics, subprocess, sys, tempfile, time

CLK_TCK = os.sysconf("SC_CLK_TCK")


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def proc_cpu_s(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK  # utime, stime


def run_wrk(url, duration, conns):
    out = subprocess.run(
        ["taskset", "-c", "0", "wrk", "-t1", f"-c{conns}", f"-d{duration}s", url],
        capture_output=True, text=True, check=True,
    ).stdout
    n = int(re.search(r"(\d+) requests in", out).group(1))
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
    errs = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    sock = re.search(r"Socket errors: (.*)", out)
    return n, rps, (int(errs.group(1)) if errs else 0), (sock.group(1) if sock else "")


def wait_port(port, deadline=10):
    end = time.time() + deadline
    while time.time() < end:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"nothing listens on port {port}")


def bench_nginx(tmp, body, duration, conns, use_return):
    www = os.path.join(tmp, "www", "bytes")
    os.makedirs(www, exist_ok=True)
    with open(os.path.join(www, str(body)), "wb") as f:
        f.write(b"x" * body)
    port = free_port()
    # `return` is nginx's cheapest path (no file at all); its body must fit one config token.
    location = f'location = /bytes/{body} {{ return 200 "{"x" * body}"; }}' if use_return else ""
    conf = os.path.join(tmp, "nginx.conf")
    with open(conf, "w") as f:
        f.write(f"""
worker_processes 1; daemon off; pid {tmp}/nginx.pid; error_log {tmp}/error.log;
worker_cpu_affinity 10;
events {{ worker_connections 4096; }}
http {{
  access_log off; keepalive_requests 1000000; sendfile on;
  default_type application/octet-stream;
  client_body_temp_path {tmp}/body; proxy_temp_path {tmp}/proxy; fastcgi_temp_path {tmp}/fcgi;
  uwsgi_temp_path {tmp}/uwsgi; scgi_temp_path {tmp}/scgi;
  open_file_cache max=1000 inactive=600s; open_file_cache_valid 3600s;
  server {{ listen 127.0.0.1:{port}; root {tmp}/www; location / {{ }} {location} }}
}}
""")
    master = subprocess.Popen(["nginx", "-c", conf, "-p", tmp], stderr=subprocess.DEVNULL)
    try:
        wait_port(port)
        worker = int(subprocess.run(["pgrep", "-P", str(master.pid)], capture_output=True,
                                    text=True).stdout.split()[0])
        before = proc_cpu_s(worker)
        n, rps, non2xx, sockerr = run_wrk(f"http://127.0.0.1:{port}/bytes/{body}", duration, conns)
        cpu = proc_cpu_s(worker) - before
    finally:
        master.send_signal(signal.SIGQUIT)
        master.wait(timeout=10)
    return dict(requests=n, requests_per_s=rps, server_cpu_s=cpu, non_2xx=non2xx, socket_errors=sockerr)


def bench_connlab(binary, tmp, engine, body, duration, conns):
    stats = os.path.join(tmp, f"stats-{engine}.json")
    args = [binary, "serve", "--protocol", "http", "--listen", "127.0.0.1:0", "--cpu", "1",
            "--stats", stats]
    if engine == "epoll-et":
        args += ["--engine", "epoll", "--edge-triggered"]
    else:
        args += ["--engine", engine]
    srv = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        line = srv.stdout.readline()
        port = int(line.strip().rsplit(":", 1)[1])
        n, rps, non2xx, sockerr = run_wrk(f"http://127.0.0.1:{port}/bytes/{body}", duration, conns)
    finally:
        srv.send_signal(signal.SIGTERM)
        srv.wait(timeout=30)
    with open(stats) as f:
        s = json.load(f)
    return dict(requests=n, requests_per_s=rps, server_cpu_s=s["cpu_user_s"] + s["cpu_sys_s"],
                non_2xx=non2xx, socket_errors=sockerr)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--duration", type=int, default=10)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--connections", type=int, default=100)
    ap.add_argument("--bodies", default="128,10240")
    ap.add_argument("--engines", default="epoll,epoll-et,poll,select,threads,processes")
    ap.add_argument("--connlab", default="target/release/connlab")
    a = ap.parse_args()
    for tool in ("nginx", "wrk", "taskset"):
        if not shutil.which(tool):
            sys.exit(f"{tool} not found: apt-get install nginx-light wrk util-linux")
    rows = []
    w = csv.DictWriter(sys.stdout, lineterminator="\n", fieldnames=["peer", "engine", "body_bytes", "rep", "requests",
                                                "requests_per_s", "server_cpu_s", "requests_per_cpu_s",
                                                "non_2xx", "socket_errors"])
    w.writeheader()
    with tempfile.TemporaryDirectory(prefix="connlab-bench-") as tmp:
        os.chmod(tmp, 0o755)  # nginx's worker runs unprivileged and must read the files
        for rep in range(a.reps):
            for body in [int(b) for b in a.bodies.split(",")]:
                runs = [("nginx", "nginx")] + ([("nginx", "nginx-return")] if body <= 2048 else [])
                runs += [("connlab", e) for e in a.engines.split(",")]
                for peer, engine in runs:
                    if peer == "nginx":
                        r = bench_nginx(tmp, body, a.duration, a.connections, engine == "nginx-return")
                    else:
                        r = bench_connlab(a.connlab, tmp, engine, body, a.duration, a.connections)
                    r.update(peer=peer, engine=engine, body_bytes=body, rep=rep,
                             requests_per_cpu_s=round(r["requests"] / r["server_cpu_s"]) if r["server_cpu_s"] else 0)
                    if r["non_2xx"] or r["socket_errors"]:
                        sys.exit(f"{engine} body {body}: {r['non_2xx']} non-2xx responses, socket errors "
                                 f"{r['socket_errors']!r}: the comparison would be meaningless")
                    w.writerow(r)
                    sys.stdout.flush()
                    rows.append(r)
                    print(f"rep {rep} body {body} {engine}: {r['requests_per_s']:.0f} req/s, "
                          f"{r['requests_per_cpu_s']} req/cpu-s", file=sys.stderr)
    print("\nmedians; ratios are requests per server CPU second over nginx's (static file, and return):",
          file=sys.stderr)
    med = lambda sel, key: statistics.median(r[key] for r in sel)
    for body in sorted({r["body_bytes"] for r in rows}):
        at = [r for r in rows if r["body_bytes"] == body]
        bases = {e: med([r for r in at if r["engine"] == e], "requests_per_cpu_s")
                 for e in ("nginx", "nginx-return") if any(r["engine"] == e for r in at)}
        for engine in ["nginx", "nginx-return"] + a.engines.split(","):
            sel = [r for r in at if r["engine"] == engine]
            if not sel:
                continue
            rpc = med(sel, "requests_per_cpu_s")
            ratios = "  ".join(f"x{rpc / b:.2f} vs {e}" for e, b in bases.items())
            print(f"  body {body:>6} {engine:<13} {med(sel, 'requests_per_s'):>9.0f} req/s "
                  f"{rpc:>9.0f} req/cpu-s  {ratios}", file=sys.stderr)

if __name__ == "__main__":
    main()
