"""Shared helpers of the gateway benchmark scripts: hosts as network namespaces on
one bridge (198.18.0.1, .2, ... in the order given), processes inside them, and the
CPU time of processes read from /proc."""
import os, subprocess, sys, time

BIN = os.path.abspath(os.environ.get("CONNLAB", "target/release/connlab"))
TICK = os.sysconf("SC_CLK_TCK")


def sh(*args, check=True):
    return subprocess.run(list(args), check=check, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


class Lab:
    """Hosts `hosts` as namespaces connlab-bench-<pid>-<host> on a bridge."""

    def __init__(self, hosts):
        self.hosts = list(hosts)
        self.ns = {h: f"connlab-bench-{os.getpid()}-{h}" for h in self.hosts + ["sw"]}

    def addr(self, host):
        return f"198.18.0.{self.hosts.index(host) + 1}"

    def inns(self, host, *args):
        return ["ip", "netns", "exec", self.ns[host], *args]

    def __enter__(self):
        for n in self.ns.values():
            sh("ip", "netns", "add", n)
        sw = self.ns["sw"]
        sh("ip", "-n", sw, "link", "add", "br0", "type", "bridge")
        sh("ip", "-n", sw, "link", "set", "br0", "up")
        for i, h in enumerate(self.hosts):
            sh("ip", "link", "add", f"p{i}", "netns", sw, "type", "veth", "peer", "name", "eth0",
               "netns", self.ns[h])
            sh("ip", "-n", sw, "link", "set", f"p{i}", "master", "br0", "up")
            sh("ip", "-n", self.ns[h], "addr", "add", f"{self.addr(h)}/24", "dev", "eth0")
            sh("ip", "-n", self.ns[h], "link", "set", "eth0", "up")
            sh("ip", "-n", self.ns[h], "link", "set", "lo", "up")
        return self

    def __exit__(self, *exc):
        for n in self.ns.values():
            sh("ip", "netns", "del", n, check=False)

    def rps(self, host, cpu_mask):
        """Steers `host`'s receive processing to the CPUs of `cpu_mask` (RPS)."""
        sh(*self.inns(host, "sh", "-c", f"echo {cpu_mask:x} > /sys/class/net/eth0/queues/rx-0/rps_cpus"))


def haproxy_tcp_cfg(path, bind, servers, balance="roundrobin"):
    """Writes the HAProxy peer every gateway benchmark uses: mode tcp, one thread,
    `balance` over `servers` (ADDR:PORT), listening on `bind`. Returns `path`."""
    with open(path, "w") as f:
        f.write("global\n  maxconn 9000\n  nbthread 1\ndefaults\n  mode tcp\n"
                "  timeout connect 5s\n  timeout client 300s\n  timeout server 300s\n"
                f"listen gw\n  bind {bind}\n  balance {balance}\n"
                + "".join(f"  server s{i} {b}\n" for i, b in enumerate(servers)))
    return path


def cpu_s(pid):
    """User + system CPU seconds of one process (None: no process)."""
    if pid is None:
        return None
    f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / TICK


def group_cpu_s(procs_file):
    """CPU seconds of every process listed in a cgroup's cgroup.procs."""
    total = 0.0
    for pid in open(procs_file).read().split():
        try:
            total += cpu_s(int(pid))
        except (FileNotFoundError, ProcessLookupError):
            pass
    return total


def start(cmd, ready=None):
    """Starts `cmd`; waits for a stdout line starting with `ready`, or 1 s."""
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if ready:
        deadline = time.time() + 20
        while time.time() < deadline:
            line = p.stdout.readline()
            if not line:
                sys.exit(f"{cmd} exited: {p.stderr.read()}")
            if line.startswith(ready):
                break
    else:
        time.sleep(1.0)
        if p.poll() is not None:
            sys.exit(f"{cmd} exited: {p.stderr.read()}")
    return p


def stop(p):
    p.send_signal(2)
    try:
        p.wait(timeout=20)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()


def nginx_conf(tmp, name, listen, root):
    """A one-worker nginx configuration file serving `root` on `listen`."""
    path = f"{tmp}/{name}.conf"
    open(path, "w").write(f"""daemon off; worker_processes 1; pid {tmp}/{name}.pid; error_log {tmp}/{name}.err;
events {{ worker_connections 8192; }}
http {{ access_log off; sendfile on; keepalive_requests 10000000; keepalive_timeout 300s;
  server {{ listen {listen} backlog=4096; root {root}; }} }}""")
    return path
