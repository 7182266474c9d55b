//! The CSV of a pipeline sweep: one row per run, the columns of the
//! sweep's `runs.csv`, for pandas.

use connlab_lab::{capacity, projected_capacity, PipelineSweep};
use serde::Serialize;

/// One run. `projected_*` is the bounded projection (empty when there is
/// none, `no_projection` says why); `layers_only_mbit_s` the layer stages
/// alone. Figures are rounded as `runs.csv` rounds them.
#[derive(Serialize)]
pub(crate) struct RunRow {
    id: String,
    mode: String,
    link: String,
    message_size: u64,
    layers: u32,
    repetition: u32,
    messages: u64,
    messages_delivered: u64,
    verified: bool,
    throughput_mbit_s: f64,
    messages_per_s: f64,
    relative_capacity: Option<f64>,
    efficiency: Option<f64>,
    projected_mbit_s: Option<f64>,
    projected_relative_capacity: Option<f64>,
    projected_efficiency: Option<f64>,
    projected_bound: String,
    no_projection: String,
    layers_only_mbit_s: Option<f64>,
    retransmissions: u64,
    elapsed_s: f64,
}

/// `v` rounded to `digits` decimals.
fn round(v: f64, digits: i32) -> f64 {
    let scale = 10f64.powi(digits);
    (v * scale).round() / scale
}

/// Every run of the sweep, in its order.
pub(crate) fn rows(sweep: &PipelineSweep) -> Vec<RunRow> {
    let opt = |v: Option<f64>| v.map(|v| round(v, 4));
    sweep
        .runs
        .iter()
        .map(|r| {
            let x = &r.result;
            let base = sweep.run(&r.params.baseline()).map(|b| &b.result);
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
            RunRow {
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
            }
        })
        .collect()
}
