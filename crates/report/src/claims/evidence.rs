//! What a claim's verdict rests on: comparisons paired by round, the A/A
//! control's noise floor, and the rule that turns both into a verdict the
//! machine's noise cannot have decided (docs/statistics.md).
//!
//! A comparison of two cells pairs their repetitions by round (repetition k
//! of one with repetition k of the other, measured minutes apart on the same
//! machine state), takes the ratio (or difference) in each round, and
//! reports their median with its distribution-free interval
//! ([`connlab_measure::stats::median_interval`], 95 %, or the whole range
//! with its lower coverage when there are too few rounds).
//!
//! The A/A control measures one engine twice per round. How far its second
//! measurement strays from the first (the 90th percentile of the factor
//! `max(r, 1/r)` over every pair, or the largest with fewer than ten pairs)
//! is the noise floor: a difference the machine makes on its own.
//!
//! A verdict stands only when it survives both: the interval, and the
//! median moved by the noise floor either way, lie on the same side of the
//! claim's bound. Otherwise the claim cannot be judged here.

use super::*;
use connlab_lab::validity::{cannot_judge_reason, Validity};
use connlab_measure::stats::median_interval;

/// The confidence of every interval of a claim's comparison.
pub(crate) const CONFIDENCE: f64 = 0.95;

/// The A/A control's noise in one statistic.
#[derive(Clone, Debug, PartialEq)]
pub struct Noise {
    /// The engine measured twice.
    pub engine: String,
    /// Relative noise: a factor of at least 1 (the 90th percentile of
    /// `max(r, 1/r)` of the control's ratios).
    pub factor: f64,
    /// Absolute noise in the statistic's stored unit (the 90th percentile
    /// of `|second - first|`).
    pub difference: f64,
    /// Pairs it rests on.
    pub n: usize,
    /// The statistic's unit for text, and the divisor from the stored
    /// unit to it.
    pub unit: (&'static str, f64),
    /// The control's ratios (second / first), for the report.
    pub ratios: Vec<f64>,
}

impl Noise {
    /// `±4.1 % (epoll twice per round, 18 pairs)`.
    pub fn text(&self) -> String {
        format!(
            "±{} % ({} twice per round, {} pair{})",
            trimmed((self.factor - 1.0) * 100.0),
            self.engine,
            self.n,
            if self.n == 1 { "" } else { "s" }
        )
    }

    /// `±4.1 %`.
    pub fn short(&self) -> String {
        format!("±{} %", trimmed((self.factor - 1.0) * 100.0))
    }

    /// `±0.41 µs`: the absolute noise in the statistic's unit.
    pub fn short_absolute(&self) -> String {
        format!(
            "±{} {}",
            trimmed(self.difference / self.unit.1),
            self.unit.0
        )
    }
}

/// The 90th percentile of `values` (the largest below ten values).
pub(crate) fn p90(mut values: Vec<f64>) -> Option<f64> {
    values.retain(|v| v.is_finite());
    if values.is_empty() {
        return None;
    }
    values.sort_by(f64::total_cmp);
    let n = values.len();
    let i = if n < 10 {
        n - 1
    } else {
        ((0.9 * n as f64).ceil() as usize).clamp(1, n) - 1
    };
    Some(values[i])
}

/// The noise floor of statistic `k` of `metric` from the sweep's A/A
/// control points and the engine's own points of the same round and
/// setting (valid ones only); `None` without a control pair.
pub fn noise(dir: &SweepDir, metric: Metric, k: usize) -> Option<Noise> {
    let exp = &dir.experiment;
    let mut ratios = Vec::new();
    let mut diffs = Vec::new();
    let mut engine = String::new();
    for c in dir.controls.iter().filter(|c| c.checked.is_valid()) {
        let Some(o) = dir.points.iter().find(|o| {
            o.checked.is_valid()
                && o.params.engine == c.params.engine
                && o.params.connections == c.params.connections
                && o.params.active_ratio_label == c.params.active_ratio_label
                && o.params.rate_per_s.to_bits() == c.params.rate_per_s.to_bits()
                && o.params.repetition == c.params.repetition
        }) else {
            continue;
        };
        let (Some(a), Some(b)) = (
            our_stats(exp, metric, o)[k].filter(|v| v.is_finite()),
            our_stats(exp, metric, c)[k].filter(|v| v.is_finite()),
        ) else {
            continue;
        };
        engine.clone_from(&c.params.engine);
        diffs.push((b - a).abs());
        if a > 0.0 && b > 0.0 {
            ratios.push(b / a);
        }
    }
    let difference = p90(diffs.clone())?;
    let factor = p90(ratios.iter().map(|r| r.max(1.0 / r)).collect()).unwrap_or(f64::INFINITY);
    Some(Noise {
        engine,
        factor,
        difference,
        n: diffs.len(),
        unit: stat_unit(metric, k),
        ratios,
    })
}

/// One cell compared with another.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Compared {
    /// The median of the per-round ratios or differences.
    pub median: f64,
    /// Its interval's low end.
    pub lo: f64,
    /// Its interval's high end.
    pub hi: f64,
    /// Rounds (or, unpaired, the fewer repetitions of the two).
    pub n: usize,
    /// The interval's coverage (0.95, or less with few rounds; 0 with one
    /// round, and when unpaired).
    pub coverage: f64,
    /// Paired by round; `false` when no round had both sides and the
    /// interval is every pairing's range.
    pub paired: bool,
}

/// Each repetition's value of statistic `k` of a cell (valid points only).
pub(crate) fn by_round(dir: &SweepDir, cell: &Cell, metric: Metric, k: usize) -> Vec<(u32, f64)> {
    cell.points
        .iter()
        .filter_map(|&i| {
            let p = &dir.points[i];
            let v = our_stats(&dir.experiment, metric, p)[k].filter(|v| v.is_finite())?;
            Some((p.params.repetition, v))
        })
        .collect()
}

/// `to` compared with `from` as the claim asks (ratio `to / from`, or the
/// difference), paired by round; unpaired (every pairing's range) when no
/// round has both. `None` when either cell has no valid value.
pub(crate) fn compare_cells(
    dir: &SweepDir,
    claim: &PaperClaim,
    from: &Cell,
    to: &Cell,
    metric: Metric,
    k: usize,
) -> Option<Result<Compared, String>> {
    let a = by_round(dir, from, metric, k);
    let b = by_round(dir, to, metric, k);
    if a.is_empty() || b.is_empty() {
        return None;
    }
    let one = |x: f64, y: f64| match claim.compare {
        Compare::Ratio => (x > 0.0 && y > 0.0).then(|| y / x),
        Compare::Difference => Some(y - x),
    };
    let mut per_round = Vec::new();
    for (rep, x) in &a {
        if let Some((_, y)) = b.iter().find(|(r, _)| r == rep) {
            match one(*x, *y) {
                Some(v) => per_round.push(v),
                None => {
                    return Some(Err(
                        "a ratio of values that are not all positive".to_string()
                    ))
                }
            }
        }
    }
    if let Some(m) = median_interval(&per_round, CONFIDENCE) {
        return Some(Ok(Compared {
            median: m.median,
            lo: m.lo,
            hi: m.hi,
            n: m.n as usize,
            coverage: m.coverage,
            paired: true,
        }));
    }
    // No round in common: every pairing of the two cells' repetitions.
    let sa = Spread::of(a.iter().map(|x| x.1))?;
    let sb = Spread::of(b.iter().map(|x| x.1))?;
    Some(compare_spread(claim, &sa, &sb).map(|(m, lo, hi)| Compared {
        median: m,
        lo,
        hi,
        n: sa.n().min(sb.n()),
        coverage: 0.0,
        paired: false,
    }))
}

/// The verdict of one comparison: its interval and its median moved by the
/// noise floor either way must lie on one side of the claim's bounds for it
/// to hold or to fail; otherwise the machine's noise could have decided it.
pub(crate) fn judge_noisy(
    claim: &PaperClaim,
    c: &Compared,
    quantity: Quantity,
    noise: Option<&Noise>,
) -> Verdict {
    if claim.expect_min.is_none() && claim.expect_max.is_none() {
        return Verdict::NotJudged;
    }
    // A difference, or a value that is not positive (a signed deviation),
    // strays by the control's absolute noise; a positive value or a ratio
    // by its factor.
    // A share (0-1: a CPU's busy share, a share of sends) strays by the
    // control's absolute noise too: a factor on a share near zero says
    // nothing (0.001 against 0.01 is 10x and one send in a thousand).
    let share = noise.is_some_and(|n| n.unit.0 == "share");
    let absolute = quantity == Quantity::Difference
        || (quantity == Quantity::Value && (c.median <= 0.0 || share));
    let (lo, hi) = match noise {
        Some(n) if absolute => (
            c.lo.min(c.median - n.difference),
            c.hi.max(c.median + n.difference),
        ),
        Some(n) if n.factor.is_finite() => {
            (c.lo.min(c.median / n.factor), c.hi.max(c.median * n.factor))
        }
        _ => (c.lo, c.hi),
    };
    let inside =
        |v: f64| claim.expect_min.is_none_or(|m| v >= m) && claim.expect_max.is_none_or(|m| v <= m);
    if inside(lo) && inside(hi) {
        return Verdict::Holds;
    }
    let below = claim.expect_min.is_some_and(|m| hi < m);
    let above = claim.expect_max.is_some_and(|m| lo > m);
    if below || above {
        return Verdict::FAILS;
    }
    Verdict::CannotJudge(match noise {
        Some(n) => format!(
            "the median and its interval{} lie within the machine's A/A noise ({}) of the bound",
            interval_words(c),
            if absolute {
                n.short_absolute()
            } else {
                n.short()
            }
        ),
        None => format!("the interval{} straddles the bound", interval_words(c)),
    })
}

/// ` (95 % over 5 rounds)`, ` (the range of 3 rounds, 75 %)`, ` (every
/// pairing, unpaired)`.
fn interval_words(c: &Compared) -> String {
    if !c.paired {
        " (every pairing of unpaired repetitions)".into()
    } else if c.n == 1 {
        " (one round)".into()
    } else if c.coverage >= CONFIDENCE {
        format!(" (95 % over {} rounds)", c.n)
    } else {
        format!(
            " (the range of {} rounds, {} % coverage)",
            c.n,
            trimmed(c.coverage * 100.0)
        )
    }
}

/// Why a cell's comparison cannot be judged: its invalid points' gates,
/// or `None` when it has no invalid point either (then nothing was
/// measured).
pub(crate) fn invalid_reason(dir: &SweepDir, cells: &[&Cell]) -> Option<String> {
    let v: Vec<&Validity> = cells
        .iter()
        .flat_map(|c| c.invalid.iter())
        .filter_map(|&i| dir.points[i].checked.validity.as_ref())
        .collect();
    (!v.is_empty()).then(|| cannot_judge_reason(&v))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claim(min: Option<f64>, max: Option<f64>) -> PaperClaim {
        let mut c: PaperClaim = serde_json::from_str(
            r#"{"text": "t", "engines": ["select"], "from": 400, "to": 10000}"#,
        )
        .unwrap();
        c.expect_min = min;
        c.expect_max = max;
        c
    }

    fn cmp(median: f64, lo: f64, hi: f64) -> Compared {
        Compared {
            median,
            lo,
            hi,
            n: 3,
            coverage: 0.75,
            paired: true,
        }
    }

    fn noise(factor: f64) -> Noise {
        Noise {
            engine: "epoll".into(),
            factor,
            difference: 0.0,
            n: 10,
            unit: ("µs", 1.0),
            ratios: Vec::new(),
        }
    }

    #[test]
    fn a_verdict_must_survive_the_interval_and_the_noise() {
        let at_least_2 = claim(Some(2.0), None);
        // Clear of the bound either way.
        assert_eq!(
            judge_noisy(
                &at_least_2,
                &cmp(3.0, 2.8, 3.3),
                Quantity::Ratio,
                Some(&noise(1.1))
            ),
            Verdict::Holds
        );
        assert_eq!(
            judge_noisy(
                &at_least_2,
                &cmp(1.0, 0.9, 1.2),
                Quantity::Ratio,
                Some(&noise(1.1))
            ),
            Verdict::FAILS
        );
        // The interval clears it, but the noise reaches across.
        let v = judge_noisy(
            &at_least_2,
            &cmp(2.2, 2.1, 2.3),
            Quantity::Ratio,
            Some(&noise(1.25)),
        );
        assert!(
            matches!(v, Verdict::CannotJudge(ref w) if w.contains("±25 %")),
            "{v:?}"
        );
        // No control: the interval alone.
        assert_eq!(
            judge_noisy(&at_least_2, &cmp(2.2, 2.1, 2.3), Quantity::Ratio, None),
            Verdict::Holds
        );
        let v = judge_noisy(&at_least_2, &cmp(2.1, 1.5, 2.6), Quantity::Ratio, None);
        assert!(
            matches!(v, Verdict::CannotJudge(ref w) if w.contains("straddles")),
            "{v:?}"
        );
        // A claim without bounds is not judged.
        assert_eq!(
            judge_noisy(
                &claim(None, None),
                &cmp(1.0, 1.0, 1.0),
                Quantity::Ratio,
                None
            ),
            Verdict::NotJudged
        );
    }

    #[test]
    fn a_signed_value_strays_by_the_absolute_noise() {
        // Within 1 us either way; a deviation of -1.12 us with a control
        // that strays by 0.3 us could be -0.82 us: not judged.
        let within_1 = claim(Some(-1.0), Some(1.0));
        let n = Noise {
            difference: 0.3,
            ..noise(1.5)
        };
        let v = judge_noisy(
            &within_1,
            &cmp(-1.12, -1.12, -1.12),
            Quantity::Value,
            Some(&n),
        );
        assert!(
            matches!(v, Verdict::CannotJudge(ref w) if w.contains("±0.3 µs")),
            "{v:?}"
        );
        // Beyond the noise, it fails.
        assert_eq!(
            judge_noisy(&within_1, &cmp(-2.0, -2.1, -1.9), Quantity::Value, Some(&n)),
            Verdict::FAILS
        );
    }

    #[test]
    fn the_ninetieth_percentile() {
        assert_eq!(p90(vec![1.0, 3.0, 2.0]), Some(3.0));
        let v: Vec<f64> = (1..=20).map(f64::from).collect();
        assert_eq!(p90(v), Some(18.0));
        assert_eq!(p90(vec![f64::NAN]), None);
    }
}
