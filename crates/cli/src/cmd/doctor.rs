//! `connlab doctor`: what this machine can judge, before hours go into a
//! sweep. It reads the machine (CPUs, kernel, clock source, open-files
//! limit, root, the peer programs), watches the CPUs for a few seconds
//! (steal, work of other processes), measures the A/A noise of a short
//! calibration (one engine several times under `connlab run`'s placement and
//! workload), and sets each experiment of `connlab reproduce`'s suite against
//! them: can it run here, and can its claims be judged with this noise?

use crate::cmd::run::{calibrate, with_run_defaults, RunArgs};
use crate::Exit;
use anyhow::{anyhow, Context};
use clap::{Args, FromArgMatches as _};
use connlab_kinds::{Here, Registry};
use connlab_lab::doctor::{have, watch, Calibration, Findings, PROGRAMS};
use connlab_lab::validity::ValidityLimits;
use connlab_lab::Suite;
use connlab_os::{Environment, Shutdown};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

/// Flags of `connlab doctor`.
#[derive(Args, Debug)]
#[command(after_help = "\
Prints, for this machine: CPUs, kernel and clock source; the open-files limit and what it
allows; root and the peer programs; steal and other processes' CPU over --seconds; the A/A
noise of a calibration (epoll measured --runs times in a row under connlab run's default
placement and workload, quick runs: how far two measurements of the same thing differ,
and whether the client keeps its schedule); and, for each experiment of the suite, whether
it can run here and whether its claims can be judged with that noise.

The same gates judge every sweep point (docs/statistics.md): steal <= 2 %, foreign work
<= 5 %, send-lag p99 <= a tenth of the send interval, completion >= 99 %.

Examples:
  connlab doctor
  connlab doctor --no-calibrate --seconds 10
  connlab doctor --json doctor.json")]
pub(crate) struct DoctorArgs {
    /// How long to watch the CPUs for steal and other work.
    #[arg(long, default_value = "3s", value_parser = crate::units::parse_duration)]
    seconds: Duration,
    /// Calibration runs (one engine measured this many times in a row).
    #[arg(long, default_value_t = 6, value_parser = clap::value_parser!(u32).range(2..=40))]
    runs: u32,
    /// Skip the calibration (no server is started).
    #[arg(long)]
    no_calibrate: bool,
    /// The suite whose experiments to assess [default:
    /// experiments/reproduce.toml, looked for here, then in the checkout the
    /// binary was built in, then in the source tree it was built from].
    #[arg(long, value_name = "FILE")]
    suite: Option<PathBuf>,
    /// Also write the findings as JSON.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
}

/// Runs the checks and prints them.
pub(crate) fn run(args: DoctorArgs) -> Result<ExitCode, Exit> {
    crate::cmd::check_output("--json", args.json.as_deref())?;
    let suite_path = match &args.suite {
        Some(p) => p.clone(),
        None => connlab_lab::find_default_suite(std::env::current_exe().ok().as_deref())
            .map_err(|e| Exit::usage(anyhow::anyhow!(e)))?,
    };
    let suite = Suite::from_file(&suite_path)
        .with_context(|| format!("reading the suite {}", suite_path.display()))
        .map_err(Exit::usage)?;
    let shutdown = Shutdown::on_termination_signals().context("installing signal handlers")?;
    let env = Environment::capture();
    let limits = connlab_os::raise_nofile_limit().ok();
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    let programs: Vec<(String, bool)> = PROGRAMS.iter().map(|p| (p.to_string(), have(p))).collect();
    let (soft, hard) = limits.map_or((env.nofile_soft, env.nofile_hard), |l| (l.soft, l.hard));
    println!("connlab doctor: what this machine can judge\n");
    println!("  machine      {}", env.fingerprint());
    println!("  this process may use cpu {}", env.cpu_affinity);
    println!(
        "  open files   soft {soft} / hard {hard}: one process holds about {} connections{}",
        hard.saturating_sub(100),
        if hard < 40_000 {
            " (the polling paper's 40,000 cannot run in one process here)"
        } else {
            ""
        }
    );
    println!(
        "  root         {}",
        if root {
            "yes (network namespaces, SCHED_FIFO writers)"
        } else {
            "no: sweeps of kind locality, web and singleip need root; writers stay SCHED_OTHER"
        }
    );
    println!(
        "  programs     {}",
        programs
            .iter()
            .map(|(p, ok)| format!("{p} {}", if *ok { "yes" } else { "missing" }))
            .collect::<Vec<_>>()
            .join(", ")
    );

    eprintln!(
        "connlab doctor: watching the CPUs for {:.1} s ...",
        args.seconds.as_secs_f64()
    );
    let quiet = watch(args.seconds, &shutdown);
    let gates = ValidityLimits::default();
    let (steal_limit, foreign_limit) = (
        gates.steal.0.unwrap_or(1.0),
        gates.foreign_cpu.0.unwrap_or(1.0),
    );
    println!(
        "  quiet?       over {:.1} s: steal {:.1} % (limit {:.0} %), other processes {:.1} % (limit {:.0} %): {}",
        quiet.seconds,
        quiet.steal_share * 100.0,
        steal_limit * 100.0,
        quiet.foreign_share * 100.0,
        foreign_limit * 100.0,
        if quiet.steal_share <= steal_limit && quiet.foreign_share <= foreign_limit {
            "quiet enough".to_string()
        } else {
            "NOT quiet: points measured now fail their steal or foreign_cpu gate".to_string()
        }
    );

    let calibration = if args.no_calibrate || shutdown.requested() {
        None
    } else {
        eprintln!(
            "connlab doctor: calibrating (epoll measured {} times, about {} s) ...",
            args.runs,
            args.runs * 2
        );
        Some(calibration(args.runs as usize, &shutdown)?)
    };
    match &calibration {
        Some(c) => {
            println!(
                "  A/A noise    epoll {} times under connlab run's default placement ({}): {}",
                c.runs,
                c.placement,
                match c.noise_factor {
                    Some(f) => format!(
                        "two measurements of the same thing differ by up to ±{:.1} % (median latency); {} of {} runs passed their gates",
                        (f - 1.0) * 100.0,
                        c.valid_runs,
                        c.runs
                    ),
                    None => "too few valid runs to say".into(),
                }
            );
            for f in &c.failures {
                println!("               invalid run: {f}");
            }
        }
        None => println!("  A/A noise    not measured (--no-calibrate)"),
    }

    let noise = calibration.as_ref().and_then(|c| c.noise_factor);
    let noisy_machine = quiet.steal_share > steal_limit || quiet.foreign_share > foreign_limit;
    let schedule_fails = calibration
        .as_ref()
        .is_some_and(|c| c.valid_runs * 2 < c.runs);
    let mut experiments = Vec::new();
    println!("\n  experiments of {}:", suite_path.display());
    let registry = Registry::builtin();
    let here = Here {
        environment: env.clone(),
        nofile_hard: hard,
        root,
        programs: programs.clone(),
        noise,
        noisy: noisy_machine,
        schedule_fails,
    };
    for (_paper, path) in suite.experiment_paths() {
        let a = connlab_kinds::doctor::assess(&path, &registry, &here);
        println!("    {:<20} {}", a.experiment, a.outlook);
        for w in &a.why {
            println!("    {:<20}   {w}", "");
        }
        experiments.push(a);
    }
    if let Some(path) = &args.json {
        let findings = Findings {
            schema: "connlab.doctor/1",
            machine: env.fingerprint().to_string(),
            cpu_affinity: env.cpu_affinity.clone(),
            nofile_soft: soft,
            nofile_hard: hard,
            root,
            programs,
            quiet,
            calibration,
            experiments,
        };
        crate::cmd::write_json("--json", path, &findings)?;
    }
    Ok(if shutdown.requested() {
        ExitCode::from(130)
    } else {
        ExitCode::SUCCESS
    })
}

/// epoll measured `runs` times with `connlab run --quick`'s defaults.
fn calibration(runs: usize, shutdown: &Shutdown) -> Result<Calibration, Exit> {
    let cmd = with_run_defaults(RunArgs::augment_args(clap::Command::new("run")));
    let matches = cmd
        .try_get_matches_from(["run", "--engines", "epoll", "--quick"])
        .map_err(|e| Exit::from(anyhow!("the calibration's flags: {e}")))?;
    let args = RunArgs::from_arg_matches(&matches)
        .map_err(|e| Exit::from(anyhow!("the calibration's flags: {e}")))?;
    let (placement, results) = calibrate(args, runs, shutdown)?;
    Ok(Calibration::from_runs(placement, &results))
}
