//! `--profile-poll`: time per polling call (`select`, `poll`, `epoll_wait`, ...)
//! (wall and thread CPU time) and per server cycle (the call plus the I/O it
//! reported), for the
//! single-threaded event loops. Off by default: the loops then read no clock.
//! Calls of well under a microsecond are expected (a readiness table answers
//! from memory), so the histogram resolves single nanoseconds and the mean is
//! kept exactly.

use hdrhistogram::Histogram;
use serde::Serialize;
use std::sync::{Mutex, MutexGuard};
use std::time::Instant;

/// Count, mean and percentiles of one timing, in microseconds.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct TimingSummary {
    /// Calls timed.
    pub count: u64,
    /// Exact mean.
    pub mean: f64,
    /// Median.
    pub p50: f64,
    /// 99th percentile.
    pub p99: f64,
}

/// One timing: a histogram from 1 ns and the exact sum.
struct Timing {
    hist: Histogram<u64>,
    sum_ns: u128,
}

impl Timing {
    fn new() -> Timing {
        Timing {
            // 1 ns .. 60 s at 3 significant figures: constant, valid bounds.
            hist: Histogram::new_with_bounds(1, 60_000_000_000, 3)
                .unwrap_or_else(|_| unreachable!("constant histogram bounds are valid")),
            sum_ns: 0,
        }
    }

    fn record(&mut self, ns: u64) {
        self.hist.saturating_record(ns.max(1));
        self.sum_ns += u128::from(ns);
    }

    fn summary(&self) -> TimingSummary {
        let count = self.hist.len();
        let us = |ns: u64| ns as f64 / 1e3;
        TimingSummary {
            count,
            mean: if count == 0 {
                0.0
            } else {
                self.sum_ns as f64 / count as f64 / 1e3
            },
            p50: us(self.hist.value_at_quantile(0.5)),
            p99: us(self.hist.value_at_quantile(0.99)),
        }
    }
}

/// The timings of one server run.
pub(crate) struct PollProfile {
    call: Timing,
    call_cpu: Timing,
    cycle: Timing,
}

/// The per-call timings of a run.
pub(crate) struct ProfileSummaries {
    /// Wall time per polling call (blocking included).
    pub(crate) call: TimingSummary,
    /// CPU time per polling call (the thread's, user + system): its cost
    /// without the time it slept waiting for events.
    pub(crate) call_cpu: TimingSummary,
    /// Wall time per cycle.
    pub(crate) cycle: TimingSummary,
}

/// CPU time of the calling thread, nanoseconds.
fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid timespec to write into; the clock id is a constant.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

impl PollProfile {
    pub(crate) fn new() -> PollProfile {
        PollProfile {
            call: Timing::new(),
            call_cpu: Timing::new(),
            cycle: Timing::new(),
        }
    }

    /// The summaries, or `None` when nothing was timed (an engine without a
    /// polling call).
    pub(crate) fn summaries(&self) -> Option<ProfileSummaries> {
        (!self.call.hist.is_empty()).then(|| ProfileSummaries {
            call: self.call.summary(),
            call_cpu: self.call_cpu.summary(),
            cycle: self.cycle.summary(),
        })
    }
}

/// The clock of one event loop: no-ops when profiling is off.
pub(crate) struct LoopTimer<'a> {
    profile: Option<MutexGuard<'a, PollProfile>>,
}

/// The instants of a cycle in progress.
#[derive(Clone, Copy)]
pub(crate) struct Mark {
    begin: Instant,
    cpu_begin: u64,
    called: Option<(Instant, u64)>,
}

impl<'a> LoopTimer<'a> {
    /// Times into `profile` if there is one (held for the loop's lifetime:
    /// one thread runs the loop).
    pub(crate) fn new(profile: Option<&'a Mutex<PollProfile>>) -> LoopTimer<'a> {
        LoopTimer {
            profile: profile.map(|m| m.lock().unwrap_or_else(|p| p.into_inner())),
        }
    }

    /// Before the polling call.
    pub(crate) fn begin(&self) -> Option<Mark> {
        self.profile.as_ref().map(|_| Mark {
            cpu_begin: thread_cpu_ns(),
            begin: Instant::now(),
            called: None,
        })
    }

    /// Right after the polling call returned.
    pub(crate) fn called(&self, mark: &mut Option<Mark>) {
        if let Some(m) = mark {
            m.called = Some((Instant::now(), thread_cpu_ns()));
        }
    }

    /// After the I/O the call reported: records the call and the cycle.
    pub(crate) fn end(&mut self, mark: Option<Mark>) {
        if let (Some(p), Some(m)) = (self.profile.as_mut(), mark) {
            let now = Instant::now();
            let (called, cpu_called) = m.called.unwrap_or((now, m.cpu_begin));
            p.call.record((called - m.begin).as_nanos() as u64);
            p.call_cpu.record(cpu_called.saturating_sub(m.cpu_begin));
            p.cycle.record((now - m.begin).as_nanos() as u64);
        }
    }
}
