//! `connlab run`: the main job in one command. The flags, then the
//! comparison in the library (`connlab_lab::run::compare_run`): its
//! progress and warnings on stderr, the result on stdout in `--format`,
//! the exports and, with `--out`, the HTML page
//! (`connlab_report::render_run`). Exit 130 when interrupted, 1 when a
//! server failed under the load, 3 when a `--fail-if` condition held, 4
//! when a row regressed past `--max-regression`.

mod output;
mod progress;

use crate::cmd::load::{raise_limit, WorkloadArgs};
use crate::Exit;
use anyhow::{anyhow, Context};
use clap::Args;
use connlab_lab::run::compare_run::gate::{self, FailIf};
use connlab_lab::run::compare_run::{read_baseline, ComparePlan, CompareRequest};
use connlab_lab::validity::Validity;
use connlab_loadgen::LoadResult;
use connlab_os::{CpuList, Shutdown};
use connlab_report::run_result::{Paint, RunResult};
use connlab_server::EngineKind;
use output::{write_page, ColorChoice, Format};
pub(crate) use progress::Shown;
use std::net::{SocketAddr, ToSocketAddrs};
use std::path::{Path, PathBuf};
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

The result goes to stdout (--format text|json|markdown|csv; the text ends with one line
per comparison and a recommendation with its confidence: high, lowered one step each by
fewer than 5 repetitions, runs whose client missed its schedule, and runs left out);
progress and warnings go to stderr, each kind of warning counted once at the end.

Exit codes:
  0    compared; every --fail-if and --max-regression check passed
  1    a server failed under the load, or the run could not be made
  2    bad command line (a --fail-if that names no row, an unreadable --baseline)
  3    a --fail-if condition held for some row
  4    a row regressed past --max-regression against --baseline
  130  interrupted (the runs measured so far are compared and written)

Examples:
  connlab run
  connlab run --engines all -c 2000 --active-ratio 1 --quick
  connlab run --engines epoll,threads --rate max --depth 4 --repetitions 5 --out results/
  connlab run --protocol http --against nginx=127.0.0.1:8080 --against-pid $(cat nginx.pid)
  connlab run --engines epoll --fail-if 'p99>5ms' --export-json run.json
  connlab run --baseline results/comparison.json --max-regression 1.10")]
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
    /// Pin the server to these CPUs [default: the second CPU allowed; with
    /// --workers N, N CPUs from the second on].
    #[arg(long, value_name = "LIST")]
    server_cpu: Option<CpuList>,
    /// Run every event engine (select, poll, epoll, uring, rtsig) with N
    /// event loops, each pinned to its own CPU of the server's; processes
    /// and threads run on the same CPUs, so the rows compare CPU for CPU.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=1024))]
    workers: Option<u32>,
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
    /// How the result is printed on stdout.
    #[arg(long, value_enum, default_value = "text")]
    format: Format,
    /// Also write the result as JSON to FILE.
    #[arg(long, value_name = "FILE")]
    export_json: Option<PathBuf>,
    /// Also write the result as Markdown to FILE.
    #[arg(long, value_name = "FILE")]
    export_markdown: Option<PathBuf>,
    /// Also write the result's table as CSV to FILE.
    #[arg(long, value_name = "FILE")]
    export_csv: Option<PathBuf>,
    /// A comparison.json of an earlier run (`--out DIR` writes one): each
    /// row's primary figure is shown as a ratio to its earlier self.
    #[arg(long, value_name = "FILE")]
    baseline: Option<PathBuf>,
    /// Exit 4 when a row is worse than in --baseline by more than this
    /// factor (1.10: ten per cent), in the direction that is worse.
    #[arg(long, value_name = "FACTOR", requires = "baseline", value_parser = parse_factor)]
    max_regression: Option<f64>,
    /// Exit 3 when a condition holds for a row: METRIC OP VALUE, or
    /// ROW:METRIC OP VALUE for one row, with METRIC p50 or p99 (a time:
    /// 250us, 5ms, 1s), rate (req/s), cpu (us per request) or errors; OP >,
    /// >=, < or <=. Repeatable.
    #[arg(long, value_name = "COND")]
    fail_if: Vec<FailIf>,
    /// Colour on stdout: auto (on a terminal, unless NO_COLOR is set),
    /// always or never.
    #[arg(long, value_enum, default_value = "auto")]
    color: ColorChoice,
}

/// A `--max-regression` factor: a number of at least 1.
fn parse_factor(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(f) if f.is_finite() && f >= 1.0 => Ok(f),
        _ => Err(format!(
            "{s:?}: a factor of at least 1, such as 1.10 for ten per cent"
        )),
    }
}

/// Exit code when a `--fail-if` condition held.
const FAIL_IF_EXIT: u8 = 3;
/// Exit code when a row regressed past `--max-regression`.
const REGRESSION_EXIT: u8 = 4;

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
        workers: args.workers,
        client_cpu: args.client_cpu,
        keep_awake: args.keep_awake,
        out: args.out,
    })
}

/// What to do with the result: the flags that do not shape the runs.
struct ResultArgs {
    format: Format,
    exports: Vec<(Format, PathBuf)>,
    baseline: Option<PathBuf>,
    max_regression: Option<f64>,
    fail_if: Vec<FailIf>,
    paint: Paint,
}

impl ResultArgs {
    fn take(args: &mut RunArgs) -> ResultArgs {
        let exports = [
            (Format::Json, args.export_json.take()),
            (Format::Markdown, args.export_markdown.take()),
            (Format::Csv, args.export_csv.take()),
        ]
        .into_iter()
        .filter_map(|(f, p)| p.map(|p| (f, p)))
        .collect();
        ResultArgs {
            format: args.format,
            exports,
            baseline: args.baseline.take(),
            max_regression: args.max_regression,
            fail_if: std::mem::take(&mut args.fail_if),
            paint: Paint::new(args.color.into()),
        }
    }
}

/// Runs the comparison.
pub(crate) fn run(mut args: RunArgs) -> Result<ExitCode, Exit> {
    let out = args.out.clone();
    let want = ResultArgs::take(&mut args);
    // A baseline that cannot be read fails now, not after the runs.
    let baseline = want
        .baseline
        .as_deref()
        .map(read_baseline)
        .transpose()
        .map_err(|e| Exit::usage(anyhow!(e)))?;
    let mut shown = Shown::new();
    let plan = ComparePlan::new(request(args)?, &mut shown).map_err(Exit::usage)?;
    // A condition naming no row fails before anything is measured.
    let labels = plan.labels();
    if let Some(bad) = want
        .fail_if
        .iter()
        .find(|c| c.row.as_deref().is_some_and(|r| !labels.contains(&r)))
    {
        return Err(Exit::usage(anyhow!(
            "--fail-if {}: no row {:?} (rows: {})",
            bad.text,
            bad.row.as_deref().unwrap_or_default(),
            labels.join(", ")
        )));
    }
    raise_limit();
    let shutdown = Shutdown::on_termination_signals().context("installing signal handlers")?;
    let exe = std::env::current_exe().context("locating the connlab binary")?;
    let o = plan.run(&exe, &shutdown, &mut shown)?;
    let tally = shown.finish();
    for line in tally.lines() {
        eprintln!("connlab run: warning: {line}");
    }
    let table = o.table();
    let failures =
        gate::check_fail_if(&table, &want.fail_if).map_err(|e| Exit::usage(anyhow!(e)))?;
    let against = baseline
        .as_ref()
        .map(|(better, before)| {
            if *better != o.comparison.better {
                eprintln!(
                    "connlab run: warning: --baseline ranks by {} and this run by {}: their ratios compare unlike figures",
                    if *better == connlab_lab::compare::Better::Lower { "latency" } else { "rate" },
                    if o.comparison.better == connlab_lab::compare::Better::Lower { "latency" } else { "rate" }
                );
            }
            gate::against_baseline(&table, before, o.comparison.better)
        })
        .unwrap_or_default();
    let regressions = want
        .max_regression
        .map(|max| gate::regressions(&against, max))
        .unwrap_or_default();
    let result = RunResult {
        outcome: &o,
        table,
        baseline: against,
        failures: failures.iter().chain(&regressions).cloned().collect(),
    };
    print!(
        "{}",
        result
            .render(want.format.into(), want.paint)
            .context("rendering the result")?
    );
    for (format, path) in &want.exports {
        let text = result
            .render((*format).into(), Paint::new(ColorChoice::Never.into()))
            .context("rendering the result")?;
        write_export(path, &text)?;
    }
    if let Some(dir) = &out {
        write_page(dir, &o)?;
        eprintln!("connlab run: results in {}", dir.display());
    }
    let code = match o.exit_code() {
        0 if !failures.is_empty() => FAIL_IF_EXIT,
        0 if !regressions.is_empty() => REGRESSION_EXIT,
        c => c,
    };
    Ok(ExitCode::from(code))
}

/// Writes an export whole, creating its directory.
fn write_export(path: &Path, text: &str) -> Result<(), Exit> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    connlab_os::files::write_atomic(path, text)
        .with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}

/// `connlab doctor`'s A/A calibration: the first engine of `args` measured
/// `runs` times in a row under `connlab run`'s placement and workload.
/// Returns the placement in words and each run's result and gates.
pub(crate) fn calibrate(
    args: RunArgs,
    runs: usize,
    shutdown: &Shutdown,
) -> Result<(String, Vec<(LoadResult, Validity)>), Exit> {
    let mut shown = Shown::new();
    let plan = ComparePlan::new(request(args)?, &mut shown).map_err(Exit::usage)?;
    raise_limit();
    let exe = std::env::current_exe().context("locating the connlab binary")?;
    Ok(plan.calibrate(&exe, runs, shutdown, &mut shown)?)
}
