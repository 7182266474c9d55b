//! The pipeline kind: every run of the plan in this process, one after
//! another, `DIR/pipeline.json` and `DIR/runs.csv` rewritten after each, so
//! an interrupted sweep keeps its runs and resumes from them.

use super::{create_dir, stop_flag, unix_now, write_experiment, Progress, RunError};
use super::{SweepOutcome, SweepRequest};
use crate::values::PipelineMode;
use crate::{
    capacity, projected_capacity, LinkSpec, PipelineExperiment, PipelineRunParams,
    PipelineRunRecord, PipelineSweep, PIPELINE_SWEEP_SCHEMA,
};
use connlab_os::Shutdown;
use connlab_pipeline::{LinkConfig, Mode, PipelineConfig};
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};

/// The library configuration of one run.
pub(crate) fn run_config(
    exp: &PipelineExperiment,
    p: &PipelineRunParams,
) -> Result<PipelineConfig, String> {
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
                .map_err(|e| format!("pipeline.cpu_map {text:?}: {e}"))?
                .cpus()
                .to_vec(),
        ),
        None => None,
    };
    let cfg = PipelineConfig {
        layers: p.layers as usize,
        message_size: usize::try_from(p.message_size).map_err(|e| format!("{}: {e}", p.id()))?,
        messages: p.messages,
        window: m.window.unwrap_or(defaults.window),
        mode: if p.mode == PipelineMode::RunToCompletion.as_str() {
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
    cfg.validate().map_err(|e| format!("{}: {e}", p.id()))?;
    Ok(cfg)
}

/// Runs a pipeline experiment.
pub(super) fn sweep(
    exp: &PipelineExperiment,
    req: &SweepRequest,
    progress: &mut dyn Progress,
    shutdown: &Shutdown,
) -> Result<SweepOutcome, RunError> {
    let (out, quick) = (&req.out, req.quick);
    let plan = exp.plan(quick);
    super::check(&crate::AnyExperiment::Pipeline(exp.clone()), quick)?;
    create_dir(out)?;
    let earlier = if req.fresh {
        None
    } else {
        match PipelineSweep::open(out) {
            Ok(s) if s.quick == quick => Some(s),
            Ok(_) => {
                return Err(RunError::Input(format!(
                    "{} holds a {} sweep: pass --fresh to start over, or another --out",
                    out.display(),
                    if quick { "full" } else { "--quick" }
                )))
            }
            Err(_) => None,
        }
    };
    write_experiment(out, &req.text)?;
    let mut sweep = PipelineSweep {
        schema: PIPELINE_SWEEP_SCHEMA.into(),
        experiment: exp.clone(),
        quick,
        environment: super::sweep_environment(earlier.as_ref().map(|e| &e.environment), progress),
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
    let stop = stop_flag(shutdown);
    let mut outcome = super::announce(progress, &exp.name, "runs", plan.len(), kept, quick, out);
    let save = |sweep: &PipelineSweep| sweep.save(out).map_err(|e| RunError::Failed(e.to_string()));
    for p in &plan {
        if sweep.run(p).is_some() {
            continue;
        }
        if stop.load(Relaxed) {
            break;
        }
        let cfg = run_config(exp, p).map_err(RunError::Input)?;
        let id = p.id();
        progress.start(&id, None);
        let began = Instant::now();
        let result = match connlab_pipeline::run(&cfg, &stop) {
            Ok(r) => r,
            Err(e) => {
                progress.finish(&id, began.elapsed(), &format!("FAILED: {e}"));
                outcome.failed.push(id);
                continue;
            }
        };
        if result.interrupted && stop.load(Relaxed) {
            progress.finish(&id, began.elapsed(), "interrupted (not kept)");
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
        let what = format!(
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
        progress.finish(&id, began.elapsed(), &what);
        if !result.verified {
            outcome.failed.push(id.clone());
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
        save(&sweep)?;
        outcome.measured += 1;
    }
    save(&sweep)?;
    progress.end();
    outcome.interrupted = stop.load(Relaxed);
    Ok(outcome)
}
