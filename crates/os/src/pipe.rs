//! Pipes for `splice(2)`: bytes moved socket -> pipe -> socket as page
//! references, never through user space (the gateway's and the single-IP
//! app node's splice relays).

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// A non-blocking, close-on-exec pipe.
#[derive(Debug)]
pub struct Pipe {
    /// The read end.
    pub read: OwnedFd,
    /// The write end.
    pub write: OwnedFd,
}

impl Pipe {
    /// A pipe asked to hold `bytes` (`F_SETPIPE_SZ`, best effort: a smaller
    /// pipe, capped by `/proc/sys/fs/pipe-max-size` or the user's pipe
    /// pages, still works with shorter splices). See [`Pipe::capacity`].
    pub fn with_size(bytes: usize) -> io::Result<Pipe> {
        let mut fds = [0 as libc::c_int; 2];
        // SAFETY: `fds` has room for the two descriptors pipe2 writes.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_NONBLOCK | libc::O_CLOEXEC) } != 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: pipe2 succeeded: both descriptors are open and ours alone.
        let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        let want = libc::c_int::try_from(bytes).unwrap_or(libc::c_int::MAX);
        // SAFETY: F_SETPIPE_SZ on a pipe we own; a failure leaves its size.
        let _ = unsafe { libc::fcntl(write.as_raw_fd(), libc::F_SETPIPE_SZ, want) };
        Ok(Pipe { read, write })
    }

    /// Reads what the pipe holds into `buf`, at most `buf.len()` bytes
    /// (`EINTR` retried): `Ok(0)` only once the write end is closed, and
    /// `WouldBlock` when the pipe is empty. For bytes that must leave a
    /// splice pipe through user space after all.
    pub fn read_out(&self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            // SAFETY: pointer and length describe `buf`; the read end is ours.
            let n =
                unsafe { libc::read(self.read.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
            if n >= 0 {
                return Ok(n as usize);
            }
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::Interrupted {
                return Err(e);
            }
        }
    }

    /// The pipe's capacity in bytes (whole pages; Linux's default 64 KiB
    /// when it cannot be read).
    pub fn capacity(&self) -> usize {
        // SAFETY: F_GETPIPE_SZ on a pipe we own.
        let size = unsafe { libc::fcntl(self.write.as_raw_fd(), libc::F_GETPIPE_SZ) };
        if size > 0 {
            size as usize
        } else {
            64 * 1024
        }
    }
}

/// `splice(2)` of at most `len` bytes between a pipe and a socket (no
/// offsets), non-blocking, page references moved, `EINTR` retried; `more`
/// tells a socket that more bytes follow (`SPLICE_F_MORE`).
pub fn splice(from: RawFd, to: RawFd, len: usize, more: bool) -> io::Result<usize> {
    let mut flags = libc::SPLICE_F_NONBLOCK | libc::SPLICE_F_MOVE;
    if more {
        flags |= libc::SPLICE_F_MORE;
    }
    loop {
        // SAFETY: null offsets (pipes and sockets have none); the caller
        // keeps both descriptors open for the call.
        let n = unsafe {
            libc::splice(
                from,
                std::ptr::null_mut(),
                to,
                std::ptr::null_mut(),
                len,
                flags,
            )
        };
        if n >= 0 {
            return Ok(n as usize);
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};

    #[test]
    fn bytes_go_through_a_pipe_by_splice() {
        let pipe = Pipe::with_size(128 * 1024).unwrap();
        assert!(pipe.capacity() >= 64 * 1024);
        let (mut a, b) = std::os::unix::net::UnixStream::pair().unwrap();
        let (c, mut d) = std::os::unix::net::UnixStream::pair().unwrap();
        a.write_all(b"spliced bytes").unwrap();
        let n = splice(b.as_raw_fd(), pipe.write.as_raw_fd(), 1024, false).unwrap();
        assert_eq!(n, 13);
        assert_eq!(
            splice(pipe.read.as_raw_fd(), c.as_raw_fd(), n, false).unwrap(),
            13
        );
        let mut got = [0u8; 13];
        d.read_exact(&mut got).unwrap();
        assert_eq!(&got, b"spliced bytes");
        // Nothing left: a non-blocking splice says so.
        let e = splice(pipe.read.as_raw_fd(), c.as_raw_fd(), 1, false).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::WouldBlock);
    }

    #[test]
    fn bytes_spliced_in_can_be_read_out() {
        let pipe = Pipe::with_size(64 * 1024).unwrap();
        let (mut a, b) = std::os::unix::net::UnixStream::pair().unwrap();
        a.write_all(b"spill").unwrap();
        assert_eq!(
            splice(b.as_raw_fd(), pipe.write.as_raw_fd(), 64, false).unwrap(),
            5
        );
        let mut got = [0u8; 8];
        assert_eq!(pipe.read_out(&mut got).unwrap(), 5);
        assert_eq!(&got[..5], b"spill");
        let e = pipe.read_out(&mut got).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::WouldBlock);
    }
}
