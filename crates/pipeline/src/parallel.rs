//! Layer-parallel mode: one thread per layer per side, joined by rtrb SPSC
//! queues in both directions; the queue element is a buffer handle.
//!
//! Threads, in parker/cpu-map order: the application source, sender layers
//! top..bottom, the sender line, the receiver line, receiver layers
//! bottom..top, the application sink (`2 * layers + 4` threads). The source
//! and sink are threads of their own so that generating and checking messages
//! is not charged to the top layer.

use std::collections::VecDeque;
use std::sync::atomic::Ordering;
use std::time::Instant;

use rtrb::{Consumer, Producer, PushError, RingBuffer};

use crate::idle::Idler;
use crate::layer::{Action, Layer, LayerConfig, Role, Service};
use crate::line::LayerEnds;
use std::net::UdpSocket;
use std::sync::atomic::AtomicBool;

use crate::line::line_threads;
use crate::results::Side;
use crate::runtime::{
    coordinate, spawn_in, BusyMeter, Collected, CpuClock, Ctx, Item, Occupancy, PipelineError,
    Source, ThreadReport, ThreadRole,
};
use crate::PipelineConfig;

/// Items taken from one queue per round.
pub(crate) const BATCH: usize = 16;
/// Items a thread keeps locally when the next queue is full before it stops
/// taking input.
pub(crate) const LOCAL_LIMIT: usize = 64;

/// Parker id of the source.
pub(crate) const SOURCE: usize = 0;

/// Parker/cpu-map id of sender layer `k` (1 = bottom).
pub(crate) fn sender_id(n: usize, k: usize) -> usize {
    1 + (n - k)
}

/// Parker/cpu-map id of receiver layer `k`.
pub(crate) fn receiver_id(n: usize, k: usize) -> usize {
    n + 2 + k
}

/// Parker id of the sender line.
pub(crate) fn sender_line_id(n: usize) -> usize {
    n + 1
}

/// Parker id of the receiver line.
pub(crate) fn receiver_line_id(n: usize) -> usize {
    n + 2
}

/// Parker id of the sink.
pub(crate) fn sink_id(n: usize) -> usize {
    2 * n + 3
}

/// Number of threads (and parkers) in this mode.
pub(crate) fn thread_count(n: usize) -> usize {
    2 * n + 4
}

/// The per-layer entity configuration of a run.
pub(crate) fn layer_config(cfg: &PipelineConfig, k: usize) -> LayerConfig {
    let mut c = LayerConfig::new(k as u8, cfg.window, cfg.retransmit_timeout);
    c.data_checksum = cfg.payload_checksum;
    c
}

/// Pushes as many pending items as fit; true if any went.
pub(crate) fn flush<'p>(q: &mut VecDeque<Item<'p>>, tx: &mut Producer<Item<'p>>) -> bool {
    let mut any = false;
    while let Some(item) = q.pop_front() {
        match tx.push(item) {
            Ok(()) => any = true,
            Err(PushError::Full(item)) => {
                q.push_front(item);
                break;
            }
        }
    }
    any
}

fn half_full<T>(c: &Consumer<T>) -> bool {
    c.slots() * 2 >= c.buffer().capacity()
}

/// The queues and neighbours of one layer thread.
pub(crate) struct LayerThread<'p> {
    pub(crate) name: String,
    pub(crate) side: Side,
    pub(crate) role: Role,
    pub(crate) k: usize,
    pub(crate) top: bool,
    pub(crate) me: usize,
    pub(crate) above: Option<usize>,
    pub(crate) below: usize,
    pub(crate) cpu: Option<usize>,
    pub(crate) from_above: Option<Consumer<Item<'p>>>,
    pub(crate) to_above: Option<Producer<Item<'p>>>,
    pub(crate) from_below: Consumer<Item<'p>>,
    pub(crate) to_below: Producer<Item<'p>>,
}

fn above_ready(rx: &Option<Consumer<Item<'_>>>, entity: &Layer<'_>) -> bool {
    match rx.as_ref().map(|c| c.peek()) {
        Some(Ok(Item::Sdu(_, Service::Data))) => entity.wants_data(),
        Some(Ok(Item::Sdu(_, Service::Expedited))) => entity.accepts_expedited(),
        Some(Ok(Item::Release)) => true,
        _ => false,
    }
}

/// The loop of one layer thread.
pub(crate) fn run_layer<'p>(ctx: &Ctx<'p>, mut t: LayerThread<'p>) -> ThreadReport {
    let mut report = ThreadReport::new(t.name.clone(), t.side, ThreadRole::Layer(t.k), t.cpu);
    if !ctx.pin(t.cpu, &t.name) {
        return report;
    }
    let clock = CpuClock::start();
    let mut idler = Idler::new(ctx.cfg.idle, ctx.parker(t.me));
    let mut entity = Layer::new(layer_config(ctx.cfg, t.k), t.role, ctx.pool);
    let mut acts: Vec<Action<'p>> = Vec::with_capacity(4 * BATCH);
    let mut pend_up: VecDeque<Item<'p>> = VecDeque::new();
    let mut pend_down: VecDeque<Item<'p>> = VecDeque::new();
    let mut occupancy = Occupancy::default();
    let mut busy = BusyMeter::default();
    let mut stray_up = 0u64;
    entity.connect(Instant::now(), &mut acts);
    while !ctx.stopping() {
        let now = Instant::now();
        let mut work = 0u32;
        // Sample the queue into this layer: from above on the sending side,
        // from below on the receiving side.
        let input_slots = match (&t.role, &t.from_above) {
            (Role::Initiator, Some(rx)) => rx.slots(),
            _ => t.from_below.slots(),
        };
        occupancy.sample(now, input_slots);
        if pend_up.len() < LOCAL_LIMIT {
            let wake_producer = half_full(&t.from_below);
            for _ in 0..BATCH {
                match t.from_below.pop() {
                    Ok(Item::Sdu(b, _)) => entity.on_pdu(b, now, &mut acts),
                    Ok(Item::Release) => {}
                    Err(_) => break,
                }
                work += 1;
            }
            if wake_producer && work > 0 {
                ctx.wake(t.below);
            }
        }
        if pend_down.len() < LOCAL_LIMIT {
            if let (Some(rx), Some(above)) = (t.from_above.as_mut(), t.above) {
                let wake_producer = half_full(rx);
                let mut taken = 0;
                for _ in 0..BATCH {
                    let take = match rx.peek() {
                        Ok(Item::Sdu(_, Service::Data)) => entity.wants_data(),
                        Ok(Item::Sdu(_, Service::Expedited)) => entity.accepts_expedited(),
                        Ok(Item::Release) => true,
                        Err(_) => false,
                    };
                    if !take {
                        break;
                    }
                    match rx.pop() {
                        Ok(Item::Sdu(b, s)) => entity.send(b, s, now, &mut acts),
                        Ok(Item::Release) => entity.release(now, &mut acts),
                        Err(_) => break,
                    }
                    taken += 1;
                }
                if wake_producer && taken > 0 {
                    ctx.wake(above);
                }
                work += taken;
            }
        }
        entity.poll(now, work == 0, &mut acts);
        for a in acts.drain(..) {
            match a {
                Action::Down(b, s) => pend_down.push_back(Item::Sdu(b, s)),
                Action::Up(b, s) => {
                    if t.to_above.is_some() {
                        pend_up.push_back(Item::Sdu(b, s));
                    } else {
                        stray_up += 1;
                    }
                }
                Action::Opened => {
                    if t.top && t.role == Role::Initiator {
                        ctx.sender_open.store(true, Ordering::SeqCst);
                        ctx.wake(SOURCE);
                    }
                }
                Action::Closed => {
                    if t.role == Role::Initiator {
                        if t.k > 1 {
                            pend_down.push_back(Item::Release);
                        } else {
                            ctx.sender_closed.store(true, Ordering::SeqCst);
                        }
                    }
                }
            }
        }
        let mut moved = false;
        if !pend_down.is_empty() && flush(&mut pend_down, &mut t.to_below) {
            ctx.wake(t.below);
            moved = true;
        }
        if let (Some(tx), Some(above)) = (t.to_above.as_mut(), t.above) {
            if !pend_up.is_empty() && flush(&mut pend_up, tx) {
                ctx.wake(above);
                moved = true;
            }
        }
        if work > 0 || moved {
            busy.round(now, work);
            idler.reset();
            continue;
        }
        let below_ready = pend_up.len() < LOCAL_LIMIT;
        let down_ready = pend_down.len() < LOCAL_LIMIT;
        idler.idle(now, entity.next_deadline(), || {
            (below_ready && !t.from_below.is_empty())
                || (down_ready && above_ready(&t.from_above, &entity))
        });
    }
    let c = entity.counters();
    report.close(&clock, &busy, &idler);
    report.messages = match t.role {
        Role::Initiator => c.data_sent,
        Role::Responder => c.data_delivered,
    };
    report.counters = Some(c);
    report.occupancy_mean = occupancy.mean();
    report.occupancy_max = occupancy.max();
    report.dropped = stray_up;
    report
}

/// The application source: waits until the top sender layer is open, then
/// generates every message and finally the end-of-stream mark.
pub(crate) fn run_source<'p>(
    ctx: &Ctx<'p>,
    cpu: Option<usize>,
    below: usize,
    mut tx: Producer<Item<'p>>,
) -> ThreadReport {
    let mut report = ThreadReport::new(
        "sender source".into(),
        Side::Sender,
        ThreadRole::Source,
        cpu,
    );
    if !ctx.pin(cpu, &report.name) {
        return report;
    }
    let clock = CpuClock::start();
    let mut idler = Idler::new(ctx.cfg.idle, ctx.parker(SOURCE));
    let mut source = Source::new(ctx.cfg);
    let mut busy = BusyMeter::default();
    let mut pending: Option<Item<'p>> = None;
    let mut released = false;
    // The source stays until the run ends (an early exit would look like a
    // failed thread to the coordinator).
    while !ctx.stopping() {
        let now = Instant::now();
        if released {
            idler.idle(now, None, || false);
            continue;
        }
        if !ctx.sender_open.load(Ordering::SeqCst) {
            idler.idle(now, None, || ctx.sender_open.load(Ordering::SeqCst));
            continue;
        }
        let _ = ctx.first_send.set(now);
        let mut pushed = 0u32;
        for _ in 0..BATCH {
            let item = match pending.take() {
                Some(i) => i,
                None if source.next < ctx.cfg.messages => match source.make(ctx.pool) {
                    Some(b) => Item::Sdu(b, Service::Data),
                    None => break,
                },
                None => Item::Release,
            };
            let is_release = matches!(item, Item::Release);
            match tx.push(item) {
                Ok(()) => {
                    pushed += 1;
                    if is_release {
                        released = true;
                        break;
                    }
                }
                Err(PushError::Full(item)) => {
                    pending = Some(item);
                    break;
                }
            }
        }
        if pushed > 0 {
            ctx.wake(below);
            busy.round(now, pushed);
            idler.reset();
        } else {
            idler.idle(now, None, || !tx.is_full());
        }
    }
    *ctx.source.lock().unwrap_or_else(|e| e.into_inner()) = Some(source.totals());
    report.messages = source.next;
    report.close(&clock, &busy, &idler);
    report
}

/// The application sink: checks every delivered message.
pub(crate) fn run_sink<'p>(
    ctx: &Ctx<'p>,
    cpu: Option<usize>,
    me: usize,
    above_of: usize,
    mut rx: Consumer<Item<'p>>,
) -> ThreadReport {
    let mut report = ThreadReport::new(
        "receiver sink".into(),
        Side::Receiver,
        ThreadRole::Sink,
        cpu,
    );
    if !ctx.pin(cpu, &report.name) {
        return report;
    }
    let clock = CpuClock::start();
    let mut idler = Idler::new(ctx.cfg.idle, ctx.parker(me));
    let mut sink = crate::runtime::Sink::new(ctx.cfg);
    let mut busy = BusyMeter::default();
    let mut occupancy = Occupancy::default();
    while !ctx.stopping() {
        let now = Instant::now();
        occupancy.sample(now, rx.slots());
        let wake_producer = half_full(&rx);
        let mut n = 0u32;
        for _ in 0..BATCH {
            match rx.pop() {
                Ok(Item::Sdu(b, Service::Data)) => {
                    if sink.accept(b.as_slice(), Instant::now()) {
                        ctx.sink_done.store(true, Ordering::SeqCst);
                    }
                }
                Ok(Item::Sdu(_, Service::Expedited)) => sink.unexpected("expedited SDU"),
                Ok(Item::Release) => {}
                Err(_) => break,
            }
            n += 1;
        }
        if n > 0 {
            if wake_producer {
                ctx.wake(above_of);
            }
            busy.round(now, n);
            idler.reset();
        } else {
            idler.idle(now, None, || !rx.is_empty());
        }
    }
    report.messages = sink.delivered;
    report.occupancy_mean = occupancy.mean();
    report.occupancy_max = occupancy.max();
    *ctx.sink.lock().unwrap_or_else(|e| e.into_inner()) = sink;
    report.close(&clock, &busy, &idler);
    report
}

/// All queues of a layer-parallel run, before they are handed to threads.
pub(crate) struct Wiring<'p> {
    pub(crate) source_tx: Producer<Item<'p>>,
    pub(crate) sink_rx: Consumer<Item<'p>>,
    pub(crate) layers: Vec<LayerThread<'p>>,
    pub(crate) sender_line: LayerEnds<'p>,
    pub(crate) receiver_line: LayerEnds<'p>,
}

/// Builds every queue and layer thread description.
pub(crate) fn wire<'p>(ctx: &Ctx<'p>) -> Wiring<'p> {
    let n = ctx.cfg.layers;
    let cap = ctx.cfg.queue_capacity;
    let q = || RingBuffer::<Item<'p>>::new(cap);
    // Sender: down[k] feeds layer k from above (k = 1..=n), down[0] feeds the line.
    let (mut s_down_tx, mut s_down_rx): (Vec<_>, Vec<_>) = (0..=n)
        .map(|_| q())
        .map(|(p, c)| (Some(p), Some(c)))
        .unzip();
    // Sender: up[k] feeds layer k from below (k = 1..=n); index 0 unused.
    let (mut s_up_tx, mut s_up_rx): (Vec<_>, Vec<_>) = (0..=n)
        .map(|_| q())
        .map(|(p, c)| (Some(p), Some(c)))
        .unzip();
    // Receiver: up[k] feeds layer k from below, up[n + 1] feeds the sink.
    let (mut r_up_tx, mut r_up_rx): (Vec<_>, Vec<_>) = (0..=n + 1)
        .map(|_| q())
        .map(|(p, c)| (Some(p), Some(c)))
        .unzip();
    // Receiver: down[k] feeds layer k from above (k = 1..n-1), down[0] feeds the line.
    let (mut r_down_tx, mut r_down_rx): (Vec<_>, Vec<_>) = (0..=n)
        .map(|_| q())
        .map(|(p, c)| (Some(p), Some(c)))
        .unzip();

    let mut layers = Vec::with_capacity(2 * n);
    for k in (1..=n).rev() {
        let me = sender_id(n, k);
        layers.push(LayerThread {
            name: format!("sender layer {k}"),
            side: Side::Sender,
            role: Role::Initiator,
            k,
            top: k == n,
            me,
            above: Some(if k == n { SOURCE } else { sender_id(n, k + 1) }),
            below: if k == 1 {
                sender_line_id(n)
            } else {
                sender_id(n, k - 1)
            },
            cpu: ctx.cpu_for(me),
            from_above: s_down_rx[k].take(),
            to_above: if k < n { s_up_tx[k + 1].take() } else { None },
            from_below: s_up_rx[k].take().unwrap_or_else(unreachable_queue),
            to_below: s_down_tx[k - 1].take().unwrap_or_else(unreachable_queue_p),
        });
    }
    for k in 1..=n {
        let me = receiver_id(n, k);
        layers.push(LayerThread {
            name: format!("receiver layer {k}"),
            side: Side::Receiver,
            role: Role::Responder,
            k,
            top: k == n,
            me,
            above: Some(if k == n {
                sink_id(n)
            } else {
                receiver_id(n, k + 1)
            }),
            below: if k == 1 {
                receiver_line_id(n)
            } else {
                receiver_id(n, k - 1)
            },
            cpu: ctx.cpu_for(me),
            from_above: if k < n { r_down_rx[k].take() } else { None },
            to_above: r_up_tx[k + 1].take(),
            from_below: r_up_rx[k].take().unwrap_or_else(unreachable_queue),
            to_below: r_down_tx[k - 1].take().unwrap_or_else(unreachable_queue_p),
        });
    }
    // With no layers (the line alone) the sending line reads the source's
    // queue and has nothing to send up; the receiving line feeds the sink.
    let sender_line = LayerEnds {
        from_layers: s_down_rx[0].take().into_iter().collect(),
        to_layers: s_up_tx
            .get_mut(1)
            .and_then(Option::take)
            .into_iter()
            .collect(),
        layer_parkers: vec![if n == 0 { SOURCE } else { sender_id(n, 1) }],
    };
    let receiver_line = LayerEnds {
        from_layers: r_down_rx[0].take().into_iter().collect(),
        to_layers: r_up_tx[1].take().into_iter().collect(),
        layer_parkers: vec![if n == 0 {
            sink_id(n)
        } else {
            receiver_id(n, 1)
        }],
    };
    Wiring {
        source_tx: s_down_tx[n].take().unwrap_or_else(unreachable_queue_p),
        sink_rx: r_up_rx[n + 1].take().unwrap_or_else(unreachable_queue),
        layers,
        sender_line,
        receiver_line,
    }
}

// Every queue end above is taken exactly once by construction; these fallbacks
// (fresh, unconnected queues) keep the code free of unwrap.
fn unreachable_queue<'p>() -> Consumer<Item<'p>> {
    RingBuffer::new(1).1
}

fn unreachable_queue_p<'p>() -> Producer<Item<'p>> {
    RingBuffer::new(1).0
}

/// Drives a layer-parallel run: spawns the source, every layer, both lines
/// and the sink, waits for the end and collects their reports.
pub(crate) fn run_parallel<'p>(
    ctx: &'p Ctx<'p>,
    udp: Option<(UdpSocket, UdpSocket)>,
    stop: &AtomicBool,
    timed_out: &mut bool,
    interrupted: &mut bool,
) -> Result<Collected, PipelineError> {
    let cfg = ctx.cfg;
    let n = cfg.layers;
    if n == 0 {
        // The line alone: no connection to open or close.
        ctx.sender_open.store(true, Ordering::SeqCst);
        ctx.sender_closed.store(true, Ordering::SeqCst);
    }
    let w = wire(ctx);
    let mut collected = Collected::default();
    let spawned: Result<(), PipelineError> = std::thread::scope(|s| {
        let mut handles = Vec::new();
        let mut spawn = |name: String, f: Box<dyn FnOnce() -> ThreadReport + Send + 'p>| {
            spawn_in(s, &mut handles, name, f)
        };
        let result = (|| {
            let source_tx = w.source_tx;
            spawn(
                "sender source".into(),
                Box::new(move || run_source(ctx, ctx.cpu_for(SOURCE), sender_id(n, n), source_tx)),
            )?;
            for t in w.layers {
                let name = t.name.clone();
                spawn(name, Box::new(move || run_layer(ctx, t)))?;
            }
            let (sf, rf) = line_threads(
                ctx,
                udp,
                [w.sender_line, w.receiver_line],
                [sender_line_id(n), receiver_line_id(n)],
            )?;
            spawn("sender line".into(), sf)?;
            spawn("receiver line".into(), rf)?;
            let sink_rx = w.sink_rx;
            let sink = sink_id(n);
            spawn(
                "receiver sink".into(),
                Box::new(move || {
                    run_sink(ctx, ctx.cpu_for(sink), sink, receiver_id(n, n), sink_rx)
                }),
            )?;
            Ok(())
        })();
        if result.is_ok() {
            coordinate(
                ctx,
                stop,
                || handles.iter().any(|(_, h)| h.is_finished()),
                timed_out,
                interrupted,
            );
        } else {
            ctx.shutdown.store(true, Ordering::SeqCst);
            ctx.wake_all();
        }
        for (name, h) in handles {
            match h.join() {
                Ok(r) => collected.threads.push(r),
                Err(_) => collected.panicked.push(name),
            }
        }
        result
    });
    spawned?;
    Ok(collected)
}
