//! Memory shared between a process and the children it forks: the
//! process-per-connection engine keeps its counters here so that the work of
//! every child shows up in the parent's statistics.

use crate::OsError;
use std::ops::Deref;
use std::ptr::NonNull;

/// Types whose values may live in a [`SharedMem`] mapping and be used
/// through `&T` by several processes at once.
///
/// Only plain-old-data and atomics qualify: integers, floats, `bool`,
/// `()`, the integer and `bool` atomics, arrays of these, and structs that
/// hold only such fields.
///
/// ```
/// use std::sync::atomic::{AtomicU64, Ordering};
/// let shared = connlab_os::SharedMem::new([AtomicU64::new(0), AtomicU64::new(0)])?;
/// shared[1].fetch_add(1, Ordering::Relaxed);
/// # Ok::<(), connlab_os::OsError>(())
/// ```
///
/// A type that owns heap memory does not qualify: its pointer means nothing
/// in another process (each has its own heap after `fork`).
///
/// ```compile_fail,E0277
/// let _ = connlab_os::SharedMem::new(Vec::<u8>::new());
/// ```
///
/// Nor does a std `Mutex`: it waits on a process-private futex, so a process
/// blocked on it is never woken by an unlock in another one.
///
/// ```compile_fail,E0277
/// let _ = connlab_os::SharedMem::new(std::sync::Mutex::new(0u32));
/// ```
///
/// # Safety
///
/// Implement it only for a `Sync` type that
/// * holds no pointer or reference, and owns nothing outside its own bytes
///   (no `Box`, `Vec`, `String`, `Arc`, file descriptor): the bytes are
///   shared, but a pointer in them is valid in at most one process;
/// * synchronises, if at all, only with atomic instructions on its own
///   bytes: no std `Mutex`, `RwLock` or `Condvar` (process-private futexes),
///   nothing that records a thread or process id, no thread-local state;
/// * has no `Drop` glue: [`SharedMem`] drops the value in whichever process
///   drops its handle, while others may still use it;
/// * is valid for every bit pattern another process's writes through `&T`
///   can leave (true of the primitives and atomics above).
///
/// For a struct, the implementation's SAFETY comment should name how every
/// field is checked to be `ProcessShared` (e.g. a function that
/// destructures the struct and passes each field to a generic
/// `fn is<T: ProcessShared>(_: &T)`, so adding a field of another type
/// fails to compile).
pub unsafe trait ProcessShared: Sync {}

macro_rules! process_shared {
    ($($t:ty),* $(,)?) => {
        $(
            // SAFETY: a primitive or an atomic of one: no pointer, no Drop,
            // synchronised only by atomic instructions on its own bytes, and
            // valid for every bit pattern its own operations write.
            unsafe impl ProcessShared for $t {}
        )*
    };
}

process_shared!(
    (),
    bool,
    u8,
    u16,
    u32,
    u64,
    u128,
    usize,
    i8,
    i16,
    i32,
    i64,
    i128,
    isize,
    f32,
    f64,
    std::sync::atomic::AtomicBool,
    std::sync::atomic::AtomicU8,
    std::sync::atomic::AtomicU16,
    std::sync::atomic::AtomicU32,
    std::sync::atomic::AtomicU64,
    std::sync::atomic::AtomicUsize,
    std::sync::atomic::AtomicI8,
    std::sync::atomic::AtomicI16,
    std::sync::atomic::AtomicI32,
    std::sync::atomic::AtomicI64,
    std::sync::atomic::AtomicIsize,
);

// SAFETY: an array is its elements' bytes side by side, with no pointer or
// Drop glue of its own; each element is `ProcessShared`.
unsafe impl<T: ProcessShared, const N: usize> ProcessShared for [T; N] {}

/// One `T` in an anonymous `MAP_SHARED` mapping that survives `fork`.
///
/// `T` must be usable through `&T` from several processes at once, which
/// [`ProcessShared`] promises: plain data and atomics only. The mapping is
/// never moved or copied by the kernel.
pub struct SharedMem<T: ProcessShared> {
    ptr: NonNull<T>,
}

// SAFETY: the mapping is owned by this handle and `T: ProcessShared` (hence
// `Sync`) makes `&T` shareable across threads.
unsafe impl<T: ProcessShared> Send for SharedMem<T> {}
// SAFETY: only `&T` is handed out, and `T: ProcessShared` implies `Sync`.
unsafe impl<T: ProcessShared> Sync for SharedMem<T> {}

impl<T: ProcessShared> SharedMem<T> {
    /// Maps a shared page range and moves `value` into it.
    pub fn new(value: T) -> Result<Self, OsError> {
        let len = size_of::<T>().max(1);
        // SAFETY: anonymous shared mapping with no address hint; the result is checked.
        let addr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if addr == libc::MAP_FAILED {
            return Err(OsError::last("mmap(MAP_SHARED|MAP_ANONYMOUS)"));
        }
        let ptr = addr.cast::<T>();
        // SAFETY: mmap returns page-aligned memory of at least `len` bytes, so a `T` fits and is aligned
        // (alignment above a page is not supported by any T we use).
        unsafe { ptr.write(value) };
        Ok(SharedMem {
            // SAFETY: MAP_FAILED was excluded above, and mmap never returns null for a non-fixed mapping.
            ptr: unsafe { NonNull::new_unchecked(ptr) },
        })
    }
}

impl<T: ProcessShared> Deref for SharedMem<T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: the pointer was initialised in `new` and stays mapped until drop.
        unsafe { self.ptr.as_ref() }
    }
}

impl<T: ProcessShared> Drop for SharedMem<T> {
    fn drop(&mut self) {
        // SAFETY: we own the value and the mapping; drop it once, then unmap the same range.
        unsafe {
            std::ptr::drop_in_place(self.ptr.as_ptr());
            libc::munmap(self.ptr.as_ptr().cast(), size_of::<T>().max(1));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU64, Ordering};

    #[test]
    fn child_writes_are_seen_by_parent() {
        let shared = SharedMem::new(AtomicU64::new(0)).unwrap();
        // SAFETY: the child only touches an atomic and calls _exit.
        match unsafe { libc::fork() } {
            0 => {
                shared.fetch_add(41, Ordering::Relaxed);
                // SAFETY: _exit is async-signal-safe and skips the test harness's destructors.
                unsafe { libc::_exit(0) }
            }
            pid if pid > 0 => {
                let mut status = 0;
                // SAFETY: waiting on our own child with a valid status pointer.
                unsafe { libc::waitpid(pid, &mut status, 0) };
                shared.fetch_add(1, Ordering::Relaxed);
                assert_eq!(shared.load(Ordering::Relaxed), 42);
            }
            _ => panic!("fork failed"),
        }
    }
}
