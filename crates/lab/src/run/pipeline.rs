//! The pipeline kind: every run of the plan in this process, one after
//! another, `DIR/pipeline.json` and `DIR/runs.csv` rewritten after each, so
//! an interrupted sweep keeps its runs and resumes from them.

use super::window::{edge, gated, Roles};
use super::{create_dir, stop_flag, unix_now, write_experiment, Progress, RunError};
use super::{SweepOutcome, SweepRequest};
use crate::validity::{self, Evidence, Gate, Validity, ValidityLimits, WindowCpu};
use crate::{
    capacity, projected_capacity, LinkSpec, PipelineExperiment, PipelineRunParams,
    PipelineRunRecord, PipelineSweep, PIPELINE_SWEEP_SCHEMA,
};
use connlab_os::Shutdown;
use connlab_pipeline::{LinkConfig, PipelineConfig, PipelineResult};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The library configuration of one run.
pub(crate) fn run_config(
    exp: &PipelineExperiment,
    p: &PipelineRunParams,
) -> Result<PipelineConfig, String> {
    let m = &exp.pipeline;
    let defaults = PipelineConfig::default();
    let link = match p.link {
        LinkSpec::Memory(_) | LinkSpec::MemoryPerSize => LinkConfig::Memory {
            bandwidth_bit_s: match exp.line_rate(p.link, p.message_size) {
                None if p.link == LinkSpec::MemoryPerSize => {
                    return Err(format!(
                        "{}: pipeline.line_per_size has no rate for {} B",
                        p.id(),
                        p.message_size
                    ))
                }
                rate => rate,
            },
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
        mode: exp.library_mode(&p.mode),
        link,
        seed: m.seed,
        cpu_map,
        time_limit: Some(Duration::from_secs(600)),
        ..defaults
    };
    cfg.validate().map_err(|e| format!("{}: {e}", p.id()))?;
    Ok(cfg)
}

/// CPUs the runs' threads can use: the distinct CPUs of `pipeline.cpu_map`,
/// or this process's affinity (what the claims' fit rule holds thread
/// counts against, recorded as [`PipelineSweep::cpus`]).
fn run_cpus(exp: &PipelineExperiment) -> usize {
    let mapped = exp
        .pipeline
        .cpu_map
        .as_ref()
        .and_then(|text| text.parse::<connlab_os::CpuList>().ok())
        .map(|c| {
            let mut v = c.cpus().to_vec();
            v.sort_unstable();
            v.dedup();
            v.len()
        })
        .filter(|n| *n > 0);
    mapped.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

/// What every run of a sweep is held to.
struct Gauge {
    /// The file's `[validity]`.
    limits: ValidityLimits,
    /// Attempts per run, the first included.
    attempts: u32,
    /// The sweep's machine.
    machine: connlab_os::Fingerprint,
    /// The CPUs the threads are pinned to (`pipeline.cpu_map`), or none
    /// for every CPU.
    cpus: Vec<usize>,
}

/// One run as kept: the last attempt, with its gates.
struct Measured {
    result: PipelineResult,
    validity: Validity,
    machine: connlab_os::Fingerprint,
    window_cpu: Option<WindowCpu>,
}

/// Runs one configuration until it passes its gates or the attempts run
/// out (a failed `machine` gate alone is not run again, nor an interrupted
/// run); the last attempt is kept. The window is the run, the role this
/// process (the pipeline's threads are its own).
fn measure_with_attempts(
    cfg: &PipelineConfig,
    gauge: &Gauge,
    stop: &Arc<AtomicBool>,
) -> Result<Measured, String> {
    let mut tries = 1;
    loop {
        let roles = Roles::default();
        let before = edge(&roles);
        let result = connlab_pipeline::run(cfg, stop).map_err(|e| e.to_string())?;
        let window = WindowCpu::between(&before, &edge(&roles), &gauge.cpus);
        let machine = connlab_os::Environment::capture().fingerprint();
        let mut gates = Vec::new();
        if gauge.limits.completion.0.is_some() {
            gates.push(completion_gate(&result));
        }
        gates.extend(validity::gates(
            &gauge.limits,
            &Evidence {
                cpu: gated(Some(&window)),
                machine: Some((machine.clone(), gauge.machine.clone())),
                ..Evidence::default()
            },
        ));
        let v = Validity::of(gates, tries);
        let again = v.worth_retrying() && tries < gauge.attempts && !stop.load(Relaxed);
        if !again || result.interrupted {
            return Ok(Measured {
                result,
                validity: v,
                machine,
                window_cpu: Some(window),
            });
        }
        tries += 1;
    }
}

/// A run is complete when it verified: every message arrived once, in
/// order and intact (1), else 0; held to 1.
fn completion_gate(r: &PipelineResult) -> Gate {
    let value = if r.verified { 1.0 } else { 0.0 };
    Gate::at_least(
        "completion",
        value,
        1.0,
        format!(
            "{} of {} messages delivered, {}",
            r.messages_delivered,
            r.messages_sent,
            if r.verified {
                "verified: once each, in order, intact"
            } else {
                "not verified"
            }
        ),
    )
}

/// `; INVALID after 3 attempts: steal 7.3 % > 2 %`, `; valid at attempt
/// 2`, or nothing.
fn validity_text(v: &Validity) -> String {
    if !v.valid {
        format!(
            "; INVALID after {} attempt{}: {}",
            v.attempts,
            if v.attempts == 1 { "" } else { "s" },
            v.failure_text()
        )
    } else if v.attempts > 1 {
        format!("; valid at attempt {}", v.attempts)
    } else {
        String::new()
    }
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
    super::check_pipeline(exp, quick)?;
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
        cpus: Some(run_cpus(exp)),
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
    let gauge = Gauge {
        limits: exp.validity.clone(),
        attempts: super::attempts(req, &exp.validity),
        machine: sweep.environment.fingerprint(),
        cpus: match &exp.pipeline.cpu_map {
            Some(text) => text
                .parse::<connlab_os::CpuList>()
                .map(|c| c.cpus().to_vec())
                .unwrap_or_default(),
            None => Vec::new(),
        },
    };
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
        let measured = match measure_with_attempts(&cfg, &gauge, &stop) {
            Ok(m) => m,
            Err(e) => {
                progress.finish(&id, began.elapsed(), &format!("FAILED: {e}"));
                outcome.failed.push(id);
                continue;
            }
        };
        let Measured {
            result,
            validity,
            machine,
            window_cpu,
        } = measured;
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
            "{:.1} Mbit/s, efficiency {}; {}{}{}",
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
            },
            validity_text(&validity)
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
            checked: validity::Checked {
                validity: Some(validity),
                machine: Some(machine),
                window_cpu,
            },
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_run_is_paced_at_its_sizes_line_rate() {
        let text = r#"kind = "pipeline"
name = "p"
title = "P"
[pipeline]
layers = [2]
message_sizes = [1024, "32KiB"]
messages = 10
modes = ["layer-parallel", "run-to-completion"]
links = ["memory:per-size", "memory:800mbit"]
line_alone = true
[pipeline.line_per_size]
1024 = "4.7mbit"
32768 = "98.2mbit"
"#;
        let exp = PipelineExperiment::from_toml(text, "p.toml").unwrap();
        let plan = exp.plan(false);
        assert!(plan
            .iter()
            .any(|p| p.layers == 0 && p.link == LinkSpec::MemoryPerSize));
        for p in &plan {
            let cfg = run_config(&exp, p).unwrap();
            let want = match (p.link, p.message_size) {
                (LinkSpec::MemoryPerSize, 1024) => 4_700_000,
                (LinkSpec::MemoryPerSize, _) => 98_200_000,
                _ => 800_000_000,
            };
            assert!(
                matches!(cfg.link, LinkConfig::Memory { bandwidth_bit_s: Some(b), .. } if b == want),
                "{}: {:?}",
                p.id(),
                cfg.link
            );
        }
    }

    #[test]
    fn the_shared_state_mode_delivers_every_byte() {
        // A short real run: two workers per side share every layer's
        // state; the stream arrives once, in order, intact, and the lock
        // counts are recorded.
        let text = r#"kind = "pipeline"
name = "p"
title = "P"
[pipeline]
layers = [3]
message_sizes = [1024]
messages = 200
modes = ["run-to-completion-shared"]
links = ["memory:unlimited"]
shared_workers = 2
"#;
        let exp = PipelineExperiment::from_toml(text, "p.toml").unwrap();
        let p = exp.plan(false).into_iter().find(|p| p.layers == 3).unwrap();
        assert_eq!(
            p.id(),
            "run-to-completion-shared-memory-unlimited-s1024-m200-l3-rep1"
        );
        let mut cfg = run_config(&exp, &p).unwrap();
        assert_eq!(
            cfg.mode,
            connlab_pipeline::Mode::RunToCompletion { threads: 2 }
        );
        cfg.handoff_items = 1000;
        cfg.time_limit = Some(Duration::from_secs(60));
        let r = connlab_pipeline::run(&cfg, &AtomicBool::new(false)).unwrap();
        assert!(r.verified, "{:?}", r.errors);
        assert_eq!(r.messages_delivered, 200);
        assert_eq!(r.bytes_delivered, 200 * 1024);
        assert_eq!(r.stream_checksum, r.sender_checksum);
        assert!(r.lock_contention().is_some());
        assert!(r.per_layer.iter().all(|l| l.lock_acquisitions > 0));
    }
}
