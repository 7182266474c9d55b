//! A client of `shared/protocol.md` written from the spec alone (no connlab
//! crate): the CLB1 codec, the HTTP/1.1 client side, and a connection whose
//! failures name the engine and its role, with every wait bounded.

use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::os::fd::AsRawFd;
use std::time::Duration;

/// How long any single socket read or write may block.
pub const IO_TIMEOUT: Duration = Duration::from_secs(10);

/// `shared/protocol.md` §1: the CLB1 header length.
pub const CLB1_HEADER_LEN: u32 = 16;
/// `shared/protocol.md` §1: the CLB1 magic.
pub const CLB1_MAGIC: [u8; 4] = *b"CLB1";

/// One KiB.
pub const KIB: u32 = 1024;
/// One MiB.
pub const MIB: u32 = 1024 * 1024;

// ---------------------------------------------------------------------------
// CLB1 codec (shared/protocol.md §1), written independently of connlab-proto
// ---------------------------------------------------------------------------

/// A 16-byte CLB1 header with arbitrary (possibly invalid) fields.
pub fn clb1_header(magic: [u8; 4], req_len: u32, resp_len: u32, seq: u32) -> [u8; 16] {
    let mut h = [0u8; 16];
    h[0..4].copy_from_slice(&magic);
    h[4..8].copy_from_slice(&req_len.to_be_bytes());
    h[8..12].copy_from_slice(&resp_len.to_be_bytes());
    h[12..16].copy_from_slice(&seq.to_be_bytes());
    h
}

/// A whole valid request: header plus `req_len - 16` payload bytes.
pub fn clb1_request(req_len: u32, resp_len: u32, seq: u32) -> Vec<u8> {
    assert!(
        req_len >= CLB1_HEADER_LEN,
        "clb1_request needs req_len >= 16"
    );
    let mut buf = Vec::with_capacity(req_len as usize);
    buf.extend_from_slice(&clb1_header(CLB1_MAGIC, req_len, resp_len, seq));
    // A payload that is not all zeros, so a server that parses payload as a header
    // (mis-framing) trips over the magic check.
    buf.extend((0..req_len - CLB1_HEADER_LEN).map(|i| (i % 251) as u8));
    buf
}

/// A CLB1 response as read off the wire.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Clb1Response {
    /// The 16 header bytes as read.
    pub header: [u8; 16],
    /// The magic field.
    pub magic: [u8; 4],
    /// The request length field.
    pub req_len: u32,
    /// The response length field.
    pub resp_len: u32,
    /// The sequence number field.
    pub seq: u32,
    /// Payload bytes read (always `resp_len - 16` when `Ok`).
    pub payload_len: u64,
}

/// Reads one CLB1 response: the header, then `resp_len - 16` payload bytes, which
/// are discarded.
pub fn read_clb1_response<R: Read>(r: &mut R) -> io::Result<Clb1Response> {
    let mut header = [0u8; 16];
    r.read_exact(&mut header)?;
    let field = |at: usize| u32::from_be_bytes(header[at..at + 4].try_into().expect("4 bytes"));
    let resp = Clb1Response {
        header,
        magic: header[0..4].try_into().expect("4 bytes"),
        req_len: field(4),
        resp_len: field(8),
        seq: field(12),
        payload_len: 0,
    };
    if resp.magic != CLB1_MAGIC || resp.resp_len < CLB1_HEADER_LEN {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("invalid response header {header:02x?}"),
        ));
    }
    let payload_len = u64::from(resp.resp_len - CLB1_HEADER_LEN);
    let got = io::copy(&mut r.take(payload_len), &mut io::sink())?;
    if got != payload_len {
        return Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            format!("response {header:02x?}: EOF after {got} of {payload_len} payload bytes"),
        ));
    }
    Ok(Clb1Response {
        payload_len,
        ..resp
    })
}

// ---------------------------------------------------------------------------
// HTTP/1.1 client side (shared/protocol.md §2)
// ---------------------------------------------------------------------------

/// `GET /bytes/N` with a Host header and optional extra header lines.
pub fn http_get(path: &str, version: &str, extra_headers: &[&str]) -> Vec<u8> {
    http_request("GET", path, version, extra_headers)
}

/// A request `METHOD PATH VERSION` with a Host header and `extra_headers`.
pub fn http_request(method: &str, path: &str, version: &str, extra_headers: &[&str]) -> Vec<u8> {
    let mut req = format!("{method} {path} {version}\r\nHost: 127.0.0.1\r\n");
    for h in extra_headers {
        req.push_str(h);
        req.push_str("\r\n");
    }
    req.push_str("\r\n");
    req.into_bytes()
}

/// An HTTP response as read off the wire; the body is counted and discarded.
#[derive(Debug, Clone)]
pub struct HttpResponse {
    /// The status line, without its line end.
    pub status_line: String,
    /// The status code.
    pub status: u16,
    /// Header names lowercased, values trimmed.
    pub headers: Vec<(String, String)>,
    /// The `Content-Length` value, if the response had one.
    pub content_length: Option<u64>,
    /// Body bytes read (and discarded).
    pub body_len: u64,
}

impl HttpResponse {
    /// The value of header `name` (any case), if present.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// Whether the response carries `Connection: close`.
    pub fn says_close(&self) -> bool {
        self.header("connection")
            .is_some_and(|v| v.split(',').any(|t| t.trim().eq_ignore_ascii_case("close")))
    }
}

/// Largest response header section this client accepts.
const MAX_RESPONSE_HEAD: usize = 64 * 1024;

/// Reads one HTTP response. Without `Content-Length` the body is taken as empty
/// (the contract says every response carries one; callers assert it).
pub fn read_http_response<R: BufRead>(r: &mut R) -> io::Result<HttpResponse> {
    let invalid = |msg: String| io::Error::new(io::ErrorKind::InvalidData, msg);
    let mut head_len = 0;
    let mut lines = Vec::new();
    loop {
        let mut line = Vec::new();
        let n = r
            .by_ref()
            .take((MAX_RESPONSE_HEAD - head_len) as u64)
            .read_until(b'\n', &mut line)?;
        head_len += n;
        if n == 0 || !line.ends_with(b"\n") {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!(
                    "response head ended early or exceeded {MAX_RESPONSE_HEAD} bytes after {} lines: {:?}",
                    lines.len(),
                    String::from_utf8_lossy(&line)
                ),
            ));
        }
        let text = String::from_utf8(line)
            .map_err(|e| invalid(format!("non-UTF-8 response head line: {e}")))?;
        let text = text.trim_end_matches(['\r', '\n']).to_owned();
        if text.is_empty() {
            break;
        }
        lines.push(text);
    }
    let status_line = lines.remove(0);
    let mut parts = status_line.splitn(3, ' ');
    let version = parts.next().unwrap_or_default();
    let status = parts.next().and_then(|s| s.parse::<u16>().ok());
    let status = match status {
        Some(s) if version.starts_with("HTTP/1.") => s,
        _ => return Err(invalid(format!("bad status line {status_line:?}"))),
    };
    let mut headers = Vec::new();
    for line in lines {
        let (name, value) = line
            .split_once(':')
            .ok_or_else(|| invalid(format!("bad header line {line:?}")))?;
        headers.push((name.trim().to_ascii_lowercase(), value.trim().to_owned()));
    }
    let content_length = match headers.iter().find(|(n, _)| n == "content-length") {
        None => None,
        Some((_, v)) => Some(
            v.parse::<u64>()
                .map_err(|_| invalid(format!("bad Content-Length {v:?}")))?,
        ),
    };
    let want = content_length.unwrap_or(0);
    let body_len = io::copy(&mut r.take(want), &mut io::sink())?;
    if body_len != want {
        return Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            format!("{status_line:?}: EOF after {body_len} of {want} body bytes"),
        ));
    }
    Ok(HttpResponse {
        status_line,
        status,
        headers,
        content_length,
        body_len,
    })
}

// ---------------------------------------------------------------------------
// Client connection
// ---------------------------------------------------------------------------

/// A client connection with timeouts, whose failures name the engine and the
/// connection's role.
pub struct Conn {
    /// The engine and role, for failure messages.
    pub label: String,
    reader: BufReader<TcpStream>,
}

impl Conn {
    /// Connects to `addr` with [`IO_TIMEOUT`] on the connect, reads and writes.
    pub fn open(addr: SocketAddr, label: &str) -> Conn {
        let stream = TcpStream::connect_timeout(&addr, IO_TIMEOUT)
            .unwrap_or_else(|e| panic!("[{label}] connecting to {addr}: {e}"));
        stream
            .set_read_timeout(Some(IO_TIMEOUT))
            .expect("set_read_timeout");
        stream
            .set_write_timeout(Some(IO_TIMEOUT))
            .expect("set_write_timeout");
        Conn {
            label: label.to_owned(),
            reader: BufReader::with_capacity(64 * 1024, stream),
        }
    }

    /// The socket.
    pub fn stream(&self) -> &TcpStream {
        self.reader.get_ref()
    }

    /// Turns off Nagle's algorithm.
    pub fn set_nodelay(&self) {
        self.stream().set_nodelay(true).expect("set_nodelay");
    }

    /// Writes all of `bytes` (one `write_all`).
    pub fn send(&mut self, bytes: &[u8]) {
        let label = &self.label;
        self.reader
            .get_mut()
            .write_all(bytes)
            .unwrap_or_else(|e| panic!("[{label}] sending {} bytes: {e}", bytes.len()));
    }

    /// Half-closes the connection (FIN).
    pub fn shutdown_write(&self) {
        self.stream()
            .shutdown(Shutdown::Write)
            .unwrap_or_else(|e| panic!("[{}] shutdown(Write): {e}", self.label));
    }

    /// Closes with RST instead of FIN (SO_LINGER with a zero timeout).
    pub fn reset(self) {
        let linger = libc::linger {
            l_onoff: 1,
            l_linger: 0,
        };
        // SAFETY: setsockopt on a descriptor we own, with a pointer to a live
        // `linger` and its exact size.
        let rc = unsafe {
            libc::setsockopt(
                self.stream().as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_LINGER,
                (&raw const linger).cast(),
                size_of::<libc::linger>() as libc::socklen_t,
            )
        };
        assert_eq!(
            rc,
            0,
            "[{}] setsockopt(SO_LINGER 0): {}",
            self.label,
            io::Error::last_os_error()
        );
    }

    /// Reads exactly `n` raw bytes of `what`.
    pub fn read_bytes(&mut self, n: usize, what: &str) -> Vec<u8> {
        let mut buf = vec![0; n];
        self.reader
            .read_exact(&mut buf)
            .unwrap_or_else(|e| panic!("[{}] reading {n} bytes of {what}: {e}", self.label));
        buf
    }

    /// Reads one CLB1 response to `what`, panicking on any error.
    pub fn read_clb1(&mut self, what: &str) -> Clb1Response {
        read_clb1_response(&mut self.reader)
            .unwrap_or_else(|e| panic!("[{}] reading CLB1 response to {what}: {e}", self.label))
    }

    /// Reads one response and asserts it answers request `(req_len, resp_len, seq)`.
    pub fn expect_clb1(&mut self, req_len: u32, resp_len: u32, seq: u32) -> Clb1Response {
        let what = format!("request seq {seq} (req_len {req_len}, resp_len {resp_len})");
        let resp = self.read_clb1(&what);
        let expected = clb1_header(CLB1_MAGIC, req_len, resp_len, seq);
        assert_eq!(
            resp.header, expected,
            "[{}] response header to {what}: got {:02x?}, expected {:02x?}",
            self.label, resp.header, expected
        );
        assert_eq!(
            resp.payload_len,
            u64::from(resp_len - CLB1_HEADER_LEN),
            "[{}] response payload length to {what}",
            self.label
        );
        resp
    }

    /// Sends one request and checks its response.
    pub fn clb1_round_trip(&mut self, req_len: u32, resp_len: u32, seq: u32) {
        self.send(&clb1_request(req_len, resp_len, seq));
        self.expect_clb1(req_len, resp_len, seq);
    }

    /// Reads one HTTP response to `what` and asserts it has a `Content-Length`.
    pub fn read_http(&mut self, what: &str) -> HttpResponse {
        let resp = read_http_response(&mut self.reader)
            .unwrap_or_else(|e| panic!("[{}] reading HTTP response to {what}: {e}", self.label));
        assert_eq!(
            resp.content_length,
            Some(resp.body_len),
            "[{}] response to {what} has no Content-Length header: {resp:?}",
            self.label
        );
        resp
    }

    /// Reads one HTTP response and asserts its status, body length, and whether it
    /// announces `Connection: close`.
    pub fn expect_http(
        &mut self,
        what: &str,
        status: u16,
        body_len: u64,
        closes: bool,
    ) -> HttpResponse {
        let resp = self.read_http(what);
        assert_eq!(
            resp.status, status,
            "[{}] status of response to {what}: {resp:?}",
            self.label
        );
        assert_eq!(
            resp.body_len, body_len,
            "[{}] body length of response to {what}: {resp:?}",
            self.label
        );
        assert_eq!(
            resp.says_close(),
            closes,
            "[{}] `Connection: close` on response to {what} (expected {}): {resp:?}",
            self.label,
            if closes { "present" } else { "absent" }
        );
        resp
    }

    /// Asserts the server closes the connection (EOF or RST) within the read
    /// timeout without sending another byte. `after` says what came before.
    pub fn expect_eof(&mut self, after: &str) {
        let label = &self.label;
        let mut extra = Vec::new();
        match self.reader.read_to_end(&mut extra) {
            Ok(_) => {}
            Err(e) if is_reset(&e) => {}
            Err(e) if is_timeout(&e) => panic!(
                "[{label}] after {after}: expected the server to close the connection, \
                 still open after {IO_TIMEOUT:?} ({} unexpected bytes received)",
                extra.len()
            ),
            Err(e) => panic!("[{label}] after {after}: expected EOF, got error {e}"),
        }
        assert!(
            extra.is_empty(),
            "[{label}] after {after}: expected EOF with no further bytes, got {} bytes: {:02x?}",
            extra.len(),
            &extra[..extra.len().min(64)]
        );
    }

    /// Asserts the server closes the connection without answering `what`.
    pub fn expect_eof_without_response(&mut self, what: &str) {
        self.expect_eof(&format!("{what} (no response allowed)"));
    }
}

/// Whether `e` means the peer reset or closed the connection.
pub fn is_reset(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::ConnectionReset
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::BrokenPipe
    )
}

/// Whether `e` is a read or write timeout.
pub fn is_timeout(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
    )
}
