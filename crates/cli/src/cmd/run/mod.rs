//! `connlab run`: the main job in one command. Compares engines (and, with
//! `--against`, servers already running) under the user's workload: each
//! engine's `connlab serve` child on loopback (port 0), all under one
//! placement (server on one CPU, the client's threads on another), every
//! row measured once per round for `--repetitions` rounds with the order
//! rotated between rounds. Prints a table with spreads and a verdict
//! (`connlab_lab::compare`) and, with `--out`, writes every run's JSON and
//! an HTML page (`connlab_report::render_run`).

mod output;

use crate::cmd::child::{server_cpu_s, ServerChild};
use crate::cmd::load::{raise_limit, RateArg, WorkloadArgs};
use crate::cmd::output::with_progress;
use crate::Exit;
use anyhow::{anyhow, Context};
use clap::Args;
use connlab_lab::compare::{compare, Better, Comparison, RowSamples, CONFIDENCE};
use connlab_lab::validity::{self, Evidence, ScheduleEvidence, Validity, ValidityLimits};
use connlab_loadgen::{LoadOutcome, LoadResult, Progress, Workload};
use connlab_os::process as procfs;
use connlab_os::window::{WindowCpu, WindowSnapshot};
use connlab_os::{CpuList, Shutdown};
use connlab_server::EngineKind;
use output::{print_run_line, print_table, write_page, write_run};
use serde::Serialize;
use std::net::{SocketAddr, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::time::Duration;

/// Flags of `connlab run`.
#[derive(Args, Debug)]
#[command(after_help = "\
Defaults: one cell of the locality paper (1,000 connections, active ratio 1/16, 128 B
requests, 10 KiB responses, 2,000 req/s) for epoll, poll, select and threads, 3 repetitions
of 1 s warm-up + 4 s measured each: 12 runs, about 70 s. Time is about engines x
repetitions x (warm-up + duration + 0.5 s); `--engines all` (7 engines) takes about 115 s.
--quick measures 1 s after 0.5 s of warm-up: about 25 s for the default engines.

Every run uses one placement, recorded in each result: the server on --server-cpu, the
client's writer and reader on --client-cpu. By default, with three CPUs or more the
server, the writer and the reader get one each; with two, the server takes the second
and writer and reader share the first, the writer under SCHED_FIFO 10 when run as root
(so the reader never delays a send); at a rate where the writer never sleeps, the reader
joins the server instead.

Every run checks its own validity (completion, schedule, steal, foreign_cpu, arrivals,
stationary); a run that fails is measured once more and, failing again, left out and
marked. Rows are ranked by median service latency (open loop) or achieved rate (--rate
max), with the spread over repetitions; the ratio to the best is taken in each round and
its median shown with a distribution-free interval (95% from six rounds, else the range
of the rounds with its coverage). A row ties the best when that interval includes 1 and
differs when it does not, with what dominates (server CPU per request, wake-ups per
request, memory per connection).

Examples:
  connlab run
  connlab run --engines all -c 2000 --active-ratio 1 --quick
  connlab run --engines epoll,threads --rate max --depth 4 --repetitions 5 --out results/
  connlab run --protocol http --against nginx=127.0.0.1:8080 --against-pid $(cat nginx.pid)")]
pub(crate) struct RunArgs {
    /// Engines to compare: one name, a comma list, or `all`.
    #[arg(
        long,
        visible_alias = "engine",
        default_value = "epoll,poll,select,threads"
    )]
    engines: EngineList,
    /// Edge-triggered epoll for the epoll engine.
    #[arg(long)]
    edge_triggered: bool,
    #[command(flatten)]
    workload: WorkloadArgs,
    /// Rounds: every row is measured once per round, the order rotated
    /// between rounds.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=100))]
    repetitions: u32,
    /// Short runs: 0.5 s warm-up and 1 s measured (instead of --warmup and
    /// --duration).
    #[arg(long, conflicts_with_all = ["duration", "warmup"])]
    quick: bool,
    /// A server already running to measure as a row, as ADDR or LABEL=ADDR
    /// (e.g. nginx=127.0.0.1:8080); repeatable. It must speak --protocol.
    #[arg(long, value_name = "[LABEL=]ADDR")]
    against: Vec<Against>,
    /// The process id of the n-th --against server (its master process):
    /// its process tree is pinned to --server-cpu for each run (the old
    /// affinity restored after), and its CPU, wake-ups and memory are read
    /// from /proc. Repeatable, in the order of --against.
    #[arg(long, value_name = "PID")]
    against_pid: Vec<u32>,
    /// Pin the server to these CPUs [default: the second CPU allowed].
    #[arg(long, value_name = "LIST")]
    server_cpu: Option<CpuList>,
    /// Pin the client writer to the first CPU of LIST and its reader to the
    /// last [default: see below].
    #[arg(long, value_name = "LIST")]
    client_cpu: Option<CpuList>,
    /// Keep the CPUs awake with an idle-priority spinner each while
    /// measuring: `auto` on virtual machines, where a halted vCPU waits for
    /// the host to wake it (send-lag p99 620-740 us without, 1-26 us with,
    /// measured on a 2-vCPU VM), `on` or `off`.
    #[arg(long, default_value = "auto", value_name = "auto|on|off")]
    keep_awake: connlab_os::awake::KeepAwakeMode,
    /// Write every run's JSON (DIR/runs/), the comparison
    /// (DIR/comparison.json) and a page (DIR/index.html).
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
}

/// `--engines` value.
#[derive(Clone, Debug)]
pub(crate) struct EngineList(Vec<EngineKind>);

impl std::str::FromStr for EngineList {
    type Err = String;

    /// `all`, or engine names separated by commas.
    fn from_str(s: &str) -> Result<Self, String> {
        if s == "all" {
            return Ok(EngineList(EngineKind::ALL.to_vec()));
        }
        s.split(',')
            .map(|e| e.trim().parse())
            .collect::<Result<Vec<_>, _>>()
            .map(EngineList)
    }
}

/// `--against` value: a label and an address.
#[derive(Clone, Debug)]
pub(crate) struct Against {
    label: Option<String>,
    addr: SocketAddr,
}

impl std::str::FromStr for Against {
    type Err = String;

    /// `[LABEL=]ADDR`: the label names files, the address is resolved now.
    fn from_str(s: &str) -> Result<Self, String> {
        let (label, addr) = match s.split_once('=') {
            Some((l, a)) => (Some(l.trim()), a.trim()),
            None => (None, s.trim()),
        };
        if let Some(l) = label {
            let ok = !l.is_empty()
                && l.chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
            if !ok {
                return Err(format!(
                    "label {l:?}: use letters, digits, '-', '_' or '.' (it names files)"
                ));
            }
        }
        let addr = addr
            .to_socket_addrs()
            .map_err(|e| format!("{addr:?}: {e}"))?
            .next()
            .ok_or_else(|| format!("{addr:?} resolves to no address"))?;
        Ok(Against {
            label: label.map(str::to_string),
            addr,
        })
    }
}

/// Gives `run` the defaults of the locality paper's cell where they differ
/// from `load`'s, so that `connlab run --help` shows the values in force.
pub(crate) fn with_run_defaults(cmd: clap::Command) -> clap::Command {
    cmd.mut_arg("connections", |a| a.default_value("1000"))
        .mut_arg("active_ratio", |a| a.default_value("1/16"))
        .mut_arg("rate", |a| a.default_value("2000"))
        .mut_arg("duration", |a| a.default_value("4s"))
}

/// The placement every run shares, as recorded in each result.
#[derive(Clone, Debug, PartialEq, Serialize)]
struct RunPlacement {
    /// CPUs the server is pinned to (`null`: not pinned).
    server_cpus: Option<String>,
    /// CPUs of the client's writer (first) and reader (last) (`null`: not pinned).
    client_cpus: Option<String>,
    /// The writer's scheduling asked for (`SCHED_FIFO 10`, `SCHED_OTHER`).
    writer_policy: String,
    /// Idle-priority spinners kept the CPUs awake (`--keep-awake`).
    keep_awake: bool,
    /// How it was chosen.
    note: String,
}

impl RunPlacement {
    fn text(&self) -> String {
        let client = self.client_cpus.as_deref().unwrap_or("any (not pinned)");
        let (writer, reader) = client.split_once(',').map_or((client, client), |(w, r)| {
            (w, r.rsplit(',').next().unwrap_or(r))
        });
        let clients = if writer == reader {
            format!("client writer and reader on cpu {writer}")
        } else {
            format!("client writer on cpu {writer}, reader on cpu {reader}")
        };
        format!(
            "server on cpu {}, {clients}, writer {}{}",
            self.server_cpus.as_deref().unwrap_or("any (not pinned)"),
            self.writer_policy,
            if self.keep_awake {
                ", CPUs kept awake"
            } else {
                ""
            }
        )
    }
}

/// One row: an engine started here, or a server under test.
#[derive(Clone, Debug)]
enum Row {
    Engine {
        kind: EngineKind,
        label: String,
    },
    Against {
        label: String,
        addr: SocketAddr,
        pid: Option<u32>,
        /// The server's memory before the first round (KiB), the baseline of
        /// every round's memory per connection: read once, because a server
        /// that keeps buffers between rounds would otherwise hide them.
        idle_kib: Option<u64>,
    },
}

impl Row {
    fn label(&self) -> &str {
        match self {
            Row::Engine { label, .. } | Row::Against { label, .. } => label,
        }
    }
}

/// The server-side figures of one run.
#[derive(Clone, Debug, Default, Serialize)]
struct ServerFigures {
    /// Process id (the master for a server under test).
    pid: Option<u32>,
    /// Whether its process tree ran on the placement's server CPUs.
    pinned: bool,
    /// CPU seconds (user + system).
    cpu_s: Option<f64>,
    /// Where `cpu_s` comes from.
    cpu_source: Option<String>,
    /// Voluntary context switches (times it slept and was woken).
    voluntary_switches: Option<u64>,
    /// Proportional set size of the process tree before connecting, KiB.
    memory_idle_kib: Option<u64>,
    /// The same, with every connection open and the load running, KiB.
    memory_loaded_kib: Option<u64>,
    /// Responses the client completed (warm-up and measured window), the
    /// denominator of the per-request figures.
    requests: u64,
    /// CPU microseconds per request.
    cpu_us_per_request: Option<f64>,
    /// Voluntary context switches per request.
    wakeups_per_request: Option<f64>,
    /// (loaded - idle) memory per established connection, bytes.
    memory_per_connection_bytes: Option<f64>,
    /// The server's `--stats` (engines only).
    stats: Option<serde_json::Value>,
}

/// One run's file in `DIR/runs/`.
#[derive(Serialize)]
struct RunRecord<'a> {
    schema: &'static str,
    label: &'a str,
    kind: &'static str,
    /// Round, from 1.
    round: u32,
    /// Position within the round, from 1.
    position: usize,
    placement: &'a RunPlacement,
    server: &'a ServerFigures,
    /// The gates this run passed or failed (a run that fails is measured
    /// once more; this is the record of the run kept).
    validity: &'a Validity,
    /// Who used the CPUs over the run.
    window_cpu: Option<&'a WindowCpu>,
    load: &'a LoadResult,
}

/// Version tag of a run file.
const RUN_SCHEMA: &str = "connlab.run/1";

/// One finished run, kept for the table and the page.
struct Done {
    row: usize,
    round: u32,
    result: LoadResult,
    server: ServerFigures,
    validity: Validity,
    file: Option<String>,
}

/// Runs the comparison.
pub(crate) fn run(mut args: RunArgs) -> Result<ExitCode, Exit> {
    if args.against_pid.len() > args.against.len() {
        return Err(Exit::usage(anyhow!(
            "--against-pid given {} times but --against only {}: each pid pairs with the --against in the same position",
            args.against_pid.len(),
            args.against.len()
        )));
    }
    if args.quick {
        args.workload.warmup = Duration::from_millis(500);
        args.workload.duration = Duration::from_secs(1);
    }
    let rows = rows(&args)?;
    let placement = placement(&mut args)?;
    // Check the workload once, before anything starts.
    args.workload
        .workload(SocketAddr::from(([127, 0, 0, 1], 9)), None)?;
    raise_limit();
    // The whole client (progress and sampling threads too) stays off the
    // server's CPU; the load generator pins its writer and reader itself.
    if let Some(c) = placement
        .client_cpus
        .as_deref()
        .and_then(|c| CpuList::parse(c).ok())
    {
        connlab_os::pin_current_process(&c)
            .with_context(|| format!("pinning connlab run to client cpu {c}"))?;
    }
    let shutdown = Shutdown::on_termination_signals().context("installing signal handlers")?;
    let exe = std::env::current_exe().context("locating the connlab binary")?;
    let _awake = keep_awake(&placement)?;
    if let Some(dir) = &args.out {
        std::fs::create_dir_all(dir.join("runs"))
            .with_context(|| format!("creating --out directory {}", dir.display()))?;
    }
    let per_run = args.workload.warmup + args.workload.duration;
    let total = rows.len() as u32 * args.repetitions;
    eprintln!(
        "connlab run: {} rows x {} repetitions = {total} runs of {:.1} s; {}",
        rows.len(),
        args.repetitions,
        per_run.as_secs_f64(),
        placement.text()
    );
    let mut done: Vec<Done> = Vec::new();
    let mut code = ExitCode::SUCCESS;
    'rounds: for round in 1..=args.repetitions {
        let n = rows.len();
        for k in 0..n {
            if shutdown.requested() {
                break 'rounds;
            }
            // Rotate the order by one row per round.
            let i = (k + round as usize - 1) % n;
            let row = &rows[i];
            eprintln!(
                "connlab run: round {round}/{}, {} ({}/{n})",
                args.repetitions,
                row.label(),
                k + 1
            );
            let (mut outcome, mut server, mut window) =
                measure(&exe, row, &args, &placement, &shutdown)?;
            let mut v = run_validity(&outcome.result, window.as_ref(), 1);
            print_run_line(&outcome.result, &server, &v);
            if v.worth_retrying() && !shutdown.requested() {
                eprintln!(
                    "connlab run: round {round}, {}: failed its gates ({}); measuring it once more",
                    row.label(),
                    v.failure_text()
                );
                (outcome, server, window) = measure(&exe, row, &args, &placement, &shutdown)?;
                v = run_validity(&outcome.result, window.as_ref(), 2);
                print_run_line(&outcome.result, &server, &v);
                if !v.valid {
                    eprintln!(
                        "connlab run: round {round}, {}: invalid again, left out of the comparison",
                        row.label()
                    );
                }
            }
            let r = outcome.result;
            if r.interrupted {
                code = ExitCode::from(130);
            } else if r.peer_failed && code == ExitCode::SUCCESS {
                code = ExitCode::from(1);
            }
            let file = match &args.out {
                Some(dir) => Some(write_run(
                    dir,
                    row,
                    round,
                    k + 1,
                    &placement,
                    &server,
                    &v,
                    window.as_ref(),
                    &r,
                )?),
                None => None,
            };
            done.push(Done {
                row: i,
                round,
                result: r,
                server,
                validity: v,
                file,
            });
        }
    }
    let closed_loop = matches!(args.workload.rate, RateArg::Max);
    let comparison = comparison(&rows, &done, args.repetitions, closed_loop);
    print_table(&rows, &done, &comparison, &placement, args.repetitions);
    if let Some(dir) = &args.out {
        write_page(dir, &rows, &done, &comparison, &placement)?;
        eprintln!("connlab run: results in {}", dir.display());
    }
    if shutdown.requested() {
        code = ExitCode::from(130);
    }
    Ok(code)
}

/// `connlab doctor`'s A/A calibration: the first engine of `args` measured
/// `runs` times in a row under `connlab run`'s placement and workload.
/// Returns the placement in words and each run's result and gates.
pub(crate) fn calibrate(
    mut args: RunArgs,
    runs: usize,
    shutdown: &Shutdown,
) -> Result<(String, Vec<(LoadResult, Validity)>), Exit> {
    if args.quick {
        args.workload.warmup = Duration::from_millis(500);
        args.workload.duration = Duration::from_secs(1);
    }
    let rows = rows(&args)?;
    let placement = placement(&mut args)?;
    args.workload
        .workload(SocketAddr::from(([127, 0, 0, 1], 9)), None)?;
    raise_limit();
    let exe = std::env::current_exe().context("locating the connlab binary")?;
    let row = rows
        .first()
        .ok_or_else(|| Exit::usage(anyhow!("no engine to calibrate with")))?;
    let mut out = Vec::new();
    for _ in 0..runs {
        if shutdown.requested() {
            break;
        }
        let (outcome, _, window) = measure(&exe, row, &args, &placement, shutdown)?;
        let v = run_validity(&outcome.result, window.as_ref(), 1);
        out.push((outcome.result, v));
    }
    Ok((placement.text(), out))
}

/// The rows in the order given: engines, then `--against` servers.
fn rows(args: &RunArgs) -> Result<Vec<Row>, Exit> {
    let mut out: Vec<Row> = Vec::new();
    for &kind in &args.engines.0 {
        let label = if kind == EngineKind::Epoll && args.edge_triggered {
            "epoll-et".to_string()
        } else {
            kind.name().to_string()
        };
        out.push(Row::Engine { kind, label });
    }
    for (n, a) in args.against.iter().enumerate() {
        let label = a
            .label
            .clone()
            .unwrap_or_else(|| format!("against{}", n + 1));
        let pid = args.against_pid.get(n).copied();
        out.push(Row::Against {
            label,
            addr: a.addr,
            pid,
            idle_kib: pid.and_then(|p| procfs::memory_kib(&procfs::process_tree(p as i32))),
        });
    }
    for (i, r) in out.iter().enumerate() {
        if out[..i].iter().any(|o| o.label() == r.label()) {
            return Err(Exit::usage(anyhow!(
                "two rows are named {:?}: give each --engines entry once and each --against a LABEL of its own",
                r.label()
            )));
        }
    }
    Ok(out)
}

/// The placement: the flags, else the default that keeps the client on
/// schedule. Three CPUs or more: the server on the second allowed, the
/// writer on the first and the reader on the third, each alone. Two: the
/// server on the second, writer and reader on the first with the writer
/// under SCHED_FIFO 10 where root allows (measured on a 2-CPU VM at 2,000
/// req/s: send-lag p99 2-4 us, against up to 325 us without it, and a
/// service-latency p99 of 120-140 us against about 2 ms with the reader on
/// the server's CPU); but a writer that never sleeps (its interval no
/// longer than --spin) would starve the reader, so then the reader joins
/// the server instead. One: unpinned.
fn placement(args: &mut RunArgs) -> Result<RunPlacement, Exit> {
    let allowed = connlab_os::current_affinity()
        .map(|c| c.cpus().to_vec())
        .unwrap_or_default();
    let list = |cpus: &[usize]| {
        CpuList::parse(
            &cpus
                .iter()
                .map(usize::to_string)
                .collect::<Vec<_>>()
                .join(","),
        )
        .ok()
    };
    let interval = match args.workload.rate {
        RateArg::PerSecond(r) if r > 0.0 => Some(Duration::from_secs_f64(1.0 / r)),
        _ => None,
    };
    let spins_always = interval.is_some_and(|i| i <= args.workload.spin);
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    let given = args.server_cpu.is_some() || args.client_cpu.is_some();
    let (server, client, note) = if given || allowed.len() < 2 {
        let note = if given {
            "from --server-cpu/--client-cpu".to_string()
        } else {
            "one CPU allowed: server and client share it".to_string()
        };
        (args.server_cpu.clone(), args.client_cpu.clone(), note)
    } else if allowed.len() >= 3 {
        (
            list(&allowed[1..2]),
            list(&[allowed[0], allowed[2]]),
            "default: server, writer and reader on a CPU each".to_string(),
        )
    } else if spins_always {
        (
            list(&allowed[1..2]),
            list(&[allowed[0], allowed[1]]),
            "default on two CPUs: the writer, which never sleeps at this rate, alone on the first; the reader with the server".to_string(),
        )
    } else {
        let fifo = root && args.workload.writer_priority.is_none();
        if fifo {
            args.workload.writer_priority = Some(10);
        }
        (
            list(&allowed[1..2]),
            list(&allowed[0..1]),
            if fifo || args.workload.writer_priority.is_some() {
                "default on two CPUs: server on the second, writer and reader on the first with the writer under SCHED_FIFO".to_string()
            } else {
                "default on two CPUs: server on the second, writer and reader on the first (not root: the writer cannot run under SCHED_FIFO, so the reader may delay its sends)".to_string()
            },
        )
    };
    if let (Some(s), Some(c)) = (&server, &client) {
        if s.cpus().iter().any(|x| c.cpus().contains(x)) && given {
            eprintln!(
                "connlab run: warning: server cpus {s} and client cpus {c} overlap: the client competes with the server"
            );
        }
    }
    Ok(RunPlacement {
        server_cpus: server.map(|s| s.to_string()),
        client_cpus: client.map(|c| c.to_string()),
        writer_policy: match args.workload.writer_priority {
            Some(p) => format!("SCHED_FIFO {p}"),
            None => "SCHED_OTHER".into(),
        },
        keep_awake: args.keep_awake.applies(),
        note,
    })
}

/// Idle-priority spinners on the placement's CPUs (every CPU allowed when
/// one side is not pinned), when `--keep-awake` applies; they are children
/// of this process, so the windows count them as its own.
fn keep_awake(p: &RunPlacement) -> Result<Option<connlab_os::awake::KeepAwake>, Exit> {
    if !p.keep_awake {
        return Ok(None);
    }
    let mut cpus: Vec<usize> = Vec::new();
    for list in [&p.server_cpus, &p.client_cpus] {
        match list.as_deref().and_then(|c| CpuList::parse(c).ok()) {
            Some(l) => cpus.extend_from_slice(l.cpus()),
            None => {
                cpus = connlab_os::current_affinity()
                    .map(|c| c.cpus().to_vec())
                    .unwrap_or_default();
                break;
            }
        }
    }
    cpus.sort_unstable();
    cpus.dedup();
    connlab_os::awake::KeepAwake::start(&cpus)
        .map(Some)
        .context("starting the keep-awake spinners")
        .map_err(Exit::from)
}

/// The gates of one run: completion, schedule, steal, foreign_cpu,
/// arrivals and stationary, at their default limits.
fn run_validity(r: &LoadResult, window: Option<&WindowCpu>, attempt: u32) -> Validity {
    let q = &r.requests;
    let (scheduled, schedule) = match r.config.rate_per_s {
        Some(rate) => (
            rate * r.config.duration_s,
            Some(ScheduleEvidence {
                send_lag_p99_us: r.send_lag_us.p99,
                writer_rate_per_s: rate,
            }),
        ),
        None => ((q.completed + q.measured_errors()) as f64, None),
    };
    let e = Evidence {
        completion: Some((q.completed, scheduled)),
        schedule,
        cpu: window.cloned(),
        ..Evidence::default()
    }
    .with_run_checks(r, None);
    Validity::of(validity::gates(&ValidityLimits::default(), &e), attempt)
}

/// Runs the load against one row once and gathers its server figures and
/// who used the CPUs meanwhile.
fn measure(
    exe: &Path,
    row: &Row,
    args: &RunArgs,
    placement: &RunPlacement,
    shutdown: &Shutdown,
) -> Result<(LoadOutcome, ServerFigures, Option<WindowCpu>), Exit> {
    let watched: Vec<usize> = [&placement.server_cpus, &placement.client_cpus]
        .iter()
        .map(|c| c.as_deref().and_then(|c| CpuList::parse(c).ok()))
        .collect::<Option<Vec<CpuList>>>()
        .map(|l| {
            let mut v: Vec<usize> = l.iter().flat_map(|c| c.cpus().to_vec()).collect();
            v.sort_unstable();
            v.dedup();
            v
        })
        .unwrap_or_default();
    let mut roles = vec![("connlab run", vec![std::process::id() as i32])];
    if let Row::Against { pid: Some(p), .. } = row {
        roles.push(("server under test", vec![*p as i32]));
    }
    let before = WindowSnapshot::take(&roles);
    let (outcome, figures) = measure_row(exe, row, args, placement, shutdown)?;
    let after = WindowSnapshot::take(&roles);
    Ok((
        outcome,
        figures,
        Some(WindowCpu::between(&before, &after, &watched)),
    ))
}

/// Runs the load against one row once and gathers its server figures.
fn measure_row(
    exe: &Path,
    row: &Row,
    args: &RunArgs,
    placement: &RunPlacement,
    shutdown: &Shutdown,
) -> Result<(LoadOutcome, ServerFigures), Exit> {
    let client_cpus = placement
        .client_cpus
        .as_deref()
        .and_then(|c| CpuList::parse(c).ok());
    let server_cpus = placement
        .server_cpus
        .as_deref()
        .and_then(|c| CpuList::parse(c).ok());
    match row {
        Row::Engine { kind, label } => {
            let stats_path = std::env::temp_dir()
                .join(format!("connlab-run-{}-{label}.json", std::process::id()));
            let mut server = start_server(exe, *kind, args, server_cpus.as_ref(), &stats_path)?;
            let pid = server.pid();
            let idle = procfs::memory_kib(&procfs::process_tree(pid as i32));
            let workload = args.workload.workload(server.addr, client_cpus)?;
            let switches_before = procfs::children_switches();
            let (outcome, loaded) = drive(&workload, shutdown, Some(pid));
            let stats = server.stop(&stats_path, Duration::from_secs(15));
            let switches = procfs::children_switches().saturating_sub(switches_before);
            let _ = std::fs::remove_file(&stats_path);
            let outcome =
                outcome.map_err(|e| anyhow!(e).context(format!("load against {label}")))?;
            let figures = ServerFigures {
                pid: Some(pid),
                pinned: server_cpus.is_some(),
                cpu_s: stats.as_ref().and_then(server_cpu_s),
                cpu_source: Some("the server's --stats (getrusage, its whole run)".into()),
                voluntary_switches: Some(switches),
                memory_idle_kib: idle,
                memory_loaded_kib: loaded,
                stats,
                ..ServerFigures::default()
            };
            let figures = derive(figures, &outcome.result);
            Ok((outcome, figures))
        }
        Row::Against {
            label,
            addr,
            pid,
            idle_kib,
        } => {
            let workload = args.workload.workload(*addr, client_cpus)?;
            let tree = pid
                .map(|p| procfs::process_tree(p as i32))
                .unwrap_or_default();
            let pinned = match (&server_cpus, pid) {
                (Some(cpus), Some(p)) => Some(
                    procfs::pin_tree(&tree, cpus)
                        .with_context(|| format!("pinning --against-pid {p} to cpu {cpus}"))?,
                ),
                _ => None,
            };
            let cpu_before = pid.map(|_| procfs::processes_cpu_s(&tree));
            let switches_before = pid.map(|_| procfs::voluntary_switches(&tree));
            let (outcome, loaded) = drive(&workload, shutdown, *pid);
            // Processes started during the run (a worker respawned) count too.
            let tree_after = pid
                .map(|p| procfs::process_tree(p as i32))
                .unwrap_or_default();
            let cpu = cpu_before.map(|b| (procfs::processes_cpu_s(&tree_after) - b).max(0.0));
            let switches =
                switches_before.map(|b| procfs::voluntary_switches(&tree_after).saturating_sub(b));
            let was_pinned = pinned.is_some();
            if let Some(p) = pinned {
                p.restore();
            }
            let outcome = outcome
                .map_err(|e| anyhow!(e).context(format!("load against {label} at {addr}")))?;
            let figures = ServerFigures {
                pid: *pid,
                pinned: was_pinned,
                cpu_s: cpu,
                cpu_source: pid
                    .map(|p| format!("/proc/PID/stat of {p} and its descendants, over the run")),
                voluntary_switches: switches,
                memory_idle_kib: *idle_kib,
                memory_loaded_kib: loaded,
                ..ServerFigures::default()
            };
            let figures = derive(figures, &outcome.result);
            Ok((outcome, figures))
        }
    }
}

/// Fills in the per-request and per-connection figures.
fn derive(mut f: ServerFigures, r: &LoadResult) -> ServerFigures {
    let q = &r.requests;
    let requests = q.total_completed();
    f.requests = requests;
    let per_request = |v: f64| (requests > 0).then(|| v / requests as f64);
    f.cpu_us_per_request = f.cpu_s.and_then(|c| per_request(c * 1e6));
    f.wakeups_per_request = f.voluntary_switches.and_then(|s| per_request(s as f64));
    let conns = r.connections.established;
    f.memory_per_connection_bytes = match (f.memory_idle_kib, f.memory_loaded_kib) {
        (Some(idle), Some(loaded)) if conns > 0 => {
            Some((loaded as f64 - idle as f64).max(0.0) * 1024.0 / conns as f64)
        }
        _ => None,
    };
    f
}

/// Runs the load generator with progress; while it measures, samples the
/// memory of `pid`'s process tree once (every connection is open by then).
fn drive(
    w: &Workload,
    shutdown: &Shutdown,
    pid: Option<u32>,
) -> (Result<LoadOutcome, connlab_loadgen::LoadError>, Option<u64>) {
    let progress = Progress::default();
    let finished = AtomicBool::new(false);
    with_progress(&progress, w, || {
        std::thread::scope(|s| {
            let sampler = s.spawn(|| {
                let pid = pid?;
                // Wait for the schedule to start, then let it settle.
                while !progress.measuring.load(Relaxed) {
                    if finished.load(Relaxed) {
                        return None;
                    }
                    std::thread::sleep(Duration::from_millis(20));
                }
                let settle = (w.warmup + w.duration).min(Duration::from_millis(300));
                std::thread::sleep(settle);
                if finished.load(Relaxed) {
                    return None;
                }
                procfs::memory_kib(&procfs::process_tree(pid as i32))
            });
            let out = connlab_loadgen::run(w, shutdown, &progress, None);
            finished.store(true, Relaxed);
            (out, sampler.join().ok().flatten())
        })
    })
}

fn start_server(
    exe: &Path,
    engine: EngineKind,
    args: &RunArgs,
    cpus: Option<&CpuList>,
    stats: &Path,
) -> Result<ServerChild, Exit> {
    let mut cmd = Command::new(exe);
    cmd.args([
        "serve",
        "--engine",
        engine.name(),
        "--listen",
        "127.0.0.1:0",
    ])
    .args(["--protocol", args.workload.protocol.name()])
    .arg("--stats")
    .arg(stats)
    .stdin(Stdio::null())
    .stdout(Stdio::piped())
    .stderr(Stdio::null());
    if args.edge_triggered && engine == EngineKind::Epoll {
        cmd.arg("--edge-triggered");
    }
    if let Some(cpu) = cpus {
        cmd.args(["--cpu", &cpu.to_string()]);
    }
    Ok(ServerChild::spawn(cmd)?)
}

/// The primary figure of a run: median service latency, or the achieved
/// rate in closed loop.
fn primary(r: &LoadResult, closed_loop: bool) -> f64 {
    if closed_loop {
        r.achieved_rate_per_s
    } else {
        r.service_latency_us.p50
    }
}

/// The samples of every row, one slot per round, and their comparison.
fn comparison(rows: &[Row], done: &[Done], rounds: u32, closed_loop: bool) -> Comparison {
    let samples: Vec<RowSamples> = rows
        .iter()
        .enumerate()
        .map(|(i, row)| {
            let mut s = RowSamples {
                label: row.label().to_string(),
                primary: vec![None; rounds as usize],
                cpu_us_per_request: vec![None; rounds as usize],
                wakeups_per_request: vec![None; rounds as usize],
                memory_per_connection_bytes: vec![None; rounds as usize],
            };
            for d in done.iter().filter(|d| d.row == i) {
                let k = (d.round - 1) as usize;
                // A failed, interrupted or invalid run is no sample.
                if d.result.interrupted || d.result.peer_failed || !d.validity.valid {
                    continue;
                }
                s.primary[k] = Some(primary(&d.result, closed_loop));
                s.cpu_us_per_request[k] = d.server.cpu_us_per_request;
                s.wakeups_per_request[k] = d.server.wakeups_per_request;
                s.memory_per_connection_bytes[k] = d.server.memory_per_connection_bytes;
            }
            s
        })
        .collect();
    let (metric, better) = if closed_loop {
        ("achieved rate (req/s)", Better::Higher)
    } else {
        ("median service latency", Better::Lower)
    };
    compare(metric, better, &samples, CONFIDENCE)
}
