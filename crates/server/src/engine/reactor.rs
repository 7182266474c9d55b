//! The part of the single-threaded event loops (`select`, `poll`, `epoll`)
//! that is not about readiness: the connection table indexed by descriptor,
//! the one shared read chunk, accepting and dispatching. Each engine only
//! keeps its interest set and waits.

use super::RunContext;
use crate::connection::{Clock, Connection, SessionTemplate, Status, READ_CHUNK};
use crate::counters::Counters;
use crate::deadline::DeadlineQueue;
use crate::listener::{Accepted, Listener, ACCEPT_BACKOFF};
use crate::outbox::Gather;
use crate::socket_io::{Direct, SocketIo};
use std::io;
use std::os::fd::{OwnedFd, RawFd};
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};

/// Most connections accepted per listener readiness, so a connect storm
/// cannot starve the connections already open.
const ACCEPT_BATCH: usize = 256;

/// What an engine must know after dispatching an event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Interest {
    /// The connection was closed and removed.
    Closed,
    /// The connection stays; wait for these.
    Wait { read: bool, write: bool },
}

/// The connection table and its I/O path (`I`: plain system calls, or the
/// RT-signal library that must see every call's result).
pub(super) struct Reactor<'a, I: SocketIo = Direct> {
    pub(super) listener: Listener,
    pub(super) counters: &'a Counters,
    template: SessionTemplate,
    conns: Vec<Option<Connection>>,
    /// Connections in `conns`.
    live: usize,
    buf: Box<[u8]>,
    io: I,
    /// Header and idle deadlines, keyed by descriptor and connection id.
    deadlines: DeadlineQueue<(RawFd, u64)>,
    next_id: u64,
    /// The time of this loop turn (read only when a timeout is set).
    now: Instant,
    /// After a failed accept: the listener is left out of the interest set
    /// until then (a timer, not a level-triggered wake-up every turn).
    accept_paused_until: Option<Instant>,
    /// `--workers`: the gate to pass once set up ([`Reactor::ready`]).
    start: Option<&'a super::StartGate>,
}

impl<'a> Reactor<'a, Direct> {
    pub(super) fn new(ctx: RunContext<'a>) -> Reactor<'a, Direct> {
        Reactor::with_io(ctx, Direct)
    }
}

impl<'a, I: SocketIo> Reactor<'a, I> {
    /// A reactor whose calls go through `io`.
    pub(super) fn with_io(ctx: RunContext<'a>, io: I) -> Reactor<'a, I> {
        Reactor {
            listener: ctx.listener,
            counters: ctx.counters,
            template: ctx.template,
            conns: Vec::new(),
            live: 0,
            buf: vec![0u8; READ_CHUNK].into_boxed_slice(),
            io,
            deadlines: DeadlineQueue::default(),
            next_id: 0,
            now: Instant::now(),
            accept_paused_until: None,
            start: ctx.start,
        }
    }

    /// The engine has its descriptors: with several loops, waits until
    /// every loop has, before the first accept.
    pub(super) fn ready(&mut self) {
        if let Some(gate) = self.start.take() {
            gate.arrive();
        }
    }

    /// How long the engine may wait for I/O before a deadline: `None` for
    /// as long as it takes.
    pub(super) fn wait(&self) -> Option<Duration> {
        let pause = self
            .accept_paused_until
            .map(|until| until.saturating_duration_since(Instant::now()));
        let deadline = if self.deadlines.is_empty() {
            None
        } else {
            self.deadlines.wait(Instant::now())
        };
        match (pause, deadline) {
            (Some(p), Some(d)) => Some(p.min(d)),
            (p, d) => p.or(d),
        }
    }

    /// An accept failed: counts it and stops accepting for
    /// [`ACCEPT_BACKOFF`].
    pub(super) fn accept_failed(&mut self) {
        self.counters.accept_errors.fetch_add(1, Relaxed);
        self.pause_accepting();
    }

    /// Stops accepting for [`ACCEPT_BACKOFF`] (the engine leaves the
    /// listener out of its interest set, or does not re-arm its accept).
    pub(super) fn pause_accepting(&mut self) {
        self.accept_paused_until = Some(Instant::now() + ACCEPT_BACKOFF);
    }

    /// Whether the engine should watch the listener this turn: false for
    /// [`ACCEPT_BACKOFF`] after an accept failed.
    pub(super) fn accepting(&mut self) -> bool {
        match self.accept_paused_until {
            Some(until) if Instant::now() < until => false,
            Some(_) => {
                self.accept_paused_until = None;
                true
            }
            None => true,
        }
    }

    /// Starts a loop turn after the wait: notes the CPU the loop runs on,
    /// and reads the clock if a timeout needs it.
    pub(super) fn tick(&mut self) {
        self.counters.ran_here();
        if self.template.limits.any() {
            self.now = Instant::now();
        }
    }

    /// Closes every connection whose header or idle deadline has passed,
    /// counts it, and hands its descriptor to `closed`.
    pub(super) fn expire(&mut self, mut closed: impl FnMut(RawFd)) {
        let now = self.now;
        while let Some((at, (fd, id))) = self.deadlines.pop_due(now) {
            let Some(conn) = self.conns.get_mut(fd as usize).and_then(Option::as_mut) else {
                continue;
            };
            if conn.id != id || !conn.deadline_popped(at) {
                continue;
            }
            match conn.expired(now) {
                Some(expiry) => {
                    self.counters.timed_out(expiry);
                    self.close(fd);
                    closed(fd);
                }
                None => {
                    if let Some(at) = conn.deadline_to_arm() {
                        self.deadlines.push(at, (fd, id));
                    }
                }
            }
        }
    }

    /// Queues `fd`'s next deadline if it needs a new entry.
    fn arm(&mut self, fd: RawFd) {
        let Some(conn) = self.conns.get_mut(fd as usize).and_then(Option::as_mut) else {
            return;
        };
        if let Some(at) = conn.deadline_to_arm() {
            self.deadlines.push(at, (fd, conn.id));
            // Entries of closed connections stay until due: drop them when
            // they outnumber the live connections.
            if self.deadlines.len() > 2 * self.live + 1024 {
                let conns = &self.conns;
                self.deadlines.retain(|_, (fd, id)| {
                    conns
                        .get(fd as usize)
                        .and_then(Option::as_ref)
                        .is_some_and(|c| c.id == id)
                });
            }
        }
    }

    /// Accepts pending connections (non-blocking) and hands each new
    /// descriptor to `added`.
    pub(super) fn accept_pending(&mut self, mut added: impl FnMut(RawFd)) {
        let lfd = self.listener.fd();
        for _ in 0..ACCEPT_BATCH {
            let listener = &mut self.listener;
            let mut outcome = Accepted::WouldBlock;
            // Through `io` so the RT-signal table learns of EAGAIN; the count
            // only tells it "not short" (success) or "would block".
            let _ = self.io.input(lfd, 1, || {
                outcome = listener.accept(true);
                match outcome {
                    Accepted::WouldBlock => Err(io::ErrorKind::WouldBlock.into()),
                    _ => Ok(1),
                }
            });
            match outcome {
                Accepted::Connection(fd) => added(self.adopt(fd)),
                Accepted::WouldBlock => break,
                Accepted::Shed { episode_began } => self.counters.shed_one(episode_began),
                Accepted::Failed => {
                    self.accept_failed();
                    break;
                }
            }
        }
    }

    /// Serves a connection accepted elsewhere (io_uring's accept); returns
    /// its descriptor.
    pub(super) fn adopt(&mut self, fd: OwnedFd) -> RawFd {
        let mut conn = Connection::new(fd, self.template, self.now);
        conn.id = self.next_id;
        self.next_id += 1;
        let raw = conn.fd();
        let slot = raw as usize;
        if self.conns.len() <= slot {
            self.conns.resize_with(slot + 1, || None);
        }
        self.conns[slot] = Some(conn);
        self.live += 1;
        self.counters.opened();
        self.arm(raw);
        raw
    }

    /// Feeds bytes received for `fd` by the engine (empty: EOF) and, with
    /// `flush`, sends what is owed with `sendmsg`; without, the engine sends
    /// ([`Reactor::gather`]). Closes the connection when it is done and says so.
    pub(super) fn received(&mut self, fd: RawFd, data: &[u8], flush: bool) -> Interest {
        let Some(conn) = self.conns.get_mut(fd as usize).and_then(Option::as_mut) else {
            return Interest::Closed;
        };
        let clock = Clock::At(self.now);
        let status = if flush {
            conn.on_received(data, self.counters, clock)
        } else {
            conn.take_received(data, self.counters, clock)
        };
        self.settle(fd, status)
    }

    /// Fills `gather` with what `fd` owes for a send the engine makes;
    /// returns the bytes offered (0: nothing, or no such connection).
    pub(super) fn gather(&self, fd: RawFd, gather: &mut Gather) -> usize {
        self.conns
            .get(fd as usize)
            .and_then(Option::as_ref)
            .map_or(0, |conn| conn.gather(gather))
    }

    /// The engine's send of `gather` on `fd` took `sent` bytes. Closes the
    /// connection when it is done and says so.
    pub(super) fn sent(&mut self, fd: RawFd, sent: usize, gather: &Gather) -> Interest {
        let Some(conn) = self.conns.get_mut(fd as usize).and_then(Option::as_mut) else {
            return Interest::Closed;
        };
        let status = conn.on_sent(sent, gather, self.counters, Clock::At(self.now));
        self.settle(fd, status)
    }

    /// The interest of an open connection after an event, or its close.
    fn settle(&mut self, fd: RawFd, status: Status) -> Interest {
        match status {
            Status::Open => {
                let Some(conn) = self.conns.get(fd as usize).and_then(Option::as_ref) else {
                    return Interest::Closed;
                };
                let interest = Interest::Wait {
                    read: conn.wants_read(),
                    write: conn.wants_write(),
                };
                self.arm(fd);
                interest
            }
            Status::Done => {
                self.close(fd);
                Interest::Closed
            }
        }
    }

    /// Closes `fd` after an error the engine saw (a failed receive).
    pub(super) fn abort(&mut self, fd: RawFd) {
        self.close(fd);
    }

    /// Runs the readiness reported for `fd`. Closes the connection when it
    /// is done and says so.
    pub(super) fn dispatch(
        &mut self,
        fd: RawFd,
        readable: bool,
        writable: bool,
        until_blocked: bool,
    ) -> Interest {
        let Some(conn) = self.conns.get_mut(fd as usize).and_then(Option::as_mut) else {
            return Interest::Closed;
        };
        let clock = Clock::At(self.now);
        let mut status = Status::Open;
        if readable {
            status = conn.on_readable(&mut self.buf, self.counters, until_blocked, &self.io, clock);
        } else if writable {
            status = conn.on_writable(self.counters, &self.io, clock);
        }
        // Edge-triggered: back-pressure stopped reading before EAGAIN and the
        // flush made room again, so no new edge will come for that input.
        while status == Status::Open && until_blocked && conn.input_pending() {
            status = conn.on_readable(&mut self.buf, self.counters, true, &self.io, clock);
        }
        match status {
            Status::Open => {
                let interest = Interest::Wait {
                    read: conn.wants_read(),
                    write: conn.wants_write(),
                };
                self.arm(fd);
                interest
            }
            Status::Done => {
                self.close(fd);
                Interest::Closed
            }
        }
    }

    /// Whether `fd` is an open connection.
    pub(super) fn is_open(&self, fd: RawFd) -> bool {
        self.conns.get(fd as usize).is_some_and(Option::is_some)
    }

    /// Open connection descriptors, in no particular order.
    pub(super) fn open_fds(&self) -> impl Iterator<Item = RawFd> + '_ {
        self.conns.iter().flatten().map(Connection::fd)
    }

    fn close(&mut self, fd: RawFd) {
        if let Some(conn) = self.conns.get_mut(fd as usize).and_then(Option::take) {
            self.live -= 1;
            self.io.release(conn.into_fd());
            self.counters.closed();
        }
    }

    /// Closes every connection (shutdown).
    pub(super) fn close_all(&mut self) {
        for slot in &mut self.conns {
            if let Some(conn) = slot.take() {
                self.live -= 1;
                self.io.release(conn.into_fd());
                self.counters.closed();
            }
        }
    }
}
