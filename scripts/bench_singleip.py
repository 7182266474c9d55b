#!/usr/bin/env python3
"""The single-IP front end (SAPS, issue 8 part 5) against nftables NAT and HAProxy.

Usage (root): scripts/bench_singleip.py [--quick] [--reps N] [--out DIR] > singleip.csv

Topology (network namespaces made here, removed at the end even on error or Ctrl-C):

  clients c0 c1 c2 -- router (connlab linkem run: 1 ms each way) -- front 198.18.2.1
      -- bridge -- nodes n0 n1 (each: a small Python bulk/echo server on :8080)

Systems on the front host (the cluster address 198.18.2.1:80):
  io16k    connlab singleip io-server --send-limit 16KiB (the defaults: send buffers
           sized by rate share), app-node on each node host forwarding to its local
           server (127.0.0.1:8080); the io-server's --stats JSON is kept per run
  iooff    the same with --send-limit off (the paper's unlimited case)
  io16k-4x    --send-limit 16KiB with --send-buffer 4x (fixed 64 KiB, the default
           before rate-share sizing); only with --systems
  io16k-auto  --send-limit 16KiB with --send-buffer auto (kernel-sized send buffer);
           only with --systems
  io16k-h1.5  --send-buffer share:1.5 (rate-share headroom 1.5 instead of 2); only
           with --systems
  nat      connlab gateway --mode nat (nftables DNAT, round robin) to the node servers
  haproxy  HAProxy 'mode tcp', nbthread 1, round robin to the node servers (part d)

Experiments (each repeated --reps times; systems alternate within a repetition):
  a  4-byte round trips on one connection (median, p99), link unlimited, 2 ms RTT
  b  one transfer at a time of 1 KB .. 100 MB: completion time (connect to last byte)
     and Mbit/s, link unlimited, 2 ms RTT
  c  two 100 MB background streams (c1, c2) and, 3 s later, a 100 KB or a 100 MB
     foreground transfer (c0) over a --rate (default 100mbit) link with a 1000-packet
     emulator queue, per-segment (no offload): foreground completion, per-stream
     Mbit/s in 100 ms bins (client side), Jain's index of the three 100 MB streams
     while all three run, the emulator's queueing delay, and the packet timeline
     (time vs TCP sequence from linkem's log). --bottleneck front moves the rate
     limit and its queue onto the front host's own egress (tbf), the paper's
     interface queue.
  d  100 MB bulk through io16k, iooff, haproxy (and nat) over the unlimited link:
     Mbit/s and CPU seconds per GB of the front process (io-server, haproxy) and of
     the app-nodes, read from /proc/PID/stat

CPU placement (2 vCPUs): linkem and the clients on CPU 0; the front process, the
app-nodes and the node servers on CPU 1; RPS steers the front host's receive
processing to CPU 1 (so NAT forwarding runs there too).

Prints tidy CSV on stdout (exp,rep,system,param,metric,value); writes per-run bins,
timelines and a summary (median, min, max over repetitions) to --out.
Needs root, /dev/net/tun, nft, haproxy, taskset and a release build.
"""
import argparse, csv, json, os, shutil, signal, socket, socketserver, struct, sys, tempfile, threading, time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from silab import BIN, Lab, Procs, SetupError, cpu_s, haproxy_tcp_cfg, jain, median, pct, sh  # noqa: E402

PORT = 80
SERVER_PORT = 8080
NODE_PORT = 7000
MB = 1000 * 1000


# ---------------------------------------------------------------- roles inside namespaces

def role_server(a):
    """Op 'E': echo until EOF. Op 'G' + u64 N: send N bytes, half-close, wait for EOF."""
    chunk = memoryview(bytearray(4 << 20))

    class H(socketserver.BaseRequestHandler):
        def handle(self):
            s = self.request
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            op = s.recv(1)
            if op == b"E":
                while True:
                    d = s.recv(65536)
                    if not d:
                        return
                    s.sendall(d)
            elif op == b"G":
                hdr = b""
                while len(hdr) < 8:
                    d = s.recv(8 - len(hdr))
                    if not d:
                        return
                    hdr += d
                left = struct.unpack(">Q", hdr)[0]
                try:
                    while left:
                        n = min(left, len(chunk))
                        s.sendall(chunk[:n])
                        left -= n
                    s.shutdown(socket.SHUT_WR)
                    while s.recv(65536):
                        pass
                except OSError:
                    pass

    class S(socketserver.ThreadingTCPServer):
        allow_reuse_address = True
        daemon_threads = True
        request_queue_size = 128

    srv = S(("0.0.0.0", a.port), H)
    print("server ready", flush=True)
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    try:
        srv.serve_forever()
    except KeyboardInterrupt:
        pass


def get(target, size, epoch=None, bin_s=0.1, stop_at=None):
    """One transfer of `size` bytes; times in wall-clock seconds."""
    buf = bytearray(1 << 20)
    t0 = time.time()
    s = socket.create_connection(target, timeout=60)
    t_conn = time.time()
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    s.sendall(b"G" + struct.pack(">Q", size))
    got, first, last, bins = 0, None, None, {}
    if stop_at:
        s.settimeout(0.1)
    while got < size:
        if stop_at and time.time() > stop_at:
            break
        try:
            n = s.recv_into(buf)
        except socket.timeout:
            continue
        if n == 0:
            break
        now = time.time()
        if first is None:
            first = now
        last = now
        got += n
        if epoch is not None:
            b = int((now - epoch) / bin_s)
            bins[b] = bins.get(b, 0) + n
    s.close()
    return {"size": size, "got": got, "t0": t0, "t_conn": t_conn, "t_first": first, "t_last": last,
            "bins": bins}


def role_client(a):
    target = (a.target, PORT)
    if a.start_at:
        time.sleep(max(0.0, a.start_at - time.time()))
    if a.op == "rtt":
        s = socket.create_connection(target, timeout=30)
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        s.sendall(b"E")
        msg, lat = b"ping", []
        for i in range(a.count + 50):
            t = time.perf_counter_ns()
            s.sendall(msg)
            got = b""
            while len(got) < 4:
                d = s.recv(4 - len(got))
                if not d:
                    sys.exit("echo connection closed")
                got += d
            if i >= 50:
                lat.append((time.perf_counter_ns() - t) / 1000)
        s.close()
        print(json.dumps({"rtt_us": lat}))
    elif a.op == "sizes":
        res = []
        for spec in a.sizes.split(","):
            size, count = (int(x) for x in spec.split("x"))
            for _ in range(count):
                r = get(target, size)
                r.pop("bins")
                res.append(r)
        print(json.dumps(res))
    elif a.op == "get":
        r = get(target, a.size, epoch=a.epoch, stop_at=a.stop_at)
        print(json.dumps(r))


# ---------------------------------------------------------------- orchestration

SYSTEMS_AB = ["io16k", "iooff", "nat", "haproxy"]
SYSTEMS_C = ["io16k", "iooff", "nat"]
# The I/O server's variants: --send-limit, --send-buffer.
IO_SERVERS = {"io16k": ("16KiB", []), "iooff": ("off", []), "io16k-4x": ("16KiB", ["--send-buffer", "4x"]),
              "io16k-auto": ("16KiB", ["--send-buffer", "auto"]),
              "io16k-h1.5": ("16KiB", ["--send-buffer", "share:1.5"])}


class Bench:
    def __init__(self, a, lab, procs, tmp, out, w):
        self.a, self.lab, self.procs, self.tmp, self.out, self.w = a, lab, procs, tmp, out, w
        self.rows = []
        self.py = shutil.which("python3")
        self.me = os.path.abspath(__file__)
        self.key = f"{tmp}/cluster.key"
        open(self.key, "wb").write(os.urandom(32))
        os.chmod(self.key, 0o600)

    def row(self, exp, rep, system, param, metric, value):
        v = round(value, 6) if isinstance(value, float) else value
        self.rows.append((exp, rep, system, param, metric, value))
        self.w.writerow([exp, rep, system, param, metric, v])
        sys.stdout.flush()

    def log(self, msg):
        print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)

    # --- the link emulator
    def linkem(self, rate=None, log=None, offload=True):
        cmd = self.lab.inns("router", "taskset", "-c", "0", BIN, "linkem", "run", "--left", "brl",
                            "--right", "brr", "--delay", "1ms")
        if rate:
            cmd += ["--rate", rate, "--queue", str(self.a.queue)]
        if not offload:
            cmd += ["--no-offload"]
        if log:
            cmd += ["--log", log]
        return self.procs.start("linkem", cmd, ready="forwarding")

    # --- front ends
    def start_system(self, system):
        lab, started = self.lab, []
        vip = f"{lab.VIP}:{PORT}"
        if system in IO_SERVERS:
            limit, extra = IO_SERVERS[system]
            self.runs = getattr(self, "runs", 0) + 1
            stats = f"{self.out}/io-server-stats/{self.runs:03d}-{system}.json"
            os.makedirs(os.path.dirname(stats), exist_ok=True)
            p = self.procs.start(system, lab.inns("front", "taskset", "-c", "1", BIN, "singleip", "io-server",
                                                  "--listen", vip, "--nodes", f"{lab.FRONT_NODE_SIDE}:{NODE_PORT}",
                                                  "--key", self.key, "--send-limit", limit, "--stats", stats,
                                                  *extra),
                                 ready="io-server ready")
            started.append(p)
            for j, n in enumerate(lab.nodes):
                started.append(self.procs.start(
                    f"app-node{j}", lab.inns(n, "taskset", "-c", "1", BIN, "singleip", "app-node", "--io-server",
                                             f"{lab.FRONT_NODE_SIDE}:{NODE_PORT}", "--key", self.key, "--forward",
                                             f"127.0.0.1:{SERVER_PORT}", "--port", str(PORT), "--node-id", str(j)),
                    ready="app-node ready"))
        elif system == "nat":
            cmd = lab.inns("front", BIN, "gateway", "--mode", "nat", "--listen", vip, "--policy", "round-robin")
            for j in range(len(lab.nodes)):
                cmd += ["--backend", f"{lab.naddr(j)}:{SERVER_PORT}"]
            started.append(self.procs.start("nat", cmd, ready="gateway: nat mode"))
        elif system == "haproxy":
            cfg = haproxy_tcp_cfg(f"{self.tmp}/haproxy.cfg", vip,
                                  [f"{lab.naddr(j)}:{SERVER_PORT}" for j in range(len(lab.nodes))])
            p = self.procs.start("haproxy", lab.inns("front", "taskset", "-c", "1", "haproxy", "-db", "-f", cfg))
            time.sleep(1.0)
            if p.poll() is not None:
                raise SetupError(f"haproxy exited: {open(p.base + '.err').read()}")
            started.append(p)
        return started

    def stop_system(self, started):
        for p in reversed(started):
            self.procs.stop(p)

    def client(self, i, *args, wait=True):
        cmd = self.lab.inns(self.lab.clients[i], "taskset", "-c", "0", self.py, self.me, "--role", "client",
                            "--target", self.lab.VIP, *args)
        p = self.procs.start(f"client{i}", cmd)
        if not wait:
            return p
        return self.finish(p)

    def finish(self, p, timeout=300):
        try:
            p.wait(timeout=timeout)
        except Exception:
            self.procs.stop(p, timeout=2)
            raise SetupError(f"{p.name} did not finish in {timeout} s")
        self.procs.live.remove(p)
        if p.returncode != 0:
            raise SetupError(f"{p.name} failed: {open(p.base + '.err').read()[-2000:]}")
        return json.loads(open(p.base + ".out").read())

    # --- (a), (b), (d) on the unlimited link
    def phase_ab(self, rep, system):
        a = self.a
        started = self.start_system(system)
        try:
            time.sleep(0.3)
            r = self.client(0, "--op", "rtt", "--count", str(a.rtt_count))
            lat = r["rtt_us"]
            for m, v in [("rtt_p50_us", median(lat)), ("rtt_p99_us", pct(lat, 99)),
                         ("rtt_mean_us", sum(lat) / len(lat))]:
                self.row("a", rep, system, "4B", m, v)
            res = self.client(0, "--op", "sizes", "--sizes", a.sizes)
            by = {}
            for t in res:
                by.setdefault(t["size"], []).append(t)
            for size, ts in sorted(by.items()):
                done = [x["t_last"] - x["t0"] for x in ts if x["got"] == size]
                self.row("b", rep, system, size, "completion_ms", median(done) * 1e3)
                self.row("b", rep, system, size, "mbit_s", size * 8 / median(done) / 1e6)
                self.row("b", rep, system, size, "transfers", len(done))
            # (d): bulk with CPU accounting of the front process and the app-nodes
            front = [p for p in started if (p.name in IO_SERVERS or p.name == "haproxy")]
            nodes = [p for p in started if p.name.startswith("app-node")]
            c0 = [cpu_s(p.pid) for p in front]
            n0 = [cpu_s(p.pid) for p in nodes]
            t0 = time.time()
            res = self.client(0, "--op", "sizes", "--sizes", f"{a.bulk}x{a.bulk_count}")
            el = time.time() - t0
            gb = sum(x["got"] for x in res) / 1e9
            rates = [x["size"] * 8 / (x["t_last"] - x["t0"]) / 1e6 for x in res]
            self.row("d", rep, system, a.bulk, "mbit_s", median(rates))
            if front:
                self.row("d", rep, system, a.bulk, "front_cpu_s_per_gb",
                         (sum(cpu_s(p.pid) for p in front) - sum(c0)) / gb)
                self.row("d", rep, system, a.bulk, "front_cpu_util", (sum(cpu_s(p.pid) for p in front) - sum(c0)) / el)
            if nodes:
                self.row("d", rep, system, a.bulk, "appnode_cpu_s_per_gb",
                         (sum(cpu_s(p.pid) for p in nodes) - sum(n0)) / gb)
        finally:
            self.stop_system(started)

    # --- (c) on the rate-limited link
    def phase_c(self, rep, system, fg):
        a, lab = self.a, self.lab
        tag = f"c-{system}-fg{fg // 1000}k-rep{rep}"
        logf = f"{self.tmp}/{tag}.pkts.csv"
        started = self.start_system(system)
        lk = None
        try:
            if a.bottleneck == "front":
                # The paper's interface queue: the rate limit on the front host's own
                # egress (tbf, --queue full-size packets of backlog), the emulator only delays.
                sh(*lab.inns("front", "tc", "qdisc", "replace", "dev", "eth0", "root", "tbf", "rate", a.rate,
                             "burst", "32kb", "limit", str(a.queue * 1514)))
                lk = self.linkem(log=logf, offload=False)
            else:
                lk = self.linkem(rate=a.rate, log=logf, offload=False)
            time.sleep(0.3)
            epoch = time.time() + 1.0
            # The 100 KB case: the background stops 4 s after the foreground started.
            bg_stop = None if fg >= a.bg else epoch + a.fg_delay + 4.0
            bgs = []
            for i in (1, 2):
                args = ["--op", "get", "--size", str(a.bg), "--start-at", str(epoch), "--epoch", str(epoch)]
                if bg_stop:
                    args += ["--stop-at", str(bg_stop)]
                bgs.append(self.client(i, *args, wait=False))
            fgp = self.client(0, "--op", "get", "--size", str(fg), "--start-at", str(epoch + a.fg_delay),
                              "--epoch", str(epoch), wait=False)
            if rep == 1:
                time.sleep(max(0, epoch + a.fg_delay + 0.05 - time.time()))
                host = "front" if system != "nat" else lab.nodes[0]
                ss = sh(*lab.inns(host, "ss", "-tinm", "state", "established"), check=False).stdout
                ss += sh(*lab.inns("front", "tc", "-s", "qdisc", "show", "dev", "eth0"), check=False).stdout
                open(f"{self.out}/{tag}.ss.txt", "w").write(ss)
            f = self.finish(fgp)
            b = [self.finish(p) for p in bgs]
        finally:
            if lk:
                self.procs.stop(lk)
            self.stop_system(started)
            if a.bottleneck == "front":
                sh(*lab.inns("front", "tc", "qdisc", "del", "dev", "eth0", "root"), check=False)
        streams = {"fg": f, "bg1": b[0], "bg2": b[1]}
        fct = f["t_last"] - f["t0"] if f["got"] == fg else float("nan")
        self.row("c", rep, system, fg, "fg_completion_ms", fct * 1e3)
        self.row("c", rep, system, fg, "fg_connect_ms", (f["t_conn"] - f["t0"]) * 1e3)
        # Per-stream Mbit/s in 100 ms bins, from the client side.
        with open(f"{self.out}/{tag}.bins.csv", "w", newline="") as fh:
            bw = csv.writer(fh)
            bw.writerow(["t_s", "stream", "mbit_s"])
            for name, r in streams.items():
                for k, v in sorted(r["bins"].items(), key=lambda kv: int(kv[0])):
                    bw.writerow([round(int(k) * 0.1, 1), name, round(v * 8 / 0.1 / 1e6, 3)])
        # Jain's index over the whole 100 ms bins during which every 100 MB stream ran.
        big = [r for r in streams.values() if r["size"] >= a.bg]
        lo = max(r["t0"] for r in big) - epoch
        hi = min(r["t_last"] for r in big) - epoch
        k0, k1 = int(lo / 0.1) + 1, int(hi / 0.1)  # whole bins strictly inside
        if k1 > k0:
            tot = [sum(r["bins"].get(str(k), 0) for k in range(k0, k1)) for r in big]
            self.row("c", rep, system, fg, f"jain_{len(big)}x100MB", jain(tot))
            for name, r, t in zip([n for n, r in streams.items() if r["size"] >= a.bg], big, tot):
                self.row("c", rep, system, fg, f"mbit_s_{name}_overlap", t * 8 / ((k1 - k0) * 0.1) / 1e6)
            self.row("c", rep, system, fg, "overlap_s", (k1 - k0) * 0.1)
            binj = []
            for k in range(k0, k1):
                xs = [r["bins"].get(str(k), 0) for r in big]
                if sum(xs):
                    binj.append(jain(xs))
            self.row("c", rep, system, fg, "jain_100ms_median", median(binj))
        for name, r in streams.items():
            if r["size"] >= a.bg and r["got"] == r["size"]:
                self.row("c", rep, system, fg, f"completion_s_{name}", r["t_last"] - r["t0"])
        self.bg1_t0 = b[0]["t0"]
        self.parse_log(logf, tag, rep, system, fg, epoch, f)
        os.unlink(logf)

    def parse_log(self, logf, tag, rep, system, fg, epoch, f):
        """Queueing delay at the emulator and the time/sequence timeline, right to left."""
        lab = self.lab
        name = {lab.caddr(0): "fg", lab.caddr(1): "bg1", lab.caddr(2): "bg2"}
        base, first_seq, qd_all, qd_fg, drops = None, {}, [], [], {}
        fg_lo, fg_hi = f["t0"] - epoch, (f["t_last"] or f["t0"]) - epoch
        # linkem's times are ns since it started; the timeline is shifted so that the
        # first SYN of background stream 1 (left to right) is at that client's connect
        # time relative to the clients' epoch (one clock; error ~ the client's wake-up).
        syn_ns, timeline, count = None, [], {}
        with open(logf) as fh:
            hdr = fh.readline().strip().split(",")
            ix = {h: i for i, h in enumerate(hdr)}
            for line in fh:
                c = line.rstrip("\n").split(",")
                if c[ix["protocol"]] != "6":
                    continue
                if c[ix["direction"]] != "rl":
                    if syn_ns is None and c[ix["src"]] == lab.caddr(1) and "S" in c[ix["flags"]]:
                        syn_ns = int(c[ix["arrival_ns"]])
                    continue
                dst = c[ix["dst"]]
                s = name.get(dst)
                if s is None:
                    continue
                arr = int(c[ix["arrival_ns"]])
                fate = c[ix["fate"]]
                plen = int(c[ix["payload_len"]] or 0)
                seq = int(c[ix["seq"]] or 0)
                if s not in first_seq:
                    first_seq[s] = seq
                rel = (seq - first_seq[s]) % (1 << 32)
                if fate != "sent":
                    drops[s] = drops.get(s, 0) + 1
                elif plen:
                    q = (int(c[ix["departure_ns"]]) - arr) / 1e6 - 1.0
                    qd_all.append(q)
                    if s == "fg":
                        qd_fg.append(q)
                count[s] = count.get(s, 0) + 1
                # Timeline: every packet of the foreground, every 20th of the rest, all drops.
                if plen and (s == "fg" and fg < self.a.bg or count[s] % 20 == 1 or fate != "sent"):
                    timeline.append((arr, s, rel, plen, fate))
        off = (syn_ns or 0) / 1e9 - (self.bg1_t0 - epoch)
        with open(f"{self.out}/{tag}.timeline.csv", "w", newline="") as out:
            tw = csv.writer(out)
            tw.writerow(["t_s", "stream", "seq_rel", "payload_len", "fate"])
            for arr, s, rel, plen, fate in timeline:
                tw.writerow([round(arr / 1e9 - off, 6), s, rel, plen, fate])
        self.row("c", rep, system, fg, "emu_queue_ms_median", median(qd_all))
        self.row("c", rep, system, fg, "emu_queue_ms_p95", pct(qd_all, 95))
        self.row("c", rep, system, fg, "emu_queue_ms_fg_median", median(qd_fg))
        self.row("c", rep, system, fg, "emu_drops", sum(drops.values()))


def summarise(rows, path):
    groups = {}
    for exp, rep, system, param, metric, value in rows:
        if isinstance(value, (int, float)):
            groups.setdefault((exp, system, param, metric), []).append(value)
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["exp", "system", "param", "metric", "n", "median", "min", "max"])
        for (exp, system, param, metric), vs in sorted(groups.items(), key=lambda kv: tuple(map(str, kv[0]))):
            vs = [v for v in vs if v == v]
            if vs:
                w.writerow([exp, system, param, metric, len(vs), round(median(vs), 4), round(min(vs), 4),
                            round(max(vs), 4)])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0], epilog=__doc__.split("\n", 2)[2],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="one repetition, smaller sizes (a smoke test, ~2 min)")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--exps", default="ab,c", help="phases to run: ab (a, b and d), c")
    ap.add_argument("--out", default=None, help="directory for bins, timelines and summary.csv")
    ap.add_argument("--rate", default="100mbit", help="bottleneck rate of the emulated link in (c)")
    ap.add_argument("--queue", type=int, default=1000, help="bottleneck queue in (c), packets")
    ap.add_argument("--bottleneck", choices=["emulator", "front"], default="emulator",
                    help="(c): rate limit in the emulator (router queue), or tbf on the front host's egress "
                         "(the I/O server's own interface queue, where TCP small queues apply to its sockets)")
    ap.add_argument("--cc", default="reno", help="TCP congestion control in every namespace (reno or bbr: only' tcp_allowed_congestion_control' may be set in a namespace; cubic is not allowed here)")
    ap.add_argument("--nodes", type=int, default=2)
    ap.add_argument("--systems", default=None, help="comma-separated subset of io16k, iooff, nat, haproxy, io16k-4x (16 KiB limit, --send-buffer 4x), "
                    "io16k-auto (16 KiB limit, --send-buffer auto), io16k-h1.5 (--send-buffer share:1.5)")
    ap.add_argument("--fg", default=None, help="(c) foreground sizes in bytes, comma-separated (default 100 KB and "
                    "the background size)")
    ap.add_argument("--fg-delay", type=float, default=3.0, help="seconds between background and foreground start")
    # roles (internal)
    ap.add_argument("--role", choices=["server", "client"], help=argparse.SUPPRESS)
    ap.add_argument("--port", type=int, default=SERVER_PORT, help=argparse.SUPPRESS)
    ap.add_argument("--target", help=argparse.SUPPRESS)
    ap.add_argument("--op", help=argparse.SUPPRESS)
    ap.add_argument("--count", type=int, default=1000, help=argparse.SUPPRESS)
    ap.add_argument("--sizes", help=argparse.SUPPRESS)
    ap.add_argument("--size", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--start-at", type=float, help=argparse.SUPPRESS)
    ap.add_argument("--stop-at", type=float, help=argparse.SUPPRESS)
    ap.add_argument("--epoch", type=float, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.role == "server":
        return role_server(a)
    if a.role == "client":
        return role_client(a)

    if os.geteuid() != 0:
        sys.exit("bench_singleip: needs root (network namespaces, TUN, nftables)")
    missing = [t for t in ("ip", "nft", "haproxy", "taskset", "ss") if not shutil.which(t)]
    if missing:
        sys.exit(f"bench_singleip: missing tools: {', '.join(missing)} (apt-get install iproute2 nftables haproxy)")
    if not os.path.exists(BIN):
        sys.exit(f"bench_singleip: {BIN} not found: cargo build --release -p connlab")
    if not os.path.exists("/dev/net/tun"):
        sys.exit("bench_singleip: /dev/net/tun missing")
    if a.quick:
        a.reps = 1
    a.rtt_count = 300 if a.quick else 1000
    a.sizes = ("1000x5,100000x5,10000000x2" if a.quick else
               "1000x10,10000x10,100000x10,1000000x5,10000000x3,100000000x2")
    a.bulk, a.bulk_count = (20 * MB, 2) if a.quick else (100 * MB, 3)
    a.bg = 20 * MB if a.quick else 100 * MB
    if a.quick:
        a.fg_delay = min(a.fg_delay, 1.0)
    fgs = [int(x) for x in a.fg.split(",")] if a.fg else [100 * 1000, a.bg]
    systems = a.systems.split(",") if a.systems else None
    known = SYSTEMS_AB + ["io16k-4x", "io16k-auto", "io16k-h1.5"]
    if systems and any(x not in known for x in systems):
        sys.exit(f"--systems: choose from {', '.join(known)}")
    out = a.out or tempfile.mkdtemp(prefix="connlab-singleip-")
    os.makedirs(out, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix="connlab-si-")
    w = csv.writer(sys.stdout)
    w.writerow(["exp", "rep", "system", "param", "metric", "value"])

    def on_term(*_):
        raise KeyboardInterrupt

    # Also SIGINT: a shell starts background jobs with SIGINT ignored, which Python keeps.
    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)
    procs = Procs(tmp)
    lab = Lab(clients=3, nodes=a.nodes)
    rc = 0
    try:
        with lab:
            for h in lab.ns:
                lab.sysctl(h, "net.ipv4.tcp_congestion_control", a.cc)
            lab.rps("front", "eth0", 2)
            lab.rps("front", "eth1", 2)
            b = Bench(a, lab, procs, tmp, out, w)
            env = {"uptime": open("/proc/loadavg").read().strip(), "kernel": os.uname().release, "cc": a.cc,
                   "bottleneck_c": a.bottleneck, "binary": BIN,
                   "rate_c": a.rate, "queue_c": a.queue, "nodes": a.nodes, "reps": a.reps, "quick": a.quick,
                   "placement": "linkem+clients CPU0; io-server/haproxy, app-nodes, node servers CPU1; "
                                "RPS front eth0/eth1 -> CPU1",
                   "start": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
            b.log(f"environment: {env}")
            for j, n in enumerate(lab.nodes):
                procs.start(f"server{j}", lab.inns(n, "taskset", "-c", "1", b.py, b.me, "--role", "server",
                                                   "--port", str(SERVER_PORT)), ready="server ready")
            if "ab" in a.exps:
                lk = b.linkem()
                for rep in range(1, a.reps + 1):
                    for system in (systems or SYSTEMS_AB):
                        b.log(f"a/b/d rep {rep} {system}")
                        b.phase_ab(rep, system)
                procs.stop(lk)
            if "c" in a.exps:
                for rep in range(1, a.reps + 1):
                    for system in [s for s in (systems or SYSTEMS_C) if s != "haproxy"]:
                        for fg in fgs:
                            b.log(f"c rep {rep} {system} fg {fg}")
                            b.phase_c(rep, system, fg)
            env["end"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
            env["uptime_end"] = open("/proc/loadavg").read().strip()
            json.dump(env, open(f"{out}/environment.json", "w"), indent=1)
            summarise(b.rows, f"{out}/summary.csv")
            b.log(f"results in {out}")
    except SetupError as e:
        print(f"bench_singleip: {e}", file=sys.stderr)
        rc = 1
        keep = f"{out}/failed-run-logs"
        shutil.copytree(tmp, keep, ignore=shutil.ignore_patterns("*.pkts.csv"), dirs_exist_ok=True)
        print(f"bench_singleip: process logs kept in {keep}", file=sys.stderr)
    except KeyboardInterrupt:
        print("bench_singleip: interrupted; cleaning up", file=sys.stderr)
        rc = 130
    finally:
        procs.stop_all()
        lab.__exit__()
        shutil.rmtree(tmp, ignore_errors=True)
    return rc


if __name__ == "__main__":
    sys.exit(main() or 0)
