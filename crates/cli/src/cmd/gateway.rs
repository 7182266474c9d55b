//! `connlab gateway`: the load-balancing gateway in front of N backends.

use crate::Exit;
use anyhow::{anyhow, Context};
use clap::{Args, ValueEnum};
use connlab_gateway::{nat, Backend, Balancer, NatRules, PolicyKind};
use connlab_os::Shutdown;
use serde::Serialize;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

/// How the gateway forwards.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Mode {
    /// The kernel forwards: nftables DNAT in this namespace.
    Nat,
    /// A user-space L4 proxy (not built yet).
    Proxy,
}

/// Flags of `connlab gateway`.
#[derive(Args, Debug)]
#[command(after_help = "\
Policies:
  ip-mod             the paper: the client address's low 8 bits pick one of 256 slots,
                     slot b going to backend b mod N (by weight when weighted)
  source-hash        a hash of the client address (nat: jhash) into the same slots
  round-robin        smooth weighted round robin (nat: numgen inc)
  least-connections  fewest open connections per weight (proxy mode only)
  maglev             consistent hashing: losing one of N backends moves ~1/N of clients
                     (proxy mode only)

nat mode installs an nftables table connlab_gw_<pid> in the current network namespace
(needs root and the nft binary), enables IPv4 forwarding there, prints the ruleset, and
removes both on exit; tables left by a killed gateway are removed at the next start.
The backends' replies must come back through the gateway: route the clients' addresses
via it (the paper's setup), or pass --masquerade when clients and backends share a
subnet. SIGINT/SIGTERM stop it; it then writes --stats (JSON: per-backend connections,
packets and bytes each way) and a summary on stderr.

Example:
  connlab gateway --mode nat --listen 198.18.0.1:80 \\
      --backend 198.18.0.2:8080 --backend 198.18.0.3:8080 --policy ip-mod --masquerade")]
pub(crate) struct GatewayArgs {
    /// The virtual address clients connect to (VIP:PORT).
    #[arg(long)]
    listen: SocketAddr,
    /// A backend, ADDR:PORT or ADDR:PORT,WEIGHT; repeat for each.
    #[arg(long = "backend", required = true, value_name = "ADDR[,WEIGHT]")]
    backends: Vec<String>,
    /// Balancing policy: ip-mod, source-hash, round-robin, least-connections, maglev.
    #[arg(long, default_value = "ip-mod", value_parser = parse_policy)]
    policy: PolicyKind,
    /// How connections are forwarded.
    #[arg(long, value_enum, default_value = "nat")]
    mode: Mode,
    /// nat: source-NAT connections toward the backends (they reply to the gateway).
    #[arg(long)]
    masquerade: bool,
    /// Write the statistics as JSON to FILE on exit.
    #[arg(long, value_name = "FILE")]
    stats: Option<PathBuf>,
}

fn parse_policy(s: &str) -> Result<PolicyKind, String> {
    s.parse()
}

/// One backend's line of the statistics.
#[derive(Serialize)]
struct BackendStats {
    addr: String,
    weight: u32,
    connections: u64,
    packets_to: u64,
    bytes_to: u64,
    packets_from: u64,
    bytes_from: u64,
}

/// `--stats`: what the gateway did.
#[derive(Serialize)]
struct GatewayStats {
    schema: &'static str,
    mode: &'static str,
    policy: &'static str,
    listen: String,
    table: String,
    masquerade: bool,
    wall_s: f64,
    cpu_user_s: f64,
    cpu_sys_s: f64,
    backends: Vec<BackendStats>,
}

const FORWARD: &str = "/proc/sys/net/ipv4/ip_forward";

/// Runs the gateway until SIGINT/SIGTERM.
pub(crate) fn run(args: GatewayArgs) -> Result<ExitCode, Exit> {
    let backends: Vec<Backend> = args
        .backends
        .iter()
        .map(|b| b.parse::<Backend>())
        .collect::<Result<_, _>>()
        .map_err(|e| Exit::usage(anyhow!("--backend {e}")))?;
    let balancer = Balancer::new(args.policy, backends).map_err(|e| Exit::usage(anyhow!("{e}")))?;
    if args.mode == Mode::Proxy {
        return Err(Exit::usage(anyhow!(
            "--mode proxy is not built yet; use --mode nat"
        )));
    }
    // Refuse what nat mode cannot do before touching the kernel.
    nat::ruleset("check", args.listen, &balancer, args.masquerade)
        .map_err(|e| Exit::usage(anyhow!("{e}")))?;
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Err(Exit::usage(anyhow!(
            "nat mode programs nftables and needs root (CAP_NET_ADMIN): run as root or with sudo"
        )));
    }
    let shutdown = Shutdown::on_termination_signals().context("installing signal handlers")?;
    let forward_before = std::fs::read_to_string(FORWARD).unwrap_or_default();
    std::fs::write(FORWARD, "1").with_context(|| format!("enabling forwarding ({FORWARD})"))?;
    let cpu0 = connlab_os::CpuTimes::self_and_children();
    let started = Instant::now();
    let (rules, text) = match NatRules::install(args.listen, &balancer, args.masquerade) {
        Ok(v) => v,
        Err(e) => {
            let _ = std::fs::write(FORWARD, forward_before.trim());
            return Err(anyhow!("{e}").into());
        }
    };
    println!("installed nftables table ip {}:", rules.table());
    print!("{text}");
    println!(
        "gateway: nat mode, {} -> {} backends, policy {}; Ctrl-C stops",
        args.listen,
        balancer.backends().len(),
        args.policy.name()
    );
    use std::io::Write as _;
    let _ = std::io::stdout().flush();
    while !shutdown.requested() {
        let mut p = libc::pollfd {
            fd: shutdown.wake_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd for the duration of the call.
        unsafe { libc::poll(&mut p, 1, 1000) };
    }
    let counters = rules.counters();
    let table = rules.table().to_string();
    let removed = rules.remove();
    let _ = std::fs::write(FORWARD, forward_before.trim());
    let cpu = connlab_os::CpuTimes::self_and_children().since(&cpu0);
    let counters = counters.map_err(|e| anyhow!("reading the counters: {e}"))?;
    removed.map_err(|e| anyhow!("removing table {table}: {e}"))?;
    let stats = GatewayStats {
        schema: "connlab.gateway.stats/1",
        mode: "nat",
        policy: args.policy.name(),
        listen: args.listen.to_string(),
        table,
        masquerade: args.masquerade,
        wall_s: started.elapsed().as_secs_f64(),
        cpu_user_s: cpu.user_s,
        cpu_sys_s: cpu.sys_s,
        backends: balancer
            .backends()
            .iter()
            .zip(&counters)
            .map(|(b, c)| BackendStats {
                addr: b.addr.to_string(),
                weight: b.weight,
                connections: c.connections,
                packets_to: c.packets_to,
                bytes_to: c.bytes_to,
                packets_from: c.packets_from,
                bytes_from: c.bytes_from,
            })
            .collect(),
    };
    eprintln!(
        "{:<24} {:>12} {:>14} {:>14}",
        "backend", "connections", "bytes to", "bytes from"
    );
    for b in &stats.backends {
        eprintln!(
            "{:<24} {:>12} {:>14} {:>14}",
            b.addr, b.connections, b.bytes_to, b.bytes_from
        );
    }
    if let Some(path) = &args.stats {
        let json = serde_json::to_string_pretty(&stats).context("encoding the statistics")?;
        std::fs::write(path, json + "\n")
            .with_context(|| format!("writing --stats file {}", path.display()))?;
    }
    Ok(ExitCode::SUCCESS)
}
