//! The Markdown and CSV renderings: the same paper / ours / ratio / spread /
//! verdict data as the HTML page.

use crate::brief::{brief_columns, brief_engines, brief_of};
use crate::claims::{ClaimResult, Quantity};
use crate::export::{Block, Page};
use crate::table::{metric_name, stat_names, stat_unit, Cell};
use crate::{
    claim_spread, environment, in_unit, metric_heading, metric_units, num_sig, pick_text, ratio,
    spread_text, warnings, Model,
};
use connlab_lab::{Metric, Vary};
use serde::Serialize;
use std::fmt::Write as _;

/// One Markdown table row with its line end.
pub(crate) fn md_row(cells: &[String]) -> String {
    crate::export::md_row(cells) + "\n"
}

/// Ours as `median [lowest–highest]` (the range only with repetitions).
fn ours_md(cell: &Cell, k: usize, u: (&str, f64)) -> String {
    match &cell.ours[k] {
        None => "—".into(),
        Some(s) if s.n() > 1 => format!("{} [{}]", num_sig(s.median() / u.1), spread_text(s, u)),
        Some(s) => num_sig(s.median() / u.1),
    }
}

fn stat_header(lead: &[&str], metric: Metric) -> String {
    let mut header: Vec<String> = lead.iter().map(|s| s.to_string()).collect();
    for (k, n) in stat_names(metric).iter().enumerate() {
        header.push(format!("{n} paper ({})", stat_unit(metric, k).0));
        header.push(format!("{n} ours"));
        header.push(format!("{n} ours/paper"));
    }
    md_row(&header) + &md_row(&vec!["---".to_string(); header.len()])
}

fn stat_cells(cell: &Cell, metric: Metric) -> Vec<String> {
    (0..3)
        .flat_map(|k| {
            let u = stat_unit(metric, k);
            [
                in_unit(cell.paper[k], u),
                ours_md(cell, k, u),
                ratio(cell.ours_over_paper(k)),
            ]
        })
        .collect()
}

/// A claim's number as the report prints it: a ratio, difference or value
/// with its unit.
fn claim_value(c: &ClaimResult, v: f64) -> String {
    c.format(v)
}

/// The brief table in Markdown: one row per engine, paper | ours |
/// ours/paper per labelled claim.
fn brief_md(claims: &[ClaimResult], engines: &[String]) -> String {
    let columns = brief_columns(claims);
    let rows = brief_engines(&columns, engines);
    if columns.is_empty() || rows.is_empty() {
        return String::new();
    }
    let mut out = String::from("## The paper's numbers beside ours, in brief\n\n");
    let mut header = vec!["configuration".to_string()];
    for (l, group) in &columns {
        let sources: Vec<&str> = group.iter().map(|c| c.source.as_str()).collect();
        header.push(format!("{l}: paper ({})", sources[0]));
        header.push(format!("{l}: ours"));
        header.push(format!("{l}: ours/paper"));
    }
    out.push_str(&md_row(&header));
    out.push_str(&md_row(&vec!["---".to_string(); header.len()]));
    for e in rows {
        let mut cells = vec![e.clone()];
        for (_, group) in &columns {
            match brief_of(group, e) {
                Some(b) => {
                    cells.push(b.paper);
                    cells.push(format!(
                        "{}{} ({})",
                        b.ours,
                        b.spread.map(|s| format!(" [{s}]")).unwrap_or_default(),
                        b.verdict.text()
                    ));
                    cells.push(ratio(b.ours_over_paper));
                }
                None => cells.extend(["—".to_string(), "—".to_string(), "—".to_string()]),
            }
        }
        out.push_str(&md_row(&cells));
    }
    out.push('\n');
    out
}

/// The page of the locality report, in Markdown: one block per section.
pub(crate) fn page(m: &Model) -> Page {
    Page {
        title: m.dir.experiment.title.clone(),
        description: String::new(),
        style: "",
        viewport: false,
        blocks: vec![
            Block::Markdown(intro(m)),
            Block::Markdown(paper_table(m)),
            Block::Markdown(derived(m)),
            Block::Markdown(claims(m)),
            Block::Markdown(crate::validity::markdown(
                &m.validity,
                m.noise.as_ref(),
                &m.noise_of(),
            )),
            Block::Markdown(crate::projection::markdown(m.dir, &m.table)),
            Block::Markdown(environment_table(m)),
            Block::Markdown(warnings_list(m)),
        ],
    }
}

/// The note when nothing finished, and the brief table.
fn intro(m: &Model) -> String {
    let (dir, t) = (m.dir, &m.table);
    let mut out = String::new();
    if dir.points.is_empty() {
        out.push_str("No points finished yet.\n\n");
    }
    out.push_str(&brief_md(&m.claims, &t.engines));
    out
}

/// The paper's table beside ours.
fn paper_table(m: &Model) -> String {
    let (dir, t) = (m.dir, &m.table);
    let mut out = String::new();
    let _ = writeln!(
        out,
        "## {}: {}, paper beside ours\n",
        t.table,
        metric_heading(t.metric),
    );
    out.push_str(&stat_header(&["setting", "engine", "n"], t.metric));
    for row in &t.rows {
        for (e, cell) in t.engines.iter().zip(&row.cells) {
            let mut cells = vec![row.label.clone(), e.clone(), cell.n().to_string()];
            cells.extend(stat_cells(cell, t.metric));
            out.push_str(&md_row(&cells));
        }
    }
    let _ = writeln!(
        out,
        "\nOurs: the median over repetitions, [lowest–highest] when there are several. Values in {}.{}\n",
        metric_units(t.metric).join(", "),
        dir.experiment
            .paper
            .as_ref()
            .map(|p| format!(" {}", p.note.trim().replace('\n', " ")))
            .unwrap_or_default()
    );
    out
}

/// The derived tables.
fn derived(m: &Model) -> String {
    let mut out = String::new();
    for d in &m.derived {
        let _ = writeln!(
            out,
            "## {}: {}, from this sweep's points\n",
            d.table,
            metric_heading(d.metric),
        );
        out.push_str(&stat_header(&["engine", "our point", "n"], d.metric));
        for r in &d.rows {
            let mut cells = vec![
                r.engine.clone(),
                r.picked
                    .clone()
                    .unwrap_or_else(|| "nothing measured".into()),
                r.cell.n().to_string(),
            ];
            cells.extend(stat_cells(&r.cell, d.metric));
            out.push_str(&md_row(&cells));
        }
        let _ = writeln!(
            out,
            "\n{} {}\n",
            pick_text(d.pick, stat_names(d.metric)[0]),
            d.note.trim().replace('\n', " ")
        );
    }
    out
}

/// Each claim with its comparisons and verdicts.
fn claims(m: &Model) -> String {
    let mut out = String::new();
    if !m.claims.is_empty() {
        out.push_str("## The paper's claims against ours\n\n");
        for c in &m.claims {
            let _ = writeln!(
                out,
                "- **{}: {}** ({} of the {} {}{}): **{}**",
                c.source,
                c.text.replace('\n', " "),
                c.quantity.word(),
                c.statistic,
                metric_name(c.metric),
                if c.expect.is_empty() {
                    String::new()
                } else {
                    format!(
                        ", holds if the interval and the A/A noise around the median are {}",
                        c.expect
                    )
                },
                c.verdict.text()
            );
            for k in &c.checks {
                let paper = c.paper_text(k).map_or("no paper value".into(), |p| {
                    format!(
                        "paper {p}{}",
                        if k.paper_from_cells {
                            ""
                        } else {
                            " (its text)"
                        }
                    )
                });
                let ours = match (k.ours, k.spread) {
                    (Some(o), Some((lo, hi))) => format!(
                        "ours {} [interval {}, rounds={}]",
                        claim_value(c, o),
                        claim_spread(c, lo, hi),
                        k.n
                    ),
                    _ => "ours —".into(),
                };
                let _ = writeln!(
                    out,
                    "  - {}, {}: {paper}, {ours}: {}{}",
                    k.engine,
                    k.rows,
                    k.verdict.text(),
                    k.context
                        .as_ref()
                        .map(|c| format!("; {c}"))
                        .unwrap_or_default()
                );
            }
        }
        out.push_str("\nOnly valid points are compared, paired by round: ours is the median of the per-round ratios or differences, with its distribution-free interval. A comparison holds when the interval and the median moved by the A/A noise floor either way lie within the bounds, does not hold when both lie outside, and cannot be judged here otherwise.\n\n");
    }
    out
}

/// The run's environment.
fn environment_table(m: &Model) -> String {
    let dir = m.dir;
    let mut out = String::new();
    out.push_str("## Environment\n\n| | |\n|---|---|\n");
    for (k, v) in environment(dir) {
        out.push_str(&md_row(&[k.to_string(), v]));
    }
    out
}

/// Every warning with the points that raised it.
fn warnings_list(m: &Model) -> String {
    let dir = m.dir;
    let mut out = String::new();
    out.push_str("\n## Warnings\n\n");
    let ws = warnings(dir);
    if ws.is_empty() {
        out.push_str("none\n");
    }
    for (w, ids) in ws {
        let _ = writeln!(out, "- {w} ({}: {})", ids.len(), ids.join(", "));
    }
    out
}

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
