//! Open-loop send instants as offsets from the start of measurement. Fixed
//! schedules compute offset k as `k x interval` (never by accumulation, so a
//! million sends in they have not drifted); Poisson schedules draw exponential
//! gaps from a seeded generator, so a run can be repeated exactly.

use crate::rng::SeededRng;
use crate::shard::Shard;
use rand_distr::{Distribution, Exp};
use std::time::Duration;

/// How send instants are spaced.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arrival {
    /// Exactly 1/rate apart.
    Fixed,
    /// Exponential gaps with mean 1/rate.
    Poisson,
}

impl std::str::FromStr for Arrival {
    type Err = String;

    /// `fixed` or `poisson`.
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "fixed" => Ok(Arrival::Fixed),
            "poisson" => Ok(Arrival::Poisson),
            _ => Err(format!("unknown arrival {s:?}; expected fixed or poisson")),
        }
    }
}

/// Why a schedule cannot be made.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum ScheduleError {
    /// The rate is zero, negative or not finite.
    #[error("rate {0} is not a positive finite number of requests per second")]
    BadRate(f64),
}

/// A stream of send offsets.
#[derive(Clone, Debug)]
pub struct Schedule {
    arrival: Arrival,
    /// The whole run's interval, 1e9/rate ns.
    interval_ns: f64,
    /// A shard takes sends `k x stride + phase` of the whole run's schedule.
    stride: u64,
    phase: u64,
    k: u64,
    poisson: Option<(SeededRng, Exp<f64>, f64)>,
}

impl Schedule {
    /// A schedule of `rate_per_s` sends per second. Poisson gaps come from
    /// [`SeededRng::new`]`(seed)`, so the same seed gives the same offsets;
    /// `Fixed` ignores the seed.
    ///
    /// # Errors
    ///
    /// [`ScheduleError::BadRate`] unless `rate_per_s` is positive and finite.
    pub fn new(rate_per_s: f64, arrival: Arrival, seed: u64) -> Result<Schedule, ScheduleError> {
        if !(rate_per_s.is_finite() && rate_per_s > 0.0) {
            return Err(ScheduleError::BadRate(rate_per_s));
        }
        let interval_ns = 1e9 / rate_per_s;
        let poisson = match arrival {
            Arrival::Fixed => None,
            Arrival::Poisson => {
                let exp =
                    Exp::new(1.0 / interval_ns).map_err(|_| ScheduleError::BadRate(rate_per_s))?;
                Some((SeededRng::new(seed), exp, 0.0))
            }
        };
        Ok(Schedule {
            arrival,
            interval_ns,
            stride: 1,
            phase: 0,
            k: 0,
            poisson,
        })
    }

    /// Shard `shard` of the schedule of `rate_per_s` sends per second: with
    /// fixed intervals, every N-th send of the whole run's schedule starting
    /// at send `i-1` (so the shards' sends together are exactly the whole
    /// run's); with Poisson arrivals, rate/N drawn from a seed of its own.
    ///
    /// # Errors
    ///
    /// As [`Schedule::new`].
    pub fn for_shard(
        rate_per_s: f64,
        arrival: Arrival,
        seed: u64,
        shard: Shard,
    ) -> Result<Schedule, ScheduleError> {
        if shard.is_whole() {
            return Schedule::new(rate_per_s, arrival, seed);
        }
        match arrival {
            Arrival::Fixed => {
                let mut s = Schedule::new(rate_per_s, arrival, seed)?;
                s.stride = u64::from(shard.count);
                s.phase = shard.offset() as u64;
                Ok(s)
            }
            Arrival::Poisson => Schedule::new(
                rate_per_s / f64::from(shard.count),
                arrival,
                seed ^ (u64::from(shard.index) << 32 | u64::from(shard.count)),
            ),
        }
    }

    /// Offset of the next send (the k-th call gives send k, from 0).
    pub fn next_offset(&mut self) -> Duration {
        let ns = match self.poisson.as_mut() {
            None => fixed_offset_ns(self.k * self.stride + self.phase, self.interval_ns),
            Some((rng, exp, at)) => {
                if self.k > 0 {
                    *at += exp.sample(rng);
                }
                at.round()
            }
        };
        self.k += 1;
        Duration::from_nanos(ns as u64)
    }

    /// The mean interval between this schedule's sends (a shard's is N
    /// times the whole run's), rounded to whole nanoseconds.
    pub fn interval(&self) -> Duration {
        Duration::from_nanos(self.interval_ns().round() as u64)
    }

    /// The exact mean interval between this schedule's sends in ns, for
    /// [`SendDeviation::for_schedule`].
    ///
    /// [`SendDeviation::for_schedule`]: crate::SendDeviation::for_schedule
    pub(crate) fn interval_ns(&self) -> f64 {
        self.interval_ns * self.stride as f64
    }

    /// Fixed or Poisson.
    pub fn arrival(&self) -> Arrival {
        self.arrival
    }

    /// Sends of a fixed schedule that fall in `[0, d)`: `ceil(d x rate)`,
    /// settled against the whole-ns offsets [`Schedule::next_offset`] yields,
    /// so it is exactly the number of offsets below `d`. A rate that
    /// [`Schedule::new`] rejects gives 0.
    pub fn expected_sends(rate_per_s: f64, d: Duration) -> u64 {
        if !(rate_per_s.is_finite() && rate_per_s > 0.0) {
            return 0;
        }
        let interval_ns = 1e9 / rate_per_s;
        let d_ns = d.as_nanos() as f64;
        let mut k = (d_ns / interval_ns).ceil() as u64;
        // The estimate is off by at most one where an offset rounds across `d`.
        for _ in 0..2 {
            if k > 0 && fixed_offset_ns(k - 1, interval_ns) >= d_ns {
                k -= 1;
            }
        }
        for _ in 0..2 {
            if fixed_offset_ns(k, interval_ns) < d_ns {
                k += 1;
            }
        }
        k
    }
}

/// Offset of send `k` of a fixed schedule in whole ns: one multiplication and
/// one rounding, so no error accumulates over the run.
fn fixed_offset_ns(k: u64, interval_ns: f64) -> f64 {
    (k as f64 * interval_ns).round()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fixed_shards_interleave_into_the_whole_schedule() {
        let d = Duration::from_secs(1);
        let whole: Vec<_> = {
            let mut s = Schedule::new(3_000.0, Arrival::Fixed, 0).unwrap();
            std::iter::from_fn(|| Some(s.next_offset()))
                .take_while(|o| *o < d)
                .collect()
        };
        let mut merged = Vec::new();
        for i in 1..=3 {
            let mut s =
                Schedule::for_shard(3_000.0, Arrival::Fixed, 0, Shard::new(i, 3).unwrap()).unwrap();
            assert_eq!(s.interval(), Duration::from_nanos(1_000_000));
            merged.extend(std::iter::from_fn(|| Some(s.next_offset())).take_while(|o| *o < d));
        }
        merged.sort();
        assert_eq!(merged, whole);
        assert_eq!(whole.len() as u64, Schedule::expected_sends(3_000.0, d));
    }

    #[test]
    fn fixed_offsets_do_not_drift() {
        let mut s = Schedule::new(20_000.0, Arrival::Fixed, 1).unwrap();
        let mut last = Duration::ZERO;
        for k in 0..1_000_000u64 {
            last = s.next_offset();
            if k < 3 {
                assert_eq!(last, Duration::from_micros(50 * k));
            }
        }
        assert_eq!(last.as_nanos(), 49_999_950_000);
        assert_eq!(s.interval(), Duration::from_micros(50));
    }

    #[test]
    fn poisson_mean_gap_matches_the_rate() {
        let mut s = Schedule::new(1000.0, Arrival::Poisson, 42).unwrap();
        let n = 100_000;
        let mut last = Duration::ZERO;
        for _ in 0..=n {
            last = s.next_offset();
        }
        let mean_gap_ms = last.as_secs_f64() * 1e3 / n as f64;
        assert!(
            (mean_gap_ms - 1.0).abs() < 0.02,
            "mean gap {mean_gap_ms} ms"
        );
    }

    #[test]
    fn same_seed_same_sequence() {
        let mut a = Schedule::new(500.0, Arrival::Poisson, 7).unwrap();
        let mut b = Schedule::new(500.0, Arrival::Poisson, 7).unwrap();
        for _ in 0..100 {
            assert_eq!(a.next_offset(), b.next_offset());
        }
    }

    #[test]
    fn counts_expected_sends() {
        assert_eq!(
            Schedule::expected_sends(2000.0, Duration::from_secs(10)),
            20_000
        );
        assert_eq!(Schedule::expected_sends(3.0, Duration::from_millis(500)), 2);
        assert_eq!(Schedule::expected_sends(400.0, Duration::from_secs(1)), 400);
        assert_eq!(
            Schedule::expected_sends(0.1 * 3.0, Duration::from_secs(10)),
            3
        );
        assert_eq!(Schedule::expected_sends(1000.0, Duration::ZERO), 0);
        assert_eq!(Schedule::expected_sends(0.0, Duration::from_secs(1)), 0);
    }

    #[test]
    fn expected_sends_matches_the_offsets_the_schedule_yields() {
        let durations = [
            1,
            333_333_333,
            333_333_334,
            500_000_000,
            1_000_000_000,
            1_500_000_007,
        ];
        for rate in [3.0, 7.0, 1000.0, 30_000.0, 33_333.3, 1e6 / 7.0] {
            for d in durations.map(Duration::from_nanos) {
                let mut s = Schedule::new(rate, Arrival::Fixed, 0).unwrap();
                let mut below = 0u64;
                while s.next_offset() < d {
                    below += 1;
                }
                assert_eq!(
                    Schedule::expected_sends(rate, d),
                    below,
                    "rate {rate}, {d:?}"
                );
            }
        }
    }

    #[test]
    fn poisson_offsets_start_at_zero_and_never_go_back() {
        let mut s = Schedule::new(20_000.0, Arrival::Poisson, 3).unwrap();
        let mut prev = s.next_offset();
        assert_eq!(prev, Duration::ZERO);
        for _ in 0..10_000 {
            let next = s.next_offset();
            assert!(next >= prev);
            prev = next;
        }
        assert_eq!(s.arrival(), Arrival::Poisson);
        assert_eq!(s.interval(), Duration::from_micros(50));
    }

    #[test]
    fn rejects_bad_rates() {
        for r in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            let e = Schedule::new(r, Arrival::Fixed, 1).unwrap_err();
            assert!(e.to_string().starts_with(&format!("rate {r} ")), "{e}");
        }
    }
}
