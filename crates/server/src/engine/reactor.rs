//! The part of the single-threaded event loops (`select`, `poll`, `epoll`)
//! that is not about readiness: the connection table indexed by descriptor,
//! the one shared read chunk, accepting and dispatching. Each engine only
//! keeps its interest set and waits.

use super::RunContext;
use crate::connection::{Connection, SessionTemplate, Status, READ_CHUNK};
use crate::counters::Counters;
use crate::listener::{Accepted, Listener};
use crate::socket_io::{Direct, SocketIo};
use std::io;
use std::os::fd::{OwnedFd, RawFd};
use std::sync::atomic::Ordering::Relaxed;

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
    buf: Box<[u8]>,
    io: I,
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
            buf: vec![0u8; READ_CHUNK].into_boxed_slice(),
            io,
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
                Accepted::Shed => {
                    self.counters.shed.fetch_add(1, Relaxed);
                }
                Accepted::Failed => {
                    self.counters.accept_errors.fetch_add(1, Relaxed);
                    break;
                }
            }
        }
    }

    /// Serves a connection accepted elsewhere (io_uring's accept); returns
    /// its descriptor.
    pub(super) fn adopt(&mut self, fd: OwnedFd) -> RawFd {
        let conn = Connection::new(fd, self.template);
        let raw = conn.fd();
        let slot = raw as usize;
        if self.conns.len() <= slot {
            self.conns.resize_with(slot + 1, || None);
        }
        self.conns[slot] = Some(conn);
        self.counters.opened();
        raw
    }

    /// Feeds bytes received for `fd` by the engine (empty: EOF); closes the
    /// connection when it is done and says so.
    pub(super) fn received(&mut self, fd: RawFd, data: &[u8]) -> Interest {
        let Some(conn) = self.conns.get_mut(fd as usize).and_then(Option::as_mut) else {
            return Interest::Closed;
        };
        match conn.on_received(data, self.counters) {
            Status::Open => Interest::Wait {
                read: conn.wants_read(),
                write: conn.wants_write(),
            },
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
        let mut status = Status::Open;
        if readable {
            status = conn.on_readable(&mut self.buf, self.counters, until_blocked, &self.io);
        } else if writable {
            status = conn.on_writable(self.counters, &self.io);
        }
        // Edge-triggered: back-pressure stopped reading before EAGAIN and the
        // flush made room again, so no new edge will come for that input.
        while status == Status::Open && until_blocked && conn.input_pending() {
            status = conn.on_readable(&mut self.buf, self.counters, true, &self.io);
        }
        match status {
            Status::Open => Interest::Wait {
                read: conn.wants_read(),
                write: conn.wants_write(),
            },
            Status::Done => {
                self.close(fd);
                Interest::Closed
            }
        }
    }

    /// Open connection descriptors, in no particular order.
    pub(super) fn open_fds(&self) -> impl Iterator<Item = RawFd> + '_ {
        self.conns.iter().flatten().map(Connection::fd)
    }

    fn close(&mut self, fd: RawFd) {
        if let Some(conn) = self.conns.get_mut(fd as usize).and_then(Option::take) {
            self.io.release(conn.into_fd());
            self.counters.closed();
        }
    }

    /// Closes every connection (shutdown).
    pub(super) fn close_all(&mut self) {
        for slot in &mut self.conns {
            if let Some(conn) = slot.take() {
                self.io.release(conn.into_fd());
                self.counters.closed();
            }
        }
    }
}
