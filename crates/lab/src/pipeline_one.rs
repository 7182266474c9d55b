//! One run of `connlab pipeline` outside a sweep: the run, the one-layer
//! baseline that relative capacity needs (measured first unless given or
//! the run has one layer), the figures against it, and the `--json`
//! documents (`connlab.pipeline/1`, and `connlab.pipeline.costs/1` for the
//! microbenchmarks of [`costs`]).

use crate::{capacity, projected_capacity};
use anyhow::anyhow;
use connlab_os::Environment;
use connlab_pipeline::{HandoffCost, PipelineConfig, PipelineResult, PoolCost};
use serde::Serialize;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};

/// A finished run and its figures against the one-layer baseline.
#[derive(Debug)]
pub struct OneRun {
    /// The configuration run.
    pub config: PipelineConfig,
    /// What it measured.
    pub result: PipelineResult,
    /// The one-layer baseline run, when one was measured (or this run,
    /// at one layer).
    pub baseline_run: Option<PipelineResult>,
    /// The one-layer throughput used, Mbit/s.
    pub baseline: Option<f64>,
    /// Whether the baseline was measured here (not given).
    pub baseline_measured: bool,
    /// Throughput × layers / one-layer throughput.
    pub relative_capacity: Option<f64>,
    /// Relative capacity / layers.
    pub efficiency: Option<f64>,
    /// The same from the projected throughputs, or why there are none.
    pub projected: Result<(f64, f64), String>,
}

/// Runs `config` until done or `stop`; `baseline` is the one-layer
/// throughput in Mbit/s, measured first (with a `note`) when `None` and
/// the run has more than one layer. `Ok(None)`: stopped before the run.
pub fn run_one(
    config: &PipelineConfig,
    baseline: Option<f64>,
    stop: &AtomicBool,
    note: &mut dyn FnMut(&str),
) -> anyhow::Result<Option<OneRun>> {
    let (base, baseline_run, measured) = match baseline {
        Some(b) => (Some(b), None, false),
        None if config.layers == 1 => (None, None, true),
        None => {
            note("  one-layer baseline for relative capacity ...");
            let base_cfg = PipelineConfig {
                layers: 1,
                ..config.clone()
            };
            let base = connlab_pipeline::run(&base_cfg, stop)
                .map_err(|e| anyhow!("the one-layer baseline run: {e}"))?;
            if !base.verified || base.interrupted {
                note(&format!(
                    "  warning: the baseline run was {}: relative capacity left out",
                    if base.interrupted {
                        "interrupted"
                    } else {
                        "not verified"
                    }
                ));
                (None, None, true)
            } else {
                (Some(base.throughput_mbit_s), Some(base), true)
            }
        }
    };
    if stop.load(Relaxed) {
        return Ok(None);
    }
    let result = connlab_pipeline::run(config, stop).map_err(|e| anyhow!("{e}"))?;
    let one_layer = config.layers == 1;
    let layers = config.layers as u32;
    let base = if one_layer && baseline.is_none() {
        Some(result.throughput_mbit_s)
    } else {
        base
    };
    let baseline_run = if one_layer {
        Some(result.clone())
    } else {
        baseline_run
    };
    let (relative_capacity, efficiency) = capacity(result.throughput_mbit_s, layers, base);
    let projected = projected_capacity(&result, layers, baseline_run.as_ref());
    Ok(Some(OneRun {
        config: config.clone(),
        result,
        baseline_run,
        baseline: base,
        baseline_measured: measured,
        relative_capacity,
        efficiency,
        projected,
    }))
}

/// `--json` of a run (schema `connlab.pipeline/1`).
#[derive(Serialize)]
pub struct RunDocument<'a> {
    schema: &'static str,
    environment: Environment,
    config: &'a PipelineConfig,
    #[serde(flatten)]
    result: &'a PipelineResult,
    /// Throughput × layers / one-layer throughput.
    relative_capacity: Option<f64>,
    /// Relative capacity / layers.
    efficiency: Option<f64>,
    /// The one-layer throughput used, Mbit/s, and whether it was measured here.
    baseline_throughput_mbit_s: Option<f64>,
    baseline_measured: bool,
    /// The same from the projected throughputs (one core per thread).
    projected_relative_capacity: Option<f64>,
    projected_efficiency: Option<f64>,
}

impl OneRun {
    /// The `--json` document, with this machine's environment.
    pub fn document(&self) -> RunDocument<'_> {
        let projected = self.projected.as_ref().ok();
        RunDocument {
            schema: "connlab.pipeline/1",
            environment: Environment::capture(),
            config: &self.config,
            result: &self.result,
            relative_capacity: self.relative_capacity,
            efficiency: self.efficiency,
            baseline_throughput_mbit_s: self.baseline,
            baseline_measured: self.baseline_measured,
            projected_relative_capacity: projected.map(|p| p.0),
            projected_efficiency: projected.map(|p| p.1),
        }
    }

    /// Why the delivered stream does not count, if it does not: not
    /// verified, with how far it got and the first error.
    pub fn failure(&self) -> Option<String> {
        let r = &self.result;
        (!r.verified).then(|| {
            format!(
                "the delivered stream was not verified ({} of {} messages{}{})",
                r.messages_delivered,
                r.messages_sent,
                if r.timed_out {
                    ", time limit reached"
                } else {
                    ""
                },
                r.errors
                    .first()
                    .map_or(String::new(), |e| format!("; first error: {e}"))
            )
        })
    }
}

/// The microbenchmarks of `connlab pipeline --costs` and their `--json`
/// document (schema `connlab.pipeline.costs/1`).
#[derive(Serialize)]
pub struct Costs {
    schema: &'static str,
    environment: Environment,
    /// The SPSC hand-off between two threads.
    pub handoff: HandoffCost,
    /// The buffer pool, lock-free against a mutex.
    pub pool: PoolCost,
}

/// Measures the SPSC hand-off and the pool against a mutex, two threads
/// (fewer items in debug builds).
pub fn costs() -> Costs {
    let (items, ops) = if cfg!(debug_assertions) {
        (200_000, 100_000)
    } else {
        (5_000_000, 2_000_000)
    };
    Costs {
        schema: "connlab.pipeline.costs/1",
        environment: Environment::capture(),
        handoff: connlab_pipeline::measure_handoff(items),
        pool: connlab_pipeline::measure_pool(2, ops),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_one_layer_run_is_its_own_baseline() {
        let config = PipelineConfig {
            layers: 1,
            messages: 50,
            message_size: 1024,
            ..PipelineConfig::default()
        };
        let stop = AtomicBool::new(false);
        let mut notes = Vec::new();
        let one = run_one(&config, None, &stop, &mut |n| notes.push(n.to_string()))
            .unwrap()
            .unwrap();
        assert!(notes.is_empty(), "{notes:?}");
        assert!(one.result.verified && one.failure().is_none());
        assert_eq!(one.baseline, Some(one.result.throughput_mbit_s));
        assert!(one.baseline_measured);
        let rc = one.relative_capacity.unwrap();
        assert!((rc - 1.0).abs() < 1e-9, "{rc}");
        let doc = serde_json::to_value(one.document()).unwrap();
        assert_eq!(doc["schema"], "connlab.pipeline/1");
    }

    #[test]
    fn a_given_baseline_is_not_measured_and_a_stop_skips_the_run() {
        let config = PipelineConfig {
            layers: 3,
            messages: 10,
            ..PipelineConfig::default()
        };
        let stop = AtomicBool::new(true);
        let out = run_one(&config, Some(100.0), &stop, &mut |_| ()).unwrap();
        assert!(out.is_none());
    }
}
