//! The send-timing deviation of the locality paper (section 5.2): with
//! interval `d` and actual send instants `t_1..t_n`, the ideal instants are
//! `t*_i = mean(t) - (n-1)d/2 + (i-1)d` and `deviation_i = t_i - t*_i`.
//! Writing `u_i = t_i - (i-1)d` gives `deviation_i = u_i - mean(u)`, so one
//! pass that stores `u_i` is enough.

use crate::histogram::CdfPoint;
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
}

/// Accumulates actual send instants of a fixed-interval schedule.
#[derive(Clone, Debug)]
pub struct SendDeviation {
    interval_ns: f64,
    /// `u_i = t_i - (i-1)d`, in ns.
    shifted: Vec<f64>,
}

impl SendDeviation {
    /// For sends meant to be `interval` apart.
    pub fn new(interval: Duration) -> Self {
        SendDeviation {
            interval_ns: interval.as_nanos() as f64,
            shifted: Vec::new(),
        }
    }

    /// The next actual send instant, in ns since any fixed origin.
    pub fn record(&mut self, send_ns: u64) {
        let i = self.shifted.len() as f64;
        self.shifted.push(send_ns as f64 - i * self.interval_ns);
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

    /// Standard deviation, median and maximum of the deviation.
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
        DeviationSummary {
            count: n as u64,
            stddev: var.sqrt(),
            median,
            max: dev.iter().fold(0.0f64, |m, d| m.max(d.abs())),
        }
    }

    /// `points` evenly spaced quantiles of the deviation (signed, in us).
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

#[cfg(test)]
mod tests {
    use super::*;

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
    fn periodic_or_offset_sends_have_no_deviation() {
        let mut d = SendDeviation::new(Duration::from_micros(50));
        for i in 0..1000u64 {
            d.record(7_777 + i * 50_000);
        }
        let s = d.summary();
        assert!(s.stddev < 1e-6 && s.max < 1e-6, "{s:?}");
    }

    #[test]
    fn empty_is_zero() {
        let d = SendDeviation::new(Duration::from_millis(1));
        assert_eq!(d.summary(), DeviationSummary::default());
        assert!(d.is_empty());
    }
}
