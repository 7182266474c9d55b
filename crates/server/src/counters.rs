//! Server counters, kept in process-shared memory so that children of the
//! process-per-connection engine add to the same numbers. Every engine updates
//! them the same way: once per `recv`, once per `sendmsg`, once per connection.

use connlab_os::ProcessShared;
use connlab_proto::ErrorKind;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// Live counters of one server run.
#[derive(Default)]
#[repr(C)]
pub(crate) struct Counters {
    pub(crate) accepted: AtomicU64,
    pub(crate) open: AtomicU64,
    pub(crate) peak: AtomicU64,
    pub(crate) shed: AtomicU64,
    /// Times the server ran into its descriptor limit (an `EMFILE` after
    /// a successful accept, or the first one).
    pub(crate) fd_limit_episodes: AtomicU64,
    pub(crate) accept_errors: AtomicU64,
    pub(crate) requests: AtomicU64,
    pub(crate) bytes_in: AtomicU64,
    pub(crate) bytes_out: AtomicU64,
    pub(crate) protocol_errors: [AtomicU64; ErrorKind::ALL.len()],
    /// Connections closed because a request head did not complete in time.
    pub(crate) header_timeouts: AtomicU64,
    /// Connections closed because nothing moved for the idle timeout.
    pub(crate) idle_timeouts: AtomicU64,
    /// `--engine rtsig` only: the library's counters at the end of the run.
    pub(crate) rtsig: RtSigCounters,
    /// CPUs the serving threads and children were seen running on, one bit
    /// each ([`Counters::ran_here`]).
    pub(crate) cpus: [AtomicU64; CPU_WORDS],
}

/// Words of [`Counters::cpus`]: CPUs 0 to 1023, as `CPU_SETSIZE`.
const CPU_WORDS: usize = 16;

/// What the RT-signal library did during a run (`--engine rtsig`).
#[derive(Default)]
#[repr(C)]
pub(crate) struct RtSigCounters {
    pub(crate) used: std::sync::atomic::AtomicBool,
    pub(crate) signals: AtomicU64,
    pub(crate) overflows: AtomicU64,
    pub(crate) recoveries: AtomicU64,
}

// SAFETY: only atomics and arrays of atomics (`ProcessShared`), checked
// field by field by `_fields_are_process_shared` below; no pointer, no Drop.
unsafe impl ProcessShared for Counters {}
// SAFETY: as above.
unsafe impl ProcessShared for RtSigCounters {}

/// Fails to compile if a field of the counters is not `ProcessShared` (the
/// exhaustive patterns make a new field fail until it is listed here).
fn _fields_are_process_shared(c: &Counters) {
    fn is<T: ProcessShared>(_: &T) {}
    let Counters {
        accepted,
        open,
        peak,
        shed,
        fd_limit_episodes,
        accept_errors,
        requests,
        bytes_in,
        bytes_out,
        protocol_errors,
        header_timeouts,
        idle_timeouts,
        rtsig,
        cpus,
    } = c;
    let RtSigCounters {
        used,
        signals,
        overflows,
        recoveries,
    } = rtsig;
    is(accepted);
    is(open);
    is(peak);
    is(shed);
    is(fd_limit_episodes);
    is(accept_errors);
    is(requests);
    is(bytes_in);
    is(bytes_out);
    is(protocol_errors);
    is(header_timeouts);
    is(idle_timeouts);
    is(used);
    is(signals);
    is(overflows);
    is(recoveries);
    is(cpus);
}

impl Counters {
    /// Records the CPU the calling thread runs on now (`sched_getcpu`,
    /// which glibc answers from the thread's rseq area or the vDSO, without
    /// a system call). Called once per event-loop turn and once per
    /// blocking receive, so `cpus_used` in --stats is where the work ran.
    pub(crate) fn ran_here(&self) {
        let Some(cpu) = connlab_os::current_cpu() else {
            return;
        };
        let Some(word) = self.cpus.get(cpu / 64) else {
            return;
        };
        let bit = 1u64 << (cpu % 64);
        // Read first: the line stays shared between loops once set.
        if word.load(Relaxed) & bit == 0 {
            word.fetch_or(bit, Relaxed);
        }
    }

    /// The CPUs recorded by [`Counters::ran_here`], ascending.
    pub(crate) fn cpus_used(&self) -> Vec<usize> {
        let mut out = Vec::new();
        for (i, word) in self.cpus.iter().enumerate() {
            let bits = word.load(Relaxed);
            out.extend(
                (0..64)
                    .filter(|b| bits & (1u64 << b) != 0)
                    .map(|b| i * 64 + b),
            );
        }
        out
    }

    /// A connection was accepted and is now served.
    pub(crate) fn opened(&self) {
        self.accepted.fetch_add(1, Relaxed);
        let now = self.open.fetch_add(1, Relaxed) + 1;
        self.peak.fetch_max(now, Relaxed);
    }

    /// A served connection was closed.
    pub(crate) fn closed(&self) {
        self.open.fetch_sub(1, Relaxed);
    }

    /// A connection was shed at the descriptor limit; `episode_began` when
    /// the limit was not in force at the accept before.
    pub(crate) fn shed_one(&self, episode_began: bool) {
        self.shed.fetch_add(1, Relaxed);
        if episode_began {
            self.fd_limit_episodes.fetch_add(1, Relaxed);
        }
    }

    /// A timeout closed a connection.
    pub(crate) fn timed_out(&self, expiry: crate::deadline::Expiry) {
        use crate::deadline::Expiry;
        match expiry {
            Expiry::Header => self.header_timeouts.fetch_add(1, Relaxed),
            Expiry::Idle => self.idle_timeouts.fetch_add(1, Relaxed),
        };
    }

    /// A protocol error closed a connection.
    pub(crate) fn protocol_error(&self, kind: ErrorKind) {
        self.protocol_errors[kind.index()].fetch_add(1, Relaxed);
    }

    /// Adds one worker's counters to these (after the workers stopped).
    /// The peaks add up: each worker's own peak, so the sum bounds the
    /// server's from above.
    pub(crate) fn absorb(&self, w: &Counters) {
        let add = |a: &AtomicU64, b: &AtomicU64| {
            a.fetch_add(b.load(Relaxed), Relaxed);
        };
        add(&self.accepted, &w.accepted);
        add(&self.open, &w.open);
        add(&self.peak, &w.peak);
        add(&self.shed, &w.shed);
        add(&self.fd_limit_episodes, &w.fd_limit_episodes);
        add(&self.accept_errors, &w.accept_errors);
        add(&self.requests, &w.requests);
        add(&self.bytes_in, &w.bytes_in);
        add(&self.bytes_out, &w.bytes_out);
        for (a, b) in self.protocol_errors.iter().zip(&w.protocol_errors) {
            add(a, b);
        }
        add(&self.header_timeouts, &w.header_timeouts);
        add(&self.idle_timeouts, &w.idle_timeouts);
        for (a, b) in self.cpus.iter().zip(&w.cpus) {
            a.fetch_or(b.load(Relaxed), Relaxed);
        }
        if w.rtsig.used.load(Relaxed) {
            self.rtsig.used.store(true, Relaxed);
            add(&self.rtsig.signals, &w.rtsig.signals);
            add(&self.rtsig.overflows, &w.rtsig.overflows);
            add(&self.rtsig.recoveries, &w.rtsig.recoveries);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpus_used_lists_the_cpu_recorded_and_absorb_unites() {
        let a = Counters::default();
        assert!(a.cpus_used().is_empty());
        a.ran_here();
        let here = a.cpus_used();
        // sched_getcpu answers on Linux: one CPU, the one this ran on.
        assert_eq!(here.len(), 1, "{here:?}");
        let b = Counters::default();
        b.cpus[1].store(1 << 3, Relaxed);
        a.absorb(&b);
        let mut want = here.clone();
        want.push(67);
        want.sort_unstable();
        want.dedup();
        assert_eq!(a.cpus_used(), want);
    }
}
