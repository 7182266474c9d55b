//! Receive buffers the kernel fills ([`BufferPool`]) and the two ways of
//! lending them to it: a registered provided-buffer ring ([`BufRing`], Linux
//! 5.19: giving a buffer back is a store to shared memory) or
//! `IORING_OP_PROVIDE_BUFFERS` entries ([`Provider::Entries`]).

use super::{Feature, Note};
use crate::memory::{map_anonymous, unmap_anonymous};
use io_uring::types::BufRingEntry;
use io_uring::{opcode, squeue, IoUring};
use std::io;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU16, Ordering};

/// A buffer id that is not one of the pool's.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("buffer id {bid} is outside the pool of {count}")]
pub struct OutsidePool {
    /// The buffer id asked for.
    pub bid: u16,
    /// How many buffers the pool has.
    pub count: u16,
}

/// Why a buffer ring could not be registered.
#[derive(Debug, thiserror::Error)]
pub enum RegisterError {
    /// Mapping the ring's memory failed.
    #[error("{0}")]
    Map(io::Error),
    /// The kernel refused the registration (no buffer rings before Linux
    /// 5.19), or the entry count is not a power of two up to 32768.
    #[error("{0}")]
    Register(io::Error),
}

impl From<RegisterError> for io::Error {
    fn from(e: RegisterError) -> io::Error {
        match e {
            RegisterError::Map(e) | RegisterError::Register(e) => e,
        }
    }
}

/// `count` receive buffers of `len` bytes each, in one private anonymous
/// mapping (zeroed, page-aligned), held as a raw region rather than a
/// `&mut [u8]` because the kernel writes into it while the loop runs. A loop
/// hands the kernel pointers only ([`BufferPool::buffer`]) and makes a slice
/// only of the bytes a completion says were written into a buffer the kernel
/// has returned ([`BufferPool::completed`]).
///
/// Dropping a pool leaks its mapping on purpose: a receive cancelled when a
/// ring is torn down may still be writing into it. A caller that knows every
/// operation completed gives it back with [`BufferPool::unmap`].
#[derive(Debug)]
pub struct BufferPool {
    base: NonNull<u8>,
    count: u16,
    len: usize,
}

impl BufferPool {
    /// Maps `count` buffers of `len` bytes. `len` must fit an entry's length
    /// (`i32`), and neither may be 0.
    pub fn new(count: u16, len: usize) -> io::Result<BufferPool> {
        let total = usize::from(count).checked_mul(len);
        let fits = i32::try_from(len).is_ok();
        let total = match total {
            Some(total) if total > 0 && fits => total,
            _ => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("a buffer pool of {count} buffers of {len} bytes"),
                ))
            }
        };
        let base = map_anonymous(total)?;
        Ok(BufferPool { base, count, len })
    }

    /// How many buffers the pool has (ids `0..count`).
    pub fn count(&self) -> u16 {
        self.count
    }

    /// Bytes per buffer.
    pub fn buffer_len(&self) -> usize {
        self.len
    }

    /// Where buffer `bid` starts, for the kernel; `None` outside the pool.
    pub fn buffer(&self, bid: u16) -> Option<*mut u8> {
        // SAFETY: `bid < count`, so the offset `bid * len` lies inside the
        // mapping of `count * len` bytes (checked not to overflow in `new`).
        (bid < self.count).then(|| unsafe { self.base.as_ptr().add(usize::from(bid) * self.len) })
    }

    fn outside(&self, bid: u16) -> OutsidePool {
        OutsidePool {
            bid,
            count: self.count,
        }
    }

    /// The first `len` bytes of buffer `bid` (at most a buffer), which a
    /// completion just returned to the loop.
    ///
    /// # Safety
    ///
    /// The kernel must be done with buffer `bid` (its completion was taken)
    /// and the buffer must not be lent to the kernel again while the
    /// returned slice lives.
    pub unsafe fn completed(&self, bid: u16, len: usize) -> Result<&[u8], OutsidePool> {
        let start = self.buffer(bid).ok_or_else(|| self.outside(bid))?;
        // SAFETY: the caller guarantees nothing writes buffer `bid` while the
        // slice lives; `buffer` keeps the start inside the mapping and the
        // length is at most one buffer, so the end stays inside too; the
        // bytes are initialised (zeroed by the mapping, then written by the
        // kernel).
        Ok(unsafe { std::slice::from_raw_parts(start, len.min(self.len)) })
    }

    /// Unmaps the buffers.
    ///
    /// # Safety
    ///
    /// No kernel operation may still use any of them (every receive into
    /// them completed, or their ring is gone with nothing in flight).
    pub unsafe fn unmap(self) {
        // SAFETY: the mapping made in `new`, of this length; the caller
        // promises the kernel is done with it, and `self` is consumed.
        unsafe { unmap_anonymous(self.base, usize::from(self.count) * self.len) };
    }
}

/// A provided-buffer ring registered with a ring for one buffer group:
/// `count` entries in an anonymous mapping shared with the kernel. The loop
/// writes entries at its tail ([`BufRing::push`]) and publishes the tail
/// ([`BufRing::publish`], once per turn is enough); the kernel takes
/// buffers from the head.
///
/// Dropping it leaks the mapping, as [`BufferPool`] does; give it back
/// with [`BufRing::unregister`] or, once its ring is gone,
/// [`BufRing::unmap`].
#[derive(Debug)]
pub struct BufRing {
    entries: NonNull<BufRingEntry>,
    count: u16,
    group: u16,
    /// The tail as the loop counts it (published by [`BufRing::publish`]).
    tail: u16,
}

impl BufRing {
    /// Maps `count` entries (a power of two up to 32768) and registers them
    /// with `ring` as buffer group `group`. The ring starts empty.
    pub fn register(ring: &IoUring, count: u16, group: u16) -> Result<BufRing, RegisterError> {
        if !count.is_power_of_two() || count > 1 << 15 {
            return Err(RegisterError::Register(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("a buffer ring of {count} entries (a power of two up to 32768)"),
            )));
        }
        let len = Self::mapped_len(count);
        let at = map_anonymous(len).map_err(RegisterError::Map)?;
        // SAFETY: the mapping is page-aligned and `count` entries long, and
        // it is unmapped only once unregistered or once the ring is gone
        // (`unregister`, `unmap`), so it outlives the registration.
        let registered = unsafe {
            ring.submitter()
                .register_buf_ring_with_flags(at.as_ptr() as u64, count, group, 0)
        };
        if let Err(e) = registered {
            // SAFETY: the mapping made above, never shared with the kernel.
            unsafe { unmap_anonymous(at, len) };
            return Err(RegisterError::Register(e));
        }
        Ok(BufRing {
            entries: at.cast(),
            count,
            group,
            tail: 0,
        })
    }

    fn mapped_len(count: u16) -> usize {
        usize::from(count) * size_of::<BufRingEntry>()
    }

    /// The buffer group it is registered for.
    pub fn group(&self) -> u16 {
        self.group
    }

    /// Puts buffer `bid` of `pool` at the tail (the kernel sees it after
    /// [`BufRing::publish`]).
    pub fn push(&mut self, pool: &BufferPool, bid: u16) -> Result<(), OutsidePool> {
        let addr = pool.buffer(bid).ok_or_else(|| pool.outside(bid))?;
        let slot = usize::from(self.tail & (self.count - 1));
        // SAFETY: `slot < count`, inside the mapping; the kernel reads only
        // the entries between its head and the published tail, and this one
        // is past the published tail, so nothing else accesses it now.
        let entry = unsafe { &mut *self.entries.as_ptr().add(slot) };
        entry.set_addr(addr as u64);
        // `BufferPool::new` keeps a buffer's length within i32.
        entry.set_len(u32::try_from(pool.buffer_len()).unwrap_or(u32::MAX));
        entry.set_bid(bid);
        self.tail = self.tail.wrapping_add(1);
        Ok(())
    }

    /// Makes the buffers pushed so far visible to the kernel.
    pub fn publish(&self) {
        // SAFETY: the ring's tail field lies in its first entry, inside the
        // live, page-aligned mapping; the kernel reads it as an atomic u16,
        // and this is the only writer.
        let tail = unsafe { &*BufRingEntry::tail(self.entries.as_ptr()).cast::<AtomicU16>() };
        tail.store(self.tail, Ordering::Release);
    }

    /// Unregisters the ring from `ring` and unmaps it. If the kernel refuses
    /// (e.g. `ring` is not the one it was registered with) the mapping is
    /// leaked, as on drop.
    pub fn unregister(self, ring: &IoUring) -> io::Result<()> {
        ring.submitter().unregister_buf_ring(self.group)?;
        // SAFETY: unregistered just above, so the kernel holds it no more.
        unsafe { self.unmap() };
        Ok(())
    }

    /// Unmaps the ring's entries.
    ///
    /// # Safety
    ///
    /// The kernel must hold the ring no more: it was unregistered, or the
    /// ring it was registered with is gone.
    pub unsafe fn unmap(self) {
        // SAFETY: the mapping made by `register`, of this length; the caller
        // promises the kernel is done with it, and `self` is consumed.
        unsafe { unmap_anonymous(self.entries.cast(), Self::mapped_len(self.count)) };
    }
}

/// How used buffers go back to the kernel.
#[derive(Debug)]
pub enum Provider {
    /// A registered buffer ring.
    Ring(BufRing),
    /// `IORING_OP_PROVIDE_BUFFERS` entries for buffer group `group`.
    Entries {
        /// The buffer group the entries provide for.
        group: u16,
    },
}

impl Provider {
    /// A buffer ring of `pool.count()` entries for `group` if `wanted` and
    /// the kernel registers one, else provide-buffer entries (with a note
    /// when the ring was wanted).
    pub fn new(
        ring: &IoUring,
        pool: &BufferPool,
        group: u16,
        wanted: bool,
        notes: &mut Vec<Note>,
    ) -> Provider {
        if !wanted {
            return Provider::Entries { group };
        }
        match BufRing::register(ring, pool.count(), group) {
            Ok(r) => Provider::Ring(r),
            Err(e) => {
                notes.push(Note::new(
                    Feature::BufRing,
                    format!("registering a buffer ring failed ({e}; Linux 5.19 and later)"),
                    "giving buffers back with IORING_OP_PROVIDE_BUFFERS",
                ));
                Provider::Entries { group }
            }
        }
    }

    /// Whether buffers go back through a registered ring.
    pub fn is_ring(&self) -> bool {
        matches!(self, Provider::Ring(_))
    }

    /// Lends buffers `first..first + count` of `pool` to the kernel: pushed
    /// on the ring (seen after [`Provider::publish`]; returns `None`), or as
    /// one `PROVIDE_BUFFERS` entry for the caller to tag and submit. The
    /// entry points into `pool`, which must outlive its completion.
    pub fn provide(
        &mut self,
        pool: &BufferPool,
        first: u16,
        count: u16,
    ) -> Result<Option<squeue::Entry>, OutsidePool> {
        let end = u32::from(first) + u32::from(count);
        if end > u32::from(pool.count()) {
            return Err(pool.outside(first.saturating_add(count.saturating_sub(1))));
        }
        match self {
            Provider::Ring(r) => {
                for bid in first..first + count {
                    r.push(pool, bid)?;
                }
                Ok(None)
            }
            Provider::Entries { group } => {
                let start = pool.buffer(first).ok_or_else(|| pool.outside(first))?;
                // `BufferPool::new` keeps a buffer's length within i32.
                let len = i32::try_from(pool.buffer_len()).unwrap_or(i32::MAX);
                let entry = opcode::ProvideBuffers::new(start, len, count, *group, first).build();
                Ok(Some(entry))
            }
        }
    }

    /// Makes buffers given back so far visible to the kernel (ring only;
    /// provide entries take effect when submitted).
    pub fn publish(&self) {
        if let Provider::Ring(r) = self {
            r.publish();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::uring::tests::ring_or_skip;
    use crate::uring::RingConfig;
    use io_uring::{cqueue, types};
    use std::io::Write;
    use std::os::fd::{AsRawFd, OwnedFd};
    use std::os::unix::net::UnixStream;

    const CONFIG: RingConfig = RingConfig {
        entries: 8,
        sqpoll_idle_ms: None,
        defer_taskrun: false,
    };

    #[test]
    fn pool_hands_out_buffers_inside_its_region_only() {
        let pool = BufferPool::new(4, 100).unwrap();
        let first = pool.buffer(0).unwrap() as usize;
        let last = pool.buffer(3).unwrap() as usize;
        assert_eq!(last - first, 300);
        assert_eq!(first % 4096, 0, "page-aligned");
        assert!(pool.buffer(4).is_none());
        // SAFETY: no kernel has this pool; nothing writes it.
        let data = unsafe { pool.completed(3, 1000) }.unwrap();
        assert_eq!(data.len(), 100, "at most one buffer");
        assert!(data.iter().all(|&b| b == 0));
        // SAFETY: as above.
        let outside = unsafe { pool.completed(4, 1) }.unwrap_err();
        assert_eq!(outside.to_string(), "buffer id 4 is outside the pool of 4");
        // SAFETY: never lent to a kernel.
        unsafe { pool.unmap() };
    }

    #[test]
    fn impossible_pools_are_errors() {
        assert!(BufferPool::new(0, 16).is_err());
        assert!(BufferPool::new(4, 0).is_err());
        assert!(BufferPool::new(2, 1 << 31).is_err(), "longer than an i32");
    }

    #[test]
    fn a_ring_must_be_a_power_of_two() {
        let Some(b) = ring_or_skip(CONFIG) else {
            return;
        };
        let err = BufRing::register(&b.ring, 6, 0).unwrap_err();
        assert!(matches!(err, RegisterError::Register(_)), "{err}");
        assert!(BufRing::register(&b.ring, 1 << 15, 0).is_ok_and(|r| r.unregister(&b.ring).is_ok()));
    }

    /// Receives what `peer` wrote on `fd` into a buffer of `group`;
    /// returns the result and the buffer id.
    fn receive(ring: &mut IoUring, fd: &OwnedFd, group: u16) -> (i32, Option<u16>) {
        let entry = opcode::Recv::new(types::Fd(fd.as_raw_fd()), std::ptr::null_mut(), 64)
            .buf_group(group)
            .build()
            .flags(squeue::Flags::BUFFER_SELECT)
            .user_data(7);
        // SAFETY: the entry points at no memory of ours (the kernel picks a
        // buffer of the group, which outlives the test's ring).
        unsafe { ring.submission().push(&entry) }.unwrap();
        ring.submit_and_wait(1).unwrap();
        let cqe = ring.completion().next().unwrap();
        (cqe.result(), cqueue::buffer_select(cqe.flags()))
    }

    fn socket_pair() -> (OwnedFd, UnixStream) {
        let (a, b) = UnixStream::pair().unwrap();
        (OwnedFd::from(a), b)
    }

    #[test]
    fn a_buffer_ring_lends_buffers_the_kernel_fills() {
        let Some(mut b) = ring_or_skip(CONFIG) else {
            return;
        };
        let pool = BufferPool::new(4, 64).unwrap();
        let mut buf_ring = match BufRing::register(&b.ring, 4, 5) {
            Ok(r) => r,
            Err(e) => return eprintln!("skipped: no buffer rings here ({e})"),
        };
        assert_eq!(buf_ring.group(), 5);
        for bid in [2, 3] {
            buf_ring.push(&pool, bid).unwrap();
        }
        assert!(buf_ring.push(&pool, 4).is_err());
        buf_ring.publish();
        let (fd, mut peer) = socket_pair();
        peer.write_all(b"hello").unwrap();
        let (res, bid) = receive(&mut b.ring, &fd, 5);
        assert_eq!((res, bid), (5, Some(2)), "the first buffer pushed");
        // SAFETY: the completion returned buffer 2; it is not lent again
        // while `data` lives.
        let data = unsafe { pool.completed(2, res as usize) }.unwrap();
        assert_eq!(data, b"hello");
        // Given back, it comes round again after buffer 3.
        buf_ring.push(&pool, 2).unwrap();
        buf_ring.publish();
        peer.write_all(b"x").unwrap();
        assert_eq!(receive(&mut b.ring, &fd, 5), (1, Some(3)));
        peer.write_all(b"yz").unwrap();
        assert_eq!(receive(&mut b.ring, &fd, 5), (2, Some(2)));
        // SAFETY: as above, buffer 2 again.
        assert_eq!(unsafe { pool.completed(2, 2) }.unwrap(), b"yz");
        buf_ring.unregister(&b.ring).unwrap();
        drop(b);
        // SAFETY: the ring is gone and nothing was in flight.
        unsafe { pool.unmap() };
    }

    #[test]
    fn provide_entries_lend_buffers_without_a_ring() {
        let Some(mut b) = ring_or_skip(CONFIG) else {
            return;
        };
        let pool = BufferPool::new(4, 64).unwrap();
        let mut notes = Vec::new();
        let mut provider = Provider::new(&b.ring, &pool, 9, false, &mut notes);
        assert!(!provider.is_ring());
        assert!(notes.is_empty());
        assert!(provider.provide(&pool, 3, 2).is_err(), "past the pool");
        let entry = provider.provide(&pool, 1, 1).unwrap().unwrap();
        // SAFETY: the entry points into `pool`, which outlives the ring.
        unsafe { b.ring.submission().push(&entry.user_data(1)) }.unwrap();
        b.ring.submit_and_wait(1).unwrap();
        let provided = b.ring.completion().next().unwrap();
        assert!(provided.result() >= 0, "{}", provided.result());
        let (fd, mut peer) = socket_pair();
        peer.write_all(b"abc").unwrap();
        assert_eq!(receive(&mut b.ring, &fd, 9), (3, Some(1)));
        // SAFETY: the completion returned buffer 1.
        assert_eq!(unsafe { pool.completed(1, 3) }.unwrap(), b"abc");
    }

    #[test]
    fn a_wanted_ring_is_registered_and_publishes() {
        let Some(mut b) = ring_or_skip(CONFIG) else {
            return;
        };
        let pool = BufferPool::new(8, 32).unwrap();
        let mut notes = Vec::new();
        let mut provider = Provider::new(&b.ring, &pool, 2, true, &mut notes);
        if !provider.is_ring() {
            return eprintln!("skipped: no buffer rings here ({notes:?})");
        }
        assert!(provider.provide(&pool, 0, 8).unwrap().is_none());
        provider.publish();
        let (fd, mut peer) = socket_pair();
        peer.write_all(b"q").unwrap();
        assert_eq!(receive(&mut b.ring, &fd, 2), (1, Some(0)));
    }

    #[test]
    fn a_refused_ring_falls_back_to_entries_with_a_note() {
        let Some(b) = ring_or_skip(CONFIG) else {
            return;
        };
        // Six buffers cannot make a ring: the registration fails.
        let pool = BufferPool::new(6, 32).unwrap();
        let mut notes = Vec::new();
        let provider = Provider::new(&b.ring, &pool, 2, true, &mut notes);
        assert!(!provider.is_ring());
        assert_eq!(notes.len(), 1);
        assert_eq!(notes[0].feature, Feature::BufRing);
        assert!(notes[0]
            .why
            .starts_with("registering a buffer ring failed ("));
        assert_eq!(
            notes[0].instead,
            "giving buffers back with IORING_OP_PROVIDE_BUFFERS"
        );
    }
}
