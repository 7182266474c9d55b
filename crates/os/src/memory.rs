//! Private anonymous memory the kernel may read or fill directly (io_uring
//! buffer rings and receive buffers), mapped with `mmap(2)` so it is
//! page-aligned, zeroed and outside the allocator.

use std::io;
use std::ptr::NonNull;

/// Maps `len` bytes of private anonymous read/write memory, zeroed and
/// page-aligned. Give it back with [`unmap_anonymous`].
pub fn map_anonymous(len: usize) -> io::Result<NonNull<u8>> {
    // SAFETY: a fresh private anonymous mapping with no address hint; the
    // result is checked before use.
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
    NonNull::new(at.cast::<u8>()).ok_or_else(|| io::Error::other("mmap returned null"))
}

/// Unmaps memory from [`map_anonymous`].
///
/// # Safety
///
/// `at` and `len` must be one mapping [`map_anonymous`] returned, no longer
/// used by this process nor lent to the kernel (e.g. a registered buffer
/// ring), and not unmapped before.
pub unsafe fn unmap_anonymous(at: NonNull<u8>, len: usize) {
    // SAFETY: the caller's promise. A failure (only EINVAL for a bad range)
    // would leave the mapping in place: nothing to undo.
    unsafe { libc::munmap(at.as_ptr().cast(), len) };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maps_zeroed_writable_memory_and_unmaps_it() {
        let len = 3 * 4096 + 5;
        let at = map_anonymous(len).unwrap();
        assert_eq!(at.as_ptr() as usize % 4096, 0, "page-aligned");
        // SAFETY: `len` bytes mapped read/write just above.
        let bytes = unsafe { std::slice::from_raw_parts_mut(at.as_ptr(), len) };
        assert!(bytes.iter().all(|&b| b == 0));
        bytes[len - 1] = 7;
        assert_eq!(bytes[len - 1], 7);
        // SAFETY: the mapping above, used no more.
        unsafe { unmap_anonymous(at, len) };
    }

    #[test]
    fn an_impossible_size_is_an_error() {
        assert!(map_anonymous(usize::MAX).is_err());
    }
}
