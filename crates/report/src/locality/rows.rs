//! The CSV of the locality report, in long form: the paper table's cells,
//! the derived tables' cells, the claims' comparisons, the invalid points,
//! the A/A noise floor and the projections.

use crate::claims::Quantity;
use crate::table::{metric_name, stat_names, stat_unit, Cell};
use crate::Model;
use connlab_lab::{Metric, Vary};
use serde::Serialize;

/// One CSV row in long form. `kind` is `cell` (the paper table), `derived`
/// (a derived table), `claim` (one comparison of a claim), `invalid_point`
/// (a point that failed a gate: its id in `row_label`, attempts in `n`, the
/// gates in `verdict`), `noise_floor` (the A/A control: its factor in
/// `claim_ours`) or `projection` (one engine and setting projected to a
/// setting of the paper this machine cannot run); columns that do not apply
/// to a kind are empty.
#[derive(Serialize, Default)]
pub(crate) struct CsvRow {
    kind: &'static str,
    table: String,
    metric: String,
    statistic: String,
    row_label: String,
    connections: Option<u64>,
    active_ratio: Option<f64>,
    rate_per_s: Option<f64>,
    engine: String,
    n: usize,
    paper_us: Option<f64>,
    ours_median_us: Option<f64>,
    ours_min_us: Option<f64>,
    ours_max_us: Option<f64>,
    ours_over_paper: Option<f64>,
    claim_text: String,
    /// `ratio`, or `value_us` for a value claim.
    claim_quantity: String,
    claim_paper: Option<f64>,
    paper_from_cells: Option<bool>,
    claim_ours: Option<f64>,
    claim_ours_min: Option<f64>,
    claim_ours_max: Option<f64>,
    /// The coverage of the interval `claim_ours_min`..`claim_ours_max`
    /// (0.95; less with few rounds; 0 when unpaired).
    claim_coverage: Option<f64>,
    expect: String,
    verdict: String,
    claim_verdict: String,
    /// A projection: the parameter it extends along (`connections`,
    /// `active_ratio` or `rate_per_s`).
    projection_along: String,
    /// A projection: the paper's value of that parameter projected to.
    projected_to: Option<f64>,
    /// A projection: our measured medians it is fitted through, as
    /// `value:median` pairs separated by `;` (the median in `stored_unit`).
    projection_measured: String,
    /// A projection: the projected statistic, in `stored_unit`.
    projected_us: Option<f64>,
    /// A projection: R² of the least-squares line.
    projection_r2: Option<f64>,
    /// A projection: why there is none (empty when there is one).
    no_projection: String,
    /// The unit of the `*_us` columns and of a claim's numbers: `us` for
    /// times, else the statistic's own (`CPUs`, `req/s`, `×` for ratios).
    stored_unit: String,
}

/// The unit statistic `k` of a metric is stored in (the `*_us` columns
/// hold it): `us` for times, else the statistic's own (`CPUs`, `req/s`).
fn stored_unit(m: Metric, k: usize) -> &'static str {
    match m {
        Metric::ServiceLatency | Metric::SendDeviation | Metric::PollCall | Metric::Cycle => "us",
        _ => stat_unit(m, k).0,
    }
}

fn metric_key(m: Metric) -> String {
    metric_name(m).replace([' ', '-'], "_")
}

fn cell_rows(
    kind: &'static str,
    table: &str,
    metric: Metric,
    base: &CsvRow,
    cell: &Cell,
) -> Vec<CsvRow> {
    (0..3)
        .filter(|k| cell.ours[*k].is_some() || cell.paper[*k].is_some())
        .map(|k| {
            let s = cell.ours[k].as_ref();
            CsvRow {
                kind,
                table: table.to_string(),
                metric: metric_key(metric),
                statistic: stat_names(metric)[k].to_string(),
                row_label: base.row_label.clone(),
                connections: base.connections,
                active_ratio: base.active_ratio,
                rate_per_s: base.rate_per_s,
                engine: base.engine.clone(),
                n: cell.n(),
                paper_us: cell.paper[k],
                ours_median_us: s.map(|s| s.median()),
                ours_min_us: s.map(|s| s.min()),
                ours_max_us: s.map(|s| s.max()),
                ours_over_paper: cell.ours_over_paper(k),
                stored_unit: stored_unit(metric, k).into(),
                ..CsvRow::default()
            }
        })
        .collect()
}

/// The CSV rows of the locality report: cells, derived cells, claims'
/// comparisons and projections.
pub(crate) fn rows(m: &Model) -> Vec<CsvRow> {
    let t = &m.table;
    let mut rows: Vec<CsvRow> = Vec::new();
    for row in &t.rows {
        for (e, cell) in t.engines.iter().zip(&row.cells) {
            let base = CsvRow {
                row_label: row.label.clone(),
                connections: Some(row.connections),
                active_ratio: Some(row.active_ratio),
                rate_per_s: Some(row.rate_per_s),
                engine: e.clone(),
                ..CsvRow::default()
            };
            rows.extend(cell_rows("cell", &t.table, t.metric, &base, cell));
        }
    }
    for d in &m.derived {
        for r in &d.rows {
            let base = CsvRow {
                row_label: r.picked.clone().unwrap_or_default(),
                engine: r.engine.clone(),
                ..CsvRow::default()
            };
            rows.extend(cell_rows("derived", &d.table, d.metric, &base, &r.cell));
        }
    }
    for c in &m.claims {
        for k in &c.checks {
            rows.push(CsvRow {
                kind: "claim",
                table: c.source.clone(),
                metric: metric_key(c.metric),
                statistic: c.statistic.to_string(),
                row_label: k.rows.clone(),
                engine: k.engine.clone(),
                n: k.n,
                claim_text: c.text.clone(),
                claim_quantity: match c.quantity {
                    Quantity::Ratio => "ratio".into(),
                    q if stored_unit(c.metric, 0) == "us" => format!("{}_us", q.word()),
                    q => q.word().into(),
                },
                stored_unit: match c.quantity {
                    Quantity::Ratio => "×".into(),
                    _ => stored_unit(
                        c.metric,
                        c.metric
                            .stat_names()
                            .iter()
                            .position(|n| *n == c.statistic)
                            .unwrap_or(0),
                    )
                    .into(),
                },
                claim_paper: k.paper,
                paper_from_cells: k.paper.map(|_| k.paper_from_cells),
                claim_ours: k.ours,
                claim_ours_min: k.spread.map(|s| s.0),
                claim_ours_max: k.spread.map(|s| s.1),
                claim_coverage: k.coverage,
                expect: c.expect.clone(),
                verdict: k.verdict.text(),
                claim_verdict: c.verdict.text(),
                ..CsvRow::default()
            });
        }
    }
    for (id, v) in &m.validity.invalid {
        rows.push(CsvRow {
            kind: "invalid_point",
            row_label: id.clone(),
            n: v.attempts as usize,
            verdict: v.failure_text(),
            ..CsvRow::default()
        });
    }
    if let Some(n) = &m.noise {
        rows.push(CsvRow {
            kind: "noise_floor",
            table: t.table.clone(),
            metric: metric_key(t.metric),
            statistic: stat_names(t.metric)[0].to_string(),
            engine: n.engine.clone(),
            n: n.n,
            claim_ours: Some(n.factor),
            stored_unit: "×".into(),
            ..CsvRow::default()
        });
    }
    if let Some(spec) = crate::projection::spec(m.dir) {
        let along = match spec.along {
            Vary::Connections => "connections",
            Vary::ActiveRatio => "active_ratio",
            Vary::Rate => "rate_per_s",
        };
        for p in crate::projection::projections(m.dir, t) {
            rows.push(CsvRow {
                kind: "projection",
                table: t.table.clone(),
                metric: metric_key(t.metric),
                statistic: stat_names(t.metric)[0].to_string(),
                row_label: p.group.clone(),
                engine: p.engine.clone(),
                n: p.measured.len(),
                projection_along: along.into(),
                projected_to: Some(p.target),
                projection_measured: p
                    .measured
                    .iter()
                    .map(|(x, y)| format!("{x}:{y}"))
                    .collect::<Vec<_>>()
                    .join(";"),
                projected_us: p.projected.as_ref().ok().copied(),
                projection_r2: p.r2,
                no_projection: p.projected.as_ref().err().cloned().unwrap_or_default(),
                stored_unit: stored_unit(t.metric, 0).into(),
                ..CsvRow::default()
            });
        }
    }
    rows
}
