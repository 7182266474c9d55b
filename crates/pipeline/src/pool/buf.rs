//! [`Buf`], the owning handle to a pool buffer: views, copies on write,
//! reference counts, and the return to the pool on drop.

use super::{BufError, BufferPool, Meta};
use crate::sync::{fence, Ordering};

/// An owning handle to a pool buffer with a *view* `start..end` of it.
/// Moving the handle moves ownership; [`Clone`] adds an owner (reference
/// count); dropping the last handle returns the buffer to the pool.
pub struct Buf<'p> {
    pub(super) pool: &'p BufferPool,
    pub(super) idx: u32,
    pub(super) start: u32,
    pub(super) end: u32,
}

impl<'p> Buf<'p> {
    fn meta(&self) -> &Meta {
        &self.pool.meta[self.idx as usize]
    }

    /// The pool this buffer belongs to.
    pub fn pool(&self) -> &'p BufferPool {
        self.pool
    }

    /// Index of the buffer in the pool.
    pub fn index(&self) -> usize {
        self.idx as usize
    }

    /// Start of the view (offset in the buffer).
    pub fn start(&self) -> usize {
        self.start as usize
    }

    /// End of the view (offset in the buffer).
    pub fn end(&self) -> usize {
        self.end as usize
    }

    /// Length of the view.
    pub fn len(&self) -> usize {
        (self.end - self.start) as usize
    }

    /// True if the view is empty.
    pub fn is_empty(&self) -> bool {
        self.end == self.start
    }

    /// Size of the underlying buffer.
    pub fn capacity(&self) -> usize {
        self.pool.buffer_size
    }

    /// Number of handles to this buffer (a snapshot).
    pub fn ref_count(&self) -> u32 {
        self.meta().refs.load(Ordering::Acquire)
    }

    /// True if this is the only handle to the buffer.
    pub fn is_unique(&self) -> bool {
        self.meta().refs.load(Ordering::Acquire) == 1
    }

    /// The bytes of the view.
    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: the view lies inside this buffer (checked whenever it is
        // set). Nobody writes these bytes while this shared borrow lives:
        // writes happen only through a unique handle (then `self` is it, and
        // it is borrowed shared here) or into headroom below the claim mark,
        // which is below every view's start (module docs).
        unsafe {
            std::slice::from_raw_parts(
                self.pool.base(self.idx).add(self.start as usize),
                self.len(),
            )
        }
    }

    /// Sets the view to `start..end` and returns it for writing. Needs a
    /// unique handle.
    pub fn set_view(&mut self, start: usize, end: usize) -> Result<&mut [u8], BufError> {
        if start > end || end > self.pool.buffer_size {
            return Err(BufError::Range {
                start,
                end,
                size: self.pool.buffer_size,
            });
        }
        if !self.is_unique() {
            return Err(BufError::Shared);
        }
        self.start = start as u32;
        self.end = end as u32;
        self.view_mut()
    }

    /// The view for writing. Needs a unique handle; resets the claim mark to
    /// the view's start (no other handle exists to own the bytes below).
    pub fn view_mut(&mut self) -> Result<&mut [u8], BufError> {
        if !self.is_unique() {
            return Err(BufError::Shared);
        }
        self.meta().claimed.store(self.start, Ordering::Relaxed);
        // SAFETY: unique handle (reference count 1 seen with Acquire, and
        // `&mut self` prevents cloning meanwhile): no other handle can read or
        // write the buffer. The range is inside the buffer.
        Ok(unsafe {
            std::slice::from_raw_parts_mut(
                self.pool.base(self.idx).add(self.start as usize),
                self.len(),
            )
        })
    }

    /// Extends the view `len` bytes to the front (into the headroom) and
    /// returns those bytes for writing. Works on a shared handle if the bytes
    /// in front of the view are not claimed by another handle; otherwise
    /// [`BufError::Claimed`] (copy the buffer instead).
    pub fn push_front(&mut self, len: usize) -> Result<&mut [u8], BufError> {
        let have = self.start as usize;
        if len > have {
            return Err(BufError::NoHeadroom { need: len, have });
        }
        let new_start = self.start - len as u32;
        let meta = self.meta();
        if meta.refs.load(Ordering::Acquire) == 1 {
            meta.claimed.store(new_start, Ordering::Relaxed);
        } else if meta
            .claimed
            .compare_exchange(self.start, new_start, Ordering::AcqRel, Ordering::Relaxed)
            .is_err()
        {
            return Err(BufError::Claimed);
        }
        self.start = new_start;
        // SAFETY: the bytes new_start..new_start+len are inside the buffer and
        // now claimed by this handle alone: either it is unique, or the claim
        // mark moved from exactly our view start, and every other handle's
        // view starts at or above the old mark. They are written only through
        // this borrow.
        Ok(unsafe {
            std::slice::from_raw_parts_mut(self.pool.base(self.idx).add(new_start as usize), len)
        })
    }

    /// Drops `len` bytes from the front of the view (e.g. a parsed header).
    pub fn advance(&mut self, len: usize) -> Result<(), BufError> {
        if len > self.len() {
            return Err(BufError::Range {
                start: self.start as usize + len,
                end: self.end as usize,
                size: self.pool.buffer_size,
            });
        }
        self.start += len as u32;
        Ok(())
    }

    /// Shortens the view to `len` bytes.
    pub fn truncate(&mut self, len: usize) {
        if len < self.len() {
            self.end = self.start + len as u32;
        }
    }

    /// A unique copy of this buffer's view at the same offsets in a fresh
    /// buffer of the same pool, or `None` if the pool is empty.
    pub fn copy(&self) -> Option<Buf<'p>> {
        let mut b = self.pool.alloc()?;
        let (s, e) = (self.start(), self.end());
        match b.set_view(s, e) {
            Ok(dst) => dst.copy_from_slice(self.as_slice()),
            Err(_) => return None,
        }
        Some(b)
    }
}

impl Clone for Buf<'_> {
    fn clone(&self) -> Self {
        let old = self.meta().refs.fetch_add(1, Ordering::Relaxed);
        if old > u32::MAX / 2 {
            // As `Arc`: a count this large means leaked handles; never wrap.
            std::process::abort();
        }
        Buf {
            pool: self.pool,
            idx: self.idx,
            start: self.start,
            end: self.end,
        }
    }
}

impl Drop for Buf<'_> {
    fn drop(&mut self) {
        if self.meta().refs.fetch_sub(1, Ordering::Release) == 1 {
            fence(Ordering::Acquire);
            self.pool.release(self.idx);
        }
    }
}

impl std::fmt::Debug for Buf<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Buf")
            .field("index", &self.idx)
            .field("start", &self.start)
            .field("end", &self.end)
            .finish()
    }
}
