//! The sans-I/O link model of one direction: packets (their size and arrival
//! time) go in, a departure time or a drop comes out. No clock, no I/O: time
//! is passed in (nanoseconds on any monotonic scale) and the randomness comes
//! from a seeded generator, so a run is reproducible from its seed.
//!
//! The model, in the order a packet meets it:
//! 1. the queue in front of the rate limiter: if it already holds the
//!    configured limit, the packet is tail-dropped ([`DropReason::Queue`]);
//! 2. serialization at the configured rate: the packet starts when the link
//!    is free and finishes `size * 8 / rate` later (at once without a rate);
//! 3. loss on the wire ([`DropReason::Loss`]): a lost packet still used its
//!    serialization time;
//! 4. propagation: `delay` plus a jitter sample; unless reordering is allowed
//!    a packet never departs before the one ahead of it.

use crate::config::{LinkConfig, Loss, QueueLimit};
use connlab_measure::SeededRng;
use serde::Serialize;
use std::collections::VecDeque;

/// Why a packet was dropped.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DropReason {
    /// The loss model dropped it.
    Loss,
    /// The queue in front of the rate limiter was full (tail drop).
    Queue,
}

impl DropReason {
    /// The word used in logs.
    pub fn as_str(self) -> &'static str {
        match self {
            DropReason::Loss => "loss",
            DropReason::Queue => "queue",
        }
    }
}

/// What becomes of a packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Send it at this time (same scale as the arrival time).
    Depart(u64),
    /// Drop it.
    Drop(DropReason),
}

/// Counters of one direction, as the model saw it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ModelCounters {
    /// Packets offered.
    pub offered_packets: u64,
    /// Bytes offered.
    pub offered_bytes: u64,
    /// Packets given a departure time.
    pub passed_packets: u64,
    /// Bytes given a departure time.
    pub passed_bytes: u64,
    /// Packets dropped by the loss model.
    pub dropped_loss: u64,
    /// Packets dropped because the queue was full.
    pub dropped_queue: u64,
}

/// The link model of one direction.
#[derive(Clone, Debug)]
pub struct Scheduler {
    cfg: LinkConfig,
    rng: SeededRng,
    /// When the serializer finishes the last accepted packet.
    link_free_ns: u64,
    /// Packets accepted but not fully serialized: (finish time, size).
    in_queue: VecDeque<(u64, u64)>,
    queued_bytes: u64,
    last_departure_ns: u64,
    bad_state: bool,
    counters: ModelCounters,
}

impl Scheduler {
    /// A model for this configuration (validate it first: see
    /// [`LinkConfig::validate`]).
    pub fn new(cfg: LinkConfig) -> Self {
        Scheduler {
            rng: SeededRng::new(cfg.seed),
            cfg,
            link_free_ns: 0,
            in_queue: VecDeque::new(),
            queued_bytes: 0,
            last_departure_ns: 0,
            bad_state: false,
            counters: ModelCounters::default(),
        }
    }

    /// The configuration.
    pub fn config(&self) -> &LinkConfig {
        &self.cfg
    }

    /// The counters so far.
    pub fn counters(&self) -> ModelCounters {
        self.counters
    }

    /// Decides the fate of a packet of `size` bytes (on the wire) that
    /// arrived at `now_ns`. Arrival times must not go backwards.
    pub fn offer(&mut self, now_ns: u64, size: u64) -> Verdict {
        self.counters.offered_packets += 1;
        self.counters.offered_bytes += size;
        let finish = match self.cfg.rate_bit_s {
            None => now_ns,
            Some(rate) => {
                while let Some(&(f, s)) = self.in_queue.front() {
                    if f > now_ns {
                        break;
                    }
                    self.in_queue.pop_front();
                    self.queued_bytes -= s;
                }
                let full = match self.cfg.queue_limit {
                    QueueLimit::Packets(n) => self.in_queue.len() as u64 >= n,
                    QueueLimit::Bytes(n) => self.queued_bytes + size > n,
                };
                if full {
                    self.counters.dropped_queue += 1;
                    return Verdict::Drop(DropReason::Queue);
                }
                let start = self.link_free_ns.max(now_ns);
                // Rounded up, so a rate is never exceeded.
                let tx = (size * 8 * 1_000_000_000).div_ceil(rate);
                let finish = start + tx;
                self.link_free_ns = finish;
                self.in_queue.push_back((finish, size));
                self.queued_bytes += size;
                finish
            }
        };
        if self.lost() {
            self.counters.dropped_loss += 1;
            return Verdict::Drop(DropReason::Loss);
        }
        let delay = self.cfg.delay.as_nanos() as i128;
        let jitter = self.cfg.jitter.as_nanos() as i128;
        let sample = if jitter > 0 {
            // Uniform in [-jitter, +jitter].
            (self.rng.unit_f64() * (2 * jitter + 1) as f64) as i128 - jitter
        } else {
            0
        };
        let mut departure = finish + (delay + sample).max(0) as u64;
        if !self.cfg.allow_reorder {
            departure = departure.max(self.last_departure_ns);
        }
        self.last_departure_ns = self.last_departure_ns.max(departure);
        self.counters.passed_packets += 1;
        self.counters.passed_bytes += size;
        Verdict::Depart(departure)
    }

    fn lost(&mut self) -> bool {
        match self.cfg.loss {
            Loss::None => false,
            Loss::Bernoulli { p } => self.rng.chance(p),
            Loss::GilbertElliott {
                p_good_to_bad,
                p_bad_to_good,
                loss_good,
                loss_bad,
            } => {
                let flip = if self.bad_state {
                    p_bad_to_good
                } else {
                    p_good_to_bad
                };
                if self.rng.chance(flip) {
                    self.bad_state = !self.bad_state;
                }
                let p = if self.bad_state { loss_bad } else { loss_good };
                self.rng.chance(p)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::time::Duration;

    fn cfg() -> LinkConfig {
        LinkConfig::default()
    }

    #[test]
    fn plain_delay_is_added() {
        let mut s = Scheduler::new(LinkConfig {
            delay: Duration::from_millis(1),
            ..cfg()
        });
        assert_eq!(s.offer(10, 1500), Verdict::Depart(1_000_010));
        assert_eq!(s.offer(20, 1500), Verdict::Depart(1_000_020));
    }

    #[test]
    fn rate_serializes_back_to_back_packets() {
        // 1500 B at 12 Mbit/s take exactly 1 ms.
        let mut s = Scheduler::new(LinkConfig {
            rate_bit_s: Some(12_000_000),
            ..cfg()
        });
        assert_eq!(s.offer(0, 1500), Verdict::Depart(1_000_000));
        assert_eq!(s.offer(0, 1500), Verdict::Depart(2_000_000));
        // After an idle gap the link starts at once.
        assert_eq!(s.offer(10_000_000, 1500), Verdict::Depart(11_000_000));
    }

    #[test]
    fn full_queue_tail_drops() {
        let mut s = Scheduler::new(LinkConfig {
            rate_bit_s: Some(12_000_000),
            queue_limit: QueueLimit::Packets(3),
            ..cfg()
        });
        for _ in 0..3 {
            assert!(matches!(s.offer(0, 1500), Verdict::Depart(_)));
        }
        assert_eq!(s.offer(0, 1500), Verdict::Drop(DropReason::Queue));
        // Once the first has been sent there is room again.
        assert!(matches!(s.offer(1_000_000, 1500), Verdict::Depart(_)));
        assert_eq!(s.counters().dropped_queue, 1);
        let mut b = Scheduler::new(LinkConfig {
            rate_bit_s: Some(12_000_000),
            queue_limit: QueueLimit::Bytes(4000),
            ..cfg()
        });
        assert!(matches!(b.offer(0, 1500), Verdict::Depart(_)));
        assert!(matches!(b.offer(0, 1500), Verdict::Depart(_)));
        assert_eq!(b.offer(0, 1500), Verdict::Drop(DropReason::Queue));
        assert!(matches!(b.offer(0, 500), Verdict::Depart(_)));
    }

    #[test]
    fn same_seed_same_fate() {
        let c = LinkConfig {
            jitter: Duration::from_micros(300),
            delay: Duration::from_millis(1),
            loss: Loss::Bernoulli { p: 0.1 },
            seed: 42,
            ..cfg()
        };
        let run = |c: &LinkConfig| {
            let mut s = Scheduler::new(c.clone());
            (0..1000u64)
                .map(|i| s.offer(i * 1000, 100))
                .collect::<Vec<_>>()
        };
        assert_eq!(run(&c), run(&c));
        assert_ne!(
            run(&c),
            run(&LinkConfig {
                seed: 43,
                ..c.clone()
            })
        );
    }

    #[test]
    fn bernoulli_loss_is_within_statistical_bounds() {
        for (p, seed) in [(0.01, 1), (0.1, 2), (0.5, 3)] {
            let mut s = Scheduler::new(LinkConfig {
                loss: Loss::Bernoulli { p },
                seed,
                ..cfg()
            });
            let n = 200_000u64;
            for i in 0..n {
                s.offer(i, 100);
            }
            let got = s.counters().dropped_loss as f64 / n as f64;
            // Five standard deviations of a binomial proportion.
            let sd = (p * (1.0 - p) / n as f64).sqrt();
            assert!((got - p).abs() < 5.0 * sd, "p={p} got={got}");
        }
    }

    #[test]
    fn gilbert_elliott_loss_matches_its_mean_and_is_bursty() {
        let loss = Loss::GilbertElliott {
            p_good_to_bad: 0.01,
            p_bad_to_good: 0.1,
            loss_good: 0.0,
            loss_bad: 0.5,
        };
        let mut s = Scheduler::new(LinkConfig {
            loss,
            seed: 9,
            ..cfg()
        });
        let n = 500_000u64;
        let mut after_loss = (0u64, 0u64);
        let mut prev_lost = false;
        for i in 0..n {
            let lost = s.offer(i, 100) == Verdict::Drop(DropReason::Loss);
            if prev_lost {
                after_loss.0 += 1;
                after_loss.1 += lost as u64;
            }
            prev_lost = lost;
        }
        let got = s.counters().dropped_loss as f64 / n as f64;
        assert!((got - loss.mean()).abs() < 0.1 * loss.mean(), "{got}");
        // A loss makes the next one far likelier than the mean: bursts.
        let cond = after_loss.1 as f64 / after_loss.0 as f64;
        assert!(cond > 3.0 * loss.mean(), "{cond}");
    }

    proptest! {
        #[test]
        fn order_kept_and_delays_within_bounds(
            gaps in proptest::collection::vec(0u64..2_000_000, 1..300),
            sizes in proptest::collection::vec(40u64..65_000, 300),
            delay_us in 0u64..5_000,
            jitter_us in 0u64..5_000,
            rate in proptest::option::of(1_000_000u64..10_000_000_000),
            seed in any::<u64>(),
        ) {
            let c = LinkConfig {
                delay: Duration::from_micros(delay_us),
                jitter: Duration::from_micros(jitter_us),
                rate_bit_s: rate,
                queue_limit: QueueLimit::Packets(u64::MAX),
                seed,
                ..cfg()
            };
            let mut s = Scheduler::new(c);
            let (d, j) = (delay_us * 1000, jitter_us * 1000);
            let mut now = 0;
            let mut last = 0;
            let mut link_free = 0u64;
            let mut max_late = 0u64;
            for (gap, &size) in gaps.iter().zip(&sizes) {
                now += gap;
                let Verdict::Depart(t) = s.offer(now, size) else {
                    panic!("no loss configured");
                };
                // Order kept.
                prop_assert!(t >= last);
                last = t;
                let tx = rate.map_or(0, |r| (size * 8 * 1_000_000_000).div_ceil(r));
                let finish = link_free.max(now) + tx;
                if rate.is_some() { link_free = finish; }
                // Never sooner than serialization plus the shortest delay;
                // never later than the longest delay after the latest
                // finish seen so far (the no-reorder rule only waits for
                // packets ahead).
                prop_assert!(t >= finish + d.saturating_sub(j));
                max_late = max_late.max(finish + d + j);
                prop_assert!(t <= max_late);
            }
        }

        #[test]
        fn rate_is_respected(
            sizes in proptest::collection::vec(40u64..9_000, 2..500),
            rate in 1_000_000u64..10_000_000_000,
        ) {
            let mut s = Scheduler::new(LinkConfig {
                rate_bit_s: Some(rate),
                queue_limit: QueueLimit::Packets(u64::MAX),
                ..cfg()
            });
            // Everything arrives at once; the last departure is the whole
            // burst's serialization time.
            let mut last = 0;
            for &size in &sizes {
                if let Verdict::Depart(t) = s.offer(0, size) { last = t; }
            }
            let bits: u64 = sizes.iter().map(|s| s * 8).sum();
            let min_ns = bits as f64 * 1e9 / rate as f64;
            prop_assert!(last as f64 >= min_ns);
            prop_assert!((last as f64) <= min_ns + sizes.len() as f64);
        }

        #[test]
        fn reordering_only_when_asked(seed in any::<u64>()) {
            let mut s = Scheduler::new(LinkConfig {
                delay: Duration::from_millis(1),
                jitter: Duration::from_millis(1),
                allow_reorder: true,
                seed,
                ..cfg()
            });
            let deps: Vec<u64> = (0..200u64)
                .map(|i| match s.offer(i * 10_000, 100) {
                    Verdict::Depart(t) => t,
                    Verdict::Drop(_) => unreachable!(),
                })
                .collect();
            // With 1 ms of jitter and 10 us gaps some packets overtake.
            prop_assert!(deps.windows(2).any(|w| w[1] < w[0]));
        }
    }
}
