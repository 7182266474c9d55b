//! The statistics a server run ends with, as written to `--stats` (JSON).

use crate::counters::Counters;
use crate::profile::TimingSummary;
use connlab_os::{CpuTimes, Environment, NofileLimit};
use connlab_proto::ErrorKind;
use serde::Serialize;
use std::collections::BTreeMap;
use std::sync::atomic::Ordering::Relaxed;

/// Version tag of the stats JSON.
pub const STATS_SCHEMA: &str = "connlab.serve.stats/1";

/// What a server run did. Field names carry their units.
#[derive(Clone, Debug, Serialize)]
pub struct ServerStats {
    /// [`STATS_SCHEMA`].
    pub schema: &'static str,
    /// I/O model (`epoll`, ...).
    pub engine: String,
    /// Edge-triggered epoll.
    pub edge_triggered: bool,
    /// Wire format.
    pub protocol: String,
    /// The address served.
    pub listen: String,
    /// Connections accepted and served.
    pub connections_accepted: u64,
    /// Most connections open at once.
    pub connections_peak: u64,
    /// Connections accepted and closed at once because descriptors ran out.
    pub connections_shed: u64,
    /// The same count under the name every component's stats use (the
    /// gateway's and the I/O server's `shed`).
    pub shed: u64,
    /// Stretches of time at the descriptor limit: each began with a shed
    /// connection after a served one (or as the first accept).
    pub fd_limit_episodes: u64,
    /// Other failed `accept` calls.
    pub accept_errors: u64,
    /// Complete requests answered (HTTP 400 replies to bad input excluded).
    pub requests: u64,
    /// Connections closed for bad input, by kind.
    pub protocol_errors: BTreeMap<&'static str, u64>,
    /// `--header-timeout` in seconds (`null`: off).
    pub header_timeout_s: Option<f64>,
    /// Connections closed because a request head did not complete within
    /// `header_timeout_s` of its first byte.
    pub header_timeouts: u64,
    /// `--idle-timeout` in seconds (`null`: off).
    pub idle_timeout_s: Option<f64>,
    /// Connections closed because no byte moved either way for `idle_timeout_s`.
    pub idle_timeouts: u64,
    /// Bytes received from clients.
    pub bytes_in: u64,
    /// Bytes sent to clients.
    pub bytes_out: u64,
    /// User CPU seconds of the server and its reaped children.
    pub cpu_user_s: f64,
    /// System CPU seconds of the server and its reaped children.
    pub cpu_sys_s: f64,
    /// Wall-clock seconds from ready to stop.
    pub wall_s: f64,
    /// Requests per server CPU second (0 when no CPU was used).
    pub requests_per_cpu_s: f64,
    /// Peak resident memory of the server process (user space), KiB; for the
    /// processes engine, of the parent only.
    pub max_rss_kib: u64,
    /// The CPUs the server could run on: its affinity when it started
    /// serving (`--cpu`, or what it inherited), ascending. Its threads and
    /// children inherit it; with `--workers` each loop is pinned to one of
    /// them when a list is given.
    pub cpus_allowed: Vec<usize>,
    /// The CPUs the server did run on, ascending: every CPU an event loop
    /// woke on (once per loop turn), and for processes and threads every
    /// CPU the accept loop woke on or a connection's thread or child
    /// received on (once per blocking receive), read with `sched_getcpu`.
    /// Helper threads (the RT-signal library's, io_uring's kernel workers)
    /// are not included. Compare engines CPU for CPU with it.
    pub cpus_used: Vec<usize>,
    /// The open-files limit in force.
    pub nofile: NofileLimit,
    /// Where this was measured.
    pub environment: Environment,
    /// With `--profile-poll`: whether the engine has a polling call to time
    /// (`false` for processes and threads).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub profile_poll: Option<bool>,
    /// With `--profile-poll`: time per polling call, microseconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub poll_call_us: Option<TimingSummary>,
    /// With `--profile-poll`: CPU time of the server thread per polling call
    /// (the call's cost without the time it slept), microseconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub poll_call_cpu_us: Option<TimingSummary>,
    /// With `--profile-poll`: time per server cycle (the polling call plus
    /// the I/O it reported), microseconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cycle_us: Option<TimingSummary>,
    /// `--engine rtsig` only: what the RT-signal library did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rtsig: Option<RtSigStats>,
    /// Event loops that served (1 unless `--workers`).
    pub workers: usize,
    /// With `--workers` above 1: how the loops shared the address.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub accept: Option<&'static str>,
    /// With `--workers` above 1: each loop's figures, in worker order.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub per_worker: Vec<WorkerStats>,
    /// With `--workers` above 1: the most connections one loop accepted
    /// over the mean per loop (1: an even spread; `SO_REUSEPORT` hashes
    /// connections and can spread them unevenly).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub imbalance: Option<f64>,
}

/// One event loop's share of a run (`--workers`).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct WorkerStats {
    /// The loop's index, from 0.
    pub worker: usize,
    /// The CPU it was pinned to, if any.
    pub cpu: Option<usize>,
    /// Connections it accepted.
    pub connections: u64,
    /// Requests it answered.
    pub requests: u64,
    /// Its thread's CPU seconds (user + system).
    pub cpu_s: f64,
    /// Its thread's voluntary context switches: the times it slept and was
    /// woken.
    pub wakeups: u64,
}

/// The most connections one worker accepted over the mean (`None` with no
/// connection at all).
pub fn imbalance(workers: &[WorkerStats]) -> Option<f64> {
    let total: u64 = workers.iter().map(|w| w.connections).sum();
    let max = workers.iter().map(|w| w.connections).max()?;
    (total > 0).then(|| max as f64 / (total as f64 / workers.len() as f64))
}

/// The RT-signal library's counters for a run (`--engine rtsig`).
#[derive(Clone, Copy, Debug, Serialize)]
pub struct RtSigStats {
    /// Real-time signals read from the queue.
    pub signals: u64,
    /// Signal-queue overflows (plain SIGIO) received.
    pub overflows: u64,
    /// Times every descriptor was marked ready because of overflows.
    pub recoveries: u64,
}

/// The run facts that are not counters.
pub(crate) struct RunFacts {
    pub(crate) engine: String,
    pub(crate) edge_triggered: bool,
    pub(crate) protocol: String,
    pub(crate) listen: String,
    pub(crate) cpu: CpuTimes,
    pub(crate) wall_s: f64,
    pub(crate) nofile: NofileLimit,
    pub(crate) header_timeout: Option<std::time::Duration>,
    pub(crate) idle_timeout: Option<std::time::Duration>,
    pub(crate) cpus_allowed: Vec<usize>,
}

impl ServerStats {
    pub(crate) fn collect(c: &Counters, facts: RunFacts) -> ServerStats {
        let requests = c.requests.load(Relaxed);
        let cpu_total = facts.cpu.total_s();
        ServerStats {
            schema: STATS_SCHEMA,
            engine: facts.engine,
            edge_triggered: facts.edge_triggered,
            protocol: facts.protocol,
            listen: facts.listen,
            connections_accepted: c.accepted.load(Relaxed),
            connections_peak: c.peak.load(Relaxed),
            connections_shed: c.shed.load(Relaxed),
            shed: c.shed.load(Relaxed),
            fd_limit_episodes: c.fd_limit_episodes.load(Relaxed),
            accept_errors: c.accept_errors.load(Relaxed),
            requests,
            protocol_errors: ErrorKind::ALL
                .iter()
                .filter(|k| **k != ErrorKind::BadResponse)
                .map(|k| (k.name(), c.protocol_errors[k.index()].load(Relaxed)))
                .collect(),
            header_timeout_s: facts
                .header_timeout
                .filter(|d| !d.is_zero())
                .map(|d| d.as_secs_f64()),
            header_timeouts: c.header_timeouts.load(Relaxed),
            idle_timeout_s: facts
                .idle_timeout
                .filter(|d| !d.is_zero())
                .map(|d| d.as_secs_f64()),
            idle_timeouts: c.idle_timeouts.load(Relaxed),
            bytes_in: c.bytes_in.load(Relaxed),
            bytes_out: c.bytes_out.load(Relaxed),
            cpu_user_s: facts.cpu.user_s,
            cpu_sys_s: facts.cpu.sys_s,
            wall_s: facts.wall_s,
            requests_per_cpu_s: if cpu_total > 0.0 {
                requests as f64 / cpu_total
            } else {
                0.0
            },
            max_rss_kib: connlab_os::max_rss_kib(),
            cpus_allowed: facts.cpus_allowed,
            cpus_used: c.cpus_used(),
            nofile: facts.nofile,
            environment: Environment::capture(),
            profile_poll: None,
            poll_call_us: None,
            poll_call_cpu_us: None,
            cycle_us: None,
            workers: 1,
            accept: None,
            per_worker: Vec::new(),
            imbalance: None,
            rtsig: c.rtsig.used.load(Relaxed).then(|| RtSigStats {
                signals: c.rtsig.signals.load(Relaxed),
                overflows: c.rtsig.overflows.load(Relaxed),
                recoveries: c.rtsig.recoveries.load(Relaxed),
            }),
        }
    }
}
