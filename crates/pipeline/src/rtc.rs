//! Run-to-completion mode, the baseline: `threads` workers per side carry each
//! message through every layer. The same entity code as the layer-parallel
//! mode; each layer's connection state is under a `Mutex`. A worker holds at
//! most one layer lock at a time (actions are collected under the lock and
//! carried on after it is released), except that the receiver's top layer
//! hands messages to the sink while still locked, so messages reach the sink
//! in the top layer's order. On the sending side the worker takes the next
//! message index and generates the message under the top layer's lock, for
//! the same reason.
//!
//! Threads, in cpu-map order: sender workers, the sender line, the receiver
//! line, receiver workers (`2 * threads + 2`). The line threads are the same
//! as in the layer-parallel mode; each worker has its own SPSC queue pair to
//! its side's line.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard, TryLockError};
use std::time::{Duration, Instant};

use rtrb::{Consumer, Producer};

use crate::idle::Idler;
use crate::layer::{Action, Layer, Service};
use crate::parallel::{flush, BATCH, LOCAL_LIMIT};
use crate::pool::Buf;
use std::net::UdpSocket;

use rtrb::RingBuffer;

use crate::layer::{self, Role};
use crate::line::line_threads;
use crate::line::LayerEnds;
use crate::parallel;
use crate::results::Side;
use crate::runtime::{
    coordinate, short_name, spawn_err, BusyMeter, Collected, CpuClock, Ctx, Item, LockCounts,
    PipelineError, Sink, Source, ThreadReport, ThreadRole,
};

/// Parker/cpu-map id of sender worker `w`.
pub(crate) fn sender_worker_id(w: usize) -> usize {
    w
}

/// Parker id of the sender line.
pub(crate) fn sender_line_id(k: usize) -> usize {
    k
}

/// Parker id of the receiver line.
pub(crate) fn receiver_line_id(k: usize) -> usize {
    k + 1
}

/// Parker/cpu-map id of receiver worker `w`.
pub(crate) fn receiver_worker_id(k: usize, w: usize) -> usize {
    k + 2 + w
}

/// Number of threads in this mode.
pub(crate) fn thread_count(k: usize) -> usize {
    2 * k + 2
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Locks layer `j`'s state, counting the acquisition, and whether (and how
/// long) it had to wait for another worker. An uncontended acquisition costs
/// one `try_lock`; only a contended one reads the clock.
fn lock_layer<'s, T>(m: &'s Mutex<T>, counts: &mut LockCounts, j: usize) -> MutexGuard<'s, T> {
    let (g, wait) = lock_timed(m);
    counts.record(j, wait);
    g
}

/// Locks `m`: the guard, and how long it waited if the lock was held by
/// another thread (`None` when the first `try_lock` took it).
fn lock_timed<T>(m: &Mutex<T>) -> (MutexGuard<'_, T>, Option<Duration>) {
    match m.try_lock() {
        Ok(g) => (g, None),
        Err(TryLockError::Poisoned(e)) => (e.into_inner(), None),
        Err(TryLockError::WouldBlock) => {
            let t0 = Instant::now();
            let g = lock(m);
            (g, Some(t0.elapsed()))
        }
    }
}

enum Work<'p> {
    FromBelow(Buf<'p>),
    FromAbove(Buf<'p>, Service),
    Release,
    Poll(bool),
}

/// State shared by the workers of one side.
pub(crate) struct SideState<'p> {
    pub(crate) layers: Vec<Mutex<Layer<'p>>>,
    pub(crate) source: Mutex<Source>,
    pub(crate) sink: Mutex<Sink>,
    pub(crate) released: AtomicBool,
    pub(crate) initiator: bool,
}

/// One worker's queue pair to its line and identity.
pub(crate) struct Worker<'p> {
    pub(crate) name: String,
    pub(crate) side: Side,
    pub(crate) me: usize,
    pub(crate) line: usize,
    pub(crate) cpu: Option<usize>,
    pub(crate) to_line: Producer<Item<'p>>,
    pub(crate) from_line: Consumer<Item<'p>>,
}

struct Carrier<'a, 'p> {
    ctx: &'a Ctx<'p>,
    side: &'a SideState<'p>,
    queue: VecDeque<(usize, Work<'p>)>,
    acts: Vec<Action<'p>>,
    to_line: VecDeque<Item<'p>>,
    layer_time: Vec<Duration>,
    sink_time: Duration,
    /// Entity calls per layer, for [`Carrier::timer`].
    calls: Vec<u32>,
    /// Layer-lock acquisitions and contention.
    locks: LockCounts,
}

/// One entity call in this many (per layer) is timed, and counted this many
/// times: a clock read around every call would cost the worker two reads per
/// layer per message, more than the layer-parallel threads pay (one per
/// round), and the comparison must measure the threading, not the probe.
const SAMPLE: u32 = 8;

impl<'p> Carrier<'_, 'p> {
    /// The start of a timed call of layer `j`, if this call is sampled.
    fn timer(&mut self, j: usize) -> Option<Instant> {
        let c = &mut self.calls[j];
        *c = c.wrapping_add(1);
        c.is_multiple_of(SAMPLE).then(Instant::now)
    }

    /// Charges a sampled call of layer `j` for the calls it stands for.
    fn charge(&mut self, j: usize, t0: Option<Instant>) {
        if let Some(t0) = t0 {
            self.layer_time[j] += t0.elapsed() * SAMPLE;
        }
    }

    /// Runs `work` on layer `j` and everything it causes, breadth first (so
    /// PDUs keep their order between two layers).
    fn carry(&mut self, j: usize, work: Work<'p>, now: Instant) {
        let n = self.side.layers.len();
        self.queue.push_back((j, work));
        while let Some((j, work)) = self.queue.pop_front() {
            let t0 = self.timer(j);
            let mut acts = std::mem::take(&mut self.acts);
            let side = self.side;
            // Only acquisitions that carry a PDU or a release count: idle
            // polls take every lock many times per message and would
            // drown the contention of the work itself.
            let mut guard = if matches!(work, Work::Poll(_)) {
                lock(&side.layers[j])
            } else {
                lock_layer(&side.layers[j], &mut self.locks, j)
            };
            match work {
                Work::FromBelow(b) => guard.on_pdu(b, now, &mut acts),
                Work::FromAbove(b, s) => guard.send(b, s, now, &mut acts),
                Work::Release => guard.release(now, &mut acts),
                Work::Poll(idle) => guard.poll(now, idle, &mut acts),
            }
            if j + 1 == n && !self.side.initiator {
                // Deliver to the sink in the top layer's order, still locked.
                let ts = Instant::now();
                let mut sink = lock(&self.side.sink);
                acts.retain(|a| match a {
                    Action::Up(b, Service::Data) => {
                        if sink.accept(b.as_slice(), ts) {
                            self.ctx.sink_done.store(true, Ordering::SeqCst);
                        }
                        false
                    }
                    Action::Up(_, Service::Expedited) => {
                        sink.unexpected("expedited SDU");
                        false
                    }
                    _ => true,
                });
                drop(sink);
                if t0.is_some() {
                    self.sink_time += ts.elapsed() * SAMPLE;
                }
            }
            drop(guard);
            self.charge(j, t0);
            for a in acts.drain(..) {
                match a {
                    Action::Down(b, s) => {
                        if j == 0 {
                            self.to_line.push_back(Item::Sdu(b, s));
                        } else {
                            self.queue.push_back((j - 1, Work::FromAbove(b, s)));
                        }
                    }
                    Action::Up(b, _) => {
                        if j + 1 < n {
                            self.queue.push_back((j + 1, Work::FromBelow(b)));
                        }
                    }
                    Action::Opened => {
                        if j + 1 == n && self.side.initiator {
                            self.ctx.sender_open.store(true, Ordering::SeqCst);
                        }
                    }
                    Action::Closed => {
                        if self.side.initiator {
                            if j > 0 {
                                self.queue.push_back((j - 1, Work::Release));
                            } else {
                                self.ctx.sender_closed.store(true, Ordering::SeqCst);
                            }
                        }
                    }
                }
            }
            self.acts = acts;
        }
    }
}

/// What a worker reports: its thread report, the time it spent in each
/// layer (including waiting for that layer's lock) and in the sink, and its
/// layer-lock counts.
pub(crate) struct WorkerReport {
    pub(crate) thread: ThreadReport,
    pub(crate) layer_time: Vec<Duration>,
    pub(crate) sink_time: Duration,
    pub(crate) locks: LockCounts,
}

/// The loop of one worker.
pub(crate) fn run_worker<'p>(
    ctx: &Ctx<'p>,
    side: &SideState<'p>,
    mut w: Worker<'p>,
) -> WorkerReport {
    let n = side.layers.len();
    let mut report = ThreadReport::new(w.name.clone(), w.side, ThreadRole::Worker, w.cpu);
    let mut c = Carrier {
        ctx,
        side,
        queue: VecDeque::new(),
        acts: Vec::with_capacity(4 * BATCH),
        to_line: VecDeque::new(),
        layer_time: vec![Duration::ZERO; n],
        sink_time: Duration::ZERO,
        calls: vec![0; n],
        locks: LockCounts::new(n),
    };
    if !ctx.pin(w.cpu, &w.name) {
        return WorkerReport {
            thread: report,
            layer_time: c.layer_time,
            sink_time: c.sink_time,
            locks: c.locks,
        };
    }
    let clock = CpuClock::start();
    let mut idler = Idler::new(ctx.cfg.idle, ctx.parker(w.me));
    let mut busy = BusyMeter::default();
    let mut next_poll = Instant::now();
    if side.initiator && w.me == sender_worker_id(0) {
        let now = Instant::now();
        for j in 0..n {
            let mut acts = Vec::new();
            lock_layer(&side.layers[j], &mut c.locks, j).connect(now, &mut acts);
            c.acts = acts;
            c.carry(j, Work::Poll(false), now);
        }
    }
    while !ctx.stopping() {
        let now = Instant::now();
        let mut work = 0u32;
        if c.to_line.len() < LOCAL_LIMIT {
            let wake_line = w.from_line.slots() * 2 >= w.from_line.buffer().capacity();
            for _ in 0..BATCH {
                match w.from_line.pop() {
                    Ok(Item::Sdu(b, _)) => c.carry(0, Work::FromBelow(b), now),
                    Ok(Item::Release) => {}
                    Err(_) => break,
                }
                work += 1;
            }
            if wake_line && work > 0 {
                ctx.wake(w.line);
            }
        }
        if side.initiator && ctx.sender_open.load(Ordering::SeqCst) && c.to_line.len() < LOCAL_LIMIT
        {
            let _ = ctx.first_send.set(now);
            for _ in 0..BATCH {
                let mut acts = std::mem::take(&mut c.acts);
                // Counted only when it sends: a look at a full window is a
                // poll, not work.
                let (mut top, wait) = lock_timed(&side.layers[n - 1]);
                if !top.wants_data() {
                    c.acts = acts;
                    break;
                }
                let made = {
                    let mut src = lock(&side.source);
                    if src.next >= ctx.cfg.messages {
                        None
                    } else {
                        src.make(ctx.pool)
                    }
                };
                let Some(b) = made else {
                    c.acts = acts;
                    break;
                };
                c.locks.record(n - 1, wait);
                // Only the entity's work is layer time (message generation
                // is the source's, as in layer-parallel mode).
                let t0 = c.timer(n - 1);
                top.send(b, Service::Data, now, &mut acts);
                drop(top);
                c.charge(n - 1, t0);
                c.acts = acts;
                c.carry(n - 1, Work::Poll(false), now);
                work += 1;
            }
            let all_made = lock(&side.source).next >= ctx.cfg.messages;
            if all_made && !side.released.swap(true, Ordering::SeqCst) {
                c.carry(n - 1, Work::Release, now);
            }
        }
        if work == 0 || now >= next_poll {
            for j in 0..n {
                c.carry(j, Work::Poll(work == 0), now);
            }
            next_poll = now + Duration::from_micros(50);
        }
        let mut moved = false;
        if !c.to_line.is_empty() && flush(&mut c.to_line, &mut w.to_line) {
            ctx.wake(w.line);
            moved = true;
        }
        if work > 0 || moved {
            busy.round(now, work);
            idler.reset();
            continue;
        }
        let deadline = (0..n)
            .filter_map(|j| lock(&side.layers[j]).next_deadline())
            .min();
        let wants_more = side.initiator
            && ctx.sender_open.load(Ordering::SeqCst)
            && lock(&side.source).next < ctx.cfg.messages
            && lock(&side.layers[n - 1]).wants_data();
        if wants_more {
            idler.reset();
            continue;
        }
        idler.idle(now, deadline, || !w.from_line.is_empty());
    }
    report.close(&clock, &busy, &idler);
    WorkerReport {
        thread: report,
        layer_time: c.layer_time,
        sink_time: c.sink_time,
        locks: c.locks,
    }
}

/// Drives a run-to-completion run with `k` workers per side: builds both
/// sides' locked layers, spawns the workers and the lines, waits for the end
/// and collects reports, per-layer times and counters.
pub(crate) fn run_rtc<'p>(
    ctx: &'p Ctx<'p>,
    k: usize,
    udp: Option<(UdpSocket, UdpSocket)>,
    stop: &AtomicBool,
    timed_out: &mut bool,
    interrupted: &mut bool,
) -> Result<Collected, PipelineError> {
    let cfg = ctx.cfg;
    let n = cfg.layers;
    let make_side = |initiator: bool| SideState {
        layers: (1..=n)
            .map(|l| {
                Mutex::new(Layer::new(
                    parallel::layer_config(cfg, l),
                    if initiator {
                        Role::Initiator
                    } else {
                        Role::Responder
                    },
                    ctx.pool,
                ))
            })
            .collect(),
        source: Mutex::new(Source::new(cfg)),
        sink: Mutex::new(Sink::new(cfg)),
        released: AtomicBool::new(false),
        initiator,
    };
    let sender = make_side(true);
    let receiver = make_side(false);
    let cap = cfg.queue_capacity;
    let mut workers = Vec::new();
    let mut ends = [
        LayerEnds {
            from_layers: Vec::new(),
            to_layers: Vec::new(),
            layer_parkers: Vec::new(),
        },
        LayerEnds {
            from_layers: Vec::new(),
            to_layers: Vec::new(),
            layer_parkers: Vec::new(),
        },
    ];
    for (si, side) in Side::BOTH.into_iter().enumerate() {
        for w in 0..k {
            let (down_tx, down_rx) = RingBuffer::new(cap);
            let (up_tx, up_rx) = RingBuffer::new(cap);
            let me = if si == 0 {
                sender_worker_id(w)
            } else {
                receiver_worker_id(k, w)
            };
            ends[si].from_layers.push(down_rx);
            ends[si].to_layers.push(up_tx);
            ends[si].layer_parkers.push(me);
            workers.push((
                si,
                Worker {
                    name: format!("{side} worker {w}"),
                    side,
                    me,
                    line: if si == 0 {
                        sender_line_id(k)
                    } else {
                        receiver_line_id(k)
                    },
                    cpu: ctx.cpu_for(me),
                    to_line: down_tx,
                    from_line: up_rx,
                },
            ));
        }
    }
    let [s_ends, r_ends] = ends;
    let mut collected = Collected::default();
    let mut layer_time = [vec![Duration::ZERO; n], vec![Duration::ZERO; n]];
    let mut locks = [LockCounts::new(n), LockCounts::new(n)];
    let spawned: Result<(), PipelineError> = std::thread::scope(|s| {
        let mut worker_handles = Vec::new();
        let mut line_handles = Vec::new();
        let fail_spawn = |e: PipelineError| {
            ctx.shutdown.store(true, Ordering::SeqCst);
            ctx.wake_all();
            e
        };
        let result = (|| {
            for (si, w) in workers {
                let side = if si == 0 { &sender } else { &receiver };
                let name = w.name.clone();
                let h = std::thread::Builder::new()
                    .name(short_name(&name))
                    .spawn_scoped(s, move || run_worker(ctx, side, w))
                    .map_err(|e| fail_spawn(spawn_err(&name, e)))?;
                worker_handles.push((name, si, h));
            }
            let (sf, rf) = line_threads(
                ctx,
                udp,
                [s_ends, r_ends],
                [sender_line_id(k), receiver_line_id(k)],
            )
            .map_err(fail_spawn)?;
            for (name, f) in [("sender line", sf), ("receiver line", rf)] {
                let h = std::thread::Builder::new()
                    .name(short_name(name))
                    .spawn_scoped(s, f)
                    .map_err(|e| fail_spawn(spawn_err(name, e)))?;
                line_handles.push((name.to_string(), h));
            }
            Ok(())
        })();
        if result.is_ok() {
            coordinate(
                ctx,
                stop,
                || {
                    worker_handles.iter().any(|(_, _, h)| h.is_finished())
                        || line_handles.iter().any(|(_, h)| h.is_finished())
                },
                timed_out,
                interrupted,
            );
        }
        for (name, si, h) in worker_handles {
            match h.join() {
                Ok(r) => {
                    for (acc, t) in layer_time[si].iter_mut().zip(&r.layer_time) {
                        *acc += *t;
                    }
                    // The sink runs under the top layer's lock: not layer work.
                    if let Some(top) = layer_time[si].last_mut() {
                        *top = top.saturating_sub(r.sink_time);
                    }
                    locks[si].add(&r.locks);
                    collected.threads.push(r.thread);
                }
                Err(_) => collected.panicked.push(name),
            }
        }
        for (name, h) in line_handles {
            match h.join() {
                Ok(r) => collected.threads.push(r),
                Err(_) => collected.panicked.push(name),
            }
        }
        result
    });
    spawned?;
    let counters = |side: &SideState<'_>| -> Vec<layer::LayerCounters> {
        side.layers
            .iter()
            .map(|l| l.lock().unwrap_or_else(|e| e.into_inner()).counters())
            .collect()
    };
    collected.rtc_counters = Some([counters(&sender), counters(&receiver)]);
    collected.rtc_layer_time = Some(layer_time);
    collected.rtc_locks = Some(locks);
    let src = sender
        .source
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .totals();
    *ctx.source.lock().unwrap_or_else(|e| e.into_inner()) = Some(src);
    let sink = std::mem::replace(
        &mut *receiver.sink.lock().unwrap_or_else(|e| e.into_inner()),
        Sink::new(cfg),
    );
    *ctx.sink.lock().unwrap_or_else(|e| e.into_inner()) = sink;
    Ok(collected)
}
