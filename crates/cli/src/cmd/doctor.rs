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
use connlab_lab::validity::ValidityLimits;
use connlab_lab::{Suite, DEFAULT_SUITE};
use connlab_os::window::{WindowCpu, WindowSnapshot};
use connlab_os::{Environment, Shutdown};
use serde::Serialize;
use std::path::PathBuf;
use std::process::{Command, ExitCode};
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
    /// The suite whose experiments to assess.
    #[arg(long, default_value = DEFAULT_SUITE, value_name = "FILE")]
    suite: PathBuf,
    /// Also write the findings as JSON.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
}

/// The machine's quiet or noise over a window.
#[derive(Serialize)]
struct Quiet {
    seconds: f64,
    steal_share: f64,
    foreign_share: f64,
    per_cpu_steal: Vec<(usize, f64)>,
}

/// The calibration's outcome.
#[derive(Serialize)]
struct Calibration {
    placement: String,
    runs: usize,
    valid_runs: usize,
    /// The 90th percentile (the largest below ten) of max(r, 1/r) over
    /// consecutive pairs of median service latency.
    noise_factor: Option<f64>,
    medians_us: Vec<f64>,
    send_lag_p99_us: Vec<f64>,
    failures: Vec<String>,
}

/// One experiment of the suite, assessed.
#[derive(Serialize)]
struct Assessment {
    experiment: String,
    kind: String,
    /// `can judge`, `probably cannot judge`, `cannot measure`.
    outlook: &'static str,
    why: Vec<String>,
}

#[derive(Serialize)]
struct Findings {
    schema: &'static str,
    machine: String,
    cpu_affinity: String,
    nofile_soft: u64,
    nofile_hard: u64,
    root: bool,
    programs: Vec<(String, bool)>,
    quiet: Quiet,
    calibration: Option<Calibration>,
    experiments: Vec<Assessment>,
}

/// Runs the checks and prints them.
pub(crate) fn run(args: DoctorArgs) -> Result<ExitCode, Exit> {
    crate::cmd::check_output("--json", args.json.as_deref())?;
    let suite = Suite::from_file(&args.suite)
        .with_context(|| format!("reading the suite {}", args.suite.display()))
        .map_err(Exit::usage)?;
    let shutdown = Shutdown::on_termination_signals().context("installing signal handlers")?;
    let env = Environment::capture();
    let limits = connlab_os::raise_nofile_limit().ok();
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    let programs: Vec<(String, bool)> = ["nginx", "haproxy", "wrk", "nft", "perf", "ip"]
        .iter()
        .map(|p| (p.to_string(), have(p)))
        .collect();
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
    println!("\n  experiments of {}:", args.suite.display());
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
        let a = assess(&path, &registry, &here);
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
        let text = serde_json::to_string_pretty(&findings).context("encoding the findings")?;
        connlab_os::files::write_atomic(path, text + "\n")
            .with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(if shutdown.requested() {
        ExitCode::from(130)
    } else {
        ExitCode::SUCCESS
    })
}

/// Whether a program runs (`PROGRAM -v` or `--version`, any exit status).
fn have(program: &str) -> bool {
    Command::new(program)
        .arg("-v")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok()
}

/// Steal and other processes' CPU on every CPU over `length`.
fn watch(length: Duration, shutdown: &Shutdown) -> Quiet {
    let me = vec![std::process::id() as i32];
    let before = WindowSnapshot::take(&[("doctor", me.clone())]);
    shutdown.wait(length);
    let after = WindowSnapshot::take(&[("doctor", me)]);
    let w = WindowCpu::between(&before, &after, &[]);
    Quiet {
        seconds: w.seconds,
        steal_share: w.steal_share,
        foreign_share: w.foreign_share,
        per_cpu_steal: w.per_cpu.iter().map(|c| (c.cpu, c.steal)).collect(),
    }
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
    let valid: Vec<f64> = results
        .iter()
        .filter(|(_, v)| v.valid)
        .map(|(r, _)| r.service_latency_us.p50)
        .collect();
    // Consecutive valid runs as A/A pairs.
    let mut factors: Vec<f64> = valid
        .windows(2)
        .filter(|w| w[0] > 0.0 && w[1] > 0.0)
        .map(|w| (w[1] / w[0]).max(w[0] / w[1]))
        .collect();
    factors.sort_by(f64::total_cmp);
    let noise_factor = (!factors.is_empty()).then(|| {
        let n = factors.len();
        let i = if n < 10 {
            n - 1
        } else {
            ((0.9 * n as f64).ceil() as usize).clamp(1, n) - 1
        };
        factors[i]
    });
    Ok(Calibration {
        placement,
        runs: results.len(),
        valid_runs: valid.len(),
        noise_factor,
        medians_us: results
            .iter()
            .map(|(r, _)| r.service_latency_us.p50)
            .collect(),
        send_lag_p99_us: results.iter().map(|(r, _)| r.send_lag_us.p99).collect(),
        failures: results
            .iter()
            .filter(|(_, v)| !v.valid)
            .map(|(_, v)| v.failure_text())
            .collect(),
    })
}

/// Whether an experiment of the suite can run here and be judged: what its
/// kind says of the machine `here`, and whether the machine is quiet.
fn assess(path: &std::path::Path, registry: &Registry, here: &Here) -> Assessment {
    let name = connlab_lab::experiment_name(path);
    let exp = match std::fs::read_to_string(path)
        .map_err(|e| e.to_string())
        .and_then(|t| {
            let origin = path.display().to_string();
            let kind = registry.kind_of(&t, &origin).map_err(|e| e.to_string())?;
            let exp = kind.load(&t, &origin).map_err(|e| e.to_string())?;
            Ok((kind.name().to_string(), exp))
        }) {
        Ok(e) => e,
        Err(e) => {
            return Assessment {
                experiment: name,
                kind: "?".into(),
                outlook: "cannot measure",
                why: vec![format!("the file does not read: {e}")],
            }
        }
    };
    let (kind, exp) = exp;
    let connlab_kinds::Assessment {
        blockers,
        mut doubts,
    } = exp.assess(here);
    if here.noisy {
        doubts.push(
            "the machine is not quiet now (steal or other processes over their limits)".into(),
        );
    }
    let (outlook, why) = if !blockers.is_empty() {
        ("cannot measure", blockers)
    } else if !doubts.is_empty() {
        ("probably cannot judge", doubts)
    } else {
        ("can judge", Vec::new())
    };
    Assessment {
        experiment: name,
        kind,
        outlook,
        why,
    }
}
