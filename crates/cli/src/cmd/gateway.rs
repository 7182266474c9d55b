//! `connlab gateway`: the load-balancing gateway in front of N backends.

use crate::Exit;
use anyhow::{anyhow, Context};
use clap::{Args, ValueEnum};
use connlab_gateway::{
    Backend, GatewayEvent, GatewayMode, GatewayOptions, GatewayRunError, PolicyKind, ProxyIo,
};
use connlab_os::Shutdown;
use std::io::Write as _;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

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

/// Runs the gateway until SIGINT/SIGTERM.
pub(crate) fn run(args: GatewayArgs) -> Result<ExitCode, Exit> {
    crate::cmd::check_output("--stats", args.stats.as_deref())?;
    let backends: Vec<Backend> = args
        .backends
        .iter()
        .map(|b| b.parse::<Backend>())
        .collect::<Result<_, _>>()
        .map_err(|e| Exit::usage(anyhow!("--backend {e}")))?;
    let options = GatewayOptions {
        listen: args.listen,
        backends,
        policy: args.policy,
        mode: match args.mode {
            Mode::Nat => GatewayMode::Nat,
            Mode::Proxy => GatewayMode::Proxy,
        },
        masquerade: args.masquerade,
        health_interval: args.health_interval,
        health_timeout: args.health_timeout,
        health_fails: args.health_fails,
        buffer: args.buffer,
        splice: args.splice,
        io: args.io,
        uring_min_wait: args.uring_min_wait,
        idle_timeout: args.idle_timeout,
        turn_budget: args.turn_budget,
    };
    let shutdown = Shutdown::on_termination_signals().context("installing signal handlers")?;
    let n = options.backends.len();
    let stats = connlab_gateway::run::run(&options, &shutdown, &mut |event| {
        match event {
            GatewayEvent::Note(line) => eprintln!("connlab gateway: {line}"),
            GatewayEvent::NatReady { table, ruleset } => {
                println!("installed nftables table ip {table}:");
                print!("{ruleset}");
                println!(
                    "gateway: nat mode, {} -> {n} backends, policy {}; Ctrl-C stops",
                    args.listen,
                    args.policy.name()
                );
            }
            GatewayEvent::ProxyReady(addr) => println!(
                "gateway: proxy mode{}, {addr} -> {n} backends, policy {}; Ctrl-C stops",
                match connlab_gateway::run::proxy_io(args.io, args.splice) {
                    Ok(ProxyIo::Splice) => " (splice)",
                    Ok(ProxyIo::Uring) => " (io_uring)",
                    _ => "",
                },
                args.policy.name()
            ),
        }
        let _ = std::io::stdout().flush();
    })
    .map_err(|e| match e {
        GatewayRunError::Usage(_) => Exit::usage(anyhow!(e)),
        GatewayRunError::Failed(_) => Exit::from(anyhow!(e)),
    })?;
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
    for (n, what) in stats.limits_hit() {
        eprintln!("limits hit: {n} {what}");
    }
    if let Some(path) = &args.stats {
        crate::cmd::write_json("--stats", path, &stats)?;
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn io_mode_names_parse() {
        assert_eq!(parse_io("uring"), Ok(ProxyIo::Uring));
        assert!(parse_io("epoll").is_err());
    }
}
