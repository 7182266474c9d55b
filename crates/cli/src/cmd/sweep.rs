//! `connlab sweep`: runs an experiment file of any kind. The registry of
//! kinds (`connlab_kinds::Registry`) reads the file; the kind plans, checks,
//! lists, runs and words its ending (exit codes 0 done, 1 points failed, 2
//! bad input, 130 interrupted: resume by running the same command again).
//! This file keeps the flags, the progress display and the rounds added by
//! `--max-repetitions`.

use crate::cmd::load::raise_limit;
use crate::Exit;
use anyhow::{anyhow, Context};
use clap::Args;
use connlab_kinds::{duration_words as human, Lines, Listing, Registry, RunError};
use connlab_lab::run as lab_run;
use connlab_os::Shutdown;
use indicatif::{ProgressBar, ProgressStyle};
use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

/// Flags of `connlab sweep`.
#[derive(Args, Debug)]
#[command(after_help = "\
Every point runs the server in its own network namespace and one load shard per client
host in theirs (hosts on one bridge, addresses 198.18.0.0/24, links rate-limited as the
experiment says), all shards starting at one instant; the shards are merged exactly.
Needs root (network namespaces).

Results directory:
  DIR/experiment.toml     the experiment as run
  DIR/sweep.json          machine, topology, points in the plan
  DIR/points/<id>.json    one per finished point: parameters, merged load result, server stats,
                          and \"validity\": the gates it passed or failed
  DIR/logs/<id>/          server and shard output, shard results

Every point checks its own validity (completion, schedule, steal, foreign_cpu, machine,
arrivals, stationary; limits in the file's [validity]) and is measured again when a gate
fails (--attempts). Claims rest on valid points only; the rest say \"cannot be judged here\".
Each cell also measures an A/A control (the same engine twice per round, id ending -aa):
the report shows its spread, the machine's noise floor. Peers sweeps measure their first
baseline twice per repetition and body size (validity.control); loadgen sweeps have none.

Running the same command again resumes: finished points are kept, the rest run. Resumed
on another machine (CPU model or count, kernel, clock source), the sweep starts a new
block: the earlier points move to points/block-N/ and are never pooled with the new ones.
Ctrl-C stops after cleaning up; the point under way is redone on resume.

Examples:
  connlab sweep experiments/locality-table3.toml --quick --out results/t3
  connlab report results/t3 -o t3.html
  connlab sweep experiments/locality-table4.toml --dry-run")]
pub(crate) struct SweepArgs {
    /// The experiment file (TOML), e.g. experiments/locality-table3.toml.
    file: PathBuf,
    /// Results directory [default: results/NAME, or results/NAME-quick with --quick].
    #[arg(long, short = 'o', value_name = "DIR")]
    out: Option<PathBuf>,
    /// Run the experiment's reduced `[quick]` matrix with short points.
    #[arg(long)]
    quick: bool,
    /// Discard results already in the directory and start over.
    #[arg(long)]
    fresh: bool,
    /// List the points and the estimated time; run nothing.
    #[arg(long)]
    dry_run: bool,
    /// Peers experiments: also record CPU profiles of the measured role, as
    /// `profile = true` in the file does (needs perf).
    #[arg(long)]
    profile: bool,
    /// Attempts per point, the first included: a point that fails one of
    /// its validity gates (completion, schedule, steal, foreign_cpu, ...)
    /// is measured again until one passes; the last attempt is kept with
    /// its gates [default: the file's validity.attempts, else 3].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=20))]
    attempts: Option<u32>,
    /// Locality and web sweeps: the widest 95 % interval of a point's p99,
    /// as a share of the p99 (0.05 = 5 %); a point above it is measured
    /// again for twice as long, up to --ci-max-duration (gate `precision`).
    #[arg(long, value_name = "SHARE", value_parser = parse_share)]
    ci_target: Option<f64>,
    /// Locality and web sweeps: after the file's repetitions, keep adding
    /// rounds while some claim cannot be judged here (its interval or the
    /// machine's A/A noise straddles its bound, or its points failed their
    /// gates), up to N rounds in all.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=100))]
    max_repetitions: Option<u32>,
    /// With --max-repetitions: add no round after this much time has passed
    /// since the sweep began, e.g. 30m.
    #[arg(long, value_name = "DURATION", requires = "max_repetitions", value_parser = crate::units::parse_duration)]
    time_limit: Option<Duration>,
    /// The longest measured time --ci-target may extend a point to, e.g.
    /// 40s [default: four times the file's duration].
    #[arg(long, value_name = "DURATION", requires = "ci_target", value_parser = crate::units::parse_duration)]
    ci_max_duration: Option<Duration>,
}

/// `--ci-target`: a share in (0, 1].
fn parse_share(s: &str) -> Result<f64, String> {
    let v: f64 = s
        .trim()
        .trim_end_matches('%')
        .parse()
        .map_err(|_| format!("{s:?}: a share such as 0.05 or 5%"))?;
    let v = if s.trim().ends_with('%') {
        v / 100.0
    } else {
        v
    };
    if v > 0.0 && v <= 1.0 {
        Ok(v)
    } else {
        Err(format!("{s:?}: a share between 0 and 1 (or 100%)"))
    }
}

/// Runs the sweep.
pub(crate) fn run(args: SweepArgs) -> Result<ExitCode, Exit> {
    let text = std::fs::read_to_string(&args.file)
        .with_context(|| format!("reading {}", args.file.display()))
        .map_err(Exit::usage)?;
    let file = args.file.display().to_string();
    let registry = Registry::builtin();
    let exp = registry
        .load(&text, &file)
        .map_err(|e| Exit::usage(e.into()))?;
    let traits = exp.traits();
    if args.profile && !traits.profiles {
        return Err(Exit::usage(anyhow!(
            "--profile: only for peers experiments (kind = \"peers\"); {file} is not one"
        )));
    }
    let out = args.out.clone().unwrap_or_else(|| {
        let suffix = if args.quick { "-quick" } else { "" };
        PathBuf::from("results").join(format!("{}{suffix}", exp.name()))
    });
    let out = if traits.children {
        // Children (nginx above all) resolve relative paths against their
        // own directories, so every path handed to them starts absolute.
        std::path::absolute(&out)
            .with_context(|| format!("resolving {}", out.display()))
            .map_err(Exit::usage)?
    } else {
        out
    };
    let in_file = |e: RunError| Exit::usage(anyhow!("{file}: {e}"));
    // What --dry-run can know of the machine too: a CPU it does not have.
    lab_run::check_pinned_cpus(&exp.pinned_cpus()).map_err(in_file)?;
    if args.dry_run {
        let listing = exp
            .listing(args.quick, args.profile, &out)
            .map_err(in_file)?;
        print_listing(&listing)?;
        return Ok(ExitCode::SUCCESS);
    }
    exp.check(args.quick).map_err(in_file)?;
    if traits.children {
        raise_limit();
    }
    let shutdown = Shutdown::on_termination_signals().context("installing signal handlers")?;
    let req = lab_run::SweepRequest {
        text,
        out,
        quick: args.quick,
        fresh: args.fresh,
        profile: args.profile,
        connlab: std::env::current_exe().context("locating the connlab binary")?,
        attempts: args.attempts,
        ci_target: args.ci_target,
        ci_max_duration: args.ci_max_duration.map(|d| d.as_secs_f64()),
        repetitions: None,
    };
    let started = Instant::now();
    let mut progress = CliProgress {
        style: traits.lines,
        ..CliProgress::default()
    };
    let run_sweep = |req: &lab_run::SweepRequest, progress: &mut CliProgress| {
        exp.run(req, progress, &shutdown).map_err(|e| match e {
            RunError::Failed(_) => Exit::from(anyhow!(e)),
            RunError::Input(_) => Exit::usage(anyhow!(e)),
        })
    };
    let mut outcome = run_sweep(&req, &mut progress)?;
    if let (Some(max), Some(mut rounds)) = (args.max_repetitions, exp.rounds(args.quick)) {
        let mut req = req.clone();
        loop {
            if outcome.interrupted || shutdown.requested() {
                break;
            }
            let undecided = exp
                .undecided(&outcome.out)
                .map_err(|e| Exit::from(anyhow!(e)))?;
            if undecided.is_empty() {
                eprintln!("connlab sweep: every claim decided after {rounds} rounds");
                break;
            }
            if rounds >= max {
                eprintln!(
                    "connlab sweep: after {rounds} rounds (--max-repetitions {max}) {} claim(s) still cannot be judged here: {}",
                    undecided.len(),
                    undecided.join("; ")
                );
                break;
            }
            if args.time_limit.is_some_and(|t| started.elapsed() >= t) {
                eprintln!(
                    "connlab sweep: --time-limit reached after {rounds} rounds; {} claim(s) still cannot be judged here",
                    undecided.len()
                );
                break;
            }
            rounds += 1;
            eprintln!(
                "connlab sweep: {} claim(s) cannot be judged here yet; adding round {rounds}",
                undecided.len()
            );
            req.repetitions = Some(rounds);
            let next = run_sweep(&req, &mut progress)?;
            let failed: Vec<String> = outcome.failed.iter().chain(&next.failed).cloned().collect();
            outcome = lab_run::SweepOutcome { failed, ..next };
        }
    }
    let ending = exp.ending(&outcome, started.elapsed());
    for line in &ending.lines {
        eprintln!("{line}");
    }
    match ending.error {
        Some(e) => Err(anyhow!(e).into()),
        None => Ok(ExitCode::from(ending.code)),
    }
}

/// Prints a dry-run listing on stdout; a closed pipe (`| head`) ends it
/// quietly.
fn print_listing(listing: &Listing) -> Result<(), Exit> {
    use std::io::Write;
    let mut stdout = std::io::stdout().lock();
    let written = writeln!(stdout, "{}", listing.head)
        .and_then(|()| {
            listing
                .ids
                .iter()
                .try_for_each(|id| writeln!(stdout, "  {id}"))
        })
        .and_then(|()| stdout.flush());
    match written {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
            Err(anyhow!(e).context("writing the plan").into())
        }
        _ => Ok(()),
    }
}

/// [`lab_run::Progress`] on the terminal: a bar when standard error is one,
/// a line per point otherwise.
#[derive(Default)]
struct CliProgress {
    bar: Option<ProgressBar>,
    style: Lines,
    total: usize,
    done: usize,
}

impl lab_run::Progress for CliProgress {
    fn note(&mut self, line: &str) {
        match &self.bar {
            Some(bar) => bar.println(format!("connlab sweep: {line}")),
            None => eprintln!("connlab sweep: {line}"),
        }
    }

    fn begin(&mut self, total: usize, kept: usize) {
        (self.total, self.done) = (total, kept);
        self.bar = std::io::stderr().is_terminal().then(|| {
            let bar = ProgressBar::new(total as u64);
            bar.set_style(
                ProgressStyle::with_template("{bar:30} {pos}/{len} points  {msg}")
                    .unwrap_or_else(|_| ProgressStyle::default_bar()),
            );
            bar.set_position(kept as u64);
            bar
        });
    }

    fn start(&mut self, id: &str, eta: Option<Duration>) {
        let msg = match eta {
            Some(eta) => format!("{id}  (eta {})", human(eta)),
            None => id.to_string(),
        };
        match (&self.bar, self.style) {
            (Some(bar), _) => bar.set_message(msg),
            (None, Lines::Points) => eprintln!("[{}/{}] {msg}", self.done + 1, self.total),
            (None, Lines::Runs) => eprint!("[{}/{}] {msg} ... ", self.done + 1, self.total),
            (None, Lines::Results) => {}
        }
    }

    fn finish(&mut self, id: &str, took: Duration, what: &str) {
        self.done += 1;
        let line = match self.style {
            Lines::Results => format!("  {id}: {what}"),
            _ => format!("  {id}: {what} ({:.1} s)", took.as_secs_f64()),
        };
        match (&self.bar, self.style) {
            (Some(bar), _) => {
                bar.println(line);
                bar.inc(1);
            }
            (None, Lines::Points) => eprintln!("{line}"),
            (None, Lines::Runs) => eprintln!("{what}"),
            (None, Lines::Results) => eprintln!("[{}/{}] {id}: {what}", self.done, self.total),
        }
    }

    fn end(&mut self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}
