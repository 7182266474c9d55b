//! Send buffers sized to a rate share (`--send-buffer share`): the research
//! part of the send limit, so hand-written.
//!
//! A bounded send buffer bounds the bytes a connection has in flight, and
//! that (not the unsent-bytes limit) is what keeps a shared bottleneck's
//! queue short and streams fair (BENCHMARKS.md, issue 8). A fixed bound caps
//! each connection's rate at buffer / RTT. Here every active connection is
//! allowed the same rate, `headroom` times the fastest connection's measured
//! delivery rate, and its buffer is that rate times its base RTT plus the
//! unsent-bytes limit:
//!
//! - alone, a connection's allowance grows by `headroom` each period until
//!   the path, not the buffer, limits it;
//! - sharing a bottleneck, every connection gets the same allowance, so the
//!   ones bound by it run at equal rates, and the fastest one, bound by its
//!   buffer, keeps the queue near `(headroom - 1)` times the base RTT;
//! - a connection that sends little (a request-response) does not shrink the
//!   others' allowance, as an average over connections would; the I/O server
//!   reads and re-sizes only sockets that filled up since their last reading,
//!   so such a connection keeps its first buffer and costs no system calls.
//!
//! The base RTT: a connection that starts while a queue stands sees that
//! queue in every RTT sample, so its own lowest RTT overstates its path's
//! and would buy it a larger buffer and a larger share (measured: 46 Mbit/s
//! against 24 and 26 for the two older streams). [`base_rtts`] therefore
//! takes lowest RTTs within `same_path` times a lower one as that one plus
//! queueing; clients much farther away keep their own.

use std::time::Duration;

/// The parameters of rate-share buffer sizing.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ShareSizing {
    /// How often buffers are re-sized (at least; see [`ShareSizing::period_for`]).
    pub period: Duration,
    /// The allowance as a multiple of the fastest connection's rate.
    pub headroom: f64,
    /// Unsent bytes a socket may hold (its `TCP_NOTSENT_LOWAT`), added on
    /// top of the bytes in flight.
    pub unsent: usize,
    /// The smallest buffer, bytes (as the kernel counts them: `SO_SNDBUF`
    /// read back).
    pub floor: usize,
    /// The largest buffer, bytes.
    pub ceiling: usize,
    /// The least buffer a new connection gets, kept until it has been
    /// measured over [`ShareSizing::young_for`]: enough for TCP's slow start
    /// to run a few round trips unhindered, so a short transfer is not held
    /// back by the period it takes to measure it.
    pub initial: usize,
    /// How long a new connection keeps at least `initial`.
    pub young_for: Duration,
    /// Lowest RTTs within this factor of a lower one are taken as that one
    /// plus queueing ([`base_rtts`]).
    pub same_path: f64,
}

impl ShareSizing {
    /// Spacing of rounds per active connection. One reading costs 1-2 us
    /// (a `TCP_INFO`, sometimes a `setsockopt`) on the event loop: at 20 us
    /// per connection 5,000 connections (500 active) doubled the p99 of
    /// 10 KiB request-responses through the I/O server (430 against 240 us);
    /// at 100 us the sizing takes 1-2% of the loop.
    const PER_CONNECTION: Duration = Duration::from_micros(100);

    /// The defaults for an unsent-bytes limit of `unsent` bytes: re-size
    /// every 10 ms, allowance twice the fastest rate, buffers between
    /// twice the limit (at least 16 KiB) and 64 MiB, at least eight times
    /// the limit (at least 128 KiB) for a connection's first 20 ms, RTTs
    /// within 3x taken as one path.
    pub fn for_unsent_limit(unsent: u32) -> ShareSizing {
        let unsent = unsent as usize;
        ShareSizing {
            period: Duration::from_millis(10),
            headroom: 2.0,
            unsent,
            floor: unsent.saturating_mul(2).max(16 << 10),
            ceiling: 64 << 20,
            initial: unsent.saturating_mul(8).max(128 << 10),
            young_for: Duration::from_millis(20),
            same_path: 3.0,
        }
    }

    /// The period to wait after a round that saw `active` connections.
    pub fn period_for(&self, active: usize) -> Duration {
        let spread = ShareSizing::PER_CONNECTION.saturating_mul(active.min(1 << 20) as u32);
        self.period.max(spread)
    }

    /// The buffer, bytes, for a connection whose lowest RTT is `min_rtt`,
    /// when the fastest connection delivered `fastest` bytes per second.
    pub fn target(&self, fastest: f64, min_rtt: Duration) -> usize {
        let in_flight = self.headroom * fastest.max(0.0) * min_rtt.as_secs_f64();
        let want = in_flight.min(self.ceiling as f64) as usize + self.unsent;
        want.clamp(self.floor, self.ceiling.max(self.floor))
    }

    /// The buffer for a connection `age` old: [`ShareSizing::target`], and
    /// at least `initial` while it is young.
    pub fn target_at_age(&self, fastest: f64, base_rtt: Duration, age: Duration) -> usize {
        let t = self.target(fastest, base_rtt);
        if age < self.young_for {
            t.max(self.initial.min(self.ceiling))
        } else {
            t
        }
    }

    /// Whether a buffer of `current` bytes is far enough from `target` to be
    /// worth a system call (more than 1/8 off).
    pub fn worth_changing(current: usize, target: usize) -> bool {
        current.abs_diff(target) > current / 8
    }
}

/// The base RTT of each connection from the lowest RTTs `min_rtts`, in
/// order: ascending, each lowest RTT within `same_path` times the first of
/// its group is given that first one (a group's first connection is the one
/// that saw its path with the least queue); a larger one starts a group.
pub fn base_rtts(min_rtts: &[Duration], same_path: f64) -> Vec<Duration> {
    let starts = group_starts(min_rtts, same_path);
    min_rtts
        .iter()
        .map(|&rtt| base_in(&starts, rtt, same_path))
        .collect()
}

/// The group starts of [`base_rtts`]: ascending, each more than `same_path`
/// times the one before. With [`base_in`] a connection measured later gets
/// the base [`base_rtts`] would have given it among these.
pub fn group_starts(min_rtts: &[Duration], same_path: f64) -> Vec<Duration> {
    let mut sorted = min_rtts.to_vec();
    sorted.sort_unstable();
    let mut starts: Vec<Duration> = Vec::new();
    for rtt in sorted {
        match starts.last() {
            Some(g) if rtt.as_secs_f64() <= g.as_secs_f64() * same_path => {}
            _ => starts.push(rtt),
        }
    }
    starts
}

/// The base RTT of a connection whose lowest RTT is `rtt`, among the group
/// starts `starts` (ascending): the largest start not above `rtt` if `rtt`
/// is within `same_path` times it, else `rtt` itself.
pub fn base_in(starts: &[Duration], rtt: Duration, same_path: f64) -> Duration {
    let below = starts.partition_point(|&g| g <= rtt);
    match below.checked_sub(1).map(|i| starts[i]) {
        Some(g) if rtt.as_secs_f64() <= g.as_secs_f64() * same_path => g,
        _ => rtt,
    }
}

/// A delivery rate in bytes per second: `bytes` acknowledged over `elapsed`.
pub fn rate(bytes: u64, elapsed: Duration) -> f64 {
    let s = elapsed.as_secs_f64();
    if s > 0.0 {
        bytes as f64 / s
    } else {
        0.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const MS2: Duration = Duration::from_millis(2);

    #[test]
    fn alone_a_connection_doubles_until_the_path_limits_it() {
        let s = ShareSizing::for_unsent_limit(16 << 10);
        // Rate = bytes in flight / RTT on an unlimited path; 1 Gbit/s cap.
        let cap = 125e6;
        let mut buf = s.floor;
        let mut rounds = 0;
        loop {
            let in_flight = (buf - s.unsent.min(buf)) as f64;
            let delivered = (in_flight / MS2.as_secs_f64()).min(cap);
            let next = s.target(delivered, MS2);
            if !ShareSizing::worth_changing(buf, next) {
                break;
            }
            buf = next;
            rounds += 1;
            assert!(rounds < 20, "does not settle: {buf}");
        }
        // Settles at twice the bandwidth-delay product (250 kB) plus the
        // unsent limit, in a few rounds.
        let bdp = cap * MS2.as_secs_f64();
        assert!(
            (buf as f64) > 1.9 * bdp && (buf as f64) < 2.3 * bdp + 16384.0,
            "{buf}"
        );
        assert!(rounds <= 8, "{rounds}");
    }

    #[test]
    fn stays_between_floor_and_ceiling() {
        let s = ShareSizing::for_unsent_limit(16 << 10);
        assert_eq!(s.target(0.0, MS2), 32 << 10);
        assert_eq!(s.target(f64::NAN, MS2), 32 << 10);
        assert_eq!(s.target(1e12, Duration::from_secs(1)), 64 << 20);
        assert_eq!(rate(1000, Duration::ZERO), 0.0);
        assert_eq!(rate(1000, Duration::from_millis(10)), 100_000.0);
    }

    #[test]
    fn a_late_connection_gets_its_paths_base_rtt_and_far_clients_keep_theirs() {
        let ms = |x: f64| Duration::from_secs_f64(x / 1000.0);
        let got = base_rtts(
            &[ms(5.6), ms(2.26), ms(2.44), ms(100.0), ms(120.0), ms(400.0)],
            3.0,
        );
        assert_eq!(
            got,
            [
                ms(2.26),
                ms(2.26),
                ms(2.26),
                ms(100.0),
                ms(100.0),
                ms(400.0)
            ]
        );
        assert!(base_rtts(&[], 3.0).is_empty());
    }

    #[test]
    fn a_young_connection_keeps_the_initial_buffer() {
        let s = ShareSizing::for_unsent_limit(16 << 10);
        assert_eq!(s.target_at_age(0.0, MS2, Duration::ZERO), 128 << 10);
        assert_eq!(
            s.target_at_age(0.0, MS2, Duration::from_millis(20)),
            32 << 10
        );
        assert_eq!(
            s.target_at_age(1e9, MS2, Duration::ZERO),
            s.target(1e9, MS2)
        );
    }

    #[test]
    fn rounds_are_spaced_with_many_connections() {
        let s = ShareSizing::for_unsent_limit(16 << 10);
        assert_eq!(s.period_for(3), Duration::from_millis(10));
        assert_eq!(s.period_for(10_000), Duration::from_secs(1));
    }

    proptest! {
        #[test]
        fn base_in_the_group_starts_agrees_with_base_rtts(
            rtts in proptest::collection::vec(1u64..1_000_000, 0..40)
        ) {
            let rtts: Vec<Duration> = rtts.into_iter().map(Duration::from_micros).collect();
            let starts = group_starts(&rtts, 3.0);
            for (r, b) in rtts.iter().zip(base_rtts(&rtts, 3.0)) {
                prop_assert_eq!(base_in(&starts, *r, 3.0), b);
            }
        }

        #[test]
        fn base_rtts_never_exceed_the_own_and_stay_within_the_factor(
            rtts in proptest::collection::vec(1u64..1_000_000, 0..40)
        ) {
            let rtts: Vec<Duration> = rtts.into_iter().map(Duration::from_micros).collect();
            let base = base_rtts(&rtts, 3.0);
            for (r, b) in rtts.iter().zip(&base) {
                prop_assert!(b <= r);
                prop_assert!(r.as_secs_f64() <= b.as_secs_f64() * 3.0 + 1e-12);
            }
        }

        #[test]
        fn target_is_monotone_and_bounded(
            a in 0.0f64..1e10, b in 0.0f64..1e10, rtt_us in 1u64..1_000_000, lowat in 1u32..(1 << 24)
        ) {
            let s = ShareSizing::for_unsent_limit(lowat);
            let rtt = Duration::from_micros(rtt_us);
            let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
            prop_assert!(s.target(lo, rtt) <= s.target(hi, rtt));
            prop_assert!(s.target(hi, rtt) >= s.floor && s.target(hi, rtt) <= s.ceiling.max(s.floor));
        }
    }
}
