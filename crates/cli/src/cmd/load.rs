//! `connlab load`: the locality load generator.

use crate::cmd::output::{print_summary, with_progress, write_outputs, OutputArgs};
use crate::units::{parse_duration, parse_size_u32};
use crate::Exit;
use anyhow::{anyhow, Context};
use clap::Args;
use connlab_loadgen::{ActivePolicy, FileSet, IoPath, LoadError, Progress, Rate, Workload};
use connlab_measure::{ActiveRatio, Arrival, Shard};
use connlab_os::{CpuList, Shutdown};
use connlab_proto::Protocol;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, ToSocketAddrs};
use std::process::ExitCode;
use std::time::{Duration, SystemTime};

/// The workload flags shared by `load` and `run`.
#[derive(Args, Debug, Clone)]
pub(crate) struct WorkloadArgs {
    /// Connections opened before measuring.
    #[arg(short = 'c', long, default_value_t = 100)]
    pub(crate) connections: usize,
    /// Share of connections carrying traffic (communication locality): 0.0625 or 1/16.
    #[arg(long, default_value = "1")]
    pub(crate) active_ratio: ActiveRatio,
    /// Request size, header included (CLB1), e.g. 128 or 1KiB.
    #[arg(long, visible_alias = "req-size", default_value = "128", value_parser = parse_size_u32)]
    pub(crate) request_size: u32,
    /// Response size asked for, e.g. 10KiB.
    #[arg(long, visible_alias = "resp-size", default_value = "10KiB", value_parser = parse_size_u32)]
    pub(crate) response_size: u32,
    /// Requests per second in total (open loop), or `max` for closed loop with --depth.
    #[arg(long, default_value = "1000")]
    pub(crate) rate: RateArg,
    /// Closed loop (--rate max): requests outstanding per active connection.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    pub(crate) depth: u32,
    /// Open-loop arrivals: fixed intervals or poisson.
    #[arg(long, default_value = "fixed")]
    pub(crate) arrival: Arrival,
    /// Measured time, e.g. 10s, 2m.
    #[arg(short = 'd', long, default_value = "10s", value_parser = parse_duration)]
    pub(crate) duration: Duration,
    /// Time at full load before measuring (not recorded).
    #[arg(long, default_value = "1s", value_parser = parse_duration)]
    pub(crate) warmup: Duration,
    /// Wire format: clb1 or http.
    #[arg(long, default_value = "clb1")]
    pub(crate) protocol: Protocol,
    /// HTTP request target [default: /bytes/{response-size}].
    #[arg(long)]
    pub(crate) path: Option<String>,
    /// HTTP: draw each request's path from this file set (manifest.csv of
    /// `connlab webset generate`, or its directory) instead of one --path;
    /// results gain service latency per size class.
    #[arg(long, value_name = "FILE")]
    pub(crate) manifest: Option<std::path::PathBuf>,
    /// With --manifest: how files are chosen: manifest (its weight column),
    /// uniform, zipf or zipf:EXPONENT (over the manifest's order).
    #[arg(long, default_value = "manifest", requires = "manifest")]
    pub(crate) popularity: String,
    /// HTTP without keep-alive: every request on a new connection
    /// (Connection: close), --connections workers at once; latency includes
    /// the connect. Each request leaves a TIME_WAIT socket on the client: at
    /// high rates spread over --source-addrs, or ephemeral ports run out.
    #[arg(long)]
    pub(crate) connection_per_request: bool,
    /// Local addresses to spread connections over: 127.0.0.2-127.0.0.9 or a comma list.
    #[arg(long)]
    pub(crate) source_addrs: Option<AddrList>,
    /// Seed of the active-set choice and of Poisson arrivals.
    #[arg(long, default_value_t = 1)]
    pub(crate) seed: u64,
    /// The writer spins (instead of sleeping) this long before each send: timers
    /// here fire 25-100 us late.
    #[arg(long, default_value = "100us", value_parser = parse_duration)]
    pub(crate) spin: Duration,
    /// Which connections carry requests: `fixed` (a seeded active set, the
    /// locality paper) or `rotating` (closed loop only: the ratio caps how many
    /// connections have a request outstanding; each next request goes to a
    /// random idle connection, the polling paper).
    #[arg(long, default_value = "fixed")]
    pub(crate) active_policy: ActivePolicy,
    /// Run the writer thread under SCHED_FIFO at this priority (1-99), so it
    /// preempts the reader and other client processes on its CPU (needs root).
    #[arg(long, value_name = "PRIO", value_parser = clap::value_parser!(i32).range(1..=99))]
    pub(crate) writer_priority: Option<i32>,
    /// How long to wait for outstanding responses after the last send.
    #[arg(long, default_value = "2s", value_parser = parse_duration)]
    pub(crate) drain_timeout: Duration,
}

/// `--rate` value.
#[derive(Clone, Copy, Debug)]
pub(crate) enum RateArg {
    PerSecond(f64),
    Max,
}

/// `--source-addrs` value.
#[derive(Clone, Debug)]
pub(crate) struct AddrList(Vec<IpAddr>);

/// Flags of `connlab load`.
#[derive(Args, Debug)]
#[command(after_help = "\
Opens every connection first, chooses ceil(ratio x N) active ones (seeded), then sends
on a schedule: a writer thread sleeps and spins to each instant, a reader thread times
every response. Reports service latency (complete - send), corrected latency
(complete - scheduled), send lag (send - scheduled) and the send-timing deviation.

Examples:
  connlab load --target 127.0.0.1:7070 -c 1000 --active-ratio 1/16 --rate 2000 -d 10s
  connlab load --target 127.0.0.1:8080 --protocol http -c 100 --rate max --depth 1 --json out.json

Shards (one workload over several client processes or machines; merge with `connlab merge`):
  at=$(( $(date +%s) + 5 ))
  for i in 1 2 3; do
    ssh client$i connlab load --target 10.0.0.1:7070 -c 3000 --rate 6000 \
      --shard $i/3 --start-at $at --json shard$i.json &
  done; wait
  connlab merge shard*.json --json merged.json")]
pub(crate) struct LoadArgs {
    /// Server address, e.g. 127.0.0.1:7070 or localhost:8080.
    #[arg(long)]
    target: String,
    #[command(flatten)]
    workload: WorkloadArgs,
    /// Pin the writer to the first CPU of LIST and the reader to the last.
    #[arg(long, value_name = "LIST")]
    cpu: Option<CpuList>,
    /// Run the i-th of N slices of the workload (its connections, active set
    /// and rate), e.g. 2/5; every shard takes the whole run's flags.
    #[arg(long, value_name = "i/N")]
    shard: Option<Shard>,
    /// Start measuring (warm-up first) at this wall-clock instant: Unix
    /// seconds (e.g. 1763900000.5) or +DURATION from now; aligns shards.
    #[arg(long, value_name = "WHEN", value_parser = parse_start_at)]
    start_at: Option<SystemTime>,
    /// Fail the run (exit 1, with a warning) when more than this share of
    /// the measured window's requests end in an error (error status, reset,
    /// no answer, ...); 1 accepts any.
    #[arg(long, value_name = "RATIO", default_value_t = DEFAULT_MAX_ERROR_RATIO, value_parser = parse_error_ratio)]
    max_error_ratio: f64,
    /// How the reader waits for responses: epoll, or uring (multishot
    /// receives into a provided-buffer ring, and in closed loop each next
    /// request sent from the same ring; fails if io_uring is unavailable).
    /// The open-loop writer's pacing is the same for both.
    #[arg(long, value_name = "PATH", default_value = "epoll")]
    io: IoPath,
    #[command(flatten)]
    output: OutputArgs,
}

/// `--max-error-ratio` by default: one failed request in a hundred.
pub(crate) const DEFAULT_MAX_ERROR_RATIO: f64 = 0.01;

fn parse_error_ratio(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(r) if (0.0..=1.0).contains(&r) => Ok(r),
        _ => Err(format!(
            "{s:?} is not a ratio: give a share of requests from 0 to 1, e.g. 0.01"
        )),
    }
}

/// The furthest `--start-at` may lie ahead: shards are aligned seconds
/// apart, so an hour is a typo (milliseconds given as seconds), not a plan.
pub(crate) const MAX_START_WAIT: Duration = Duration::from_secs(3600);

/// `--start-at`: Unix seconds, or `+DURATION` from now; at most
/// [`MAX_START_WAIT`] ahead.
pub(crate) fn parse_start_at(s: &str) -> Result<SystemTime, String> {
    let at = if let Some(rel) = s.strip_prefix('+') {
        SystemTime::now() + parse_duration(rel)?
    } else {
        match s.parse::<f64>() {
            Ok(t) if t.is_finite() && (0.0..1e11).contains(&t) => {
                SystemTime::UNIX_EPOCH + Duration::from_secs_f64(t)
            }
            _ => {
                return Err(format!(
                    "{s:?} is not an instant: give Unix seconds (e.g. $(( $(date +%s) + 5 ))) or +DURATION (e.g. +2s)"
                ))
            }
        }
    };
    match at.duration_since(SystemTime::now()) {
        Ok(ahead) if ahead > MAX_START_WAIT => Err(format!(
            "{s:?} is {:.0} s from now: at most {} s ahead (shards are started seconds apart)",
            ahead.as_secs_f64(),
            MAX_START_WAIT.as_secs()
        )),
        _ => Ok(at),
    }
}

impl std::str::FromStr for RateArg {
    type Err = String;

    /// Requests per second, or `max`.
    fn from_str(s: &str) -> Result<Self, String> {
        if s.eq_ignore_ascii_case("max") {
            return Ok(RateArg::Max);
        }
        match s.parse::<f64>() {
            Ok(r) if r > 0.0 && r.is_finite() => Ok(RateArg::PerSecond(r)),
            _ => Err(format!(
                "{s:?} is not a rate: give requests per second (e.g. 2000) or `max`"
            )),
        }
    }
}

impl std::str::FromStr for AddrList {
    type Err = String;

    /// Addresses and `A-B` ranges of IPv4 addresses, separated by commas.
    fn from_str(s: &str) -> Result<Self, String> {
        let mut out = Vec::new();
        for item in s.split(',') {
            let item = item.trim();
            if let Some((a, b)) = item.split_once('-') {
                let a: Ipv4Addr = a
                    .trim()
                    .parse()
                    .map_err(|_| format!("bad address {a:?} in {s:?}"))?;
                let b: Ipv4Addr = b
                    .trim()
                    .parse()
                    .map_err(|_| format!("bad address {b:?} in {s:?}"))?;
                let (lo, hi) = (u32::from(a), u32::from(b));
                if lo > hi || hi - lo > 65_535 {
                    return Err(format!("bad address range {item:?}: the first must not exceed the last, at most 65536 addresses"));
                }
                out.extend((lo..=hi).map(|x| IpAddr::V4(Ipv4Addr::from(x))));
            } else {
                out.push(
                    item.parse()
                        .map_err(|_| format!("bad address {item:?} in {s:?}"))?,
                );
            }
        }
        Ok(AddrList(out))
    }
}

impl WorkloadArgs {
    /// The library workload for `target`.
    pub(crate) fn workload(
        &self,
        target: SocketAddr,
        cpus: Option<CpuList>,
    ) -> Result<Workload, Exit> {
        let rate = match self.rate {
            RateArg::PerSecond(r) => Rate::PerSecond(r),
            RateArg::Max => Rate::Max { depth: self.depth },
        };
        if self.protocol == Protocol::Clb1 && (self.request_size < 16 || self.response_size < 16) {
            return Err(Exit::usage(anyhow!(
                "--request-size and --response-size are at least 16 bytes with --protocol clb1 (the header)"
            )));
        }
        let files = match &self.manifest {
            None => None,
            Some(_) if self.protocol != Protocol::Http => {
                return Err(Exit::usage(anyhow!("--manifest needs --protocol http")))
            }
            Some(_) if self.path.is_some() => {
                return Err(Exit::usage(anyhow!(
                    "--manifest and --path both say which path to request: give one"
                )))
            }
            Some(path) => Some(
                FileSet::open(path, &self.popularity, self.seed)
                    .map_err(|e| Exit::usage(anyhow!(e)))?,
            ),
        };
        Ok(Workload {
            connection_per_request: self.connection_per_request,
            files,
            target,
            connections: self.connections,
            active_ratio: self.active_ratio,
            request_size: self.request_size,
            response_size: self.response_size,
            rate,
            arrival: self.arrival,
            duration: self.duration,
            warmup: self.warmup,
            protocol: self.protocol,
            path: self
                .path
                .clone()
                .unwrap_or_else(|| format!("/bytes/{}", self.response_size)),
            source_addrs: self.source_addrs.clone().map(|a| a.0).unwrap_or_default(),
            seed: self.seed,
            spin: self.spin,
            drain_timeout: self.drain_timeout,
            cpus,
            shard: Shard::WHOLE,
            start_at: None,
            writer_priority: self.writer_priority,
            active_policy: self.active_policy,
            io: IoPath::Epoll,
        })
    }
}

/// Runs the load generator against `--target`.
pub(crate) fn run(args: LoadArgs) -> Result<ExitCode, Exit> {
    let target = resolve(&args.target)?;
    let mut workload = args.workload.workload(target, args.cpu.clone())?;
    workload.shard = args.shard.unwrap_or(Shard::WHOLE);
    workload.start_at = args.start_at;
    workload.io = args.io;
    raise_limit();
    if let (true, Rate::PerSecond(rate)) = (workload.connection_per_request, workload.rate) {
        let share = rate / f64::from(workload.shard.count.max(1));
        let seconds = (workload.duration + workload.warmup).as_secs_f64();
        if let Some(w) = connlab_loadgen::per_request_port_warning(
            share,
            seconds,
            &workload.source_addrs,
            connlab_loadgen::Capacity::current(),
        ) {
            eprintln!("connlab load: warning: {w}");
        }
    }
    let shutdown = Shutdown::on_termination_signals().context("installing signal handlers")?;
    if let Some(ahead) = args
        .start_at
        .and_then(|at| at.duration_since(SystemTime::now()).ok())
        .filter(|d| *d >= Duration::from_secs(1))
    {
        eprintln!(
            "connlab load: waiting {:.1} s for --start-at before the warm-up begins (Ctrl-C stops)",
            ahead.as_secs_f64()
        );
    }
    let outcome = drive(&workload, &shutdown, &args.output, args.max_error_ratio)?;
    Ok(outcome)
}

/// Runs one workload with progress, writes its outputs, prints its summary,
/// and maps the outcome to an exit code (0; 1 when the server failed or more
/// than `max_error_ratio` of the requests failed; 130 when interrupted, at
/// any moment, the results so far written).
pub(crate) fn drive(
    w: &Workload,
    shutdown: &Shutdown,
    output: &OutputArgs,
    max_error_ratio: f64,
) -> Result<ExitCode, Exit> {
    let progress = Progress::default();
    output.check()?;
    let mut records = output.open_records()?;
    let outcome = with_progress(&progress, w, || {
        connlab_loadgen::run(
            w,
            shutdown,
            &progress,
            records
                .as_mut()
                .map(|r| r as &mut dyn connlab_loadgen::RecordSink),
        )
    });
    // A failed run leaves no records file (not even its header): the
    // temporary file goes away unrenamed.
    if let (Some(r), Ok(_)) = (records, &outcome) {
        r.finish().context("writing --records")?;
    }
    let mut outcome = match outcome {
        Ok(o) => o,
        Err(e @ LoadError::Capacity(_)) | Err(e @ LoadError::Workload(_)) => {
            return Err(Exit::usage(anyhow::Error::new(e)))
        }
        Err(e) => return Err(Exit::from(anyhow::Error::new(e))),
    };
    // A Ctrl-C after the reader finished (while draining) still marks the run.
    if shutdown.requested() && !outcome.result.interrupted {
        outcome.result.interrupted = true;
        outcome
            .result
            .warnings
            .push("the run was interrupted: figures cover only the time it ran".into());
    }
    let too_many_errors = outcome
        .result
        .requests
        .error_warning(max_error_ratio, w.files.is_some());
    if let Some(warning) = &too_many_errors {
        outcome.result.warnings.push(warning.clone());
    }
    write_outputs(output, &outcome)?;
    print_summary(&outcome.result);
    let r = &outcome.result;
    Ok(if r.interrupted {
        ExitCode::from(130)
    } else if r.peer_failed || too_many_errors.is_some() {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

fn resolve(target: &str) -> Result<SocketAddr, Exit> {
    target
        .to_socket_addrs()
        .map_err(|e| Exit::usage(anyhow!("--target {target:?}: {e}")))?
        .next()
        .ok_or_else(|| Exit::usage(anyhow!("--target {target:?} resolves to no address")))
}

/// Raises the soft open-files limit to the hard one; the library's capacity check reports what fits.
pub(crate) fn raise_limit() {
    if let Ok(l) = connlab_os::raise_nofile_limit() {
        if l.raised() {
            eprintln!(
                "connlab: open-files limit raised from {} to {}",
                l.soft_before, l.soft
            );
        }
    }
}
