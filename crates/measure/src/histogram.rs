//! Latency histograms: nanosecond values, 1 us lowest discernible value,
//! tracked up to 60 s and summarised in microseconds. With that lowest value
//! hdrhistogram's finest bucket is 512 ns wide, and buckets stay that wide up
//! to ~1 ms; from there up they hold 3 significant digits. Quantiles report
//! the top of their bucket, so a 5 us value reads as 5.119 us.

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

/// Summary statistics in microseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// Number of values.
    pub count: u64,
    /// Arithmetic mean.
    pub mean: f64,
    /// Population standard deviation.
    pub stddev: f64,
    /// Smallest value.
    pub min: f64,
    /// Median.
    pub p50: f64,
    /// 90th percentile.
    pub p90: f64,
    /// 99th percentile.
    pub p99: f64,
    /// 99.9th percentile.
    pub p999: f64,
    /// 99.99th percentile.
    pub p9999: f64,
    /// Largest value.
    pub max: f64,
}

/// One point of a cumulative distribution.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct CdfPoint {
    /// The value, microseconds.
    pub value_us: f64,
    /// Share of values at or below it.
    pub fraction: f64,
}

/// Latency histogram: values in nanoseconds, 1 us lowest discernible, 3
/// significant digits from ~1 ms to 60 s; values above 60 s are clamped to
/// 60 s and counted in [`LatencyHistogram::clamped`]. Wraps
/// [`hdrhistogram::Histogram<u64>`]; per-thread histograms [`merge`] exactly.
///
/// [`merge`]: LatencyHistogram::merge
#[derive(Clone, Debug)]
pub struct LatencyHistogram {
    hist: Histogram<u64>,
    clamped: u64,
}

impl Default for LatencyHistogram {
    fn default() -> Self {
        Self::new()
    }
}

impl LatencyHistogram {
    /// Lowest discernible value: 1 us.
    pub const LOWEST_NS: u64 = 1_000;
    /// Highest trackable value: 60 s; larger values are clamped.
    pub const HIGHEST_NS: u64 = 60_000_000_000;

    /// An empty histogram.
    pub fn new() -> Self {
        let hist = Histogram::new_with_bounds(Self::LOWEST_NS, Self::HIGHEST_NS, 3)
            // The bounds are constants that hdrhistogram accepts (low >= 1, high >= 2 * low, sigfig 3).
            .unwrap_or_else(|_| unreachable!("constant histogram bounds are valid"));
        LatencyHistogram { hist, clamped: 0 }
    }

    /// Records one value in nanoseconds. Values below 1 us are kept in the
    /// first (0..512 ns) bucket; values above 60 s count as 60 s.
    pub fn record(&mut self, ns: u64) {
        let v = if ns > Self::HIGHEST_NS {
            self.clamped += 1;
            Self::HIGHEST_NS
        } else {
            ns
        };
        self.hist.saturating_record(v);
    }

    /// Adds every value of `other` (exact: counts add).
    pub fn merge(&mut self, other: &LatencyHistogram) {
        self.hist
            .add(&other.hist)
            // Both sides were built by `new` with the same bounds, and `add` fails only
            // when `other` holds values beyond `self`'s range.
            .unwrap_or_else(|_| unreachable!("histograms with equal bounds always add"));
        self.clamped += other.clamped;
    }

    /// Number of values.
    pub fn len(&self) -> u64 {
        self.hist.len()
    }

    /// True when nothing was recorded.
    pub fn is_empty(&self) -> bool {
        self.hist.is_empty()
    }

    /// Values above 60 s that were recorded as 60 s.
    pub fn clamped(&self) -> u64 {
        self.clamped
    }

    /// Forgets every value.
    pub fn reset(&mut self) {
        self.hist.reset();
        self.clamped = 0;
    }

    /// The underlying histogram (for interval logs).
    pub fn hdr(&self) -> &Histogram<u64> {
        &self.hist
    }

    /// Count, mean, population standard deviation, extremes and
    /// percentiles, in us; all zeros (not NaN) when empty.
    pub fn summary(&self) -> Summary {
        if self.hist.is_empty() {
            return Summary::default();
        }
        let us = |ns: f64| ns / 1e3;
        let q = |p: f64| us(self.hist.value_at_quantile(p) as f64);
        Summary {
            count: self.hist.len(),
            mean: us(self.hist.mean()),
            stddev: us(self.hist.stdev()),
            min: us(self.hist.min() as f64),
            p50: q(0.5),
            p90: q(0.9),
            p99: q(0.99),
            p999: q(0.999),
            p9999: q(0.9999),
            max: us(self.hist.max() as f64),
        }
    }

    /// The histogram in HdrHistogram's V2 compressed encoding, base64: the
    /// encoding of HdrHistogram interval logs, readable by every HdrHistogram
    /// implementation. Values are nanoseconds. (The count of clamped values is
    /// not part of it.)
    pub fn to_base64(&self) -> String {
        encode_base64(&self.hist)
    }

    /// Reads [`LatencyHistogram::to_base64`]'s encoding.
    ///
    /// # Errors
    ///
    /// When `text` is not base64 of a V2 histogram, or its range exceeds
    /// 60 s.
    pub fn from_base64(text: &str) -> Result<LatencyHistogram, DecodeError> {
        let decoded = decode_base64(text)?;
        let mut h = LatencyHistogram::new();
        h.hist
            .add(&decoded)
            .map_err(|e| DecodeError(format!("histogram values out of range: {e:?}")))?;
        Ok(h)
    }

    /// `points` evenly spaced quantiles, fractions 0 to 1 inclusive (values
    /// in us). Empty when nothing was recorded or `points < 2`.
    pub fn cdf(&self, points: usize) -> Vec<CdfPoint> {
        if self.hist.is_empty() || points < 2 {
            return Vec::new();
        }
        (0..points)
            .map(|i| {
                let fraction = i as f64 / (points - 1) as f64;
                CdfPoint {
                    value_us: self.hist.value_at_quantile(fraction) as f64 / 1e3,
                    fraction,
                }
            })
            .collect()
    }
}

/// A stored histogram could not be read.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("bad histogram encoding: {0}")]
pub struct DecodeError(pub String);

/// V2 + deflate, base64.
pub(crate) fn encode_base64(h: &Histogram<u64>) -> String {
    use base64::Engine;
    use hdrhistogram::serialization::{Serializer, V2DeflateSerializer};
    let mut bytes = Vec::new();
    // Serializing into a Vec fails only on a histogram hdrhistogram cannot
    // describe, which `new` never builds; an empty string then reads back as an error.
    let _ = V2DeflateSerializer::new().serialize(h, &mut bytes);
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// Inverse of [`encode_base64`].
pub(crate) fn decode_base64(text: &str) -> Result<Histogram<u64>, DecodeError> {
    use base64::Engine;
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(text.trim())
        .map_err(|e| DecodeError(format!("not base64: {e}")))?;
    hdrhistogram::serialization::Deserializer::new()
        .deserialize(&mut bytes.as_slice())
        .map_err(|e| DecodeError(format!("not an HdrHistogram V2 encoding: {e:?}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn filled() -> LatencyHistogram {
        let mut h = LatencyHistogram::new();
        for us in 1..=1000u64 {
            h.record(us * 1000);
        }
        h
    }

    #[test]
    fn summarises_known_values() {
        let s = filled().summary();
        assert_eq!(s.count, 1000);
        assert!((s.mean - 500.5).abs() / 500.5 < 1e-3, "{s:?}");
        assert!((s.p50 - 500.0).abs() <= 1.0, "{s:?}");
        assert!((s.p99 - 990.0).abs() <= 1.0, "{s:?}");
        // With a 1 us lowest discernible value the bottom buckets are 512 ns wide.
        assert!(
            (s.min - 1.0).abs() <= 0.512 && (s.max - 1000.0).abs() <= 1.0,
            "{s:?}"
        );
    }

    #[test]
    fn merge_equals_recording_both() {
        let mut a = filled();
        let mut b = LatencyHistogram::new();
        b.record(5_000_000);
        b.record(70_000_000_000);
        a.merge(&b);
        let mut both = filled();
        both.record(5_000_000);
        both.record(70_000_000_000);
        assert_eq!(a.summary(), both.summary());
        assert_eq!(a.hdr(), both.hdr());
        assert_eq!((a.len(), a.clamped()), (1002, 1));
    }

    #[test]
    fn base64_round_trip_keeps_every_count() {
        let h = filled();
        let back = LatencyHistogram::from_base64(&h.to_base64()).unwrap();
        assert_eq!(back.summary(), h.summary());
        assert_eq!(back.len(), h.len());
        assert!(LatencyHistogram::from_base64("not base64!").is_err());
        assert!(LatencyHistogram::from_base64("aGVsbG8=").is_err());
    }

    #[test]
    fn keeps_values_below_one_microsecond() {
        let mut h = LatencyHistogram::new();
        h.record(0);
        h.record(300);
        assert_eq!(h.len(), 2);
        assert_eq!(h.clamped(), 0);
        assert!(h.summary().max < 1.0, "{:?}", h.summary());
    }

    #[test]
    fn reset_forgets_values_and_clamps() {
        let mut h = filled();
        h.record(61_000_000_000);
        h.reset();
        assert!(h.is_empty());
        assert_eq!(h.clamped(), 0);
        assert_eq!(h.summary(), Summary::default());
    }

    #[test]
    fn empty_summary_is_zero_not_nan() {
        let s = LatencyHistogram::new().summary();
        assert_eq!(s, Summary::default());
        assert!(LatencyHistogram::new().cdf(5).is_empty());
    }

    #[test]
    fn clamps_and_counts_values_above_sixty_seconds() {
        let mut h = LatencyHistogram::new();
        h.record(61_000_000_000);
        h.record(59_000_000_000);
        assert_eq!(h.clamped(), 1);
        assert_eq!(h.len(), 2);
        // 60 s sits in a bucket ~33 ms wide at 3 significant digits.
        assert!((h.summary().max - 60e6).abs() <= 60e3, "{:?}", h.summary());
    }

    #[test]
    fn cdf_is_monotone_and_ends_at_one() {
        let c = filled().cdf(21);
        assert_eq!(c.len(), 21);
        assert!(c
            .windows(2)
            .all(|w| w[0].value_us <= w[1].value_us && w[0].fraction < w[1].fraction));
        assert_eq!(c.first().map(|p| p.fraction), Some(0.0));
        assert_eq!(c.last().map(|p| p.fraction), Some(1.0));
        assert!((c[10].value_us - 500.0).abs() <= 1.0, "{c:?}");
    }
}
