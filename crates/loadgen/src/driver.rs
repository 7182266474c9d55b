//! A whole load run: check capacity, open every connection, choose the active
//! set, run the writer and reader threads, and assemble the [`LoadResult`]
//! with its honesty warnings.

mod threads;

use crate::checks::{arrival_check, Claimed};
use crate::connect::open_all;
use crate::preflight::{check_capacity, Capacity};
use crate::reader::ReaderOutcome;
use crate::result::{
    ConnectionCounts, CpuSeconds, Histograms, LoadResult, Placement, RequestCounts, RunConfig,
    ShardInfo, HISTOGRAM_ENCODING, LOAD_SCHEMA,
};
use crate::workload::{ActivePolicy, IoPath, Progress, Rate, RecordSink, Workload};
use crate::writer::WriterOutcome;
use connlab_measure::{
    choose_active, Arrival, DeviationSummary, LatencyHistogram, ShardSlice, Summary,
};
use connlab_os::{CpuTimes, Environment, Shutdown};
use connlab_proto::Protocol;
use std::io::{self, Write};
use std::os::fd::AsRawFd;
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant, SystemTime};
use threads::{Targets, Threads};

/// CDF resolution in the result.
const CDF_POINTS: usize = 21;

/// Why a load run could not produce a result.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The run does not fit this machine's limits.
    #[error("{0}")]
    Capacity(String),
    /// The workload is inconsistent.
    #[error("invalid workload: {0}")]
    Workload(String),
    /// Not one connection could be established.
    #[error("no connection to {target} could be established ({failed} failed; first error: {first_error})")]
    NoConnections {
        /// The server address.
        target: String,
        /// Connections that failed.
        failed: u64,
        /// The first error seen.
        first_error: String,
    },
    /// The I/O path asked for (`--io uring`) is not available on this machine.
    #[error("{0}")]
    Unavailable(String),
    /// An OS facility failed.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: &'static str,
        /// The error.
        source: io::Error,
    },
}

/// A finished run: the result and the interval histograms for `--hdr-log`.
pub struct LoadOutcome {
    /// The summary document.
    pub result: LoadResult,
    intervals: Vec<(Duration, Duration, hdrhistogram::Histogram<u64>)>,
}

impl LoadOutcome {
    /// Writes the service-latency histograms, one per second, as an
    /// HdrHistogram interval log (V2 compressed), in microseconds.
    pub fn write_interval_log(&self, out: &mut impl Write) -> io::Result<()> {
        use hdrhistogram::serialization::interval_log::IntervalLogWriterBuilder;
        use hdrhistogram::serialization::V2DeflateSerializer;
        let mut serializer = V2DeflateSerializer::new();
        let mut writer = IntervalLogWriterBuilder::new()
            .add_comment("connlab load: service latency, values in nanoseconds")
            .with_start_time(SystemTime::now())
            .with_max_value_divisor(1e6)
            .begin_log_with(out, &mut serializer)?;
        for (start, len, h) in &self.intervals {
            writer
                .write_histogram(h, *start, *len, None)
                .map_err(|e| io::Error::other(format!("{e:?}")))?;
        }
        Ok(())
    }
}

/// Runs `workload` until it ends or `shutdown` trips.
pub fn run(
    w: &Workload,
    shutdown: &Shutdown,
    progress: &Progress,
    records: Option<&mut dyn RecordSink>,
) -> Result<LoadOutcome, LoadError> {
    validate(w)?;
    if w.connection_per_request {
        return Ok(run_per_request(w, shutdown, progress));
    }
    let set = match set_up(w, shutdown, progress)? {
        Prepared::Ready(set) => set,
        Prepared::Interrupted(outcome) => return Ok(*outcome),
    };
    let raw: Vec<_> = set.opened.fds.iter().map(|f| f.as_raw_fd()).collect();
    let threads = Threads::new(w, raw.len(), &set.active);
    let late_start = wait_for_start(w.start_at, shutdown);
    if shutdown.requested() {
        return Ok(interrupted_in_setup(w, set.to_open, &set.opened));
    }
    progress.measuring.store(true, Relaxed);
    let cpu_before = CpuTimes::self_and_children();
    let (start, aligned) = anchor(w, late_start);
    let started_unix_s = match (w.start_at, aligned) {
        (Some(at), true) => unix_seconds(at),
        _ => unix_seconds(SystemTime::now()),
    };
    let targets = Targets {
        fds: &raw,
        active: &set.active,
    };
    let (writer_out, reader_out) =
        threads::measure(w, targets, threads, start, shutdown, progress, records)?;
    let wall = start.elapsed();
    let cpu = CpuTimes::self_and_children().since(&cpu_before);
    let intervals = reader_out.intervals.clone();
    let (writer_out, writer_policy) = writer_out;
    let mut result = assemble(
        w,
        set.to_open,
        &set.opened,
        &set.active,
        writer_out,
        reader_out,
        cpu,
        wall,
    );
    result.started_unix_s = started_unix_s;
    match writer_policy {
        Ok(policy) => result.placement.writer_policy = Some(policy),
        Err(warning) => result.warnings.push(warning),
    }
    warn_late_start(&mut result, w, late_start, aligned);
    drop(set);
    Ok(LoadOutcome { result, intervals })
}

/// `--connection-per-request`: blocking workers, a connection per request.
fn run_per_request(w: &Workload, shutdown: &Shutdown, progress: &Progress) -> LoadOutcome {
    let (opened, wr, rd, cpu, wall) = crate::per_request::run(w, shutdown, progress);
    // Every worker is active; none holds a connection between requests.
    let workers: Vec<usize> = (0..w.connections).collect();
    let result = assemble(w, w.connections, &opened, &workers, wr, rd, cpu, wall);
    LoadOutcome {
        result,
        intervals: Vec::new(),
    }
}

/// The connections of a run, open, and its active set.
struct SetUp {
    /// Connections this run (or shard) asked for.
    to_open: usize,
    opened: crate::connect::Opened,
    /// Indexes into `opened.fds`.
    active: Vec<usize>,
}

/// How the set-up ended.
enum Prepared {
    /// Connections open and an active set chosen.
    Ready(SetUp),
    /// Ctrl-C during set-up: what was measured is the set-up itself.
    Interrupted(Box<LoadOutcome>),
}

/// Checks the machine can hold the run, opens every connection and chooses
/// the active set.
fn set_up(w: &Workload, shutdown: &Shutdown, progress: &Progress) -> Result<Prepared, LoadError> {
    let slice = ShardSlice::of(w.connections, w.active_ratio, w.seed, w.shard)
        .map_err(|e| LoadError::Workload(e.to_string()))?;
    let to_open = slice.global.len();
    if w.io == IoPath::Uring {
        crate::uring_reader::probe().map_err(LoadError::Unavailable)?;
    }
    check_capacity(to_open, &w.source_addrs, Capacity::current()).map_err(LoadError::Capacity)?;
    let opened =
        open_all(w.target, to_open, &w.source_addrs, progress, shutdown).map_err(|source| {
            LoadError::Io {
                what: "opening connections",
                source,
            }
        })?;
    if shutdown.requested() {
        let outcome = interrupted_in_setup(w, to_open, &opened);
        return Ok(Prepared::Interrupted(Box::new(outcome)));
    }
    if opened.fds.is_empty() {
        return Err(LoadError::NoConnections {
            target: w.target.to_string(),
            failed: opened.failed,
            first_error: opened.first_error.unwrap_or_else(|| "interrupted".into()),
        });
    }
    let n = opened.fds.len();
    let active: Vec<usize> = if w.shard.is_whole() {
        // Failed connections shrink the set the ratio applies to.
        choose_active(n, w.active_ratio, w.seed)
    } else {
        // A shard keeps its slice of the whole run's active set.
        slice
            .active_local
            .iter()
            .copied()
            .filter(|&a| a < n)
            .collect()
    };
    if active.is_empty() {
        return Err(LoadError::NoConnections {
            target: w.target.to_string(),
            failed: opened.failed,
            first_error: "none of this shard's active connections was established".into(),
        });
    }
    Ok(Prepared::Ready(SetUp {
        to_open,
        opened,
        active,
    }))
}

/// The run's start instant, and whether it keeps the common `--start-at`.
/// A shard that woke a little late keeps the common start: its schedule is
/// anchored at the --start-at instant and its first sends, inside the
/// warm-up, catch up. Later than half the warm-up (connection set-up took
/// longer than the lead), it starts now rather than burst a backlog.
fn anchor(w: &Workload, late_start: Option<Duration>) -> (Instant, bool) {
    match late_start {
        Some(late) if late <= w.warmup / 2 => (
            Instant::now()
                .checked_sub(late)
                .unwrap_or_else(Instant::now),
            true,
        ),
        Some(_) => (Instant::now(), false),
        None => (Instant::now(), true),
    }
}

/// Warns when the run started after `--start-at`: unaligned, or aligned
/// by catching up.
fn warn_late_start(
    result: &mut LoadResult,
    w: &Workload,
    late_start: Option<Duration>,
    aligned: bool,
) {
    match late_start {
        Some(late) if !aligned => result.warnings.push(format!(
            "--start-at was {:.1} ms in the past when the connections were open: this run started \
             late and is not aligned with other shards",
            late.as_secs_f64() * 1e3
        )),
        // Closed loop has no schedule to keep: a late wake-up only shortens the warm-up.
        Some(late) if late > Duration::from_millis(1) && !matches!(w.rate, Rate::Max { .. }) => {
            result.warnings.push(format!(
            "this shard woke {:.1} ms after --start-at; its schedule kept the common start and \
             its first sends (in the warm-up) caught up",
                late.as_secs_f64() * 1e3
            ))
        }
        _ => {}
    }
}

/// The result of a run stopped before its first send: the connection counts
/// and no requests.
fn interrupted_in_setup(
    w: &Workload,
    requested: usize,
    opened: &crate::connect::Opened,
) -> LoadOutcome {
    let rd = ReaderOutcome {
        interrupted: true,
        ..ReaderOutcome::default()
    };
    let mut result = assemble(
        w,
        requested,
        opened,
        &[],
        WriterOutcome::default(),
        rd,
        CpuTimes::default(),
        Duration::ZERO,
    );
    result.started_unix_s = unix_seconds(SystemTime::now());
    result.warnings.push(format!(
        "the run was interrupted during connection set-up ({} of {} connections established): \
         no request was sent",
        result.connections.established, requested
    ));
    LoadOutcome {
        result,
        intervals: Vec::new(),
    }
}

/// Waits for the wall-clock instant `at` (in slices, so that Ctrl-C is
/// noticed); how late it already was, if it had passed.
fn wait_for_start(at: Option<SystemTime>, shutdown: &Shutdown) -> Option<Duration> {
    let at = at?;
    loop {
        if shutdown.requested() {
            return None;
        }
        match at.duration_since(SystemTime::now()) {
            Ok(left) if left.is_zero() => return None,
            Ok(left) => std::thread::sleep(left.min(Duration::from_millis(20))),
            Err(past) => {
                let late = past.duration();
                return Some(late);
            }
        }
    }
}

/// Seconds since the Unix epoch.
pub(crate) fn unix_seconds(t: SystemTime) -> f64 {
    t.duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

fn validate(w: &Workload) -> Result<(), LoadError> {
    let bad = |m: String| Err(LoadError::Workload(m));
    if w.connections == 0 {
        return bad("--connections must be at least 1".into());
    }
    if w.protocol == Protocol::Clb1 && (w.request_size < 16 || w.response_size < 16) {
        return bad(format!(
            "CLB1 requests and responses are at least 16 bytes (header included); got --request-size {} --response-size {}",
            w.request_size, w.response_size
        ));
    }
    if let Rate::Max { depth: 0 } = w.rate {
        return bad("--depth must be at least 1".into());
    }
    if w.active_policy == ActivePolicy::Rotating && w.rate != (Rate::Max { depth: 1 }) {
        return bad(
            "--active-policy rotating needs --rate max and --depth 1: the active ratio then caps \
             how many connections have a request outstanding, each new request going to a \
             connection drawn at random"
                .into(),
        );
    }
    if w.duration.is_zero() {
        return bad("--duration must be above zero".into());
    }
    if w.connection_per_request && w.protocol != Protocol::Http {
        return bad("--connection-per-request needs --protocol http".into());
    }
    if w.connection_per_request && w.io != IoPath::Epoll {
        return bad(
            "--io uring applies to held connections; --connection-per-request uses blocking \
             workers (use --io epoll)"
                .into(),
        );
    }
    if w.connection_per_request && w.active_policy == ActivePolicy::Rotating {
        return bad("--connection-per-request has no connection set to rotate over".into());
    }
    Ok(())
}

#[allow(clippy::too_many_arguments)]
fn assemble(
    w: &Workload,
    requested: usize,
    opened: &crate::connect::Opened,
    active: &[usize],
    wr: WriterOutcome,
    rd: ReaderOutcome,
    cpu: CpuTimes,
    wall: Duration,
) -> LoadResult {
    let measured_s = if rd.interrupted {
        wall.saturating_sub(w.warmup).as_secs_f64().max(1e-9)
    } else {
        w.duration.as_secs_f64()
    };
    let mut errors: std::collections::BTreeMap<String, u64> =
        rd.errors.iter().map(|(k, v)| (k.to_string(), *v)).collect();
    let mut warmup_errors: std::collections::BTreeMap<String, u64> = rd
        .warmup_errors
        .iter()
        .map(|(k, v)| (k.to_string(), *v))
        .collect();
    for (warmup, kind, n) in [
        (false, "client_queue_full", wr.queue_full),
        (false, "send_failed", wr.send_failed),
        (true, "client_queue_full", wr.warmup_queue_full),
        (true, "send_failed", wr.warmup_send_failed),
    ] {
        let map = if warmup {
            &mut warmup_errors
        } else {
            &mut errors
        };
        if n > 0 {
            map.insert(kind.into(), n);
        }
    }
    let open_loop = matches!(w.rate, Rate::PerSecond(_));
    let send_lag = if open_loop {
        wr.send_lag.summary()
    } else {
        Summary::default()
    };
    let deviation = wr
        .deviation
        .as_ref()
        .map_or(DeviationSummary::default(), |d| d.summary());
    let deviation_cdf = wr
        .deviation
        .as_ref()
        .map_or_else(Vec::new, |d| d.cdf(CDF_POINTS));
    let service = rd.service.summary();
    let response_bytes = rd.bytes_received as f64;
    // Per-request runs keep no connection open: their workers stand for them.
    let established = if w.connection_per_request {
        w.connections
    } else {
        opened.fds.len()
    } as u64;
    let (writer_cpu, reader_cpu) = (wr.cpu.total_s(), rd.cpu.total_s());
    let histograms = Histograms {
        encoding: HISTOGRAM_ENCODING.into(),
        service_latency: rd.service.to_base64(),
        corrected_latency: if open_loop {
            rd.corrected.to_base64()
        } else {
            rd.service.to_base64()
        },
        send_lag: wr.send_lag.to_base64(),
        send_deviation: wr.deviation.as_ref().map(|d| d.histogram().to_parts()),
    };
    let gaps = wr.gaps.into_values();
    let run_checks = crate::checks::run_checks(
        arrival_check(Claimed::of(w.rate, w.arrival, w.shard.count), &gaps),
        rd.windows.to_vec(),
        gaps,
        rd.latency_sample.into_values(),
        &rd.service,
    );
    let shard = (!w.shard.is_whole()).then(|| ShardInfo {
        index: w.shard.index,
        count: w.shard.count,
        connections: requested as u64,
        active: active.len() as u64,
        rate_per_s: match w.rate {
            Rate::PerSecond(r) => Some(r / f64::from(w.shard.count)),
            Rate::Max { .. } => None,
        },
    });
    // Closed loop counts a request of the window when its response comes.
    let measured_sent = if open_loop {
        wr.measured_sent
    } else {
        rd.measured_completed
    };
    let mut result = LoadResult {
        schema: LOAD_SCHEMA.into(),
        config: RunConfig {
            target: w.target.to_string(),
            protocol: w.protocol.name().into(),
            path: (w.protocol == Protocol::Http).then(|| w.path.clone()),
            connections: w.connections as u64,
            active_ratio: w.active_ratio.get(),
            active_policy: w.active_policy.name().to_string(),
            connection_per_request: w.connection_per_request,
            io: w.io.name().to_string(),
            manifest: w.files.as_ref().map(|f| f.source.clone()),
            manifest_files: w.files.as_ref().map(|f| f.mix.len() as u64),
            popularity: w.files.as_ref().map(|f| f.popularity.clone()),
            request_size_bytes: u64::from(w.request_size),
            response_size_bytes: u64::from(w.response_size),
            rate_per_s: match w.rate {
                Rate::PerSecond(r) => Some(r),
                Rate::Max { .. } => None,
            },
            depth: match w.rate {
                Rate::Max { depth } => Some(depth),
                Rate::PerSecond(_) => None,
            },
            arrival: match (w.rate, w.arrival) {
                (Rate::Max { .. }, _) => "closed".into(),
                (_, Arrival::Fixed) => "fixed".into(),
                (_, Arrival::Poisson) => "poisson".into(),
            },
            duration_s: w.duration.as_secs_f64(),
            warmup_s: w.warmup.as_secs_f64(),
            spin_us: w.spin.as_secs_f64() * 1e6,
            source_addrs: w.source_addrs.iter().map(|a| a.to_string()).collect(),
            seed: w.seed,
        },
        environment: Environment::capture(),
        placement: Placement {
            writer_cpu: wr.cpu_seen,
            reader_cpu: rd.cpu_seen,
            pinned: w.cpus.as_ref().map(|c| c.to_string()),
            writer_policy: None,
        },
        connections: ConnectionCounts {
            requested: requested as u64,
            established,
            failed: opened.failed,
            active: active.len() as u64,
            idle_closed_by_peer: rd.idle_closed_by_peer,
            setup_s: opened.elapsed.as_secs_f64(),
            setup_rate_per_s: established as f64 / opened.elapsed.as_secs_f64().max(1e-9),
            first_error: opened.first_error.clone(),
        },
        requests: RequestCounts {
            sent: measured_sent,
            completed: rd.measured_completed,
            errors,
            warmup_sent: (wr.sent + rd.closed_loop_sent).saturating_sub(measured_sent),
            warmup_completed: rd.completed.saturating_sub(rd.measured_completed),
            warmup_errors,
        },
        achieved_rate_per_s: rd.measured_completed as f64 / measured_s,
        service_latency_us: service,
        corrected_latency_us: if open_loop {
            rd.corrected.summary()
        } else {
            service
        },
        send_lag_us: send_lag,
        send_deviation_us: deviation,
        send_deviation_cdf: deviation_cdf,
        service_latency_cdf: rd.service.cdf(CDF_POINTS),
        client_cpu_s: CpuSeconds {
            user: cpu.user_s,
            sys: cpu.sys_s,
        },
        writer_cpu_s: writer_cpu,
        reader_cpu_s: reader_cpu,
        requests_per_client_cpu_s: rd.completed as f64 / cpu.total_s().max(1e-9),
        client_max_rss_kib: connlab_os::max_rss_kib(),
        bytes_sent: wr.bytes_sent + rd.closed_loop_bytes_sent,
        bytes_received: rd.bytes_received,
        throughput_mbit_s: response_bytes * 8.0 / 1e6 / wall.as_secs_f64().max(1e-9),
        wall_s: wall.as_secs_f64(),
        interrupted: rd.interrupted,
        peer_failed: rd.peer_failed,
        warnings: Vec::new(),
        started_unix_s: 0.0,
        shard,
        merged: None,
        histograms,
        size_classes: size_classes(&rd.classes),
        run_checks: Some(run_checks),
    };
    result.warnings = warnings(w, &result, opened.hit_fd_limit, wall);
    result
}

/// The per-size-class results of a `--manifest` run (classes with requests).
pub(crate) fn size_classes(hists: &[LatencyHistogram]) -> Vec<crate::result::SizeClassResult> {
    hists
        .iter()
        .zip(crate::request::SIZE_CLASSES)
        .filter(|(h, _)| !h.is_empty())
        .map(|(h, (label, lo, hi))| crate::result::SizeClassResult {
            class: label.to_string(),
            min_bytes: lo,
            max_bytes: (hi != u64::MAX).then(|| hi - 1),
            requests: h.len(),
            service_latency_us: h.summary(),
            histogram: h.to_base64(),
        })
        .collect()
}

/// Hyperfine-style warnings: reasons the numbers may not mean what they seem.
fn warnings(w: &Workload, r: &LoadResult, hit_fd_limit: bool, wall: Duration) -> Vec<String> {
    let mut out = Vec::new();
    if let Rate::PerSecond(rate) = w.rate {
        let interval_us = 1e6 / rate * f64::from(w.shard.count);
        if r.send_lag_us.p99 > interval_us / 10.0 {
            out.push(format!(
                "send lag p99 {:.1} us is above a tenth of the send interval ({:.1} us): the client \
                 did not keep its schedule, so corrected latency includes client delay",
                r.send_lag_us.p99, interval_us
            ));
        }
    }
    let wall_s = wall.as_secs_f64();
    // A writer whose send interval is shorter than its spin never sleeps: its
    // full CPU is by design, not saturation.
    let spins_by_design =
        matches!(w.rate, Rate::PerSecond(rate) if 1.0 / rate <= w.spin.as_secs_f64());
    for (name, cpu, by_design) in [
        ("writer", r.writer_cpu_s, spins_by_design),
        ("reader", r.reader_cpu_s, false),
    ] {
        if wall_s > 0.5 && cpu > 0.9 * wall_s && !by_design {
            out.push(format!(
                "the client's {name} thread used {:.0}% of a CPU: the client may be the bottleneck",
                100.0 * cpu / wall_s
            ));
        }
    }
    if r.requests.errors.contains_key("no_local_port") {
        out.push(
            "connects failed for want of a local port: each request leaves a TIME_WAIT socket \
             for 60 s, so the ephemeral ports (net.ipv4.ip_local_port_range) ran out; lower the \
             rate or spread over more --source-addrs"
                .into(),
        );
    }
    if r.connections.established < r.connections.requested {
        out.push(format!(
            "only {} of {} connections were established ({} failed{})",
            r.connections.established,
            r.connections.requested,
            r.connections.failed,
            r.connections
                .first_error
                .as_ref()
                .map(|e| format!("; first error: {e}"))
                .unwrap_or_default()
        ));
    }
    let ports = Capacity::current().ephemeral_ports;
    if w.source_addrs.len() <= 1 && r.connections.requested > ports / 4 {
        out.push(format!(
            "{} connections from one source address use {:.0}% of its {ports} ephemeral ports: the \
             kernel's port search slows connection set-up ({:.0}/s here); spread them with --source-addrs",
            r.connections.requested,
            100.0 * r.connections.requested as f64 / ports as f64,
            r.connections.setup_rate_per_s
        ));
    }
    if hit_fd_limit {
        out.push(format!(
            "the open-files limit ({}) was reached while connecting",
            r.environment.nofile_soft
        ));
    }
    let source = r.environment.clock_source.as_str();
    if !matches!(
        source,
        "tsc" | "kvm-clock" | "arch_sys_counter" | "hyperv_clocksource_tsc_page"
    ) {
        out.push(format!(
            "clock source {source:?} may be coarse or slow to read; times below a few microseconds are unreliable"
        ));
    }
    if r.interrupted {
        out.push("the run was interrupted: figures cover only the time it ran".into());
    }
    if r.peer_failed {
        out.push("active connections failed during the run (server closed or reset them)".into());
    }
    out
}
