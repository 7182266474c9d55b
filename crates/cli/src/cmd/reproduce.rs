//! `connlab reproduce`: every paper's experiments in one command. Runs each
//! experiment file of a suite (`experiments/reproduce.toml`) with `connlab
//! sweep` in a child process (so each sweep keeps its own namespaces, signal
//! handling and exit code, and resumes on its own), renders each report, and
//! writes an index page with one row per table, figure and claim.

use crate::Exit;
use anyhow::{anyhow, Context};
use clap::Args;
use connlab_kinds::{duration_words, Registry, ReportOptions};
use connlab_lab::run::sessions;
use connlab_lab::{experiment_name, find_default_suite, Suite};
use connlab_report::{Format, Index, IndexExperiment, IndexPaper};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, ExitStatus};
use std::time::{Duration, Instant};

/// Flags of `connlab reproduce`.
#[derive(Args, Debug)]
#[command(after_help = "\
Runs every experiment file the suite lists (by default experiments/reproduce.toml: the
five papers' tables and figures on the papers' own parameters) one after the other with
`connlab sweep`, then `connlab report` for each, then writes

  DIR/index.html, DIR/index.md, DIR/index.csv   one row per table, figure and claim:
                                                the paper's value, ours, the verdict
  DIR/index.json                                the same whole (connlab report DIR
                                                renders it again)
  DIR/<experiment>/                             each sweep's results and report.html

Running the same command again resumes every sweep where it stopped. An experiment
that fails is reported on the index and the others still run (exit 1 at the end);
Ctrl-C stops after the sweep under way has written what it measured (exit 130).
Needs root (most sweeps build network namespaces; the pipeline's run without).

Examples:
  connlab reproduce --quick --out results/reproduce-quick    # under 15 minutes
  connlab reproduce --out results/reproduce                  # the full matrices, hours
  connlab reproduce --only locality,pipeline --quick")]
pub(crate) struct ReproduceArgs {
    /// Results directory [default: results/reproduce, or results/reproduce-quick with --quick].
    #[arg(long, short = 'o', value_name = "DIR")]
    out: Option<PathBuf>,
    /// Run every experiment's reduced `[quick]` matrix.
    #[arg(long)]
    quick: bool,
    /// The suite file listing the experiments [default:
    /// experiments/reproduce.toml, looked for here, then in the checkout the
    /// binary was built in, then in the source tree it was built from].
    #[arg(long, value_name = "FILE")]
    suite: Option<PathBuf>,
    /// Only these papers (suite ids, comma-separated), e.g. locality,pipeline.
    #[arg(long, value_delimiter = ',', value_name = "IDS")]
    only: Vec<String>,
    /// Discard earlier results and start every sweep over.
    #[arg(long)]
    fresh: bool,
    /// List what would run (each experiment file, its points and its
    /// estimated time, and the total); run nothing.
    #[arg(long)]
    dry_run: bool,
}

/// Runs the suite.
pub(crate) fn run(args: ReproduceArgs) -> Result<ExitCode, Exit> {
    let suite_path = match &args.suite {
        Some(p) => p.clone(),
        None => find_default_suite(std::env::current_exe().ok().as_deref())
            .map_err(|e| Exit::usage(anyhow!(e)))?,
    };
    let suite = Suite::from_file(&suite_path).map_err(|e| Exit::usage(e.into()))?;
    for id in &args.only {
        if !suite.papers.iter().any(|p| &p.id == id) {
            let ids: Vec<&str> = suite.papers.iter().map(|p| p.id.as_str()).collect();
            return Err(Exit::usage(anyhow!(
                "--only {id:?}: the suite has the papers {}",
                ids.join(", ")
            )));
        }
    }
    let out = args.out.clone().unwrap_or_else(|| {
        PathBuf::from("results").join(if args.quick {
            "reproduce-quick"
        } else {
            "reproduce"
        })
    });
    let exe = std::env::current_exe().context("locating the connlab binary")?;
    let selected: Vec<_> = suite
        .experiment_paths()
        .into_iter()
        .filter(|(p, _)| args.only.is_empty() || args.only.contains(&p.id))
        .collect();
    if args.dry_run {
        return dry_run(&selected, &out, args.quick);
    }
    {
        if connlab_os::netns::require_root().is_err() {
            eprintln!(
                "connlab reproduce: not root: every sweep that builds network namespaces will fail (the pipeline's do not)"
            );
        }
        std::fs::create_dir_all(&out).with_context(|| format!("creating {}", out.display()))?;
    }
    let started = Instant::now();
    let mut failed = 0usize;
    let mut measured = Duration::ZERO;
    let mut interrupted = false;
    let mut papers: Vec<IndexPaper> = Vec::new();
    let registry = Registry::builtin();
    for (i, (paper, path)) in selected.iter().enumerate() {
        let name = experiment_name(path);
        let dir = out.join(&name);
        eprintln!(
            "\n== [{}/{}] {} ({}): {}",
            i + 1,
            selected.len(),
            name,
            paper.id,
            path.display()
        );
        let mut sweep = Command::new(&exe);
        sweep.arg("sweep").arg(path).arg("--out").arg(&dir);
        for (on, flag) in [(args.quick, "--quick"), (args.fresh, "--fresh")] {
            if on {
                sweep.arg(flag);
            }
        }
        let status = sweep
            .status()
            .with_context(|| format!("starting connlab sweep {}", path.display()))?;
        let mut status_text = describe(&status);
        let ok = status.success();
        if status.code() == Some(130) {
            interrupted = true;
        }
        if !ok {
            failed += 1;
        }
        if dir.exists() && !interrupted {
            for (format, file) in [
                ("html", "report.html"),
                ("markdown", "report.md"),
                ("csv", "report.csv"),
            ] {
                let report = Command::new(&exe)
                    .arg("report")
                    .arg(&dir)
                    .args(["--format", format, "-o"])
                    .arg(dir.join(file))
                    .status()
                    .context("starting connlab report")?;
                if !report.success() {
                    status_text.push_str(&format!("; report ({format}) {}", describe(&report)));
                }
            }
        }
        let claims = registry
            .open(&dir, &ReportOptions::default())
            .map(|r| r.claims())
            .unwrap_or_else(|e| connlab_report::ExperimentClaims {
                title: name.clone(),
                progress: format!("no results ({e})"),
                ..connlab_report::ExperimentClaims::default()
            });
        let (took, sessions) = sessions::measuring_time(&dir);
        measured += took;
        let timing = match sessions {
            0 => String::new(),
            1 => format!("; measured in {}", duration_words(took)),
            n => format!("; measured in {} over {n} sessions", duration_words(took)),
        };
        let entry = IndexExperiment {
            report: format!("{name}/report.html"),
            name: name.clone(),
            title: claims.title,
            status: format!("{}; sweep {status_text}{timing}", claims.progress),
            ok,
            rows: claims.rows,
            invalid_by_gate: claims.invalid_by_gate,
            invalid_points: claims.invalid_points,
            noise_floor: claims.noise_floor,
        };
        match papers.iter_mut().find(|p| p.id == paper.id) {
            Some(p) => p.experiments.push(entry),
            None => papers.push(IndexPaper {
                id: paper.id.clone(),
                title: paper.title.clone(),
                source: paper.source.clone(),
                system: paper.system.clone(),
                experiments: vec![entry],
            }),
        }
        if interrupted {
            break;
        }
    }
    let machine = connlab_os::Environment::capture();
    let index = Index {
        title: suite.title.clone(),
        description: suite.description.clone(),
        facts: vec![
            (
                "matrices".into(),
                if args.quick {
                    "quick (each experiment's reduced [quick] matrix)".into()
                } else {
                    "full (the papers' own parameters)".into()
                },
            ),
            ("suite".into(), suite_path.display().to_string()),
            (
                "measuring time".into(),
                format!(
                    "{}, summed over every session of every sweep listed (this command ran {})",
                    duration_words(measured),
                    duration_words(started.elapsed())
                ),
            ),
            ("connlab".into(), env!("CARGO_PKG_VERSION").into()),
            (
                "machine".into(),
                format!(
                    "{}, {} CPUs, Linux {}",
                    machine.cpu_model.as_deref().unwrap_or("unknown CPU model"),
                    machine.cpu_count,
                    machine.kernel
                ),
            ),
        ],
        papers,
    };
    write_index(&out, &index)?;
    eprintln!(
        "\nconnlab reproduce: {}; {} -> {}",
        index.tally().sentence(),
        if failed == 0 {
            "every sweep finished".to_string()
        } else {
            format!("{failed} sweep(s) failed")
        },
        out.join("index.html").display()
    );
    Ok(if interrupted {
        ExitCode::from(130)
    } else if failed > 0 {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

/// `--dry-run`: each experiment file's points and estimated time, and the
/// total, without running anything.
fn dry_run(
    selected: &[(&connlab_lab::SuitePaper, PathBuf)],
    out: &Path,
    quick: bool,
) -> Result<ExitCode, Exit> {
    let registry = Registry::builtin();
    let mut total = Duration::ZERO;
    let mut unknown = Vec::new();
    for (i, (paper, path)) in selected.iter().enumerate() {
        let name = experiment_name(path);
        let text =
            std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        let sweep = registry
            .load(&text, &path.display().to_string())
            .map_err(|e| Exit::usage(e.into()))?;
        let listing = sweep
            .listing(quick, false, &out.join(&name))
            .map_err(|e| Exit::usage(anyhow!("{}: {e}", path.display())))?;
        let time = match listing.estimate {
            Some(t) => {
                total += t;
                format!("about {}", duration_words(t))
            }
            None => {
                unknown.push(name.clone());
                "no estimate".into()
            }
        };
        println!(
            "[{}/{}] {name} ({}): {} points, {time}  ({})",
            i + 1,
            selected.len(),
            paper.id,
            listing.ids.len(),
            path.display()
        );
    }
    println!(
        "{} experiment file{}, about {} in all{}{}; results in {}",
        selected.len(),
        if selected.len() == 1 { "" } else { "s" },
        duration_words(total),
        if quick { " (--quick)" } else { "" },
        if unknown.is_empty() {
            String::new()
        } else {
            format!(" and more for {} (no estimate)", unknown.join(", "))
        },
        out.display()
    );
    Ok(ExitCode::SUCCESS)
}

fn describe(status: &ExitStatus) -> String {
    match status.code() {
        Some(0) => "finished".into(),
        Some(130) => "interrupted".into(),
        Some(c) => format!("failed (exit {c})"),
        None => "killed by a signal".into(),
    }
}

/// Writes the index in every format (`index.html`, `index.md`,
/// `index.csv`), each whole ([`connlab_os::files::write_atomic`]).
fn write_index(out: &Path, index: &Index) -> Result<(), Exit> {
    for format in Format::all() {
        let path = out.join(format!("index.{}", format.extension()));
        connlab_os::files::write_atomic(&path, index.render(format))
            .with_context(|| format!("writing {}", path.display()))?;
    }
    // Kept whole, so `connlab report DIR` can render it again.
    connlab_kinds::reproduce_index::write(out, index).map_err(|e| anyhow!(e))?;
    Ok(())
}
