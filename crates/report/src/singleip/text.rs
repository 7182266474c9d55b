//! The Markdown and CSV of a single-IP sweep.

use super::*;
use serde::Serialize;

/// The Markdown under the title.
pub(super) fn markdown(sweep: &SingleIpSweep) -> String {
    let mut m = String::new();
    let _ = writeln!(m, "## Table 3: 4-byte round trip (µs)\n");
    let _ = writeln!(
        m,
        "| system | min paper | min ours | max paper | max ours | mean paper | mean ours | mean ours/paper |\n|---|---|---|---|---|---|---|---|"
    );
    for s in rtt_systems(sweep) {
        let cell = |mt| {
            (
                paper_value(sweep, mt, s).map_or("—".into(), fmt_num_paper),
                spread(&sweep.values(mt, s, None)),
            )
        };
        let (a, b) = cell(SingleIpMetric::RttMinUs);
        let (c, d) = cell(SingleIpMetric::RttMaxUs);
        let (e, f) = cell(SingleIpMetric::RttMeanUs);
        let r = paper_value(sweep, SingleIpMetric::RttMeanUs, s).map_or("—".into(), |p| {
            ratio(median(sweep.values(SingleIpMetric::RttMeanUs, s, None)), p)
        });
        let _ = writeln!(
            m,
            "| {} | {a} | {b} | {c} | {d} | {e} | {f} | {r} |",
            system_label(s)
        );
    }
    let (p, o) = saps_nat(sweep, SingleIpMetric::RttMeanUs);
    let _ = writeln!(
        m,
        "\nSAPS/NAT mean: paper {}, ours {}\n\n## Claims\n\n| source | claim | verdict | compared |\n|---|---|---|---|",
        p.map_or("—".into(), |v| format!("{v:.2}")),
        o.map_or("—".into(), |v| format!("{v:.2}"))
    );
    for c in &sweep.experiment.paper.claims {
        let v = judge(sweep, &c.check);
        let _ = writeln!(
            m,
            "| {} | {} | {} | {} |",
            c.source,
            c.claim.replace('|', "/"),
            v.verdict.word(),
            v.detail.replace('|', "/")
        );
    }
    m
}

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
                    valid: r.validity.as_ref().map(|v| v.valid),
                    attempts: r.validity.as_ref().map(|v| v.attempts),
                    failed_gates: r
                        .validity
                        .as_ref()
                        .map_or(String::new(), |v| v.failure_text()),
                });
            }
        }
    }
    out
}
