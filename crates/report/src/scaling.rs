//! The scaling section of a peers page whose file has a `[scaling]`
//! workers axis: per contender and body size, requests per second against
//! the server's workers, the speedup over one worker round by round, the
//! Universal Scalability Law fitted to the curve (contention σ, coherency
//! κ, the peak N*), the latency at the fixed offered load, and which
//! points the client may have limited.
//!
//! A point the client may have limited (it shared CPUs with the server, or
//! kept its own CPUs busy) is still shown and still fitted, because on a
//! small machine it is all there is; it is marked, the fit says how many
//! of its points are such, and the scaling goal is not judged on them.

use crate::brief::Headline;
use crate::export::{Block, Cell, Table};
use crate::peers::{round3, CsvRow};
use crate::plots::{self, Kind, Line};
use crate::summary::whole;
use crate::ReportError;
use connlab_lab::{PeerPoint, PeersDir, ProcessKind, Scaling};
use connlab_measure::stats::{median_interval, MedianInterval};
use connlab_measure::UslFit;
use std::collections::BTreeMap;

const CONFIDENCE: f64 = 0.95;

/// The speedup the scaling goal asks of the best event engine at two
/// workers, written before any run (issue 33).
pub(crate) const GOAL_SPEEDUP_AT_2: f64 = 1.8;

/// One contender's curve at one body size.
pub(crate) struct Curve<'a> {
    /// Contender name.
    pub(crate) contender: String,
    /// Whether connlab serve runs it (the goal is judged on these).
    pub(crate) connlab: bool,
    /// Response body bytes.
    pub(crate) body_bytes: u64,
    /// Workers → repetition → the valid point.
    pub(crate) points: BTreeMap<u32, BTreeMap<u32, &'a PeerPoint>>,
    /// The law fitted to the median of each worker count's valid points;
    /// `None` without a one-worker point and one above it.
    pub(crate) fit: Option<UslFit>,
}

impl Curve<'_> {
    /// The valid points at `workers`.
    fn at(&self, workers: u32) -> impl Iterator<Item = &PeerPoint> {
        self.points
            .get(&workers)
            .into_iter()
            .flat_map(|m| m.values().copied())
    }

    /// Requests per second's median at `workers`.
    fn median_rate(&self, workers: u32) -> Option<f64> {
        let v: Vec<f64> = self.at(workers).map(|p| p.requests_per_s).collect();
        median_interval(&v, CONFIDENCE).map(|m| m.median)
    }

    /// The speedup at `workers` over one worker, round by round, over the
    /// rounds where both are valid (and, with `clean`, neither is marked
    /// client-limited).
    fn speedup(&self, workers: u32, clean: bool) -> Option<MedianInterval> {
        let one = self.points.get(&1)?;
        let ratios: Vec<f64> = self
            .points
            .get(&workers)?
            .iter()
            .filter_map(|(rep, p)| {
                let b = one.get(rep)?;
                if clean && (p.client_limited.is_some() || b.client_limited.is_some()) {
                    return None;
                }
                (b.requests_per_s > 0.0).then(|| p.requests_per_s / b.requests_per_s)
            })
            .collect();
        median_interval(&ratios, CONFIDENCE)
    }

    /// Points marked client-limited, of all valid ones.
    fn limited(&self) -> (usize, usize) {
        let all = self.points.values().flat_map(|m| m.values());
        let (mut k, mut n) = (0, 0);
        for p in all {
            n += 1;
            k += usize::from(p.client_limited.is_some());
        }
        (k, n)
    }
}

/// Every contender's curve, body sizes in order, contenders in file order.
pub(crate) fn curves(dir: &PeersDir) -> Vec<Curve<'_>> {
    let exp = &dir.info.experiment;
    let mut sizes: Vec<u64> = dir.measured().map(|p| p.params.body_bytes).collect();
    sizes.sort_unstable();
    sizes.dedup();
    let mut out = Vec::new();
    for size in sizes {
        for c in &exp.contender {
            let mut points: BTreeMap<u32, BTreeMap<u32, &PeerPoint>> = BTreeMap::new();
            for p in dir.measured().filter(|p| {
                p.params.contender == c.name && p.params.body_bytes == size && p.checked.is_valid()
            }) {
                if let Some(w) = p.params.workers {
                    points.entry(w).or_default().insert(p.params.repetition, p);
                }
            }
            if points.is_empty() {
                continue;
            }
            // The fit rests on each worker count's median, so one
            // disturbed round does not pull the curve (the transformed
            // least squares weighs a low rate heavily).
            let xs: Vec<(f64, f64)> = points
                .iter()
                .filter_map(|(w, m)| {
                    let v: Vec<f64> = m.values().map(|p| p.requests_per_s).collect();
                    Some((f64::from(*w), median_interval(&v, CONFIDENCE)?.median))
                })
                .collect();
            out.push(Curve {
                contender: c.name.clone(),
                connlab: c.kind == ProcessKind::ConnlabServe,
                body_bytes: size,
                points,
                fit: UslFit::fit(&xs),
            });
        }
    }
    out
}

fn interval_text(iv: &MedianInterval) -> String {
    format!(
        "{:.2}× [{:.2}–{:.2}, {:.0} %]",
        iv.median,
        iv.lo,
        iv.hi,
        iv.coverage * 100.0
    )
}

fn median_of(values: impl Iterator<Item = f64>) -> Option<f64> {
    let v: Vec<f64> = values.filter(|x| x.is_finite()).collect();
    median_interval(&v, CONFIDENCE).map(|m| m.median)
}

fn cpus_text(cpus: &[usize]) -> String {
    if cpus.is_empty() {
        "any".into()
    } else {
        cpus.iter()
            .map(usize::to_string)
            .collect::<Vec<_>>()
            .join(",")
    }
}

/// The goal's verdicts: each connlab contender's speedup at two workers
/// against [`GOAL_SPEEDUP_AT_2`], on rounds the client did not limit.
pub(crate) fn headlines(dir: &PeersDir) -> Vec<Headline> {
    let mut out = Vec::new();
    for c in curves(dir).iter().filter(|c| c.connlab) {
        if !c.points.contains_key(&2) || !c.points.contains_key(&1) {
            continue;
        }
        let source = format!(
            "{} body, scaling goal",
            crate::peers::size_text(c.body_bytes)
        );
        let text = format!(
            "{} at 2 workers gives ≥ {GOAL_SPEEDUP_AT_2}× its 1-worker requests per second",
            c.contender
        );
        let all = c.speedup(2, false);
        let clean = c.speedup(2, true);
        let (key, word, why, shown) = match (&clean, &all) {
            (Some(iv), _) if iv.lo >= GOAL_SPEEDUP_AT_2 => ("holds", "holds", None, iv),
            (Some(iv), _) if iv.hi < GOAL_SPEEDUP_AT_2 => ("fails", "does not hold", None, iv),
            (Some(iv), _) => (
                "noisy",
                "cannot be judged here",
                Some(format!(
                    "the interval {:.2}–{:.2}× reaches across {GOAL_SPEEDUP_AT_2}×",
                    iv.lo, iv.hi
                )),
                iv,
            ),
            (None, Some(iv)) => {
                let reason = c
                    .at(2)
                    .chain(c.at(1))
                    .find_map(|p| p.client_limited.clone())
                    .unwrap_or_default();
                (
                    "noisy",
                    "cannot be judged here",
                    Some(format!(
                        "the client may have limited every round ({reason}); \
                         with it the speedup is {:.2}×, a lower bound of the server's",
                        iv.median
                    )),
                    iv,
                )
            }
            (None, None) => {
                out.push(Headline {
                    source,
                    text,
                    paper: "—".into(),
                    ours: "—".into(),
                    interval: "—".into(),
                    key: "noisy",
                    word: "cannot be judged here".into(),
                    why: Some(
                        "no round has valid points at both 1 and 2 workers (see the invalid points)"
                            .into(),
                    ),
                });
                continue;
            }
        };
        out.push(Headline {
            source,
            text,
            paper: "—".into(),
            ours: format!("{:.2}×", shown.median),
            interval: format!(
                "{:.2}–{:.2}× ({:.0} %)",
                shown.lo,
                shown.hi,
                shown.coverage * 100.0
            ),
            key,
            word: word.into(),
            why,
        });
    }
    out
}

/// The section's blocks: the curve table, the fit table, the plot (with
/// `figures`) and the client-limited points.
pub(crate) fn blocks(
    dir: &PeersDir,
    scaling: &Scaling,
    figures: bool,
) -> Result<Vec<Block>, ReportError> {
    let curves = curves(dir);
    let mut blocks = vec![Block::Heading("Scaling with the server's workers".into())];
    blocks.push(Block::Note(format!(
        "Each contender ran at {} workers (connlab serve --workers N, nginx worker_processes N), \
         pinned to the first N CPUs of placement.server_cpus. The speedup divides a round's \
         requests per second by the same round's at one worker. The Universal Scalability \
         Law X(N) = λN / (1 + σ(N−1) + κN(N−1)) is fitted to the median of each worker \
         count's valid points: σ is \
         contention (the share serialised), κ coherency (a cost per pair of workers), N* = \
         √((1−σ)/κ) the worker count where the curve peaks. A point is marked when its client \
         may have set its rate: it shared CPUs with the server, or kept its own CPUs over {:.0} % \
         busy; such points are fitted (the curve is then a lower bound of the server's) but not \
         used to judge the goal.",
        scaling
            .workers
            .iter()
            .map(u32::to_string)
            .collect::<Vec<_>>()
            .join(", "),
        scaling.client_busy * 100.0
    )));
    let latency = scaling.latency_rate;
    let mut head: Vec<String> = [
        "body",
        "contender",
        "workers",
        "server CPUs",
        "client CPUs",
        "valid reps",
        "req/s median",
        "speedup over 1 worker",
        "efficiency",
        "server CPUs busy",
        "imbalance",
    ]
    .into_iter()
    .map(String::from)
    .collect();
    if let Some(r) = latency {
        head.push(format!("p99 µs at {} req/s", whole(r)));
    }
    head.push("client may limit".into());
    let mut rows = Vec::new();
    for c in &curves {
        for (&w, reps) in &c.points {
            let first = reps.values().next();
            let speedup = (w > 1).then(|| c.speedup(w, false)).flatten();
            let busy = median_of(reps.values().map(|p| p.measured_cpu_s / p.wall_s.max(1e-9)));
            let mut row: Vec<Cell> = vec![
                Cell::from(crate::peers::size_text(c.body_bytes)),
                Cell::from(c.contender.clone()),
                Cell::from(w.to_string()),
                Cell::from(cpus_text(first.map_or(&[][..], |p| &p.server_cpus))),
                Cell::from(cpus_text(first.map_or(&[][..], |p| &p.client_cpus))),
                Cell::from(reps.len().to_string()),
                Cell::from(c.median_rate(w).map_or("—".into(), whole)),
                Cell::from(match (&speedup, w) {
                    (_, 1) => "1 (reference)".into(),
                    (Some(iv), _) => interval_text(iv),
                    (None, _) => "—".into(),
                }),
                Cell::from(match (&speedup, w) {
                    (_, 1) => "1.00".into(),
                    (Some(iv), _) => format!("{:.2}", iv.median / f64::from(w)),
                    (None, _) => "—".into(),
                }),
                Cell::from(busy.map_or("—".into(), |b| format!("{b:.2}"))),
                Cell::from(
                    median_of(reps.values().filter_map(|p| p.imbalance))
                        .map_or("—".into(), |v| format!("{v:.2}")),
                ),
            ];
            if latency.is_some() {
                row.push(Cell::from(latency_text(reps.values().copied())));
            }
            let k = reps.values().filter(|p| p.client_limited.is_some()).count();
            row.push(Cell::from(format!("{k} of {}", reps.len())).strong(k > 0));
            rows.push(row);
        }
    }
    blocks.push(Block::Table(Table {
        head,
        rows,
        labels: 3,
        merge_first: true,
        ..Table::default()
    }));
    blocks.push(fit_table(&curves));
    if figures {
        for size in body_sizes(&curves) {
            blocks.push(plot(&curves, size)?);
        }
    }
    // Reasons that differ only in their numbers (91 % busy, 95 % busy)
    // are one kind: said once, each point with its own figure.
    let mut reasons: BTreeMap<String, Vec<(String, String)>> = BTreeMap::new();
    for p in curves
        .iter()
        .flat_map(|c| c.points.values().flat_map(|m| m.values()))
    {
        if let Some(why) = &p.client_limited {
            reasons
                .entry(connlab_lab::warning_text::shape(why))
                .or_default()
                .push((why.clone(), p.id.clone()));
        }
    }
    for list in reasons.into_values() {
        let texts: std::collections::BTreeSet<&str> = list.iter().map(|x| x.0.as_str()).collect();
        let why = if texts.len() == 1 {
            format!(" ({})", list[0].0)
        } else {
            String::new()
        };
        let ids: Vec<String> = list
            .iter()
            .map(|(w, id)| {
                if texts.len() > 1 {
                    format!("{id} ({w})")
                } else {
                    id.clone()
                }
            })
            .collect();
        blocks.push(Block::Note(format!(
            "The client may have limited {} point{}{why}: {}.",
            ids.len(),
            if ids.len() == 1 { "" } else { "s" },
            ids.join(", ")
        )));
    }
    Ok(blocks)
}

/// The latency runs whose client kept its schedule: a send-lag p99 within
/// a tenth of the send interval (the rule `connlab run` warns by). A late
/// client's latency holds its own delay, not the server's.
fn on_schedule<'a>(
    points: impl Iterator<Item = &'a PeerPoint>,
) -> impl Iterator<Item = &'a connlab_lab::LatencyRun> {
    points
        .filter_map(|p| p.latency.as_ref())
        .filter(|l| l.rate > 0.0 && l.send_lag_p99_us <= 0.1 * 1e6 / l.rate)
}

/// The p99 cell: the median over the runs that kept their schedule, with
/// how many did when not all; none when no run did, with the lag.
fn latency_text<'a>(points: impl Iterator<Item = &'a PeerPoint> + Clone) -> String {
    let all: Vec<&connlab_lab::LatencyRun> =
        points.clone().filter_map(|p| p.latency.as_ref()).collect();
    let kept: Vec<f64> = on_schedule(points).map(|l| l.p99_us).collect();
    match median_of(kept.iter().copied()) {
        Some(v) if kept.len() == all.len() => format!("{v:.0}"),
        Some(v) => format!("{v:.0} ({} of {} runs on schedule)", kept.len(), all.len()),
        None if all.is_empty() => "—".into(),
        None => {
            let lags: Vec<f64> = all.iter().map(|l| l.send_lag_p99_us).collect();
            let (lo, hi) = lags
                .iter()
                .fold((f64::MAX, f64::MIN), |(a, b), x| (a.min(*x), b.max(*x)));
            format!("— (client late: send-lag p99 {lo:.0}–{hi:.0} µs)")
        }
    }
}

fn body_sizes(curves: &[Curve]) -> Vec<u64> {
    let mut s: Vec<u64> = curves.iter().map(|c| c.body_bytes).collect();
    s.dedup();
    s
}

/// One row per curve: the fitted parameters and what they project.
fn fit_table(curves: &[Curve]) -> Block {
    let head = [
        "body",
        "contender",
        "points",
        "λ (req/s at 1 worker)",
        "σ contention",
        "κ coherency",
        "N* (peak workers)",
        "ceiling req/s",
        "fit error (RMS)",
        "points the client may limit",
    ]
    .into_iter()
    .map(String::from)
    .collect();
    let rows = curves
        .iter()
        .map(|c| {
            let (k, n) = c.limited();
            let mut row = vec![
                Cell::from(crate::peers::size_text(c.body_bytes)),
                Cell::from(c.contender.clone()),
            ];
            match &c.fit {
                Some(f) => row.extend([
                    Cell::from(n.to_string()),
                    Cell::from(whole(f.lambda)),
                    Cell::from(format!("{:.3}", f.sigma)),
                    Cell::from(if f.kappa_identified {
                        format!("{:.4}", f.kappa)
                    } else {
                        "not identified (one count above 1): taken as 0".into()
                    }),
                    Cell::from(
                        f.peak_workers()
                            .map_or("none (no peak)".into(), |n| format!("{n:.1}")),
                    ),
                    Cell::from(f.ceiling().map_or("unbounded".into(), whole)),
                    Cell::from(format!("{:.1} %", f.rms_relative_error * 100.0)),
                ]),
                None => row.extend(
                    std::iter::once(Cell::from(n.to_string()))
                        .chain(std::iter::repeat_with(|| Cell::from("—")).take(6)),
                ),
            }
            row.push(Cell::from(format!("{k} of {n}")).strong(k > 0));
            row
        })
        .collect();
    Block::Table(Table {
        head,
        rows,
        labels: 2,
        text_columns: vec![5, 6, 7],
        empty: None,
        ..Table::default()
    })
}

/// Requests per second against workers: each contender's medians with
/// their range, and its fitted curve dashed.
fn plot(curves: &[Curve], size: u64) -> Result<Block, ReportError> {
    let mut lines = Vec::new();
    let at: Vec<&Curve> = curves.iter().filter(|c| c.body_bytes == size).collect();
    let top = at
        .iter()
        .flat_map(|c| c.points.keys().copied())
        .max()
        .unwrap_or(1);
    for c in &at {
        let mut points = Vec::new();
        let mut spread = Vec::new();
        for (&w, reps) in &c.points {
            let v: Vec<f64> = reps.values().map(|p| p.requests_per_s).collect();
            let Some(m) = median_interval(&v, CONFIDENCE) else {
                continue;
            };
            let (lo, hi) = v
                .iter()
                .fold((f64::MAX, f64::MIN), |(a, b), x| (a.min(*x), b.max(*x)));
            points.push((f64::from(w), m.median));
            spread.push((f64::from(w), lo, hi));
        }
        lines.push(Line {
            name: c.contender.clone(),
            colour_key: c.contender.clone(),
            points,
            spread,
            kind: Kind::Ours,
        });
        if let Some(f) = &c.fit {
            // The law at whole worker counts, where it has a meaning.
            let fitted = (1..=top.max(2))
                .map(|n| (f64::from(n), f.throughput(f64::from(n))))
                .collect();
            lines.push(Line {
                name: format!("{} USL fit", c.contender),
                colour_key: c.contender.clone(),
                points: fitted,
                spread: Vec::new(),
                kind: Kind::Projected,
            });
        }
    }
    let title = format!(
        "Requests per second against workers, {} body",
        crate::peers::size_text(size)
    );
    let svg = plots::linear_lines(&title, "workers", "requests per second", &lines, None, true)?;
    Ok(Block::Figure {
        id: None,
        svg,
        caption: "Dots: the median over valid repetitions, bars their range; dashed: the \
                  Universal Scalability Law fitted to the medians."
            .into(),
    })
}

/// The CSV rows of the scaling section: one `scaling` row per contender
/// and worker count, one `usl_fit` row per curve.
pub(crate) fn csv_rows(dir: &PeersDir) -> Vec<CsvRow> {
    let measure = dir.info.experiment.measure;
    let mut out = Vec::new();
    for c in curves(dir) {
        for (&w, reps) in &c.points {
            let rates: Vec<f64> = reps.values().map(|p| p.requests_per_s).collect();
            let mut row = CsvRow::scaling("scaling", c.body_bytes, &c.contender, Some(w), measure)
                .with_rate(&rates);
            if let Some(iv) = c.speedup(w, false) {
                row.speedup_median = Some(round3(iv.median));
                row.speedup_lo = Some(round3(iv.lo));
                row.speedup_hi = Some(round3(iv.hi));
            }
            row.client_limited = Some(reps.values().filter(|p| p.client_limited.is_some()).count());
            row.imbalance_median = median_of(reps.values().filter_map(|p| p.imbalance)).map(round3);
            row.latency_p99_us_median =
                median_of(on_schedule(reps.values().copied()).map(|l| l.p99_us)).map(round3);
            out.push(row);
        }
        if let Some(f) = &c.fit {
            let mut row = CsvRow::scaling("usl_fit", c.body_bytes, &c.contender, None, measure);
            row.repetitions = Some(c.limited().1);
            row.client_limited = Some(c.limited().0);
            row.usl_lambda = Some(round3(f.lambda));
            row.usl_sigma = Some((f.sigma * 1e6).round() / 1e6);
            row.usl_kappa = f.kappa_identified.then_some((f.kappa * 1e6).round() / 1e6);
            row.usl_peak_workers = f.peak_workers().map(round3);
            row.usl_fit_error = Some(round3(f.rms_relative_error));
            out.push(row);
        }
    }
    out
}
