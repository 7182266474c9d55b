//! Responses waiting to be sent on one connection, written with one send per
//! flush: each response's head is encoded into a stack buffer and its payload
//! points into the shared [`PAYLOAD`] buffer, so nothing is allocated per
//! request. A gather of one piece, or of several totalling at most
//! [`COALESCE_BYTES`] (a small response's head and body), goes out as one
//! plain `send` of a single buffer; larger ones as a `sendmsg` of the iovecs.
//! Every engine sends through [`Gather::contiguous`], so all of them do the
//! same copy and the same kind of call for the same response.

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
/// Gathers of at most this many bytes in more than one piece are copied into
/// one buffer and sent with a plain `send`: for a small response the copy
/// costs less than the kernel's import of a `msghdr` and its iovec array.
pub(crate) const COALESCE_BYTES: usize = 4096;

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
    /// A small gather copied into one piece ([`Gather::contiguous`]); never
    /// read before that copy writes it.
    flat: [std::mem::MaybeUninit<u8>; COALESCE_BYTES],
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
            flat: [std::mem::MaybeUninit::uninit(); COALESCE_BYTES],
        }
    }

    /// The gathered bytes as one buffer (start, length) when that costs at
    /// most a small copy: the single iovec itself, or several pieces of at
    /// most [`COALESCE_BYTES`] in total copied into the gather's own buffer.
    /// `None`: send the iovecs. Valid while `self` stays put.
    pub(crate) fn contiguous(&mut self) -> Option<(*const u8, usize)> {
        let pieces = &self.iov[..self.n_iov];
        match pieces {
            [] => None,
            [one] => Some((one.iov_base as *const u8, one.iov_len)),
            _ => {
                let total: usize = pieces.iter().map(|v| v.iov_len).sum();
                if total > COALESCE_BYTES {
                    return None;
                }
                let mut at = 0;
                for piece in pieces {
                    // SAFETY: each iovec points at `iov_len` readable bytes (the
                    // gather's heads or the static payload, never `flat`), and
                    // `at + iov_len <= total <= COALESCE_BYTES` keeps the write
                    // inside `flat`.
                    unsafe {
                        std::ptr::copy_nonoverlapping(
                            piece.iov_base as *const u8,
                            self.flat.as_mut_ptr().add(at).cast::<u8>(),
                            piece.iov_len,
                        );
                    }
                    at += piece.iov_len;
                }
                Some((self.flat.as_ptr().cast::<u8>(), total))
            }
        }
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

    /// One `send` or `sendmsg` (`MSG_NOSIGNAL`, see [`Gather::contiguous`]) of
    /// as much as is queued (up to the gather limits); returns the bytes the
    /// kernel took.
    pub(crate) fn send_once(&mut self, fd: RawFd, io: &impl SocketIo) -> io::Result<usize> {
        let mut gather = Gather::new();
        let offered = self.gather(&mut gather);
        if offered == 0 {
            return Ok(0);
        }
        let one = gather.contiguous();
        let msg = gather.msghdr();
        let sent = io.output(fd, offered, || {
            let sent = match one {
                // SAFETY: `at` points at `len` bytes inside `gather` (alive until
                // return) or the static PAYLOAD; the kernel only reads them.
                Some((at, len)) => unsafe { libc::send(fd, at.cast(), len, libc::MSG_NOSIGNAL) },
                // SAFETY: every iovec points into `gather` (alive until return) or
                // the static PAYLOAD, with lengths inside those buffers.
                None => unsafe { libc::sendmsg(fd, &msg, libc::MSG_NOSIGNAL) },
            };
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
            ..
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

#[cfg(test)]
mod tests {
    use super::*;
    use connlab_proto::HttpStatus;

    fn http(content_length: u64) -> Response {
        Response::Http {
            status: HttpStatus::Ok,
            content_length,
            close: false,
        }
    }

    /// The bytes the gather offers, read through its iovecs.
    fn offered(gather: &Gather) -> Vec<u8> {
        gather.iov[..gather.n_iov]
            .iter()
            // SAFETY: each iovec points at `iov_len` readable bytes (heads or PAYLOAD).
            .flat_map(|v| unsafe {
                std::slice::from_raw_parts(v.iov_base as *const u8, v.iov_len).to_vec()
            })
            .collect()
    }

    #[test]
    fn a_small_gather_becomes_one_buffer_holding_the_same_bytes() {
        let mut outbox = Outbox::default();
        outbox.push(http(128));
        outbox.push(http(300));
        let mut gather = Gather::new();
        let total = outbox.gather(&mut gather);
        assert!(gather.n_iov > 1);
        let want = offered(&gather);
        let (at, len) = gather.contiguous().expect("small gathers are coalesced");
        assert_eq!(len, total);
        // SAFETY: `contiguous` returned `len` bytes inside `gather`.
        assert_eq!(unsafe { std::slice::from_raw_parts(at, len) }, &want[..]);
    }

    #[test]
    fn one_piece_is_sent_in_place_and_a_large_gather_stays_iovecs() {
        let mut outbox = Outbox::default();
        outbox.push(http(128));
        let mut gather = Gather::new();
        outbox.gather(&mut gather);
        // The head alone is sent: drop it, leaving the payload as one piece.
        let head = gather.iov[0].iov_len;
        outbox.sent(head, &gather);
        outbox.gather(&mut gather);
        assert_eq!(gather.n_iov, 1);
        let (at, len) = gather.contiguous().unwrap();
        assert_eq!((at, len), (gather.iov[0].iov_base as *const u8, 128));

        let mut big = Outbox::default();
        big.push(http(COALESCE_BYTES as u64));
        big.gather(&mut gather);
        assert!(gather.contiguous().is_none());
    }
}
