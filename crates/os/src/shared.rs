//! Memory shared between a process and the children it forks: the
//! process-per-connection engine keeps its counters here so that the work of
//! every child shows up in the parent's statistics.

use crate::OsError;
use std::ops::Deref;
use std::ptr::NonNull;

/// One `T` in an anonymous `MAP_SHARED` mapping that survives `fork`.
///
/// `T` must be usable through `&T` from several processes at once, which in
/// practice means it holds only atomics: [`SharedMem::new`] requires `T: Sync`
/// and the mapping is never moved or copied by the kernel.
pub struct SharedMem<T: Sync> {
    ptr: NonNull<T>,
}

// SAFETY: the mapping is owned by this handle and `T: Sync` makes `&T` shareable across threads.
unsafe impl<T: Sync> Send for SharedMem<T> {}
// SAFETY: only `&T` is handed out, and `T: Sync`.
unsafe impl<T: Sync> Sync for SharedMem<T> {}

impl<T: Sync> SharedMem<T> {
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

impl<T: Sync> Deref for SharedMem<T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: the pointer was initialised in `new` and stays mapped until drop.
        unsafe { self.ptr.as_ref() }
    }
}

impl<T: Sync> Drop for SharedMem<T> {
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
