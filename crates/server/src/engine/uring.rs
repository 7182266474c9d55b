//! io_uring: one thread, one ring. The listener has a multishot accept; every
//! connection has a multishot receive that the kernel fills into buffers from
//! one provided-buffer group, so a readiness event and the `recv` it would
//! cause arrive as one completion. Responses go out with `sendmsg` from the
//! same outbox as every engine; a full socket arms a one-shot POLLOUT.
//! Needs Linux 6.0 (multishot receive); an older or io_uring-disabled kernel
//! is reported when the engine starts.
//!
//! Every operation's user data carries its kind, the descriptor and the
//! descriptor's generation: a descriptor number reused after a close never
//! receives completions meant for the connection that had it.

use super::reactor::{Interest, Reactor};
use super::{Engine, RunContext};
use crate::connection::READ_CHUNK;
use crate::listener::set_nodelay;
use crate::profile::LoopTimer;
use io_uring::{cqueue, opcode, squeue, types, IoUring};
use std::io;
use std::os::fd::{FromRawFd, OwnedFd, RawFd};
use std::ptr::NonNull;

pub(super) struct Uring;

/// Submission queue size.
const ENTRIES: u32 = 4096;
/// Buffers in the provided-buffer group (READ_CHUNK each: 16 MiB in all).
const BUFFERS: u16 = 1024;
/// The buffer group id.
const GROUP: u16 = 1;

/// Kinds of operation, in the top byte of the user data.
const ACCEPT: u64 = 1;
const RECV: u64 = 2;
const POLLOUT: u64 = 3;
const PROVIDE: u64 = 4;
const WAKE: u64 = 5;
const CANCEL: u64 = 6;

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

/// The receive buffers the kernel fills: [`BUFFERS`] chunks of
/// [`READ_CHUNK`] bytes, held as a raw region rather than a `&mut [u8]`,
/// because the kernel writes into it while the loop runs. The loop hands
/// the kernel pointers only, and makes a slice only of the bytes a
/// completion says were written into a buffer the kernel has returned.
///
/// Never freed: a receive cancelled at shutdown may still be writing when
/// the ring is torn down, so the region is leaked instead (one per run).
struct BufferPool {
    base: NonNull<u8>,
}

impl BufferPool {
    const LEN: usize = BUFFERS as usize * READ_CHUNK;

    fn new() -> BufferPool {
        let region: Box<[u8]> = vec![0u8; Self::LEN].into_boxed_slice();
        // Ownership moves to the raw pointer; no reference to the region
        // outlives this line.
        let raw: *mut [u8] = Box::into_raw(region);
        // SAFETY: `Box::into_raw` never returns null.
        let base = unsafe { NonNull::new_unchecked(raw.cast::<u8>()) };
        BufferPool { base }
    }

    /// Where buffer `bid` starts, for the kernel; `None` outside the pool.
    fn buffer(&self, bid: u16) -> Option<*mut u8> {
        let at = usize::from(bid) * READ_CHUNK;
        // SAFETY: `at` is inside the region (checked first), so the offset
        // stays within one allocation.
        (at < Self::LEN).then(|| unsafe { self.base.as_ptr().add(at) })
    }

    /// The first `len` bytes of buffer `bid`, which a completion just
    /// returned to the loop.
    ///
    /// # Safety
    ///
    /// The kernel must have finished with buffer `bid` (its completion was
    /// read) and the buffer must not be provided to the kernel again while
    /// the returned slice lives; `len` must be at most what it wrote.
    unsafe fn completed(&self, bid: u16, len: usize) -> io::Result<&[u8]> {
        let start = self.buffer(bid).ok_or_else(|| outside_pool(bid))?;
        let len = len.min(READ_CHUNK);
        // SAFETY: the caller guarantees nothing writes buffer `bid` while
        // the slice lives; `buffer` keeps the start inside the region and
        // `len <= READ_CHUNK` keeps the end inside too; the bytes were
        // initialised (zeroed at allocation, then written by the kernel).
        Ok(unsafe { std::slice::from_raw_parts(start, len) })
    }
}

fn outside_pool(bid: u16) -> io::Error {
    io::Error::other(format!(
        "--engine uring: buffer id {bid} is outside the pool of {BUFFERS}"
    ))
}

/// Per-descriptor state of the ring's operations.
#[derive(Clone, Copy, Default)]
struct Slot {
    /// Counts modulo 2^[`GENERATION_BITS`], exactly what a tag carries, so a
    /// tag and its slot compare the same bits.
    generation: u32,
    recv_armed: bool,
    pollout_armed: bool,
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

struct Ring {
    ring: IoUring,
    slots: Vec<Slot>,
    /// Connections whose receive ended for want of buffers.
    starved: Vec<RawFd>,
}

impl Ring {
    /// Queues an entry, submitting first when the queue is full.
    ///
    /// Every entry points only at memory that outlives the ring's use of it:
    /// the buffer pool (leaked at shutdown) and nothing else.
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

    fn arm_recv(&mut self, fd: RawFd) -> io::Result<()> {
        let slot = self.slot(fd);
        if slot.recv_armed {
            return Ok(());
        }
        slot.recv_armed = true;
        let generation = slot.generation;
        let entry = opcode::RecvMulti::new(types::Fd(fd), GROUP)
            .build()
            .user_data(tag(RECV, generation, fd));
        self.push(&entry)
    }

    fn cancel_recv(&mut self, fd: RawFd) -> io::Result<()> {
        let slot = self.slot(fd);
        if !slot.recv_armed {
            return Ok(());
        }
        slot.recv_armed = false;
        let generation = slot.generation;
        let entry = opcode::AsyncCancel::new(tag(RECV, generation, fd))
            .build()
            .user_data(tag(CANCEL, 0, fd));
        self.push(&entry)
    }

    fn cancel_pollout(&mut self, fd: RawFd) -> io::Result<()> {
        let slot = self.slot(fd);
        if !slot.pollout_armed {
            return Ok(());
        }
        slot.pollout_armed = false;
        let generation = slot.generation;
        let entry = opcode::AsyncCancel::new(tag(POLLOUT, generation, fd))
            .build()
            .user_data(tag(CANCEL, 0, fd));
        self.push(&entry)
    }

    fn arm_pollout(&mut self, fd: RawFd) -> io::Result<()> {
        let slot = self.slot(fd);
        if slot.pollout_armed {
            return Ok(());
        }
        slot.pollout_armed = true;
        let generation = slot.generation;
        let entry = opcode::PollAdd::new(types::Fd(fd), libc::POLLOUT as u32)
            .build()
            .user_data(tag(POLLOUT, generation, fd));
        self.push(&entry)
    }

    fn arm_accept(&mut self, listen_fd: RawFd) -> io::Result<()> {
        let entry = opcode::AcceptMulti::new(types::Fd(listen_fd))
            .flags(libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC)
            .build()
            .user_data(tag(ACCEPT, 0, listen_fd));
        self.push(&entry)
    }

    /// Hands buffers `first..first + count` back to the kernel.
    fn provide(&mut self, pool: &BufferPool, first: u16, count: u16) -> io::Result<()> {
        let start = pool.buffer(first).ok_or_else(|| outside_pool(first))?;
        let entry = opcode::ProvideBuffers::new(start, READ_CHUNK as i32, count, GROUP, first)
            .build()
            .user_data(tag(PROVIDE, 0, 0));
        self.push(&entry)
    }

    /// Follows up what the connection wants after an event.
    fn follow(&mut self, fd: RawFd, interest: Interest) -> io::Result<()> {
        match interest {
            Interest::Closed => {
                // A pending receive or POLLOUT holds the socket open (a
                // client that never reads, closed by the idle timeout, would
                // not see the close); cancel them, and move the generation
                // on so late completions are dropped.
                self.cancel_recv(fd)?;
                self.cancel_pollout(fd)?;
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
                    self.arm_pollout(fd)?;
                }
                Ok(())
            }
        }
    }
}

impl Engine for Uring {
    fn serve(&mut self, ctx: RunContext<'_>) -> io::Result<()> {
        let shutdown = ctx.shutdown;
        let mut timer = LoopTimer::new(ctx.profile);
        let mut reactor = Reactor::new(ctx);
        let listen_fd = reactor.listener.fd();
        let ring = IoUring::new(ENTRIES).map_err(|e| {
            io::Error::new(
                e.kind(),
                format!(
                    "--engine uring: io_uring_setup failed ({e}): this kernel has no usable \
                     io_uring (too old, or disabled by the kernel.io_uring_disabled sysctl)"
                ),
            )
        })?;
        let pool = BufferPool::new();
        let mut ring = Ring {
            ring,
            slots: Vec::new(),
            starved: Vec::new(),
        };
        ring.provide(&pool, 0, BUFFERS)?;
        ring.arm_accept(listen_fd)?;
        let wake = opcode::PollAdd::new(types::Fd(shutdown.wake_fd()), libc::POLLIN as u32)
            .build()
            .user_data(tag(WAKE, 0, 0));
        ring.push(&wake)?;
        let mut done: Vec<cqueue::Entry> = Vec::with_capacity(ENTRIES as usize);
        let mut expired: Vec<RawFd> = Vec::new();
        while !shutdown.requested() {
            let mut mark = timer.begin();
            let waited = match reactor.wait() {
                None => ring.ring.submit_and_wait(1),
                // IORING_ENTER_EXT_ARG (Linux 5.11): wait for a completion
                // or until the next header/idle deadline.
                Some(wait) => {
                    let ts = types::Timespec::from(wait);
                    let args = types::SubmitArgs::new().timespec(&ts);
                    ring.ring.submitter().submit_with_args(1, &args)
                }
            };
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
                            let slot = ring.slot(fd);
                            slot.next_generation();
                            slot.recv_armed = false;
                            slot.pollout_armed = false;
                            ring.arm_recv(fd)?;
                        } else if res == -libc::EMFILE || res == -libc::ENFILE {
                            // Out of descriptors: shed what waits, as every engine does.
                            let mut adopted = Vec::new();
                            reactor.accept_pending(|fd| adopted.push(fd));
                            for fd in adopted {
                                ring.slot(fd).next_generation();
                                ring.arm_recv(fd)?;
                            }
                        } else if res == -libc::EINVAL {
                            return Err(io::Error::other(
                                "--engine uring: this kernel's io_uring has no multishot accept \
                                 (Linux 5.19 and later)",
                            ));
                        } else {
                            reactor
                                .counters
                                .accept_errors
                                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        }
                        if !cqueue::more(flags) {
                            ring.arm_accept(listen_fd)?;
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
                                    pool.completed(bid, res as usize)?
                                },
                                _ => &[],
                            };
                            let interest = reactor.received(fd, data);
                            ring.follow(fd, interest)?;
                        } else if current && res == -libc::ENOBUFS {
                            ring.starved.push(fd);
                        } else if current && res == -libc::EINVAL {
                            return Err(io::Error::other(
                                "--engine uring: this kernel's io_uring has no multishot receive \
                                 (Linux 6.0 and later)",
                            ));
                        } else if current && res != -libc::ECANCELED {
                            reactor.abort(fd);
                            ring.follow(fd, Interest::Closed)?;
                        }
                        if let Some(bid) = buffer {
                            ring.provide(&pool, bid, 1)?;
                        }
                    }
                    POLLOUT if ring.slot(fd).is_current(generation) => {
                        ring.slots[fd as usize].pollout_armed = false;
                        let interest = reactor.dispatch(fd, false, true, false);
                        ring.follow(fd, interest)?;
                    }
                    PROVIDE if res < 0 => {
                        return Err(io::Error::other(format!(
                            "--engine uring: providing receive buffers failed: {}",
                            io::Error::from_raw_os_error(-res)
                        )));
                    }
                    _ => {}
                }
            }
            reactor.expire(|fd| expired.push(fd));
            for fd in expired.drain(..) {
                ring.follow(fd, Interest::Closed)?;
            }
            // Receives that ran out of buffers: the buffers are back now.
            for fd in std::mem::take(&mut ring.starved) {
                ring.arm_recv(fd)?;
            }
            timer.end(mark);
        }
        reactor.close_all();
        Ok(())
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
    fn pool_hands_out_buffers_inside_its_region_only() {
        let pool = BufferPool::new();
        let first = pool.buffer(0).map(|p| p as usize);
        let last = pool.buffer(BUFFERS - 1).map(|p| p as usize);
        assert_eq!(
            last.zip(first).map(|(l, f)| l - f),
            Some((BUFFERS as usize - 1) * READ_CHUNK)
        );
        assert!(pool.buffer(BUFFERS).is_none());
        // SAFETY: no kernel has this pool; nothing writes it.
        let data = unsafe { pool.completed(BUFFERS - 1, 2 * READ_CHUNK) };
        assert_eq!(data.map(<[u8]>::len).ok(), Some(READ_CHUNK));
        // SAFETY: as above.
        assert!(unsafe { pool.completed(BUFFERS, 1) }.is_err());
    }
}
