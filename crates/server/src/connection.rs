//! The per-connection driver every engine shares: one `recv` into the engine's
//! read chunk, the bytes fed to the protocol core, responses queued in the
//! [`Outbox`] and written with `sendmsg`. Engines differ only in how they learn
//! that a descriptor is ready (or, for the blocking engines, in blocking).

use crate::counters::Counters;
use crate::deadline::{ConnTimer, Expiry, HeadProgress, Limits};
use crate::outbox::{Gather, Outbox};
use crate::socket_io::{Direct, SocketIo};
use connlab_proto::{Flow, HttpStatus, Protocol, Response, ServerConfig, ServerSession};
use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};

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
    /// Header and idle timeouts.
    pub(crate) limits: Limits,
}

/// Where a connection learns the time when a timeout needs it.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Clock {
    /// The time an event loop read once for this turn.
    At(Instant),
    /// Read the clock (blocking engines: the call may have slept).
    Live,
}

impl Clock {
    fn now(self) -> Instant {
        match self {
            Clock::At(now) => now,
            Clock::Live => Instant::now(),
        }
    }
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
    limits: Limits,
    timer: ConnTimer,
    /// Tells this connection from a later one with the same descriptor
    /// (set by the event loops for their deadline queue).
    pub(crate) id: u64,
}

impl Connection {
    /// A connection opened at `now`.
    pub(crate) fn new(fd: OwnedFd, template: SessionTemplate, now: Instant) -> Connection {
        Connection {
            fd,
            session: ServerSession::new(template.protocol, template.config),
            outbox: Outbox::default(),
            read_closed: false,
            closing: false,
            input_pending: false,
            limits: template.limits,
            timer: ConnTimer::new(template.limits, now),
            id: 0,
        }
    }

    /// The timeout that has passed at `now`, if any.
    pub(crate) fn expired(&self, now: Instant) -> Option<Expiry> {
        self.timer.expired(now)
    }

    /// The deadline to queue for this connection, if a new entry is needed
    /// (see [`ConnTimer::next_to_arm`]).
    pub(crate) fn deadline_to_arm(&mut self) -> Option<Instant> {
        self.timer.next_to_arm()
    }

    /// Whether a queue entry due at `at` is this connection's live one.
    pub(crate) fn deadline_popped(&mut self, at: Instant) -> bool {
        self.timer.popped(at)
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
        clock: Clock,
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
                    self.take_input(&buf[..n], counters, clock);
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
        self.on_writable(counters, io, clock)
    }

    /// Handles bytes the engine already received (io_uring's receive into a
    /// provided buffer; empty means the peer sent EOF), then a flush attempt:
    /// the same protocol path as [`Connection::on_readable`] without the `recv`.
    pub(crate) fn on_received(&mut self, data: &[u8], counters: &Counters, clock: Clock) -> Status {
        if self.take_received(data, counters, clock) == Status::Done {
            return Status::Done;
        }
        self.on_writable(counters, &Direct, clock)
    }

    /// Takes bytes the engine already received (empty: EOF) without sending:
    /// the engine sends the outbox itself ([`Connection::gather`],
    /// [`Connection::on_sent`]). Says whether the connection is finished.
    pub(crate) fn take_received(
        &mut self,
        data: &[u8],
        counters: &Counters,
        clock: Clock,
    ) -> Status {
        if data.is_empty() {
            self.read_closed = true;
            if let Err(e) = self.session.finish() {
                counters.protocol_error(e.kind());
                return Status::Done;
            }
        } else if !self.read_closed && !self.closing {
            counters.bytes_in.fetch_add(data.len() as u64, Relaxed);
            self.take_input(data, counters, clock);
        }
        self.settled()
    }

    /// Fills `gather` with the front of the outbox for a send the engine
    /// makes itself; returns the bytes offered (0: nothing to send).
    pub(crate) fn gather(&self, gather: &mut Gather) -> usize {
        self.outbox.gather(gather)
    }

    /// The engine's send of `gather` took `sent` bytes: drops them from the
    /// outbox and says whether the connection is finished.
    pub(crate) fn on_sent(
        &mut self,
        sent: usize,
        gather: &Gather,
        counters: &Counters,
        clock: Clock,
    ) -> Status {
        counters.bytes_out.fetch_add(sent as u64, Relaxed);
        if self.limits.idle.is_some() && sent > 0 {
            self.timer.on_output(self.limits, clock.now());
        }
        self.outbox.sent(sent, gather);
        self.settled()
    }

    /// Done once nothing more is owed and nothing more will be read.
    fn settled(&self) -> Status {
        if self.outbox.is_empty() && (self.read_closed || self.closing) {
            Status::Done
        } else {
            Status::Open
        }
    }

    /// Handles writability: `sendmsg` until the outbox is empty or the socket
    /// is full; then says whether the connection is finished.
    pub(crate) fn on_writable(
        &mut self,
        counters: &Counters,
        io: &impl SocketIo,
        clock: Clock,
    ) -> Status {
        while !self.outbox.is_empty() {
            match self.outbox.send_once(self.fd(), io) {
                Ok(n) => {
                    counters.bytes_out.fetch_add(n as u64, Relaxed);
                    if self.limits.idle.is_some() && n > 0 {
                        self.timer.on_output(self.limits, clock.now());
                    }
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
    /// with the kernel doing the waiting. Timeouts are the socket's own
    /// (`SO_RCVTIMEO` up to the next deadline, `SO_SNDTIMEO` the idle
    /// timeout, socket(7)): a call that times out returns `EAGAIN`, and the
    /// connection's timer says whether a deadline has passed.
    pub(crate) fn serve_blocking(&mut self, buf: &mut [u8], counters: &Counters) {
        let mut receive_wait = None;
        if let Some(idle) = self.limits.idle {
            set_socket_timeout(self.fd(), libc::SO_SNDTIMEO, Some(idle));
        }
        loop {
            counters.ran_here();
            if self.limits.any() {
                // No deadline pending (no head open, no idle timeout): the
                // wait is the constant idle one and no clock is read.
                let wait = match self.timer.deadline() {
                    None => self.limits.idle,
                    Some(_) => {
                        let now = Instant::now();
                        if let Some(expiry) = self.timer.expired(now) {
                            counters.timed_out(expiry);
                            return;
                        }
                        self.timer.blocking_wait(self.limits, now)
                    }
                }
                // Zero means "forever" to the kernel: wait at least 1 ms.
                .map(|d| d.max(Duration::from_millis(1)));
                if wait != receive_wait {
                    set_socket_timeout(self.fd(), libc::SO_RCVTIMEO, wait);
                    receive_wait = wait;
                }
            }
            if self.on_readable(buf, counters, false, &Direct, Clock::Live) == Status::Done {
                return;
            }
        }
    }

    /// Gives up the descriptor (the engine decides how it is closed).
    pub(crate) fn into_fd(self) -> OwnedFd {
        self.fd
    }

    fn take_input(&mut self, input: &[u8], counters: &Counters, clock: Clock) {
        let was_in_head = self.session.in_request_head();
        let mut requests = 0u64;
        let mut answered = false;
        let outbox = &mut self.outbox;
        let result = self.session.feed(input, &mut |response| {
            answered = true;
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
        if self.limits.any() {
            let in_head = self.session.in_request_head();
            // Every head is answered before the next begins, so an answer in
            // this input means the head now open began in it.
            let progress = HeadProgress {
                began: in_head && (!was_in_head || answered),
                in_head,
            };
            if in_head || self.limits.idle.is_some() {
                self.timer.on_input(self.limits, clock.now(), progress);
            } else {
                // A whole request and nothing after it: no deadline moves
                // past "none", so the clock need not be read.
                self.timer.head_complete();
            }
        }
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

/// Sets `SO_RCVTIMEO` or `SO_SNDTIMEO` (`None`: wait forever). A failure
/// only leaves the connection without that timeout.
fn set_socket_timeout(fd: RawFd, option: libc::c_int, wait: Option<Duration>) {
    let wait = wait.unwrap_or(Duration::ZERO);
    let tv = libc::timeval {
        tv_sec: libc::time_t::try_from(wait.as_secs()).unwrap_or(libc::time_t::MAX),
        tv_usec: libc::suseconds_t::from(wait.subsec_micros()),
    };
    // SAFETY: valid socket, option pointer and length.
    unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            option,
            (&tv as *const libc::timeval).cast(),
            size_of::<libc::timeval>() as libc::socklen_t,
        )
    };
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
