//! Comparison of servers measured in rounds (`connlab run`): the median and
//! spread of each row, its ratio to the best row with a bootstrap confidence
//! interval, which rows tie and which differ, and what dominates the
//! difference, in plain words. Pure: no I/O, no clock; the caller measures.
//!
//! # Why these statistics
//!
//! A run measures every row once per round, rows alternating within a round,
//! so rows of one round share the machine's state of that moment. The spread
//! of a row is the lowest and highest value over its rounds. Two rows **tie**
//! when their spreads overlap: with a handful of repetitions no finer test
//! can tell them apart, and a user should not pick a server on a difference
//! that one repetition can undo.
//!
//! The confidence interval of a ratio is a percentile bootstrap *paired by
//! round*: each resample draws rounds with replacement (the same rounds for
//! both rows), takes each row's median over the drawn rounds, and divides.
//! Pairing keeps what drifts between rounds (other work on the machine) out
//! of the ratio. The resampling uses a fixed seed, so the same results give
//! the same interval. With few rounds the interval cannot be wider than the
//! per-round values allow (with three rounds it is close to the range of the
//! per-round ratios), so it describes the measured rounds, not every
//! possible run; the verdict therefore rests on the spreads, and the
//! interval says how large a difference is.

mod text;

use connlab_measure::SeededRng;
use serde::{Deserialize, Serialize};
pub use text::ratio_text;
use text::verdict;

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

    /// Whether the two spreads share at least one value.
    pub fn overlaps(&self, other: &Figure) -> bool {
        self.min <= other.max && other.min <= self.max
    }
}

/// How a row stands against the best.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Standing {
    /// The best median.
    Best,
    /// Its spread overlaps the best's.
    TiesBest,
    /// Its spread lies clear of the best's.
    Differs,
    /// Too few rounds to judge (fewer than two for it or for the best).
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
    /// each wake-up costs more (a scan over the descriptor set).
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
    /// Median over the best's median.
    pub ratio_to_best: Option<f64>,
    /// The bootstrap interval of that ratio (lower, upper).
    pub ratio_ci: Option<(f64, f64)>,
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

/// Bootstrap settings.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Bootstrap {
    /// Resamples drawn.
    pub resamples: usize,
    /// Two-sided confidence, e.g. 0.95.
    pub confidence: f64,
    /// Seed of the resampling.
    pub seed: u64,
}

impl Default for Bootstrap {
    fn default() -> Self {
        Bootstrap {
            resamples: 2000,
            confidence: 0.95,
            seed: 20,
        }
    }
}

/// The comparison of every row and its verdict.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Comparison {
    /// What the primary figure is, e.g. `median service latency (us)`.
    pub metric: String,
    /// Its better direction.
    pub better: Better,
    /// The bootstrap used for the intervals.
    pub bootstrap: Bootstrap,
    /// Rows in the order given.
    pub rows: Vec<RowComparison>,
    /// Index of the best row, if any row was measured.
    pub best: Option<usize>,
    /// The verdict: short sentences in plain words.
    pub verdict: Vec<String>,
}

/// Thresholds of what counts as "dominates": a factor of this much or more.
const CPU_FACTOR: f64 = 1.3;
const WAKEUP_FACTOR: f64 = 1.5;
const MEMORY_FACTOR: f64 = 2.0;
/// Memory differences below this many bytes per connection are not named.
const MEMORY_FLOOR: f64 = 4096.0;

/// Compares `rows` by their primary figure (`metric` names it).
pub fn compare(metric: &str, better: Better, rows: &[RowSamples], boot: Bootstrap) -> Comparison {
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
            let standing = match (primary, best_fig) {
                (None, _) | (_, None) => Standing::NotMeasured,
                _ if Some(i) == best => Standing::Best,
                (Some(p), Some(b)) if p.n < 2 || b.n < 2 => Standing::Unjudged,
                (Some(p), Some(b)) if p.overlaps(&b) => Standing::TiesBest,
                _ => Standing::Differs,
            };
            let (ratio_to_best, ratio_ci) = match (primary, best_fig, best) {
                (Some(p), Some(b), Some(bi)) if b.median != 0.0 => (
                    Some(p.median / b.median),
                    ratio_interval(&r.primary, &rows[bi].primary, boot),
                ),
                _ => (None, None),
            };
            RowComparison {
                label: r.label.clone(),
                primary,
                ratio_to_best,
                ratio_ci,
                standing,
                cpu_us_per_request: Figure::of(&r.cpu_us_per_request),
                wakeups_per_request: Figure::of(&r.wakeups_per_request),
                memory_per_connection_bytes: Figure::of(&r.memory_per_connection_bytes),
                causes: Vec::new(),
            }
        })
        .collect();
    let mut c = Comparison {
        metric: metric.to_string(),
        better,
        bootstrap: boot,
        rows: out_rows,
        best,
        verdict: Vec::new(),
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
    c
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

/// The median of the finite values (`None` if none).
fn median(values: impl Iterator<Item = f64>) -> Option<f64> {
    let mut v: Vec<f64> = values.filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    Some(median_sorted(&v))
}

/// The paired percentile-bootstrap interval of median(`row`) / median(`best`)
/// over rounds (see the module documentation).
fn ratio_interval(
    row: &[Option<f64>],
    best: &[Option<f64>],
    boot: Bootstrap,
) -> Option<(f64, f64)> {
    let rounds = row.len().max(best.len());
    if rounds == 0 || boot.resamples == 0 {
        return None;
    }
    let at = |v: &[Option<f64>], k: usize| v.get(k).copied().flatten();
    let mut rng = SeededRng::new(boot.seed);
    let mut ratios = Vec::with_capacity(boot.resamples);
    let mut draw = vec![0usize; rounds];
    for _ in 0..boot.resamples {
        for d in draw.iter_mut() {
            // The modulo bias is below 2^-50 for any round count here.
            *d = rng.below(rounds as u64) as usize;
        }
        let r = median(draw.iter().filter_map(|&k| at(row, k)));
        let b = median(draw.iter().filter_map(|&k| at(best, k)));
        if let (Some(r), Some(b)) = (r, b) {
            if b != 0.0 {
                ratios.push(r / b);
            }
        }
    }
    if ratios.is_empty() {
        return None;
    }
    ratios.sort_by(f64::total_cmp);
    let tail = (1.0 - boot.confidence.clamp(0.0, 1.0)) / 2.0;
    let pick = |q: f64| {
        let k = ((q * ratios.len() as f64).ceil() as usize).clamp(1, ratios.len());
        ratios[k - 1]
    };
    Some((pick(tail), pick(1.0 - tail)))
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
