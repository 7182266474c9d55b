//! The per-connection driver every engine shares: one `recv` into the engine's
//! read chunk, the bytes fed to the protocol core, responses queued in the
//! [`Outbox`] and written with `sendmsg`. Engines differ only in how they learn
//! that a descriptor is ready (or, for the blocking engines, in blocking).

use crate::counters::Counters;
use crate::outbox::Outbox;
use crate::socket_io::{Direct, SocketIo};
use connlab_proto::{Flow, HttpStatus, Protocol, Response, ServerConfig, ServerSession};
use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::atomic::Ordering::Relaxed;

/// Bytes read per `recv`, the same for every engine.
pub(crate) const READ_CHUNK: usize = 16 * 1024;

/// Responses a connection may have queued before the engine stops reading
/// from it (back-pressure on a client that pipelines and does not read).
const OUTBOX_LIMIT: usize = 64;

/// Whether a connection lives on after an event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Status {
    Open,
    Done,
}

/// The protocol and its limits, from which every connection's session is made.
#[derive(Clone, Copy, Debug)]
pub(crate) struct SessionTemplate {
    pub(crate) protocol: Protocol,
    pub(crate) config: ServerConfig,
}

/// One client connection.
pub(crate) struct Connection {
    fd: OwnedFd,
    session: ServerSession,
    outbox: Outbox,
    /// The peer sent EOF.
    read_closed: bool,
    /// No more input is taken; close once the outbox is empty.
    closing: bool,
    /// Edge-triggered only: input may remain (the last read did not hit EAGAIN).
    input_pending: bool,
}

impl Connection {
    pub(crate) fn new(fd: OwnedFd, template: SessionTemplate) -> Connection {
        Connection {
            fd,
            session: ServerSession::new(template.protocol, template.config),
            outbox: Outbox::default(),
            read_closed: false,
            closing: false,
            input_pending: false,
        }
    }

    pub(crate) fn fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// The engine should wait for input on this connection.
    pub(crate) fn wants_read(&self) -> bool {
        !self.read_closed && !self.closing && self.outbox.len() < OUTBOX_LIMIT
    }

    /// The engine should wait for room to send on this connection.
    pub(crate) fn wants_write(&self) -> bool {
        !self.outbox.is_empty()
    }

    /// Edge-triggered engines: input may be waiting that no new edge will announce.
    pub(crate) fn input_pending(&self) -> bool {
        self.input_pending && self.wants_read()
    }

    /// Handles readability: one `recv` (or, with `until_blocked`, `recv` until
    /// `EAGAIN` as edge-triggered readiness requires), then a flush attempt.
    pub(crate) fn on_readable(
        &mut self,
        buf: &mut [u8],
        counters: &Counters,
        until_blocked: bool,
        io: &impl SocketIo,
    ) -> Status {
        self.input_pending = until_blocked;
        while self.wants_read() {
            let fd = self.fd();
            match io.input(fd, buf.len(), || recv(fd, buf)) {
                Ok(0) => {
                    self.read_closed = true;
                    self.input_pending = false;
                    if let Err(e) = self.session.finish() {
                        counters.protocol_error(e.kind());
                        return Status::Done;
                    }
                }
                Ok(n) => {
                    counters.bytes_in.fetch_add(n as u64, Relaxed);
                    self.take_input(&buf[..n], counters);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    self.input_pending = false;
                    break;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(_) => return Status::Done,
            }
            if !until_blocked {
                break;
            }
        }
        self.on_writable(counters, io)
    }

    /// Handles bytes the engine already received (io_uring's receive into a
    /// provided buffer; empty means the peer sent EOF), then a flush attempt:
    /// the same protocol path as [`Connection::on_readable`] without the `recv`.
    pub(crate) fn on_received(&mut self, data: &[u8], counters: &Counters) -> Status {
        if data.is_empty() {
            self.read_closed = true;
            if let Err(e) = self.session.finish() {
                counters.protocol_error(e.kind());
                return Status::Done;
            }
        } else if !self.read_closed && !self.closing {
            counters.bytes_in.fetch_add(data.len() as u64, Relaxed);
            self.take_input(data, counters);
        }
        self.on_writable(counters, &Direct)
    }

    /// Handles writability: `sendmsg` until the outbox is empty or the socket
    /// is full; then says whether the connection is finished.
    pub(crate) fn on_writable(&mut self, counters: &Counters, io: &impl SocketIo) -> Status {
        while !self.outbox.is_empty() {
            match self.outbox.send_once(self.fd(), io) {
                Ok(n) => {
                    counters.bytes_out.fetch_add(n as u64, Relaxed);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Status::Open,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(_) => return Status::Done,
            }
        }
        if self.read_closed || self.closing {
            Status::Done
        } else {
            Status::Open
        }
    }

    /// Serves the connection to its end on a blocking socket (the thread- and
    /// process-per-connection engines): the same calls as the event loops,
    /// with the kernel doing the waiting.
    pub(crate) fn serve_blocking(&mut self, buf: &mut [u8], counters: &Counters) {
        while self.on_readable(buf, counters, false, &Direct) == Status::Open {}
    }

    /// Gives up the descriptor (the engine decides how it is closed).
    pub(crate) fn into_fd(self) -> OwnedFd {
        self.fd
    }

    fn take_input(&mut self, input: &[u8], counters: &Counters) {
        let mut requests = 0u64;
        let outbox = &mut self.outbox;
        let result = self.session.feed(input, &mut |response| {
            if !matches!(
                response,
                Response::Http {
                    status: HttpStatus::BadRequest,
                    ..
                }
            ) {
                requests += 1;
            }
            outbox.push(response);
        });
        counters.requests.fetch_add(requests, Relaxed);
        match result {
            Ok(Flow::Continue) => {}
            Ok(Flow::Close) => self.closing = true,
            Err(e) => {
                counters.protocol_error(e.kind());
                self.closing = true;
            }
        }
    }
}

/// One `recv(2)` without flags.
fn recv(fd: RawFd, buf: &mut [u8]) -> io::Result<usize> {
    // SAFETY: `buf` is valid for writes of `buf.len()` bytes.
    let n = unsafe { libc::recv(fd, buf.as_mut_ptr().cast(), buf.len(), 0) };
    if n < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(n as usize)
    }
}
