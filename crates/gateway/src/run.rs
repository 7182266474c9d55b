//! One gateway run as `connlab gateway` drives it: the options checked,
//! the backends probed, then [`nat`] or [`proxy`](crate::proxy)
//! until shutdown, and the statistics of `--stats`
//! ([`GatewayStats`], schema `connlab.gateway.stats/1`).

use crate::forward::{process_alive, Forwarding};
use crate::{nat, Backend, Balancer, NatRules, PolicyKind, ProxyConfig, ProxyIo};
use connlab_os::Shutdown;
use serde::Serialize;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

/// How the gateway forwards.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GatewayMode {
    /// The kernel forwards: nftables DNAT in this namespace.
    Nat,
    /// A user-space L4 proxy with health checks.
    Proxy,
}

/// Everything `connlab gateway` was given, before checking.
#[derive(Clone, Debug)]
pub struct GatewayOptions {
    /// The virtual address clients connect to.
    pub listen: SocketAddr,
    /// The backends.
    pub backends: Vec<Backend>,
    /// The balancing policy.
    pub policy: PolicyKind,
    /// nat or proxy.
    pub mode: GatewayMode,
    /// nat: source-NAT toward the backends.
    pub masquerade: bool,
    /// proxy: time between health checks.
    pub health_interval: Duration,
    /// proxy: connect timeout of a health check.
    pub health_timeout: Duration,
    /// proxy: failed checks that take a backend out.
    pub health_fails: u32,
    /// proxy: bytes buffered per direction per connection.
    pub buffer: u64,
    /// proxy: `--splice`.
    pub splice: bool,
    /// proxy: `--io`.
    pub io: Option<ProxyIo>,
    /// proxy `--io uring`: how long to wait for more completions.
    pub uring_min_wait: Duration,
    /// proxy: idle time after which a connection is reset.
    pub idle_timeout: Duration,
    /// proxy: bytes one connection may move per loop turn.
    pub turn_budget: u64,
}

/// Why a gateway run did not happen or ended early.
#[derive(Debug, thiserror::Error)]
pub enum GatewayRunError {
    /// The options cannot work (a bad combination or value, no root for
    /// nat): the user's to fix.
    #[error("{0}")]
    Usage(String),
    /// The run failed (no backend reachable, the kernel refused, ...).
    #[error("{0}")]
    Failed(String),
}

/// What a run tells its caller as it goes.
pub enum GatewayEvent<'a> {
    /// A line worth showing (a stale table swept, a backend not answering).
    Note(String),
    /// nat: the table is installed (its name and ruleset) and forwarding on.
    NatReady {
        /// The nftables table.
        table: &'a str,
        /// The ruleset as installed.
        ruleset: &'a str,
    },
    /// proxy: listening on this address.
    ProxyReady(SocketAddr),
}

/// One backend's line of the statistics (nat: packet counters; proxy:
/// errors and health).
#[derive(Serialize, Default, Debug)]
pub struct BackendStats {
    /// ADDR:PORT.
    pub addr: String,
    /// Its weight.
    pub weight: u32,
    /// Connections sent to it.
    pub connections: u64,
    /// Bytes toward it.
    pub bytes_to: u64,
    /// Bytes from it.
    pub bytes_from: u64,
    /// nat: packets toward it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub packets_to: Option<u64>,
    /// nat: packets from it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub packets_from: Option<u64>,
    /// proxy: failed connects.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub connect_errors: Option<u64>,
    /// proxy: connections reset when it went down.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reset_unhealthy: Option<u64>,
    /// proxy: times it was taken out of rotation.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub went_down: Option<u64>,
    /// proxy: healthy at the end.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub healthy: Option<bool>,
}

/// `--stats`: what the gateway did.
#[derive(Serialize, Debug)]
pub struct GatewayStats {
    /// `connlab.gateway.stats/1`.
    pub schema: &'static str,
    /// nat or proxy.
    pub mode: &'static str,
    /// The policy's name.
    pub policy: &'static str,
    /// The virtual address.
    pub listen: String,
    /// nat: the nftables table.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub table: Option<String>,
    /// nat: whether connections were source-NATed.
    pub masquerade: bool,
    /// proxy: connections accepted.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub accepted: Option<u64>,
    /// proxy: clients with no healthy backend.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub no_backend: Option<u64>,
    /// proxy: clients whose every backend refused.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub no_relay: Option<u64>,
    /// proxy: whether the relay spliced.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub splice: Option<bool>,
    /// proxy: copy, splice or uring.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub io: Option<&'static str>,
    /// proxy: connections reset after the idle timeout.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub idle_closed: Option<u64>,
    /// proxy: turns ended at the turn budget.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub turn_budget_hits: Option<u64>,
    /// proxy: clients reset at once because the gateway was out of
    /// descriptors.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shed: Option<u64>,
    /// proxy: stretches of time at the descriptor limit.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fd_limit_episodes: Option<u64>,
    /// Seconds it ran.
    pub wall_s: f64,
    /// User CPU of the gateway and its children, seconds.
    pub cpu_user_s: f64,
    /// System CPU, seconds.
    pub cpu_sys_s: f64,
    /// One line per backend.
    pub backends: Vec<BackendStats>,
}

impl GatewayStats {
    /// The limits the run hit, each as `(count, what)` naming its flag
    /// (proxy only: idle resets, turn budget, shed clients).
    pub fn limits_hit(&self) -> Vec<(u64, &'static str)> {
        [
            (self.idle_closed, "connections reset after --idle-timeout"),
            (self.turn_budget_hits, "turns ended at --turn-budget"),
            (
                self.shed,
                "clients reset at once: the gateway was out of descriptors",
            ),
        ]
        .into_iter()
        .filter_map(|(n, what)| n.filter(|&n| n > 0).map(|n| (n, what)))
        .collect()
    }
}

/// The proxy I/O mode `--io` and `--splice` ask for together.
pub fn proxy_io(io: Option<ProxyIo>, splice: bool) -> Result<ProxyIo, String> {
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

fn usage(text: impl ToString) -> GatewayRunError {
    GatewayRunError::Usage(text.to_string())
}

fn failed(text: impl ToString) -> GatewayRunError {
    GatewayRunError::Failed(text.to_string())
}

/// Checks `options`, then runs the gateway until `shutdown`, telling
/// `events` what happens; returns its statistics. Nothing is changed on
/// the machine before every check has passed.
pub fn run(
    options: &GatewayOptions,
    shutdown: &Shutdown,
    events: &mut dyn FnMut(GatewayEvent<'_>),
) -> Result<GatewayStats, GatewayRunError> {
    let o = options;
    let balancer = Balancer::new(o.policy, o.backends.clone()).map_err(usage)?;
    if o.mode != GatewayMode::Proxy {
        if o.splice {
            return Err(usage(
                "--splice applies to --mode proxy only (nat forwards in the kernel)",
            ));
        }
        if o.io.is_some() {
            return Err(usage(
                "--io applies to --mode proxy only (nat forwards in the kernel)",
            ));
        }
    }
    let io = proxy_io(o.io, o.splice).map_err(usage)?;
    if o.mode == GatewayMode::Proxy {
        check_backends(&balancer, events)?;
        return run_proxy(o, io, balancer, shutdown, events);
    }
    // nat: refuse what the kernel rule cannot do before touching the kernel.
    nat::ruleset("check", o.listen, &balancer, o.masquerade).map_err(usage)?;
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Err(usage(
            "nat mode programs nftables and needs root (CAP_NET_ADMIN): run as root or with sudo",
        ));
    }
    check_backends(&balancer, events)?;
    let (forwarding, swept) = Forwarding::system()
        .and_then(|f| f.enable(process_alive))
        .map_err(|e| failed(format!("enabling IPv4 forwarding: {e}")))?;
    for f in &swept.files {
        events(GatewayEvent::Note(format!(
            "a killed gateway left {}: ip_forward restored to {}",
            f.display(),
            swept.original.as_deref().unwrap_or("?")
        )));
    }
    let cpu0 = connlab_os::CpuTimes::self_and_children();
    let started = Instant::now();
    // On an error here `forwarding` is dropped, which puts the value back.
    let (rules, text) = NatRules::install(o.listen, &balancer, o.masquerade).map_err(failed)?;
    events(GatewayEvent::NatReady {
        table: rules.table(),
        ruleset: &text,
    });
    while !shutdown.wait(Duration::from_secs(1)) {}
    let counters = rules.counters();
    let table = rules.table().to_string();
    let removed = rules.remove();
    let restored = forwarding.restore(process_alive);
    let cpu = connlab_os::CpuTimes::self_and_children().since(&cpu0);
    let counters = counters.map_err(|e| failed(format!("reading the counters: {e}")))?;
    removed.map_err(|e| failed(format!("removing table {table}: {e}")))?;
    restored.map_err(|e| failed(format!("restoring ip_forward: {e}")))?;
    Ok(GatewayStats {
        schema: "connlab.gateway.stats/1",
        mode: "nat",
        policy: o.policy.name(),
        listen: o.listen.to_string(),
        table: Some(table),
        masquerade: o.masquerade,
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
    })
}

/// The proxy's configuration from the options (`--buffer`,
/// `--idle-timeout`, `--turn-budget` and the health checks in range).
fn proxy_config(o: &GatewayOptions, io: ProxyIo) -> Result<ProxyConfig, GatewayRunError> {
    let buffer = usize::try_from(o.buffer)
        .ok()
        .filter(|b| (512..=(64 << 20)).contains(b))
        .ok_or_else(|| usage(format!("--buffer {}: between 512 B and 64 MiB", o.buffer)))?;
    if o.idle_timeout.is_zero() {
        return Err(usage("--idle-timeout must be above 0"));
    }
    let turn_budget = usize::try_from(o.turn_budget)
        .ok()
        .filter(|b| (1024..=(1 << 30)).contains(b))
        .ok_or_else(|| {
            usage(format!(
                "--turn-budget {}: between 1 KiB and 1 GiB",
                o.turn_budget
            ))
        })?;
    let config = ProxyConfig {
        listen: o.listen,
        buffer,
        health_interval: o.health_interval,
        health_timeout: o.health_timeout,
        health_fails: o.health_fails,
        io,
        uring_min_wait: o.uring_min_wait,
        idle_timeout: o.idle_timeout,
        turn_budget,
    };
    // Health-check settings that would storm the backends or take them all
    // out are usage errors, before anything starts.
    config
        .validate()
        .map_err(|e| usage(format!("{e} (--health-interval, --health-timeout)")))?;
    Ok(config)
}

/// `--mode proxy`: runs the user-space proxy until `shutdown`.
fn run_proxy(
    o: &GatewayOptions,
    io: ProxyIo,
    balancer: Balancer,
    shutdown: &Shutdown,
    events: &mut dyn FnMut(GatewayEvent<'_>),
) -> Result<GatewayStats, GatewayRunError> {
    let config = proxy_config(o, io)?;
    let backends: Vec<(String, u32)> = balancer
        .backends()
        .iter()
        .map(|b| (b.addr.to_string(), b.weight))
        .collect();
    let policy = balancer.kind();
    let cpu0 = connlab_os::CpuTimes::self_and_children();
    let started = Instant::now();
    let result = crate::proxy::run(
        &config,
        balancer,
        shutdown.wake_fd(),
        || shutdown.requested(),
        |addr| events(GatewayEvent::ProxyReady(addr)),
    )
    .map_err(|e| failed(format!("proxy: {e}")))?;
    let cpu = connlab_os::CpuTimes::self_and_children().since(&cpu0);
    Ok(GatewayStats {
        schema: "connlab.gateway.stats/1",
        mode: "proxy",
        policy: policy.name(),
        listen: o.listen.to_string(),
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
    })
}

/// Connects once to every backend: a note for each one that does not
/// answer, and a failure when none does.
fn check_backends(
    balancer: &Balancer,
    events: &mut dyn FnMut(GatewayEvent<'_>),
) -> Result<(), GatewayRunError> {
    let timeout = Duration::from_secs(1);
    let failures: Vec<String> = balancer
        .backends()
        .iter()
        .filter_map(|b| {
            std::net::TcpStream::connect_timeout(&b.addr, timeout)
                .err()
                .map(|e| format!("{} ({e})", b.addr))
        })
        .collect();
    if failures.len() == balancer.backends().len() {
        return Err(failed(format!(
            "no backend is reachable: {}",
            failures.join(", ")
        )));
    }
    for f in failures {
        events(GatewayEvent::Note(format!(
            "warning: backend {f} does not answer; connections sent to it will fail until it does"
        )));
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
    }

    fn options(mode: GatewayMode) -> GatewayOptions {
        GatewayOptions {
            listen: "127.0.0.1:0".parse().unwrap(),
            backends: vec!["127.0.0.1:1".parse().unwrap()],
            policy: PolicyKind::IpMod,
            mode,
            masquerade: false,
            health_interval: Duration::from_secs(1),
            health_timeout: Duration::from_millis(500),
            health_fails: 1,
            buffer: 16 * 1024,
            splice: false,
            io: None,
            uring_min_wait: Duration::ZERO,
            idle_timeout: Duration::from_secs(300),
            turn_budget: 256 * 1024,
        }
    }

    #[test]
    fn proxy_only_options_are_usage_errors_in_nat_mode() {
        let shutdown = Shutdown::new().unwrap();
        let mut o = options(GatewayMode::Nat);
        o.splice = true;
        let e = run(&o, &shutdown, &mut |_| ()).unwrap_err();
        assert!(
            matches!(e, GatewayRunError::Usage(ref t) if t.contains("--splice")),
            "{e}"
        );
    }

    #[test]
    fn proxy_limits_are_checked_before_anything_starts() {
        let mut o = options(GatewayMode::Proxy);
        o.buffer = 100;
        let e = proxy_config(&o, ProxyIo::Copy).unwrap_err();
        assert!(e.to_string().contains("--buffer 100"), "{e}");
        o.buffer = 16 * 1024;
        o.turn_budget = 10;
        assert!(proxy_config(&o, ProxyIo::Copy).is_err());
        o.turn_budget = 1 << 20;
        assert!(proxy_config(&o, ProxyIo::Copy).is_ok());
    }
}
