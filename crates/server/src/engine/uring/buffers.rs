//! Receive buffers: one region of [`BUFFERS`] chunks of [`READ_CHUNK`]
//! bytes that the kernel fills, handed to it either through a registered
//! provided-buffer ring (`buf-ring`: giving a buffer back is a store to
//! shared memory) or with `IORING_OP_PROVIDE_BUFFERS` entries.

use crate::config::UringFeature;
use crate::connection::READ_CHUNK;
use io_uring::types::BufRingEntry;
use io_uring::IoUring;
use std::io;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU16, Ordering};

/// Buffers in the provided-buffer group (a power of two, as a buffer ring
/// needs; READ_CHUNK each). Taken and given back within a loop turn, so
/// they bound the receives one turn completes, not the connections.
pub(super) const BUFFERS: u16 = 256;
/// The buffer group id.
pub(super) const GROUP: u16 = 1;

/// The receive buffers the kernel fills: [`BUFFERS`] chunks of
/// [`READ_CHUNK`] bytes, held as a raw region rather than a `&mut [u8]`,
/// because the kernel writes into it while the loop runs. The loop hands
/// the kernel pointers only, and makes a slice only of the bytes a
/// completion says were written into a buffer the kernel has returned.
///
/// Never freed: a receive cancelled at shutdown may still be writing when
/// the ring is torn down, so the region is leaked instead (one per run).
pub(super) struct BufferPool {
    base: NonNull<u8>,
}

impl BufferPool {
    const LEN: usize = BUFFERS as usize * READ_CHUNK;

    pub(super) fn new() -> BufferPool {
        let region: Box<[u8]> = vec![0u8; Self::LEN].into_boxed_slice();
        // Ownership moves to the raw pointer; no reference to the region
        // outlives this line.
        let raw: *mut [u8] = Box::into_raw(region);
        // SAFETY: `Box::into_raw` never returns null.
        let base = unsafe { NonNull::new_unchecked(raw.cast::<u8>()) };
        BufferPool { base }
    }

    /// Where buffer `bid` starts, for the kernel; `None` outside the pool.
    pub(super) fn buffer(&self, bid: u16) -> Option<*mut u8> {
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
    pub(super) unsafe fn completed(&self, bid: u16, len: usize) -> io::Result<&[u8]> {
        let start = self.buffer(bid).ok_or_else(|| outside_pool(bid))?;
        let len = len.min(READ_CHUNK);
        // SAFETY: the caller guarantees nothing writes buffer `bid` while
        // the slice lives; `buffer` keeps the start inside the region and
        // `len <= READ_CHUNK` keeps the end inside too; the bytes were
        // initialised (zeroed at allocation, then written by the kernel).
        Ok(unsafe { std::slice::from_raw_parts(start, len) })
    }
}

pub(super) fn outside_pool(bid: u16) -> io::Error {
    io::Error::other(format!(
        "--engine uring: buffer id {bid} is outside the pool of {BUFFERS}"
    ))
}

/// A provided-buffer ring shared with the kernel: [`BUFFERS`] entries in
/// an anonymous mapping, registered for [`GROUP`]. The loop writes entries
/// at its tail and publishes the tail once per turn; the kernel takes from
/// the head. Never unmapped, for the same reason as [`BufferPool`].
pub(super) struct BufRing {
    entries: NonNull<BufRingEntry>,
    /// The tail as the loop counts it (published by [`BufRing::publish`]).
    tail: u16,
}

impl BufRing {
    const MASK: u16 = BUFFERS - 1;

    /// Maps and registers the ring; the caller falls back on an error.
    pub(super) fn register(ring: &IoUring) -> io::Result<BufRing> {
        let len = usize::from(BUFFERS) * size_of::<BufRingEntry>();
        let at = connlab_os::memory::map_anonymous(len)?;
        let entries = at.cast::<BufRingEntry>();
        // SAFETY: the mapping is page-aligned, `BUFFERS` entries long, and
        // never unmapped, so it outlives the registration.
        let registered = unsafe {
            ring.submitter()
                .register_buf_ring_with_flags(at.as_ptr() as u64, BUFFERS, GROUP, 0)
        };
        if let Err(e) = registered {
            // SAFETY: the mapping made above, not shared with the kernel.
            unsafe { connlab_os::memory::unmap_anonymous(at, len) };
            return Err(e);
        }
        Ok(BufRing { entries, tail: 0 })
    }

    /// Puts buffer `bid` at the tail (seen by the kernel after [`BufRing::publish`]).
    pub(super) fn push(&mut self, pool: &BufferPool, bid: u16) -> io::Result<()> {
        let addr = pool.buffer(bid).ok_or_else(|| outside_pool(bid))?;
        let slot = usize::from(self.tail & Self::MASK);
        // SAFETY: `slot < BUFFERS`, inside the mapping; the kernel reads
        // only entries between its head and the published tail, and this one
        // is past the published tail.
        let entry = unsafe { &mut *self.entries.as_ptr().add(slot) };
        entry.set_addr(addr as u64);
        entry.set_len(READ_CHUNK as u32);
        entry.set_bid(bid);
        self.tail = self.tail.wrapping_add(1);
        Ok(())
    }

    /// Makes the entries pushed so far visible to the kernel.
    pub(super) fn publish(&self) {
        // SAFETY: the tail field lies in the first entry of the live
        // mapping; it is a u16 the kernel reads atomically.
        let tail = unsafe { &*BufRingEntry::tail(self.entries.as_ptr()).cast::<AtomicU16>() };
        tail.store(self.tail, Ordering::Release);
    }
}

/// How used buffers go back to the kernel.
pub(super) enum Recycle {
    /// A registered buffer ring.
    Ring(BufRing),
    /// `IORING_OP_PROVIDE_BUFFERS` entries.
    Provide,
}

impl Recycle {
    /// A buffer ring if `wanted` and the kernel registers one, else
    /// provide-buffer entries (with a message when the ring was wanted).
    pub(super) fn new(ring: &IoUring, wanted: bool) -> Recycle {
        if !wanted {
            return Recycle::Provide;
        }
        match BufRing::register(ring) {
            Ok(r) => Recycle::Ring(r),
            Err(e) => {
                super::setup::note(
                    UringFeature::BufRing,
                    &format!("registering a buffer ring failed ({e}; Linux 5.19 and later)"),
                    "giving buffers back with IORING_OP_PROVIDE_BUFFERS",
                );
                Recycle::Provide
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn buffers_are_a_power_of_two_as_a_ring_needs() {
        assert!(BUFFERS.is_power_of_two());
    }
}
