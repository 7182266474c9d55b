//! The projections of one run: the measured per-message cost of every
//! stage, bounded by the line rate, for [`crate::projection::project`] and
//! for the older layers-only figures of [`crate::PipelineResult`].

use crate::config::{LinkConfig, Mode, PipelineConfig};
use crate::projection::{ProjectionInput, StageCost, StageRole};
use crate::results::{per_message_ns, LayerStats, Side};
use crate::runtime::{Collected, ThreadReport, ThreadRole};

/// Messages per second the line can carry (user messages with all headers;
/// acknowledgements travel the other direction). `None` if unlimited.
fn line_rate(cfg: &PipelineConfig) -> Option<f64> {
    match cfg.link {
        LinkConfig::Memory {
            bandwidth_bit_s: Some(b),
            ..
        } => Some(b as f64 / (cfg.buffer_size() as f64 * 8.0)),
        _ => None,
    }
}

/// CPUs the run's threads could use: the distinct CPUs of the map, or the
/// process's affinity.
fn run_cpus(cfg: &PipelineConfig) -> usize {
    match &cfg.cpu_map {
        Some(map) if !map.is_empty() => {
            let mut m = map.clone();
            m.sort_unstable();
            m.dedup();
            m.len()
        }
        _ => std::thread::available_parallelism().map_or(1, |n| n.get()),
    }
}

/// The stage costs of a run, per delivered message, for [`project`].
pub(crate) fn projection_input(
    cfg: &PipelineConfig,
    collected: &Collected,
    delivered: u64,
    handoff_ns: f64,
    measured_mbit_s: f64,
    verified: bool,
) -> ProjectionInput {
    let per = |s: f64, n: u64| per_message_ns(s, n);
    let mut stages = Vec::new();
    match cfg.mode {
        Mode::LayerParallel => {
            for r in collected
                .threads
                .iter()
                .filter(|r| matches!(r.role, ThreadRole::Layer(_)))
            {
                stages.push(StageCost {
                    name: r.name.clone(),
                    role: StageRole::Layers,
                    ns_per_message: per(r.busy_s, r.messages),
                    raw_ns_per_message: per(r.busy_raw_s, r.messages),
                    rounds: r.busy_rounds,
                });
            }
        }
        Mode::RunToCompletion { threads } => {
            // The workers generate and check messages too: their whole busy
            // time, shared over the side's workers.
            for side in Side::BOTH {
                let workers: Vec<&ThreadReport> = collected
                    .threads
                    .iter()
                    .filter(|r| r.side == side && r.role == ThreadRole::Worker)
                    .collect();
                let sum = |f: fn(&ThreadReport) -> f64| workers.iter().map(|r| f(r)).sum::<f64>();
                let share = threads.max(1) as f64;
                stages.push(StageCost {
                    name: format!("{side} workers"),
                    role: StageRole::Layers,
                    ns_per_message: per(sum(|r| r.busy_s), delivered) / share,
                    raw_ns_per_message: per(sum(|r| r.busy_raw_s), delivered) / share,
                    rounds: workers.iter().map(|r| r.busy_rounds).sum(),
                });
            }
        }
    }
    for r in &collected.threads {
        let role = match r.role {
            ThreadRole::Source => StageRole::Source,
            ThreadRole::Sink => StageRole::Sink,
            ThreadRole::Line => StageRole::Line,
            ThreadRole::Layer(_) | ThreadRole::Worker => continue,
        };
        // Lines handle data frames and acknowledgements: charged per message.
        stages.push(StageCost {
            name: r.name.clone(),
            role,
            ns_per_message: per(r.busy_s, delivered),
            raw_ns_per_message: per(r.busy_raw_s, delivered),
            rounds: r.busy_rounds,
        });
    }
    ProjectionInput {
        stages,
        handoff_ns,
        message_size: cfg.message_size,
        line_messages_per_s: line_rate(cfg),
        measured_mbit_s,
        threads: collected.threads.len(),
        cpus: run_cpus(cfg),
        verified,
    }
}

/// Projection with one core per thread. Layer-parallel: each layer stage
/// costs its busy ns per message plus one SPSC hand-off; the slowest stage
/// bounds the message rate. Run-to-completion: each side's workers share the
/// per-message cost of all that side's layers (time inside the entities per
/// delivered message), divided over `threads` cores; the endpoint projection
/// uses the workers' whole busy time (message generation and checking too).
/// Both are bounded by the line rate. The second projection also counts
/// source, sink and line threads.
pub(crate) fn project_layers(
    cfg: &PipelineConfig,
    per_layer: &[LayerStats],
    collected: &Collected,
    delivered: u64,
    handoff_ns: f64,
) -> (f64, String, f64, String) {
    let mut stages: Vec<(String, f64)> = Vec::new();
    match cfg.mode {
        Mode::LayerParallel => {
            for l in per_layer {
                if l.messages > 0 {
                    stages.push((
                        format!("{} layer {}", l.side, l.layer),
                        l.busy_ns_per_message + handoff_ns,
                    ));
                }
            }
        }
        Mode::RunToCompletion { threads } => {
            // Layer work only (time inside the entities, sink excluded), as
            // the layer-parallel projection counts layer threads only.
            for side in Side::BOTH {
                let busy: f64 = per_layer
                    .iter()
                    .filter(|l| l.side == side)
                    .map(|l| l.busy_s)
                    .sum();
                if delivered > 0 {
                    stages.push((
                        format!("{side} workers"),
                        busy * 1e9 / delivered as f64 / threads as f64,
                    ));
                }
            }
        }
    }
    let mut endpoint_stages = match cfg.mode {
        Mode::LayerParallel => stages.clone(),
        Mode::RunToCompletion { threads } => Side::BOTH
            .into_iter()
            .filter(|_| delivered > 0)
            .map(|side| {
                let busy: f64 = collected
                    .threads
                    .iter()
                    .filter(|r| r.side == side && r.role == ThreadRole::Worker)
                    .map(|r| r.busy_s)
                    .sum();
                (
                    format!("{side} workers"),
                    busy * 1e9 / delivered as f64 / threads as f64,
                )
            })
            .collect(),
    };
    for r in &collected.threads {
        let is_endpoint = matches!(
            r.role,
            ThreadRole::Source | ThreadRole::Sink | ThreadRole::Line
        );
        if is_endpoint && delivered > 0 {
            // Lines handle data frames and acks: charge their busy time per message.
            endpoint_stages.push((
                r.name.clone(),
                r.busy_s * 1e9 / delivered as f64 + handoff_ns,
            ));
        }
    }
    let bound = |stages: &[(String, f64)]| -> (f64, String) {
        let worst = stages
            .iter()
            .filter(|s| s.1 > 0.0)
            .max_by(|a, b| a.1.total_cmp(&b.1));
        let mut rate = worst.map_or(f64::INFINITY, |w| 1e9 / w.1);
        let mut name = worst.map_or_else(|| "none".to_string(), |w| w.0.clone());
        if let Some(line) = line_rate(cfg) {
            if line < rate {
                rate = line;
                name = "line".to_string();
            }
        }
        if !rate.is_finite() {
            return (0.0, name);
        }
        (rate * cfg.message_size as f64 * 8.0 / 1e6, name)
    };
    let (a, an) = bound(&stages);
    let (b, bn) = bound(&endpoint_stages);
    (a, an, b, bn)
}
