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

mod buf;

pub use buf::Buf;

use crate::sync::{AtomicU32, AtomicU64, Mutex, MutexGuard, Ordering};
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

#[cfg(all(test, not(loom)))]
mod tests;

#[cfg(all(test, loom))]
mod loom_tests;
