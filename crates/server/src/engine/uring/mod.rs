//! io_uring: one thread, one ring, the same connection core as every engine.
//!
//! The listener has a multishot accept; every connection has a multishot
//! receive that the kernel fills into buffers of one provided-buffer group
//! (a registered buffer ring), so a readiness event and the `recv` it would
//! cause arrive as one completion. Responses come from the same outbox as
//! every engine, gathered into one `sendmsg` entry per connection that goes
//! to the kernel with the loop turn's wait (one `io_uring_enter` per turn);
//! a socket without room is waited for inside the kernel (no POLLOUT round
//! trip) and a short send is continued with the rest. The ring is
//! `SINGLE_ISSUER` + `DEFER_TASKRUN`, so completions are posted only while
//! the loop waits. Each of these is an optional [`UringFeature`], probed at
//! start ([`setup`]) and switchable with `--uring-features`; without them
//! the engine falls back to one-shot operations, `PROVIDE_BUFFERS`,
//! `sendmsg(2)` with a POLLOUT entry, and `COOP_TASKRUN`.
//!
//! Every operation's user data carries its kind, the descriptor and the
//! descriptor's generation: a descriptor number reused after a close never
//! receives completions meant for the connection that had it. Descriptors
//! are closed only after the turn's entries went to the kernel, so no entry
//! queued for a closed connection can reach a new one with the same number.

mod setup;

use super::reactor::{Interest, Reactor};
use super::{Engine, RunContext};
use crate::config::{UringFeature, UringFeatures};
use crate::connection::READ_CHUNK;
use crate::listener::set_nodelay;
use crate::outbox::Gather;
use crate::profile::LoopTimer;
use crate::socket_io::SocketIo;
use connlab_os::uring::{BufferPool, OutsidePool, Provider};
use io_uring::{cqueue, opcode, squeue, types, IoUring};
use std::cell::RefCell;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// Buffers in the provided-buffer group (a power of two, as a buffer ring
/// needs; READ_CHUNK each). Taken and given back within a loop turn, so
/// they bound the receives one turn completes, not the connections.
const BUFFERS: u16 = 256;
/// The buffer group id.
const GROUP: u16 = 1;

fn outside_pool(e: OutsidePool) -> io::Error {
    io::Error::other(format!("--engine uring: {e}"))
}

pub(super) struct Uring {
    pub(super) features: UringFeatures,
}

/// Kinds of operation, in the top byte of the user data.
const ACCEPT: u64 = 1;
const RECV: u64 = 2;
const POLLOUT: u64 = 3;
const PROVIDE: u64 = 4;
const WAKE: u64 = 5;
const CANCEL: u64 = 6;
/// A `sendmsg` entry; its generation bits carry the send stage's index.
const SEND: u64 = 7;
/// A one-shot poll on the listener, in place of the accept at the
/// descriptor limit.
const ACCEPT_POLL: u64 = 8;

/// Bits of a descriptor's generation that fit in an operation's tag.
const GENERATION_BITS: u32 = 24;
const GENERATION_MASK: u32 = (1 << GENERATION_BITS) - 1;

/// What an operation's user data says: which operation, for which
/// descriptor, in which of its generations.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Tag {
    kind: u64,
    /// Only the low [`GENERATION_BITS`] are kept.
    generation: u32,
    fd: RawFd,
}

impl Tag {
    fn new(kind: u64, generation: u32, fd: RawFd) -> Tag {
        Tag {
            kind,
            generation,
            fd,
        }
    }

    /// The user data: kind in bits 56..64, generation in 32..56, fd in 0..32.
    fn encode(self) -> u64 {
        self.kind << 56
            | u64::from(self.generation & GENERATION_MASK) << 32
            | u64::from(self.fd as u32)
    }

    /// The inverse of [`Tag::encode`] for a generation within [`GENERATION_MASK`].
    fn decode(data: u64) -> Tag {
        Tag {
            kind: data >> 56,
            generation: (data >> 32) as u32 & GENERATION_MASK,
            fd: data as u32 as RawFd,
        }
    }
}

fn tag(kind: u64, generation: u32, fd: RawFd) -> u64 {
    Tag::new(kind, generation, fd).encode()
}

/// Per-descriptor state of the ring's operations.
#[derive(Clone, Copy, Default)]
struct Slot {
    /// Counts modulo 2^[`GENERATION_BITS`], exactly what a tag carries, so a
    /// tag and its slot compare the same bits.
    generation: u32,
    recv_armed: bool,
    pollout_armed: bool,
    /// The send stage of this connection's `sendmsg` in flight.
    sending: Option<u32>,
    /// The descriptor is in the registered file table at its own number.
    fixed: bool,
}

impl Slot {
    /// The descriptor number now belongs to another connection: completions
    /// tagged with the old generation are stale from here on.
    fn next_generation(&mut self) {
        self.generation = self.generation.wrapping_add(1) & GENERATION_MASK;
    }

    /// Whether a completion tagged with `generation` is for this connection.
    fn is_current(&self, generation: u32) -> bool {
        self.generation & GENERATION_MASK == generation & GENERATION_MASK
    }
}

/// One send in flight: its gathered iovecs and header (or the bytes copied
/// from them, [`Gather::contiguous`]), boxed so they stay put until the
/// kernel completes the entry that points at them.
struct SendStage {
    gather: Gather,
    msg: libc::msghdr,
    /// The connection it was made for.
    fd: RawFd,
    generation: u32,
}

/// Send stages, reused; an index is free from its completion on.
#[derive(Default)]
struct Stages {
    /// Boxed: the kernel holds pointers into a stage while the vector grows.
    #[allow(clippy::vec_box)]
    stages: Vec<Box<SendStage>>,
    free: Vec<u32>,
}

impl Stages {
    fn take(&mut self, fd: RawFd, generation: u32) -> u32 {
        let i = match self.free.pop() {
            Some(i) => i,
            None => {
                self.stages.push(Box::new(SendStage {
                    gather: Gather::new(),
                    // SAFETY: an all-zero msghdr is valid (no name, no control data).
                    msg: unsafe { std::mem::zeroed() },
                    fd: -1,
                    generation: 0,
                }));
                (self.stages.len() - 1) as u32
            }
        };
        let stage = &mut self.stages[i as usize];
        stage.fd = fd;
        stage.generation = generation;
        i
    }

    fn give_back(&mut self, i: u32) {
        self.free.push(i);
    }
}

/// The reactor's way of closing: descriptors wait until the turn's entries
/// went to the kernel (see the module documentation).
#[derive(Default)]
struct DeferredClose {
    fds: RefCell<Vec<OwnedFd>>,
}

impl SocketIo for &DeferredClose {
    #[inline(always)]
    fn input(
        &self,
        _fd: RawFd,
        _requested: usize,
        op: impl FnOnce() -> io::Result<usize>,
    ) -> io::Result<usize> {
        op()
    }

    #[inline(always)]
    fn output(
        &self,
        _fd: RawFd,
        _requested: usize,
        op: impl FnOnce() -> io::Result<usize>,
    ) -> io::Result<usize> {
        op()
    }

    fn release(&self, fd: OwnedFd) {
        self.fds.borrow_mut().push(fd);
    }
}

type UringReactor<'a, 'c> = Reactor<'a, &'c DeferredClose>;

struct Ring {
    ring: IoUring,
    features: UringFeatures,
    slots: Vec<Slot>,
    /// Connections whose receive ended for want of buffers.
    starved: Vec<RawFd>,
    stages: Stages,
    /// How used receive buffers go back to the kernel.
    provider: Provider,
    /// Size of the registered file table (0: none).
    fixed_table: u32,
}

impl Ring {
    /// Submits what is queued and waits for at least one completion, and
    /// no longer than `deadline` (the next header/idle deadline) with
    /// IORING_ENTER_EXT_ARG (Linux 5.11).
    fn wait(&self, deadline: Option<std::time::Duration>) -> io::Result<usize> {
        match deadline {
            None => self.ring.submit_and_wait(1),
            Some(wait) => {
                let ts = types::Timespec::from(wait);
                let args = types::SubmitArgs::new().timespec(&ts);
                self.ring.submitter().submit_with_args(1, &args)
            }
        }
    }

    /// Queues an entry, submitting first when the queue is full.
    ///
    /// Every entry points only at memory that outlives the ring's use of it:
    /// the buffer pool and ring (leaked at shutdown) and the send stages
    /// (freed only after their completion, leaked at shutdown).
    fn push(&mut self, entry: &squeue::Entry) -> io::Result<()> {
        loop {
            // SAFETY: see above: no entry refers to memory freed before its completion.
            if unsafe { self.ring.submission().push(entry) }.is_ok() {
                return Ok(());
            }
            self.ring.submit()?;
        }
    }

    fn slot(&mut self, fd: RawFd) -> &mut Slot {
        let i = fd as usize;
        if self.slots.len() <= i {
            self.slots.resize(i + 1, Slot::default());
        }
        &mut self.slots[i]
    }

    /// An entry on connection `fd`: by table index when it is registered.
    fn on_conn(&mut self, fd: RawFd, entry: squeue::Entry) -> squeue::Entry {
        if self.slot(fd).fixed {
            entry.flags(squeue::Flags::FIXED_FILE)
        } else {
            entry
        }
    }

    fn arm_recv(&mut self, fd: RawFd) -> io::Result<()> {
        let slot = self.slot(fd);
        if slot.recv_armed {
            return Ok(());
        }
        slot.recv_armed = true;
        let generation = slot.generation;
        let entry = if self.features.has(UringFeature::MultishotRecv) {
            opcode::RecvMulti::new(types::Fd(fd), GROUP).build()
        } else {
            opcode::Recv::new(types::Fd(fd), std::ptr::null_mut(), READ_CHUNK as u32)
                .buf_group(GROUP)
                .build()
                .flags(squeue::Flags::BUFFER_SELECT)
        };
        let entry = self.on_conn(fd, entry).user_data(tag(RECV, generation, fd));
        self.push(&entry)
    }

    fn cancel(&mut self, fd: RawFd, data: u64) -> io::Result<()> {
        let entry = opcode::AsyncCancel::new(data)
            .build()
            .user_data(tag(CANCEL, 0, fd));
        self.push(&entry)
    }

    fn cancel_recv(&mut self, fd: RawFd) -> io::Result<()> {
        let slot = self.slot(fd);
        if !slot.recv_armed {
            return Ok(());
        }
        slot.recv_armed = false;
        let generation = slot.generation;
        self.cancel(fd, tag(RECV, generation, fd))
    }

    fn cancel_pollout(&mut self, fd: RawFd) -> io::Result<()> {
        let slot = self.slot(fd);
        if !slot.pollout_armed {
            return Ok(());
        }
        slot.pollout_armed = false;
        let generation = slot.generation;
        self.cancel(fd, tag(POLLOUT, generation, fd))
    }

    /// Cancels the connection's send in flight; its stage stays taken
    /// until the (cancelled or finished) send completes.
    fn cancel_send(&mut self, fd: RawFd) -> io::Result<()> {
        match self.slot(fd).sending.take() {
            Some(stage) => self.cancel(fd, tag(SEND, stage, fd)),
            None => Ok(()),
        }
    }

    fn arm_pollout(&mut self, fd: RawFd) -> io::Result<()> {
        let slot = self.slot(fd);
        if slot.pollout_armed {
            return Ok(());
        }
        slot.pollout_armed = true;
        let generation = slot.generation;
        let entry = opcode::PollAdd::new(types::Fd(fd), libc::POLLOUT as u32).build();
        let entry = self
            .on_conn(fd, entry)
            .user_data(tag(POLLOUT, generation, fd));
        self.push(&entry)
    }

    /// Queues one `sendmsg` of what `fd` owes, unless one is in flight.
    fn send(&mut self, reactor: &UringReactor<'_, '_>, fd: RawFd) -> io::Result<()> {
        let slot = *self.slot(fd);
        if slot.sending.is_some() {
            return Ok(());
        }
        let i = self.stages.take(fd, slot.generation);
        let stage = &mut self.stages.stages[i as usize];
        let offered = reactor.gather(fd, &mut stage.gather);
        if offered == 0 {
            self.stages.give_back(i);
            return Ok(());
        }
        // MSG_WAITALL: the kernel continues a short send on a stream socket
        // itself, so a completion is all of `offered` or an error.
        let flags = (libc::MSG_NOSIGNAL | libc::MSG_WAITALL) as u32;
        let entry = match stage.gather.contiguous() {
            Some((at, len)) => opcode::Send::new(types::Fd(fd), at, len as u32)
                .flags(flags as i32)
                .build(),
            None => {
                stage.msg = stage.gather.msghdr();
                opcode::SendMsg::new(types::Fd(fd), &stage.msg)
                    .flags(flags)
                    .build()
            }
        };
        let entry = self.on_conn(fd, entry).user_data(tag(SEND, i, fd));
        self.slot(fd).sending = Some(i);
        self.push(&entry)
    }

    fn arm_accept(&mut self, listen_fd: RawFd) -> io::Result<()> {
        let flags = libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC;
        let entry = if self.features.has(UringFeature::MultishotAccept) {
            opcode::AcceptMulti::new(types::Fd(listen_fd))
                .flags(flags)
                .build()
        } else {
            opcode::Accept::new(
                types::Fd(listen_fd),
                std::ptr::null_mut(),
                std::ptr::null_mut(),
            )
            .flags(flags)
            .build()
        };
        self.push(&entry.user_data(tag(ACCEPT, 0, listen_fd)))
    }

    /// At the descriptor limit: waits for a connection on the listener
    /// (accepted, or shed, by the reactor's accept). An io_uring accept
    /// fails with EMFILE before it looks at the queue, so re-armed it
    /// only polls the limit, every back-off, and a connection waits in
    /// the queue until then.
    fn arm_accept_poll(&mut self, listen_fd: RawFd) -> io::Result<()> {
        let entry = opcode::PollAdd::new(types::Fd(listen_fd), libc::POLLIN as u32)
            .build()
            .user_data(tag(ACCEPT_POLL, 0, listen_fd));
        self.push(&entry)
    }

    /// Hands buffers `first..first + count` to the kernel.
    fn provide(&mut self, pool: &BufferPool, first: u16, count: u16) -> io::Result<()> {
        match self.provider.provide(pool, first, count) {
            Ok(None) => Ok(()),
            Ok(Some(entry)) => self.push(&entry.user_data(tag(PROVIDE, 0, 0))),
            Err(e) => Err(outside_pool(e)),
        }
    }

    /// Makes buffers given back this turn visible to the kernel (ring only;
    /// provide entries go with the next submission).
    fn publish_buffers(&self) {
        self.provider.publish();
    }

    /// A new connection: fresh slot state, registered in the file table
    /// when that feature is on, and its receive armed.
    fn adopted(&mut self, fd: RawFd) -> io::Result<()> {
        let fixed = fd >= 0
            && (fd as u32) < self.fixed_table
            && self
                .ring
                .submitter()
                .register_files_update(fd as u32, &[fd])
                .is_ok();
        let slot = self.slot(fd);
        slot.next_generation();
        slot.recv_armed = false;
        slot.pollout_armed = false;
        slot.sending = None;
        slot.fixed = fixed;
        self.arm_recv(fd)
    }

    /// Closes descriptors the reactor released, now that the entries queued
    /// for them went to the kernel: out of the file table first, since the
    /// table holds the socket open.
    fn close_released(&mut self, closer: &DeferredClose) {
        let mut fds = closer.fds.borrow_mut();
        if fds.is_empty() {
            return;
        }
        for fd in fds.drain(..) {
            let raw = fd.as_raw_fd();
            let slot = self.slot(raw);
            if slot.fixed {
                slot.fixed = false;
                // A failure leaves the socket open until the ring goes:
                // nothing better can be done about it here.
                let _ = self
                    .ring
                    .submitter()
                    .register_files_update(raw as u32, &[-1]);
            }
            drop(fd);
        }
    }

    /// Follows up what the connection wants after an event.
    fn follow(
        &mut self,
        reactor: &UringReactor<'_, '_>,
        fd: RawFd,
        interest: Interest,
    ) -> io::Result<()> {
        match interest {
            Interest::Closed => {
                // A pending operation holds the socket open (a client that
                // never reads, closed by the idle timeout, would not see the
                // close); cancel them, and move the generation on so late
                // completions are dropped.
                self.cancel_recv(fd)?;
                self.cancel_pollout(fd)?;
                self.cancel_send(fd)?;
                self.slot(fd).next_generation();
                Ok(())
            }
            Interest::Wait { read, write } => {
                if read {
                    self.arm_recv(fd)?;
                } else {
                    // Back-pressure: stop receiving until the outbox drains.
                    self.cancel_recv(fd)?;
                }
                if write {
                    if self.features.has(UringFeature::RingSend) {
                        self.send(reactor, fd)?;
                    } else {
                        self.arm_pollout(fd)?;
                    }
                }
                Ok(())
            }
        }
    }
}

/// The soft open-files limit: the highest descriptor number the file
/// table must hold (capped; 1024 if unreadable).
fn open_files_limit() -> u32 {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `limit` is a valid rlimit for getrlimit(2) to fill.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        return 1024;
    }
    u32::try_from(limit.rlim_cur)
        .unwrap_or(u32::MAX)
        .min(1 << 20)
}

/// Prints the features in use, once at start.
fn announce(features: UringFeatures, provider: &Provider, fixed_table: u32) {
    let mut used = features;
    if !provider.is_ring() {
        used = used.with(UringFeature::BufRing, false);
    }
    if fixed_table == 0 {
        used = used.with(UringFeature::FixedFiles, false);
    }
    eprintln!("connlab serve: io_uring features: {used}");
}

/// Accepts (or sheds, at the limit) what waits on the listener with the
/// reactor's own accept; returns how many connections it accepted.
fn accept_in_reactor(
    ring: &mut Ring,
    reactor: &mut Reactor<'_, &DeferredClose>,
    accept: &mut AcceptState,
) -> io::Result<usize> {
    let mut adopted = Vec::new();
    reactor.accept_pending(|fd| adopted.push(fd));
    for &fd in &adopted {
        ring.adopted(fd)?;
    }
    accept.accepted += adopted.len();
    Ok(adopted.len())
}

/// Where the loop's accept stands.
#[derive(Default)]
struct AcceptState {
    /// An accept is in the kernel (a multishot one that has not ended).
    armed: bool,
    /// A cancel of the multishot accept was queued and its end not seen yet.
    cancelling: bool,
    /// Connections accepted this turn.
    accepted: usize,
    /// An accept failed with EMFILE and no connection was accepted since:
    /// the listener is polled instead ([`Ring::arm_accept_poll`]).
    at_limit: bool,
}

/// Handles one completion: an accepted connection (or the accept's failure),
/// received bytes, a finished send, writability, a failed buffer provision.
/// `accept.armed` turns false when the multishot accept ended.
fn complete(
    cqe: &cqueue::Entry,
    ring: &mut Ring,
    reactor: &mut Reactor<'_, &DeferredClose>,
    pool: &BufferPool,
    ring_send: bool,
    accept: &mut AcceptState,
) -> io::Result<()> {
    let Tag {
        kind,
        generation,
        fd,
    } = Tag::decode(cqe.user_data());
    let (res, flags) = (cqe.result(), cqe.flags());
    match kind {
        ACCEPT => {
            if res >= 0 {
                // SAFETY: the kernel installed this new descriptor for us alone.
                let conn = unsafe { OwnedFd::from_raw_fd(res) };
                set_nodelay(res);
                let fd = reactor.adopt(conn);
                ring.adopted(fd)?;
                accept.accepted += 1;
            } else if res == -libc::ECANCELED {
                // Cancelled by this loop (`--accept shared`) or at teardown.
            } else if res == -libc::EMFILE || res == -libc::ENFILE {
                // Out of descriptors: shed what waits, as every engine does.
                // An accept fails with EMFILE before it looks for a
                // connection: re-armed at once, it would complete at once,
                // forever (1.9 CPU s in 2 s at the limit, issue 29). Until
                // a connection fits again the listener is polled instead,
                // and what it reports accepted or shed here.
                accept.at_limit = accept_in_reactor(ring, reactor, accept)? == 0;
            } else if res == -libc::EINVAL {
                return Err(io::Error::other(
                    "--engine uring: this kernel's io_uring refused accept \
                 (multishot accept needs Linux 5.19; try \
                 --uring-features -multishot-accept)",
                ));
            } else {
                reactor.accept_failed();
            }
            if !cqueue::more(flags) {
                accept.armed = false;
                accept.cancelling = false;
            }
        }
        RECV => {
            let current = ring.slot(fd).is_current(generation);
            if current && !cqueue::more(flags) {
                ring.slots[fd as usize].recv_armed = false;
            }
            let buffer = cqueue::buffer_select(flags);
            if current && res >= 0 {
                let data: &[u8] = match buffer {
                    // SAFETY: this completion returned buffer `bid` with
                    // `res` bytes written; it is provided again only
                    // below, after `data` was last used.
                    Some(bid) if res > 0 => unsafe {
                        pool.completed(bid, res as usize).map_err(outside_pool)?
                    },
                    _ => &[],
                };
                let interest = reactor.received(fd, data, !ring_send);
                ring.follow(&*reactor, fd, interest)?;
            } else if current && res == -libc::ENOBUFS {
                ring.starved.push(fd);
            } else if current && res == -libc::EINVAL {
                return Err(io::Error::other(
                    "--engine uring: this kernel's io_uring refused a receive \
                 (multishot receive needs Linux 6.0; try \
                 --uring-features -multishot-recv)",
                ));
            } else if current && res != -libc::ECANCELED {
                reactor.abort(fd);
                ring.follow(&*reactor, fd, Interest::Closed)?;
            }
            if let Some(bid) = buffer {
                ring.provide(pool, bid, 1)?;
            }
        }
        SEND => {
            let i = generation;
            let Some(stage) = ring.stages.stages.get(i as usize) else {
                return Ok(());
            };
            let (stage_fd, stage_generation) = (stage.fd, stage.generation);
            let slot = *ring.slot(stage_fd);
            if slot.is_current(stage_generation) && slot.sending == Some(i) {
                ring.slots[stage_fd as usize].sending = None;
                let interest = if res >= 0 {
                    let gather = &ring.stages.stages[i as usize].gather;
                    reactor.sent(stage_fd, res as usize, gather)
                } else {
                    // The peer reset or went away: that connection only.
                    reactor.abort(stage_fd);
                    Interest::Closed
                };
                ring.follow(&*reactor, stage_fd, interest)?;
            }
            ring.stages.give_back(i);
        }
        ACCEPT_POLL => {
            accept.armed = false;
            if res >= 0 {
                // A connection is there: it fits (the limit is over) or is shed.
                accept.at_limit = accept_in_reactor(ring, reactor, accept)? == 0;
            } else if res != -libc::ECANCELED {
                reactor.accept_failed();
            }
        }
        POLLOUT if ring.slot(fd).is_current(generation) => {
            ring.slots[fd as usize].pollout_armed = false;
            let interest = reactor.dispatch(fd, false, true, false);
            ring.follow(&*reactor, fd, interest)?;
        }
        PROVIDE if res < 0 => {
            return Err(io::Error::other(format!(
                "--engine uring: providing receive buffers failed: {}",
                io::Error::from_raw_os_error(-res)
            )));
        }
        _ => {}
    }
    Ok(())
}

impl Engine for Uring {
    fn serve(&mut self, ctx: RunContext<'_>) -> io::Result<()> {
        let shutdown = ctx.shutdown;
        let shared_accept = ctx.exclusive_accept;
        let mut timer = LoopTimer::new(ctx.profile);
        let closer = DeferredClose::default();
        let mut reactor = Reactor::with_io(ctx, &closer);
        let listen_fd = reactor.listener.fd();
        let setup::Setup { ring, features } = setup::build(self.features)?;
        let pool = BufferPool::new(BUFFERS, READ_CHUNK).map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("--engine uring: mapping the receive buffers failed: {e}"),
            )
        })?;
        let mut notes = Vec::new();
        let provider = Provider::new(
            &ring,
            &pool,
            GROUP,
            features.has(UringFeature::BufRing),
            &mut notes,
        );
        setup::print_notes(&mut notes);
        let mut fixed_table = 0;
        if features.has(UringFeature::FixedFiles) {
            let want = open_files_limit();
            match ring.submitter().register_files_sparse(want) {
                Ok(()) => fixed_table = want,
                Err(e) => setup::note(
                    UringFeature::FixedFiles,
                    &format!("registering a sparse file table failed ({e})"),
                    "operations name descriptors",
                ),
            }
        }
        announce(features, &provider, fixed_table);
        let mut ring = Ring {
            ring,
            features,
            slots: Vec::new(),
            starved: Vec::new(),
            stages: Stages::default(),
            provider,
            fixed_table,
        };
        ring.provide(&pool, 0, BUFFERS)?;
        ring.publish_buffers();
        reactor.ready();
        ring.arm_accept(listen_fd)?;
        let wake = opcode::PollAdd::new(types::Fd(shutdown.wake_fd()), libc::POLLIN as u32)
            .build()
            .user_data(tag(WAKE, 0, 0));
        ring.push(&wake)?;
        let ring_send = features.has(UringFeature::RingSend);
        let sqpoll = features.has(UringFeature::Sqpoll);
        let mut done: Vec<cqueue::Entry> = Vec::with_capacity(setup::ENTRIES as usize);
        let mut expired: Vec<RawFd> = Vec::new();
        // A multishot accept that ended is armed again at the next turn,
        // unless an accept failed a moment ago: then after the back-off
        // (re-arming at once with a connection queued at the limit would
        // complete with the same error at once, forever).
        let mut accept = AcceptState {
            armed: true,
            ..AcceptState::default()
        };
        // `--accept shared`: every loop's ring has a multishot accept on
        // the one listener. The kernel does not wake every ring per
        // connection: io_uring waits for an accept exclusively, so a
        // connection wakes one ring, always the first waiting on the
        // listener, since a multishot accept keeps its place in the
        // listener's wait queue (measured: 200 connections to two loops
        // went 0/200). So after a turn in which it accepted, a loop
        // cancels its multishot accept and arms it again at the next
        // turn, behind the other rings, and the next connection wakes
        // another loop. One-shot accepts leave the queue when they fire
        // and need nothing more. A connection that comes while the woken
        // ring has not run yet wakes that ring again, not another: a burst
        // still goes to one loop; connections that come one after another
        // are spread.
        let rotate_accept = shared_accept && features.has(UringFeature::MultishotAccept);
        let mut serve = || -> io::Result<()> {
            loop {
                if shutdown.requested() {
                    return Ok(());
                }
                if !accept.armed && reactor.accepting() {
                    if accept.at_limit {
                        ring.arm_accept_poll(listen_fd)?;
                    } else {
                        ring.arm_accept(listen_fd)?;
                    }
                    accept.armed = true;
                }
                accept.accepted = 0;
                let mut mark = timer.begin();
                let waited = ring.wait(reactor.wait());
                match waited {
                    Ok(_) => {}
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(e) if e.raw_os_error() == Some(libc::EBUSY) => {}
                    Err(e) if e.raw_os_error() == Some(libc::ETIME) => {}
                    Err(e) => return Err(e),
                }
                timer.called(&mut mark);
                reactor.tick();
                done.clear();
                done.extend(ring.ring.completion());
                for cqe in &done {
                    complete(cqe, &mut ring, &mut reactor, &pool, ring_send, &mut accept)?;
                }
                if rotate_accept
                    && accept.accepted > 0
                    && accept.armed
                    && !accept.at_limit
                    && !accept.cancelling
                {
                    ring.cancel(listen_fd, tag(ACCEPT, 0, listen_fd))?;
                    accept.cancelling = true;
                }
                ring.publish_buffers();
                reactor.expire(|fd| expired.push(fd));
                for fd in expired.drain(..) {
                    ring.follow(&reactor, fd, Interest::Closed)?;
                }
                // Receives that ran out of buffers: the buffers are back now.
                for fd in std::mem::take(&mut ring.starved) {
                    if reactor.is_open(fd) {
                        ring.arm_recv(fd)?;
                    }
                }
                if !closer.fds.borrow().is_empty() {
                    // Send the entries queued for the released descriptors
                    // (cancels among them) to the kernel, then close them.
                    ring.ring.submit()?;
                    while sqpoll && !ring.ring.submission().is_empty() {
                        std::thread::yield_now();
                    }
                    ring.close_released(&closer);
                }
                timer.end(mark);
            }
        };
        let result = serve();
        reactor.close_all();
        ring.close_released(&closer);
        // Sends cancelled by the ring's teardown may still read their
        // stages: leak them with the buffers (one set per run).
        std::mem::forget(std::mem::take(&mut ring.stages));
        result
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tag_round_trips_kind_generation_and_descriptor() {
        for (kind, generation, fd) in [
            (ACCEPT, 0, 0),
            (RECV, 1, 3),
            (POLLOUT, GENERATION_MASK, 1_048_575),
            (CANCEL, 12_345, i32::MAX),
            (SEND, 4_000, 17),
        ] {
            let t = Tag::new(kind, generation, fd);
            assert_eq!(Tag::decode(t.encode()), t);
        }
    }

    #[test]
    fn tag_keeps_only_the_low_generation_bits() {
        let t = Tag::new(RECV, (1 << GENERATION_BITS) + 5, 7);
        assert_eq!(Tag::decode(t.encode()), Tag::new(RECV, 5, 7));
    }

    /// Issue 17: after 2^24 generations of one descriptor number (about 8.4
    /// million connections: two steps per connection) every completion for
    /// it looked stale, so requests hung and the descriptor leaked.
    #[test]
    fn r17_completion_is_current_after_generation_passes_24_bits() {
        let mut slot = Slot {
            generation: GENERATION_MASK - 2,
            ..Slot::default()
        };
        for _ in 0..6 {
            slot.next_generation();
            let completion = Tag::decode(tag(RECV, slot.generation, 9));
            assert!(
                slot.is_current(completion.generation),
                "generation {:#x}: completion tagged {:#x} taken as stale",
                slot.generation,
                completion.generation
            );
            let stale = Tag::decode(tag(RECV, slot.generation.wrapping_sub(1), 9));
            assert!(!slot.is_current(stale.generation));
        }
    }

    #[test]
    fn buffers_are_a_power_of_two_as_a_ring_needs() {
        const { assert!(BUFFERS.is_power_of_two()) };
    }

    #[test]
    fn send_stages_are_reused_after_their_completion() {
        let mut stages = Stages::default();
        let a = stages.take(5, 1);
        let b = stages.take(6, 1);
        assert_ne!(a, b);
        stages.give_back(a);
        assert_eq!(stages.take(7, 2), a);
        assert_eq!(stages.stages[a as usize].fd, 7);
        assert_eq!(stages.stages.len(), 2);
    }
}
