//! What a pipeline thread does when it has nothing to do.
//!
//! With 2 cores and 20+ threads a pure busy-spin is awful: a spinning thread
//! holds a CPU the thread it waits for needs. Each thread therefore escalates:
//! `spins` rounds of `spin_loop` (a hand-off from a thread on the other core
//! arrives within a few hundred ns), then `yields` rounds of `sched_yield`
//! (lets a runnable thread on this core go first, ~1 us each), then it parks
//! (`thread::park_timeout`) until its producer unparks it, its next timer is
//! due, or `max_park` passes. Producers check a `sleeping` flag after pushing
//! a batch and unpark the consumer only when it is set (a `SeqCst` fence on
//! both sides, Dekker style, so a wake-up is never lost; `max_park` bounds the
//! damage if it were).

use std::sync::atomic::{fence, AtomicBool, Ordering};
use std::sync::OnceLock;
use std::thread::Thread;
use std::time::{Duration, Instant};

/// The seeded generator of the impairments (loss, reordering, duplication):
/// connlab's one RNG type, under the name the lines use.
pub(crate) use connlab_measure::SeededRng as Rng;

/// Spin-then-yield-then-park parameters.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct IdleConfig {
    /// Rounds of `spin_loop` before yielding.
    pub spins: u32,
    /// Rounds of `yield_now` before parking.
    pub yields: u32,
    /// Longest park.
    pub max_park: Duration,
}

impl Default for IdleConfig {
    fn default() -> Self {
        IdleConfig {
            spins: 64,
            yields: 8,
            max_park: Duration::from_millis(1),
        }
    }
}

impl IdleConfig {
    /// Pure busy-polling (never yields or parks): for comparison only.
    pub fn busy_spin() -> Self {
        IdleConfig {
            spins: u32::MAX,
            yields: 0,
            max_park: Duration::from_millis(1),
        }
    }

    /// Spin, then yield forever (never park).
    pub fn spin_yield() -> Self {
        IdleConfig {
            spins: 64,
            yields: u32::MAX,
            max_park: Duration::from_millis(1),
        }
    }
}

/// The wake-up slot of one thread.
#[derive(Default)]
pub(crate) struct Parker {
    sleeping: AtomicBool,
    thread: OnceLock<Thread>,
}

impl Parker {
    /// Registers the calling thread as the one to unpark.
    pub(crate) fn register(&self) {
        let _ = self.thread.set(std::thread::current());
    }

    /// Wakes the thread if it is parked (call after pushing to its queue).
    pub(crate) fn wake(&self) {
        fence(Ordering::SeqCst);
        if self.sleeping.load(Ordering::Relaxed) {
            self.sleeping.store(false, Ordering::Relaxed);
            if let Some(t) = self.thread.get() {
                t.unpark();
            }
        }
    }

    /// Wakes the thread unconditionally (shutdown).
    pub(crate) fn wake_always(&self) {
        if let Some(t) = self.thread.get() {
            t.unpark();
        }
    }
}

/// Counts of what idling did.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct IdleCounts {
    pub(crate) yields: u64,
    pub(crate) parks: u64,
}

/// One thread's idling state.
pub(crate) struct Idler<'a> {
    cfg: IdleConfig,
    parker: &'a Parker,
    rounds: u64,
    pub(crate) counts: IdleCounts,
}

impl<'a> Idler<'a> {
    pub(crate) fn new(cfg: IdleConfig, parker: &'a Parker) -> Self {
        parker.register();
        Idler {
            cfg,
            parker,
            rounds: 0,
            counts: IdleCounts::default(),
        }
    }

    /// Work was done: start the escalation again.
    pub(crate) fn reset(&mut self) {
        self.rounds = 0;
    }

    /// Nothing to do this round. `has_input` re-checks the thread's inputs
    /// after announcing sleep; `deadline` is its next timer.
    pub(crate) fn idle(
        &mut self,
        now: Instant,
        deadline: Option<Instant>,
        has_input: impl Fn() -> bool,
    ) {
        self.rounds += 1;
        let spins = u64::from(self.cfg.spins);
        if self.rounds <= spins {
            std::hint::spin_loop();
            return;
        }
        if self.rounds <= spins + u64::from(self.cfg.yields) {
            self.counts.yields += 1;
            std::thread::yield_now();
            return;
        }
        let mut timeout = self.cfg.max_park;
        if let Some(d) = deadline {
            timeout = timeout.min(d.saturating_duration_since(now));
        }
        if timeout.is_zero() {
            return;
        }
        self.parker.sleeping.store(true, Ordering::Relaxed);
        fence(Ordering::SeqCst);
        if has_input() {
            self.parker.sleeping.store(false, Ordering::Relaxed);
            return;
        }
        self.counts.parks += 1;
        std::thread::park_timeout(timeout);
        self.parker.sleeping.store(false, Ordering::Relaxed);
    }
}
