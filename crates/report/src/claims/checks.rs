//! The comparisons of each claim shape: an engine along a parameter, one
//! engine against another, a peak, and a value over the rows.

use super::*;

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

pub(super) fn value_checks(
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
