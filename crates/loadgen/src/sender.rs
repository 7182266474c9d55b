//! Non-blocking request sending that never stalls the caller: what a full
//! socket does not take waits in a per-connection backlog and is retried
//! later. Shared by the open-loop writer thread and the closed-loop reader.

use crate::request::RequestTemplate;
use std::collections::VecDeque;
use std::io;
use std::os::fd::RawFd;

/// Most iovecs per `sendmsg`.
const IOVECS: usize = 32;

/// A request not yet fully handed to the kernel.
struct Pending {
    seq: u32,
    offset: u64,
}

/// Why a send gave up on a connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SendFailure {
    /// The peer reset or closed the connection.
    Dead,
}

pub(crate) struct Sender<'a> {
    template: &'a RequestTemplate,
    pending: Vec<VecDeque<Pending>>,
    backlogged: Vec<usize>,
    pub(crate) bytes_sent: u64,
}

impl<'a> Sender<'a> {
    pub(crate) fn new(template: &'a RequestTemplate, connections: usize) -> Self {
        Sender {
            template,
            pending: (0..connections).map(|_| VecDeque::new()).collect(),
            backlogged: Vec::new(),
            bytes_sent: 0,
        }
    }

    /// The requests' template (the ring sender builds its entries from it).
    pub(crate) fn template(&self) -> &'a RequestTemplate {
        self.template
    }

    /// Sends request `seq` on connection `conn`, or queues it behind earlier
    /// unsent bytes of that connection.
    pub(crate) fn send(&mut self, conn: usize, fd: RawFd, seq: u32) -> Result<(), SendFailure> {
        if !self.pending[conn].is_empty() {
            self.pending[conn].push_back(Pending { seq, offset: 0 });
            return Ok(());
        }
        let (sent, len) = self.write(fd, seq, 0)?;
        if sent < len {
            self.pending[conn].push_back(Pending { seq, offset: sent });
            self.backlogged.push(conn);
        }
        Ok(())
    }

    /// Retries every backlogged connection once; `dead` is told of each that failed.
    pub(crate) fn flush_backlog(&mut self, fds: &[RawFd], mut dead: impl FnMut(usize)) {
        let mut i = 0;
        while i < self.backlogged.len() {
            let conn = self.backlogged[i];
            match self.flush_one(conn, fds[conn]) {
                Ok(true) => {
                    self.backlogged.swap_remove(i);
                }
                Ok(false) => i += 1,
                Err(SendFailure::Dead) => {
                    self.pending[conn].clear();
                    self.backlogged.swap_remove(i);
                    dead(conn);
                }
            }
        }
    }

    /// True when some connection has bytes waiting.
    pub(crate) fn has_backlog(&self) -> bool {
        !self.backlogged.is_empty()
    }

    /// Writes the backlog of one connection; true when it is empty.
    fn flush_one(&mut self, conn: usize, fd: RawFd) -> Result<bool, SendFailure> {
        while let Some(front) = self.pending[conn].front() {
            let (seq, offset) = (front.seq, front.offset);
            let (sent, len) = self.write(fd, seq, offset)?;
            if offset + sent < len {
                if let Some(front) = self.pending[conn].front_mut() {
                    front.offset = offset + sent;
                }
                return Ok(false);
            }
            self.pending[conn].pop_front();
        }
        Ok(true)
    }

    /// One non-blocking `sendmsg` of request `seq` from `offset`; returns the
    /// bytes taken and the request's whole length.
    fn write(&mut self, fd: RawFd, seq: u32, offset: u64) -> Result<(u64, u64), SendFailure> {
        let mut head = [0u8; 16];
        let mut iov = [libc::iovec {
            iov_base: std::ptr::null_mut(),
            iov_len: 0,
        }; IOVECS];
        let (n, len) = self.template.iovecs(seq, offset, &mut head, &mut iov);
        // SAFETY: an all-zero msghdr is valid (no name, no control data).
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_iov = iov.as_mut_ptr();
        msg.msg_iovlen = n;
        loop {
            // SAFETY: the iovecs point into `head` (alive here) or static buffers owned by the template.
            let r = unsafe { libc::sendmsg(fd, &msg, libc::MSG_NOSIGNAL | libc::MSG_DONTWAIT) };
            if r >= 0 {
                self.bytes_sent += r as u64;
                return Ok((r as u64, len));
            }
            let e = io::Error::last_os_error();
            match e.kind() {
                io::ErrorKind::WouldBlock => return Ok((0, len)),
                io::ErrorKind::Interrupted => continue,
                _ => return Err(SendFailure::Dead),
            }
        }
    }
}
