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
    /// Fewest repetitions behind any value compared.
    pub n: usize,
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

fn judge(claim: &PaperClaim, median: f64, lo: f64, hi: f64) -> Verdict {
    if claim.expect_min.is_none() && claim.expect_max.is_none() {
        return Verdict::NotJudged;
    }
    let ok = |a: f64, b: f64| {
        claim.expect_min.is_none_or(|m| a >= m) && claim.expect_max.is_none_or(|m| b <= m)
    };
    if ok(lo, hi) {
        Verdict::Holds
    } else {
        Verdict::DoesNotHold {
            median_holds: ok(median, median),
        }
    }
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
            let mut checks = match shape {
                ClaimShape::Along { from, to } => {
                    along_checks(dir, t, claim, metric, k, along, &cells, from, to)
                }
                ClaimShape::Versus { engine, range } => {
                    versus_checks(dir, t, claim, metric, k, along, &cells, engine, range)
                }
                ClaimShape::Peak { versus, range } => {
                    peak_checks(dir, t, claim, metric, k, along, &peak_cells, versus, range)
                }
                ClaimShape::Value => value_checks(dir, t, claim, metric, k),
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
            let unit = if quantity == Quantity::Ratio {
                ("×", 1.0)
            } else {
                stat_unit(metric, k)
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

/// Our spread of statistic `k` of `metric` for an engine at a row.
fn ours_at(dir: &SweepDir, cell: &Cell, metric: Metric, k: usize) -> Option<Spread> {
    let [a, b, c] = spreads(dir, &cell.points, metric);
    [a, b, c].into_iter().nth(k).flatten()
}

/// The paper's value of an engine at a setting (the `along` parameter must
/// be given by the cell).
fn paper_at(
    cells: &[&PaperCell],
    metric: Metric,
    k: usize,
    engine: &str,
    along: Vary,
    params: &[Option<f64>; 3],
) -> Option<f64> {
    cells
        .iter()
        .find(|c| {
            let cp = cell_params(c);
            c.engine == engine
                && cp[slot(along)].is_some()
                && cp.iter().zip(params).all(|(c, p)| match (c, p) {
                    (Some(c), Some(p)) => close(*c, *p),
                    _ => true,
                })
        })
        .and_then(|c| c.stats(metric)[k])
}

#[allow(clippy::too_many_arguments)]
fn along_checks(
    dir: &SweepDir,
    t: &PaperTable,
    claim: &PaperClaim,
    metric: Metric,
    k: usize,
    along: Vary,
    cells: &[&PaperCell],
    from: f64,
    to: f64,
) -> Vec<ClaimCheck> {
    let s = slot(along);
    // Groups: our rows' other parameters, then the paper's where we have none.
    let mut groups: Vec<Group> = Vec::new();
    let push = |groups: &mut Vec<Group>, g: Group| {
        if !groups.iter().any(|h| {
            h.iter().zip(&g).all(|(a, b)| match (a, b) {
                (Some(a), Some(b)) => close(*a, *b),
                (None, None) => true,
                _ => false,
            })
        }) {
            groups.push(g);
        }
    };
    for r in &t.rows {
        let p = row_params(r);
        let mut g: Group = [Some(p[0]), Some(p[1]), Some(p[2])];
        g[s] = None;
        push(&mut groups, g);
    }
    for c in cells {
        let mut g = cell_params(c);
        if g[s].is_none() || !claim.engines.contains(&c.engine) {
            continue;
        }
        g[s] = None;
        if g.iter().enumerate().all(|(i, v)| i == s || v.is_some()) {
            push(&mut groups, g);
        }
    }
    let mut out = Vec::new();
    for engine in &claim.engines {
        let Some(col) = t.engines.iter().position(|e| e == engine) else {
            continue;
        };
        for g in &groups {
            let rows: Vec<&Row> = t
                .rows
                .iter()
                .filter(|r| in_group(&row_params(r), g))
                .collect();
            let at = |v: f64| {
                rows.iter()
                    .find(|r| close(r.value(along), v))
                    .map(|r| ours_at(dir, &r.cells[col], metric, k))
            };
            let params_at = |v: f64| {
                let mut p = *g;
                p[s] = Some(v);
                p
            };
            let paper_cells = paper_at(cells, metric, k, engine, along, &params_at(from))
                .zip(paper_at(cells, metric, k, engine, along, &params_at(to)))
                .and_then(|(a, b)| compare_paper(claim, a, b));
            let mut check = ClaimCheck {
                engine: engine.clone(),
                subject: engine.clone(),
                rows: format!("{} at {}", span_text(along, from, to), group_text(g)),
                paper: paper_cells.or(paper_stated(claim)),
                paper_from_cells: paper_cells.is_some(),
                ours: None,
                spread: None,
                n: 0,
                verdict: Verdict::NotJudged,
                context: None,
            };
            match (at(from), at(to)) {
                (Some(Some(a)), Some(Some(b))) => match compare_spread(claim, &a, &b) {
                    Ok((m, lo, hi)) => {
                        check.ours = Some(m);
                        check.spread = Some((lo, hi));
                        check.n = a.n().min(b.n());
                        check.verdict = judge(claim, m, lo, hi);
                    }
                    Err(why) => check.verdict = Verdict::CannotMeasure(why),
                },
                _ if rows.is_empty() => {
                    check.verdict =
                        Verdict::CannotMeasure(format!("{} not in this run", group_text(g)));
                }
                (f, tt) => {
                    let missing: Vec<String> = [(from, &f), (to, &tt)]
                        .iter()
                        .filter(|(_, r)| !matches!(r, Some(Some(_))))
                        .map(|(v, r)| {
                            let what = param_text(along, *v);
                            if r.is_some() {
                                format!("{what} has no finished point")
                            } else {
                                format!("{what} not in this run")
                            }
                        })
                        .collect();
                    check.verdict = Verdict::CannotMeasure(missing.join(", "));
                    // The widest span measured, as context only.
                    let measured: Vec<(f64, Spread)> = rows
                        .iter()
                        .filter_map(|r| {
                            Some((r.value(along), ours_at(dir, &r.cells[col], metric, k)?))
                        })
                        .collect();
                    let lo = measured.iter().min_by(|a, b| a.0.total_cmp(&b.0));
                    let hi = measured.iter().max_by(|a, b| a.0.total_cmp(&b.0));
                    if let (Some(lo), Some(hi)) = (lo, hi) {
                        let (a, b) = if from <= to { (lo, hi) } else { (hi, lo) };
                        if !close(a.0, b.0) {
                            if let Ok((m, l, h)) = compare_spread(claim, &a.1, &b.1) {
                                let f = |v| {
                                    format_quantity(pair_quantity(claim), stat_unit(metric, k), v)
                                };
                                let (l, h) = (f(l), f(h));
                                let spread = if l == h {
                                    String::new()
                                } else if claim.compare == Compare::Ratio {
                                    format!(" [{}–{h}]", l.trim_end_matches('×'))
                                } else {
                                    format!(" [{l} to {h}]")
                                };
                                check.context = Some(format!(
                                    "widest span measured instead: {}, {}{spread}, context only, not judged",
                                    span_text(along, a.0, b.0),
                                    f(m),
                                ));
                            }
                        }
                    }
                }
            }
            out.push(check);
        }
    }
    out
}

#[allow(clippy::too_many_arguments)]
fn versus_checks(
    dir: &SweepDir,
    t: &PaperTable,
    claim: &PaperClaim,
    metric: Metric,
    k: usize,
    along: Vary,
    cells: &[&PaperCell],
    versus: &str,
    range: Option<(f64, f64)>,
) -> Vec<ClaimCheck> {
    let Some(vcol) = t.engines.iter().position(|e| e == versus) else {
        return Vec::new();
    };
    let rows: Vec<&Row> = t
        .rows
        .iter()
        .filter(|r| {
            range.is_none_or(|(lo, hi)| {
                let v = r.value(along);
                (v >= lo || close(v, lo)) && (v <= hi || close(v, hi))
            })
        })
        .collect();
    let mut out = Vec::new();
    for engine in &claim.engines {
        let Some(col) = t.engines.iter().position(|e| e == engine) else {
            continue;
        };
        let name = format!("{engine} {} {versus}", pair_sign(claim));
        if rows.is_empty() {
            let (lo, hi) = range.unwrap_or((0.0, 0.0));
            out.push(ClaimCheck {
                engine: name.clone(),
                subject: engine.clone(),
                rows: if close(lo, hi) {
                    param_text(along, lo)
                } else {
                    format!("{} to {}", param_text(along, lo), param_text(along, hi))
                },
                paper: paper_stated(claim),
                paper_from_cells: false,
                ours: None,
                spread: None,
                n: 0,
                verdict: Verdict::CannotMeasure(format!(
                    "no row with {} in this run",
                    if close(lo, hi) {
                        param_text(along, lo)
                    } else {
                        format!("{} to {}", param_text(along, lo), param_text(along, hi))
                    }
                )),
                context: None,
            });
            continue;
        }
        for r in &rows {
            let p = row_params(r);
            let params = [Some(p[0]), Some(p[1]), Some(p[2])];
            let paper_cells = paper_at(cells, metric, k, versus, along, &params)
                .zip(paper_at(cells, metric, k, engine, along, &params))
                .and_then(|(b, a)| compare_paper(claim, b, a));
            let mut check = ClaimCheck {
                engine: name.clone(),
                subject: engine.clone(),
                rows: setting_text(r),
                paper: paper_cells.or(paper_stated(claim)),
                paper_from_cells: paper_cells.is_some(),
                ours: None,
                spread: None,
                n: 0,
                verdict: Verdict::NotJudged,
                context: None,
            };
            match (
                ours_at(dir, &r.cells[vcol], metric, k),
                ours_at(dir, &r.cells[col], metric, k),
            ) {
                (Some(b), Some(a)) => match compare_spread(claim, &b, &a) {
                    Ok((m, lo, hi)) => {
                        check.ours = Some(m);
                        check.spread = Some((lo, hi));
                        check.n = a.n().min(b.n());
                        check.verdict = judge(claim, m, lo, hi);
                    }
                    Err(why) => check.verdict = Verdict::CannotMeasure(why),
                },
                _ => {
                    check.verdict =
                        Verdict::CannotMeasure(format!("{} has no finished point", setting_text(r)))
                }
            }
            out.push(check);
        }
    }
    out
}

/// One engine's peak over rows: the spread of its per-repetition peaks,
/// and the rows the peaks were at (their `along` value and whole setting).
struct Peak {
    spread: Option<Spread>,
    at: Vec<(f64, String)>,
}

/// Per repetition, the highest statistic `k` of column `col` over `rows`,
/// counting a point only where its mean service latency stays within
/// `within` µs (if given).
fn peak_of(
    dir: &SweepDir,
    rows: &[&Row],
    col: usize,
    metric: Metric,
    k: usize,
    along: Vary,
    within: Option<f64>,
) -> Peak {
    // repetition -> (peak, its row)
    let mut best: std::collections::BTreeMap<u32, (f64, &Row)> = Default::default();
    for r in rows {
        for &i in &r.cells[col].points {
            let p = &dir.points[i];
            let mean = p.load.service_latency_us.mean;
            if within.is_some_and(|w| mean.is_nan() || mean > w) {
                continue;
            }
            let Some(v) = our_stats(&dir.experiment, metric, p)[k].filter(|v| v.is_finite()) else {
                continue;
            };
            let e = best.entry(p.params.repetition).or_insert((v, r));
            if v > e.0 {
                *e = (v, r);
            }
        }
    }
    let mut at: Vec<(f64, String)> = best
        .values()
        .map(|b| (b.1.value(along), setting_text(b.1)))
        .collect();
    at.sort_by(|a, b| a.0.total_cmp(&b.0).then_with(|| a.1.cmp(&b.1)));
    at.dedup_by(|a, b| a.1 == b.1);
    Peak {
        spread: Spread::of(best.values().map(|b| b.0)),
        at,
    }
}

/// Where the peaks were: `at 4,000 req/s`, or `at 4,000 req/s to 5,000
/// req/s` when the repetitions differ; `none` without a peak. When the
/// rows compared differ in more than `along` (`whole`), each setting is
/// named whole: `at 400 conns · ratio 1 · 125 req/s`, several joined by
/// ` / `.
fn peak_at_text(along: Vary, at: &[(f64, String)], whole: bool) -> String {
    if whole {
        return match at.len() {
            0 => "none".into(),
            _ => format!(
                "at {}",
                at.iter()
                    .map(|a| a.1.as_str())
                    .collect::<Vec<_>>()
                    .join(" / ")
            ),
        };
    }
    match (at.first(), at.last()) {
        (Some(a), Some(b)) if close(a.0, b.0) => format!("at {}", param_text(along, a.0)),
        (Some(a), Some(b)) => format!(
            "at {} to {}",
            param_text(along, a.0),
            param_text(along, b.0)
        ),
        _ => "none".into(),
    }
}

#[allow(clippy::too_many_arguments)]
fn peak_checks(
    dir: &SweepDir,
    t: &PaperTable,
    claim: &PaperClaim,
    metric: Metric,
    k: usize,
    along: Vary,
    cells: &[&PaperCell],
    versus: Option<&str>,
    range: Option<(f64, f64)>,
) -> Vec<ClaimCheck> {
    let rows: Vec<&Row> = t
        .rows
        .iter()
        .filter(|r| {
            range.is_none_or(|(lo, hi)| {
                let v = r.value(along);
                (v >= lo || close(v, lo)) && (v <= hi || close(v, hi))
            })
        })
        .collect();
    // Rows that differ in more than `along` are named whole.
    let whole = rows.iter().any(|r| {
        [Vary::Connections, Vary::ActiveRatio, Vary::Rate]
            .into_iter()
            .filter(|v| *v != along)
            .any(|v| !close(r.value(v), rows[0].value(v)))
    });
    let over = match range {
        Some((lo, hi)) => format!("peak over {}", span_text(along, lo, hi)),
        None => "peak over every row".into(),
    };
    let within = claim
        .peak_within_us
        .map(|w| {
            format!(
                ", rows with mean response time ≤ {}",
                format_quantity(Quantity::Value, stat_unit(Metric::ServiceLatency, 0), w)
            )
        })
        .unwrap_or_default();
    let col_of = |e: &str| t.engines.iter().position(|x| x == e);
    let peak = |col: usize| peak_of(dir, &rows, col, metric, k, along, claim.peak_within_us);
    // The paper's peak from its cells: the highest of the engine's cells.
    let paper_peak = |engine: &str| {
        cells
            .iter()
            .filter(|c| c.engine == engine)
            .filter_map(|c| c.stats(metric)[k])
            .reduce(f64::max)
    };
    let missing = |engine: &str| {
        if rows.is_empty() {
            "no row of the claim's range in this run".to_string()
        } else if claim.peak_within_us.is_some() {
            format!("no finished point of {engine} within the response-time bound")
        } else {
            format!("{engine} has no finished point")
        }
    };
    let versus_peak = versus.and_then(col_of).map(peak);
    let mut out = Vec::new();
    for engine in &claim.engines {
        let Some(col) = col_of(engine) else {
            continue;
        };
        let ours = peak(col);
        let mut check = ClaimCheck {
            engine: engine.clone(),
            subject: engine.clone(),
            rows: format!(
                "{over}{within}: {engine} {}",
                peak_at_text(along, &ours.at, whole)
            ),
            paper: None,
            paper_from_cells: false,
            ours: None,
            spread: None,
            n: 0,
            verdict: Verdict::NotJudged,
            context: None,
        };
        match (versus, &versus_peak) {
            (Some(v), Some(vp)) => {
                check.engine = format!("{engine} {} {v}", pair_sign(claim));
                check.rows = format!("{}, {v} {}", check.rows, peak_at_text(along, &vp.at, whole));
                let from_cells = paper_peak(v)
                    .zip(paper_peak(engine))
                    .and_then(|(a, b)| compare_paper(claim, a, b));
                check.paper = from_cells.or(paper_stated(claim));
                check.paper_from_cells = from_cells.is_some();
                match (&vp.spread, &ours.spread) {
                    (Some(a), Some(b)) => match compare_spread(claim, a, b) {
                        Ok((m, lo, hi)) => {
                            check.ours = Some(m);
                            check.spread = Some((lo, hi));
                            check.n = a.n().min(b.n());
                            check.verdict = judge(claim, m, lo, hi);
                        }
                        Err(why) => check.verdict = Verdict::CannotMeasure(why),
                    },
                    (None, _) => check.verdict = Verdict::CannotMeasure(missing(v)),
                    (_, None) => check.verdict = Verdict::CannotMeasure(missing(engine)),
                }
            }
            (Some(v), None) => {
                check.verdict = Verdict::CannotMeasure(format!("{v} is not in this run"));
            }
            (None, _) => {
                let from_cells = paper_peak(engine);
                check.paper = from_cells.or(claim.paper_stated());
                check.paper_from_cells = from_cells.is_some();
                match &ours.spread {
                    Some(s) => {
                        check.ours = Some(s.median());
                        check.spread = Some((s.min(), s.max()));
                        check.n = s.n();
                        check.verdict = judge(claim, s.median(), s.min(), s.max());
                    }
                    None => check.verdict = Verdict::CannotMeasure(missing(engine)),
                }
            }
        }
        out.push(check);
    }
    out
}

fn value_checks(
    dir: &SweepDir,
    t: &PaperTable,
    claim: &PaperClaim,
    metric: Metric,
    k: usize,
) -> Vec<ClaimCheck> {
    let paper = dir.experiment.paper.as_ref();
    let mut out = Vec::new();
    for engine in &claim.engines {
        let Some(col) = t.engines.iter().position(|e| e == engine) else {
            continue;
        };
        let measured: Vec<(&Row, Spread)> = t
            .rows
            .iter()
            .filter_map(|r| Some((r, ours_at(dir, &r.cells[col], metric, k)?)))
            .collect();
        // The paper's value: a derived table of this metric gives the
        // engine's worst case; else the worst of the paper's own cells of
        // this metric (the largest for an upper bound, the smallest for a
        // lower one).
        let upper = claim.expect_max.is_some() || claim.expect_min.is_none();
        let worst_cell = paper
            .filter(|p| p.metric == metric)
            .into_iter()
            .flat_map(|p| p.cells.iter())
            .filter(|c| c.engine == *engine)
            .filter_map(|c| c.stats(metric)[k])
            .reduce(|a, b| if upper { a.max(b) } else { a.min(b) });
        let paper_value = paper
            .into_iter()
            .flat_map(|p| p.derived.iter())
            .filter(|d| d.metric == metric)
            .flat_map(|d| d.cells.iter())
            .find(|c| c.engine == *engine)
            .and_then(|c| c.stats(metric)[k])
            .or(worst_cell);
        let mut check = ClaimCheck {
            engine: engine.clone(),
            subject: engine.clone(),
            rows: String::new(),
            paper: paper_value.or(claim.paper_stated()),
            paper_from_cells: paper_value.is_some(),
            ours: None,
            spread: None,
            n: 0,
            verdict: Verdict::NotJudged,
            context: None,
        };
        if measured.is_empty() {
            check.rows = "every setting".into();
            check.verdict = Verdict::CannotMeasure("no finished point".into());
            out.push(check);
            continue;
        }
        // The row that decides: the largest median for an upper bound, the
        // smallest for a lower one.
        let worst = if upper {
            measured
                .iter()
                .max_by(|a, b| a.1.median().total_cmp(&b.1.median()))
        } else {
            measured
                .iter()
                .min_by(|a, b| a.1.median().total_cmp(&b.1.median()))
        };
        let lo = measured
            .iter()
            .map(|m| m.1.min())
            .fold(f64::INFINITY, f64::min);
        let hi = measured
            .iter()
            .map(|m| m.1.max())
            .fold(f64::NEG_INFINITY, f64::max);
        let (worst_row, worst) = worst.expect("measured is not empty");
        check.rows = if measured.len() == 1 {
            format!("the one setting measured, {}", setting_text(worst_row))
        } else {
            format!(
                "all {} settings measured (decided by {})",
                measured.len(),
                setting_text(worst_row)
            )
        };
        check.ours = Some(worst.median());
        check.spread = Some((lo, hi));
        check.n = measured.iter().map(|m| m.1.n()).min().unwrap_or(0);
        // The medians: every row's median within bounds.
        let med_lo = measured
            .iter()
            .map(|m| m.1.median())
            .fold(f64::INFINITY, f64::min);
        let med_hi = measured
            .iter()
            .map(|m| m.1.median())
            .fold(f64::NEG_INFINITY, f64::max);
        check.verdict = match judge(claim, worst.median(), lo, hi) {
            Verdict::DoesNotHold { .. } => Verdict::DoesNotHold {
                median_holds: judge(claim, med_lo, med_lo, med_hi) == Verdict::Holds,
            },
            v => v,
        };
        out.push(check);
    }
    out
}

/// A paper table computed from this sweep (`[[paper.derived]]`).
#[derive(Clone, Debug)]
pub struct DerivedTable {
    /// E.g. `Table 5`.
    pub table: String,
    /// Its statistic.
    pub metric: Metric,
    /// Remarks.
    pub note: String,
    /// How each engine's row was picked.
    pub pick: DerivedPick,
    /// One row per engine.
    pub rows: Vec<DerivedRow>,
}

/// One engine of a derived table.
#[derive(Clone, Debug)]
pub struct DerivedRow {
    /// The engine.
    pub engine: String,
    /// The setting picked for it (`None`: nothing measured).
    pub picked: Option<String>,
    /// Ours at that setting and the paper's.
    pub cell: Cell,
}

/// The experiment's derived tables, each engine at the setting whose first
/// statistic (median over repetitions) is the largest of the sweep.
pub fn derived_tables(dir: &SweepDir, t: &PaperTable) -> Vec<DerivedTable> {
    let Some(paper) = &dir.experiment.paper else {
        return Vec::new();
    };
    paper
        .derived
        .iter()
        .map(|d| {
            let rows = t
                .engines
                .iter()
                .enumerate()
                .map(|(col, engine)| {
                    let best = t
                        .rows
                        .iter()
                        .filter_map(|r| {
                            let s = spreads(dir, &r.cells[col].points, d.metric);
                            let key = match d.pick {
                                DerivedPick::LargestFirstStat => s[0].as_ref()?.median(),
                                DerivedPick::HighestRate => {
                                    spreads(dir, &r.cells[col].points, Metric::Throughput)[0]
                                        .as_ref()?
                                        .median()
                                }
                            };
                            Some((r, s, key))
                        })
                        .max_by(|a, b| a.2.total_cmp(&b.2));
                    let paper = d
                        .cells
                        .iter()
                        .find(|c| c.engine == *engine)
                        .map_or([None; 3], |c| c.stats(d.metric));
                    match best {
                        Some((r, ours, _)) => DerivedRow {
                            engine: engine.clone(),
                            picked: Some(setting_text(r)),
                            cell: Cell {
                                points: r.cells[col].points.clone(),
                                ours,
                                paper,
                            },
                        },
                        None => DerivedRow {
                            engine: engine.clone(),
                            picked: None,
                            cell: Cell {
                                points: Vec::new(),
                                ours: Default::default(),
                                paper,
                            },
                        },
                    }
                })
                .collect();
            DerivedTable {
                table: d.table.clone(),
                metric: d.metric,
                note: d.note.clone(),
                pick: d.pick,
                rows,
            }
        })
        .collect()
}
