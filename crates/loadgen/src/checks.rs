//! Lancet-style self-checks of a load run (Kogias et al., USENIX ATC 2019):
//! what the writer and the reader sample while the run goes on (bounded,
//! allocated before the run, O(1) per send or completion), and the
//! [`RunChecks`] computed from it with [`connlab_measure::stats`], for one
//! run and for a merge of shards.
//!
//! The percentile intervals count a latency as independent only as far
//! apart as the check showed: the sample keeps one completion in `step`,
//! and the independence check keeps one sample in `thinning`, so the
//! histogram's count is divided by `step x thinning`.

use crate::result::{ArrivalCheck, IndependenceCheck, LatencyWindow, RunChecks, StationarityCheck};
use crate::workload::Rate;
use connlab_measure::stats::{
    adf_test_bic, anderson_darling_exponential, independence_thinning, percentile_interval,
    ADF_MIN_POINTS, AD_MIN_SAMPLES,
};
use connlab_measure::{Arrival, LatencyHistogram};

/// Windows the measured time is cut into.
pub(crate) const LATENCY_WINDOWS: usize = 40;
/// Most service latencies sampled.
pub(crate) const LATENCY_SAMPLES: usize = 4_000;
/// Most inter-send gaps sampled.
pub(crate) const GAP_SAMPLES: usize = 2_000;
/// Largest thinning the independence check tries.
const MAX_THINNING: usize = 64;
/// Confidence of the percentile intervals.
const CONFIDENCE: f64 = 0.95;
/// A fixed-schedule gap is off when farther than this share of the interval from it.
const FIXED_TOLERANCE: f64 = 0.1;
/// A fixed schedule passes with at most this share of gaps off.
const FIXED_MAX_OFF: f64 = 0.05;
/// A Poisson schedule passes at this Anderson-Darling p-value or above.
const POISSON_MIN_P: f64 = 0.01;

/// A bounded systematic sample: keeps the values offered at multiples of
/// `step`, the first step chosen so that the expected offers fill `cap`.
/// It holds up to an eighth more than `cap` (a Poisson count runs over its
/// mean), and when that room is full drops every other value kept and
/// doubles `step`, so it spans everything offered whatever the count. It
/// never allocates after [`Systematic::new`]; [`Systematic::into_values`]
/// thins to `cap`.
#[derive(Debug, Default)]
pub(crate) struct Systematic {
    values: Vec<f64>,
    cap: usize,
    room: usize,
    step: u64,
    offered: u64,
}

impl Systematic {
    /// A sample of at most `cap` values of about `expected` offers (0:
    /// unknown, keep every value until full).
    pub(crate) fn new(cap: usize, expected: u64) -> Self {
        let room = cap + cap / 8;
        Systematic {
            values: Vec::with_capacity(room),
            cap,
            room,
            step: expected.div_ceil(cap.max(1) as u64).max(1),
            offered: 0,
        }
    }

    /// Offers the next value.
    #[inline]
    pub(crate) fn offer(&mut self, v: f64) {
        let i = self.offered;
        self.offered += 1;
        if self.room == 0 || !i.is_multiple_of(self.step) {
            return;
        }
        if self.values.len() == self.room {
            // values[r] was offered at r x step: keep the even r.
            let kept = self.values.len().div_ceil(2);
            for r in 0..kept {
                self.values[r] = self.values[2 * r];
            }
            self.values.truncate(kept);
            self.step *= 2;
            if !i.is_multiple_of(self.step) {
                return;
            }
        }
        self.values.push(v);
    }

    /// A sample that is `values`, as gathered elsewhere.
    pub(crate) fn from_values(values: Vec<f64>) -> Self {
        Systematic {
            cap: values.len(),
            room: values.len(),
            values,
            step: 1,
            offered: 0,
        }
    }

    /// The values kept, in the order offered, thinned to `cap`.
    pub(crate) fn into_values(self) -> Vec<f64> {
        thin(self.values, self.cap)
    }
}

/// `values` when at most `cap`, else `cap` of them evenly spread: those at
/// `floor(i x len / cap)` for `i` in `0..cap`.
pub(crate) fn thin(values: Vec<f64>, cap: usize) -> Vec<f64> {
    let len = values.len();
    if len <= cap {
        return values;
    }
    (0..cap).map(|i| values[i * len / cap]).collect()
}

/// Count and service-latency sum of the requests completed, per window of
/// the measured time by scheduled instant.
#[derive(Clone, Debug)]
pub(crate) struct Windows {
    start_ns: u64,
    len_ns: u64,
    windows: [LatencyWindow; LATENCY_WINDOWS],
}

impl Default for Windows {
    fn default() -> Self {
        Windows::new(0, 0)
    }
}

impl Windows {
    /// Windows over `start_ns..end_ns` (empty span: nothing is recorded).
    pub(crate) fn new(start_ns: u64, end_ns: u64) -> Self {
        Windows {
            start_ns,
            len_ns: end_ns.saturating_sub(start_ns),
            windows: [LatencyWindow::default(); LATENCY_WINDOWS],
        }
    }

    /// A request scheduled at `scheduled_ns` completed after `service_ns`.
    #[inline]
    pub(crate) fn record(&mut self, scheduled_ns: u64, service_ns: u64) {
        if self.len_ns == 0 || scheduled_ns < self.start_ns {
            return;
        }
        let i = u128::from(scheduled_ns - self.start_ns) * LATENCY_WINDOWS as u128
            / u128::from(self.len_ns);
        let w = &mut self.windows[(i as usize).min(LATENCY_WINDOWS - 1)];
        w.count += 1;
        w.sum_us += service_ns as f64 / 1e3;
    }

    /// Adds `other`'s windows (same span) to these.
    pub(crate) fn add(&mut self, other: &Windows) {
        for (a, b) in self.windows.iter_mut().zip(&other.windows) {
            a.count = a.count.saturating_add(b.count);
            a.sum_us += b.sum_us;
        }
    }

    /// The windows, first to last.
    pub(crate) fn to_vec(&self) -> Vec<LatencyWindow> {
        self.windows.to_vec()
    }
}

/// The send schedule a run claimed, for its arrival check.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Claimed {
    /// Closed loop: no schedule.
    Closed,
    /// Sends `interval_us` apart.
    Fixed { interval_us: f64 },
    /// Exponential gaps of mean `1 / rate_per_us`.
    Poisson { rate_per_us: f64 },
}

impl Claimed {
    /// The schedule of one of `shards` writers of a run at `rate`.
    pub(crate) fn of(rate: Rate, arrival: Arrival, shards: u32) -> Claimed {
        match rate {
            Rate::Max { .. } => Claimed::Closed,
            Rate::PerSecond(r) => {
                let per_us = r / f64::from(shards.max(1)) / 1e6;
                match arrival {
                    Arrival::Fixed => Claimed::Fixed {
                        interval_us: 1.0 / per_us,
                    },
                    Arrival::Poisson => Claimed::Poisson {
                        rate_per_us: per_us,
                    },
                }
            }
        }
    }

    /// `closed`, `fixed` or `poisson`.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Claimed::Closed => "closed",
            Claimed::Fixed { .. } => "fixed",
            Claimed::Poisson { .. } => "poisson",
        }
    }
}

/// Were the sampled inter-send `gaps_us` spaced as `claimed`?
pub(crate) fn arrival_check(claimed: Claimed, gaps_us: &[f64]) -> ArrivalCheck {
    let n = gaps_us.len();
    let untested = |distribution: &str, method: String| ArrivalCheck {
        distribution: distribution.into(),
        samples: n as u64,
        statistic: 0.0,
        p_value: None,
        passed: None,
        method,
    };
    match claimed {
        Claimed::Closed => untested(
            "closed",
            "closed loop: each request follows a response, there is no send schedule to check"
                .into(),
        ),
        Claimed::Fixed { .. } | Claimed::Poisson { .. } if n == 0 => untested(
            claimed.name(),
            "not tested: no inter-send gap was sampled (connection-per-request workers pace \
             their own shares; or nothing was sent)"
                .into(),
        ),
        Claimed::Fixed { interval_us } => {
            let off = gaps_us
                .iter()
                .filter(|g| (*g - interval_us).abs() > FIXED_TOLERANCE * interval_us)
                .count();
            let share = off as f64 / n as f64;
            ArrivalCheck {
                distribution: "fixed".into(),
                samples: n as u64,
                statistic: share,
                p_value: None,
                passed: Some(share <= FIXED_MAX_OFF),
                method: format!(
                    "fixed: share of {n} sampled inter-send gaps farther than 10 % of the \
                     {interval_us:.3} us interval from it; passes at 5 % or less"
                ),
            }
        }
        Claimed::Poisson { rate_per_us } => {
            match anderson_darling_exponential(gaps_us, rate_per_us) {
                None => untested(
                    "poisson",
                    format!(
                        "not tested: {n} inter-send gaps sampled, the Anderson-Darling test needs \
                     {AD_MIN_SAMPLES}"
                    ),
                ),
                Some(t) => ArrivalCheck {
                    distribution: "poisson".into(),
                    samples: t.n,
                    statistic: t.statistic,
                    p_value: Some(t.p_value),
                    passed: Some(t.p_value >= POISSON_MIN_P),
                    method: format!(
                        "poisson: Anderson-Darling A^2 of {} sampled inter-send gaps against the \
                     exponential of the configured rate ({:.1}/s for this writer), rate known \
                     (case 0), p-value after Marsaglia & Marsaglia (2004); passes at p >= 0.01",
                        t.n,
                        rate_per_us * 1e6
                    ),
                },
            }
        }
    }
}

/// The checks computed from a run's material: `arrivals` as given, the
/// rest from the windows, the latency sample and the service histogram.
pub(crate) fn run_checks(
    arrivals: ArrivalCheck,
    latency_windows: Vec<LatencyWindow>,
    arrival_gap_samples_us: Vec<f64>,
    latency_samples_us: Vec<f64>,
    service: &LatencyHistogram,
) -> RunChecks {
    let stationarity = stationarity(&latency_samples_us, &latency_windows);
    let thinned = independence_thinning(&latency_samples_us, MAX_THINNING);
    let independence = IndependenceCheck {
        samples: latency_samples_us.len() as u64,
        lag1_autocorrelation: thinned.lag1,
        thinning: thinned.stride,
        independent: thinned.independent,
    };
    // Completions per sample (rounded up), times samples per independent sample.
    let step = if latency_samples_us.is_empty() {
        1
    } else {
        service
            .len()
            .div_ceil(latency_samples_us.len() as u64)
            .max(1)
    };
    let thinning = step.saturating_mul(thinned.stride);
    RunChecks {
        arrivals,
        stationarity,
        independence,
        service_latency_p50: percentile_interval(service, 0.5, CONFIDENCE, thinning),
        service_latency_p99: percentile_interval(service, 0.99, CONFIDENCE, thinning),
        latency_windows,
        arrival_gap_samples_us,
        latency_samples_us,
    }
}

/// ADF on the latency sample in completion order, as Lancet tests its
/// latency samples. With forty window means instead, the test's power was
/// too low to tell a mean-reverting series from a random walk: measured on
/// the 2-CPU VM, a third to a half of the locality points of the
/// reference Table 3 run failed it, tau between -2.9 and -1.1 against a 5 %
/// critical value of -2.94, retries and all. Thousands of samples reject a
/// unit root whenever latency reverts to a level, and keep it where latency
/// wanders (a queue that grows past saturation). `windows` still says how
/// many windows had completions.
fn stationarity(samples: &[f64], windows: &[LatencyWindow]) -> StationarityCheck {
    let n = samples.len();
    let total = windows.iter().filter(|w| w.count > 0).count();
    let untested = |method: String| StationarityCheck {
        windows: total as u64,
        samples: n as u64,
        tau: None,
        critical_5pc: None,
        stationary: None,
        method,
    };
    if n < ADF_MIN_POINTS {
        return untested(format!(
            "not tested: {n} latency samples, the augmented Dickey-Fuller test needs {ADF_MIN_POINTS}"
        ));
    }
    match adf_test_bic(samples, None) {
        Some(t) => StationarityCheck {
            windows: total as u64,
            samples: n as u64,
            tau: Some(t.tau),
            critical_5pc: Some(t.critical_5pc),
            stationary: Some(t.stationary),
            method: format!(
                "augmented Dickey-Fuller (constant, no trend, {} lags chosen by BIC up to \
                 Schwert's order) on {n} service-latency samples in completion order; \
                 stationary when tau is below MacKinnon's (2010) 5 % critical value",
                t.lags
            ),
        },
        None if samples.iter().all(|m| *m == samples[0]) => StationarityCheck {
            stationary: Some(true),
            ..untested(format!(
                "all {n} latency samples are the same: trivially stationary, no statistic"
            ))
        },
        None => untested(format!(
            "not tested: the {n} latency samples are degenerate for the augmented \
             Dickey-Fuller regression (an exact line, or collinear lags)"
        )),
    }
}

/// The checks of a merged run from its shards' `(label, checks)`: windows
/// add index by index (shards share one start instant), samples
/// concatenate in shard order and are thinned to their caps again, the
/// arrivals are the worst shard's (arrivals are each writer's own), and the
/// rest is recomputed with the merged `service` histogram.
///
/// # Errors
///
/// When the shards' window counts differ (the message names the shard).
pub(crate) fn merge_checks(
    parts: &[(String, &RunChecks)],
    service: &LatencyHistogram,
) -> Result<Option<RunChecks>, String> {
    let Some((_, first)) = parts.first() else {
        return Ok(None);
    };
    let mut windows = first.latency_windows.clone();
    let mut gaps = Vec::new();
    let mut latency = Vec::new();
    for (label, c) in parts {
        if c.latency_windows.len() != windows.len() {
            return Err(format!(
                "{label}: run_checks.latency_windows has {} windows, the first shard's {}",
                c.latency_windows.len(),
                windows.len()
            ));
        }
        gaps.extend_from_slice(&c.arrival_gap_samples_us);
        latency.extend_from_slice(&c.latency_samples_us);
    }
    for w in &mut windows {
        *w = LatencyWindow::default();
    }
    for (_, c) in parts {
        for (a, b) in windows.iter_mut().zip(&c.latency_windows) {
            // Saturating: a result file may say anything, and a sum that
            // overflowed would be written as null, which reads back as no number.
            a.count = a.count.saturating_add(b.count);
            a.sum_us = (a.sum_us + b.sum_us).clamp(-f64::MAX, f64::MAX);
        }
    }
    let (worst_label, worst) = parts
        .iter()
        .map(|(label, c)| (label, &c.arrivals))
        .fold(
            None::<(&String, &ArrivalCheck)>,
            |acc, (label, a)| match acc {
                Some((_, b)) if badness(a) <= badness(b) => acc,
                _ => Some((label, a)),
            },
        )
        .unwrap_or((&parts[0].0, &first.arrivals));
    let mut arrivals = worst.clone();
    arrivals.method = format!(
        "worst of {} shards ({worst_label}): {}",
        parts.len(),
        worst.method
    );
    Ok(Some(run_checks(
        arrivals,
        windows,
        thin(gaps, GAP_SAMPLES),
        thin(latency, LATENCY_SAMPLES),
        service,
    )))
}

/// How badly an arrival check went: 1 - p for a p-value, else the share
/// of gaps off; untested is best.
fn badness(a: &ArrivalCheck) -> f64 {
    match (a.p_value, a.passed) {
        (Some(p), _) => 1.0 - p,
        (None, Some(_)) => a.statistic,
        (None, None) => f64::NEG_INFINITY,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use connlab_measure::SeededRng;

    /// `n` exponential gaps of mean `mean_us` (inverse transform of a
    /// seeded uniform).
    fn exponential_gaps(n: usize, mean_us: f64, seed: u64) -> Vec<f64> {
        let mut rng = SeededRng::new(seed);
        (0..n)
            .map(|_| {
                let u = (rng.below(1 << 53) as f64 + 0.5) / (1u64 << 53) as f64;
                -mean_us * u.ln()
            })
            .collect()
    }

    #[test]
    fn a_fixed_schedule_passes_the_fixed_check() {
        let claimed = Claimed::of(Rate::PerSecond(20_000.0), Arrival::Fixed, 2);
        assert_eq!(claimed, Claimed::Fixed { interval_us: 100.0 });
        // Gaps within a few us of 100, one late send in 50.
        let gaps: Vec<f64> = (0..2000)
            .map(|i| {
                if i % 50 == 0 {
                    180.0
                } else {
                    100.0 + (i % 7) as f64 - 3.0
                }
            })
            .collect();
        let c = arrival_check(claimed, &gaps);
        assert_eq!(c.distribution, "fixed");
        assert_eq!((c.samples, c.statistic), (2000, 0.02));
        assert_eq!((c.p_value, c.passed), (None, Some(true)));
        // One late send in ten fails it.
        let late: Vec<f64> = (0..2000)
            .map(|i| if i % 10 == 0 { 150.0 } else { 100.0 })
            .collect();
        assert_eq!(arrival_check(claimed, &late).passed, Some(false));
    }

    #[test]
    fn exponential_gaps_pass_at_their_rate_and_fail_at_twice_it() {
        // 1,000 req/s: mean gap 1,000 us.
        let gaps = exponential_gaps(2000, 1000.0, 11);
        let right = arrival_check(
            Claimed::of(Rate::PerSecond(1000.0), Arrival::Poisson, 1),
            &gaps,
        );
        assert_eq!(right.distribution, "poisson");
        assert_eq!(right.passed, Some(true), "{right:?}");
        assert!(right.p_value.unwrap() >= 0.01);
        let wrong = arrival_check(
            Claimed::of(Rate::PerSecond(2000.0), Arrival::Poisson, 1),
            &gaps,
        );
        assert_eq!(wrong.passed, Some(false), "{wrong:?}");
        assert!(wrong.statistic > right.statistic);
        // A shard's rate is its share of the run's.
        let shard = arrival_check(
            Claimed::of(Rate::PerSecond(2000.0), Arrival::Poisson, 2),
            &gaps,
        );
        assert_eq!(shard.statistic, right.statistic);
        // Too few gaps, and closed loop: not tested.
        let few = arrival_check(Claimed::Poisson { rate_per_us: 1e-3 }, &gaps[..5]);
        assert_eq!((few.passed, few.p_value), (None, None));
        let closed = arrival_check(Claimed::of(Rate::Max { depth: 1 }, Arrival::Fixed, 1), &[]);
        assert_eq!(
            (closed.distribution.as_str(), closed.passed),
            ("closed", None)
        );
    }

    fn windows_of(means: &[f64]) -> Vec<LatencyWindow> {
        means
            .iter()
            .map(|m| LatencyWindow {
                count: 10,
                sum_us: 10.0 * m,
            })
            .collect()
    }

    #[test]
    fn a_trending_series_is_not_stationary_and_white_noise_is() {
        let noise = exponential_gaps(40, 5.0, 5);
        let trend: Vec<f64> = noise
            .iter()
            .enumerate()
            .map(|(i, e)| 100.0 + 3.0 * i as f64 + e)
            .collect();
        let s = stationarity(&trend, &windows_of(&trend));
        assert_eq!(s.stationary, Some(false), "{s:?}");
        assert_eq!((s.windows, s.samples), (40, 40));
        let flat: Vec<f64> = noise.iter().map(|e| 100.0 + e).collect();
        let s = stationarity(&flat, &windows_of(&flat));
        assert_eq!(s.stationary, Some(true), "{s:?}");
        assert!(s.tau.unwrap() < s.critical_5pc.unwrap());
        // A random walk of many samples keeps its unit root; noise around a
        // level of as many is stationary.
        let steps = exponential_gaps(2000, 1.0, 9);
        let mut level = 100.0;
        let walk: Vec<f64> = steps
            .iter()
            .enumerate()
            .map(|(i, e)| {
                level += if i % 2 == 0 { *e } else { -*e } * 3.0;
                level
            })
            .collect();
        let s = stationarity(&walk, &[]);
        assert_eq!(s.stationary, Some(false), "{s:?}");
        let around: Vec<f64> = steps.iter().map(|e| 100.0 + e).collect();
        assert_eq!(stationarity(&around, &[]).stationary, Some(true));
        // Too few samples is untested.
        let s = stationarity(&flat[..11], &windows_of(&flat[..11]));
        assert_eq!((s.samples, s.stationary, s.tau), (11, None, None));
        // A constant series is trivially stationary.
        let s = stationarity(&[7.0; 40], &windows_of(&[7.0; 40]));
        assert_eq!((s.stationary, s.tau), (Some(true), None));
    }

    #[test]
    fn the_systematic_sample_spans_what_was_offered() {
        // Expected 10,000 into 4,000: every 3rd.
        let mut s = Systematic::new(4000, 10_000);
        for i in 0..10_000 {
            s.offer(f64::from(i));
        }
        let v = s.into_values();
        assert_eq!(v.len(), 3334);
        assert_eq!(&v[..3], [0.0, 3.0, 6.0]);
        // Unknown count: fills, then halves and doubles its step.
        let mut s = Systematic::new(4, 0);
        for i in 0..10 {
            s.offer(f64::from(i));
        }
        assert_eq!(s.into_values(), [0.0, 4.0, 8.0]);
        let mut s = Systematic::new(1000, 0);
        for i in 0..100_000 {
            s.offer(f64::from(i));
        }
        let v = s.into_values();
        assert!(v.len() <= 1000 && v.len() > 500, "{}", v.len());
        assert!(v[v.len() - 1] > 99_000.0, "spans the whole");
        // A count an eighth above the expected one still fills it.
        let mut s = Systematic::new(2000, 8000);
        for i in 0..8_900 {
            s.offer(f64::from(i));
        }
        let v = s.into_values();
        assert_eq!(v.len(), 2000);
        assert!(v[1999] > 8_800.0);
        // The default keeps nothing.
        let mut s = Systematic::default();
        s.offer(1.0);
        assert!(s.into_values().is_empty());
        assert_eq!(
            thin((0..10).map(f64::from).collect(), 4),
            [0.0, 2.0, 5.0, 7.0]
        );
    }

    #[test]
    fn windows_cut_by_scheduled_instant() {
        let mut w = Windows::new(1_000, 41_000);
        w.record(1_000, 2_000);
        w.record(1_999, 4_000);
        w.record(40_999, 1_000);
        w.record(500, 1_000);
        let v = w.to_vec();
        assert_eq!(v.len(), LATENCY_WINDOWS);
        assert_eq!((v[0].count, v[0].sum_us), (2, 6.0));
        assert_eq!((v[39].count, v[39].sum_us), (1, 1.0));
        assert_eq!(v.iter().map(|w| w.count).sum::<u64>(), 3);
    }

    #[test]
    fn merging_adds_windows_and_keeps_the_worst_arrivals() {
        let mut hist = LatencyHistogram::new();
        let samples = exponential_gaps(3000, 100.0, 9);
        for s in &samples {
            hist.record((s * 1e3) as u64);
        }
        let gaps = exponential_gaps(2000, 1000.0, 13);
        let one = |claimed: Claimed, windows: &[f64]| {
            run_checks(
                arrival_check(claimed, &gaps),
                windows_of(windows),
                gaps.clone(),
                samples.clone(),
                &hist,
            )
        };
        let a = one(Claimed::Poisson { rate_per_us: 1e-3 }, &[10.0; 40]);
        let b = one(Claimed::Poisson { rate_per_us: 2e-3 }, &[30.0; 40]);
        assert_eq!(a.arrivals.passed, Some(true));
        assert_eq!(b.arrivals.passed, Some(false));
        let mut both = hist.clone();
        both.merge(&hist);
        let m = merge_checks(&[("shard 1/2".into(), &a), ("shard 2/2".into(), &b)], &both)
            .unwrap()
            .unwrap();
        assert_eq!(m.latency_windows.len(), 40);
        assert!(m
            .latency_windows
            .iter()
            .all(|w| w.count == 20 && w.sum_us == 400.0));
        assert_eq!(m.stationarity.stationary, Some(true));
        assert_eq!(m.arrivals.p_value, b.arrivals.p_value);
        assert!(m
            .arrivals
            .method
            .starts_with("worst of 2 shards (shard 2/2): "));
        // 6,000 samples thinned to 4,000; 2 x 2,000 gaps to 2,000.
        assert_eq!(m.latency_samples_us.len(), 4000);
        assert_eq!(m.arrival_gap_samples_us.len(), 2000);
        let p50 = m.service_latency_p50.unwrap();
        assert_eq!(p50.n_effective, 6000 / (2 * m.independence.thinning));
        // Sums that would overflow saturate, so the result still encodes.
        let mut huge = a.clone();
        huge.latency_windows[0] = LatencyWindow {
            count: u64::MAX,
            sum_us: f64::MAX,
        };
        let m = merge_checks(&[("a".into(), &huge), ("b".into(), &huge)], &both)
            .unwrap()
            .unwrap();
        assert_eq!(m.latency_windows[0].count, u64::MAX);
        assert_eq!(m.latency_windows[0].sum_us, f64::MAX);
        let text = serde_json::to_string(&m).unwrap();
        let back: RunChecks = serde_json::from_str(&text).expect("reads back");
        assert_eq!(back.latency_windows[0].count, u64::MAX);
        // Windows that do not line up are refused, naming the shard.
        let mut short = b.clone();
        short.latency_windows.pop();
        let e = merge_checks(&[("a".into(), &a), ("b".into(), &short)], &both).unwrap_err();
        assert!(e.starts_with("b: "), "{e}");
    }

    #[test]
    fn checks_of_a_run_serialise_with_their_field_names() {
        let mut hist = LatencyHistogram::new();
        for i in 1..=1000u64 {
            hist.record(i * 1000);
        }
        let c = run_checks(
            arrival_check(Claimed::Closed, &[]),
            windows_of(&[1.0; 40]),
            Vec::new(),
            (1..=1000).map(|i| f64::from(i % 17)).collect(),
            &hist,
        );
        let v = serde_json::to_value(&c).unwrap();
        let keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
        for k in [
            "arrivals",
            "stationarity",
            "independence",
            "service_latency_p50",
            "service_latency_p99",
            "latency_windows",
            "arrival_gap_samples_us",
            "latency_samples_us",
        ] {
            assert!(keys.contains(&k), "{k} in {keys:?}");
        }
        assert_eq!(v["arrivals"]["distribution"], "closed");
        assert!(v["arrivals"]["p_value"].is_null());
        assert_eq!(v["latency_windows"][0]["count"], 10);
        assert!(v["service_latency_p50"]["n_effective"].is_u64());
        let back: RunChecks = serde_json::from_value(v).unwrap();
        assert_eq!(back, c);
    }
}
