//! The bytes of one request, built without allocation: a CLB1 header encoded
//! on the stack plus payload from a shared zero buffer, or the run's one
//! prebuilt HTTP GET.

use connlab_proto::{encode_clb1_request_header, encode_http_get, Protocol};

/// Size of the shared request payload buffer; longer payloads repeat it.
const PAYLOAD_CHUNK: usize = 64 * 1024;
static PAYLOAD: [u8; PAYLOAD_CHUNK] = [0u8; PAYLOAD_CHUNK];

/// Everything needed to produce any request of a run.
pub(crate) struct RequestTemplate {
    protocol: Protocol,
    request_size: u32,
    response_size: u32,
    http_get: Vec<u8>,
}

impl RequestTemplate {
    pub(crate) fn new(
        protocol: Protocol,
        request_size: u32,
        response_size: u32,
        path: &str,
    ) -> Self {
        let mut http_get = Vec::new();
        if protocol == Protocol::Http {
            encode_http_get(path, true, &mut http_get);
        }
        RequestTemplate {
            protocol,
            request_size,
            response_size,
            http_get,
        }
    }

    /// Bytes of every request.
    pub(crate) fn len(&self) -> u64 {
        match self.protocol {
            Protocol::Clb1 => u64::from(self.request_size),
            Protocol::Http => self.http_get.len() as u64,
        }
    }

    /// Fills `iov` with the bytes of request `seq` from byte `offset` on;
    /// `head` holds the encoded header and must outlive the send. Returns the
    /// number of iovecs used (at most `iov.len()`).
    pub(crate) fn iovecs(
        &self,
        seq: u32,
        offset: u64,
        head: &mut [u8; 16],
        iov: &mut [libc::iovec],
    ) -> usize {
        let mut n = 0;
        match self.protocol {
            Protocol::Http => {
                let rest = &self.http_get[offset as usize..];
                push(iov, &mut n, rest.as_ptr(), rest.len());
            }
            Protocol::Clb1 => {
                encode_clb1_request_header(self.request_size, self.response_size, seq, head);
                let mut payload_from = 0u64;
                if offset < 16 {
                    push(
                        iov,
                        &mut n,
                        head[offset as usize..].as_ptr(),
                        16 - offset as usize,
                    );
                } else {
                    payload_from = offset - 16;
                }
                let mut rest = u64::from(self.request_size) - 16 - payload_from;
                while rest > 0 && n < iov.len() {
                    let len = rest.min(PAYLOAD_CHUNK as u64) as usize;
                    push(iov, &mut n, PAYLOAD.as_ptr(), len);
                    rest -= len as u64;
                }
            }
        }
        n
    }
}

/// Appends one iovec if there is room and `len > 0`.
fn push(iov: &mut [libc::iovec], n: &mut usize, base: *const u8, len: usize) {
    if *n < iov.len() && len > 0 {
        iov[*n] = libc::iovec {
            iov_base: base as *mut libc::c_void,
            iov_len: len,
        };
        *n += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gather(t: &RequestTemplate, seq: u32, offset: u64) -> Vec<u8> {
        let mut head = [0u8; 16];
        let mut iov = [libc::iovec {
            iov_base: std::ptr::null_mut(),
            iov_len: 0,
        }; 8];
        let n = t.iovecs(seq, offset, &mut head, &mut iov);
        let mut out = Vec::new();
        for v in &iov[..n] {
            // SAFETY: each iovec points at `head` or a static buffer of at least iov_len bytes.
            out.extend_from_slice(unsafe {
                std::slice::from_raw_parts(v.iov_base as *const u8, v.iov_len)
            });
        }
        out
    }

    #[test]
    fn encodes_the_protocol_md_example_request() {
        let t = RequestTemplate::new(Protocol::Clb1, 128, 10 * 1024, "");
        let bytes = gather(&t, 7, 0);
        assert_eq!(bytes.len(), 128);
        assert_eq!(
            bytes[..16],
            [0x43, 0x4c, 0x42, 0x31, 0, 0, 0, 0x80, 0, 0, 0x28, 0, 0, 0, 0, 7]
        );
        assert_eq!(t.len(), 128);
    }

    #[test]
    fn resumes_a_partly_sent_request_at_any_offset() {
        let t = RequestTemplate::new(Protocol::Clb1, 100, 16, "");
        let whole = gather(&t, 3, 0);
        for offset in [1u64, 15, 16, 17, 99] {
            assert_eq!(
                gather(&t, 3, offset),
                whole[offset as usize..],
                "offset {offset}"
            );
        }
    }

    #[test]
    fn http_requests_are_one_keep_alive_get() {
        let t = RequestTemplate::new(Protocol::Http, 0, 0, "/bytes/10240");
        let bytes = gather(&t, 0, 0);
        assert_eq!(bytes, b"GET /bytes/10240 HTTP/1.1\r\nHost: connlab\r\n\r\n");
        assert_eq!(gather(&t, 1, 4), bytes[4..]);
    }
}
