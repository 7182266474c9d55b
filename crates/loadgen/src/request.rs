//! The bytes of one request, built without allocation: a CLB1 header encoded
//! on the stack plus payload from a shared zero buffer, or the run's one
//! prebuilt HTTP GET.

use connlab_proto::{encode_clb1_request_header, encode_http_get, Protocol};
use connlab_webset::{Manifest, Popularity, RequestPicker};
use std::sync::Arc;

/// Response-size classes of the per-class latency (SI: 1 KB = 1,000 B):
/// (label, smallest size, largest size + 1).
pub const SIZE_CLASSES: [(&str, u64, u64); 5] = [
    ("<1KB", 0, 1_000),
    ("1-10KB", 1_000, 10_000),
    ("10-100KB", 10_000, 100_000),
    ("100KB-1MB", 100_000, 1_000_000),
    (">=1MB", 1_000_000, u64::MAX),
];

/// One empty service-latency histogram per size class.
pub(crate) fn class_histograms() -> Vec<connlab_measure::LatencyHistogram> {
    SIZE_CLASSES
        .iter()
        .map(|_| connlab_measure::LatencyHistogram::new())
        .collect()
}

/// The size class of a response of `bytes`.
pub(crate) fn size_class(bytes: u64) -> usize {
    SIZE_CLASSES
        .iter()
        .position(|&(_, lo, hi)| bytes >= lo && bytes < hi)
        .unwrap_or(SIZE_CLASSES.len() - 1)
}

/// HTTP requests drawn from a web file set (`--manifest`): one prebuilt GET
/// per file, and the file of request `seq` derived from a hash of the seed,
/// the shard and `seq`, so the sender and the reader agree on it without
/// sharing state and a run is reproducible.
#[derive(Debug)]
pub struct FileMix {
    gets: Vec<Vec<u8>>,
    paths: Vec<String>,
    sizes: Vec<u64>,
    picker: RequestPicker,
    seed: u64,
}

impl FileMix {
    /// Every file of `manifest`, chosen by `popularity`.
    pub fn new(manifest: &Manifest, popularity: Popularity, seed: u64) -> Result<FileMix, String> {
        let picker = RequestPicker::new(manifest, popularity)?;
        let gets = manifest
            .entries
            .iter()
            .map(|e| {
                let mut get = Vec::new();
                encode_http_get(&format!("/{}", e.path), true, &mut get);
                get
            })
            .collect();
        Ok(FileMix {
            gets,
            paths: manifest
                .entries
                .iter()
                .map(|e| format!("/{}", e.path))
                .collect(),
            sizes: manifest.entries.iter().map(|e| e.size_bytes).collect(),
            picker,
            seed,
        })
    }

    /// Files in the set.
    pub fn len(&self) -> usize {
        self.sizes.len()
    }

    /// Whether the set is empty (never, for a parsed manifest).
    pub fn is_empty(&self) -> bool {
        self.sizes.is_empty()
    }

    /// The file of request `seq` in the slice salted by `salt`.
    pub(crate) fn entry(&self, seq: u32, salt: u64) -> usize {
        let h = connlab_measure::splitmix64(
            self.seed ^ salt ^ u64::from(seq).wrapping_mul(0x9e37_79b9_7f4a_7c15),
        );
        self.picker.pick_at((h >> 11) as f64 / (1u64 << 53) as f64)
    }

    /// Request target of file `i` (`/path`).
    pub(crate) fn path(&self, i: usize) -> &str {
        &self.paths[i]
    }

    /// Size of file `i`.
    pub(crate) fn size(&self, i: usize) -> u64 {
        self.sizes[i]
    }
}

/// Size of the shared request payload buffer; longer payloads repeat it.
const PAYLOAD_CHUNK: usize = 64 * 1024;
static PAYLOAD: [u8; PAYLOAD_CHUNK] = [0u8; PAYLOAD_CHUNK];

/// Everything needed to produce any request of a run.
pub(crate) struct RequestTemplate {
    protocol: Protocol,
    request_size: u32,
    response_size: u32,
    http_get: Vec<u8>,
    files: Option<Arc<FileMix>>,
    salt: u64,
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
            files: None,
            salt: 0,
        }
    }

    /// HTTP requests from a file set instead of one path; `salt` separates shards.
    pub(crate) fn with_files(mut self, files: Option<Arc<FileMix>>, salt: u64) -> Self {
        self.files = files;
        self.salt = salt;
        self
    }

    /// The file set and salt, if requests come from one.
    pub(crate) fn files(&self) -> Option<(&FileMix, u64)> {
        self.files.as_deref().map(|f| (f, self.salt))
    }

    /// The GET of request `seq`.
    fn http_get(&self, seq: u32) -> &[u8] {
        match &self.files {
            Some(f) => &f.gets[f.entry(seq, self.salt)],
            None => &self.http_get,
        }
    }

    /// Bytes of request `seq` (the sender learns it from [`Self::iovecs`]).
    #[cfg(test)]
    pub(crate) fn len(&self, seq: u32) -> u64 {
        match self.protocol {
            Protocol::Clb1 => u64::from(self.request_size),
            Protocol::Http => self.http_get(seq).len() as u64,
        }
    }

    /// Fills `iov` with the bytes of request `seq` from byte `offset` on;
    /// `head` holds the encoded header and must outlive the send. Returns the
    /// number of iovecs used (at most `iov.len()`) and the whole request's
    /// length, so a manifest request's file is looked up once per write.
    pub(crate) fn iovecs(
        &self,
        seq: u32,
        offset: u64,
        head: &mut [u8; 16],
        iov: &mut [libc::iovec],
    ) -> (usize, u64) {
        let mut n = 0;
        match self.protocol {
            Protocol::Http => {
                let get = self.http_get(seq);
                let rest = &get[offset as usize..];
                push(iov, &mut n, rest.as_ptr(), rest.len());
                return (n, get.len() as u64);
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
        (n, u64::from(self.request_size))
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
        let (n, _) = t.iovecs(seq, offset, &mut head, &mut iov);
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
        assert_eq!(t.len(7), 128);
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
