//! Comparison of servers measured in rounds (`connlab run`): the median and
//! spread of each row, its ratio to the best row with an interval paired
//! by round, which rows tie and which differ, and what dominates the
//! difference, in plain words. Pure: no I/O, no clock; the caller measures.
//!
//! # Why these statistics
//!
//! A run measures every row once per round, rows alternating within a round,
//! so rows of one round share the machine's state of that moment. The spread
//! of a row is the lowest and highest value over its rounds, shown as it is.
//!
//! A row's ratio to the best is taken **in each round** (this row's value
//! over the best's of the same round), which keeps what drifts between
//! rounds (other work on the machine) out of it; the ratio shown is the
//! median of those per-round ratios, and its interval is the
//! distribution-free interval of that median from order statistics
//! ([`connlab_measure::stats::median_interval`]): 95 % where there are
//! enough rounds (six or more), otherwise the range of the per-round ratios
//! with the coverage it has (75 % with three rounds, 94 % with five). A row
//! **ties** the best when that interval includes 1 and **differs** when it
//! does not, so a tie never comes with an interval that excludes 1. Rounds
//! a row did not measure validly are left out of its pairs.

mod recommend;
mod text;

use connlab_measure::stats::median_interval;
pub use recommend::{recommend, Caveats, Confidence, Recommendation, FULL_REPETITIONS};
use serde::{Deserialize, Serialize};
pub use text::{coverage_text, ratio_text};
use text::{explanations, lines, verdict};

/// Which direction of the primary figure is better.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Better {
    /// Lower is better (latency).
    Lower,
    /// Higher is better (throughput).
    Higher,
}

/// What one row measured, one value per round (`None`: not measured then).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RowSamples {
    /// The row's name (engine, or the label of a server under test).
    pub label: String,
    /// The primary figure (the one rows are ranked by).
    pub primary: Vec<Option<f64>>,
    /// Server CPU microseconds per completed request.
    pub cpu_us_per_request: Vec<Option<f64>>,
    /// Voluntary context switches of the server per completed request: how
    /// often it went to sleep and was woken.
    pub wakeups_per_request: Vec<Option<f64>>,
    /// Server memory added per open connection, bytes.
    pub memory_per_connection_bytes: Vec<Option<f64>>,
}

/// Median and spread of one figure over the rounds that measured it.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Figure {
    /// Median over rounds (the mean of the middle two for an even count).
    pub median: f64,
    /// Lowest value.
    pub min: f64,
    /// Highest value.
    pub max: f64,
    /// Rounds that measured it.
    pub n: usize,
}

impl Figure {
    /// The figure of the finite values among `values`; `None` if there are none.
    pub fn of(values: &[Option<f64>]) -> Option<Figure> {
        let mut v: Vec<f64> = values
            .iter()
            .flatten()
            .copied()
            .filter(|x| x.is_finite())
            .collect();
        if v.is_empty() {
            return None;
        }
        v.sort_by(f64::total_cmp);
        Some(Figure {
            median: median_sorted(&v),
            min: v[0],
            max: v[v.len() - 1],
            n: v.len(),
        })
    }
}

/// How a row stands against the best.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Standing {
    /// The best median.
    Best,
    /// Its ratio interval to the best includes 1.
    TiesBest,
    /// Its ratio interval to the best lies clear of 1.
    Differs,
    /// Too few rounds to judge (fewer than two paired with the best's).
    Unjudged,
    /// No round measured it.
    NotMeasured,
}

/// What accounts for a row's difference from the best, from the server-side
/// figures.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum Cause {
    /// More server CPU per request with no more wake-ups per request:
    /// each wake-up costs more (for select and poll, the scan over the
    /// descriptor set).
    ScanCost {
        /// CPU per request, this row over the best.
        cpu_ratio: f64,
        /// CPU microseconds per wake-up, this row.
        us_per_wakeup: f64,
        /// CPU microseconds per wake-up, the best.
        best_us_per_wakeup: f64,
    },
    /// Many more wake-ups per request.
    WakeUps {
        /// Wake-ups per request, this row.
        per_request: f64,
        /// Wake-ups per request, the best.
        best_per_request: f64,
        /// CPU per request, this row over the best.
        cpu_ratio: f64,
    },
    /// Much more memory per connection.
    Memory {
        /// Bytes per connection, this row.
        bytes: f64,
        /// Bytes per connection, the best.
        best_bytes: f64,
    },
    /// Server CPU, wake-ups and memory are close to the best's: the
    /// difference lies elsewhere (scheduling, the network path).
    NotServerWork,
}

/// One row of a [`Comparison`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RowComparison {
    /// The row's name.
    pub label: String,
    /// The primary figure.
    pub primary: Option<Figure>,
    /// The median of the per-round ratios to the best.
    pub ratio_to_best: Option<f64>,
    /// The interval of that median (lower, upper), paired by round.
    pub ratio_ci: Option<(f64, f64)>,
    /// The interval's coverage (`confidence`, or less with few rounds).
    pub ratio_ci_coverage: Option<f64>,
    /// Rounds paired with the best.
    pub paired_rounds: usize,
    /// Best, tie or differ.
    pub standing: Standing,
    /// Server CPU microseconds per request.
    pub cpu_us_per_request: Option<Figure>,
    /// Wake-ups per request.
    pub wakeups_per_request: Option<Figure>,
    /// Memory per connection, bytes.
    pub memory_per_connection_bytes: Option<Figure>,
    /// What dominates its difference from the best (empty for the best,
    /// and where the server-side figures are missing).
    pub causes: Vec<Cause>,
}

/// The comparison of every row and its verdict.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Comparison {
    /// What the primary figure is, e.g. `median service latency (us)`.
    pub metric: String,
    /// Its better direction.
    pub better: Better,
    /// The confidence asked of every ratio interval (0.95).
    pub confidence: f64,
    /// Rows in the order given.
    pub rows: Vec<RowComparison>,
    /// Index of the best row, if any row was measured.
    pub best: Option<usize>,
    /// Row indices from best to worst by the median of the primary
    /// figure; rows no round measured come last, in the order given.
    #[serde(default)]
    pub ranking: Vec<usize>,
    /// One sentence per row against the best, in ranking order, after
    /// hyperfine's "X ran N times faster than Y": `epoll answered 3.63x
    /// [3.04-4.08] faster than poll`.
    #[serde(default)]
    pub lines: Vec<String>,
    /// The verdict: short sentences in plain words.
    pub verdict: Vec<String>,
    /// The verdict's lines that explain (what dominates a difference,
    /// what a tie costs), for printers that say the rest through
    /// [`lines`](Comparison::lines).
    #[serde(default)]
    pub explanations: Vec<String>,
    /// What to use and how sure that is (see [`recommend`]); `None` until
    /// the caller, who knows how the runs went, fills it in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recommendation: Option<Recommendation>,
}

/// Thresholds of what counts as "dominates": a factor of this much or more.
const CPU_FACTOR: f64 = 1.3;
const WAKEUP_FACTOR: f64 = 1.5;
const MEMORY_FACTOR: f64 = 2.0;
/// Memory differences below this many bytes per connection are not named.
const MEMORY_FLOOR: f64 = 4096.0;

/// The confidence of `connlab run`'s ratio intervals.
pub const CONFIDENCE: f64 = 0.95;

/// Compares `rows` by their primary figure (`metric` names it), with ratio
/// intervals of `confidence` (see the module documentation).
pub fn compare(metric: &str, better: Better, rows: &[RowSamples], confidence: f64) -> Comparison {
    let primaries: Vec<Option<Figure>> = rows.iter().map(|r| Figure::of(&r.primary)).collect();
    let best = primaries
        .iter()
        .enumerate()
        .filter_map(|(i, f)| f.map(|f| (i, f.median)))
        .reduce(|a, b| {
            let b_better = match better {
                Better::Lower => b.1 < a.1,
                Better::Higher => b.1 > a.1,
            };
            if b_better {
                b
            } else {
                a
            }
        })
        .map(|(i, _)| i);
    let out_rows: Vec<RowComparison> = rows
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let primary = primaries[i];
            let best_fig = best.and_then(|b| primaries[b]);
            let ratios = best.map_or(Vec::new(), |b| {
                per_round_ratios(&r.primary, &rows[b].primary)
            });
            let interval = median_interval(&ratios, confidence);
            let standing = match (primary, best_fig, &interval) {
                (None, _, _) | (_, None, _) => Standing::NotMeasured,
                _ if Some(i) == best => Standing::Best,
                (_, _, Some(m)) if m.n >= 2 && m.lo <= 1.0 && 1.0 <= m.hi => Standing::TiesBest,
                (_, _, Some(m)) if m.n >= 2 => Standing::Differs,
                _ => Standing::Unjudged,
            };
            RowComparison {
                label: r.label.clone(),
                primary,
                ratio_to_best: interval.as_ref().map(|m| m.median),
                ratio_ci: interval.as_ref().map(|m| (m.lo, m.hi)),
                ratio_ci_coverage: interval.as_ref().map(|m| m.coverage),
                paired_rounds: ratios.len(),
                standing,
                cpu_us_per_request: Figure::of(&r.cpu_us_per_request),
                wakeups_per_request: Figure::of(&r.wakeups_per_request),
                memory_per_connection_bytes: Figure::of(&r.memory_per_connection_bytes),
                causes: Vec::new(),
            }
        })
        .collect();
    let ranking = ranking(&primaries, better);
    let mut c = Comparison {
        metric: metric.to_string(),
        better,
        confidence,
        rows: out_rows,
        best,
        ranking,
        lines: Vec::new(),
        verdict: Vec::new(),
        explanations: Vec::new(),
        recommendation: None,
    };
    if let Some(b) = best {
        let best_row = c.rows[b].clone();
        for (i, row) in c.rows.iter_mut().enumerate() {
            if i != b && row.primary.is_some() {
                row.causes = causes(row, &best_row);
            }
        }
    }
    c.verdict = verdict(&c);
    c.explanations = explanations(&c);
    c.lines = lines(&c);
    c
}

/// Row indices from best to worst median; unmeasured rows last, as given.
fn ranking(primaries: &[Option<Figure>], better: Better) -> Vec<usize> {
    let mut measured: Vec<(usize, f64)> = primaries
        .iter()
        .enumerate()
        .filter_map(|(i, f)| f.map(|f| (i, f.median)))
        .collect();
    // A stable sort keeps the order given among equal medians.
    measured.sort_by(|a, b| match better {
        Better::Lower => a.1.total_cmp(&b.1),
        Better::Higher => b.1.total_cmp(&a.1),
    });
    let mut order: Vec<usize> = measured.into_iter().map(|(i, _)| i).collect();
    order.extend((0..primaries.len()).filter(|i| primaries[*i].is_none()));
    order
}

/// The median of sorted values (not empty).
fn median_sorted(v: &[f64]) -> f64 {
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// This row's value over the best's, in every round both measured.
fn per_round_ratios(row: &[Option<f64>], best: &[Option<f64>]) -> Vec<f64> {
    row.iter()
        .zip(best)
        .filter_map(|(r, b)| match (r, b) {
            (Some(r), Some(b)) if r.is_finite() && b.is_finite() && *b != 0.0 => Some(r / b),
            _ => None,
        })
        .collect()
}

/// What dominates `row`'s difference from `best`, from the medians of the
/// server-side figures; empty when they are missing.
fn causes(row: &RowComparison, best: &RowComparison) -> Vec<Cause> {
    let med = |f: &Option<Figure>| f.map(|f| f.median);
    let mut out = Vec::new();
    let cpu = med(&row.cpu_us_per_request).zip(med(&best.cpu_us_per_request));
    let wake = med(&row.wakeups_per_request).zip(med(&best.wakeups_per_request));
    let mem = med(&row.memory_per_connection_bytes).zip(med(&best.memory_per_connection_bytes));
    let cpu_ratio = cpu.and_then(|(r, b)| (b > 0.0).then(|| r / b));
    if let Some((w, bw)) = wake {
        let more_wakeups = if bw > 0.0 {
            w / bw >= WAKEUP_FACTOR
        } else {
            w > 0.0
        };
        if more_wakeups {
            out.push(Cause::WakeUps {
                per_request: w,
                best_per_request: bw,
                cpu_ratio: cpu_ratio.unwrap_or(f64::NAN),
            });
        } else if let (Some(ratio), Some((c, bc))) = (cpu_ratio, cpu) {
            if ratio >= CPU_FACTOR && w > 0.0 && bw > 0.0 {
                out.push(Cause::ScanCost {
                    cpu_ratio: ratio,
                    us_per_wakeup: c / w,
                    best_us_per_wakeup: bc / bw,
                });
            }
        }
    }
    if let Some((m, bm)) = mem {
        if m - bm >= MEMORY_FLOOR && (bm <= 0.0 || m / bm >= MEMORY_FACTOR) {
            out.push(Cause::Memory {
                bytes: m,
                best_bytes: bm,
            });
        }
    }
    let measured = cpu.is_some() && wake.is_some();
    if out.is_empty() && measured {
        out.push(Cause::NotServerWork);
    }
    out
}

#[cfg(test)]
mod tests;
