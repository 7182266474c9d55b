//! The relay's receive buffers and the registered provided-buffer ring
//! that lends them to the kernel.

use super::{BUFFERS, BUFFER_STEP, CHUNK, GROUP};
use connlab_os::memory::{map_anonymous, unmap_anonymous};
use io_uring::types::BufRingEntry;
use io_uring::IoUring;
use std::io;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU16, Ordering};

/// The receive buffers ([`BUFFERS`] of [`CHUNK`] bytes, one anonymous
/// mapping) and the provided-buffer ring that hands them to the kernel
/// (another mapping, registered as group [`GROUP`]).
///
/// The kernel writes into the buffers while the loop runs, so the loop
/// holds raw pointers only, and reads nothing from a buffer: it passes a
/// buffer the kernel filled straight to a send.
pub(super) struct Buffers {
    region: NonNull<u8>,
    entries: NonNull<BufRingEntry>,
    /// The tail as the loop counts it (published by [`Buffers::publish`]).
    tail: u16,
    /// Buffers given back since the last publish.
    pub(super) returned: usize,
    /// Buffers handed to the kernel so far (`0..provided`).
    provided: u16,
}

impl Buffers {
    const REGION: usize = BUFFERS as usize * CHUNK;
    const RING: usize = BUFFERS as usize * size_of::<BufRingEntry>();
    const MASK: u16 = BUFFERS - 1;

    /// Maps both, registers the ring and provides every buffer.
    pub(super) fn register(ring: &IoUring) -> io::Result<Buffers> {
        let region = map_anonymous(Buffers::REGION)?;
        let entries = match map_anonymous(Buffers::RING) {
            Ok(e) => e.cast::<BufRingEntry>(),
            Err(e) => {
                // SAFETY: the mapping made above, not shared with anyone.
                unsafe { unmap_anonymous(region, Buffers::REGION) };
                return Err(e);
            }
        };
        let mut b = Buffers {
            region,
            entries,
            tail: 0,
            returned: 0,
            provided: 0,
        };
        // SAFETY: the mapping is page-aligned and BUFFERS entries long; it
        // is unmapped only after the ring is gone ([`Buffers::release`]).
        let registered = unsafe {
            ring.submitter().register_buf_ring_with_flags(
                entries.as_ptr() as u64,
                BUFFERS,
                GROUP,
                0,
            )
        };
        if let Err(e) = registered {
            // SAFETY: neither mapping was handed to the kernel.
            unsafe { b.unmap() };
            return Err(io::Error::new(
                e.kind(),
                format!(
                    "--io uring: registering a provided-buffer ring failed ({e}): \
                     the relay needs Linux 5.19 or later; use --io copy"
                ),
            ));
        }
        b.grow();
        b.publish();
        b.returned = 0;
        Ok(b)
    }

    /// Provides [`BUFFER_STEP`] more buffers (seen after [`Buffers::publish`]),
    /// unless all [`BUFFERS`] are out already.
    pub(super) fn grow(&mut self) {
        let to = self.provided.saturating_add(BUFFER_STEP).min(BUFFERS);
        for bid in self.provided..to {
            self.give_back(bid);
        }
        self.provided = to;
    }

    /// Where buffer `bid` starts.
    pub(super) fn at(&self, bid: u16) -> *const u8 {
        let i = usize::from(bid & Buffers::MASK);
        // SAFETY: `i < BUFFERS`, so the offset stays inside the region.
        unsafe { self.region.as_ptr().add(i * CHUNK) }
    }

    /// Puts buffer `bid` at the tail (the kernel sees it after
    /// [`Buffers::publish`]).
    pub(super) fn give_back(&mut self, bid: u16) {
        let addr = self.at(bid) as u64;
        let slot = usize::from(self.tail & Buffers::MASK);
        // SAFETY: `slot < BUFFERS`, inside the mapping; the kernel reads
        // only entries between its head and the published tail, and this
        // one is past the published tail.
        let entry = unsafe { &mut *self.entries.as_ptr().add(slot) };
        entry.set_addr(addr);
        entry.set_len(CHUNK as u32);
        entry.set_bid(bid & Buffers::MASK);
        self.tail = self.tail.wrapping_add(1);
        self.returned += 1;
    }

    /// Makes the buffers given back so far visible to the kernel.
    pub(super) fn publish(&self) {
        // SAFETY: the tail field lies in the first entry of the live
        // mapping; the kernel reads it as an atomic u16.
        let tail = unsafe { &*BufRingEntry::tail(self.entries.as_ptr()).cast::<AtomicU16>() };
        tail.store(self.tail, Ordering::Release);
    }

    /// # Safety
    ///
    /// No kernel operation may use either mapping any more.
    pub(super) unsafe fn unmap(&mut self) {
        // SAFETY: the caller's promise; both are our own mappings.
        unsafe {
            unmap_anonymous(self.region, Buffers::REGION);
            unmap_anonymous(self.entries.cast(), Buffers::RING);
        }
    }
}
