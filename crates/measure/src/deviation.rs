//! The send-timing deviation of the locality paper (section 5.2): with
//! interval `d` and actual send instants `t_1..t_n`, the ideal instants are
//! `t*_i = mean(t) - (n-1)d/2 + (i-1)d` and `deviation_i = t_i - t*_i`.
//! Writing `u_i = t_i - (i-1)d` gives `deviation_i = u_i - mean(u)`, so one
//! pass that stores `u_i` is enough. `u_i` is kept relative to `t_1`, so an
//! origin far from the sends (a raw monotonic clock) costs no precision.

use crate::histogram::{decode_base64, encode_base64, CdfPoint, DecodeError};
use crate::schedule::Schedule;
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// Standard deviation (population), median and largest absolute deviation, in us.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct DeviationSummary {
    /// Number of sends.
    pub count: u64,
    /// Population standard deviation of the deviations.
    pub stddev: f64,
    /// Median deviation.
    pub median: f64,
    /// Largest absolute deviation.
    pub max: f64,
    /// Share of the sends whose deviation exceeds 10 us either way (the
    /// locality paper's Figure 2: about 5 % of sends under its polling
    /// engines). Results from before this field read 0.
    #[serde(default)]
    pub share_over_10us: f64,
    /// Share of the sends within 1 us either side of the median: the
    /// 2 us band that holds over 90 % of the paper's sends (its -3.5 to
    /// -1.5 us in Figure 2). Results from before this field read 0.
    #[serde(default)]
    pub share_near_median: f64,
}

/// Accumulates actual send instants of a fixed-interval schedule.
#[derive(Clone, Debug)]
pub struct SendDeviation {
    interval_ns: f64,
    /// `t_1`, the origin of `shifted`.
    first_ns: u64,
    /// `u_i - t_1 = t_i - t_1 - (i-1)d`, in ns.
    shifted: Vec<f64>,
}

impl SendDeviation {
    /// For sends meant to be `interval` apart.
    ///
    /// A `Duration` holds whole nanoseconds: for a rate that does not divide
    /// 1e9 (30,000/s is 33,333.3 ns) the lost fraction grows into a linear
    /// trend of the deviation, so prefer [`SendDeviation::for_schedule`].
    pub fn new(interval: Duration) -> Self {
        Self::with_interval_ns(interval.as_nanos() as f64)
    }

    /// For the sends of `schedule` (meaningful for [`Arrival::Fixed`]), with
    /// its exact interval 1e9/rate ns rather than one rounded to whole ns.
    ///
    /// [`Arrival::Fixed`]: crate::Arrival::Fixed
    pub fn for_schedule(schedule: &Schedule) -> Self {
        Self::with_interval_ns(schedule.interval_ns())
    }

    fn with_interval_ns(interval_ns: f64) -> Self {
        SendDeviation {
            interval_ns,
            first_ns: 0,
            shifted: Vec::new(),
        }
    }

    /// The next actual send instant, in ns since any fixed origin (the i-th
    /// call is `t_i`).
    pub fn record(&mut self, send_ns: u64) {
        if self.shifted.is_empty() {
            self.first_ns = send_ns;
        }
        let since_first = i128::from(send_ns) - i128::from(self.first_ns);
        let i = self.shifted.len() as f64;
        self.shifted.push(since_first as f64 - i * self.interval_ns);
    }

    /// Number of sends recorded.
    pub fn len(&self) -> usize {
        self.shifted.len()
    }

    /// True when nothing was recorded.
    pub fn is_empty(&self) -> bool {
        self.shifted.is_empty()
    }

    /// Deviations in us, sorted ascending.
    fn sorted_deviations_us(&self) -> Vec<f64> {
        let n = self.shifted.len() as f64;
        let mean = self.shifted.iter().sum::<f64>() / n;
        let mut dev: Vec<f64> = self.shifted.iter().map(|u| (u - mean) / 1e3).collect();
        dev.sort_by(f64::total_cmp);
        dev
    }

    /// Population standard deviation (divided by n), median and largest
    /// absolute value of the deviation; all zeros when empty.
    pub fn summary(&self) -> DeviationSummary {
        if self.shifted.is_empty() {
            return DeviationSummary::default();
        }
        let dev = self.sorted_deviations_us();
        let n = dev.len();
        let var = dev.iter().map(|d| d * d).sum::<f64>() / n as f64;
        let median = if n % 2 == 1 {
            dev[n / 2]
        } else {
            (dev[n / 2 - 1] + dev[n / 2]) / 2.0
        };
        let share =
            |f: &dyn Fn(f64) -> bool| dev.iter().filter(|d| f(**d)).count() as f64 / n as f64;
        DeviationSummary {
            count: n as u64,
            stddev: var.sqrt(),
            median,
            max: dev.iter().fold(0.0f64, |m, d| m.max(d.abs())),
            share_over_10us: share(&|d| d.abs() > 10.0),
            share_near_median: share(&|d| (d - median).abs() <= 1.0),
        }
    }

    /// `points` evenly spaced quantiles of the deviation, fractions 0 to 1
    /// inclusive (signed, in us; nearest rank). Empty when nothing was
    /// recorded or `points < 2`.
    pub fn cdf(&self, points: usize) -> Vec<CdfPoint> {
        if self.shifted.is_empty() || points < 2 {
            return Vec::new();
        }
        let dev = self.sorted_deviations_us();
        let last = dev.len() - 1;
        (0..points)
            .map(|i| {
                let fraction = i as f64 / (points - 1) as f64;
                CdfPoint {
                    value_us: dev[(fraction * last as f64).round() as usize],
                    fraction,
                }
            })
            .collect()
    }
}

/// The send deviation in a form that merges across shards: the signed
/// deviations in two HdrHistograms (magnitudes of the negative ones, and the
/// others; ns, 3 significant digits), their sum of squares and the largest
/// magnitude. Every shard's deviations have mean zero by construction (each
/// against its own schedule), so the pooled standard deviation and the
/// maximum merge exactly; the median and the CDF come from the merged
/// histograms, to their 3 significant digits.
#[derive(Clone, Debug)]
pub struct DeviationHistogram {
    negative: Histogram<u64>,
    positive: Histogram<u64>,
    sum_sq_us2: f64,
    max_abs_us: f64,
}

/// [`DeviationHistogram`] as stored in a result file.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct DeviationHistogramParts {
    /// Magnitudes of the negative deviations, ns, V2 compressed, base64.
    pub negative: String,
    /// The other deviations, ns, V2 compressed, base64.
    pub positive: String,
    /// Sum of the squared deviations, us^2.
    pub sum_sq_us2: f64,
    /// Largest magnitude, us.
    pub max_abs_us: f64,
}

impl Default for DeviationHistogram {
    fn default() -> Self {
        Self::new()
    }
}

impl DeviationHistogram {
    const HIGHEST_NS: u64 = 60_000_000_000;

    /// Empty.
    pub fn new() -> Self {
        let h = || {
            Histogram::new_with_bounds(1, Self::HIGHEST_NS, 3)
                // Constant bounds that hdrhistogram accepts.
                .unwrap_or_else(|_| unreachable!("constant histogram bounds are valid"))
        };
        DeviationHistogram {
            negative: h(),
            positive: h(),
            sum_sq_us2: 0.0,
            max_abs_us: 0.0,
        }
    }

    /// Records one deviation, us.
    pub fn record_us(&mut self, dev_us: f64) {
        let ns = (dev_us.abs() * 1e3).round().min(Self::HIGHEST_NS as f64) as u64;
        if dev_us < 0.0 {
            self.negative.saturating_record(ns);
        } else {
            self.positive.saturating_record(ns);
        }
        self.sum_sq_us2 += dev_us * dev_us;
        self.max_abs_us = self.max_abs_us.max(dev_us.abs());
    }

    /// Adds another shard's deviations.
    pub fn merge(&mut self, other: &DeviationHistogram) {
        // Equal bounds: `add` cannot fail.
        let _ = self.negative.add(&other.negative);
        let _ = self.positive.add(&other.positive);
        self.sum_sq_us2 += other.sum_sq_us2;
        self.max_abs_us = self.max_abs_us.max(other.max_abs_us);
    }

    /// Number of deviations.
    pub fn len(&self) -> u64 {
        self.negative.len() + self.positive.len()
    }

    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The deviation at quantile `q` (0..=1), us, nearest rank.
    fn quantile_us(&self, q: f64) -> f64 {
        let (n_neg, n) = (self.negative.len(), self.len());
        let rank = ((q * n as f64).ceil() as u64).clamp(1, n);
        if rank <= n_neg {
            // Ascending order runs through the negatives from the largest magnitude.
            let from_top = n_neg - rank + 1;
            -(self
                .negative
                .value_at_quantile(from_top as f64 / n_neg as f64) as f64)
                / 1e3
        } else {
            let n_pos = self.positive.len();
            self.positive
                .value_at_quantile((rank - n_neg) as f64 / n_pos as f64) as f64
                / 1e3
        }
    }

    /// Standard deviation (pooled), median, largest magnitude.
    pub fn summary(&self) -> DeviationSummary {
        let n = self.len();
        if n == 0 {
            return DeviationSummary::default();
        }
        let median = self.quantile_us(0.5);
        let over = self.count_between_us(f64::NEG_INFINITY, -10.0)
            + self.count_between_us(10.0, f64::INFINITY);
        DeviationSummary {
            count: n,
            stddev: (self.sum_sq_us2 / n as f64).sqrt(),
            median,
            max: self.max_abs_us,
            share_over_10us: over as f64 / n as f64,
            share_near_median: self.count_between_us(median - 1.0, median + 1.0) as f64 / n as f64,
        }
    }

    /// Sends whose signed deviation lies in `[lo, hi]` us, to the
    /// histograms' 3 significant digits (an open end is infinite).
    fn count_between_us(&self, lo: f64, hi: f64) -> u64 {
        let ns = |us: f64| (us * 1e3).round().clamp(0.0, Self::HIGHEST_NS as f64) as u64;
        let mut n = 0;
        // The others (zero and positive), by magnitude.
        if hi >= 0.0 {
            n += self
                .positive
                .count_between(ns(lo.max(0.0)), ns(hi.min(Self::HIGHEST_NS as f64)));
        }
        // The negative ones, by magnitude: -hi..-lo.
        if lo < 0.0 {
            n += self.negative.count_between(ns((-hi).max(0.0)), ns(-lo));
        }
        n
    }

    /// `points` evenly spaced quantiles (signed, us).
    pub fn cdf(&self, points: usize) -> Vec<CdfPoint> {
        if self.is_empty() || points < 2 {
            return Vec::new();
        }
        (0..points)
            .map(|i| {
                let fraction = i as f64 / (points - 1) as f64;
                CdfPoint {
                    value_us: self.quantile_us(fraction.max(1e-12)),
                    fraction,
                }
            })
            .collect()
    }

    /// The storable form.
    pub fn to_parts(&self) -> DeviationHistogramParts {
        DeviationHistogramParts {
            negative: encode_base64(&self.negative),
            positive: encode_base64(&self.positive),
            sum_sq_us2: self.sum_sq_us2,
            max_abs_us: self.max_abs_us,
        }
    }

    /// Reads [`DeviationHistogram::to_parts`]'s form.
    ///
    /// # Errors
    ///
    /// When a histogram does not decode or holds values beyond 60 s.
    pub fn from_parts(parts: &DeviationHistogramParts) -> Result<DeviationHistogram, DecodeError> {
        let mut d = DeviationHistogram::new();
        let range = |e| DecodeError(format!("deviation values out of range: {e:?}"));
        d.negative
            .add(&decode_base64(&parts.negative)?)
            .map_err(range)?;
        d.positive
            .add(&decode_base64(&parts.positive)?)
            .map_err(range)?;
        d.sum_sq_us2 = parts.sum_sq_us2;
        d.max_abs_us = parts.max_abs_us;
        Ok(d)
    }
}

impl SendDeviation {
    /// The deviations as a mergeable [`DeviationHistogram`].
    pub fn histogram(&self) -> DeviationHistogram {
        let mut h = DeviationHistogram::new();
        if !self.shifted.is_empty() {
            for d in self.sorted_deviations_us() {
                h.record_us(d);
            }
        }
        h
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schedule::Arrival;

    const MS: u64 = 1_000_000;

    #[test]
    fn matches_a_hand_computed_example() {
        // d = 10 ms, t = 0, 12, 19, 31 ms: mean 15.5, t* = 0.5, 10.5, 20.5, 30.5,
        // deviations -0.5, 1.5, -1.5, 0.5 ms.
        let mut d = SendDeviation::new(Duration::from_millis(10));
        for t in [0, 12, 19, 31] {
            d.record(t * MS);
        }
        let s = d.summary();
        let expect_stddev = ((0.25 + 2.25 + 2.25 + 0.25) / 4.0f64).sqrt() * 1e3;
        assert!((s.stddev - expect_stddev).abs() < 1e-6, "{s:?}");
        assert!((s.median - 0.0).abs() < 1e-6, "{s:?}");
        assert!((s.max - 1500.0).abs() < 1e-6, "{s:?}");
        assert_eq!(s.count, 4);
        let cdf = d.cdf(4);
        assert_eq!(cdf.first().map(|p| p.value_us), Some(-1500.0));
        assert_eq!(cdf.last().map(|p| p.value_us), Some(1500.0));
    }

    #[test]
    fn perfectly_periodic_sends_have_no_deviation() {
        let mut d = SendDeviation::new(Duration::from_micros(50));
        for i in 0..1000u64 {
            d.record(i * 50_000);
        }
        assert_eq!(d.summary().max, 0.0, "{:?}", d.summary());
    }

    #[test]
    fn constant_offset_gives_no_deviation() {
        let mut d = SendDeviation::new(Duration::from_micros(50));
        for i in 0..1000u64 {
            d.record(7_777 + i * 50_000);
        }
        assert_eq!(d.summary().max, 0.0, "{:?}", d.summary());
    }

    #[test]
    fn origin_far_from_the_sends_costs_no_precision() {
        // t_i alternate +-0.5 us around a 50 us grid starting at ~54 years of ns.
        let mut d = SendDeviation::new(Duration::from_micros(50));
        for i in 0..1_200_000u64 {
            d.record(1_700_000_000_000_000_000 + i * 50_000 + (i % 2) * 1_000);
        }
        let s = d.summary();
        assert!((s.stddev - 0.5).abs() < 1e-6, "{s:?}");
        assert!((s.max - 0.5).abs() < 1e-6, "{s:?}");
    }

    #[test]
    fn schedule_with_fractional_interval_gives_no_deviation() {
        // 30,000/s is 33,333.3 ns apart: a whole-ns interval would show a 300 us trend.
        let mut schedule = Schedule::new(30_000.0, Arrival::Fixed, 0).unwrap();
        let mut d = SendDeviation::for_schedule(&schedule);
        for _ in 0..1_800_000 {
            d.record(schedule.next_offset().as_nanos() as u64);
        }
        let s = d.summary();
        // Offsets are rounded to whole ns, so each is within 0.5 ns of ideal.
        assert!(s.max <= 0.5e-3 + 1e-9, "{s:?}");
    }

    #[test]
    fn empty_is_zero() {
        let d = SendDeviation::new(Duration::from_millis(1));
        assert_eq!(d.summary(), DeviationSummary::default());
        assert!(d.is_empty());
    }

    #[test]
    fn histogram_of_one_run_matches_its_exact_summary() {
        let mut d = SendDeviation::new(Duration::from_millis(1));
        for (i, jitter) in [0u64, 30, 5, 900, 12, 0, 47, 3, 250].iter().enumerate() {
            d.record(i as u64 * MS + jitter * 1_000);
        }
        let exact = d.summary();
        let h = d.histogram();
        let approx = h.summary();
        assert_eq!(approx.count, exact.count);
        assert!((approx.stddev - exact.stddev).abs() < 1e-6 * exact.stddev.max(1.0));
        assert!((approx.max - exact.max).abs() < 1e-9);
        assert!((approx.median - exact.median).abs() <= 0.01 * exact.median.abs().max(10.0));
        assert!((approx.share_over_10us - exact.share_over_10us).abs() < 1e-12);
        assert!((approx.share_near_median - exact.share_near_median).abs() < 1e-12);
        let back = DeviationHistogram::from_parts(&h.to_parts()).unwrap();
        assert_eq!(back.summary(), approx);
        let cdf = h.cdf(21);
        assert_eq!(cdf.len(), 21);
        assert!(cdf.windows(2).all(|w| w[0].value_us <= w[1].value_us));
    }

    /// Figure 2's two shares: beyond 10 us either way, and within 1 us of
    /// the median; the histogram agrees with the exact summary.
    #[test]
    fn shares_of_far_sends_and_of_sends_near_the_median() {
        let mut h = DeviationHistogram::new();
        // 16 sends: 12 within a 2 us band around -2.5, two beyond 10 us
        // either way, two in between.
        let values = [
            -3.4, -3.0, -2.9, -2.6, -2.5, -2.5, -2.4, -2.2, -2.0, -1.9, -1.7, -1.6, -12.0, 25.0,
            4.0, -6.0,
        ];
        for v in values {
            h.record_us(v);
        }
        let s = h.summary();
        assert!((s.share_over_10us - 2.0 / 16.0).abs() < 1e-12, "{s:?}");
        assert!((s.share_near_median - 12.0 / 16.0).abs() < 1e-12, "{s:?}");
    }

    #[test]
    fn merged_histograms_pool_the_variance() {
        let mut a = DeviationHistogram::new();
        let mut b = DeviationHistogram::new();
        for v in [-2.0, 2.0] {
            a.record_us(v);
        }
        for v in [-4.0, 4.0] {
            b.record_us(v);
        }
        a.merge(&b);
        let s = a.summary();
        assert_eq!(s.count, 4);
        assert!((s.stddev - (40.0f64 / 4.0).sqrt()).abs() < 1e-12);
        assert_eq!(s.max, 4.0);
        assert!(s.median < 0.0 && s.median > -2.01);
    }
}
