//! The CSV rows of a single-IP sweep.

use super::*;
use serde::Serialize;

/// One CSV row: one figure of one repetition of one point (long form),
/// with the point's id and validity: `valid` empty for a point measured
/// before gates existed, `failed_gates` the gates an invalid point failed
/// (its figures are in no table or claim).
#[derive(Serialize)]
pub(super) struct CsvRow {
    experiment: &'static str,
    system: &'static str,
    param_bytes: u64,
    repetition: u32,
    metric: String,
    value: f64,
    point: String,
    valid: Option<bool>,
    attempts: Option<u32>,
    failed_gates: String,
}

/// Every figure of every point, in the sweep's order.
pub(super) fn rows(sweep: &SingleIpSweep) -> Vec<CsvRow> {
    let metrics = [
        SingleIpMetric::RttMinUs,
        SingleIpMetric::RttMedianUs,
        SingleIpMetric::RttMeanUs,
        SingleIpMetric::RttMaxUs,
        SingleIpMetric::TransferMs,
        SingleIpMetric::TransferMbitS,
        SingleIpMetric::FgCompletionMs,
        SingleIpMetric::FgQueueMs,
        SingleIpMetric::Jain,
        SingleIpMetric::JainEarly,
        SingleIpMetric::LinkUtilisation,
        SingleIpMetric::FrontCpuSPerGb,
        SingleIpMetric::NodesCpuSPerGb,
    ];
    let mut out = Vec::new();
    for r in &sweep.points {
        for m in metrics {
            if m.experiment() != r.point.experiment {
                continue;
            }
            if let Some(value) = m.of(r) {
                out.push(CsvRow {
                    experiment: r.point.experiment.name(),
                    system: r.point.system.name(),
                    param_bytes: r.point.param,
                    repetition: r.point.repetition,
                    metric: format!("{m:?}"),
                    value,
                    point: r.id.clone(),
                    valid: r.checked.validity.as_ref().map(|v| v.valid),
                    attempts: r.checked.validity.as_ref().map(|v| v.attempts),
                    failed_gates: r
                        .checked
                        .validity
                        .as_ref()
                        .map_or(String::new(), |v| v.failure_text()),
                });
            }
        }
    }
    out
}
