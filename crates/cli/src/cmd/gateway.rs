//! `connlab gateway`: the load-balancing gateway in front of N backends.

use crate::Exit;
use anyhow::{anyhow, Context};
use clap::{Args, ValueEnum};
use connlab_gateway::forward::{process_alive, Forwarding};
use connlab_gateway::{nat, Backend, Balancer, NatRules, PolicyKind, ProxyConfig, ProxyIo};
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
    /// A user-space L4 proxy with health checks.
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

proxy mode relays in user space (one event loop, --buffer bytes per direction per
connection, or a pipe of at least 64 KiB with --splice; with --io uring an io_uring loop
sends each received buffer on as it is and stops receiving on a direction holding
--buffer bytes not yet sent), health-checks every backend each
--health-interval (a TCP connect), takes a failing backend out of rotation and resets
its connections, and puts it back when a check succeeds; a refused connect is retried
on the next healthy backend. Limits (counted in --stats): a connection with no bytes
moving either way for --idle-timeout is reset (idle_closed); each connection moves at
most --turn-budget bytes per event-loop turn before the others get theirs
(turn_budget_hits), so one bulk transfer cannot starve small requests.

nat mode installs an nftables table connlab_gw_<pid> in the current network namespace
(needs root and the nft binary), enables IPv4 forwarding there, prints the ruleset, and
removes both on exit. The value ip_forward had is recorded first in
/run/connlab/gateway-ip_forward-<netns>-<pid>; tables and forwarding left by a killed
gateway are put back at the next start in that namespace. Bytes and packets are counted
per backend in both directions (by conntrack flow, backends on the gateway host
included).
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
    /// proxy: time between health checks of each backend.
    #[arg(long, default_value = "1s", value_parser = crate::units::parse_duration)]
    health_interval: std::time::Duration,
    /// proxy: connect timeout of a health check.
    #[arg(long, default_value = "500ms", value_parser = crate::units::parse_duration)]
    health_timeout: std::time::Duration,
    /// proxy: consecutive failed checks that take a backend out of rotation.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=100))]
    health_fails: u32,
    /// proxy: bytes buffered per direction per connection (bounds memory; with
    /// --splice the pipe's size, at least 64 KiB of page references).
    #[arg(long, default_value = "16KiB", value_parser = crate::units::parse_size)]
    buffer: u64,
    /// proxy: relay through a pipe per direction with splice(2), so the bytes never
    /// enter user space (costs four more descriptors per connection).
    #[arg(long)]
    splice: bool,
    /// proxy: how bytes move: copy (epoll, user-space buffers), splice (epoll, pipes;
    /// same as --splice), uring (io_uring: multishot receives into a provided-buffer
    /// ring, each buffer sent on as it is) [default: copy].
    #[arg(long, value_name = "MODE", value_parser = parse_io)]
    io: Option<ProxyIo>,
    /// proxy --io uring: once a completion is in, wait up to this long for more before
    /// handling them (fewer wake-ups; each byte waits at most this long; Linux 6.12).
    #[arg(long, default_value = "0s", value_parser = crate::units::parse_duration,
          value_name = "DURATION")]
    uring_min_wait: std::time::Duration,
    /// proxy: reset a connection with no bytes moving either way for this long.
    #[arg(long, default_value = "300s", value_parser = crate::units::parse_duration,
          value_name = "DURATION")]
    idle_timeout: std::time::Duration,
    /// proxy: bytes one connection may move per event-loop turn before the others get
    /// their turn.
    #[arg(long, default_value = "256KiB", value_parser = crate::units::parse_size,
          value_name = "BYTES")]
    turn_budget: u64,
}

fn parse_policy(s: &str) -> Result<PolicyKind, String> {
    s.parse()
}

fn parse_io(s: &str) -> Result<ProxyIo, String> {
    s.parse()
}

/// The proxy I/O mode `--io` and `--splice` ask for together.
fn proxy_io(io: Option<ProxyIo>, splice: bool) -> Result<ProxyIo, String> {
    match (io, splice) {
        (None, false) => Ok(ProxyIo::Copy),
        (None, true) => Ok(ProxyIo::Splice),
        (Some(m), false) => Ok(m),
        (Some(ProxyIo::Splice), true) => Ok(ProxyIo::Splice),
        (Some(m), true) => Err(format!(
            "--splice is --io splice: it conflicts with --io {}",
            m.name()
        )),
    }
}

/// One backend's line of the statistics (nat: packet counters; proxy:
/// errors and health).
#[derive(Serialize, Default)]
struct BackendStats {
    addr: String,
    weight: u32,
    connections: u64,
    bytes_to: u64,
    bytes_from: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    packets_to: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    packets_from: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    connect_errors: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reset_unhealthy: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    went_down: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    healthy: Option<bool>,
}

/// `--stats`: what the gateway did.
#[derive(Serialize)]
struct GatewayStats {
    schema: &'static str,
    mode: &'static str,
    policy: &'static str,
    listen: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    table: Option<String>,
    masquerade: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    accepted: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    no_backend: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    no_relay: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    splice: Option<bool>,
    /// proxy: copy, splice or uring.
    #[serde(skip_serializing_if = "Option::is_none")]
    io: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    idle_closed: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    turn_budget_hits: Option<u64>,
    /// proxy: clients reset at once because the gateway was out of
    /// descriptors.
    #[serde(skip_serializing_if = "Option::is_none")]
    shed: Option<u64>,
    /// proxy: stretches of time at the descriptor limit.
    #[serde(skip_serializing_if = "Option::is_none")]
    fd_limit_episodes: Option<u64>,
    wall_s: f64,
    cpu_user_s: f64,
    cpu_sys_s: f64,
    backends: Vec<BackendStats>,
}

/// Runs the gateway until SIGINT/SIGTERM.
pub(crate) fn run(args: GatewayArgs) -> Result<ExitCode, Exit> {
    crate::cmd::check_output("--stats", args.stats.as_deref())?;
    let backends: Vec<Backend> = args
        .backends
        .iter()
        .map(|b| b.parse::<Backend>())
        .collect::<Result<_, _>>()
        .map_err(|e| Exit::usage(anyhow!("--backend {e}")))?;
    let balancer = Balancer::new(args.policy, backends).map_err(|e| Exit::usage(anyhow!("{e}")))?;
    if args.splice && args.mode != Mode::Proxy {
        return Err(Exit::usage(anyhow!(
            "--splice applies to --mode proxy only (nat forwards in the kernel)"
        )));
    }
    if args.io.is_some() && args.mode != Mode::Proxy {
        return Err(Exit::usage(anyhow!(
            "--io applies to --mode proxy only (nat forwards in the kernel)"
        )));
    }
    proxy_io(args.io, args.splice).map_err(|e| Exit::usage(anyhow!(e)))?;
    if args.mode == Mode::Proxy {
        check_backends(&balancer)?;
        return run_proxy(&args, balancer);
    }
    // nat: refuse what the kernel rule cannot do before touching the kernel.
    nat::ruleset("check", args.listen, &balancer, args.masquerade)
        .map_err(|e| Exit::usage(anyhow!("{e}")))?;
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Err(Exit::usage(anyhow!(
            "nat mode programs nftables and needs root (CAP_NET_ADMIN): run as root or with sudo"
        )));
    }
    check_backends(&balancer)?;
    let shutdown = Shutdown::on_termination_signals().context("installing signal handlers")?;
    let (forwarding, swept) = Forwarding::system()
        .and_then(|f| f.enable(process_alive))
        .context("enabling IPv4 forwarding")?;
    for f in &swept.files {
        eprintln!(
            "connlab gateway: a killed gateway left {}: ip_forward restored to {}",
            f.display(),
            swept.original.as_deref().unwrap_or("?")
        );
    }
    let cpu0 = connlab_os::CpuTimes::self_and_children();
    let started = Instant::now();
    // On an error here `forwarding` is dropped, which puts the value back.
    let (rules, text) =
        NatRules::install(args.listen, &balancer, args.masquerade).map_err(|e| anyhow!("{e}"))?;
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
    while !shutdown.wait(std::time::Duration::from_secs(1)) {}
    let counters = rules.counters();
    let table = rules.table().to_string();
    let removed = rules.remove();
    let restored = forwarding.restore(process_alive);
    let cpu = connlab_os::CpuTimes::self_and_children().since(&cpu0);
    let counters = counters.map_err(|e| anyhow!("reading the counters: {e}"))?;
    removed.map_err(|e| anyhow!("removing table {table}: {e}"))?;
    restored.context("restoring ip_forward")?;
    let stats = GatewayStats {
        schema: "connlab.gateway.stats/1",
        mode: "nat",
        policy: args.policy.name(),
        listen: args.listen.to_string(),
        table: Some(table),
        masquerade: args.masquerade,
        accepted: None,
        no_backend: None,
        no_relay: None,
        splice: None,
        io: None,
        idle_closed: None,
        turn_budget_hits: None,
        shed: None,
        fd_limit_episodes: None,
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
                bytes_to: c.bytes_to,
                bytes_from: c.bytes_from,
                packets_to: Some(c.packets_to),
                packets_from: Some(c.packets_from),
                ..Default::default()
            })
            .collect(),
    };
    finish(&args, &stats)
}

/// Prints the per-backend summary and writes --stats.
fn finish(args: &GatewayArgs, stats: &GatewayStats) -> Result<ExitCode, Exit> {
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
    let limits = [
        (stats.idle_closed, "connections reset after --idle-timeout"),
        (stats.turn_budget_hits, "turns ended at --turn-budget"),
        (
            stats.shed,
            "clients reset at once: the gateway was out of descriptors",
        ),
    ];
    for (n, what) in limits {
        if let Some(n) = n.filter(|&n| n > 0) {
            eprintln!("limits hit: {n} {what}");
        }
    }
    if let Some(path) = &args.stats {
        let json = serde_json::to_string_pretty(stats).context("encoding the statistics")?;
        connlab_os::files::write_atomic(path, json + "\n")
            .with_context(|| format!("writing --stats file {}", path.display()))?;
    }
    Ok(ExitCode::SUCCESS)
}

/// `--mode proxy`: runs the user-space proxy until SIGINT/SIGTERM.
fn run_proxy(args: &GatewayArgs, balancer: Balancer) -> Result<ExitCode, Exit> {
    let io = proxy_io(args.io, args.splice).map_err(|e| Exit::usage(anyhow!(e)))?;
    let buffer = usize::try_from(args.buffer)
        .ok()
        .filter(|b| (512..=(64 << 20)).contains(b))
        .ok_or_else(|| {
            Exit::usage(anyhow!(
                "--buffer {}: between 512 B and 64 MiB",
                args.buffer
            ))
        })?;
    if args.idle_timeout.is_zero() {
        return Err(Exit::usage(anyhow!("--idle-timeout must be above 0")));
    }
    let turn_budget = usize::try_from(args.turn_budget)
        .ok()
        .filter(|b| (1024..=(1 << 30)).contains(b))
        .ok_or_else(|| {
            Exit::usage(anyhow!(
                "--turn-budget {}: between 1 KiB and 1 GiB",
                args.turn_budget
            ))
        })?;
    let config = ProxyConfig {
        listen: args.listen,
        buffer,
        health_interval: args.health_interval,
        health_timeout: args.health_timeout,
        health_fails: args.health_fails,
        io,
        uring_min_wait: args.uring_min_wait,
        idle_timeout: args.idle_timeout,
        turn_budget,
    };
    // Health-check settings that would storm the backends or take them all
    // out are usage errors, before anything starts.
    config
        .validate()
        .map_err(|e| Exit::usage(anyhow!("{e} (--health-interval, --health-timeout)")))?;
    let shutdown = Shutdown::on_termination_signals().context("installing signal handlers")?;
    let backends: Vec<(String, u32)> = balancer
        .backends()
        .iter()
        .map(|b| (b.addr.to_string(), b.weight))
        .collect();
    let policy = balancer.kind();
    let cpu0 = connlab_os::CpuTimes::self_and_children();
    let started = Instant::now();
    let result = connlab_gateway::proxy::run(
        &config,
        balancer,
        shutdown.wake_fd(),
        || shutdown.requested(),
        |addr| {
            println!(
                "gateway: proxy mode{}, {addr} -> {} backends, policy {}; Ctrl-C stops",
                match config.io {
                    ProxyIo::Copy => "",
                    ProxyIo::Splice => " (splice)",
                    ProxyIo::Uring => " (io_uring)",
                },
                backends.len(),
                policy.name()
            );
            use std::io::Write as _;
            let _ = std::io::stdout().flush();
        },
    )
    .map_err(|e| anyhow!("proxy: {e}"))?;
    let cpu = connlab_os::CpuTimes::self_and_children().since(&cpu0);
    let stats = GatewayStats {
        schema: "connlab.gateway.stats/1",
        mode: "proxy",
        policy: policy.name(),
        listen: args.listen.to_string(),
        table: None,
        masquerade: false,
        accepted: Some(result.accepted),
        no_backend: Some(result.no_backend),
        no_relay: Some(result.no_relay),
        splice: Some(io == ProxyIo::Splice),
        io: Some(io.name()),
        idle_closed: Some(result.idle_closed),
        turn_budget_hits: Some(result.turn_budget_hits),
        shed: Some(result.shed),
        fd_limit_episodes: Some(result.fd_limit_episodes),
        wall_s: started.elapsed().as_secs_f64(),
        cpu_user_s: cpu.user_s,
        cpu_sys_s: cpu.sys_s,
        backends: backends
            .into_iter()
            .zip(&result.backends)
            .map(|((addr, weight), b)| BackendStats {
                addr,
                weight,
                connections: b.connections,
                bytes_to: b.bytes_to,
                bytes_from: b.bytes_from,
                connect_errors: Some(b.connect_errors),
                reset_unhealthy: Some(b.reset_unhealthy),
                went_down: Some(b.went_down),
                healthy: Some(b.healthy),
                ..Default::default()
            })
            .collect(),
    };
    finish(args, &stats)
}

/// Connects once to every backend: warns about each one that does not
/// answer, and fails (exit 1) when none does.
fn check_backends(balancer: &Balancer) -> Result<(), Exit> {
    let timeout = std::time::Duration::from_secs(1);
    let mut failures = Vec::new();
    for b in balancer.backends() {
        if let Err(e) = std::net::TcpStream::connect_timeout(&b.addr, timeout) {
            failures.push(format!("{} ({e})", b.addr));
        }
    }
    if failures.len() == balancer.backends().len() {
        return Err(anyhow!("no backend is reachable: {}", failures.join(", ")).into());
    }
    for f in &failures {
        eprintln!(
            "connlab gateway: warning: backend {f} does not answer; connections sent to it will fail until it does"
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splice_flag_and_io_mode_combine() {
        assert_eq!(proxy_io(None, false), Ok(ProxyIo::Copy));
        assert_eq!(proxy_io(None, true), Ok(ProxyIo::Splice));
        assert_eq!(proxy_io(Some(ProxyIo::Uring), false), Ok(ProxyIo::Uring));
        assert_eq!(proxy_io(Some(ProxyIo::Splice), true), Ok(ProxyIo::Splice));
        assert!(proxy_io(Some(ProxyIo::Uring), true).is_err());
        assert_eq!(parse_io("uring"), Ok(ProxyIo::Uring));
        assert!(parse_io("epoll").is_err());
    }
}
