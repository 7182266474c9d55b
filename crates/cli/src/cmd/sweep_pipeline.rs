//! The pipeline side of `connlab sweep` (experiment files with a
//! `[pipeline]` section): every run of the plan in this process, one after
//! another, `DIR/pipeline.json` and `DIR/runs.csv` rewritten after each, so
//! an interrupted sweep keeps its runs and resumes from them.

use crate::cmd::pipeline::stop_flag;
use crate::cmd::sweep::unix_now;
use crate::Exit;
use anyhow::{anyhow, Context};
use connlab_lab::{
    capacity, projected_capacity, LinkSpec, PipelineExperiment, PipelineRunParams,
    PipelineRunRecord, PipelineSweep, PIPELINE_SWEEP_SCHEMA,
};
use connlab_os::{Environment, Shutdown};
use connlab_pipeline::{LinkConfig, Mode, PipelineConfig};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};

/// The library configuration of one run.
fn run_config(exp: &PipelineExperiment, p: &PipelineRunParams) -> anyhow::Result<PipelineConfig> {
    let m = &exp.pipeline;
    let defaults = PipelineConfig::default();
    let link = match p.link {
        LinkSpec::Memory(bandwidth_bit_s) => LinkConfig::Memory {
            bandwidth_bit_s,
            latency: Duration::ZERO,
            loss: m.loss,
            reorder: 0.0,
            duplicate: 0.0,
        },
        LinkSpec::Udp => match LinkConfig::udp_loopback() {
            LinkConfig::Udp {
                sender_addr,
                receiver_addr,
                ..
            } => LinkConfig::Udp {
                sender_addr,
                receiver_addr,
                loss: m.loss,
            },
            other => other,
        },
    };
    let cpu_map = match &m.cpu_map {
        Some(text) => Some(
            text.parse::<connlab_os::CpuList>()
                .map_err(|e| anyhow!("pipeline.cpu_map {text:?}: {e}"))?
                .cpus()
                .to_vec(),
        ),
        None => None,
    };
    let cfg = PipelineConfig {
        layers: p.layers as usize,
        message_size: usize::try_from(p.message_size)?,
        messages: p.messages,
        window: m.window.unwrap_or(defaults.window),
        mode: if p.mode == "run-to-completion" {
            Mode::RunToCompletion {
                threads: m.rtc_threads,
            }
        } else {
            Mode::LayerParallel
        },
        link,
        seed: m.seed,
        cpu_map,
        time_limit: Some(Duration::from_secs(600)),
        ..defaults
    };
    cfg.validate().map_err(|e| anyhow!("{}: {e}", p.id()))?;
    Ok(cfg)
}

/// Runs a pipeline experiment (`connlab sweep FILE` when FILE has `[pipeline]`).
pub(crate) fn run(
    file: &Path,
    text: &str,
    out: Option<PathBuf>,
    quick: bool,
    fresh: bool,
    dry_run: bool,
) -> Result<ExitCode, Exit> {
    let exp = PipelineExperiment::from_toml(text, &file.display().to_string())
        .map_err(|e| Exit::usage(e.into()))?;
    let plan = exp.plan(quick);
    for p in &plan {
        run_config(&exp, p).map_err(Exit::usage)?;
    }
    let out = out.unwrap_or_else(|| {
        let suffix = if quick { "-quick" } else { "" };
        PathBuf::from("results").join(format!("{}{suffix}", exp.name))
    });
    if dry_run {
        // Write errors (a closed pipe: `| head`) end the listing quietly.
        use std::io::Write as _;
        let mut stdout = std::io::stdout().lock();
        let _ = writeln!(
            stdout,
            "{}: {} runs of the layer-parallel pipeline (results in {})",
            exp.name,
            plan.len(),
            out.display()
        );
        for p in &plan {
            if writeln!(stdout, "  {}", p.id()).is_err() {
                break;
            }
        }
        return Ok(ExitCode::SUCCESS);
    }
    std::fs::create_dir_all(&out).with_context(|| format!("creating {}", out.display()))?;
    let earlier = if fresh {
        None
    } else {
        match PipelineSweep::open(&out) {
            Ok(s) if s.quick == quick => Some(s),
            Ok(_) => {
                return Err(Exit::usage(anyhow!(
                    "{} holds a {} sweep: pass --fresh to start over, or another --out",
                    out.display(),
                    if quick { "full" } else { "--quick" }
                )))
            }
            Err(_) => None,
        }
    };
    connlab_os::files::write_atomic(out.join("experiment.toml"), text)
        .with_context(|| format!("writing {}/experiment.toml", out.display()))?;
    let mut sweep = PipelineSweep {
        schema: PIPELINE_SWEEP_SCHEMA.into(),
        experiment: exp.clone(),
        quick,
        environment: Environment::capture(),
        started_unix_s: earlier.as_ref().map_or_else(unix_now, |e| e.started_unix_s),
        runs_total: plan.len(),
        runs: Vec::new(),
    };
    // Keep earlier runs that are still in the plan.
    if let Some(e) = earlier {
        sweep.runs = e
            .runs
            .into_iter()
            .filter(|r| plan.contains(&r.params))
            .collect();
    }
    let kept = sweep.runs.len();
    eprintln!(
        "connlab sweep: {} ({} runs{}{}), results in {}",
        exp.name,
        plan.len(),
        if quick { ", quick" } else { "" },
        if kept > 0 {
            format!(", {kept} kept from before")
        } else {
            String::new()
        },
        out.display()
    );
    let shutdown = Shutdown::on_termination_signals().context("installing signal handlers")?;
    let stop = stop_flag(shutdown);
    let (mut failed, mut done) = (Vec::new(), kept);
    let started = Instant::now();
    for p in &plan {
        if sweep.run(p).is_some() {
            continue;
        }
        if stop.load(Relaxed) {
            break;
        }
        let cfg = run_config(&exp, p).map_err(Exit::usage)?;
        let id = p.id();
        eprint!("[{}/{}] {id} ... ", done + 1, plan.len());
        let result = match connlab_pipeline::run(&cfg, &stop) {
            Ok(r) => r,
            Err(e) => {
                eprintln!("FAILED: {e}");
                failed.push(id);
                continue;
            }
        };
        if result.interrupted && stop.load(Relaxed) {
            eprintln!("interrupted (not kept)");
            break;
        }
        let base = if p.layers == 1 {
            Some(&result)
        } else {
            sweep.run(&p.baseline()).map(|b| &b.result)
        };
        let (rc, eff) = capacity(
            result.throughput_mbit_s,
            p.layers,
            base.map(|b| b.throughput_mbit_s),
        );
        let projected = projected_capacity(&result, p.layers, base);
        let (prc, peff) = match &projected {
            Ok((rc, eff)) => (Some(*rc), Some(*eff)),
            Err(_) => (None, None),
        };
        eprintln!(
            "{:.1} Mbit/s, efficiency {}; {}{}",
            result.throughput_mbit_s,
            eff.map_or("—".into(), |e| format!("{e:.2}")),
            match (result.projection.value(), &projected) {
                (Ok(v), Ok((_, e))) => format!(
                    "projected {v:.1} Mbit/s (bound: {}), efficiency {e:.2}",
                    result.projection.bound
                ),
                (Ok(v), Err(_)) => format!(
                    "projected {v:.1} Mbit/s (bound: {})",
                    result.projection.bound
                ),
                (Err(why), _) => format!("no projection ({why})"),
            },
            if result.verified {
                String::new()
            } else {
                format!(
                    ", NOT VERIFIED ({} of {} delivered)",
                    result.messages_delivered, result.messages_sent
                )
            }
        );
        if !result.verified {
            failed.push(id.clone());
        }
        sweep.runs.push(PipelineRunRecord {
            id,
            params: p.clone(),
            result,
            relative_capacity: rc,
            efficiency: eff,
            projected_relative_capacity: prc,
            projected_efficiency: peff,
            finished_unix_s: unix_now(),
        });
        // Plan order, so tables and the CSV read in order after a resume.
        sweep
            .runs
            .sort_by_key(|r| plan.iter().position(|q| *q == r.params));
        sweep.save(&out).map_err(|e| anyhow!(e))?;
        done += 1;
    }
    sweep.save(&out).map_err(|e| anyhow!(e))?;
    eprintln!(
        "connlab sweep: {} of {} runs done in {:.0} s, {} failed or unverified; results in {}",
        sweep.runs.len(),
        plan.len(),
        started.elapsed().as_secs_f64(),
        failed.len(),
        out.display()
    );
    eprintln!("next: connlab report {} -o report.html", out.display());
    if stop.load(Relaxed) {
        return Ok(ExitCode::from(130));
    }
    if !failed.is_empty() {
        return Err(anyhow!("runs failed or unverified: {}", failed.join(", ")).into());
    }
    Ok(ExitCode::SUCCESS)
}
