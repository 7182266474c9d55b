//! The proxy's io_uring relay (`--io uring`): one ring on the proxy's
//! thread, no readiness events and no copies in user space.
//!
//! The listener has a multishot accept. Each accepted client gets a backend
//! socket and an `IORING_OP_CONNECT`; once connected, both sockets of the
//! pair get a multishot receive that the kernel fills into buffers of one
//! registered provided-buffer ring. A received buffer is sent as it is to
//! the other socket (`IORING_OP_SEND` with `MSG_WAITALL`, one send in flight
//! per direction so the bytes stay in order) and goes back to the buffer
//! ring only when that send completed. Every entry a turn queues goes to the
//! kernel with the turn's wait, in one `io_uring_enter`. The ring is
//! `SINGLE_ISSUER` + `DEFER_TASKRUN` (completions are posted only while the
//! loop waits), else `COOP_TASKRUN`, else plain task work.
//!
//! Back-pressure: a direction with `buffer` bytes (or [`MAX_HELD_CHUNKS`]
//! buffers) received and not yet sent has its receive cancelled, and
//! re-armed when its sends catch up, so a client that does not read holds
//! at most that much of the proxy's memory. The ring starts with
//! [`BUFFER_STEP`] buffers (a working set that stays in cache); a receive
//! that finds it empty ends (`ENOBUFS`), the ring gets [`BUFFER_STEP`] more
//! (up to [`BUFFERS`]), and the receive is re-armed.
//!
//! Ends: a receive that returns 0 (the peer's FIN) shuts down the other
//! socket's write side once everything before it was sent; with both
//! directions shut the pair closes. A receive or send error (a reset) closes
//! the pair with a reset on both sockets (linger 0), so each peer sees an
//! error, not an end. A failing connection costs only its pair.
//!
//! Every operation's user data carries its kind, the pair's slot and the
//! slot's generation (`Tag`). A closing pair first cancels its operations
//! in flight; its descriptors are closed only after those entries went to
//! the kernel, and its slot is reused only once every operation of it has
//! completed, so no completion can be taken for another pair's.
//!
//! Features are probed at start; what the kernel lacks is dropped with a
//! message on stderr naming the fallback (one-shot accept, one-shot
//! receive, `COOP_TASKRUN`). Without io_uring, or without buffer rings
//! (Linux 5.19), the proxy stops with an error that says so.

mod buffers;
mod flow;
mod pairs;
mod setup;

use super::{health_loop, ProxyBackendStats, ProxyConfig, ProxyStats};
use crate::policy::Balancer;
use buffers::Buffers;
use connlab_os::reserve::is_descriptor_limit;
use io_uring::{cqueue, opcode, squeue, types, IoUring};
use setup::{build, note, Features};
use std::collections::VecDeque;
use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Submission queue entries (the completion queue has four times as many).
const ENTRIES: u32 = 1024;
/// Bytes per receive buffer.
pub const CHUNK: usize = 16 * 1024;
/// Buffers in the ring at most (a power of two, as a buffer ring needs).
pub const BUFFERS: u16 = 1024;
/// Buffers provided at start, and added each time a receive finds none.
///
/// The kernel takes buffers from the ring's head and they come back at its
/// tail, so the loop cycles through every buffer provided: 64 of them
/// (1 MiB) stay in the CPU's cache where all 1024 (16 MiB) would not.
pub const BUFFER_STEP: u16 = 64;
/// Completions a batched wait ([`ProxyConfig::uring_min_wait`]) waits for.
pub const BATCH: usize = 32;
/// The buffer group id.
const GROUP: u16 = 0;
/// A direction holding this many received buffers not yet sent stops
/// receiving (small segments would otherwise drain the ring under the byte
/// bound).
pub const MAX_HELD_CHUNKS: usize = 16;

/// Kinds of operation, in the top bits of the user data.
const ACCEPT: u8 = 1;
const HEALTH: u8 = 2;
const STOP: u8 = 3;
const CONNECT: u8 = 4;
const RECV: u8 = 5;
const SEND: u8 = 6;
const CANCEL: u8 = 7;

/// Bits of the slot index in a tag: slots are never more than this.
const SLOT_BITS: u32 = 24;
const SLOT_MASK: u64 = (1 << SLOT_BITS) - 1;

/// What an operation's user data says: the operation, the direction it
/// serves (0: client to backend, 1: backend to client), the buffer a send
/// carries, and the pair's slot in its generation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Tag {
    kind: u8,
    dir: usize,
    bid: u16,
    generation: u16,
    slot: usize,
}

impl Tag {
    /// Kind in bits 60..64, direction in bit 56, buffer in 40..56,
    /// generation in 24..40, slot in 0..24.
    fn encode(self) -> u64 {
        u64::from(self.kind & 0xf) << 60
            | (self.dir as u64 & 1) << 56
            | u64::from(self.bid) << 40
            | u64::from(self.generation) << 24
            | (self.slot as u64 & SLOT_MASK)
    }

    fn decode(data: u64) -> Tag {
        Tag {
            kind: (data >> 60) as u8,
            dir: (data >> 56) as usize & 1,
            bid: (data >> 40) as u16,
            generation: (data >> 24) as u16,
            slot: (data & SLOT_MASK) as usize,
        }
    }
}

fn tag(kind: u8, dir: usize, bid: u16, generation: u16, slot: usize) -> u64 {
    Tag {
        kind,
        dir,
        bid,
        generation,
        slot,
    }
    .encode()
}

/// Bytes received into one buffer and not yet sent on.
#[derive(Clone, Copy, Debug)]
struct Chunk {
    bid: u16,
    start: usize,
    end: usize,
}

/// The state of a direction's receive.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Recv {
    /// None in flight.
    Idle,
    /// In flight (multishot: until a completion without `MORE`).
    Armed,
    /// A cancel is on its way; completions still come until the last one.
    Cancelling,
}

/// One direction of a pair: received from socket `dir`, sent to `1 - dir`.
#[derive(Debug)]
struct Dir {
    recv: Recv,
    /// The source's end was received.
    eof: bool,
    /// The destination's write side was shut down (after `eof` and the
    /// last send).
    shut: bool,
    /// The receive ended for want of buffers: re-armed when some come back.
    starved: bool,
    /// Received, not yet sent, in order; the front is in flight when
    /// `sending`.
    queue: VecDeque<Chunk>,
    sending: bool,
    /// Bytes in `queue`.
    held: usize,
}

impl Dir {
    fn new() -> Dir {
        Dir {
            recv: Recv::Idle,
            eof: false,
            shut: false,
            starved: false,
            queue: VecDeque::new(),
            sending: false,
            held: 0,
        }
    }
}

/// One relayed connection: the client and its backend.
struct Pair {
    generation: u16,
    /// Client and backend; taken when the pair closes.
    fds: [Option<OwnedFd>; 2],
    /// The same descriptors' numbers, for entries.
    raw: [RawFd; 2],
    /// Where the backend connect goes; boxed so its address stays put
    /// while the connect is in flight.
    addr: Box<socket2::SockAddr>,
    backend_idx: usize,
    tries: usize,
    connecting: bool,
    dirs: [Dir; 2],
    /// Operations in flight (a multishot receive counts once, until its
    /// last completion); the slot is reused only when none is left.
    ops: u32,
    /// Cancelled and its descriptors released; waiting for `ops` to reach 0.
    closed: bool,
    last_active: Instant,
}

/// The loop's state.
struct Relay<'c> {
    ring: IoUring,
    features: Features,
    buffers: Buffers,
    pairs: Vec<Option<Pair>>,
    /// Per slot, the generation its next pair gets.
    generations: Vec<u16>,
    free: Vec<usize>,
    balancer: Balancer,
    stats: ProxyStats,
    /// Descriptors of closed pairs: closed once the entries queued for them
    /// (their cancels) went to the kernel.
    closing: Vec<OwnedFd>,
    listen_fd: RawFd,
    accept_armed: bool,
    /// Accept stopped on EMFILE/ENFILE: re-armed when a pair is freed.
    accept_paused: bool,
    /// Receives that ended for want of buffers (slot, generation,
    /// direction): re-armed once buffers come back.
    starved: Vec<(usize, u16, usize)>,
    /// A receive found no buffer this turn: the ring grows (once) at its end.
    grow: bool,
    /// Bytes one direction may hold before its receive is cancelled.
    limit: usize,
    /// The batch wait in microseconds (0: none).
    min_wait_us: u32,
    /// The clock, read once per turn (after the wait): activity times are
    /// this turn's, not each completion's.
    now: Instant,
    config: &'c ProxyConfig,
}

/// Runs the relay; see [`super::run`].
pub(super) fn run(
    config: &ProxyConfig,
    balancer: Balancer,
    stop_fd: RawFd,
    stop: impl Fn() -> bool,
    ready: impl FnOnce(SocketAddr),
) -> io::Result<ProxyStats> {
    let (ring, features) = build()?;
    let buffers = Buffers::register(&ring)?;
    let mut min_wait_us = u32::try_from(config.uring_min_wait.as_micros()).unwrap_or(u32::MAX);
    if min_wait_us > 0 && !features.min_timeout {
        note(
            "no minimum wait in io_uring_enter (Linux 6.12 and later)",
            "each turn handles what is in at its first completion",
        );
        min_wait_us = 0;
    }
    let listener = std::net::TcpListener::bind(config.listen)
        .map_err(|e| io::Error::new(e.kind(), format!("bind {}: {e}", config.listen)))?;
    listener.set_nonblocking(true)?;
    // The health thread's wake-up: an eventfd the ring polls.
    // SAFETY: eventfd has no memory preconditions; the result is checked.
    let efd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
    if efd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a new descriptor that is ours alone.
    let health_fd = Arc::new(unsafe { OwnedFd::from_raw_fd(efd) });
    let n = balancer.backends().len();
    let healthy: Arc<Vec<AtomicBool>> = Arc::new((0..n).map(|_| AtomicBool::new(true)).collect());
    let done = Arc::new(AtomicBool::new(false));
    let checker = {
        let (healthy, done, efd) = (healthy.clone(), done.clone(), health_fd.clone());
        let addrs: Vec<SocketAddr> = balancer.backends().iter().map(|b| b.addr).collect();
        let c = config.clone();
        std::thread::Builder::new()
            .name("gateway-health".into())
            .spawn(move || {
                let wake = || {
                    let one = 1u64;
                    // SAFETY: writes 8 bytes from `one` to the live eventfd.
                    unsafe { libc::write(efd.as_raw_fd(), (&raw const one).cast(), 8) };
                };
                health_loop(&addrs, &healthy, &done, &wake, &c)
            })?
    };
    eprintln!(
        "connlab gateway: io_uring relay: {}, {} accept, {} receive, up to {} buffers of {} KiB \
         ({} at first), batch wait {} us",
        if features.defer_taskrun {
            "SINGLE_ISSUER + DEFER_TASKRUN"
        } else if features.coop_taskrun {
            "COOP_TASKRUN"
        } else {
            "task work"
        },
        if features.multishot_accept {
            "multishot"
        } else {
            "one-shot"
        },
        if features.multishot_recv {
            "multishot"
        } else {
            "one-shot"
        },
        BUFFERS,
        CHUNK / 1024,
        BUFFER_STEP,
        min_wait_us
    );
    let mut relay = Relay {
        ring,
        features,
        buffers,
        pairs: Vec::new(),
        generations: Vec::new(),
        free: Vec::new(),
        balancer,
        stats: ProxyStats {
            backends: vec![
                ProxyBackendStats {
                    healthy: true,
                    ..Default::default()
                };
                n
            ],
            ..Default::default()
        },
        closing: Vec::new(),
        listen_fd: listener.as_raw_fd(),
        accept_armed: false,
        accept_paused: false,
        starved: Vec::new(),
        grow: false,
        limit: config.buffer.max(1),
        min_wait_us,
        now: Instant::now(),
        config,
    };
    relay.arm_accept()?;
    relay.poll_in(health_fd.as_raw_fd(), HEALTH)?;
    relay.poll_in(stop_fd, STOP)?;
    ready(listener.local_addr()?);
    let result = relay.serve(&stop, &healthy, health_fd.as_raw_fd());
    done.store(true, Relaxed);
    let _ = checker.join();
    // Close what is left and wait (briefly) for the cancelled operations,
    // so the buffers can be unmapped; otherwise they are leaked.
    for slot in 0..relay.pairs.len() {
        relay.close(slot, false);
    }
    let drained = relay.drain(Instant::now() + Duration::from_secs(2));
    let Relay {
        ring,
        buffers,
        stats,
        ..
    } = relay;
    drop(ring);
    drop(listener);
    if drained.unwrap_or(false) {
        // SAFETY: every receive and send completed and the ring is gone,
        // so no operation uses the buffers.
        unsafe { buffers.unmap() };
    }
    result.map(|()| stats)
}

impl Relay<'_> {
    /// Queues an entry, submitting first when the queue is full.
    ///
    /// Entries point only at the buffers (unmapped only after every
    /// operation completed, else leaked) and at a pair's connect address
    /// (kept until its connect completed).
    fn push(&mut self, entry: &squeue::Entry) -> io::Result<()> {
        loop {
            // SAFETY: see above.
            if unsafe { self.ring.submission().push(entry) }.is_ok() {
                return Ok(());
            }
            self.ring.submit()?;
        }
    }

    fn poll_in(&mut self, fd: RawFd, kind: u8) -> io::Result<()> {
        let entry = opcode::PollAdd::new(types::Fd(fd), libc::POLLIN as u32)
            .build()
            .user_data(tag(kind, 0, 0, 0, 0));
        self.push(&entry)
    }

    fn arm_accept(&mut self) -> io::Result<()> {
        let flags = libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC;
        let fd = types::Fd(self.listen_fd);
        let entry = if self.features.multishot_accept {
            opcode::AcceptMulti::new(fd).flags(flags).build()
        } else {
            opcode::Accept::new(fd, std::ptr::null_mut(), std::ptr::null_mut())
                .flags(flags)
                .build()
        };
        self.accept_armed = true;
        self.push(&entry.user_data(tag(ACCEPT, 0, 0, 0, 0)))
    }

    /// The loop: one `io_uring_enter` per turn, submitting the turn's
    /// entries and waiting for completions (at most until the next idle
    /// sweep).
    fn serve(
        &mut self,
        stop: &dyn Fn() -> bool,
        healthy: &[AtomicBool],
        health_fd: RawFd,
    ) -> io::Result<()> {
        let tick = Duration::from_secs(1)
            .min(self.config.idle_timeout / 4)
            .max(Duration::from_millis(10));
        let mut next_sweep = self.now + tick;
        let mut done: Vec<cqueue::Entry> = Vec::with_capacity(ENTRIES as usize * 4);
        while !stop() {
            let wait = next_sweep.saturating_duration_since(self.now);
            self.wait(wait)?;
            self.now = Instant::now();
            done.clear();
            done.extend(self.ring.completion());
            for cqe in &done {
                let t = Tag::decode(cqe.user_data());
                match t.kind {
                    HEALTH => {
                        let mut count = 0u64;
                        // SAFETY: reads 8 bytes into `count` from the eventfd.
                        unsafe { libc::read(health_fd, (&raw mut count).cast(), 8) };
                        self.sync_health(healthy);
                        self.poll_in(health_fd, HEALTH)?;
                    }
                    // The loop checks `stop` next; not re-armed (the
                    // descriptor stays readable).
                    STOP => {}
                    _ => self.complete(t, cqe.result(), cqe.flags())?,
                }
            }
            let now = self.now;
            if now >= next_sweep {
                next_sweep = now + tick;
                for slot in 0..self.pairs.len() {
                    let idle = self.pairs[slot].as_ref().is_some_and(|p| {
                        !p.closed
                            && now.saturating_duration_since(p.last_active)
                                >= self.config.idle_timeout
                    });
                    if idle {
                        self.stats.idle_closed += 1;
                        self.close(slot, true);
                    }
                }
                if self.accept_paused {
                    self.accept_paused = false;
                    self.arm_accept()?;
                }
            }
            self.end_turn()?;
        }
        Ok(())
    }

    /// Submits what is queued and waits for one completion or `timeout`.
    ///
    /// With a batch wait ([`ProxyConfig::uring_min_wait`]) it waits for
    /// [`BATCH`] completions, but no longer than the minimum wait once one
    /// is in: fewer, fuller turns, each completion waiting at most that long.
    fn wait(&mut self, timeout: Duration) -> io::Result<()> {
        let ts = types::Timespec::from(timeout);
        let args = types::SubmitArgs::new().timespec(&ts);
        let waited = match self.min_wait_us {
            0 => self.ring.submitter().submit_with_args(1, &args),
            us => self
                .ring
                .submitter()
                .submit_with_args(BATCH, &args.min_wait_usec(us)),
        };
        match waited {
            Ok(_) => Ok(()),
            Err(e)
                if e.kind() == io::ErrorKind::Interrupted
                    || matches!(e.raw_os_error(), Some(libc::ETIME | libc::EBUSY)) =>
            {
                Ok(())
            }
            Err(e) => Err(e),
        }
    }

    /// After a turn's completions: buffers given back go to the kernel,
    /// starved receives are re-armed, and released descriptors are closed
    /// once the entries queued for them (their cancels) were submitted.
    fn end_turn(&mut self) -> io::Result<()> {
        if std::mem::take(&mut self.grow) {
            self.buffers.grow();
        }
        if self.buffers.returned > 0 {
            self.buffers.publish();
            self.buffers.returned = 0;
            for (slot, generation, dir) in std::mem::take(&mut self.starved) {
                let starved = self.pairs[slot]
                    .as_mut()
                    .filter(|p| p.generation == generation)
                    .is_some_and(|p| std::mem::take(&mut p.dirs[dir].starved));
                if starved {
                    self.arm_recv(slot, dir)?;
                }
            }
        }
        if !self.closing.is_empty() {
            self.ring.submit()?;
            self.closing.clear();
        }
        Ok(())
    }

    /// Waits until every pair's operations completed or `deadline`;
    /// true when they all did.
    fn drain(&mut self, deadline: Instant) -> io::Result<bool> {
        loop {
            self.end_turn()?;
            if self.pairs.iter().all(Option::is_none) {
                return Ok(true);
            }
            let now = Instant::now();
            if now >= deadline {
                return Ok(false);
            }
            self.wait((deadline - now).min(Duration::from_millis(100)))?;
            self.now = Instant::now();
            let done: Vec<cqueue::Entry> = self.ring.completion().collect();
            for cqe in &done {
                let t = Tag::decode(cqe.user_data());
                if matches!(t.kind, CONNECT | RECV | SEND) {
                    self.complete(t, cqe.result(), cqe.flags())?;
                } else if t.kind == ACCEPT && cqe.result() >= 0 {
                    // Accepted while stopping: closed at once.
                    // SAFETY: the kernel installed this descriptor for us alone.
                    drop(unsafe { OwnedFd::from_raw_fd(cqe.result()) });
                }
            }
        }
    }

    /// Health changed: syncs the balancer and resets the connections to
    /// backends that went down.
    fn sync_health(&mut self, healthy: &[AtomicBool]) {
        for (i, flag) in healthy.iter().enumerate() {
            let h = flag.load(Relaxed);
            if h == self.balancer.is_healthy(i) {
                continue;
            }
            self.balancer.set_healthy(i, h);
            self.stats.backends[i].healthy = h;
            if !h {
                self.stats.backends[i].went_down += 1;
                for slot in 0..self.pairs.len() {
                    let on_it = self.pairs[slot]
                        .as_ref()
                        .is_some_and(|p| !p.closed && p.backend_idx == i);
                    if on_it {
                        self.stats.backends[i].reset_unhealthy += 1;
                        self.close(slot, true);
                    }
                }
            }
        }
    }

    /// One completion of an accept, connect, receive or send.
    fn complete(&mut self, t: Tag, res: i32, flags: u32) -> io::Result<()> {
        match t.kind {
            ACCEPT => self.accepted(res, flags),
            CONNECT => self.connected(t, res),
            RECV => self.received(t, res, flags),
            SEND => self.sent(t, res),
            // CANCEL, or anything unknown: nothing to do.
            _ => Ok(()),
        }
    }
}

/// Makes the close of `fd` a reset (linger 0): the peer sees an error, not
/// an end.
fn reset_on_close(fd: &OwnedFd) {
    let _ = socket2::SockRef::from(fd).set_linger(Some(Duration::ZERO));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tag_round_trips() {
        for t in [
            Tag {
                kind: RECV,
                dir: 1,
                bid: 0,
                generation: 0,
                slot: 0,
            },
            Tag {
                kind: SEND,
                dir: 0,
                bid: BUFFERS - 1,
                generation: u16::MAX,
                slot: SLOT_MASK as usize,
            },
            Tag {
                kind: CANCEL,
                dir: 1,
                bid: 77,
                generation: 4321,
                slot: 123_456,
            },
        ] {
            assert_eq!(Tag::decode(t.encode()), t);
        }
    }

    #[test]
    fn buffers_are_a_power_of_two_as_a_ring_needs() {
        const { assert!(BUFFERS.is_power_of_two()) };
        const { assert!(BUFFER_STEP > 0 && BUFFER_STEP <= BUFFERS) };
    }
}
