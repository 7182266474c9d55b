//! How a connection's bytes reach the kernel. Every engine makes the same
//! calls (`recv`, `sendmsg`, `accept4`); the RT-signal engine must also see
//! each call's result, under its table lock, to keep its readiness table
//! right. This trait is that seam; [`Direct`] is the plain path and costs
//! nothing (generic, inlined).

use std::io;
use std::os::fd::{OwnedFd, RawFd};

/// Runs a connection's non-blocking calls and releases its descriptor.
pub(crate) trait SocketIo {
    /// Runs an input call on `fd` (`recv`, `accept4`) that asked for `requested` bytes.
    fn input(
        &self,
        fd: RawFd,
        requested: usize,
        op: impl FnOnce() -> io::Result<usize>,
    ) -> io::Result<usize>;
    /// Runs an output call on `fd` (`sendmsg`) that offered `requested` bytes.
    fn output(
        &self,
        fd: RawFd,
        requested: usize,
        op: impl FnOnce() -> io::Result<usize>,
    ) -> io::Result<usize>;
    /// Closes a connection's descriptor.
    fn release(&self, fd: OwnedFd);
}

/// The plain path: the call runs as is; closing is `close(2)`.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Direct;

impl SocketIo for Direct {
    #[inline(always)]
    fn input(
        &self,
        _fd: RawFd,
        _requested: usize,
        op: impl FnOnce() -> io::Result<usize>,
    ) -> io::Result<usize> {
        op()
    }

    #[inline(always)]
    fn output(
        &self,
        _fd: RawFd,
        _requested: usize,
        op: impl FnOnce() -> io::Result<usize>,
    ) -> io::Result<usize> {
        op()
    }

    #[inline(always)]
    fn release(&self, fd: OwnedFd) {
        drop(fd);
    }
}
