//! The comparisons of each claim shape: an engine along a parameter, one
//! engine against another, a peak, and a value over the rows. Each rests
//! on valid points only, paired by round, and is judged against the A/A
//! noise floor ([`super::evidence`]).

use super::evidence::{
    by_round, compare_cells, invalid_reason, judge_noisy, Compared, Noise, CONFIDENCE,
};
use super::*;
use crate::metric_name;
use connlab_measure::stats::median_interval;

/// Fills a check from a comparison, or says why there is none: the cells'
/// invalid points (cannot be judged) or `missing` (cannot be measured).
#[allow(clippy::too_many_arguments)]
fn settle(
    check: &mut ClaimCheck,
    dir: &SweepDir,
    claim: &PaperClaim,
    from: &Cell,
    to: &Cell,
    metric: Metric,
    k: usize,
    quantity: Quantity,
    noise: Option<&Noise>,
    missing: impl FnOnce() -> String,
) {
    match compare_cells(dir, claim, from, to, metric, k) {
        Some(Ok(c)) => fill(check, claim, &c, quantity, noise),
        Some(Err(why)) => check.verdict = Verdict::CannotMeasure(why),
        None => {
            check.verdict = match invalid_reason(dir, &[from, to]) {
                Some(why) => Verdict::CannotJudge(why),
                None => Verdict::CannotMeasure(missing()),
            }
        }
    }
}

/// A check's figures and verdict from a comparison.
fn fill(
    check: &mut ClaimCheck,
    claim: &PaperClaim,
    c: &Compared,
    quantity: Quantity,
    noise: Option<&Noise>,
) {
    check.ours = Some(c.median);
    check.spread = Some((c.lo, c.hi));
    check.n = c.n;
    check.coverage = Some(c.coverage);
    check.verdict = judge_noisy(claim, c, quantity, noise);
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

/// The settings a claim along `along` is judged at: our rows' other
/// parameters, then the paper's cells' where we have none (the `along`
/// slot left empty), limited to the claim's rates.
fn groups_along(
    t: &PaperTable,
    claim: &PaperClaim,
    cells: &[&PaperCell],
    along: Vary,
) -> Vec<Group> {
    let s = slot(along);
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
    // A claim written for some rates only (its tolerance differs by rate).
    groups.retain(|g| g[2].is_none_or(|rate| claim.covers_rate(rate)));
    groups
}

#[allow(clippy::too_many_arguments)]
pub(super) fn along_checks(
    dir: &SweepDir,
    t: &PaperTable,
    claim: &PaperClaim,
    metric: Metric,
    k: usize,
    along: Vary,
    cells: &[&PaperCell],
    from: f64,
    to: f64,
    noise: Option<&Noise>,
) -> Vec<ClaimCheck> {
    let quantity = pair_quantity(claim);
    let s = slot(along);
    let groups = groups_along(t, claim, cells, along);
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
            let params_at = |v: f64| {
                let mut p = *g;
                p[s] = Some(v);
                p
            };
            let paper_cells = paper_at(cells, metric, k, engine, along, &params_at(from))
                .zip(paper_at(cells, metric, k, engine, along, &params_at(to)))
                .and_then(|(a, b)| compare_paper(claim, a, b));
            let mut check = blank_check(
                engine.clone(),
                engine,
                format!("{} at {}", span_text(along, from, to), group_text(g)),
                paper_cells.or(paper_stated(claim)),
            );
            check.paper_from_cells = paper_cells.is_some();
            let cell_at = |v: f64| {
                rows.iter()
                    .find(|r| close(r.value(along), v))
                    .map(|r| &r.cells[col])
            };
            match (cell_at(from), cell_at(to)) {
                (Some(a), Some(b)) => settle(
                    &mut check,
                    dir,
                    claim,
                    a,
                    b,
                    metric,
                    k,
                    quantity,
                    noise,
                    || {
                        [(from, a), (to, b)]
                            .iter()
                            .filter(|(_, c)| c.points.is_empty())
                            .map(|(v, _)| {
                                format!("{} has no finished point", param_text(along, *v))
                            })
                            .collect::<Vec<_>>()
                            .join(", ")
                    },
                ),
                _ if rows.is_empty() => {
                    check.verdict =
                        Verdict::CannotMeasure(format!("{} not in this run", group_text(g)));
                }
                (f, tt) => {
                    let missing: Vec<String> = [(from, f.is_some()), (to, tt.is_some())]
                        .iter()
                        .filter(|(_, present)| !present)
                        .map(|(v, _)| format!("{} not in this run", param_text(along, *v)))
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
pub(super) fn versus_checks(
    dir: &SweepDir,
    t: &PaperTable,
    claim: &PaperClaim,
    metric: Metric,
    k: usize,
    along: Vary,
    cells: &[&PaperCell],
    versus: &str,
    range: Option<(f64, f64)>,
    noise: Option<&Noise>,
) -> Vec<ClaimCheck> {
    let quantity = pair_quantity(claim);
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
            let span = if close(lo, hi) {
                param_text(along, lo)
            } else {
                format!("{} to {}", param_text(along, lo), param_text(along, hi))
            };
            let mut check = blank_check(name.clone(), engine, span.clone(), paper_stated(claim));
            check.verdict = Verdict::CannotMeasure(format!("no row with {span} in this run"));
            out.push(check);
            continue;
        }
        for r in &rows {
            let p = row_params(r);
            let params = [Some(p[0]), Some(p[1]), Some(p[2])];
            let paper_cells = paper_at(cells, metric, k, versus, along, &params)
                .zip(paper_at(cells, metric, k, engine, along, &params))
                .and_then(|(b, a)| compare_paper(claim, b, a));
            let mut check = blank_check(
                name.clone(),
                engine,
                setting_text(r),
                paper_cells.or(paper_stated(claim)),
            );
            check.paper_from_cells = paper_cells.is_some();
            settle(
                &mut check,
                dir,
                claim,
                &r.cells[vcol],
                &r.cells[col],
                metric,
                k,
                quantity,
                noise,
                || format!("{} has no finished point", setting_text(r)),
            );
            out.push(check);
        }
    }
    out
}

/// One engine's peak over rows: the spread of its per-repetition peaks,
/// and the rows the peaks were at (their `along` value and whole setting).
struct Peak {
    /// Each repetition's peak.
    by_round: std::collections::BTreeMap<u32, f64>,
    at: Vec<(f64, String)>,
    /// Invalid points among the rows (never judged).
    invalid: Vec<usize>,
}

impl Peak {
    fn spread(&self) -> Option<Spread> {
        Spread::of(self.by_round.values().copied())
    }
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
        by_round: best.iter().map(|(r, b)| (*r, b.0)).collect(),
        at,
        invalid: rows
            .iter()
            .flat_map(|r| r.cells[col].invalid.iter().copied())
            .collect(),
    }
}

/// The per-round values' median and interval as a comparison.
fn of_rounds(values: &[f64]) -> Option<Compared> {
    let m = median_interval(values, CONFIDENCE)?;
    Some(Compared {
        median: m.median,
        lo: m.lo,
        hi: m.hi,
        n: m.n as usize,
        coverage: m.coverage,
        paired: true,
    })
}

/// Why a peak has no value: its rows' invalid points, else `missing`.
fn peak_missing(dir: &SweepDir, peaks: &[&Peak], missing: String) -> Verdict {
    let cells: Vec<Cell> = peaks
        .iter()
        .map(|p| Cell {
            invalid: p.invalid.clone(),
            ..Cell::default()
        })
        .collect();
    let refs: Vec<&Cell> = cells.iter().collect();
    match invalid_reason(dir, &refs) {
        Some(why) => Verdict::CannotJudge(why),
        None => Verdict::CannotMeasure(missing),
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
pub(super) fn peak_checks(
    dir: &SweepDir,
    t: &PaperTable,
    claim: &PaperClaim,
    metric: Metric,
    k: usize,
    along: Vary,
    cells: &[&PaperCell],
    versus: Option<&str>,
    range: Option<(f64, f64)>,
    noise: Option<&Noise>,
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
        let mut check = blank_check(
            engine.clone(),
            engine,
            format!(
                "{over}{within}: {engine} {}",
                peak_at_text(along, &ours.at, whole)
            ),
            None,
        );
        match (versus, &versus_peak) {
            (Some(v), Some(vp)) => {
                check.engine = format!("{engine} {} {v}", pair_sign(claim));
                check.rows = format!("{}, {v} {}", check.rows, peak_at_text(along, &vp.at, whole));
                let from_cells = paper_peak(v)
                    .zip(paper_peak(engine))
                    .and_then(|(a, b)| compare_paper(claim, a, b));
                check.paper = from_cells.or(paper_stated(claim));
                check.paper_from_cells = from_cells.is_some();
                // Paired by round: this engine's peak over the other's.
                let per_round: Vec<f64> = ours
                    .by_round
                    .iter()
                    .filter_map(|(rep, b)| {
                        let a = vp.by_round.get(rep)?;
                        compare_paper(claim, *a, *b)
                    })
                    .collect();
                let compared = of_rounds(&per_round).or_else(|| {
                    let (a, b) = (vp.spread()?, ours.spread()?);
                    let (m, lo, hi) = compare_spread(claim, &a, &b).ok()?;
                    Some(Compared {
                        median: m,
                        lo,
                        hi,
                        n: a.n().min(b.n()),
                        coverage: 0.0,
                        paired: false,
                    })
                });
                match compared {
                    Some(c) => fill(&mut check, claim, &c, pair_quantity(claim), noise),
                    None if vp.by_round.is_empty() => {
                        check.verdict = peak_missing(dir, &[vp], missing(v))
                    }
                    None if ours.by_round.is_empty() => {
                        check.verdict = peak_missing(dir, &[&ours], missing(engine))
                    }
                    None => {
                        check.verdict = Verdict::CannotMeasure(
                            "a ratio of values that are not all positive".into(),
                        )
                    }
                }
            }
            (Some(v), None) => {
                check.verdict = Verdict::CannotMeasure(format!("{v} is not in this run"));
            }
            (None, _) => {
                let from_cells = paper_peak(engine);
                check.paper = from_cells.or(claim.paper_stated());
                check.paper_from_cells = from_cells.is_some();
                let per = claim.divide_by.unwrap_or(1.0);
                let values: Vec<f64> = ours.by_round.values().map(|v| v / per).collect();
                match of_rounds(&values) {
                    Some(c) => fill(&mut check, claim, &c, Quantity::Value, noise),
                    None => check.verdict = peak_missing(dir, &[&ours], missing(engine)),
                }
            }
        }
        out.push(check);
    }
    out
}

/// The paper's value of a value claim for `engine`: a derived table of
/// `metric` gives the engine's worst case; else the worst of the paper's
/// own cells of `metric` (the largest for an upper bound, the smallest for
/// a lower one).
fn paper_worst(
    paper: Option<&connlab_lab::Paper>,
    metric: Metric,
    k: usize,
    engine: &str,
    upper: bool,
) -> Option<f64> {
    let worst_cell = paper
        .filter(|p| p.metric == metric)
        .into_iter()
        .flat_map(|p| p.cells.iter())
        .filter(|c| c.engine == engine)
        .filter_map(|c| c.stats(metric)[k])
        .reduce(|a, b| if upper { a.max(b) } else { a.min(b) });
    paper
        .into_iter()
        .flat_map(|p| p.derived.iter())
        .filter(|d| d.metric == metric)
        .flat_map(|d| d.cells.iter())
        .find(|c| c.engine == engine)
        .and_then(|c| c.stats(metric)[k])
        .or(worst_cell)
}

pub(super) fn value_checks(
    dir: &SweepDir,
    t: &PaperTable,
    claim: &PaperClaim,
    metric: Metric,
    k: usize,
    noise: Option<&Noise>,
) -> Vec<ClaimCheck> {
    let paper = dir.experiment.paper.as_ref();
    let mut out = Vec::new();
    for engine in &claim.engines {
        let Some(col) = t.engines.iter().position(|e| e == engine) else {
            continue;
        };
        // Each row's repetitions: their median and interval.
        let per = claim.divide_by.unwrap_or(1.0);
        let measured: Vec<(&Row, Compared)> = t
            .rows
            .iter()
            .filter(|r| claim.covers_rate(r.rate_per_s))
            .filter_map(|r| {
                let values: Vec<f64> = r.cells[col]
                    .points
                    .iter()
                    .filter_map(|&i| our_stats(&dir.experiment, metric, &dir.points[i])[k])
                    .filter(|v| v.is_finite())
                    .map(|v| v / per)
                    .collect();
                Some((r, of_rounds(&values)?))
            })
            .collect();
        let upper = claim.expect_max.is_some() || claim.expect_min.is_none();
        let paper_value = paper_worst(paper, metric, k, engine, upper);
        let mut check = blank_check(
            engine.clone(),
            engine,
            String::new(),
            paper_value.or(claim.paper_stated()),
        );
        check.paper_from_cells = paper_value.is_some();
        let invalid: Vec<&Cell> = t.rows.iter().map(|r| &r.cells[col]).collect();
        if measured.is_empty() {
            check.rows = "every setting".into();
            check.verdict = match invalid_reason(dir, &invalid) {
                Some(why) => Verdict::CannotJudge(why),
                None => Verdict::CannotMeasure("no finished point".into()),
            };
            out.push(check);
            continue;
        }
        // Every row must hold; one that fails beyond the noise fails the
        // check; otherwise a row within the noise leaves it unjudged.
        let verdicts: Vec<Verdict> = measured
            .iter()
            .map(|(_, c)| judge_noisy(claim, c, Quantity::Value, noise))
            .collect();
        // The row that decides: one that fails, else one that cannot be
        // judged, else the largest median for an upper bound and the
        // smallest for a lower one.
        let extreme = if upper {
            (0..measured.len())
                .max_by(|&a, &b| measured[a].1.median.total_cmp(&measured[b].1.median))
        } else {
            (0..measured.len())
                .min_by(|&a, &b| measured[a].1.median.total_cmp(&measured[b].1.median))
        };
        let decides = verdicts
            .iter()
            .position(|v| matches!(v, Verdict::DoesNotHold { .. }))
            .or_else(|| {
                verdicts
                    .iter()
                    .position(|v| matches!(v, Verdict::CannotJudge(_)))
            })
            .or(extreme)
            .expect("measured is not empty");
        let (worst_row, worst) = &measured[decides];
        check.rows = if measured.len() == 1 {
            format!("the one setting measured, {}", setting_text(worst_row))
        } else {
            format!(
                "all {} settings measured (decided by {})",
                measured.len(),
                setting_text(worst_row)
            )
        };
        check.ours = Some(worst.median);
        check.spread = Some((
            measured
                .iter()
                .map(|m| m.1.lo)
                .fold(f64::INFINITY, f64::min),
            measured
                .iter()
                .map(|m| m.1.hi)
                .fold(f64::NEG_INFINITY, f64::max),
        ));
        check.n = measured.iter().map(|m| m.1.n).min().unwrap_or(0);
        check.coverage = Some(worst.coverage);
        check.verdict = if verdicts
            .iter()
            .any(|v| matches!(v, Verdict::DoesNotHold { .. }))
        {
            Verdict::FAILS
        } else if let Some(v) = verdicts
            .iter()
            .find(|v| matches!(v, Verdict::CannotJudge(_)))
        {
            v.clone()
        } else if let (Some(why), true) = (
            invalid_reason(dir, &invalid),
            verdicts.iter().all(|v| *v == Verdict::Holds),
        ) {
            // The valid rows hold; rows without a valid point are unknown.
            let unmeasured = t
                .rows
                .iter()
                .filter(|r| r.cells[col].points.is_empty() && !r.cells[col].invalid.is_empty())
                .count();
            if unmeasured > 0 {
                Verdict::CannotJudge(format!(
                    "{unmeasured} setting{} without a valid point: {why} (the valid ones hold)",
                    if unmeasured == 1 { "" } else { "s" }
                ))
            } else {
                Verdict::Holds
            }
        } else {
            verdicts.first().cloned().unwrap_or(Verdict::NotJudged)
        };
        out.push(check);
    }
    out
}

/// A check without figures yet, for `subject` at `rows`.
fn blank_check(name: String, subject: &str, rows: String, paper: Option<f64>) -> ClaimCheck {
    ClaimCheck {
        engine: name,
        subject: subject.to_string(),
        rows,
        paper,
        paper_from_cells: false,
        ours: None,
        spread: None,
        n: 0,
        coverage: None,
        verdict: Verdict::NotJudged,
        context: None,
    }
}

/// Fills a check from per-round values, or says why there are none: the
/// cells' invalid points, else `missing`.
fn settle_rounds(
    check: &mut ClaimCheck,
    dir: &SweepDir,
    claim: &PaperClaim,
    per_round: &[f64],
    cells: &[&Cell],
    noise: Option<&Noise>,
    missing: impl FnOnce() -> String,
) {
    match of_rounds(per_round) {
        Some(c) => fill(check, claim, &c, Quantity::Ratio, noise),
        None => {
            check.verdict = match invalid_reason(dir, cells) {
                Some(why) => Verdict::CannotJudge(why),
                None => Verdict::CannotMeasure(missing()),
            }
        }
    }
}

/// `over = "change"`: for each engine and setting, (engine / versus at
/// `to`) / (engine / versus at `from`), per repetition in which all four
/// points are valid.
#[allow(clippy::too_many_arguments)]
pub(super) fn change_checks(
    dir: &SweepDir,
    t: &PaperTable,
    claim: &PaperClaim,
    metric: Metric,
    k: usize,
    along: Vary,
    versus: &str,
    from: f64,
    to: f64,
    noise: Option<&Noise>,
) -> Vec<ClaimCheck> {
    let Some(vcol) = t.engines.iter().position(|e| e == versus) else {
        return Vec::new();
    };
    let groups = groups_along(t, claim, &[], along);
    let s = slot(along);
    let mut out = Vec::new();
    for engine in &claim.engines {
        let Some(col) = t.engines.iter().position(|e| e == engine) else {
            continue;
        };
        for g in &groups {
            let row_at = |v: f64| {
                t.rows.iter().find(|r| {
                    let p = row_params(r);
                    in_group(&p, g) && close(p[s], v)
                })
            };
            let mut check = blank_check(
                format!("{engine} / {versus}"),
                engine,
                format!(
                    "{} over {} at {}",
                    param_text(along, to),
                    param_text(along, from),
                    group_text(g)
                ),
                paper_stated(claim),
            );
            let (Some(rf), Some(rt)) = (row_at(from), row_at(to)) else {
                check.verdict = Verdict::CannotMeasure(format!(
                    "{} or {} not in this run",
                    param_text(along, from),
                    param_text(along, to)
                ));
                out.push(check);
                continue;
            };
            let four = [
                &rf.cells[col],
                &rf.cells[vcol],
                &rt.cells[col],
                &rt.cells[vcol],
            ];
            let rounds: Vec<Vec<(u32, f64)>> =
                four.iter().map(|c| by_round(dir, c, metric, k)).collect();
            let at = |i: usize, rep: u32| {
                rounds[i]
                    .iter()
                    .find(|(r, v)| *r == rep && *v > 0.0)
                    .map(|x| x.1)
            };
            let per_round: Vec<f64> = rounds[0]
                .iter()
                .filter_map(|&(rep, _)| {
                    let (ef, vf, et, vt) = (at(0, rep)?, at(1, rep)?, at(2, rep)?, at(3, rep)?);
                    Some((et / vt) / (ef / vf))
                })
                .collect();
            settle_rounds(&mut check, dir, claim, &per_round, &four, noise, || {
                "no repetition with all four points finished".into()
            });
            out.push(check);
        }
    }
    out
}

/// `versus_metric`: at every row (in `range`), each point's statistic `k`
/// of `metric` divided by statistic `k_other` of `other` of the same point.
#[allow(clippy::too_many_arguments)]
pub(super) fn metric_checks(
    dir: &SweepDir,
    t: &PaperTable,
    claim: &PaperClaim,
    metric: Metric,
    k: usize,
    along: Vary,
    other: Metric,
    k_other: usize,
    range: Option<(f64, f64)>,
    noise: Option<&Noise>,
) -> Vec<ClaimCheck> {
    let mut out = Vec::new();
    for engine in &claim.engines {
        let Some(col) = t.engines.iter().position(|e| e == engine) else {
            continue;
        };
        for r in t.rows.iter().filter(|r| {
            range.is_none_or(|(lo, hi)| {
                let v = r.value(along);
                (v >= lo || close(v, lo)) && (v <= hi || close(v, hi))
            })
        }) {
            let cell = &r.cells[col];
            let mut check = blank_check(
                format!("{engine}: {} / {}", metric_name(metric), metric_name(other)),
                engine,
                setting_text(r),
                paper_stated(claim),
            );
            let per_round: Vec<f64> = cell
                .points
                .iter()
                .filter_map(|&i| {
                    let p = &dir.points[i];
                    let a = our_stats(&dir.experiment, metric, p)[k]?;
                    let b = our_stats(&dir.experiment, other, p)[k_other]?;
                    (a.is_finite() && b.is_finite() && b > 0.0).then(|| a / b)
                })
                .collect();
            settle_rounds(&mut check, dir, claim, &per_round, &[cell], noise, || {
                format!(
                    "{} has no point with both {} and {}",
                    setting_text(r),
                    metric_name(metric),
                    metric_name(other)
                )
            });
            out.push(check);
        }
    }
    out
}
