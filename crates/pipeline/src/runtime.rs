//! What the drivers share: the queue element, the run context (flags, wake-up
//! slots), the application source and sink, per-thread reports and pinning,
//! the run's error, spawning, the coordinator that ends the run and what it
//! collects from the threads.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use connlab_os::{pin_current_process, CpuList, CpuTimes};

use crate::config::ConfigError;
use crate::content::{fill_message, message_index, message_matches, StreamChecksum};
use crate::idle::{Idler, Parker};
use crate::layer::{LayerCounters, Service};
use crate::pool::{self, Buf, BufferPool};
use crate::{PipelineConfig, Side};

/// Why a run failed (partial results are not errors: see
/// [`PipelineResult::interrupted`](crate::PipelineResult::interrupted)).
#[derive(Debug, thiserror::Error)]
pub enum PipelineError {
    /// Bad configuration.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The pool could not be created.
    #[error("buffer pool: {0}")]
    Pool(#[from] pool::PoolError),
    /// Socket or thread setup failed.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The error.
        source: std::io::Error,
    },
    /// A thread failed (pinning, socket error) or panicked.
    #[error("pipeline thread failed: {0}")]
    Thread(String),
}

/// The error of an OS call that `what` needed.
pub(crate) fn thread_error(what: &str, e: std::io::Error) -> PipelineError {
    PipelineError::Io {
        what: what.to_string(),
        source: e,
    }
}

/// What the coordinator collects from the threads.
#[derive(Default)]
pub(crate) struct Collected {
    pub(crate) threads: Vec<ThreadReport>,
    /// Run-to-completion: time per layer per side, summed over workers.
    pub(crate) rtc_layer_time: Option<[Vec<Duration>; 2]>,
    pub(crate) rtc_counters: Option<[Vec<LayerCounters>; 2]>,
    /// Run-to-completion: layer-lock counts per side, summed over workers.
    pub(crate) rtc_locks: Option<[LockCounts; 2]>,
    pub(crate) panicked: Vec<String>,
}

/// Waits until the run ends (done, stopped, timed out, failed or a thread
/// exited early), then tells every thread to stop.
pub(crate) fn coordinate<F: Fn() -> bool>(
    ctx: &Ctx<'_>,
    stop: &AtomicBool,
    any_finished: F,
    timed_out: &mut bool,
    interrupted: &mut bool,
) {
    let deadline = ctx.cfg.time_limit.map(|t| Instant::now() + t);
    loop {
        if ctx.sender_closed.load(Ordering::SeqCst) && ctx.sink_done.load(Ordering::SeqCst) {
            break;
        }
        if stop.load(Ordering::SeqCst) {
            *interrupted = true;
            break;
        }
        if deadline.is_some_and(|d| Instant::now() >= d) {
            *timed_out = true;
            *interrupted = true;
            break;
        }
        if ctx.stopping() || any_finished() {
            break;
        }
        std::thread::park_timeout(Duration::from_millis(2));
    }
    ctx.shutdown.store(true, Ordering::SeqCst);
    ctx.wake_all();
}

/// The error of a thread that could not be spawned.
pub(crate) fn spawn_err(name: &str, e: std::io::Error) -> PipelineError {
    thread_error(&format!("spawning thread {name}"), e)
}

/// The body of a thread.
type ThreadFn<'a> = Box<dyn FnOnce() -> ThreadReport + Send + 'a>;

/// Spawns `f` as a named thread of scope `s` and keeps its handle.
pub(crate) fn spawn_in<'scope, 'env>(
    s: &'scope std::thread::Scope<'scope, 'env>,
    handles: &mut Vec<(String, std::thread::ScopedJoinHandle<'scope, ThreadReport>)>,
    name: String,
    f: ThreadFn<'scope>,
) -> Result<(), PipelineError> {
    let h = std::thread::Builder::new()
        .name(short_name(&name))
        .spawn_scoped(s, f)
        .map_err(|e| spawn_err(&name, e))?;
    handles.push((name, h));
    Ok(())
}

/// `name` shortened to a Linux thread name (at most 15 bytes).
pub(crate) fn short_name(name: &str) -> String {
    // Linux thread names are at most 15 bytes.
    let s = name
        .replace("sender ", "s-")
        .replace("receiver ", "r-")
        .replace("layer ", "L")
        .replace("worker ", "w");
    s.chars().take(15).collect()
}

/// One worker's count of its layer-lock acquisitions that carry work (a
/// PDU from below, an SDU from above, a release, the connection and each
/// new message; not the idle polls of timers and deadlines), per layer:
/// how many, how many found the lock held by another worker, and how long
/// those waited (the lock contention of shared connection state).
#[derive(Clone, Debug, Default)]
pub(crate) struct LockCounts {
    pub(crate) acquired: Vec<u64>,
    pub(crate) contended: Vec<u64>,
    pub(crate) wait: Vec<Duration>,
}

impl LockCounts {
    pub(crate) fn new(n: usize) -> LockCounts {
        LockCounts {
            acquired: vec![0; n],
            contended: vec![0; n],
            wait: vec![Duration::ZERO; n],
        }
    }

    /// Counts one acquisition of layer `j`'s lock and its wait, if any.
    pub(crate) fn record(&mut self, j: usize, wait: Option<Duration>) {
        self.acquired[j] += 1;
        if let Some(w) = wait {
            self.contended[j] += 1;
            self.wait[j] += w;
        }
    }

    /// Adds another worker's counts.
    pub(crate) fn add(&mut self, other: &LockCounts) {
        for (a, b) in self.acquired.iter_mut().zip(&other.acquired) {
            *a += b;
        }
        for (a, b) in self.contended.iter_mut().zip(&other.contended) {
            *a += b;
        }
        for (a, b) in self.wait.iter_mut().zip(&other.wait) {
            *a += *b;
        }
    }
}

/// The element of every SPSC queue: a buffer handle (moved, not copied) or the
/// end-of-stream mark that starts the release of the layer below.
pub(crate) enum Item<'p> {
    Sdu(Buf<'p>, Service),
    Release,
}

/// Run-wide state shared by every thread.
pub(crate) struct Ctx<'p> {
    pub(crate) cfg: &'p PipelineConfig,
    pub(crate) pool: &'p BufferPool,
    pub(crate) shutdown: AtomicBool,
    pub(crate) sender_open: AtomicBool,
    pub(crate) sender_closed: AtomicBool,
    pub(crate) sink_done: AtomicBool,
    pub(crate) failure: Mutex<Option<String>>,
    pub(crate) first_send: OnceLock<Instant>,
    pub(crate) source: Mutex<Option<SourceTotals>>,
    pub(crate) sink: Mutex<Sink>,
    pub(crate) parkers: Vec<Parker>,
}

impl<'p> Ctx<'p> {
    pub(crate) fn new(cfg: &'p PipelineConfig, pool: &'p BufferPool, threads: usize) -> Self {
        Ctx {
            cfg,
            pool,
            shutdown: AtomicBool::new(false),
            sender_open: AtomicBool::new(false),
            sender_closed: AtomicBool::new(false),
            sink_done: AtomicBool::new(false),
            failure: Mutex::new(None),
            first_send: OnceLock::new(),
            source: Mutex::new(None),
            sink: Mutex::new(Sink::new(cfg)),
            parkers: (0..threads).map(|_| Parker::default()).collect(),
        }
    }

    pub(crate) fn stopping(&self) -> bool {
        self.shutdown.load(Ordering::Relaxed)
    }

    /// Records the first failure and stops the run.
    pub(crate) fn fail(&self, what: String) {
        let mut f = self.failure.lock().unwrap_or_else(|e| e.into_inner());
        if f.is_none() {
            *f = Some(what);
        }
        drop(f);
        self.shutdown.store(true, Ordering::SeqCst);
    }

    pub(crate) fn failure(&self) -> Option<String> {
        self.failure
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    pub(crate) fn wake(&self, id: usize) {
        if let Some(p) = self.parkers.get(id) {
            p.wake();
        }
    }

    pub(crate) fn wake_all(&self) {
        for p in &self.parkers {
            p.wake_always();
        }
    }

    pub(crate) fn parker(&self, id: usize) -> &Parker {
        &self.parkers[id]
    }

    /// The CPU for thread number `i` from the cpu map, cycled.
    pub(crate) fn cpu_for(&self, i: usize) -> Option<usize> {
        let map = self.cfg.cpu_map.as_ref()?;
        if map.is_empty() {
            return None;
        }
        Some(map[i % map.len()])
    }

    /// Pins the calling thread to `cpu`; on failure records it and stops the run.
    pub(crate) fn pin(&self, cpu: Option<usize>, name: &str) -> bool {
        let Some(cpu) = cpu else { return true };
        let res = CpuList::parse(&cpu.to_string())
            .map_err(|e| e.to_string())
            .and_then(|l| pin_current_process(&l).map_err(|e| e.to_string()));
        match res {
            Ok(()) => true,
            Err(e) => {
                self.fail(format!("pinning {name} to CPU {cpu}: {e}"));
                false
            }
        }
    }
}

/// Totals of the application source.
#[derive(Clone, Copy, Debug)]
pub(crate) struct SourceTotals {
    pub(crate) sent: u64,
    pub(crate) checksum: StreamChecksum,
}

/// The message generator of the sending application.
pub(crate) struct Source {
    seed: u64,
    size: usize,
    data_offset: usize,
    pub(crate) next: u64,
    pub(crate) checksum: StreamChecksum,
}

impl Source {
    pub(crate) fn new(cfg: &PipelineConfig) -> Self {
        Source {
            seed: cfg.seed,
            size: cfg.message_size,
            data_offset: cfg.layers * crate::header::HEADER_LEN,
            next: 0,
            checksum: StreamChecksum::new(),
        }
    }

    /// The next message in a fresh buffer (view = the user data), or `None`
    /// if the pool is empty (try again later).
    pub(crate) fn make<'p>(&mut self, pool: &'p BufferPool) -> Option<Buf<'p>> {
        let mut b = pool.alloc()?;
        let view = b
            .set_view(self.data_offset, self.data_offset + self.size)
            .ok()?;
        fill_message(self.seed, self.next, view);
        self.checksum.update(view);
        self.next += 1;
        Some(b)
    }

    pub(crate) fn totals(&self) -> SourceTotals {
        SourceTotals {
            sent: self.next,
            checksum: self.checksum,
        }
    }
}

/// The receiving application: checks every message and the order.
pub(crate) struct Sink {
    seed: u64,
    size: usize,
    expect: u64,
    pub(crate) delivered: u64,
    pub(crate) bytes: u64,
    pub(crate) bad: u64,
    pub(crate) errors: Vec<String>,
    pub(crate) checksum: StreamChecksum,
    pub(crate) last: Option<Instant>,
    target: u64,
}

impl Sink {
    pub(crate) fn new(cfg: &PipelineConfig) -> Self {
        Sink {
            seed: cfg.seed,
            size: cfg.message_size,
            expect: 0,
            delivered: 0,
            bytes: 0,
            bad: 0,
            errors: Vec::new(),
            checksum: StreamChecksum::new(),
            last: None,
            target: cfg.messages,
        }
    }

    fn error(&mut self, e: String) {
        self.bad += 1;
        if self.errors.len() < 8 {
            self.errors.push(e);
        }
    }

    /// One delivered SDU. Returns true when the last expected message arrived.
    pub(crate) fn accept(&mut self, data: &[u8], now: Instant) -> bool {
        let idx = self.expect;
        if !message_matches(self.seed, idx, self.size, data) {
            let got = message_index(data);
            self.error(format!(
                "message {idx}: got {} bytes claiming index {got:?}",
                data.len()
            ));
        }
        self.checksum.update(data);
        self.expect += 1;
        self.delivered += 1;
        self.bytes += data.len() as u64;
        self.last = Some(now);
        if self.delivered > self.target {
            self.error(format!("extra message {idx}"));
        }
        self.delivered == self.target
    }

    /// An SDU the sink should never see.
    pub(crate) fn unexpected(&mut self, what: &str) {
        self.error(format!("unexpected {what} at the sink"));
    }
}

/// Time-sampled occupancy of a queue.
#[derive(Default)]
pub(crate) struct Occupancy {
    sum: f64,
    n: u64,
    max: u64,
    next: Option<Instant>,
}

const SAMPLE_EVERY: Duration = Duration::from_micros(20);

impl Occupancy {
    pub(crate) fn sample(&mut self, now: Instant, slots: usize) {
        if self.next.is_some_and(|t| now < t) {
            return;
        }
        self.next = Some(now + SAMPLE_EVERY);
        self.sum += slots as f64;
        self.n += 1;
        self.max = self.max.max(slots as u64);
    }

    pub(crate) fn mean(&self) -> f64 {
        if self.n == 0 {
            0.0
        } else {
            self.sum / self.n as f64
        }
    }

    pub(crate) fn max(&self) -> u64 {
        self.max
    }
}

/// Busy time of a thread's working rounds, robust to preemption.
///
/// A round is timed by the wall clock (`Instant`, cheap; a thread CPU clock
/// costs about 650 ns a call on this VM). With more threads than cores, a
/// round is sometimes descheduled half-way and its wall time then holds
/// other threads' work, which inflated layer costs several-fold at 11
/// layers on two CPUs. So rounds are kept in power-of-two buckets of wall
/// time per item, and [`BusyMeter::robust_s`] caps each round at
/// [`BusyMeter::CAP`] times the median per-item cost (weighted by items)
/// before summing: rounds that ran undisturbed count in full, a preempted
/// round counts as a slow one. [`BusyMeter::raw_s`] is the plain sum.
#[derive(Clone, Debug)]
pub(crate) struct BusyMeter {
    /// Per bucket `b` (per-item ns in `[2^(b-1), 2^b)`): items and ns.
    buckets: [(u64, u64); 65],
    raw_ns: u64,
    rounds: u64,
}

impl Default for BusyMeter {
    fn default() -> Self {
        BusyMeter {
            buckets: [(0, 0); 65],
            raw_ns: 0,
            rounds: 0,
        }
    }
}

impl BusyMeter {
    /// Rounds slower per item than this many times the median are capped.
    pub(crate) const CAP: u64 = 4;

    /// Records a working round that began at `start` and handled `items`.
    pub(crate) fn round(&mut self, start: Instant, items: u32) {
        let ns = u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX);
        self.record(ns, u64::from(items.max(1)));
    }

    fn record(&mut self, ns: u64, items: u64) {
        self.raw_ns = self.raw_ns.saturating_add(ns);
        self.rounds += 1;
        let per = ns / items;
        let b = (64 - per.leading_zeros()) as usize;
        let slot = &mut self.buckets[b];
        slot.0 += items;
        slot.1 = slot.1.saturating_add(ns);
    }

    /// Rounds recorded.
    pub(crate) fn rounds(&self) -> u64 {
        self.rounds
    }

    /// The plain sum of the rounds' wall times, seconds.
    pub(crate) fn raw_s(&self) -> f64 {
        self.raw_ns as f64 / 1e9
    }

    /// The sum with every round capped at `CAP` x the median per-item cost.
    pub(crate) fn robust_s(&self) -> f64 {
        let items: u64 = self.buckets.iter().map(|b| b.0).sum();
        if items == 0 {
            return 0.0;
        }
        let mut seen = 0;
        let mut median_upper = 1u64;
        for (b, slot) in self.buckets.iter().enumerate() {
            seen += slot.0;
            if seen * 2 >= items {
                median_upper = 1u64 << b.min(63);
                break;
            }
        }
        let cap = median_upper.saturating_mul(Self::CAP);
        let mut total = 0u64;
        for (b, slot) in self.buckets.iter().enumerate() {
            let lower = if b == 0 { 0 } else { 1u64 << (b - 1).min(63) };
            total = total.saturating_add(if lower > cap {
                cap.saturating_mul(slot.0)
            } else {
                slot.1.min(cap.saturating_mul(slot.0))
            });
        }
        total as f64 / 1e9
    }
}

/// What a thread does; the drivers and the projection tell threads apart by
/// this, never by their names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ThreadRole {
    /// The application source (layer-parallel, sending side).
    Source,
    /// The application sink (layer-parallel, receiving side).
    Sink,
    /// Layer `k` (1 = bottom) of one side (layer-parallel).
    Layer(usize),
    /// The line at the bottom of one side (both modes).
    Line,
    /// A run-to-completion worker.
    Worker,
}

/// What one thread reports when it ends.
#[derive(Clone, Debug)]
pub(crate) struct ThreadReport {
    pub(crate) name: String,
    pub(crate) side: Side,
    pub(crate) role: ThreadRole,
    pub(crate) cpu_s: f64,
    pub(crate) busy_s: f64,
    /// Busy time without the preemption cap (see [`BusyMeter`]).
    pub(crate) busy_raw_s: f64,
    /// Timed working rounds behind `busy_s`.
    pub(crate) busy_rounds: u64,
    pub(crate) messages: u64,
    pub(crate) counters: Option<LayerCounters>,
    pub(crate) occupancy_mean: f64,
    pub(crate) occupancy_max: u64,
    pub(crate) cpu: Option<usize>,
    pub(crate) yields: u64,
    pub(crate) parks: u64,
    pub(crate) dropped: u64,
    pub(crate) duplicated: u64,
    pub(crate) reordered: u64,
}

impl ThreadReport {
    /// A report with nothing measured yet.
    pub(crate) fn new(name: String, side: Side, role: ThreadRole, cpu: Option<usize>) -> Self {
        ThreadReport {
            name,
            side,
            role,
            cpu_s: 0.0,
            busy_s: 0.0,
            busy_raw_s: 0.0,
            busy_rounds: 0,
            messages: 0,
            counters: None,
            occupancy_mean: 0.0,
            occupancy_max: 0,
            cpu,
            yields: 0,
            parks: 0,
            dropped: 0,
            duplicated: 0,
            reordered: 0,
        }
    }

    /// Fills what every thread measures the same way at its end: CPU time,
    /// busy time (robust and raw) and how it idled.
    pub(crate) fn close(&mut self, clock: &CpuClock, busy: &BusyMeter, idler: &Idler<'_>) {
        self.cpu_s = clock.seconds();
        self.busy_s = busy.robust_s();
        self.busy_raw_s = busy.raw_s();
        self.busy_rounds = busy.rounds();
        self.yields = idler.counts.yields;
        self.parks = idler.counts.parks;
    }
}

/// Thread CPU time from the start of a thread's work.
pub(crate) struct CpuClock(CpuTimes);

impl CpuClock {
    pub(crate) fn start() -> Self {
        CpuClock(CpuTimes::thread())
    }

    pub(crate) fn seconds(&self) -> f64 {
        CpuTimes::thread().since(&self.0).total_s()
    }
}

#[cfg(test)]
mod busy_tests {
    use super::BusyMeter;

    #[test]
    fn preempted_rounds_are_capped_at_four_medians() {
        let mut m = BusyMeter::default();
        for _ in 0..99 {
            m.record(1_000, 1); // 1 us per item, bucket upper bound 1024
        }
        m.record(3_000_000, 1); // a round descheduled for 3 ms
        assert!((m.raw_s() - (99e-6 + 3e-3)).abs() < 1e-12);
        let capped = m.robust_s();
        assert!((capped - (99e-6 + 4.0 * 1024e-9)).abs() < 1e-12, "{capped}");
        assert_eq!(m.rounds(), 100);
        assert_eq!(BusyMeter::default().robust_s(), 0.0);
    }
}
