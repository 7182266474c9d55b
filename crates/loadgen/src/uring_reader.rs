//! The io_uring reader (`--io uring`): a multishot receive stays armed on
//! every connection (idle ones too, to notice the server closing them),
//! taking buffers from a registered provided-buffer ring; each loop turn is
//! one `io_uring_enter` that submits the turn's re-armed receives and waits
//! for completions. Bytes go to the same [`Core`] as the epoll reader's, and
//! are timestamped when their completion is taken, as the epoll reader
//! timestamps them when `recv` returns.
//!
//! In closed loop the next requests go out through the same ring: each is a
//! SENDMSG entry submitted by the turn's one `io_uring_enter` (so a request
//! costs no system call of its own), one entry in flight per connection so
//! that a connection's requests leave in order ([`RingSends`]). Each is
//! stamped as sent immediately before that `io_uring_enter`
//! ([`Core::stamp_sends`]). Open loop keeps the writer thread, its pacing and
//! its per-request send timestamps, the same for both paths.
//!
//! Availability is probed before any connection is opened ([`probe`]); a
//! kernel without what this needs fails the run with a message naming
//! `--io epoll` instead of falling back silently.

use crate::reader::{Core, ReaderOutcome, ReaderPlan};
use crate::request::RequestTemplate;
use connlab_os::uring::{
    self, BufRing, BufferPool, OutsidePool, RegisterError, RingConfig, Support,
};
use io_uring::types::{Fd, SubmitArgs, Timespec};
use io_uring::{cqueue, opcode, squeue, IoUring};
use std::collections::VecDeque;
use std::io;
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};

/// Submission queue entries (completion queue: four times as many).
const ENTRIES: u32 = 4096;
/// Receive buffers in the provided-buffer ring (a power of two).
const BUFFERS: u16 = 512;
/// Bytes per receive buffer.
const BUF_LEN: usize = 16 * 1024;
/// The buffer group id.
const GROUP: u16 = 0;
/// Longest wait per turn, so the end of the run is noticed (as the epoll reader's).
const WAIT: Duration = Duration::from_millis(5);
/// User data of the shutdown wake-up poll; receives use their connection's index.
const WAKE: u64 = u64::MAX;
/// User data of a cancellation at the end of the run.
const CANCEL: u64 = u64::MAX - 1;
/// Tag of a send's user data (with the connection's index below it).
const SEND: u64 = 1 << 62;
/// Iovecs per SENDMSG entry (a longer request goes out in several).
const SEND_IOVECS: usize = 16;
/// Most requests one SENDMSG entry carries (a CLB1 header each).
const SEND_BATCH: usize = 8;
/// How long the end of the run waits for cancelled sends to complete.
const CANCEL_WAIT: Duration = Duration::from_secs(1);

/// Why `--io uring` cannot run here, as the user should read it.
fn unavailable(why: impl std::fmt::Display) -> String {
    format!(
        "--io uring: io_uring is not usable here ({why}); run with --io epoll (the default). \
         The uring reader needs Linux 6.0 or later with io_uring enabled \
         (/proc/sys/kernel/io_uring_disabled = 0)"
    )
}

/// Checks that this kernel has everything the uring reader uses: a ring,
/// the RECV, POLL_ADD, SENDMSG and ASYNC_CANCEL opcodes, multishot receive (Linux 6.0) and a
/// registered provided-buffer ring (Linux 5.19). The message names `--io epoll`.
pub(crate) fn probe() -> Result<(), String> {
    let ring = build_ring().map_err(|e| unavailable(format!("io_uring_setup failed: {e}")))?;
    let support =
        Support::probe(&ring).map_err(|e| unavailable(format!("the opcode probe failed: {e}")))?;
    let missing = support.first_missing(&[
        (opcode::Recv::CODE, "RECV"),
        (opcode::PollAdd::CODE, "POLL_ADD"),
        (opcode::SendMsg::CODE, "SENDMSG"),
        (opcode::AsyncCancel::CODE, "ASYNC_CANCEL"),
    ]);
    if let Some(name) = missing {
        return Err(unavailable(format!("no IORING_OP_{name}")));
    }
    match support.kernel() {
        Some(v) if v >= (6, 0) => {}
        Some((major, minor)) => {
            return Err(unavailable(format!(
                "multishot receive needs Linux 6.0; this is {major}.{minor}"
            )))
        }
        None => return Err(unavailable("the kernel version is unreadable")),
    }
    // A small buffer ring, registered and dropped again.
    match BufRing::register(&ring, 8, GROUP) {
        Ok(test) => {
            let _ = test.unregister(&ring);
            Ok(())
        }
        Err(RegisterError::Map(e)) => Err(unavailable(format!("mmap failed: {e}"))),
        Err(RegisterError::Register(e)) => Err(unavailable(format!(
            "registering a provided-buffer ring failed: {e}"
        ))),
    }
}

/// The ring: `SINGLE_ISSUER` + `DEFER_TASKRUN` (completions run only when
/// the reader enters the kernel to wait), else `COOP_TASKRUN`, else plain.
fn build_ring() -> io::Result<IoUring> {
    let config = RingConfig {
        entries: ENTRIES,
        sqpoll_idle_ms: None,
        defer_taskrun: true,
    };
    // The reader prints nothing: what the kernel lacks only slows it.
    uring::build(config, &mut Vec::new()).map(|built| built.ring)
}

/// The receive buffers ([`BUFFERS`] chunks of [`BUF_LEN`] bytes) and the
/// registered ring that hands them to the kernel, every buffer given to it.
/// Both are leaked, not freed: when the ring is torn down at the end of the
/// run, a receive the kernel is still cancelling could write into them (one
/// pool per run).
fn register_buffers(uring: &IoUring) -> io::Result<(BufferPool, BufRing)> {
    let pool = BufferPool::new(BUFFERS, BUF_LEN)?;
    let mut ring = match BufRing::register(uring, BUFFERS, GROUP) {
        Ok(ring) => ring,
        Err(e) => {
            // SAFETY: never lent to the kernel.
            unsafe { pool.unmap() };
            return Err(e.into());
        }
    };
    for bid in 0..BUFFERS {
        ring.push(&pool, bid).map_err(outside)?;
    }
    ring.publish();
    Ok((pool, ring))
}

fn outside(e: OutsidePool) -> io::Error {
    io::Error::other(format!("--io uring: {e}"))
}

/// Queues an entry, submitting first when the queue is full.
///
/// Entries point only at memory that outlives the ring's use of it (the
/// leaked buffers; receives carry no pointer of their own).
fn push(ring: &mut IoUring, entry: &squeue::Entry) -> io::Result<()> {
    loop {
        // SAFETY: see above.
        if unsafe { ring.submission().push(entry) }.is_ok() {
            return Ok(());
        }
        ring.submit()?;
    }
}

/// A multishot receive on connection `c` (descriptor `fd`).
fn recv(fd: i32, c: usize) -> squeue::Entry {
    opcode::RecvMulti::new(Fd(fd), GROUP)
        .build()
        .user_data(c as u64)
}

/// What a SENDMSG entry points at; boxed, so it stays put until the entry
/// completes.
struct SendSlot {
    msg: libc::msghdr,
    iov: [libc::iovec; SEND_IOVECS],
    heads: [[u8; 16]; SEND_BATCH],
}

/// A request not yet wholly handed to the kernel: its bytes from `offset` on.
struct Unsent {
    seq: u32,
    offset: u64,
    /// The whole request's length, learnt when its first entry is built.
    len: u64,
}

/// One connection's closed-loop sends.
#[derive(Default)]
struct ConnSends {
    queue: VecDeque<Unsent>,
    /// A SENDMSG entry of the queue's front is in flight.
    busy: bool,
    /// Allocated at the connection's first send.
    slot: Option<Box<SendSlot>>,
}

/// Closed-loop sends through the ring. A connection has at most one SENDMSG
/// in flight (two could be reordered when the first waits for socket space);
/// it carries the front of the connection's queue, every request queued
/// since the last entry as far as [`SEND_BATCH`] and [`SEND_IOVECS`] allow.
/// Requests queued while an entry is in flight wait for it, as the epoll
/// path's [`Sender`](crate::sender::Sender) keeps a backlog. Entries ask for
/// `MSG_WAITALL`, so the kernel finishes their bytes before it completes the
/// entry; a short result (after an error) is retried from where it stopped.
struct RingSends<'t> {
    template: &'t RequestTemplate,
    conns: Vec<ConnSends>,
    /// Connections whose queue front should get an entry this turn.
    ready: Vec<usize>,
    /// Entries in flight.
    in_flight: usize,
    bytes_sent: u64,
}

impl<'t> RingSends<'t> {
    fn new(template: &'t RequestTemplate, connections: usize) -> Self {
        RingSends {
            template,
            conns: (0..connections).map(|_| ConnSends::default()).collect(),
            ready: Vec::new(),
            in_flight: 0,
            bytes_sent: 0,
        }
    }

    /// Queues request `seq` on connection `c`.
    fn queue(&mut self, c: usize, seq: u32) {
        let conn = &mut self.conns[c];
        conn.queue.push_back(Unsent {
            seq,
            offset: 0,
            len: 0,
        });
        if !conn.busy && conn.queue.len() == 1 {
            self.ready.push(c);
        }
    }

    /// Pushes an entry for every ready connection (its queue's requests from
    /// the front); returns how many.
    fn issue(&mut self, ring: &mut IoUring, fds: &[i32], core: &mut Core) -> io::Result<usize> {
        let mut issued = 0;
        for i in 0..self.ready.len() {
            let c = self.ready[i];
            let conn = &mut self.conns[c];
            if conn.busy {
                continue;
            }
            if conn.queue.is_empty() {
                continue;
            }
            let slot = conn.slot.get_or_insert_with(|| {
                Box::new(SendSlot {
                    // SAFETY: an all-zero msghdr is valid (no name, no control data).
                    msg: unsafe { std::mem::zeroed() },
                    iov: [libc::iovec {
                        iov_base: std::ptr::null_mut(),
                        iov_len: 0,
                    }; SEND_IOVECS],
                    heads: [[0; 16]; SEND_BATCH],
                })
            });
            // The queue's requests, oldest first, until the iovecs or the
            // headers run out or a request does not fit whole.
            let mut n = 0;
            for (r, head) in conn.queue.iter_mut().zip(slot.heads.iter_mut()) {
                if n == SEND_IOVECS {
                    break;
                }
                let (k, len) = self
                    .template
                    .iovecs(r.seq, r.offset, head, &mut slot.iov[n..]);
                r.len = len;
                let taken: u64 = slot.iov[n..n + k].iter().map(|v| v.iov_len as u64).sum();
                n += k;
                if taken < len - r.offset {
                    break;
                }
            }
            slot.msg.msg_iov = slot.iov.as_mut_ptr();
            slot.msg.msg_iovlen = n;
            let entry = opcode::SendMsg::new(Fd(fds[c]), &slot.msg)
                .flags((libc::MSG_NOSIGNAL | libc::MSG_WAITALL) as u32)
                .build()
                .user_data(SEND | c as u64);
            // SAFETY: the entry points at `slot` (boxed, kept until the entry
            // completes or the run ends, see `quiesce`), whose iovecs point into
            // `slot.heads` or at bytes the template owns for the whole run.
            while unsafe { ring.submission().push(&entry) }.is_err() {
                // The queue is full: these requests are handed over now.
                core.stamp_sends();
                ring.submit()?;
            }
            conn.busy = true;
            self.in_flight += 1;
            issued += 1;
        }
        self.ready.clear();
        Ok(issued)
    }

    /// Takes the completion of connection `c`'s send: `res` bytes went, or
    /// the error `-res`. A connection the send failed on is marked dead.
    fn complete(&mut self, c: usize, res: i32, core: &mut Core) {
        let conn = &mut self.conns[c];
        if !conn.busy {
            return;
        }
        conn.busy = false;
        self.in_flight -= 1;
        if res >= 0 {
            self.bytes_sent += res as u64;
            // The entry's requests, oldest first: those it finished leave the queue.
            let mut left = res as u64;
            while left > 0 {
                let Some(front) = conn.queue.front_mut() else {
                    break;
                };
                let rest = front.len - front.offset;
                if left < rest {
                    front.offset += left;
                    break;
                }
                left -= rest;
                conn.queue.pop_front();
            }
        } else if !matches!(-res, libc::EINTR | libc::EAGAIN) {
            // Reset, closed, or cancelled at the end: the receive side
            // counts what this connection leaves unanswered.
            conn.queue.clear();
            core.plan.dead[c].store(true, Relaxed);
        }
        if !conn.queue.is_empty() && !core.is_closed(c) {
            self.ready.push(c);
        }
    }

    /// At the end of the run: cancels the sends still in flight and waits a
    /// little for their completions. Slots of entries that never completed
    /// are leaked, as the receive buffers are, since the kernel may still
    /// read them.
    fn quiesce(mut self, ring: &mut IoUring) {
        if self.in_flight > 0 {
            let _ = self.cancel_all(ring);
        }
        if self.in_flight > 0 {
            for conn in &mut self.conns {
                if conn.busy {
                    if let Some(slot) = conn.slot.take() {
                        Box::leak(slot);
                    }
                }
            }
        }
    }

    fn cancel_all(&mut self, ring: &mut IoUring) -> io::Result<()> {
        for c in 0..self.conns.len() {
            if self.conns[c].busy {
                let cancel = opcode::AsyncCancel::new(SEND | c as u64)
                    .build()
                    .user_data(CANCEL);
                push(ring, &cancel)?;
            }
        }
        let deadline = Instant::now() + CANCEL_WAIT;
        let ts = Timespec::from(WAIT);
        let args = SubmitArgs::new().timespec(&ts);
        while self.in_flight > 0 && Instant::now() < deadline {
            match ring.submitter().submit_with_args(1, &args) {
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if matches!(e.raw_os_error(), Some(libc::ETIME) | Some(libc::EBUSY)) => {}
                Err(e) => return Err(e),
            }
            for cqe in ring.completion() {
                let data = cqe.user_data();
                if data != WAKE && data != CANCEL && data & SEND != 0 {
                    let c = (data & !SEND) as usize;
                    if let Some(conn) = self.conns.get_mut(c) {
                        if conn.busy {
                            conn.busy = false;
                            self.in_flight -= 1;
                        }
                    }
                }
            }
        }
        Ok(())
    }
}

/// Runs the reader on io_uring; see the module documentation.
pub(crate) fn run_reader(plan: ReaderPlan<'_, '_>) -> io::Result<ReaderOutcome> {
    // Built on this thread: with SINGLE_ISSUER it is the only one that submits.
    let mut ring = build_ring().map_err(|e| {
        io::Error::new(e.kind(), unavailable(format!("io_uring_setup failed: {e}")))
    })?;
    let (pool, mut bufs) = register_buffers(&ring).map_err(|e| {
        io::Error::new(
            e.kind(),
            unavailable(format!("registering the buffer ring failed: {e}")),
        )
    })?;
    let fds = plan.fds;
    let wake_fd = plan.shutdown.wake_fd();
    let template = plan
        .closed_loop
        .as_ref()
        .filter(|cl| cl.via_ring)
        .map(|cl| cl.sender.template());
    let mut sends = template.map(|t| RingSends::new(t, fds.len()));
    let mut queued: Vec<(usize, u32)> = Vec::new();
    let mut core = Core::new(plan);
    for (c, &fd) in fds.iter().enumerate() {
        push(&mut ring, &recv(fd, c))?;
    }
    let wake = opcode::PollAdd::new(Fd(wake_fd), libc::POLLIN as u32)
        .build()
        .user_data(WAKE);
    push(&mut ring, &wake)?;
    let ts = Timespec::from(WAIT);
    let args = SubmitArgs::new().timespec(&ts);
    let mut done: Vec<(u64, i32, u32)> = Vec::with_capacity(4 * ENTRIES as usize);
    loop {
        // Closed loop: the requests of the last turn (the initial fill on
        // the first) become SENDMSG entries.
        let mut want = 1;
        if let Some(sends) = sends.as_mut() {
            core.take_queued(&mut queued);
            for (c, seq) in queued.drain(..) {
                sends.queue(c, seq);
            }
            // Their completions come with this wait (unless the socket is
            // full): wait for one event beyond them.
            want += sends
                .issue(&mut ring, fds, &mut core)?
                .min(ENTRIES as usize);
        }
        // The send time of the requests just queued: this `io_uring_enter`
        // hands them to the kernel, which sends each inline in it.
        core.stamp_sends();
        match ring.submitter().submit_with_args(want, &args) {
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            // Timed out, or completions wait in the overflow list: take what is there.
            Err(e) if matches!(e.raw_os_error(), Some(libc::ETIME) | Some(libc::EBUSY)) => {}
            Err(e) => return Err(e),
        }
        core.drain_sends();
        if core.stop_requested() {
            break;
        }
        done.clear();
        done.extend(
            ring.completion()
                .map(|cqe| (cqe.user_data(), cqe.result(), cqe.flags())),
        );
        for &(data, res, flags) in &done {
            if data == WAKE || data == CANCEL {
                continue;
            }
            if data & SEND != 0 {
                if let Some(sends) = sends.as_mut() {
                    let c = (data & !SEND) as usize;
                    if c < fds.len() {
                        sends.complete(c, res, &mut core);
                    }
                }
                continue;
            }
            let c = data as usize;
            if c >= fds.len() {
                continue;
            }
            let rearm = !cqueue::more(flags);
            if res > 0 {
                if let Some(bid) = cqueue::buffer_select(flags) {
                    if !core.is_closed(c) && core.is_active(c) {
                        // SAFETY: this completion returned buffer `bid` with `res`
                        // bytes written; it is given back only after `bytes` was
                        // last used.
                        let bytes = unsafe { pool.completed(bid, res as usize).map_err(outside)? };
                        match core.on_bytes(c, bytes) {
                            Ok(n) => core.send_next(c, n),
                            Err(kind) => core.fail(c, kind),
                        }
                    }
                    // An idle connection's unexpected bytes are dropped, as the
                    // epoll reader drops them.
                    bufs.push(&pool, bid).map_err(outside)?;
                }
            } else if res == 0 {
                if !core.is_closed(c) {
                    if core.is_active(c) {
                        let kind = core.on_eof(c);
                        core.fail(c, kind);
                    } else {
                        core.idle_closed(c);
                    }
                }
                continue;
            } else {
                let err = -res;
                // Out of buffers (they come back at the end of this turn) or
                // interrupted: receive again.
                if !matches!(err, libc::ENOBUFS | libc::EINTR | libc::EAGAIN) && !core.is_closed(c)
                {
                    if core.is_active(c) {
                        let kind = if err == libc::ECONNRESET {
                            "reset"
                        } else {
                            "recv_failed"
                        };
                        core.fail(c, kind);
                    } else {
                        core.idle_closed(c);
                    }
                }
            }
            if rearm && !core.is_closed(c) {
                push(&mut ring, &recv(fds[c], c))?;
            }
        }
        bufs.publish();
        if core.end_turn() {
            break;
        }
    }
    let mut out = core.finish();
    if let Some(sends) = sends {
        out.closed_loop_bytes_sent += sends.bytes_sent;
        sends.quiesce(&mut ring);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffers_are_a_power_of_two_as_a_ring_needs() {
        assert!(BUFFERS.is_power_of_two());
    }

    #[test]
    fn unavailable_names_the_epoll_path() {
        let m = unavailable("no IORING_OP_RECV");
        assert!(m.contains("--io epoll"), "{m}");
        assert!(m.contains("no IORING_OP_RECV"), "{m}");
    }
}
