//! Waiting on the readiness table: `poll(2)` and `select(2)` answered from
//! it, and blocking reads, writes and accepts that park until a signal
//! says the descriptor is ready.

use crate::table::Table;
use crate::{lock, not_watched, raw_read, raw_write, Ready, RtSig};
use std::io;
use std::os::fd::RawFd;
use std::sync::MutexGuard;
use std::time::{Duration, Instant};

impl RtSig {
    /// `poll(2)` answered from the readiness table: fills each entry's
    /// `revents` (`POLLNVAL` for descriptors not registered, nothing for
    /// negative ones) and returns how many have events. Waits until one
    /// has, or `timeout` passes (`None`: forever; zero: do not wait).
    pub fn poll(&self, fds: &mut [libc::pollfd], timeout: Option<Duration>) -> io::Result<usize> {
        let deadline = timeout.map(|t| Instant::now() + t);
        let mut table = lock(&self.shared);
        loop {
            let n = table.scan(fds);
            if n > 0 {
                return Ok(n);
            }
            match self.wait_poll(table, deadline) {
                Some(t) => table = t,
                None => return Ok(0),
            }
        }
    }

    /// Waits on the poll condition; None when the deadline has passed.
    fn wait_poll<'a>(
        &'a self,
        mut table: MutexGuard<'a, Table>,
        deadline: Option<Instant>,
    ) -> Option<MutexGuard<'a, Table>> {
        table.poll_waiters += 1;
        let mut table = match deadline {
            None => self
                .shared
                .poll_cond
                .wait(table)
                .unwrap_or_else(|p| p.into_inner()),
            Some(d) => {
                let now = Instant::now();
                if now >= d {
                    table.poll_waiters -= 1;
                    return None;
                }
                self.shared
                    .poll_cond
                    .wait_timeout(table, d - now)
                    .unwrap_or_else(|p| p.into_inner())
                    .0
            }
        };
        table.poll_waiters -= 1;
        Some(table)
    }

    /// `select(2)` answered from the readiness table, over descriptors
    /// `0..nfds`. On return each set holds the ready descriptors; a pending
    /// error shows as readable and writable (as on Linux) and is cleared.
    /// The exception set is always returned empty (urgent data is not
    /// tracked). A descriptor in a set but not registered is `EBADF`.
    pub fn select(
        &self,
        nfds: usize,
        mut readfds: Option<&mut FdSet>,
        mut writefds: Option<&mut FdSet>,
        exceptfds: Option<&mut FdSet>,
        timeout: Option<Duration>,
    ) -> io::Result<usize> {
        if nfds > FdSet::CAPACITY {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "rtsig: select nfds {nfds} exceeds FD_SETSIZE {}",
                    FdSet::CAPACITY
                ),
            ));
        }
        let want_r = readfds.as_deref().copied();
        let want_w = writefds.as_deref().copied();
        if let Some(e) = exceptfds {
            e.clear();
        }
        let deadline = timeout.map(|t| Instant::now() + t);
        let mut table = lock(&self.shared);
        loop {
            let mut got_r = FdSet::new();
            let mut got_w = FdSet::new();
            let mut n = 0;
            for fd in 0..nfds as RawFd {
                let r = want_r.is_some_and(|s| s.contains(fd));
                let w = want_w.is_some_and(|s| s.contains(fd));
                if !r && !w {
                    continue;
                }
                let Some((is_r, is_w)) = table.select_one(fd, r, w) else {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidInput,
                        format!("rtsig: select: descriptor {fd} is not registered (EBADF)"),
                    ));
                };
                if is_r {
                    got_r.insert(fd);
                    n += 1;
                }
                if is_w {
                    got_w.insert(fd);
                    n += 1;
                }
            }
            if n > 0 || deadline.is_some_and(|d| Instant::now() >= d) {
                if let Some(s) = readfds.as_deref_mut() {
                    *s = got_r;
                }
                if let Some(s) = writefds.as_deref_mut() {
                    *s = got_w;
                }
                return Ok(n);
            }
            match self.wait_poll(table, deadline) {
                Some(t) => table = t,
                None => {
                    if let Some(s) = readfds.as_deref_mut() {
                        s.clear();
                    }
                    if let Some(s) = writefds.as_deref_mut() {
                        s.clear();
                    }
                    return Ok(0);
                }
            }
        }
    }

    /// Waits on `fd`'s condition until `is_ready` holds, then runs `op`
    /// under the lock; repeats while `op` says `EAGAIN`.
    fn blocking<T>(
        &self,
        fd: RawFd,
        is_ready: impl Fn(Ready) -> bool,
        mut op: impl FnMut(&mut Table) -> io::Result<T>,
    ) -> io::Result<T> {
        let mut table = lock(&self.shared);
        loop {
            let Some(ready) = table.ready(fd) else {
                return Err(not_watched(fd));
            };
            if is_ready(ready) {
                match op(&mut table) {
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    other => return other,
                }
                continue;
            }
            let Some(cond) = table.wait_on(fd) else {
                return Err(not_watched(fd));
            };
            table = cond.wait(table).unwrap_or_else(|p| p.into_inner());
            table.done_waiting(fd);
        }
    }

    /// Blocking `read(2)`: waits on `fd`'s condition until the table says
    /// readable, then reads (non-blocking) what is there.
    pub fn read_blocking(&self, fd: RawFd, buf: &mut [u8]) -> io::Result<usize> {
        let len = buf.len();
        self.blocking(
            fd,
            |r| r.readable,
            |table| {
                let result = raw_read(fd, buf);
                table.after_input(fd, len, &result);
                result
            },
        )
    }

    /// Blocking write of all of `buf`: writes what the socket takes and
    /// waits on `fd`'s condition for room for the rest.
    pub fn write_blocking(&self, fd: RawFd, buf: &[u8]) -> io::Result<usize> {
        let mut done = 0;
        while done < buf.len() {
            let rest = &buf[done..];
            done += self.blocking(
                fd,
                |r| r.writable,
                |table| {
                    let result = raw_write(fd, rest);
                    table.after_output(fd, rest.len(), &result);
                    result
                },
            )?;
        }
        Ok(done)
    }

    /// Blocking `accept(2)`: waits on the listener's condition until a
    /// connection is there; the new socket is watched.
    pub fn accept_blocking(&self, listener: RawFd) -> io::Result<RawFd> {
        self.blocking(
            listener,
            |r| r.readable,
            |table| self.accept_locked(table, listener),
        )
    }
}

/// A `select` descriptor set (`fd_set`): descriptors `0..FD_SETSIZE`.
#[derive(Clone, Copy)]
pub struct FdSet(libc::fd_set);

impl Default for FdSet {
    fn default() -> FdSet {
        FdSet::new()
    }
}

impl FdSet {
    /// Descriptors a set can hold (`FD_SETSIZE`).
    pub const CAPACITY: usize = libc::FD_SETSIZE;

    /// An empty set.
    pub fn new() -> FdSet {
        // SAFETY: an all-zero fd_set is an empty set (what FD_ZERO writes).
        FdSet(unsafe { std::mem::zeroed() })
    }

    fn in_range(fd: RawFd) -> bool {
        fd >= 0 && (fd as usize) < Self::CAPACITY
    }

    /// Adds `fd`; false (and nothing changed) when it is outside the set's range.
    pub fn insert(&mut self, fd: RawFd) -> bool {
        if !Self::in_range(fd) {
            return false;
        }
        // SAFETY: `fd` is inside 0..FD_SETSIZE.
        unsafe { libc::FD_SET(fd, &mut self.0) };
        true
    }

    /// Removes `fd`.
    pub fn remove(&mut self, fd: RawFd) {
        if Self::in_range(fd) {
            // SAFETY: `fd` is inside 0..FD_SETSIZE.
            unsafe { libc::FD_CLR(fd, &mut self.0) };
        }
    }

    /// Whether `fd` is in the set.
    pub fn contains(&self, fd: RawFd) -> bool {
        // SAFETY: `fd` is inside 0..FD_SETSIZE.
        Self::in_range(fd) && unsafe { libc::FD_ISSET(fd, &self.0) }
    }

    /// Empties the set.
    pub fn clear(&mut self) {
        *self = FdSet::new();
    }
}
