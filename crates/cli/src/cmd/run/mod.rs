//! `connlab run`: the main job in one command. The flags, then the
//! comparison in the library (`connlab_lab::run::compare_run`), its
//! progress and table printed here and, with `--out`, the HTML page
//! (`connlab_report::render_run`); exit 130 when interrupted, 1 when a
//! server failed under the load.

mod output;

use crate::cmd::load::{raise_limit, WorkloadArgs};
use crate::cmd::output::with_progress;
use crate::Exit;
use anyhow::{anyhow, Context};
use clap::Args;
use connlab_lab::run::compare_run::{ComparePlan, CompareRequest, RunProgress, ServerFigures};
use connlab_lab::validity::Validity;
use connlab_loadgen::{LoadResult, Progress, Workload};
use connlab_os::{CpuList, Shutdown};
use connlab_server::EngineKind;
use output::{print_run_line, print_table, write_page};
use std::net::{SocketAddr, ToSocketAddrs};
use std::path::PathBuf;
use std::process::ExitCode;
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
    pub(crate) engines: EngineList,
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

/// What `connlab run` prints while it measures: its lines, each run's
/// figures and the load generator's progress.
struct Shown;

impl RunProgress for Shown {
    fn note(&mut self, line: &str) {
        eprintln!("connlab run: {line}");
    }

    fn measured(&mut self, result: &LoadResult, server: &ServerFigures, validity: &Validity) {
        print_run_line(result, server, validity);
    }

    fn load(&mut self, progress: &Progress, workload: &Workload, run: &mut dyn FnMut()) {
        with_progress(progress, workload, run);
    }
}

/// The library's request from the flags (`--quick` applied); a usage
/// error when they disagree.
fn request(mut args: RunArgs) -> Result<CompareRequest, Exit> {
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
    // Check the workload once, before anything starts; the target and the
    // client CPUs are set for each run.
    let workload = args
        .workload
        .workload(SocketAddr::from(([127, 0, 0, 1], 9)), None)?;
    Ok(CompareRequest {
        engines: args.engines.0,
        edge_triggered: args.edge_triggered,
        workload,
        repetitions: args.repetitions,
        against: args
            .against
            .into_iter()
            .map(|a| (a.label, a.addr))
            .collect(),
        against_pid: args.against_pid,
        server_cpu: args.server_cpu,
        client_cpu: args.client_cpu,
        keep_awake: args.keep_awake,
        out: args.out,
    })
}

/// Runs the comparison.
pub(crate) fn run(args: RunArgs) -> Result<ExitCode, Exit> {
    let out = args.out.clone();
    let plan = ComparePlan::new(request(args)?, &mut Shown).map_err(Exit::usage)?;
    raise_limit();
    let shutdown = Shutdown::on_termination_signals().context("installing signal handlers")?;
    let exe = std::env::current_exe().context("locating the connlab binary")?;
    let o = plan.run(&exe, &shutdown, &mut Shown)?;
    print_table(&o.rows, &o.done, &o.comparison, &o.placement, o.repetitions);
    if let Some(dir) = &out {
        write_page(dir, &o)?;
        eprintln!("connlab run: results in {}", dir.display());
    }
    Ok(ExitCode::from(o.exit_code()))
}

/// `connlab doctor`'s A/A calibration: the first engine of `args` measured
/// `runs` times in a row under `connlab run`'s placement and workload.
/// Returns the placement in words and each run's result and gates.
pub(crate) fn calibrate(
    args: RunArgs,
    runs: usize,
    shutdown: &Shutdown,
) -> Result<(String, Vec<(LoadResult, Validity)>), Exit> {
    let plan = ComparePlan::new(request(args)?, &mut Shown).map_err(Exit::usage)?;
    raise_limit();
    let exe = std::env::current_exe().context("locating the connlab binary")?;
    Ok(plan.calibrate(&exe, runs, shutdown, &mut Shown)?)
}
