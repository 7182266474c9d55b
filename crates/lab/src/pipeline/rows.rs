//! The rows of a pipeline sweep's `runs.csv`: one per run, for pandas. The
//! report's CSV export writes the same rows.

use super::sweep::{capacity, projected_capacity, PipelineSweep};
use serde::{Deserialize, Serialize};

/// One run of `runs.csv`. `projected_*` is the bounded projection (empty
/// when there is none, `no_projection` says why); `layers_only_mbit_s` the
/// layer stages alone; `valid`, `attempts` and `failed_gates` the run's
/// validity gates. Throughput is rounded to 3 decimals, messages/s to
/// 1, ratios and seconds to 4.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PipelineRunRow {
    /// The run's id.
    pub id: String,
    /// Pipeline mode.
    pub mode: String,
    /// The line's label.
    pub link: String,
    /// Bytes per message.
    pub message_size: u64,
    /// Layers.
    pub layers: u32,
    /// Repetition, from 0.
    pub repetition: u32,
    /// Messages sent.
    pub messages: u64,
    /// Messages delivered.
    pub messages_delivered: u64,
    /// Whether the receiver verified every message.
    pub verified: bool,
    /// Measured throughput, Mbit/s of user data.
    pub throughput_mbit_s: f64,
    /// Messages per second.
    pub messages_per_s: f64,
    /// Measured relative capacity.
    pub relative_capacity: Option<f64>,
    /// Measured efficiency.
    pub efficiency: Option<f64>,
    /// Projected throughput, Mbit/s.
    pub projected_mbit_s: Option<f64>,
    /// Projected relative capacity.
    pub projected_relative_capacity: Option<f64>,
    /// Projected efficiency.
    pub projected_efficiency: Option<f64>,
    /// What bounds the projection.
    pub projected_bound: String,
    /// Why there is no projection (empty when there is one).
    pub no_projection: String,
    /// The layer stages alone, Mbit/s.
    pub layers_only_mbit_s: Option<f64>,
    /// TCP retransmissions.
    pub retransmissions: u64,
    /// Seconds the run took.
    pub elapsed_s: f64,
    /// Whether the run passed every validity gate (empty: measured before
    /// gates existed).
    pub valid: Option<bool>,
    /// Attempts made for the run (empty as `valid`).
    pub attempts: Option<u32>,
    /// The gates it failed, in words (empty when valid).
    pub failed_gates: String,
}

/// `v` rounded to `digits` decimals.
fn round(v: f64, digits: i32) -> f64 {
    let scale = 10f64.powi(digits);
    (v * scale).round() / scale
}

impl PipelineSweep {
    /// Every run as a row of `runs.csv`, in the sweep's order.
    pub fn rows(&self) -> Vec<PipelineRunRow> {
        let opt = |v: Option<f64>| v.map(|v| round(v, 4));
        self.runs
            .iter()
            .map(|r| {
                let x = &r.result;
                let base = self.run(&r.params.baseline()).map(|b| &b.result);
                let (rc, eff) = capacity(
                    x.throughput_mbit_s,
                    r.params.layers,
                    base.map(|b| b.throughput_mbit_s),
                );
                let (prc, peff, why) = match projected_capacity(x, r.params.layers, base) {
                    Ok((rc, eff)) => (Some(rc), Some(eff), String::new()),
                    Err(e) => (None, None, e),
                };
                let why = match x.projection.value() {
                    Err(e) => e.to_string(),
                    Ok(_) => why,
                };
                PipelineRunRow {
                    id: r.id.clone(),
                    mode: r.params.mode.clone(),
                    link: r.params.link.label(),
                    message_size: r.params.message_size,
                    layers: r.params.layers,
                    repetition: r.params.repetition,
                    messages: r.params.messages,
                    messages_delivered: x.messages_delivered,
                    verified: x.verified,
                    throughput_mbit_s: round(x.throughput_mbit_s, 3),
                    messages_per_s: round(x.messages_per_s, 1),
                    relative_capacity: opt(rc),
                    efficiency: opt(eff),
                    projected_mbit_s: opt(x.projection.mbit_s),
                    projected_relative_capacity: opt(prc),
                    projected_efficiency: opt(peff),
                    projected_bound: x.projection.bound.clone(),
                    no_projection: why,
                    layers_only_mbit_s: opt(x.projection.layers_only_mbit_s),
                    retransmissions: x.retransmissions,
                    elapsed_s: round(x.elapsed_s, 4),
                    valid: r.checked.validity.as_ref().map(|v| v.valid),
                    attempts: r.checked.validity.as_ref().map(|v| v.attempts),
                    failed_gates: r
                        .checked
                        .validity
                        .as_ref()
                        .map_or(String::new(), |v| v.failure_text()),
                }
            })
            .collect()
    }

    /// `runs.csv`: a header and [`PipelineSweep::rows`], quoted where a
    /// field needs it.
    pub fn csv(&self) -> Result<String, csv::Error> {
        let mut w = csv::Writer::from_writer(Vec::new());
        for row in self.rows() {
            w.serialize(row)?;
        }
        let bytes = w.into_inner().map_err(|e| e.into_error())?;
        // Every field is a Rust string or a number: the bytes are UTF-8.
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    }
}
