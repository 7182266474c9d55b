//! The io_uring reader (`--io uring`): a multishot receive stays armed on
//! every connection (idle ones too, to notice the server closing them),
//! taking buffers from a registered provided-buffer ring; each loop turn is
//! one `io_uring_enter` that submits the turn's re-armed receives and waits
//! for completions. Bytes go to the same [`Core`] as the epoll reader's, and
//! are timestamped when their completion is taken, as the epoll reader
//! timestamps them when `recv` returns. The writer, its pacing and its
//! per-request send timestamps are the same for both paths.
//!
//! Availability is probed before any connection is opened ([`probe`]); a
//! kernel without what this needs fails the run with a message naming
//! `--io epoll` instead of falling back silently.

use crate::reader::{Core, ReaderOutcome, ReaderPlan};
use io_uring::types::{BufRingEntry, Fd, SubmitArgs, Timespec};
use io_uring::{cqueue, opcode, squeue, IoUring, Probe};
use std::io;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU16, Ordering};
use std::time::Duration;

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
/// User data of the shutdown wake-up poll; connections use their index.
const WAKE: u64 = u64::MAX;

/// Why `--io uring` cannot run here, as the user should read it.
fn unavailable(why: impl std::fmt::Display) -> String {
    format!(
        "--io uring: io_uring is not usable here ({why}); run with --io epoll (the default). \
         The uring reader needs Linux 6.0 or later with io_uring enabled \
         (/proc/sys/kernel/io_uring_disabled = 0)"
    )
}

/// Checks that this kernel has everything the uring reader uses: a ring,
/// the RECV and POLL_ADD opcodes, multishot receive (Linux 6.0) and a
/// registered provided-buffer ring (Linux 5.19). The message names `--io epoll`.
pub(crate) fn probe() -> Result<(), String> {
    let ring = build_ring().map_err(|e| unavailable(format!("io_uring_setup failed: {e}")))?;
    let mut probe = Probe::new();
    ring.submitter()
        .register_probe(&mut probe)
        .map_err(|e| unavailable(format!("the opcode probe failed: {e}")))?;
    for (code, name) in [
        (opcode::Recv::CODE, "RECV"),
        (opcode::PollAdd::CODE, "POLL_ADD"),
    ] {
        if !probe.is_supported(code) {
            return Err(unavailable(format!("no IORING_OP_{name}")));
        }
    }
    match kernel_version() {
        Some(v) if v >= (6, 0) => {}
        Some((major, minor)) => {
            return Err(unavailable(format!(
                "multishot receive needs Linux 6.0; this is {major}.{minor}"
            )))
        }
        None => return Err(unavailable("the kernel version is unreadable")),
    }
    // A small buffer ring, registered and dropped again.
    let test = BufRing::map(8).map_err(|e| unavailable(format!("mmap failed: {e}")))?;
    // SAFETY: the mapping is 8 entries long and is unregistered before it is unmapped.
    let registered = unsafe {
        ring.submitter()
            .register_buf_ring_with_flags(test.entries.as_ptr() as u64, 8, GROUP, 0)
    };
    if let Err(e) = registered {
        test.unmap();
        return Err(unavailable(format!(
            "registering a provided-buffer ring failed: {e}"
        )));
    }
    let _ = ring.submitter().unregister_buf_ring(GROUP);
    test.unmap();
    Ok(())
}

use connlab_os::kernel_version;

/// The ring: `SINGLE_ISSUER` + `DEFER_TASKRUN` (completions run only when
/// the reader enters the kernel to wait), else `COOP_TASKRUN`, else plain.
fn build_ring() -> io::Result<IoUring> {
    let mut last = None;
    for attempt in 0..3 {
        let mut b = IoUring::builder();
        b.setup_cqsize(ENTRIES * 4);
        match attempt {
            0 => {
                b.setup_single_issuer().setup_defer_taskrun();
            }
            1 => {
                b.setup_coop_taskrun().setup_taskrun_flag();
            }
            _ => {}
        }
        match b.build(ENTRIES) {
            Ok(ring) => return Ok(ring),
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => last = Some(e),
            Err(e) => return Err(e),
        }
    }
    Err(last.unwrap_or_else(|| io::Error::from_raw_os_error(libc::EINVAL)))
}

/// The receive buffers ([`BUFFERS`] chunks of [`BUF_LEN`] bytes), a raw
/// region the kernel writes between completions, and the registered ring
/// that hands them to it. Both are leaked, not freed: when the ring is torn
/// down at the end of the run, a receive the kernel is still cancelling
/// could write into them (one region per run).
struct Buffers {
    base: NonNull<u8>,
    ring: BufRing,
    /// The tail as the reader counts it (published by [`Buffers::publish`]).
    tail: u16,
}

impl Buffers {
    const LEN: usize = BUFFERS as usize * BUF_LEN;

    /// Allocates the buffers, registers the ring and gives the kernel every buffer.
    fn register(uring: &IoUring) -> io::Result<Buffers> {
        let region: Box<[u8]> = vec![0u8; Self::LEN].into_boxed_slice();
        let raw: *mut [u8] = Box::into_raw(region);
        // SAFETY: `Box::into_raw` never returns null.
        let base = unsafe { NonNull::new_unchecked(raw.cast::<u8>()) };
        let ring = BufRing::map(BUFFERS)?;
        // SAFETY: the mapping is `BUFFERS` entries long and never unmapped,
        // so it outlives the registration.
        unsafe {
            uring.submitter().register_buf_ring_with_flags(
                ring.entries.as_ptr() as u64,
                BUFFERS,
                GROUP,
                0,
            )?;
        }
        let mut bufs = Buffers {
            base,
            ring,
            tail: 0,
        };
        for bid in 0..BUFFERS {
            bufs.give_back(bid)?;
        }
        bufs.publish();
        Ok(bufs)
    }

    /// Where buffer `bid` starts; `None` outside the region.
    fn buffer(&self, bid: u16) -> Option<*mut u8> {
        let at = usize::from(bid) * BUF_LEN;
        // SAFETY: `at` is inside the region (checked first).
        (at < Self::LEN).then(|| unsafe { self.base.as_ptr().add(at) })
    }

    /// The first `len` bytes of buffer `bid`, which a completion just returned.
    ///
    /// # Safety
    ///
    /// The kernel must be done with buffer `bid` (its completion was taken)
    /// and the buffer must not be given back while the slice lives.
    unsafe fn completed(&self, bid: u16, len: usize) -> io::Result<&[u8]> {
        let start = self.buffer(bid).ok_or_else(|| outside(bid))?;
        // SAFETY: the caller guarantees nothing writes the buffer while the
        // slice lives; start and length stay inside the region; the bytes
        // were initialised (zeroed, then written by the kernel).
        Ok(unsafe { std::slice::from_raw_parts(start, len.min(BUF_LEN)) })
    }

    /// Puts buffer `bid` at the tail (the kernel sees it after [`Buffers::publish`]).
    fn give_back(&mut self, bid: u16) -> io::Result<()> {
        let addr = self.buffer(bid).ok_or_else(|| outside(bid))?;
        let slot = usize::from(self.tail & (BUFFERS - 1));
        // SAFETY: `slot < BUFFERS`, inside the mapping; the kernel reads only
        // entries up to the published tail, and this one is past it.
        let entry = unsafe { &mut *self.ring.entries.as_ptr().add(slot) };
        entry.set_addr(addr as u64);
        entry.set_len(BUF_LEN as u32);
        entry.set_bid(bid);
        self.tail = self.tail.wrapping_add(1);
        Ok(())
    }

    /// Makes the buffers given back so far visible to the kernel.
    fn publish(&self) {
        // SAFETY: the tail field lies in the first entry of the live mapping;
        // the kernel reads it as an atomic u16.
        let tail = unsafe { &*BufRingEntry::tail(self.ring.entries.as_ptr()).cast::<AtomicU16>() };
        tail.store(self.tail, Ordering::Release);
    }
}

fn outside(bid: u16) -> io::Error {
    io::Error::other(format!(
        "--io uring: buffer id {bid} is outside the pool of {BUFFERS}"
    ))
}

/// An anonymous mapping of buffer-ring entries.
struct BufRing {
    entries: NonNull<BufRingEntry>,
    len: usize,
}

impl BufRing {
    fn map(count: u16) -> io::Result<BufRing> {
        let len = usize::from(count) * size_of::<BufRingEntry>();
        // SAFETY: a fresh private anonymous mapping; the result is checked.
        let at = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if at == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let entries = NonNull::new(at.cast::<BufRingEntry>())
            .ok_or_else(|| io::Error::other("mmap returned null"))?;
        Ok(BufRing { entries, len })
    }

    /// Unmaps a ring the kernel no longer holds.
    fn unmap(self) {
        // SAFETY: the mapping made by `map`, no longer registered.
        unsafe { libc::munmap(self.entries.as_ptr().cast(), self.len) };
    }
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

/// Runs the reader on io_uring; see the module documentation.
pub(crate) fn run_reader(plan: ReaderPlan<'_, '_>) -> io::Result<ReaderOutcome> {
    // Built on this thread: with SINGLE_ISSUER it is the only one that submits.
    let mut ring = build_ring().map_err(|e| {
        io::Error::new(e.kind(), unavailable(format!("io_uring_setup failed: {e}")))
    })?;
    let mut bufs = Buffers::register(&ring).map_err(|e| {
        io::Error::new(
            e.kind(),
            unavailable(format!("registering the buffer ring failed: {e}")),
        )
    })?;
    let fds = plan.fds;
    let wake_fd = plan.shutdown.wake_fd();
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
        match ring.submitter().submit_with_args(1, &args) {
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
            if data == WAKE {
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
                        let bytes = unsafe { bufs.completed(bid, res as usize)? };
                        match core.on_bytes(c, bytes) {
                            Ok(n) => core.send_next(c, n),
                            Err(kind) => core.fail(c, kind),
                        }
                    }
                    // An idle connection's unexpected bytes are dropped, as the
                    // epoll reader drops them.
                    bufs.give_back(bid)?;
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
    Ok(core.finish())
}

#[cfg(test)]
mod tests {
    use super::*;
    use connlab_os::parse_kernel_version as parse_version;

    #[test]
    fn kernel_release_parses_to_major_and_minor() {
        assert_eq!(parse_version("6.18.44-fc-v669"), Some((6, 18)));
        assert_eq!(parse_version("5.4.0"), Some((5, 4)));
        assert_eq!(parse_version("linux"), None);
    }

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
