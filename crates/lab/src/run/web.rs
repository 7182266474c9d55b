//! The web kind's side of a sweep (experiments with a `[web]` section):
//! nginx backends serving a file set, each under `connlab cap`, and the
//! gateway configuration a point names (`direct`, `nat`, `proxy`,
//! `haproxy`). Backend CPU is read from /proc for the processes of each
//! backend's cgroup over the measured window.

use super::child::BANNER_TIMEOUT;
use crate::Experiment;
use anyhow::{anyhow, bail, Context};
use connlab_os::child::{Child, Stream};
use connlab_os::netns::Topology;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime};

/// Port every backend listens on.
const BACKEND_PORT: u16 = 8080;
/// Port of the virtual address on the gateway host.
const VIP_PORT: u16 = 80;

/// Prepares a web sweep once: checks nginx (and HAProxy when named),
/// writes the file set to `DIR/www` unless present, and puts every host's
/// receive processing on its own CPU (backends 0, gateway 1), so that the
/// backends' network-stack work counts in their CPU time whatever the
/// gateway (a measured artefact otherwise: 29-36% instead of ~50%).
pub(super) fn prepare(exp: &Experiment, topo: &Topology, out: &Path) -> anyhow::Result<PathBuf> {
    let web = exp
        .web
        .as_ref()
        .ok_or_else(|| anyhow!("not a web experiment"))?;
    if Command::new("nginx").arg("-v").output().is_err() {
        bail!("web experiments need nginx: apt-get install nginx");
    }
    if exp.server.engines.iter().any(|e| e == "haproxy")
        && Command::new("haproxy").arg("-v").output().is_err()
    {
        bail!("the haproxy configuration needs HAProxy: apt-get install haproxy");
    }
    let www = out.join("www");
    if !www.join("manifest.csv").exists() {
        let model: connlab_webset::Model =
            web.model.as_str().parse().map_err(|e: String| anyhow!(e))?;
        connlab_webset::generate(model, &connlab_webset::ModelOptions::default())
            .write_files(&www)
            .map_err(|e| anyhow!("{e}"))?;
    }
    let rps = |host: &str, mask: &str| -> anyhow::Result<()> {
        let ns = topo
            .namespace(host)
            .ok_or_else(|| anyhow!("no host {host}"))?;
        let out = Command::new("ip")
            .args(["netns", "exec", ns, "sh", "-c"])
            .arg(format!(
                "echo {mask} > /sys/class/net/eth0/queues/rx-0/rps_cpus"
            ))
            .output()?;
        if !out.status.success() {
            bail!(
                "setting RPS in {host}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        Ok(())
    };
    rps(&exp.topology.server_host, "2")?;
    for b in exp.backend_hosts() {
        rps(&b, "1")?;
    }
    Ok(www)
}

/// CPU use over a point's measured window, each a share of one CPU.
#[derive(Debug, Default)]
pub(super) struct WindowCpu {
    /// Each backend's processes.
    pub(super) backends: Vec<f64>,
    /// The gateway process, if there is one.
    pub(super) gateway: Option<f64>,
    /// Each CPU's busy share (machine-wide, `/proc/stat`).
    pub(super) cpus: Vec<f64>,
}

/// The running backends and gateway of one point.
pub(super) struct WebSide {
    backends: Vec<Child>,
    gateway: Option<Child>,
    procs: Vec<PathBuf>,
    /// Where the clients send their requests.
    pub(super) target: SocketAddr,
    gateway_stats: PathBuf,
}

fn addr(topo: &Topology, host: &str, port: u16) -> anyhow::Result<SocketAddr> {
    let ip: Ipv4Addr = topo
        .host_addr(host)
        .ok_or_else(|| anyhow!("no host {host}"))?;
    Ok(SocketAddr::from((ip, port)))
}

/// The HAProxy rule that sends `client` to backend `low byte mod
/// backends`, as the gateway's ip-mod does with equal weights.
fn haproxy_ip_mod_rule(client: std::net::IpAddr, backends: usize) -> String {
    let low = match client {
        std::net::IpAddr::V4(a) => a.octets()[3],
        std::net::IpAddr::V6(a) => a.octets()[15],
    };
    format!(
        "  use-server s{} if {{ src {client} }}\n",
        usize::from(low) % backends.max(1)
    )
}

/// Waits until `target` accepts a connection from `from`'s namespace.
fn wait_listening(topo: &Topology, from: &str, target: SocketAddr) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(15);
    while Instant::now() < deadline {
        let ok = topo
            .run_in(from, || {
                std::net::TcpStream::connect_timeout(&target, Duration::from_millis(200)).is_ok()
            })
            .map_err(|e| anyhow!(e))?;
        if ok {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    bail!("{target} never accepted a connection")
}

/// Starts the backends and the gateway of configuration `config`.
#[allow(clippy::too_many_arguments)]
pub(super) fn start(
    exp: &Experiment,
    topo: &Topology,
    exe: &Path,
    www: &Path,
    config: &str,
    logs: &Path,
    log_file: impl Fn(&Path) -> anyhow::Result<std::fs::File>,
) -> anyhow::Result<WebSide> {
    let web = exp
        .web
        .as_ref()
        .ok_or_else(|| anyhow!("not a web experiment"))?;
    let probe = exp.client_hosts()[0].clone();
    let mut side = WebSide {
        backends: Vec::new(),
        gateway: None,
        procs: Vec::new(),
        target: addr(topo, "web1", BACKEND_PORT)?,
        gateway_stats: logs.join("gateway-stats.json"),
    };
    let hosts = exp.backend_hosts_of(config);
    let config = crate::web_config(config).map_err(|m| anyhow!(m))?.0;
    let pool: Vec<SocketAddr> = hosts
        .iter()
        .map(|b| addr(topo, b, BACKEND_PORT))
        .collect::<Result<_, _>>()?;
    for (b, listen) in hosts.iter().zip(&pool) {
        let conf = logs.join(format!("{b}.conf"));
        std::fs::write(
            &conf,
            format!(
                "user root; daemon off; worker_processes 1; pid {pid}; error_log {err};\n\
                 events {{ worker_connections 8192; }}\n\
                 http {{ access_log off; sendfile on; keepalive_requests 10000000; keepalive_timeout 300s;\n\
                 server {{ listen {listen} backlog=4096; root {root}; }} }}\n",
                pid = logs.join(format!("{b}.pid")).display(),
                err = logs.join(format!("{b}.err")).display(),
                root = www.display(),
            ),
        )
        .with_context(|| format!("writing {}", conf.display()))?;
        let ns = topo.namespace(b).ok_or_else(|| anyhow!("no host {b}"))?;
        // `ip netns exec` remounts /sys (hiding the cgroup mounts): the quota
        // is set up outside and the namespace entered inside it.
        let mut cmd = Command::new("taskset");
        cmd.args(["-c", "0"])
            .arg(exe)
            .args(["cap", "--cpu", web.backend_cpu.as_str(), "--name", b, "--"])
            .args(["ip", "netns", "exec", ns, "nginx", "-c"])
            .arg(&conf)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log_file(&logs.join(format!("{b}.log")))?);
        let child = Child::spawn(&mut cmd).context("starting a backend (connlab cap nginx)")?;
        let pid = child.pid();
        side.backends.push(child);
        wait_listening(topo, &probe, *listen)?;
        side.procs.push(
            connlab_os::cgroup::procs_path(pid, b)
                .ok_or_else(|| anyhow!("no cgroup for backend {b}"))?,
        );
    }
    if config == "direct" {
        return Ok(side);
    }
    let gw = &exp.topology.server_host;
    let vip = addr(topo, gw, VIP_PORT)?;
    side.target = vip;
    let mut cmd = topo.command(gw, "taskset").map_err(|e| anyhow!(e))?;
    cmd.args(["-c", exp.server.cpu.as_ref().map_or("1", |c| c.as_str())]);
    match config {
        "nat" | "proxy" => {
            cmd.arg(exe)
                .args(["gateway", "--mode", config, "--listen", &vip.to_string()])
                .args(["--policy", web.policy.as_str(), "--stats"])
                .arg(&side.gateway_stats);
            for b in &pool {
                cmd.args(["--backend", &b.to_string()]);
            }
            if config == "nat" {
                cmd.arg("--masquerade");
            }
        }
        "haproxy" => {
            let cfg = logs.join("haproxy.cfg");
            let balance = match web.policy.as_str() {
                "round-robin" => "roundrobin",
                "least-connections" => "leastconn",
                _ => "source",
            };
            let mut servers: String = pool
                .iter()
                .enumerate()
                .map(|(i, b)| format!("  server s{i} {b}\n"))
                .collect();
            // ip-mod (the paper's rule: the client address's low byte modulo
            // the backends) is not one of HAProxy's algorithms; the clients'
            // addresses are known, so each gets its backend by name and
            // `balance source` only covers any other address.
            if web.policy.as_str() == "ip-mod" {
                for host in exp.client_hosts() {
                    let ip = addr(topo, &host, 0)?.ip();
                    servers.push_str(&haproxy_ip_mod_rule(ip, pool.len()));
                }
            }
            std::fs::write(
                &cfg,
                format!(
                    "global\n  maxconn 9000\n  nbthread 1\ndefaults\n  mode tcp\n  timeout connect 5s\n  \
                     timeout client 300s\n  timeout server 300s\nlisten gw\n  bind {vip}\n  balance {balance}\n{servers}"
                ),
            )?;
            cmd.args(["haproxy", "-db", "-f"]).arg(&cfg);
        }
        other => bail!("unknown gateway configuration {other:?}"),
    }
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(log_file(&logs.join("gateway.log"))?);
    let mut child = Child::spawn(&mut cmd).context("starting the gateway")?;
    if config != "haproxy" {
        // Wait for the banner: the ruleset or listener is in place.
        if child
            .wait_ready(Stream::Stdout, BANNER_TIMEOUT, |l| {
                l.starts_with("gateway: ")
            })
            .is_err()
        {
            child.kill();
            bail!("the gateway exited at start (see gateway.log)");
        }
    }
    side.gateway = Some(child);
    wait_listening(topo, &probe, vip)?;
    Ok(side)
}

impl WebSide {
    /// The gateway's and the backends' process trees, as roles of the
    /// measured window.
    pub(super) fn roles(&self) -> super::window::Roles {
        super::window::Roles::default()
            .with("gateway", self.gateway.as_ref().map(Child::pid))
            .with("backends", self.backends.iter().map(Child::pid))
    }

    /// Samples each backend's CPU, the gateway process's and every CPU's
    /// busy share from `from` for `window`. Runs on its own thread while the
    /// shards run.
    pub(super) fn sampler(
        &self,
        from: SystemTime,
        window: Duration,
    ) -> std::thread::JoinHandle<WindowCpu> {
        use connlab_os::cgroup::{group_cpu_s, process_cpu_s};
        let procs = self.procs.clone();
        let gateway = self.gateway.as_ref().map(Child::pid);
        std::thread::spawn(move || {
            if let Ok(wait) = from.duration_since(SystemTime::now()) {
                std::thread::sleep(wait);
            }
            let before: Vec<f64> = procs.iter().map(|p| group_cpu_s(p)).collect();
            let gw_before = gateway.and_then(process_cpu_s);
            let busy_before = connlab_os::CpuBusy::sample();
            let t0 = Instant::now();
            std::thread::sleep(window);
            let secs = t0.elapsed().as_secs_f64().max(1e-9);
            let cpus = connlab_os::CpuBusy::sample().shares_since(&busy_before);
            let backends = procs
                .iter()
                .zip(before)
                .map(|(p, b)| (group_cpu_s(p) - b) / secs)
                .collect();
            let gateway = match (gw_before, gateway.and_then(process_cpu_s)) {
                (Some(a), Some(b)) => Some((b - a) / secs),
                _ => None,
            };
            WindowCpu {
                backends,
                gateway,
                cpus,
            }
        })
    }

    /// Stops the gateway, then the backends; returns the gateway's statistics.
    pub(super) fn stop(mut self) -> Option<serde_json::Value> {
        let grace = Duration::from_secs(20);
        if let Some(g) = self.gateway.as_mut() {
            g.stop(libc::SIGINT, grace);
        }
        for b in &mut self.backends {
            b.stop(libc::SIGINT, grace);
        }
        std::fs::read_to_string(&self.gateway_stats)
            .ok()
            .and_then(|t| serde_json::from_str(&t).ok())
    }
}

#[cfg(test)]
mod tests {
    use super::haproxy_ip_mod_rule;

    /// HAProxy under ip-mod sends each client where the gateway's nat map
    /// would: the address's low byte modulo the backends.
    #[test]
    fn haproxy_follows_the_ip_mod_rule() {
        let ip = |s: &str| s.parse().unwrap();
        assert_eq!(
            haproxy_ip_mod_rule(ip("10.77.0.7"), 4),
            "  use-server s3 if { src 10.77.0.7 }\n"
        );
        assert_eq!(
            haproxy_ip_mod_rule(ip("10.77.0.6"), 6),
            "  use-server s0 if { src 10.77.0.6 }\n"
        );
    }
}
