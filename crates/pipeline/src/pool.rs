//! The global buffer pool. Hand-written on purpose: the pool is part of the
//! research (the paper's claim is that one shared pool whose common allocation
//! path takes no lock keeps a layer-per-thread stack cheap), so it is not a
//! general-purpose allocator from crates.io.
//!
//! # Design
//!
//! * **One contiguous region** of `count` fixed-size buffers (`buffer_size`
//!   bytes each: headroom for every layer header plus the largest message).
//!   Buffer `i` is bytes `i * buffer_size .. (i + 1) * buffer_size`.
//! * **Per-buffer metadata**: an atomic reference count (number of live
//!   [`Buf`] handles; 0 = not owned) and an atomic *claim mark* (see
//!   "Headroom" below). [`BufferPool::alloc`] takes ownership of the index
//!   the free set gave it with a `compare_exchange` of the count from 0 to 1,
//!   so even a free set that went wrong can never hand out an owned buffer:
//!   an index whose count is not 0 is skipped (its owner's release puts it
//!   back).
//! * **Free set** ([`PoolKind::LockFree`]): a bitmap of `AtomicU64` words, one
//!   bit per buffer, set when the buffer is free. Allocation does not touch the
//!   bitmap: it takes the next index of the *current free run*, a contiguous
//!   range `cur..end` of buffers claimed from the bitmap in one go, with a
//!   `compare_exchange` on one packed `AtomicU64` (`end << 32 | cur`) that
//!   moves `cur` to `cur + 1` only while `cur < end`; no lock, and a retry
//!   only when another thread took from the same run at the same moment. An
//!   empty run's word is never written except by its refill, so no cursor
//!   moves past `end` (a `fetch_add` here once let failed steals push another
//!   stripe's `cur` on without bound until it wrapped and carried into `end`,
//!   handing out buffers still owned: issue 17).
//!   There are 8 current runs (*stripes*), each on its own cache line; a
//!   thread uses stripe `n % 8` where `n` numbers threads in order of their
//!   first allocation. With one shared cursor every allocation moved its cache
//!   line between the cores (~240 ns a transfer on the 2-vCPU test VM); with
//!   stripes, threads allocating at once touch different lines, and releases
//!   mostly land in bitmap words their own runs came from. A stripe whose run
//!   is empty and whose refill finds the bitmap empty takes from the other
//!   stripes' runs before reporting the pool empty, so `alloc` fails only when
//!   no buffer is free.
//! * **Refill** (slow path, once per run of up to 64 buffers): under a mutex,
//!   scan the bitmap from where this stripe's last refill stopped (stripes
//!   start spread over the bitmap, so each keeps to its own part of the
//!   region and its releases to its own bitmap words) for the next word with
//!   a free bit, claim the run of consecutive free bits starting at its lowest
//!   set bit with one `fetch_and`, and store the new `(cur, end)` pair. The
//!   refilling thread keeps the run's first buffer for itself.
//! * **Release** (reference count reaches zero): one `fetch_or` of the
//!   buffer's bit into the bitmap. No lock. Because pipeline buffers are freed
//!   roughly in allocation order, the region behaves like a ring and runs are
//!   long.
//! * **Reference counts** are atomics: cloning a handle is a `fetch_add`,
//!   dropping one a `fetch_sub` (the last one releases the buffer).
//!
//! [`PoolKind::Mutex`] is the baseline with the same interface: a
//! `Mutex<Vec<u32>>` stack of free indices, locked on every allocation and
//! every release. [`LockFreePool`] and [`MutexPool`] name the two.
//!
//! # Invariants
//!
//! 1. A buffer index is in exactly one of: the bitmap (free), the current run
//!    `cur..end` (claimed, not yet handed out), or owned by handles (reference
//!    count >= 1). Only the refill (under the mutex) clears bitmap bits and
//!    only a release sets them, so the bits a refill observed set stay set
//!    until its `fetch_and` clears exactly them.
//! 2. Per stripe, `cur <= end` always: a taker (the stripe's own threads or a
//!    thief) moves `cur` up by one with a `compare_exchange` only from a value
//!    with `cur < end`, and only the refill (under the mutex, after seeing
//!    `cur >= end`) stores a new pair. A failed attempt writes nothing. The
//!    word is the whole state of the run, so a `compare_exchange` that
//!    succeeds on a value seen earlier (ABA across a refill) still takes an
//!    index that is in the current run.
//! 3. Happens-before from a release to the next owner: the last handle's
//!    `fetch_sub(Release)` + `fence(Acquire)` + bitmap `fetch_or(Release)`;
//!    the refill's `fetch_and(AcqRel)` then cursor `store(Release)`; the
//!    taker's `compare_exchange(Acquire)`; and directly, the new owner's
//!    `compare_exchange(0, 1, Acquire)` of the reference count reads the 0
//!    the last handle's `fetch_sub(Release)` wrote.
//!
//! `cargo test --lib loom` under `RUSTFLAGS="--cfg loom"` model-checks
//! alloc, release and steal with [`loom`](https://docs.rs/loom) (every
//! interleaving of two or three threads): `.ci/run loom`.
//!
//! # Headroom and sharing
//!
//! Handles share bytes, so writes must never race with reads. The rules,
//! enforced by [`Buf`]'s methods:
//!
//! * A handle may write anywhere in the buffer while it is **unique**
//!   (reference count 1, read with `Acquire`, as `Arc::get_mut`).
//! * A shared handle may only write a header into the headroom **below** every
//!   byte any handle can see: the *claim mark* is the lowest offset any handle's
//!   view has started at, and [`Buf::push_front`] moves it down with a
//!   compare-and-swap from exactly the caller's view start. A layer that
//!   retains a PDU for retransmission therefore keeps a clone while the PDU
//!   travels down and the lower layers prepend their headers, without copying
//!   the user data. If the claim fails (the bytes below are already another
//!   handle's, e.g. a retransmission of a PDU still held by a lower layer), the
//!   caller copies the PDU into a fresh buffer ([`Buf::copy`]).

use crate::sync::{fence, AtomicU32, AtomicU64, Mutex, MutexGuard, Ordering};
use std::ptr::NonNull;

/// Which free-set algorithm a [`BufferPool`] uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum PoolKind {
    /// Lock-free allocation from the current free run; lock only on refill.
    LockFree,
    /// Baseline: a mutex-protected stack of free indices.
    Mutex,
}

/// Errors creating a pool.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PoolError {
    /// Zero buffers requested.
    #[error("a buffer pool needs at least one buffer")]
    NoBuffers,
    /// A buffer size of zero or above the limit.
    #[error("buffer size must be between 1 and {max} bytes, got {got}")]
    BadSize {
        /// Requested size.
        got: usize,
        /// Largest allowed size.
        max: usize,
    },
    /// The region would be too large.
    #[error("{count} buffers of {size} bytes exceed the pool limit of {max} bytes")]
    TooLarge {
        /// Requested buffer count.
        count: usize,
        /// Requested buffer size.
        size: usize,
        /// Largest allowed region.
        max: usize,
    },
}

/// Errors from handle operations that would break the sharing rules.
#[derive(Debug, thiserror::Error, PartialEq, Eq, Clone, Copy)]
pub enum BufError {
    /// The operation needs a unique handle but the buffer is shared.
    #[error("buffer is shared")]
    Shared,
    /// Not enough headroom in front of the view.
    #[error("not enough headroom: need {need} bytes, have {have}")]
    NoHeadroom {
        /// Bytes wanted.
        need: usize,
        /// Bytes available in front of the view.
        have: usize,
    },
    /// The headroom in front of the view belongs to another handle.
    #[error("headroom in front of this view is already claimed by another handle")]
    Claimed,
    /// A view range outside the buffer or reversed.
    #[error("range {start}..{end} is outside a buffer of {size} bytes")]
    Range {
        /// Requested start.
        start: usize,
        /// Requested end.
        end: usize,
        /// Buffer size.
        size: usize,
    },
}

/// Largest buffer size accepted.
pub const MAX_BUFFER_SIZE: usize = 1 << 30;
/// Largest region accepted (8 GiB).
pub const MAX_REGION: usize = 8 << 30;
/// Alignment of the region (a page: buffers whose size is a multiple of 64
/// start on cache-line boundaries).
const REGION_ALIGN: usize = 4096;
/// Current free runs: a thread allocates from run `thread number % STRIPES`,
/// so two threads allocating at once do not bounce one cursor's cache line.
const STRIPES: usize = 8;

// Stays a std atomic under loom: it only numbers threads, and the loom
// tests choose their stripes explicitly.
static NEXT_STRIPE: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

thread_local! {
    /// This thread's stripe, assigned round robin at its first allocation.
    static STRIPE: usize = NEXT_STRIPE.fetch_add(1, Ordering::Relaxed);
}

/// Longest free run one refill claims (one bitmap word).
const MAX_RUN: u32 = 64;

/// Per-buffer metadata, one cache line each so that threads working on
/// neighbouring buffers do not bounce each other's lines.
#[repr(align(64))]
struct Meta {
    refs: AtomicU32,
    claimed: AtomicU32,
}

#[repr(align(128))]
struct Padded<T>(T);

enum FreeSet {
    LockFree {
        /// `end << 32 | cur`: the current free run of each stripe.
        cursors: Box<[Padded<AtomicU64>]>,
        /// One word per cache line: releases of different runs do not share lines.
        bitmap: Box<[Padded<AtomicU64>]>,
        /// Serialises refills; holds each stripe's word where its next scan
        /// starts (stripes start spread over the bitmap and keep to their part).
        refill: Mutex<[usize; STRIPES]>,
    },
    Mutex(Mutex<Vec<u32>>),
}

/// A pool of fixed-size buffers in one contiguous region. See the module
/// documentation for the algorithm.
pub struct BufferPool {
    mem: NonNull<u8>,
    mem_len: usize,
    buffer_size: usize,
    count: usize,
    meta: Box<[Meta]>,
    free: FreeSet,
    kind: PoolKind,
}

// SAFETY: the region is only accessed through `Buf` handles whose methods
// follow the sharing rules in the module documentation (writes only through a
// unique handle or into freshly claimed headroom); all other state is atomics
// and mutexes.
unsafe impl Send for BufferPool {}
// SAFETY: as above.
unsafe impl Sync for BufferPool {}

/// The lock-free pool (the research subject). An alias kept for clarity in
/// benchmarks: construct with [`BufferPool::new`] and [`PoolKind::LockFree`].
pub type LockFreePool = BufferPool;
/// The mutex baseline. An alias: construct with [`BufferPool::new`] and
/// [`PoolKind::Mutex`] (or [`BufferPool::new_mutex`]).
pub type MutexPool = BufferPool;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding one of these locks cannot leave the data
    // inconsistent (single push/pop or a usize), so poisoning is ignored.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn pack(cur: u32, end: u32) -> u64 {
    (u64::from(end) << 32) | u64::from(cur)
}

fn unpack(v: u64) -> (u32, u32) {
    (v as u32, (v >> 32) as u32)
}

impl BufferPool {
    /// A pool of `count` buffers of `buffer_size` bytes with the given free-set
    /// algorithm.
    pub fn new(kind: PoolKind, count: usize, buffer_size: usize) -> Result<Self, PoolError> {
        if count == 0 {
            return Err(PoolError::NoBuffers);
        }
        if buffer_size == 0 || buffer_size > MAX_BUFFER_SIZE {
            return Err(PoolError::BadSize {
                got: buffer_size,
                max: MAX_BUFFER_SIZE,
            });
        }
        let mem_len = match count.checked_mul(buffer_size) {
            Some(n) if n <= MAX_REGION && count <= (u32::MAX / 2) as usize => n,
            _ => {
                return Err(PoolError::TooLarge {
                    count,
                    size: buffer_size,
                    max: MAX_REGION,
                })
            }
        };
        let layout = std::alloc::Layout::from_size_align(mem_len, REGION_ALIGN).map_err(|_| {
            PoolError::TooLarge {
                count,
                size: buffer_size,
                max: MAX_REGION,
            }
        })?;
        // SAFETY: the layout has a non-zero size (count >= 1, buffer_size >= 1).
        let raw = unsafe { std::alloc::alloc_zeroed(layout) };
        let Some(mem) = NonNull::new(raw) else {
            std::alloc::handle_alloc_error(layout);
        };
        let meta = (0..count)
            .map(|_| Meta {
                refs: AtomicU32::new(0),
                claimed: AtomicU32::new(0),
            })
            .collect();
        let free = match kind {
            PoolKind::LockFree => {
                let words = count.div_ceil(64);
                let bitmap = (0..words)
                    .map(|w| {
                        let bits = (count - w * 64).min(64);
                        Padded(AtomicU64::new(if bits == 64 {
                            u64::MAX
                        } else {
                            (1u64 << bits) - 1
                        }))
                    })
                    .collect();
                FreeSet::LockFree {
                    cursors: (0..STRIPES)
                        .map(|_| Padded(AtomicU64::new(pack(0, 0))))
                        .collect(),
                    bitmap,
                    refill: Mutex::new(std::array::from_fn(|s| s * words / STRIPES)),
                }
            }
            PoolKind::Mutex => FreeSet::Mutex(Mutex::new((0..count as u32).rev().collect())),
        };
        Ok(BufferPool {
            mem,
            mem_len,
            buffer_size,
            count,
            meta,
            free,
            kind,
        })
    }

    /// The mutex baseline ([`PoolKind::Mutex`]).
    pub fn new_mutex(count: usize, buffer_size: usize) -> Result<Self, PoolError> {
        Self::new(PoolKind::Mutex, count, buffer_size)
    }

    /// Which algorithm this pool uses.
    pub fn kind(&self) -> PoolKind {
        self.kind
    }

    /// Number of buffers.
    pub fn capacity(&self) -> usize {
        self.count
    }

    /// Bytes per buffer.
    pub fn buffer_size(&self) -> usize {
        self.buffer_size
    }

    /// Buffers not owned by any handle. Exact when no other thread is
    /// allocating or releasing; a snapshot otherwise.
    pub fn free_count(&self) -> usize {
        match &self.free {
            FreeSet::LockFree {
                cursors, bitmap, ..
            } => {
                let in_run: usize = cursors
                    .iter()
                    .map(|c| {
                        let (cur, end) = unpack(c.0.load(Ordering::Acquire));
                        end.saturating_sub(cur) as usize
                    })
                    .sum();
                let in_map: usize = bitmap
                    .iter()
                    .map(|w| w.0.load(Ordering::Acquire).count_ones() as usize)
                    .sum();
                in_run + in_map
            }
            FreeSet::Mutex(m) => lock(m).len(),
        }
    }

    /// A unique handle to a free buffer, or `None` if every buffer is in use.
    /// The handle's view is empty at offset 0; set it with [`Buf::set_view`].
    pub fn alloc(&self) -> Option<Buf<'_>> {
        self.alloc_in_stripe(STRIPE.with(|s| *s))
    }

    /// [`BufferPool::alloc`] from the run of stripe `stripe % STRIPES` (the
    /// loom tests pick stripes; `alloc` uses the thread's own).
    fn alloc_in_stripe(&self, stripe: usize) -> Option<Buf<'_>> {
        loop {
            let idx = match &self.free {
                FreeSet::LockFree {
                    cursors,
                    bitmap,
                    refill,
                } => Self::alloc_lock_free(cursors, stripe % cursors.len(), bitmap, refill)?,
                FreeSet::Mutex(m) => lock(m).pop()?,
            };
            let meta = &self.meta[idx as usize];
            // Take ownership: 0 (not owned) -> 1 handle. The free set only
            // holds unowned buffers, so this succeeds; if it ever does not,
            // the buffer is someone's and must not be handed out: skip it
            // (its owner's release returns it to the free set).
            if meta
                .refs
                .compare_exchange(0, 1, Ordering::Acquire, Ordering::Relaxed)
                .is_err()
            {
                continue;
            }
            meta.claimed.store(0, Ordering::Relaxed);
            return Some(Buf {
                pool: self,
                idx,
                start: 0,
                end: 0,
            });
        }
    }

    /// Takes the next index of the run in `cursor`, or `None` if the run is
    /// empty. Writes the word only to take an index (invariant 2).
    fn take_from_run(cursor: &AtomicU64) -> Option<u32> {
        let mut word = cursor.load(Ordering::Acquire);
        loop {
            let (cur, end) = unpack(word);
            if cur >= end {
                return None;
            }
            match cursor.compare_exchange_weak(
                word,
                pack(cur + 1, end),
                Ordering::Acquire,
                Ordering::Acquire,
            ) {
                Ok(_) => return Some(cur),
                Err(now) => word = now,
            }
        }
    }

    fn alloc_lock_free(
        cursors: &[Padded<AtomicU64>],
        stripe: usize,
        bitmap: &[Padded<AtomicU64>],
        refill: &Mutex<[usize; STRIPES]>,
    ) -> Option<u32> {
        let cursor = &cursors[stripe];
        loop {
            // Fast path: one compare_exchange, no lock.
            if let Some(idx) = Self::take_from_run(&cursor.0) {
                return Some(idx);
            }
            // Slow path: refill the run under the mutex.
            let mut scans = lock(refill);
            let scan = &mut scans[stripe];
            let (cur, end) = unpack(cursor.0.load(Ordering::Acquire));
            if cur < end {
                // Another thread refilled while we waited.
                continue;
            }
            let words = bitmap.len();
            for step in 0..words {
                let w = (*scan + step) % words;
                let bits = bitmap[w].0.load(Ordering::Relaxed);
                if bits == 0 {
                    continue;
                }
                let lo = bits.trailing_zeros();
                let len = (!(bits >> lo)).trailing_zeros().min(MAX_RUN - lo).max(1);
                let mask = if len == 64 {
                    u64::MAX
                } else {
                    ((1u64 << len) - 1) << lo
                };
                // Only this (mutex-holding) thread clears bits, so the bits
                // seen set are still set: this clears exactly them.
                bitmap[w].0.fetch_and(!mask, Ordering::AcqRel);
                let start = (w as u32) * 64 + lo;
                // Invariant 2: the run is empty and nobody but this refill
                // writes an empty run's word, so no take is lost by this store.
                cursor
                    .0
                    .store(pack(start + 1, start + len), Ordering::Release);
                *scan = w;
                return Some(start);
            }
            // Nothing left in the bitmap: take from another stripe's run.
            // A failed steal writes nothing (invariant 2).
            for (i, other) in cursors.iter().enumerate() {
                if i != stripe {
                    if let Some(idx) = Self::take_from_run(&other.0) {
                        return Some(idx);
                    }
                }
            }
            return None;
        }
    }

    fn release(&self, idx: u32) {
        match &self.free {
            FreeSet::LockFree { bitmap, .. } => {
                bitmap[(idx / 64) as usize]
                    .0
                    .fetch_or(1u64 << (idx % 64), Ordering::Release);
            }
            FreeSet::Mutex(m) => lock(m).push(idx),
        }
    }

    /// Test hook: sets every stripe's current run to `cur..end`.
    #[cfg(all(test, not(loom)))]
    fn set_all_cursors(&self, cur: u32, end: u32) {
        if let FreeSet::LockFree { cursors, .. } = &self.free {
            for c in cursors.iter() {
                c.0.store(pack(cur, end), Ordering::Release);
            }
        }
    }

    fn base(&self, idx: u32) -> *mut u8 {
        // SAFETY: idx < count, so the offset is inside the region.
        unsafe { self.mem.as_ptr().add(idx as usize * self.buffer_size) }
    }
}

impl Drop for BufferPool {
    fn drop(&mut self) {
        if let Ok(layout) = std::alloc::Layout::from_size_align(self.mem_len, REGION_ALIGN) {
            // SAFETY: `mem` came from `alloc_zeroed` with this same layout in
            // `new`, and no handle outlives the pool (handles borrow it).
            unsafe { std::alloc::dealloc(self.mem.as_ptr(), layout) };
        }
    }
}

impl std::fmt::Debug for BufferPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BufferPool")
            .field("kind", &self.kind)
            .field("capacity", &self.count)
            .field("buffer_size", &self.buffer_size)
            .finish()
    }
}

/// An owning handle to a pool buffer with a *view* `start..end` of it.
/// Moving the handle moves ownership; [`Clone`] adds an owner (reference
/// count); dropping the last handle returns the buffer to the pool.
pub struct Buf<'p> {
    pool: &'p BufferPool,
    idx: u32,
    start: u32,
    end: u32,
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

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    fn both() -> [PoolKind; 2] {
        [PoolKind::LockFree, PoolKind::Mutex]
    }

    #[test]
    fn alloc_all_then_exhausted_then_release() {
        for kind in both() {
            let pool = BufferPool::new(kind, 130, 32).unwrap();
            let mut held: Vec<_> = (0..130).map(|_| pool.alloc().unwrap()).collect();
            let mut idx: Vec<_> = held.iter().map(|b| b.index()).collect();
            idx.sort_unstable();
            idx.dedup();
            assert_eq!(idx.len(), 130, "{kind:?}: distinct buffers");
            assert!(pool.alloc().is_none());
            assert_eq!(pool.free_count(), 0);
            held.truncate(10);
            assert_eq!(pool.free_count(), 120);
            drop(held);
            assert_eq!(pool.free_count(), 130);
            assert!(pool.alloc().is_some());
        }
    }

    #[test]
    fn clone_counts_and_last_drop_releases() {
        for kind in both() {
            let pool = BufferPool::new(kind, 4, 64).unwrap();
            let mut a = pool.alloc().unwrap();
            a.set_view(16, 32).unwrap().fill(7);
            let b = a.clone();
            assert_eq!(a.ref_count(), 2);
            assert!(!a.is_unique());
            assert_eq!(a.set_view(0, 1).unwrap_err(), BufError::Shared);
            assert_eq!(b.as_slice(), &[7u8; 16][..]);
            assert_eq!(pool.free_count(), 3);
            drop(a);
            assert!(b.is_unique());
            assert_eq!(pool.free_count(), 3);
            drop(b);
            assert_eq!(pool.free_count(), 4);
        }
    }

    /// Issue 17: failed steals must not advance other stripes' cursors
    /// until one wraps (2^32 of them) and carries into `end`, which made the
    /// run look non-empty again and handed out buffers that were still owned.
    /// The cursors start just below the wrap so a few failed allocations
    /// reach it.
    #[test]
    fn cursor_near_wrap_never_hands_out_an_owned_buffer() {
        let pool = BufferPool::new(PoolKind::LockFree, 4, 32).unwrap();
        let held: Vec<_> = (0..4).map(|_| pool.alloc().unwrap()).collect();
        assert_eq!(pool.free_count(), 0);
        // Every run exhausted, cursors a few steps below the 32-bit wrap.
        pool.set_all_cursors(u32::MAX - 2, 0);
        for attempt in 0..8 {
            if let Some(b) = pool.alloc() {
                panic!(
                    "attempt {attempt}: alloc handed out buffer {} while it is owned \
                     (refs {})",
                    b.index(),
                    b.ref_count()
                );
            }
        }
        drop(held);
        assert_eq!(pool.free_count(), 4);
        let again: Vec<_> = (0..4).map(|_| pool.alloc().unwrap()).collect();
        let mut idx: Vec<_> = again.iter().map(|b| b.index()).collect();
        idx.sort_unstable();
        assert_eq!(idx, [0, 1, 2, 3]);
    }

    /// The reference count is the ownership word: even a run that (wrongly)
    /// names an owned buffer cannot make `alloc` hand it out.
    #[test]
    fn alloc_skips_an_owned_buffer_named_by_a_run() {
        let pool = BufferPool::new(PoolKind::LockFree, 4, 32).unwrap();
        let held: Vec<_> = (0..4).map(|_| pool.alloc().unwrap()).collect();
        pool.set_all_cursors(0, 4);
        assert!(pool.alloc().is_none(), "every buffer is owned");
        drop(held);
        assert_eq!(pool.free_count(), 4);
    }

    #[test]
    fn push_front_claims_headroom_once_when_shared() {
        let pool = BufferPool::new(PoolKind::LockFree, 4, 64).unwrap();
        let mut a = pool.alloc().unwrap();
        a.set_view(32, 40).unwrap().fill(1);
        let mut down = a.clone();
        down.push_front(8).unwrap().fill(2);
        assert_eq!(down.start(), 24);
        // The retained handle sees its own bytes unchanged.
        assert_eq!(a.as_slice(), &[1u8; 8][..]);
        // A second shared handle from the same start cannot claim the same bytes.
        let mut again = a.clone();
        assert_eq!(again.push_front(8).unwrap_err(), BufError::Claimed);
        let copy = again.copy().unwrap();
        assert_eq!(copy.as_slice(), a.as_slice());
        assert!(copy.is_unique());
        assert_eq!(
            down.push_front(100).unwrap_err(),
            BufError::NoHeadroom {
                need: 100,
                have: 24
            }
        );
    }
}

/// Model checks of the lock-free pool with `loom`: every interleaving (up to
/// a preemption bound for three threads) of alloc, steal and release. Run
/// with `RUSTFLAGS="--cfg loom" cargo test -p connlab-pipeline --release
/// --lib loom` (`.ci/run loom`).
#[cfg(all(test, loom))]
mod loom_tests {
    use super::*;
    use loom::cell::UnsafeCell;
    use loom::sync::Arc;
    use loom::thread;

    /// What loom sees of each buffer's bytes: an access to a buffer without
    /// happens-before from its previous owner's (two owners at once, or a
    /// hand-over too weakly ordered) fails the model as a data race.
    struct Shadow(Vec<UnsafeCell<u32>>);

    // SAFETY: the cells are only touched by the owner of the buffer they
    // stand for; loom itself checks that claim (that is the test).
    unsafe impl Sync for Shadow {}
    // SAFETY: as above.
    unsafe impl Send for Shadow {}

    fn shadow(n: usize) -> Arc<Shadow> {
        Arc::new(Shadow((0..n).map(|_| UnsafeCell::new(0)).collect()))
    }

    /// Writes and reads back the buffer's shadow as its owner.
    fn own(shadow: &Shadow, b: &Buf<'_>, me: u32) {
        let cell = &shadow.0[b.index()];
        // SAFETY: `b` owns the buffer; loom reports it if another thread
        // touches the same cell without happens-before.
        cell.with_mut(|p| unsafe { *p = me });
        // SAFETY: as above.
        let seen = cell.with(|p| unsafe { *p });
        assert_eq!(seen, me, "buffer {} shared", b.index());
    }

    fn bounded(preemptions: usize) -> loom::model::Builder {
        let mut b = loom::model::Builder::new();
        b.preemption_bound = Some(preemptions);
        b
    }

    /// Two threads on two stripes share two buffers: the first refill takes
    /// both into stripe 0's run, so the other thread steals. Each allocates,
    /// uses and releases twice.
    #[test]
    fn loom_alloc_steal_release_two_threads() {
        bounded(3).check(|| {
            let pool = Arc::new(BufferPool::new(PoolKind::LockFree, 2, 8).unwrap());
            let sh = shadow(2);
            let handles: Vec<_> = (0..2u32)
                .map(|t| {
                    let (pool, sh) = (pool.clone(), sh.clone());
                    thread::spawn(move || {
                        for _ in 0..2 {
                            if let Some(b) = pool.alloc_in_stripe(t as usize) {
                                own(&sh, &b, t + 1);
                            }
                        }
                    })
                })
                .collect();
            for h in handles {
                h.join().unwrap();
            }
            assert_eq!(pool.free_count(), 2, "every buffer returned");
        });
    }

    /// Three threads, two buffers, a clone handed to another thread: alloc
    /// fails only when both buffers are owned, no buffer has two owners, the
    /// last of two handles releases, and every buffer comes back.
    #[test]
    fn loom_exhaustion_and_shared_release_three_threads() {
        bounded(2).check(|| {
            let pool = Arc::new(BufferPool::new(PoolKind::LockFree, 2, 8).unwrap());
            let sh = shadow(2);
            let handles: Vec<_> = (0..3u32)
                .map(|t| {
                    let (pool, sh) = (pool.clone(), sh.clone());
                    thread::spawn(move || {
                        let Some(b) = pool.alloc_in_stripe(t as usize) else {
                            // Both buffers owned by the other two threads
                            // (a free count of 0 then is only a snapshot).
                            return;
                        };
                        own(&sh, &b, t + 1);
                        if t == 0 {
                            // Hand a clone to another thread; whichever
                            // handle drops last releases the buffer.
                            // SAFETY: loom's spawn wants 'static; the
                            // thread holds an Arc of the pool and drops the
                            // handle before it.
                            let c: Buf<'static> = unsafe { std::mem::transmute(b.clone()) };
                            let p2 = pool.clone();
                            let h = thread::spawn(move || {
                                assert!(c.ref_count() >= 1);
                                drop(c);
                                drop(p2);
                            });
                            drop(b);
                            h.join().unwrap();
                        }
                    })
                })
                .collect();
            for h in handles {
                h.join().unwrap();
            }
            assert_eq!(pool.free_count(), 2, "every buffer returned");
            let a = pool.alloc_in_stripe(5).unwrap();
            let b = pool.alloc_in_stripe(6).unwrap();
            assert_ne!(a.index(), b.index());
        });
    }
}
