//! The rows each kind of results directory contributes to the `connlab
//! reproduce` index: its title, how far it ran, and its tables and claims as
//! [`ClaimRow`]s. One function per experiment kind; the kind's entry in the
//! registry (`connlab-kinds`) picks it.

use crate::claims::{check_claims, derived_tables, ClaimResult, Verdict};
use crate::index::ClaimRow;
use crate::table::{metric_name, Cell, PaperTable};
use connlab_lab::{PipelineSweep, SingleIpSweep, SweepDir};

/// What one results directory says on the index.
#[derive(Clone, Debug, Default)]
pub struct ExperimentClaims {
    /// The experiment's title.
    pub title: String,
    /// How far it ran, e.g. `45 of 45 points`.
    pub progress: String,
    /// Its tables, figures and claims.
    pub rows: Vec<ClaimRow>,
    /// Its points that failed a validity gate, counted per gate.
    pub invalid_by_gate: Vec<(String, usize)>,
    /// Its invalid points, of how many recorded validity.
    pub invalid_points: (usize, usize),
    /// Its A/A control's noise floor in words, if it measured one.
    pub noise_floor: Option<String>,
}

/// The index rows of a pipeline sweep.
pub fn pipeline_claims(sweep: &PipelineSweep) -> ExperimentClaims {
    let (invalid_by_gate, invalid_points) =
        invalid_of(sweep.runs.iter().map(|r| r.checked.validity.as_ref()));
    ExperimentClaims {
        title: sweep.experiment.title.clone(),
        progress: format!("{} of {} runs", sweep.runs.len(), sweep.runs_total),
        rows: pipeline_rows(sweep),
        invalid_by_gate,
        invalid_points,
        noise_floor: None,
    }
}

/// The index rows of a single-IP sweep.
pub fn singleip_claims(sweep: &SingleIpSweep) -> ExperimentClaims {
    let (invalid_by_gate, invalid_points) =
        invalid_of(sweep.points.iter().map(|r| r.checked.validity.as_ref()));
    ExperimentClaims {
        title: sweep.experiment.title.clone(),
        progress: format!(
            "{} of {} points",
            sweep.points.len(),
            sweep.info.points_total
        ),
        rows: singleip_rows(sweep),
        invalid_by_gate,
        invalid_points,
        noise_floor: None,
    }
}

/// The index rows of a locality or web sweep: the paper's table and derived
/// tables beside ours, then each claim.
pub fn sweep_claims(sweep: &SweepDir) -> ExperimentClaims {
    let table = PaperTable::of(sweep);
    let mut rows = Vec::new();
    if sweep.experiment.paper.is_some() {
        let cells: Vec<&Cell> = table.rows.iter().flat_map(|r| r.cells.iter()).collect();
        rows.push(table_row(&table.table, metric_name(table.metric), &cells));
        for d in derived_tables(sweep, &table) {
            let cells: Vec<&Cell> = d.rows.iter().map(|r| &r.cell).collect();
            rows.push(table_row(&d.table, metric_name(d.metric), &cells));
        }
    }
    rows.extend(check_claims(sweep, &table).iter().map(claim_row));
    let all: Vec<&connlab_lab::PointResult> =
        sweep.points.iter().chain(sweep.controls.iter()).collect();
    let checked: Vec<&connlab_lab::validity::Validity> = all
        .iter()
        .filter_map(|p| p.checked.validity.as_ref())
        .collect();
    ExperimentClaims {
        title: sweep.info.title.clone(),
        progress: format!(
            "{} of {} points",
            sweep.points.len() + sweep.controls.len(),
            sweep.info.points_total
        ),
        rows,
        invalid_by_gate: connlab_lab::validity::failures_by_gate(checked.iter().copied()),
        invalid_points: (checked.iter().filter(|v| !v.valid).count(), checked.len()),
        noise_floor: crate::claims::noise(sweep, table.metric, 0).map(|n| n.text()),
    }
}

/// The invalid points (or runs) of a directory per gate, and how many of
/// how many that recorded validity failed (records without validity, from
/// before gates, are left out of both).
fn invalid_of<'a>(
    records: impl Iterator<Item = Option<&'a connlab_lab::validity::Validity>>,
) -> (Vec<(String, usize)>, (usize, usize)) {
    let checked: Vec<&connlab_lab::validity::Validity> = records.flatten().collect();
    (
        connlab_lab::validity::failures_by_gate(checked.iter().copied()),
        (checked.iter().filter(|v| !v.valid).count(), checked.len()),
    )
}

/// A paper table as one index row: how many of its cells we measured, and
/// the spread of ours/paper over them (first statistic). Absolute values are
/// not judged: the claims judge what should carry over.
fn table_row(table: &str, what: &str, cells: &[&Cell]) -> ClaimRow {
    let with_paper = cells.iter().filter(|c| c.paper[0].is_some()).count();
    let mut ratios: Vec<f64> = cells.iter().filter_map(|c| c.ours_over_paper(0)).collect();
    ratios.sort_by(f64::total_cmp);
    let ours = match (ratios.first(), ratios.last()) {
        (Some(lo), Some(hi)) => format!(
            "{} of {with_paper} cells measured; ours/paper {} (median {})",
            ratios.len(),
            range(*lo, *hi, "×"),
            fmt(ratios[ratios.len() / 2], "×")
        ),
        _ => format!("0 of {with_paper} cells measured"),
    };
    ClaimRow {
        source: table.to_string(),
        text: format!("the paper's {what} cells beside ours"),
        paper: format!("{with_paper} cells"),
        ours,
        verdict: if ratios.is_empty() {
            Verdict::CannotMeasure("none of the table's settings ran".into())
        } else {
            Verdict::NotJudged
        },
        reason: "the claims judge what should carry over".into(),
        table: true,
    }
}

/// A claim's figures over its comparisons: the paper's numbers (`shape
/// only` without any), the range of ours and the range of their
/// intervals (`None` when they add nothing to ours).
pub(crate) fn claim_figures(c: &ClaimResult) -> (String, String, Option<String>) {
    let span = |values: Vec<f64>| -> Option<(f64, f64)> {
        let lo = values.iter().copied().reduce(f64::min)?;
        let hi = values.iter().copied().reduce(f64::max)?;
        Some((lo, hi))
    };
    let both = |lo: f64, hi: f64| {
        let (a, b) = (c.format(lo), c.format(hi));
        if a == b {
            a
        } else {
            format!("{a} to {b}")
        }
    };
    let mut papers: Vec<String> = Vec::new();
    for k in &c.checks {
        if let Some(t) = c.paper_text(k) {
            if !papers.contains(&t) {
                papers.push(t);
            }
        }
    }
    let paper = match papers.len() {
        0 => "shape only".to_string(),
        1 | 2 => papers.join(", "),
        _ => span(c.checks.iter().filter_map(|k| k.paper).collect())
            .map_or("shape only".into(), |(lo, hi)| both(lo, hi)),
    };
    let ours = span(c.checks.iter().filter_map(|k| k.ours).collect());
    let spread = span(
        c.checks
            .iter()
            .filter_map(|k| k.spread)
            .flat_map(|(a, b)| [a, b])
            .collect(),
    );
    let interval = match (ours, spread) {
        (Some(o), Some(s)) if s != o => Some(both(s.0, s.1)),
        _ => None,
    };
    (
        paper,
        ours.map_or("—".into(), |(lo, hi)| both(lo, hi)),
        interval,
    )
}

/// A claim as one index row: the range of the paper's numbers and of ours
/// over its comparisons, and its overall verdict.
fn claim_row(c: &ClaimResult) -> ClaimRow {
    let (paper, ours, interval) = claim_figures(c);
    let ours = match interval {
        Some(i) => format!("{ours} [spread {i}]"),
        None => ours,
    };
    let mut reason = String::new();
    if !c.expect.is_empty() {
        reason = format!("criterion {}", c.expect);
    }
    if !c.checks.is_empty() {
        if !reason.is_empty() {
            reason.push_str("; ");
        }
        reason.push_str(&format!(
            "{} comparison{} ({} of {})",
            c.checks.len(),
            if c.checks.len() == 1 { "" } else { "s" },
            c.statistic,
            metric_name(c.metric)
        ));
    }
    ClaimRow {
        source: c.source.clone(),
        text: c.text.clone(),
        paper,
        ours,
        verdict: c.verdict.clone(),
        reason,
        table: false,
    }
}

fn fmt(v: f64, unit: &str) -> String {
    let digits = if v.abs() >= 100.0 {
        0
    } else if v.abs() >= 10.0 {
        1
    } else {
        2
    };
    format!("{v:.digits$}{unit}")
}

fn range(lo: f64, hi: f64, unit: &str) -> String {
    if fmt(lo, "") == fmt(hi, "") {
        fmt(lo, unit)
    } else if lo < 0.0 || hi < 0.0 {
        format!("{} to {}", fmt(lo, ""), fmt(hi, unit))
    } else {
        format!("{}–{}", fmt(lo, ""), fmt(hi, unit))
    }
}

/// A pipeline sweep's rows: the paper's Tables 1-3 (our layer-parallel
/// Mbit/s over the paper's line against the paper's cells, compared and not
/// judged) and each claim, judged on our measured figures with the verdict
/// on the projection to one core per thread beside it.
fn pipeline_rows(sweep: &PipelineSweep) -> Vec<ClaimRow> {
    let Some(paper) = &sweep.experiment.paper else {
        return Vec::new();
    };
    let Some((link, messages)) = sweep.paper_conditions() else {
        return Vec::new();
    };
    let mut rows = Vec::new();
    let mut tables: Vec<&str> = paper.cells.iter().map(|c| c.table.as_str()).collect();
    tables.dedup();
    for table in tables {
        let cells: Vec<_> = paper.cells.iter().filter(|c| c.table == table).collect();
        let mut ratios: Vec<f64> = Vec::new();
        for c in &cells {
            let Ok(size) = c.message_bytes() else {
                continue;
            };
            let ours = sweep.cell("layer-parallel", &link, size, messages, c.layers);
            let median = |v: &[f64]| {
                let mut v = v.to_vec();
                v.sort_by(f64::total_cmp);
                v.get(v.len() / 2).copied()
            };
            if let Some(m) = median(&ours.measured[0]) {
                ratios.push(m / c.mbit_s);
            }
        }
        ratios.sort_by(f64::total_cmp);
        let ours = match (ratios.first(), ratios.last()) {
            (Some(lo), Some(hi)) => format!(
                "{} of {} cells measured; Mbit/s ours/paper {}",
                ratios.len(),
                cells.len(),
                range(*lo, *hi, "×")
            ),
            _ => format!("0 of {} cells measured", cells.len()),
        };
        rows.push(ClaimRow {
            source: table.to_string(),
            text: "Mbit/s, relative capacity and efficiency against layers, beside ours (layer-parallel, the paper's line and message count)".into(),
            paper: format!("{} cells", cells.len()),
            ours,
            verdict: if ratios.is_empty() {
                Verdict::CannotMeasure("none of the table's settings ran".into())
            } else {
                Verdict::NotJudged
            },
            reason: "the claims judge what should carry over".into(),
            table: true,
        });
    }
    for c in sweep.claims() {
        rows.push(ClaimRow {
            source: c.claim.source.clone(),
            text: c.claim.text.clone(),
            paper: c.paper.detail.clone(),
            ours: format!(
                "measured: {}; projected to a core per thread (not a verdict): {}",
                c.measured.detail, c.projection
            ),
            verdict: c.measured.verdict.clone(),
            reason: format!(
                "judged on the measured figures where a run's threads fit {} CPUs; the projection is shown, not judged",
                c.cpus
            ),
            table: false,
        });
    }
    rows
}

/// A single-IP sweep's rows: one per claim, judged by the single-IP kind's
/// own checks across the valid repetitions' spread (the paper's values
/// stand in its report).
pub(crate) fn singleip_rows(sweep: &SingleIpSweep) -> Vec<ClaimRow> {
    sweep
        .experiment
        .paper
        .claims
        .iter()
        .map(|c| {
            let judged = connlab_lab::judge(sweep, &c.check);
            ClaimRow {
                source: c.source.clone(),
                text: c.claim.clone(),
                paper: c.paper.clone().unwrap_or_else(|| "shape only".into()),
                ours: judged.detail,
                verdict: judged.verdict,
                reason: String::new(),
                table: false,
            }
        })
        .collect()
}
