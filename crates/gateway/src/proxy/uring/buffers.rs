//! The relay's receive buffers and the registered provided-buffer ring
//! that lends them to the kernel ([`connlab_os::uring`]), lent
//! [`BUFFER_STEP`] at a time.

use super::{BUFFERS, BUFFER_STEP, CHUNK, GROUP};
use connlab_os::uring::{BufRing, BufferPool, RegisterError};
use io_uring::IoUring;
use std::io;

/// The receive buffers ([`BUFFERS`] of [`CHUNK`] bytes) and the
/// provided-buffer ring that hands them to the kernel (registered as group
/// [`GROUP`]).
///
/// The kernel writes into the buffers while the loop runs, so the loop
/// holds raw pointers only, and reads nothing from a buffer: it passes a
/// buffer the kernel filled straight to a send.
pub(super) struct Buffers {
    pool: BufferPool,
    ring: BufRing,
    /// Buffers given back since the last publish.
    pub(super) returned: usize,
    /// Buffers handed to the kernel so far (`0..provided`).
    provided: u16,
}

impl Buffers {
    /// Maps both, registers the ring and provides the first buffers.
    pub(super) fn register(ring: &IoUring) -> io::Result<Buffers> {
        let pool = BufferPool::new(BUFFERS, CHUNK)?;
        let buf_ring = match BufRing::register(ring, BUFFERS, GROUP) {
            Ok(r) => r,
            Err(e) => {
                // SAFETY: the pool was never lent to the kernel.
                unsafe { pool.unmap() };
                return Err(match e {
                    RegisterError::Map(e) => e,
                    RegisterError::Register(e) => io::Error::new(
                        e.kind(),
                        format!(
                            "--io uring: registering a provided-buffer ring failed ({e}): \
                             the relay needs Linux 5.19 or later; use --io copy"
                        ),
                    ),
                });
            }
        };
        let mut b = Buffers {
            pool,
            ring: buf_ring,
            returned: 0,
            provided: 0,
        };
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

    /// Where the bytes of buffer `bid` from `offset` on start.
    pub(super) fn at(&self, bid: u16, offset: usize) -> io::Result<*const u8> {
        match self.pool.buffer(bid) {
            // Not dereferenced here; `offset <= CHUNK` keeps it in the buffer.
            Some(start) if offset <= CHUNK => Ok(start.wrapping_add(offset).cast_const()),
            _ => Err(io::Error::other(format!(
                "--io uring: byte {offset} of buffer {bid} is outside the pool of \
                 {BUFFERS} buffers of {CHUNK} bytes"
            ))),
        }
    }

    /// Puts buffer `bid` at the tail (the kernel sees it after
    /// [`Buffers::publish`]). Ids come from the kernel's completions, so
    /// all are the pool's; another is not given back.
    pub(super) fn give_back(&mut self, bid: u16) {
        if self.ring.push(&self.pool, bid).is_ok() {
            self.returned += 1;
        }
    }

    /// Makes the buffers given back so far visible to the kernel.
    pub(super) fn publish(&self) {
        self.ring.publish();
    }

    /// # Safety
    ///
    /// The ring they were registered with must be gone, and no kernel
    /// operation may use the buffers any more.
    pub(super) unsafe fn unmap(self) {
        // SAFETY: the caller's promise.
        unsafe {
            self.pool.unmap();
            self.ring.unmap();
        }
    }
}
