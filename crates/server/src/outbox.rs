//! Responses waiting to be sent on one connection, written with one `sendmsg`
//! gather call per flush: each response's head is encoded into a stack buffer
//! and its payload points into the shared [`PAYLOAD`] buffer, so nothing is
//! copied or allocated per request.

use crate::payload::{PAYLOAD, PAYLOAD_CHUNK};
use crate::socket_io::SocketIo;
use connlab_proto::Response;
use std::collections::VecDeque;
use std::io;
use std::os::fd::RawFd;

/// Most responses gathered into one `sendmsg`.
const RESPONSES_PER_SEND: usize = 16;
/// Most iovecs in one `sendmsg` (well under IOV_MAX = 1024).
const IOVECS_PER_SEND: usize = 64;

/// One gathered `sendmsg`: the encoded heads of the front responses and
/// iovecs pointing into them and into the shared payload. The iovecs point
/// into the value itself: it must not move between [`Outbox::gather`] and
/// the end of the send (the uring engine keeps in-flight ones boxed).
pub(crate) struct Gather {
    heads: [[u8; Response::MAX_HEADER_LEN]; RESPONSES_PER_SEND],
    /// Full length of each gathered response.
    totals: [u64; RESPONSES_PER_SEND],
    iov: [libc::iovec; IOVECS_PER_SEND],
    n_iov: usize,
}

impl Gather {
    /// An empty gather.
    pub(crate) fn new() -> Gather {
        Gather {
            heads: [[0u8; Response::MAX_HEADER_LEN]; RESPONSES_PER_SEND],
            totals: [0u64; RESPONSES_PER_SEND],
            iov: [libc::iovec {
                iov_base: std::ptr::null_mut(),
                iov_len: 0,
            }; IOVECS_PER_SEND],
            n_iov: 0,
        }
    }

    /// The gathered iovecs.
    pub(crate) fn iovecs(&self) -> &[libc::iovec] {
        &self.iov[..self.n_iov]
    }

    /// A `msghdr` over the gathered iovecs (valid while `self` stays put).
    pub(crate) fn msghdr(&mut self) -> libc::msghdr {
        // SAFETY: an all-zero msghdr is valid (no name, no control data).
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_iov = self.iov.as_mut_ptr();
        msg.msg_iovlen = self.n_iov;
        msg
    }
}

/// The queue of responses owed to the peer, in request order.
#[derive(Default)]
pub(crate) struct Outbox {
    queue: VecDeque<Response>,
    /// Bytes of the front response (head + payload) already sent.
    front_sent: u64,
}

impl Outbox {
    pub(crate) fn push(&mut self, response: Response) {
        self.queue.push_back(response);
    }

    pub(crate) fn len(&self) -> usize {
        self.queue.len()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }

    /// One `sendmsg(MSG_NOSIGNAL)` of as much as is queued (up to the gather
    /// limits); returns the bytes the kernel took.
    pub(crate) fn send_once(&mut self, fd: RawFd, io: &impl SocketIo) -> io::Result<usize> {
        let mut gather = Gather::new();
        let offered = self.gather(&mut gather);
        if offered == 0 {
            return Ok(0);
        }
        let msg = gather.msghdr();
        let sent = io.output(fd, offered, || {
            // SAFETY: every iovec points into `gather` (alive until return) or the static
            // PAYLOAD, with lengths inside those buffers; the kernel only reads them.
            let sent = unsafe { libc::sendmsg(fd, &msg, libc::MSG_NOSIGNAL) };
            if sent < 0 {
                Err(io::Error::last_os_error())
            } else {
                Ok(sent as usize)
            }
        })?;
        self.sent(sent, &gather);
        Ok(sent)
    }

    /// Fills `gather` with as much as is queued (up to the gather limits)
    /// and returns the bytes it offers. The queue is unchanged until
    /// [`Outbox::sent`]; responses pushed meanwhile go behind.
    pub(crate) fn gather(&self, gather: &mut Gather) -> usize {
        gather.n_iov = 0;
        let Gather {
            heads,
            totals,
            iov,
            n_iov,
        } = gather;
        let mut push = |base: *const u8, len: usize| -> bool {
            if *n_iov == IOVECS_PER_SEND {
                return false;
            }
            iov[*n_iov] = libc::iovec {
                iov_base: base as *mut libc::c_void,
                iov_len: len,
            };
            *n_iov += 1;
            true
        };
        'responses: for (i, (response, head)) in self.queue.iter().zip(heads.iter_mut()).enumerate()
        {
            let head_len = response.encode_header(head);
            totals[i] = head_len as u64 + response.payload_len();
            let skip = if i == 0 { self.front_sent } else { 0 };
            let mut payload_done = 0u64;
            if (skip as usize) < head_len {
                let s = skip as usize;
                if !push(head[s..head_len].as_ptr(), head_len - s) {
                    break;
                }
            } else {
                payload_done = skip - head_len as u64;
            }
            let mut rest = response.payload_len() - payload_done;
            while rest > 0 {
                let len = rest.min(PAYLOAD_CHUNK as u64) as usize;
                if !push(PAYLOAD.as_ptr(), len) {
                    break 'responses;
                }
                rest -= len as u64;
            }
        }
        gather.iov[..gather.n_iov].iter().map(|v| v.iov_len).sum()
    }

    /// Drops the `sent` bytes the kernel took of what `gather` (filled by
    /// [`Outbox::gather`] from this queue) offered.
    pub(crate) fn sent(&mut self, sent: usize, gather: &Gather) {
        self.advance(sent as u64, &gather.totals);
    }

    /// Drops what the kernel accepted from the front of the queue.
    /// `totals[i]` is the full length of the i-th queued response.
    fn advance(&mut self, mut sent: u64, totals: &[u64]) {
        for &total in totals {
            if sent == 0 || self.queue.is_empty() {
                break;
            }
            let left = total - self.front_sent;
            if sent >= left {
                sent -= left;
                self.front_sent = 0;
                self.queue.pop_front();
            } else {
                self.front_sent += sent;
                sent = 0;
            }
        }
    }
}
