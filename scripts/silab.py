"""Topology and processes of the single-IP (SAPS) experiments (scripts/bench_singleip.py).

    c0..cK-1 (198.18.1.1..)            left hosts: clients
        |  bridge brl 198.18.1.254
    router   connlab linkem run --left brl --right brr (delay, rate, per-packet log)
        |  bridge brr 198.18.2.254
    front 198.18.2.1 (eth0) = the cluster address; 198.18.3.1 (eth1)
        |  bridge br0 (namespace sw)
    n0..nN-1 (198.18.3.2..)            application nodes: unmodified local server

The front host runs the I/O server (app-nodes on the node hosts), or nftables DNAT
(`connlab gateway --mode nat`), or HAProxy (`mode tcp`). Namespaces are
connlab-bench-<pid>-si-<host>; those of a dead run are removed by the next one.
Every child's stdout/stderr go to files in a temporary directory.
"""
import os, re, shutil, signal, subprocess, sys, time

from gwlab import BIN, cpu_s, haproxy_tcp_cfg  # noqa: F401 (re-exported for bench_singleip)

PREFIX = "connlab-bench-"


class SetupError(Exception):
    pass


def sh(*args, check=True):
    r = subprocess.run(list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if check and r.returncode != 0:
        raise SetupError(f"{' '.join(args)}: exit {r.returncode}: {r.stderr.strip()}")
    return r


def sweep_stale():
    """Deletes namespaces connlab-bench-<pid>-si-* whose pid is gone."""
    out = sh("ip", "netns", "list", check=False).stdout
    for line in out.splitlines():
        name = line.split()[0] if line.split() else ""
        m = re.match(rf"{PREFIX}(\d+)-si-", name)
        if m and not os.path.exists(f"/proc/{m.group(1)}"):
            sh("ip", "netns", "del", name, check=False)


class Lab:
    def __init__(self, clients, nodes):
        self.clients = [f"c{i}" for i in range(clients)]
        self.nodes = [f"n{j}" for j in range(nodes)]
        hosts = ["router", "front", "sw"] + self.clients + self.nodes
        self.ns = {h: f"{PREFIX}{os.getpid()}-si-{h}" for h in hosts}
        self.made = []

    VIP = "198.18.2.1"
    FRONT_NODE_SIDE = "198.18.3.1"

    def caddr(self, i):
        return f"198.18.1.{i + 1}"

    def naddr(self, j):
        return f"198.18.3.{j + 2}"

    def inns(self, host, *args):
        return ["ip", "netns", "exec", self.ns[host], *args]

    def sysctl(self, host, key, value):
        sh(*self.inns(host, "sysctl", "-q", "-w", f"{key}={value}"))

    def __enter__(self):
        sweep_stale()
        try:
            self._build()
        except BaseException:
            self.__exit__()
            raise
        return self

    def _build(self):
        for n in self.ns.values():
            sh("ip", "netns", "add", n)
            self.made.append(n)
        r, sw, f = self.ns["router"], self.ns["sw"], self.ns["front"]
        for h in self.ns:
            self.sysctl(h, "net.ipv6.conf.all.disable_ipv6", 1)
            self.sysctl(h, "net.ipv6.conf.default.disable_ipv6", 1)
            sh("ip", "-n", self.ns[h], "link", "set", "lo", "up")
        self.sysctl("router", "net.ipv4.ip_forward", 1)
        self.sysctl("front", "net.ipv4.ip_forward", 1)
        for br, addr in [("brl", "198.18.1.254/24"), ("brr", "198.18.2.254/24")]:
            sh("ip", "-n", r, "link", "add", br, "type", "bridge", "forward_delay", "0", "stp_state", "0")
            sh("ip", "-n", r, "addr", "add", addr, "dev", br)
            sh("ip", "-n", r, "link", "set", br, "up")
        sh("ip", "-n", r, "route", "add", "198.18.3.0/24", "via", self.VIP)
        for i, c in enumerate(self.clients):
            sh("ip", "-n", r, "link", "add", c, "type", "veth", "peer", "name", "eth0", "netns", self.ns[c])
            sh("ip", "-n", r, "link", "set", c, "master", "brl", "up")
            sh("ip", "-n", self.ns[c], "addr", "add", f"{self.caddr(i)}/24", "dev", "eth0")
            sh("ip", "-n", self.ns[c], "link", "set", "eth0", "up")
            sh("ip", "-n", self.ns[c], "route", "add", "default", "via", "198.18.1.254")
        sh("ip", "-n", r, "link", "add", "front", "type", "veth", "peer", "name", "eth0", "netns", f)
        sh("ip", "-n", r, "link", "set", "front", "master", "brr", "up")
        sh("ip", "-n", f, "addr", "add", f"{self.VIP}/24", "dev", "eth0")
        sh("ip", "-n", f, "link", "set", "eth0", "up")
        sh("ip", "-n", f, "route", "add", "default", "via", "198.18.2.254")
        sh("ip", "-n", sw, "link", "add", "br0", "type", "bridge", "forward_delay", "0", "stp_state", "0")
        sh("ip", "-n", sw, "link", "set", "br0", "up")
        sh("ip", "-n", sw, "link", "add", "front", "type", "veth", "peer", "name", "eth1", "netns", f)
        sh("ip", "-n", sw, "link", "set", "front", "master", "br0", "up")
        sh("ip", "-n", f, "addr", "add", f"{self.FRONT_NODE_SIDE}/24", "dev", "eth1")
        sh("ip", "-n", f, "link", "set", "eth1", "up")
        for j, n in enumerate(self.nodes):
            sh("ip", "-n", sw, "link", "add", n, "type", "veth", "peer", "name", "eth0", "netns", self.ns[n])
            sh("ip", "-n", sw, "link", "set", n, "master", "br0", "up")
            sh("ip", "-n", self.ns[n], "addr", "add", f"{self.naddr(j)}/24", "dev", "eth0")
            sh("ip", "-n", self.ns[n], "link", "set", "eth0", "up")
            sh("ip", "-n", self.ns[n], "route", "add", "default", "via", self.FRONT_NODE_SIDE)
        # Wait for carrier on every host interface.
        deadline = time.time() + 10
        for h in self.clients + self.nodes + ["front"]:
            for dev in (["eth0", "eth1"] if h == "front" else ["eth0"]):
                while "LOWER_UP" not in sh("ip", "-n", self.ns[h], "-o", "link", "show", "dev", dev).stdout:
                    if time.time() > deadline:
                        raise SetupError(f"{dev} in {h} did not come up")
                    time.sleep(0.02)

    def __exit__(self, *exc):
        for n in reversed(self.made):
            sh("ip", "netns", "del", n, check=False)
        self.made = []

    def rps(self, host, dev, mask):
        sh(*self.inns(host, "sh", "-c", f"echo {mask:x} > /sys/class/net/{dev}/queues/rx-0/rps_cpus"))


class Procs:
    """Children with output in files; `start` waits for a ready string in either stream."""

    def __init__(self, tmp):
        self.tmp = tmp
        self.live = []
        self.seq = 0

    def start(self, name, cmd, ready=None, timeout=20):
        self.seq += 1
        base = f"{self.tmp}/{self.seq:03d}-{name}"
        out, err = open(base + ".out", "w"), open(base + ".err", "w")
        p = subprocess.Popen(cmd, stdout=out, stderr=err, text=True, start_new_session=True)
        p.name, p.base = name, base
        self.live.append(p)
        if ready:
            deadline = time.time() + timeout
            while True:
                text = open(base + ".out").read() + open(base + ".err").read()
                if ready in text:
                    break
                if p.poll() is not None:
                    raise SetupError(f"{name} exited ({p.returncode}): {text.strip()[-2000:]}")
                if time.time() > deadline:
                    raise SetupError(f"{name}: no '{ready}' within {timeout} s: {text.strip()[-2000:]}")
                time.sleep(0.05)
        return p

    def stop(self, p, sig=signal.SIGINT, timeout=20):
        if p.poll() is None:
            try:
                p.send_signal(sig)
                p.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        if p in self.live:
            self.live.remove(p)
        return p.returncode

    def output(self, p):
        return open(p.base + ".out").read()

    def stop_all(self):
        for p in list(reversed(self.live)):
            self.stop(p, timeout=5)


def jain(xs):
    xs = [float(x) for x in xs]
    s2 = sum(x * x for x in xs)
    return (sum(xs) ** 2) / (len(xs) * s2) if s2 > 0 else float("nan")


def median(xs):
    xs = sorted(xs)
    if not xs:
        return float("nan")
    n = len(xs)
    return xs[n // 2] if n % 2 else (xs[n // 2 - 1] + xs[n // 2]) / 2


def pct(xs, p):
    xs = sorted(xs)
    if not xs:
        return float("nan")
    k = min(len(xs) - 1, max(0, int(round(p / 100 * (len(xs) - 1)))))
    return xs[k]
