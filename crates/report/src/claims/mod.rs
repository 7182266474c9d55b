//! The paper's claims checked against our repetitions, with a verdict each,
//! and the paper's derived tables (Table 5 from the runs of Table 3).
//!
//! A claim holds only when it holds across our spread. The spread of a ratio
//! between two cells is the conservative interval: the lowest and the highest
//! ratio any pairing of the two cells' repetitions can give (smallest
//! numerator over largest denominator, and the reverse). It does not assume
//! that repetition k of one cell is related to repetition k of another.

use crate::table::{
    close, grouped, our_stats, param_text, rate_text, ratio_text, spreads, stat_unit, Cell,
    PaperTable, Row, Spread,
};
pub use connlab_lab::Verdict;
use connlab_lab::{
    ClaimShape, Compare, DerivedPick, Metric, PaperCell, PaperClaim, SweepDir, Vary,
};

mod checks;
mod derived;
mod evidence;

use checks::{
    along_checks, change_checks, metric_checks, peak_checks, value_checks, versus_checks,
};
pub use derived::{derived_tables, DerivedRow, DerivedTable};
pub(crate) use evidence::p90;
pub use evidence::{noise, Noise};

/// One comparison of a claim: an engine over two rows, against another
/// engine at a row, or its value over the rows.
#[derive(Clone, Debug)]
pub struct ClaimCheck {
    /// The engine (`select`) or pair (`rtsig ÷ poll`, `nat − direct`).
    pub engine: String,
    /// The claim's engine this check is about (`rtsig`).
    pub subject: String,
    /// The rows compared, e.g. `400 → 10,000 conns at ratio 1 · 125 req/s`.
    pub rows: String,
    /// The paper's number (ratio, or value in µs).
    pub paper: Option<f64>,
    /// Whether `paper` was computed from the paper's cells (else it is the
    /// claim's `paper_ratio`).
    pub paper_from_cells: bool,
    /// Ours from the medians.
    pub ours: Option<f64>,
    /// Our spread (lowest, highest).
    pub spread: Option<(f64, f64)>,
    /// Rounds behind the comparison (fewest repetitions when unpaired).
    pub n: usize,
    /// The coverage of `spread` as an interval of the median (0.95, less
    /// with few rounds, 0 when unpaired and `spread` is every pairing's
    /// range); `None` before a comparison.
    pub coverage: Option<f64>,
    /// The verdict of this comparison.
    pub verdict: Verdict,
    /// Context shown where the claim's own rows are missing (the widest span
    /// measured); never judged.
    pub context: Option<String>,
}

/// One claim with its comparisons and overall verdict.
#[derive(Clone, Debug)]
pub struct ClaimResult {
    /// Where in the paper (`Table 3`, `Figure 2`).
    pub source: String,
    /// The claim in words.
    pub text: String,
    /// The metric judged.
    pub metric: Metric,
    /// The statistic judged (`mean`).
    pub statistic: &'static str,
    /// Whether the checks are ratios (else values or differences, in
    /// `unit`).
    pub is_ratio: bool,
    /// What the checks are: a ratio, a difference or a value.
    pub quantity: Quantity,
    /// The unit differences and values print in, and its size in the
    /// stored unit (µs for times); `("×", 1.0)` for ratios.
    pub unit: (&'static str, f64),
    /// The claim's short heading for the brief table, if it has one.
    pub label: Option<String>,
    /// The range the paper's text gives, printed instead of its midpoint.
    pub paper_range: Option<[f64; 2]>,
    /// Ratios print as percentages.
    pub percent: bool,
    /// The bounds in words (`≥ 5×`), empty when none.
    pub expect: String,
    /// The comparisons.
    pub checks: Vec<ClaimCheck>,
    /// Holds only if every comparison holds.
    pub verdict: Verdict,
}

/// What a claim's checks compare.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Quantity {
    /// A quotient of two values.
    Ratio,
    /// A difference of two values, in the statistic's unit.
    Difference,
    /// The statistic itself (or its peak).
    Value,
}

impl Quantity {
    /// `ratio`, `difference` or `value`.
    pub fn word(self) -> &'static str {
        match self {
            Quantity::Ratio => "ratio",
            Quantity::Difference => "difference",
            Quantity::Value => "value",
        }
    }
}

impl ClaimResult {
    /// A number of this claim as the report prints it: `1.9×`, `+20 ms`,
    /// `0.47 CPUs`.
    pub fn format(&self, v: f64) -> String {
        if self.percent && self.quantity == Quantity::Ratio {
            return format!("{} %", percent_number(v));
        }
        format_quantity(self.quantity, self.unit, v)
    }

    /// A check's paper number: the stated range where the text gives one
    /// and the check did not compute it from the paper's cells (`46–47 %`).
    pub fn paper_text(&self, check: &ClaimCheck) -> Option<String> {
        let p = check.paper?;
        match self.paper_range {
            Some([lo, hi]) if !check.paper_from_cells => {
                let low = match self.quantity {
                    Quantity::Ratio if self.percent => percent_number(lo),
                    Quantity::Ratio => ratio_text_x(lo).trim_end_matches('×').to_string(),
                    _ => trimmed(lo / self.unit.1),
                };
                Some(format!("{low}–{}", self.format(hi)))
            }
            _ => Some(self.format(p)),
        }
    }
}

/// A ratio, difference or value as the report prints it (three
/// significant figures, no trailing zeros: `+20 ms`, `+0.05 ms`).
pub(crate) fn format_quantity(q: Quantity, unit: (&str, f64), v: f64) -> String {
    match q {
        Quantity::Ratio => ratio_text_x(v),
        Quantity::Difference => format!(
            "{}{} {}",
            if v > 0.0 { "+" } else { "" },
            trimmed(v / unit.1),
            unit.0
        ),
        Quantity::Value => format!("{} {}", trimmed(v / unit.1), unit.0),
    }
}

/// Three significant figures without trailing zeros: 20, 0.05, 1.13.
pub(crate) fn trimmed(v: f64) -> String {
    let s = crate::num_sig(v);
    if s.contains('.') && !s.contains(',') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

/// A ratio as a whole percentage (0.465 as 47), with decimals only
/// below 10 %.
pub(crate) fn percent_number(v: f64) -> String {
    let p = v * 100.0;
    if p.abs() >= 10.0 {
        format!("{p:.0}")
    } else {
        trimmed(p)
    }
}

/// The quantity of a two-value comparison.
fn pair_quantity(claim: &PaperClaim) -> Quantity {
    match claim.compare {
        Compare::Ratio => Quantity::Ratio,
        Compare::Difference => Quantity::Difference,
    }
}

/// The non-`along` parameters of a row: connections, ratio, rate (the
/// `along` one is `None`).
type Group = [Option<f64>; 3];

fn slot(along: Vary) -> usize {
    match along {
        Vary::Connections => 0,
        Vary::ActiveRatio => 1,
        Vary::Rate => 2,
    }
}

fn row_params(r: &Row) -> [f64; 3] {
    [r.connections as f64, r.active_ratio, r.rate_per_s]
}

fn cell_params(c: &PaperCell) -> [Option<f64>; 3] {
    [
        c.connections.map(|c| c as f64),
        c.active_ratio.as_ref().and_then(crate::table::ratio_of),
        c.rate_per_s,
    ]
}

fn group_text(g: &Group) -> String {
    let mut parts = Vec::new();
    if let Some(c) = g[0] {
        parts.push(format!("{} conns", grouped(c)));
    }
    if let Some(r) = g[1] {
        parts.push(format!("ratio {}", ratio_text(r)));
    }
    if let Some(r) = g[2] {
        parts.push(rate_text(r));
    }
    parts.join(" · ")
}

/// A full setting: `10,000 conns · ratio 1 · 125 req/s`.
pub fn setting_text(r: &Row) -> String {
    let p = row_params(r);
    group_text(&[Some(p[0]), Some(p[1]), Some(p[2])])
}

/// `400 → 10,000 conns`, `ratio 1 → 1/64`, `125 → 2,000 req/s`.
fn span_text(along: Vary, from: f64, to: f64) -> String {
    match along {
        Vary::Connections => format!("{} → {} conns", grouped(from), grouped(to)),
        Vary::ActiveRatio => format!("ratio {} → {}", ratio_text(from), ratio_text(to)),
        Vary::Rate => format!("{} → {}", grouped(from), rate_text(to)),
    }
}

fn in_group(p: &[f64; 3], g: &Group) -> bool {
    g.iter().zip(p).all(|(g, v)| g.is_none_or(|g| close(g, *v)))
}

/// b compared with a as the claim asks: the ratio b / a, or the
/// difference b - a, as (from the medians, lowest, highest) over every
/// pairing of the two spreads' repetitions.
fn compare_spread(claim: &PaperClaim, a: &Spread, b: &Spread) -> Result<(f64, f64, f64), String> {
    match claim.compare {
        Compare::Ratio => ratio_spread(a, b),
        Compare::Difference => Ok((
            b.median() - a.median(),
            b.min() - a.max(),
            b.max() - a.min(),
        )),
    }
}

/// b compared with a for the paper's own numbers (ratios only of positive
/// values).
fn compare_paper(claim: &PaperClaim, a: f64, b: f64) -> Option<f64> {
    match claim.compare {
        Compare::Ratio => (a > 0.0 && b > 0.0).then(|| b / a),
        Compare::Difference => Some(b - a),
    }
}

/// The paper's number the claim's text states, for a comparison.
fn paper_stated(claim: &PaperClaim) -> Option<f64> {
    claim.paper_stated()
}

/// The sign joining a pair's names: `÷` or `−`.
fn pair_sign(claim: &PaperClaim) -> &'static str {
    match claim.compare {
        Compare::Ratio => "÷",
        Compare::Difference => "−",
    }
}

/// The ratio b / a of two spreads: (median ratio, lowest, highest).
fn ratio_spread(a: &Spread, b: &Spread) -> Result<(f64, f64, f64), String> {
    if a.min() <= 0.0 || b.min() <= 0.0 {
        return Err("a ratio of values that are not all positive".into());
    }
    Ok((
        b.median() / a.median(),
        b.min() / a.max(),
        b.max() / a.min(),
    ))
}

/// The paper's ratio or value printed for a check.
pub(crate) fn ratio_text_x(r: f64) -> String {
    if r.abs() >= 10.0 {
        format!("{r:.0}×")
    } else if r.abs() >= 1.0 {
        format!("{r:.1}×")
    } else if r.abs() >= 0.1 {
        format!("{r:.2}×")
    } else {
        format!("{r:.3}×")
    }
}

/// Checks every claim of the experiment against the table's rows.
pub fn check_claims(dir: &SweepDir, t: &PaperTable) -> Vec<ClaimResult> {
    let Some(paper) = &dir.experiment.paper else {
        return Vec::new();
    };
    paper
        .claims
        .iter()
        .map(|claim| {
            let metric = claim.metric_in(paper);
            let k = claim.statistic_index(paper);
            let along = claim.along_in(paper);
            // The paper's cells of this claim's metric.
            let cells: Vec<&PaperCell> = if metric == paper.metric {
                paper.cells.iter().collect()
            } else {
                Vec::new()
            };
            // A peak claim on a derived table of each engine's worst run
            // (the locality paper's Table 5: the largest deviation stddev
            // per engine) takes the paper's peaks from that table's cells.
            let peak_cells: Vec<&PaperCell> = if cells.is_empty() && k == 0 {
                paper
                    .derived
                    .iter()
                    .filter(|d| d.metric == metric && d.pick == DerivedPick::LargestFirstStat)
                    .flat_map(|d| d.cells.iter())
                    .collect()
            } else {
                cells.clone()
            };
            let shape = claim.shape();
            let floor = noise(dir, metric, k);
            let n = floor.as_ref();
            let mut checks = match shape {
                ClaimShape::Along { from, to } => {
                    along_checks(dir, t, claim, metric, k, along, &cells, from, to, n)
                }
                ClaimShape::Versus { engine, range } => {
                    versus_checks(dir, t, claim, metric, k, along, &cells, engine, range, n)
                }
                ClaimShape::Peak { versus, range } => peak_checks(
                    dir,
                    t,
                    claim,
                    metric,
                    k,
                    along,
                    &peak_cells,
                    versus,
                    range,
                    n,
                ),
                ClaimShape::Change { versus, from, to } => {
                    change_checks(dir, t, claim, metric, k, along, versus, from, to, n)
                }
                ClaimShape::Metrics { other, range } => {
                    let k_other = claim.versus_statistic_index(paper);
                    metric_checks(dir, t, claim, metric, k, along, other, k_other, range, n)
                }
                ClaimShape::Value => value_checks(dir, t, claim, metric, k, n),
            };
            if let Some(why) = &claim.unmeasurable {
                for c in &mut checks {
                    c.verdict = Verdict::CannotMeasure(why.clone());
                }
            }
            let verdict = match &claim.unmeasurable {
                Some(why) => Verdict::CannotMeasure(why.clone()),
                None => overall(&checks),
            };
            let quantity = match (shape, claim.compare) {
                (ClaimShape::Value | ClaimShape::Peak { versus: None, .. }, _) => Quantity::Value,
                (_, Compare::Difference) => Quantity::Difference,
                (_, Compare::Ratio) => Quantity::Ratio,
            };
            let unit = match (quantity, stat_unit(metric, k)) {
                (Quantity::Ratio, _) => ("×", 1.0),
                // CPUs divided by a quota in CPUs (`divide_by`) are a share.
                (_, ("CPUs", _)) if claim.divide_by.is_some() => ("share", 1.0),
                (_, u) => u,
            };
            let mut result = ClaimResult {
                source: claim.source.clone(),
                text: claim.text.clone(),
                metric,
                statistic: metric.stat_names()[k],
                is_ratio: quantity == Quantity::Ratio,
                quantity,
                unit,
                label: claim.label.clone(),
                paper_range: claim.paper_range,
                percent: claim.percent,
                expect: String::new(),
                checks,
                verdict,
            };
            let b = |v: f64| {
                if quantity == Quantity::Ratio && claim.percent {
                    format!("{} %", percent_number(v))
                } else if quantity == Quantity::Ratio {
                    format!("{v}×")
                } else {
                    format_quantity(quantity, unit, v)
                }
            };
            result.expect = match (claim.expect_min, claim.expect_max) {
                (Some(lo), Some(hi)) => format!("between {} and {}", b(lo), b(hi)),
                (Some(lo), None) => format!("≥ {}", b(lo)),
                (None, Some(hi)) => format!("≤ {}", b(hi)),
                (None, None) => String::new(),
            };
            result
        })
        .collect()
}

/// The verdict of some of a claim's checks (one engine's, say).
pub(crate) fn overall_of(checks: &[&ClaimCheck]) -> Verdict {
    overall(&checks.iter().map(|c| (*c).clone()).collect::<Vec<_>>())
}

fn overall(checks: &[ClaimCheck]) -> Verdict {
    if checks.is_empty() {
        return Verdict::CannotMeasure("no rows to compare in this run".into());
    }
    let fails: Vec<&ClaimCheck> = checks
        .iter()
        .filter(|c| matches!(c.verdict, Verdict::DoesNotHold { .. }))
        .collect();
    if !fails.is_empty() {
        return Verdict::DoesNotHold {
            median_holds: fails
                .iter()
                .all(|c| c.verdict == Verdict::DoesNotHold { median_holds: true }),
        };
    }
    // A comparison the machine's noise could have decided leaves the claim
    // unjudged, naming each reason once with how many comparisons it hit.
    let mut noisy: Vec<(String, usize)> = Vec::new();
    for c in checks {
        if let Verdict::CannotJudge(w) = &c.verdict {
            match noisy.iter_mut().find(|(x, _)| x == w) {
                Some(e) => e.1 += 1,
                None => noisy.push((w.clone(), 1)),
            }
        }
    }
    if !noisy.is_empty() {
        let total = checks.len();
        let parts: Vec<String> = noisy
            .iter()
            .map(|(w, n)| format!("{w} [{n} of {total} comparisons]"))
            .collect();
        return Verdict::CannotJudge(parts.join("; "));
    }
    let mut whys: Vec<String> = Vec::new();
    for c in checks {
        if let Verdict::CannotMeasure(w) = &c.verdict {
            if !whys.contains(w) {
                whys.push(w.clone());
            }
        }
    }
    if !whys.is_empty() {
        let holds = checks.iter().any(|c| c.verdict == Verdict::Holds);
        return Verdict::CannotMeasure(format!(
            "{}{}",
            whys.join("; "),
            if holds {
                " (the rows measured hold)"
            } else {
                ""
            }
        ));
    }
    if checks.iter().all(|c| c.verdict == Verdict::Holds) {
        Verdict::Holds
    } else {
        Verdict::NotJudged
    }
}
