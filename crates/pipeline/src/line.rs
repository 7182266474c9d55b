//! The line at the bottom of each side: one thread per side that moves frames
//! between the bottom layer(s) and the wire.
//!
//! * `memory`: an in-process wire. The sending line thread paces frames at the
//!   configured bandwidth (a frame of `n` bytes occupies the line for
//!   `8n / bandwidth`; a thread that was descheduled may catch up by at most
//!   [`BURST`]), stamps each with its arrival time (end of transmission plus
//!   latency) and passes the *handle* through an SPSC queue to the peer line
//!   thread, which releases it to the bottom layer once it has arrived.
//!   Seeded impairments: loss (dropped), duplication (a second handle to the
//!   same buffer), reordering (the frame is held back and sent after the next
//!   one, or after [`HOLD_MAX`] if none comes).
//! * `udp`: one datagram per frame over two connected UDP sockets; seeded loss
//!   is injected before `send`. The receiving thread reads into a fresh pool
//!   buffer. Sockets cannot unpark a thread, so a UDP line parks at most
//!   [`UDP_MAX_PARK`].

use std::collections::VecDeque;
use std::io::ErrorKind;
use std::net::UdpSocket;
use std::time::{Duration, Instant};

use rtrb::{Consumer, Producer, PushError, RingBuffer};

use crate::config::{LinkConfig, WIRE_QUEUE};
use crate::idle::{Idler, Rng};
use crate::layer::Service;
use crate::pool::Buf;
use crate::results::Side;
use crate::runtime::{BusyMeter, CpuClock, Ctx, Item, PipelineError, ThreadReport, ThreadRole};

/// Most catch-up a paced line allows after its thread was descheduled.
pub(crate) const BURST: Duration = Duration::from_micros(100);
/// Longest a reordered frame is held back.
pub(crate) const HOLD_MAX: Duration = Duration::from_micros(200);
/// Longest park of a UDP line thread.
pub(crate) const UDP_MAX_PARK: Duration = Duration::from_micros(100);
const LOCAL_LIMIT: usize = 64;

/// A frame on the memory wire and the instant it arrives.
pub(crate) type Wired<'p> = (Instant, Buf<'p>);

/// The bottom layer end(s) of a line thread: one queue pair per bottom-layer
/// thread (one in layer-parallel mode, one per worker in run-to-completion).
pub(crate) struct LayerEnds<'p> {
    pub(crate) from_layers: Vec<Consumer<Item<'p>>>,
    pub(crate) to_layers: Vec<Producer<Item<'p>>>,
    /// Parker ids of the threads behind `to_layers`.
    pub(crate) layer_parkers: Vec<usize>,
}

impl<'p> LayerEnds<'p> {
    fn pop(&mut self, rr: &mut usize) -> Option<Buf<'p>> {
        let n = self.from_layers.len();
        for k in 0..n {
            let i = (*rr + k) % n;
            if let Ok(item) = self.from_layers[i].pop() {
                *rr = i + 1;
                match item {
                    Item::Sdu(b, _) => return Some(b),
                    Item::Release => continue,
                }
            }
        }
        None
    }

    /// Bit `i` set if queue `i` from the layers is at least half full.
    fn half_full(&self) -> u64 {
        let mut m = 0u64;
        for (i, c) in self.from_layers.iter().enumerate().take(64) {
            if c.slots() * 2 >= c.buffer().capacity() {
                m |= 1 << i;
            }
        }
        m
    }

    /// Wakes the producers of the queues in `mask` (space was made in them).
    fn wake_producers(&self, ctx: &Ctx<'p>, mask: u64) {
        for (i, id) in self.layer_parkers.iter().enumerate().take(64) {
            if mask & (1 << i) != 0 {
                ctx.wake(*id);
            }
        }
    }

    fn has_input(&self) -> bool {
        self.from_layers.iter().any(|c| !c.is_empty())
    }

    /// Pushes received frames up, round robin; returns true if any went.
    fn push_up(&mut self, pending: &mut VecDeque<Buf<'p>>, rr: &mut usize, ctx: &Ctx<'p>) -> bool {
        let n = self.to_layers.len();
        let mut woke = vec![false; n];
        let mut any = false;
        'outer: while let Some(b) = pending.pop_front() {
            let mut item = Item::Sdu(b, Service::Data);
            for k in 0..n {
                let i = (*rr + k) % n;
                match self.to_layers[i].push(item) {
                    Ok(()) => {
                        *rr = i + 1;
                        woke[i] = true;
                        any = true;
                        continue 'outer;
                    }
                    Err(PushError::Full(back)) => item = back,
                }
            }
            if let Item::Sdu(b, _) = item {
                pending.push_front(b);
            }
            break;
        }
        for (i, w) in woke.into_iter().enumerate() {
            if w {
                ctx.wake(self.layer_parkers[i]);
            }
        }
        any
    }
}

/// Memory-link parameters for one direction.
#[derive(Clone, Copy, Debug)]
pub(crate) struct MemoryParams {
    pub(crate) bandwidth_bit_s: Option<u64>,
    pub(crate) latency: Duration,
    pub(crate) loss: f64,
    pub(crate) reorder: f64,
    pub(crate) duplicate: f64,
    pub(crate) seed: u64,
}

fn tx_time(len: usize, bw: Option<u64>) -> Duration {
    match bw {
        Some(b) if b > 0 => {
            Duration::from_nanos(((len as u128 * 8 * 1_000_000_000) / u128::from(b)) as u64)
        }
        _ => Duration::ZERO,
    }
}

/// The thread of one side's memory line.
#[allow(clippy::too_many_arguments)]
pub(crate) fn memory_line<'p>(
    ctx: &Ctx<'p>,
    name: String,
    side: Side,
    me: usize,
    peer: usize,
    cpu: Option<usize>,
    mut ends: LayerEnds<'p>,
    mut wire_tx: Producer<Wired<'p>>,
    mut wire_rx: Consumer<Wired<'p>>,
    params: MemoryParams,
) -> ThreadReport {
    let mut report = ThreadReport::new(name, side, ThreadRole::Line, cpu);
    if !ctx.pin(cpu, &report.name) {
        return report;
    }
    let clock = CpuClock::start();
    let mut idler = Idler::new(ctx.cfg.idle, ctx.parker(me));
    let mut rng = Rng::new(params.seed);
    let mut next_free = Instant::now();
    let mut held: Option<(Buf<'p>, Instant)> = None;
    let mut to_wire: VecDeque<Wired<'p>> = VecDeque::new();
    let mut to_layers: VecDeque<Buf<'p>> = VecDeque::new();
    let (mut rr_in, mut rr_out) = (0usize, 0usize);
    let mut busy = BusyMeter::default();
    let bw = params.bandwidth_bit_s;
    while !ctx.stopping() {
        let now = Instant::now();
        let mut work = 0u32;
        // Transmit.
        let half = ends.half_full();
        let before = report.messages;
        while to_wire.len() < LOCAL_LIMIT && (bw.is_none() || next_free <= now) {
            let Some(frame) = ends.pop(&mut rr_in) else {
                break;
            };
            work += 1;
            report.messages += 1;
            if rng.chance(params.loss) {
                report.dropped += 1;
                continue;
            }
            let start = next_free.max(now.checked_sub(BURST).unwrap_or(now));
            next_free = start + tx_time(frame.len(), bw);
            let arrival = next_free + params.latency;
            if held.is_none() && rng.chance(params.reorder) {
                report.reordered += 1;
                held = Some((frame, now));
                continue;
            }
            if rng.chance(params.duplicate) {
                report.duplicated += 1;
                to_wire.push_back((arrival, frame.clone()));
            }
            to_wire.push_back((arrival, frame));
            if let Some((h, _)) = held.take() {
                to_wire.push_back((arrival, h));
            }
        }
        if report.messages > before {
            ends.wake_producers(ctx, half);
        }
        if held
            .as_ref()
            .is_some_and(|(_, since)| now >= *since + HOLD_MAX)
        {
            if let Some((h, _)) = held.take() {
                to_wire.push_back((next_free.max(now) + params.latency, h));
            }
        }
        let mut pushed = false;
        while let Some(w) = to_wire.pop_front() {
            match wire_tx.push(w) {
                Ok(()) => pushed = true,
                Err(PushError::Full(w)) => {
                    to_wire.push_front(w);
                    break;
                }
            }
        }
        if pushed {
            ctx.wake(peer);
        }
        // Receive.
        while to_layers.len() < LOCAL_LIMIT {
            match wire_rx.peek() {
                Ok((arrival, _)) if *arrival <= now => {}
                _ => break,
            }
            if let Ok((_, b)) = wire_rx.pop() {
                to_layers.push_back(b);
                work += 1;
            }
        }
        if !to_layers.is_empty() && ends.push_up(&mut to_layers, &mut rr_out, ctx) {
            work += 1;
        }
        if work > 0 {
            busy.round(now, work);
            idler.reset();
            continue;
        }
        let mut deadline = wire_rx.peek().ok().map(|(a, _)| *a);
        if bw.is_some() && next_free > now {
            deadline = Some(deadline.map_or(next_free, |d| d.min(next_free)));
        }
        if let Some((_, since)) = &held {
            let t = *since + HOLD_MAX;
            deadline = Some(deadline.map_or(t, |d| d.min(t)));
        }
        let blocked_tx = bw.is_some() && next_free > now;
        idler.idle(now, deadline, || {
            (!blocked_tx && ends.has_input())
                || wire_rx.peek().is_ok_and(|(a, _)| *a <= Instant::now())
        });
    }
    report.close(&clock, &busy, &idler);
    report
}

/// The thread of one side's UDP line.
#[allow(clippy::too_many_arguments)]
pub(crate) fn udp_line<'p>(
    ctx: &Ctx<'p>,
    name: String,
    side: Side,
    me: usize,
    cpu: Option<usize>,
    mut ends: LayerEnds<'p>,
    sock: UdpSocket,
    loss: f64,
    seed: u64,
) -> ThreadReport {
    let mut report = ThreadReport::new(name, side, ThreadRole::Line, cpu);
    if !ctx.pin(cpu, &report.name) {
        return report;
    }
    let clock = CpuClock::start();
    let mut idle_cfg = ctx.cfg.idle;
    idle_cfg.max_park = idle_cfg.max_park.min(UDP_MAX_PARK);
    let mut idler = Idler::new(idle_cfg, ctx.parker(me));
    let mut rng = Rng::new(seed);
    let mut tx_pending: Option<Buf<'p>> = None;
    let mut spare: Option<Buf<'p>> = None;
    let mut to_layers: VecDeque<Buf<'p>> = VecDeque::new();
    let (mut rr_in, mut rr_out) = (0usize, 0usize);
    let mut busy = BusyMeter::default();
    let cap = ctx.pool.buffer_size();
    'run: while !ctx.stopping() {
        let now = Instant::now();
        let mut work = 0u32;
        // Transmit.
        let half = ends.half_full();
        let before = report.messages;
        for _ in 0..LOCAL_LIMIT {
            let frame = match tx_pending.take() {
                Some(f) => f,
                None => match ends.pop(&mut rr_in) {
                    Some(f) => {
                        report.messages += 1;
                        if rng.chance(loss) {
                            report.dropped += 1;
                            work += 1;
                            continue;
                        }
                        f
                    }
                    None => break,
                },
            };
            match sock.send(frame.as_slice()) {
                Ok(_) => work += 1,
                Err(e) if e.kind() == ErrorKind::WouldBlock || e.raw_os_error() == Some(105) => {
                    // Socket buffer full (EAGAIN / ENOBUFS): retry later.
                    tx_pending = Some(frame);
                    break;
                }
                Err(e) if e.kind() == ErrorKind::ConnectionRefused => {
                    // An earlier datagram found no socket: the frame is lost.
                    report.dropped += 1;
                }
                Err(e) => {
                    ctx.fail(format!("{}: send: {e}", report.name));
                    break 'run;
                }
            }
        }
        if report.messages > before {
            ends.wake_producers(ctx, half);
        }
        // Receive.
        while to_layers.len() < LOCAL_LIMIT {
            let Some(mut b) = spare.take().or_else(|| ctx.pool.alloc()) else {
                break;
            };
            let view = match b.set_view(0, cap) {
                Ok(v) => v,
                Err(e) => {
                    ctx.fail(format!("{}: receive buffer: {e}", report.name));
                    break 'run;
                }
            };
            match sock.recv(view) {
                Ok(n) => {
                    b.truncate(n);
                    to_layers.push_back(b);
                    work += 1;
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => {
                    spare = Some(b);
                    break;
                }
                Err(e) if e.kind() == ErrorKind::ConnectionRefused => {
                    spare = Some(b);
                }
                Err(e) => {
                    ctx.fail(format!("{}: recv: {e}", report.name));
                    break 'run;
                }
            }
        }
        if !to_layers.is_empty() && ends.push_up(&mut to_layers, &mut rr_out, ctx) {
            work += 1;
        }
        if work > 0 {
            busy.round(now, work);
            idler.reset();
            continue;
        }
        idler.idle(now, None, || ends.has_input());
    }
    report.close(&clock, &busy, &idler);
    report
}

/// The body of a line thread.
type LineFn<'a> = Box<dyn FnOnce() -> ThreadReport + Send + 'a>;

/// The sender's and the receiver's line threads for `ctx.cfg.link` (one
/// construction for both modes): `ends` are each side's queues to its bottom
/// layer(s), `ids` the two line threads' parker ids.
pub(crate) fn line_threads<'p>(
    ctx: &'p Ctx<'p>,
    udp: Option<(UdpSocket, UdpSocket)>,
    ends: [LayerEnds<'p>; 2],
    ids: [usize; 2],
) -> Result<(LineFn<'p>, LineFn<'p>), PipelineError> {
    let cfg = ctx.cfg;
    let [s_ends, r_ends] = ends;
    let [sid, rid] = ids;
    let (s_seed, r_seed) = (cfg.seed ^ 0x5e4d, cfg.seed ^ 0x4ece);
    Ok(match (&cfg.link, udp) {
        (
            LinkConfig::Memory {
                bandwidth_bit_s,
                latency,
                loss,
                reorder,
                duplicate,
            },
            _,
        ) => {
            let (a_tx, a_rx) = RingBuffer::new(WIRE_QUEUE);
            let (b_tx, b_rx) = RingBuffer::new(WIRE_QUEUE);
            let p = MemoryParams {
                bandwidth_bit_s: *bandwidth_bit_s,
                latency: *latency,
                loss: *loss,
                reorder: *reorder,
                duplicate: *duplicate,
                seed: s_seed,
            };
            let q = MemoryParams { seed: r_seed, ..p };
            (
                Box::new(move || {
                    memory_line(
                        ctx,
                        "sender line".into(),
                        Side::Sender,
                        sid,
                        rid,
                        ctx.cpu_for(sid),
                        s_ends,
                        a_tx,
                        b_rx,
                        p,
                    )
                }),
                Box::new(move || {
                    memory_line(
                        ctx,
                        "receiver line".into(),
                        Side::Receiver,
                        rid,
                        sid,
                        ctx.cpu_for(rid),
                        r_ends,
                        b_tx,
                        a_rx,
                        q,
                    )
                }),
            )
        }
        (LinkConfig::Udp { loss, .. }, Some((a, b))) => {
            let loss = *loss;
            (
                Box::new(move || {
                    udp_line(
                        ctx,
                        "sender line".into(),
                        Side::Sender,
                        sid,
                        ctx.cpu_for(sid),
                        s_ends,
                        a,
                        loss,
                        s_seed,
                    )
                }),
                Box::new(move || {
                    udp_line(
                        ctx,
                        "receiver line".into(),
                        Side::Receiver,
                        rid,
                        ctx.cpu_for(rid),
                        r_ends,
                        b,
                        loss,
                        r_seed,
                    )
                }),
            )
        }
        (LinkConfig::Udp { .. }, None) => {
            return Err(PipelineError::Thread("udp sockets missing".into()));
        }
    })
}
