//! The paper's values and claims, the metrics they name, and judging a
//! sweep against them.

use super::experiment::{ExpKind, System};
use super::records::{median, CpuUse, SingleIpRecord, SingleIpSweep};
use super::values::{bytes_label, Bytes};
use crate::validity::cannot_judge_reason;
use crate::verdict::{Judgement, Verdict};
use serde::{Deserialize, Serialize};

/// `[paper]`: what the paper reports.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SingleIpPaper {
    /// Which paper (a file in `../shared/seeds/`).
    #[serde(default)]
    pub reference: String,
    /// Every number the paper gives.
    #[serde(default)]
    pub values: Vec<PaperValue>,
    /// Every claim its evaluation makes.
    #[serde(default)]
    pub claims: Vec<SingleIpClaim>,
}

/// A number the paper gives.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PaperValue {
    /// Table or figure (`Table 3`, `Figure 8`, `Section 4.1`).
    pub source: String,
    /// What it is, in our words.
    pub quantity: String,
    /// The value.
    pub value: f64,
    /// Its unit.
    pub unit: String,
    /// The system it is about.
    #[serde(default)]
    pub system: Option<System>,
    /// Our figure to set beside it, if we measure one.
    #[serde(default)]
    pub metric: Option<SingleIpMetric>,
    /// The parameter of our figure (transfer or foreground size).
    #[serde(default)]
    pub param: Option<Bytes>,
    /// The value is `system`'s figure over this system's (a ratio).
    #[serde(default)]
    pub relative_to: Option<System>,
}

/// A claim and how we check it.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SingleIpClaim {
    /// Short id.
    pub id: String,
    /// Table or figure.
    pub source: String,
    /// The claim, in our words.
    pub claim: String,
    /// The paper's figure for it, as text (`SAPS 2.5 ms, NAT 6 ms`), if any.
    #[serde(default)]
    pub paper: Option<String>,
    /// How it is judged.
    pub check: Check,
}

/// How a claim is judged from our points, across the repetitions' spread.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum Check {
    /// `lower` has the smaller value: holds when every repetition of
    /// `lower` is below every repetition of `higher`; does not hold when
    /// the opposite is true or the ranges overlap.
    Order {
        /// The figure.
        metric: SingleIpMetric,
        /// Its parameter (size), if it has one.
        #[serde(default)]
        param: Option<Bytes>,
        /// The system expected lower.
        lower: System,
        /// The system expected higher.
        higher: System,
    },
    /// Like `order` for every size up to `max_param` of a sized metric.
    OrderUpTo {
        /// The figure.
        metric: SingleIpMetric,
        /// The largest size included.
        max_param: Bytes,
        /// The system expected lower.
        lower: System,
        /// The system expected higher.
        higher: System,
    },
    /// The medians of the systems lie within `tolerance` (relative) of
    /// each other.
    Similar {
        /// The figure.
        metric: SingleIpMetric,
        /// Its parameter, if any.
        #[serde(default)]
        param: Option<Bytes>,
        /// The systems.
        systems: Vec<System>,
        /// Largest relative difference from the largest median.
        tolerance: f64,
    },
    /// Every repetition of every system is at least `value`.
    AtLeast {
        /// The figure.
        metric: SingleIpMetric,
        /// Its parameter, if any.
        #[serde(default)]
        param: Option<Bytes>,
        /// The systems.
        systems: Vec<System>,
        /// The bound.
        value: f64,
    },
    /// Every repetition of every system lies within `min`..=`max`: a number
    /// the paper states, with the tolerance the file gives it.
    Within {
        /// The figure.
        metric: SingleIpMetric,
        /// Its parameter, if any.
        #[serde(default)]
        param: Option<Bytes>,
        /// The systems.
        systems: Vec<System>,
        /// The lower bound.
        min: f64,
        /// The upper bound.
        max: f64,
    },
    /// `over`'s figure divided by `under`'s lies within `min`..=`max` for
    /// every pairing of their repetitions (the paper's "about 2.5x").
    Ratio {
        /// The figure.
        metric: SingleIpMetric,
        /// Its parameter, if any.
        #[serde(default)]
        param: Option<Bytes>,
        /// The numerator's system.
        over: System,
        /// The denominator's system.
        under: System,
        /// The lower bound of the ratio.
        min: f64,
        /// The upper bound of the ratio.
        max: f64,
    },
    /// Not measurable here.
    Unmeasurable {
        /// Why.
        reason: String,
    },
}

/// A figure read from a point.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SingleIpMetric {
    /// Smallest round trip, µs.
    RttMinUs,
    /// Largest round trip, µs.
    RttMaxUs,
    /// Mean round trip, µs.
    RttMeanUs,
    /// Median round trip, µs.
    RttMedianUs,
    /// Transfer time (connect to last byte), ms, median over a point's transfers.
    TransferMs,
    /// Transfer bandwidth, Mbit/s (size / transfer time).
    TransferMbitS,
    /// Foreground completion time (connect to last byte), ms.
    FgCompletionMs,
    /// Median queueing delay of the foreground's packets at the emulator, ms.
    FgQueueMs,
    /// Jain's index of the 100 MB streams over their whole overlap.
    Jain,
    /// Jain's index over the first `early_window` of the overlap.
    JainEarly,
    /// Sum of the streams' rates during the overlap over the link rate.
    LinkUtilisation,
    /// Front process CPU seconds per GB relayed (bandwidth points).
    FrontCpuSPerGb,
    /// App-node CPU seconds per GB relayed (bandwidth points).
    NodesCpuSPerGb,
    /// Time from the start of the large streams' overlap until they first
    /// share fairly, s (the overlap's whole bins if never).
    FairAfterS,
    /// Largest sampled backlog of the host queues in front of the
    /// bottleneck, as its time to send at the link rate, ms.
    QueuePeakMs,
    /// The same backlog, bytes.
    QueuePeakBytes,
    /// The same backlog in full-size (1,514-byte) frames.
    QueuePeakPackets,
}

impl SingleIpMetric {
    /// The experiment that measures it.
    pub fn experiment(self) -> ExpKind {
        match self {
            SingleIpMetric::RttMinUs
            | SingleIpMetric::RttMaxUs
            | SingleIpMetric::RttMeanUs
            | SingleIpMetric::RttMedianUs => ExpKind::Rtt,
            SingleIpMetric::TransferMs
            | SingleIpMetric::TransferMbitS
            | SingleIpMetric::FrontCpuSPerGb
            | SingleIpMetric::NodesCpuSPerGb => ExpKind::Bandwidth,
            _ => ExpKind::Contention,
        }
    }

    /// A label with its unit.
    pub fn label(self) -> &'static str {
        match self {
            SingleIpMetric::RttMinUs => "RTT min (µs)",
            SingleIpMetric::RttMaxUs => "RTT max (µs)",
            SingleIpMetric::RttMeanUs => "RTT mean (µs)",
            SingleIpMetric::RttMedianUs => "RTT median (µs)",
            SingleIpMetric::TransferMs => "transfer time (ms)",
            SingleIpMetric::TransferMbitS => "bandwidth (Mbit/s)",
            SingleIpMetric::FgCompletionMs => "foreground completion (ms)",
            SingleIpMetric::FgQueueMs => "foreground queueing delay (ms)",
            SingleIpMetric::Jain => "Jain's index, overlap",
            SingleIpMetric::JainEarly => "Jain's index, early window",
            SingleIpMetric::LinkUtilisation => "link utilisation",
            SingleIpMetric::FrontCpuSPerGb => "front CPU s per GB",
            SingleIpMetric::NodesCpuSPerGb => "app-node CPU s per GB",
            SingleIpMetric::FairAfterS => "time until fair sharing (s)",
            SingleIpMetric::QueuePeakMs => "host queue peak (ms at link rate)",
            SingleIpMetric::QueuePeakBytes => "host queue peak (bytes)",
            SingleIpMetric::QueuePeakPackets => "host queue peak (full-size packets)",
        }
    }

    /// The figure of one point, if it has it.
    pub fn of(self, r: &SingleIpRecord) -> Option<f64> {
        match self {
            SingleIpMetric::RttMinUs => r.rtt.as_ref().map(|x| x.min_us),
            SingleIpMetric::RttMaxUs => r.rtt.as_ref().map(|x| x.max_us),
            SingleIpMetric::RttMeanUs => r.rtt.as_ref().map(|x| x.mean_us),
            SingleIpMetric::RttMedianUs => r.rtt.as_ref().map(|x| x.p50_us),
            SingleIpMetric::TransferMs => {
                median(r.transfers.iter().filter_map(|t| t.completion_ms))
            }
            SingleIpMetric::TransferMbitS => median(r.transfers.iter().filter_map(|t| t.mbit_s)),
            SingleIpMetric::FgCompletionMs => {
                r.contention.as_ref().and_then(|c| c.fg_completion_ms)
            }
            SingleIpMetric::FgQueueMs => r.contention.as_ref().and_then(|c| c.queue_ms_fg_median),
            SingleIpMetric::Jain => r.contention.as_ref().and_then(|c| c.jain_overlap),
            SingleIpMetric::JainEarly => r.contention.as_ref().and_then(|c| c.jain_early),
            SingleIpMetric::LinkUtilisation => {
                r.contention.as_ref().and_then(|c| c.link_utilisation)
            }
            SingleIpMetric::FrontCpuSPerGb => r.cpu.as_ref().and_then(CpuUse::front_s_per_gb),
            SingleIpMetric::NodesCpuSPerGb => r.cpu.as_ref().and_then(CpuUse::nodes_s_per_gb),
            SingleIpMetric::FairAfterS => r.contention.as_ref().and_then(|c| c.fair_after_s),
            SingleIpMetric::QueuePeakMs => r.host_queue().map(|q| q.peak_ms),
            SingleIpMetric::QueuePeakBytes => r.host_queue().map(|q| q.peak_bytes as f64),
            SingleIpMetric::QueuePeakPackets => r.host_queue().map(|q| q.peak_full_packets),
        }
    }
}

// ------------------------------------------------------------------ verdicts

fn range_text(v: &[f64]) -> String {
    let lo = v.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let m = median(v.iter().copied()).unwrap_or(f64::NAN);
    if v.len() > 1 {
        format!("{} [{}–{}]", fmt_num(m), fmt_num(lo), fmt_num(hi))
    } else {
        fmt_num(m)
    }
}

/// A number with about three significant digits, no trailing `.0`.
pub fn fmt_num(v: f64) -> String {
    if !v.is_finite() {
        return "—".into();
    }
    let a = v.abs();
    let s = if a >= 100.0 {
        format!("{v:.0}")
    } else if a >= 10.0 {
        format!("{v:.1}")
    } else if a >= 1.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.3}")
    };
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

/// The valid values of one system's metric, or the judgement when there
/// are none: cannot be judged when its points exist but failed their gates
/// (why, from their validity records), cannot be measured when there are
/// no points at all.
fn valid_values(
    sweep: &SingleIpSweep,
    m: SingleIpMetric,
    s: System,
    p: Option<u64>,
) -> Result<Vec<f64>, Judgement> {
    let v = sweep.values(m, s, p);
    if !v.is_empty() {
        return Ok(v);
    }
    let invalid = sweep.invalid(m, s, p);
    if invalid.is_empty() {
        return Err(Judgement::cannot_measure(format!(
            "no points of {} for {}",
            s.name(),
            m.label()
        )));
    }
    Err(Judgement::cannot_judge(format!(
        "no valid point of {} for {}: {}",
        s.name(),
        m.label(),
        cannot_judge_reason(&invalid)
    )))
}

/// The judgement with a note of the invalid points its systems left out,
/// if any.
fn with_left_out(
    j: Judgement,
    sweep: &SingleIpSweep,
    m: SingleIpMetric,
    systems: &[System],
    p: Option<u64>,
) -> Judgement {
    let n: usize = systems.iter().map(|s| sweep.invalid(m, *s, p).len()).sum();
    left_out(j, n)
}

/// The judgement noted with `n` invalid points left out (none: as is).
fn left_out(j: Judgement, n: usize) -> Judgement {
    match n {
        0 => j,
        1 => j.noted("1 invalid point left out"),
        n => j.noted(&format!("{n} invalid points left out")),
    }
}

fn order(
    sweep: &SingleIpSweep,
    m: SingleIpMetric,
    p: Option<u64>,
    lo: System,
    hi: System,
) -> Judgement {
    let (a, b) = match (valid_values(sweep, m, lo, p), valid_values(sweep, m, hi, p)) {
        (Ok(a), Ok(b)) => (a, b),
        // Cannot be judged (a system's points all failed a gate) says more
        // than cannot be measured.
        (Err(e), Err(f)) => {
            return match (&e.verdict, &f.verdict) {
                (Verdict::CannotJudge(_), _) => e,
                (_, Verdict::CannotJudge(_)) => f,
                _ => Judgement::cannot_measure(format!(
                    "no points of {} and {} for {}",
                    lo.name(),
                    hi.name(),
                    m.label()
                )),
            };
        }
        (Err(e), _) | (_, Err(e)) => return e,
    };
    let a_max = a.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let a_min = a.iter().copied().fold(f64::INFINITY, f64::min);
    let b_max = b.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let b_min = b.iter().copied().fold(f64::INFINITY, f64::min);
    let what = format!(
        "{}: {} {} vs {} {}",
        m.label(),
        lo.name(),
        range_text(&a),
        hi.name(),
        range_text(&b)
    );
    let j = if a_max < b_min {
        Judgement::holds(format!("{what}: {} lower in every repetition", lo.name()))
    } else if b_max < a_min {
        Judgement::does_not_hold(format!("{what}: the opposite order in every repetition"))
    } else {
        Judgement::does_not_hold(format!("{what}: the repetitions overlap, no clear order"))
    };
    with_left_out(j, sweep, m, &[lo, hi], p)
}

/// Holds when every valid repetition of every system lies within
/// `bounds` (inclusive); `bound_text` says the bounds in the detail.
fn every_within(
    sweep: &SingleIpSweep,
    metric: SingleIpMetric,
    param: Option<Bytes>,
    systems: &[System],
    (min, max): (f64, f64),
    bound_text: &str,
) -> Judgement {
    let mut parts = Vec::new();
    let mut ok = true;
    let p = param.map(|b| b.0);
    for s in systems {
        let v = match valid_values(sweep, metric, *s, p) {
            Ok(v) => v,
            Err(j) => return j,
        };
        ok &= v.iter().all(|x| (min..=max).contains(x));
        parts.push(format!("{} {}", s.name(), range_text(&v)));
    }
    let what = format!("{} {bound_text}: {}", metric.label(), parts.join(", "));
    let j = if ok {
        Judgement::holds(what)
    } else {
        Judgement::does_not_hold(what)
    };
    with_left_out(j, sweep, metric, systems, p)
}

/// Judges a claim from a sweep's points: the verdict and the values
/// compared (or why there are none).
pub fn judge(sweep: &SingleIpSweep, check: &Check) -> Judgement {
    let (metric, param) = match check {
        Check::Order { metric, param, .. }
        | Check::Similar { metric, param, .. }
        | Check::AtLeast { metric, param, .. }
        | Check::Within { metric, param, .. }
        | Check::Ratio { metric, param, .. } => (*metric, *param),
        _ => return judge_at(sweep, check),
    };
    let Some(Bytes(want)) = param else {
        return judge_at(sweep, check);
    };
    let Some((at, note)) = sweep.resolve(metric.experiment(), want) else {
        return judge_at(sweep, check);
    };
    let mut c = check.clone();
    match &mut c {
        Check::Order { param, .. }
        | Check::Similar { param, .. }
        | Check::AtLeast { param, .. }
        | Check::Within { param, .. }
        | Check::Ratio { param, .. } => *param = Some(Bytes(at)),
        _ => {}
    }
    let v = judge_at(sweep, &c);
    match note {
        None => v,
        Some(n) => v.noted(&n),
    }
}

fn judge_at(sweep: &SingleIpSweep, check: &Check) -> Judgement {
    match check {
        Check::Unmeasurable { reason } => Judgement::cannot_measure(reason.clone()),
        Check::Order {
            metric,
            param,
            lower,
            higher,
        } => order(sweep, *metric, param.map(|b| b.0), *lower, *higher),
        Check::OrderUpTo {
            metric,
            max_param,
            lower,
            higher,
        } => {
            let sizes: Vec<u64> = sweep
                .points
                .iter()
                .filter(|r| {
                    r.point.experiment == metric.experiment() && r.point.param <= max_param.0
                })
                .map(|r| r.point.param)
                .collect::<std::collections::BTreeSet<u64>>()
                .into_iter()
                .collect();
            if sizes.is_empty() {
                return Judgement::cannot_measure(format!(
                    "no sizes up to {} measured",
                    bytes_label(max_param.0)
                ));
            }
            let verdicts: Vec<(u64, Judgement)> = sizes
                .iter()
                .map(|&s| (s, order(sweep, *metric, Some(s), *lower, *higher)))
                .collect();
            if let Some((_, v)) = verdicts
                .iter()
                .find(|(_, v)| matches!(v.verdict, Verdict::CannotMeasure(_)))
            {
                return v.clone();
            }
            let at = |pick: fn(&Verdict) -> bool| -> Vec<String> {
                verdicts
                    .iter()
                    .filter(|(_, v)| pick(&v.verdict))
                    .map(|(s, v)| format!("{}: {}", bytes_label(*s), v.detail))
                    .collect()
            };
            let failed = at(|v| matches!(v, Verdict::DoesNotHold { .. }));
            let unjudged = at(|v| matches!(v, Verdict::CannotJudge(_)));
            if !failed.is_empty() {
                // A size that fails on valid points decides the claim.
                Judgement::does_not_hold(failed.join("; "))
            } else if !unjudged.is_empty() {
                Judgement::cannot_judge(unjudged.join("; "))
            } else {
                let n: usize = sizes
                    .iter()
                    .map(|&z| {
                        sweep.invalid(*metric, *lower, Some(z)).len()
                            + sweep.invalid(*metric, *higher, Some(z)).len()
                    })
                    .sum();
                let j = Judgement::holds(format!(
                    "{} below {} at every size up to {}",
                    lower.name(),
                    higher.name(),
                    bytes_label(max_param.0)
                ));
                left_out(j, n)
            }
        }
        Check::Similar {
            metric,
            param,
            systems,
            tolerance,
        } => {
            let p = param.map(|b| b.0);
            let mut meds: Vec<(System, Option<f64>)> = Vec::new();
            for s in systems {
                match valid_values(sweep, *metric, *s, p) {
                    Ok(v) => meds.push((*s, median(v))),
                    Err(j) if matches!(j.verdict, Verdict::CannotJudge(_)) => return j,
                    Err(_) => {
                        return Judgement::cannot_measure(format!(
                            "not every system has {}",
                            metric.label()
                        ))
                    }
                }
            }
            let vals: Vec<f64> = meds.iter().filter_map(|(_, m)| *m).collect();
            let hi = vals.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            let lo = vals.iter().copied().fold(f64::INFINITY, f64::min);
            let spread = if hi > 0.0 { (hi - lo) / hi } else { 0.0 };
            let text = meds
                .iter()
                .map(|(s, m)| format!("{} {}", s.name(), fmt_num(m.unwrap_or(f64::NAN))))
                .collect::<Vec<_>>()
                .join(", ");
            let what = format!(
                "{}: {text}; spread {:.0}% (tolerance {:.0}%)",
                metric.label(),
                spread * 100.0,
                tolerance * 100.0
            );
            let j = if spread <= *tolerance {
                Judgement::holds(what)
            } else {
                Judgement::does_not_hold(what)
            };
            with_left_out(j, sweep, *metric, systems, p)
        }
        Check::AtLeast {
            metric,
            param,
            systems,
            value,
        } => every_within(
            sweep,
            *metric,
            *param,
            systems,
            (*value, f64::INFINITY),
            &format!("≥ {}", fmt_num(*value)),
        ),
        Check::Within {
            metric,
            param,
            systems,
            min,
            max,
        } => every_within(
            sweep,
            *metric,
            *param,
            systems,
            (*min, *max),
            &format!("within {}-{}", fmt_num(*min), fmt_num(*max)),
        ),
        Check::Ratio {
            metric,
            param,
            over,
            under,
            min,
            max,
        } => {
            let p = param.map(|b| b.0);
            let (a, b) = match (
                valid_values(sweep, *metric, *over, p),
                valid_values(sweep, *metric, *under, p),
            ) {
                (Ok(a), Ok(b)) => (a, b),
                (Err(e), _) | (_, Err(e)) => return e,
            };
            let lo = a.iter().copied().fold(f64::INFINITY, f64::min)
                / b.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            let hi = a.iter().copied().fold(f64::NEG_INFINITY, f64::max)
                / b.iter().copied().fold(f64::INFINITY, f64::min);
            let what = format!(
                "{}: {} {} / {} {} = {}-{}x, expected {}-{}x",
                metric.label(),
                over.name(),
                range_text(&a),
                under.name(),
                range_text(&b),
                fmt_num(lo),
                fmt_num(hi),
                fmt_num(*min),
                fmt_num(*max)
            );
            let j = if lo >= *min && hi <= *max {
                Judgement::holds(what)
            } else {
                Judgement::does_not_hold(what)
            };
            with_left_out(j, sweep, *metric, &[*over, *under], p)
        }
    }
}
