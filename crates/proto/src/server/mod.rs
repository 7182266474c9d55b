//! The server side of one connection, [`ServerSession`]: request bytes in, in
//! any chunking, and the [`Response`] owed for each complete request out, in
//! arrival order. Engines only move bytes; what to answer is decided here.
//! A [`Response`] is a small `Copy` value, and its head is encoded on demand
//! into a stack buffer by [`Response::encode_header`].

use crate::clb1::{self, Framer, Header};
use crate::head::HeadReader;
use crate::http1::{self, FileSizes, RequestError, MAX_HEADER_SECTION};
use crate::{Protocol, ProtocolError};

/// Limits of a server connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ServerConfig {
    /// Largest CLB1 `req_len` and `resp_len`, and largest N in HTTP
    /// `GET /bytes/N`, in bytes (`--max-message`).
    pub max_message: u32,
    /// HTTP: paths served besides `/bytes/N`, with their sizes (a web file
    /// set's manifest); made once at start-up and kept for the process.
    pub files: Option<&'static FileSizes>,
}

impl ServerConfig {
    /// The default `max_message`: 16 MiB (`shared/protocol.md` §1).
    pub const DEFAULT_MAX_MESSAGE: u32 = 16 * 1024 * 1024;
}

impl Default for ServerConfig {
    fn default() -> ServerConfig {
        ServerConfig {
            max_message: ServerConfig::DEFAULT_MAX_MESSAGE,
            files: None,
        }
    }
}

/// The HTTP statuses the server sends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HttpStatus {
    /// 200: `GET /bytes/N`.
    Ok,
    /// 400: malformed request, head over 8 KiB, or a request body.
    BadRequest,
    /// 404: any other path.
    NotFound,
    /// 405: any method but GET.
    MethodNotAllowed,
}

impl HttpStatus {
    /// The numeric status code.
    pub fn code(self) -> u16 {
        match self {
            HttpStatus::Ok => 200,
            HttpStatus::BadRequest => 400,
            HttpStatus::NotFound => 404,
            HttpStatus::MethodNotAllowed => 405,
        }
    }

    /// The reason phrase of the status line.
    pub fn reason(self) -> &'static str {
        match self {
            HttpStatus::Ok => "OK",
            HttpStatus::BadRequest => "Bad Request",
            HttpStatus::NotFound => "Not Found",
            HttpStatus::MethodNotAllowed => "Method Not Allowed",
        }
    }
}

/// What the server must send for one request: small, `Copy`, no heap.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Response {
    /// A CLB1 response: this header, then `resp_len - 16` payload bytes.
    Clb1(Header),
    /// An HTTP response: status line and headers, then `content_length` body bytes.
    Http {
        /// The status.
        status: HttpStatus,
        /// Body length in bytes.
        content_length: u64,
        /// Send `Connection: close` and close after this response.
        close: bool,
    },
}

impl Response {
    /// Room [`Response::encode_header`] needs; the longest HTTP head is 97 bytes.
    pub const MAX_HEADER_LEN: usize = 128;

    /// Writes the response head into `dst` and returns its length. CLB1: the
    /// 16-byte header. HTTP: `HTTP/1.1 {code} {reason}\r\n`,
    /// `Content-Length: {n}\r\n`, `Connection: close\r\n` or
    /// `Connection: keep-alive\r\n` (so HTTP/1.0 clients keep the connection
    /// too), then `\r\n`. No `Date` or `Server` fields.
    pub fn encode_header(&self, dst: &mut [u8; Response::MAX_HEADER_LEN]) -> usize {
        match *self {
            Response::Clb1(header) => {
                let mut bytes = [0; Header::LEN];
                header.emit(&mut bytes);
                dst[..Header::LEN].copy_from_slice(&bytes);
                Header::LEN
            }
            Response::Http {
                status,
                content_length,
                close,
            } => {
                let mut head = SliceWriter { dst, len: 0 };
                head.put(b"HTTP/1.1 ");
                head.put_decimal(u64::from(status.code()));
                head.put(b" ");
                head.put(status.reason().as_bytes());
                head.put(b"\r\nContent-Length: ");
                head.put_decimal(content_length);
                head.put(if close {
                    b"\r\nConnection: close\r\n\r\n".as_slice()
                } else {
                    b"\r\nConnection: keep-alive\r\n\r\n".as_slice()
                });
                head.len
            }
        }
    }

    /// Bytes after the head: CLB1 `resp_len - 16`, HTTP `content_length`.
    pub fn payload_len(&self) -> u64 {
        match self {
            Response::Clb1(header) => header.resp_payload_len(),
            Response::Http { content_length, .. } => *content_length,
        }
    }

    /// Whether the connection closes after this response: the HTTP `close`
    /// flag; never for CLB1, which closes only on protocol errors.
    pub fn closes_connection(&self) -> bool {
        match self {
            Response::Clb1(_) => false,
            Response::Http { close, .. } => *close,
        }
    }
}

/// Whether a session takes more input after a [`ServerSession::feed`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flow {
    /// Keep reading.
    Continue,
    /// The session takes no more input; the engine closes the connection
    /// after sending the responses already queued.
    Close,
}

/// Server side of one connection: bytes in, responses out.
#[derive(Debug)]
pub struct ServerSession {
    machine: Machine,
    /// A feed returned `Flow::Close` or an error: later input is ignored.
    closed: bool,
}

#[derive(Debug)]
enum Machine {
    Clb1(Clb1Server),
    Http(HttpServer),
}

impl ServerSession {
    /// A session at the start of a connection.
    pub fn new(protocol: Protocol, config: ServerConfig) -> Self {
        let machine = match protocol {
            Protocol::Clb1 => Machine::Clb1(Clb1Server {
                framer: Framer::new(),
                request: None,
                max_message: config.max_message,
            }),
            Protocol::Http => Machine::Http(HttpServer {
                head: HeadReader::default(),
                first_line_checked: false,
                max_message: config.max_message,
                files: config.files,
            }),
        };
        ServerSession {
            machine,
            closed: false,
        }
    }

    /// Feeds bytes in any chunking and pushes one [`Response`] per complete
    /// request, in arrival order, via `out`. Consumes all of `input` unless it
    /// returns `Ok(Flow::Close)` or `Err`; then the rest is ignored, and every
    /// later feed returns `Ok(Flow::Close)` and pushes nothing.
    ///
    /// CLB1: a response is pushed once the whole request (header and
    /// `req_len - 16` payload bytes, which are dropped as they arrive) is in.
    /// A bad header is an `Err` with nothing pushed for it.
    ///
    /// HTTP: a response that closes the connection makes the feed return
    /// `Ok(Flow::Close)` right after pushing it. A malformed request, a head
    /// over 8 KiB, more than 64 header fields or a request body pushes a
    /// `400 Bad Request` with `close` and then returns the `Err`.
    pub fn feed(
        &mut self,
        input: &[u8],
        out: &mut impl FnMut(Response),
    ) -> Result<Flow, ProtocolError> {
        if self.closed {
            return Ok(Flow::Close);
        }
        let result = match &mut self.machine {
            Machine::Clb1(machine) => machine.feed(input, out),
            Machine::Http(machine) => machine.feed(input, out),
        };
        self.closed = result != Ok(Flow::Continue);
        result
    }

    /// The peer sent EOF: `Ok(())` at a request boundary (blank lines between
    /// HTTP requests count as one) or after the session already closed,
    /// `Err(ProtocolError::Truncated { .. })` mid-request; `received` counts
    /// the bytes of the cut part (header or payload).
    pub fn finish(&self) -> Result<(), ProtocolError> {
        if self.closed {
            return Ok(());
        }
        match &self.machine {
            Machine::Clb1(machine) => match machine.framer.position() {
                clb1::Position::Boundary => Ok(()),
                clb1::Position::Header(received) => Err(ProtocolError::Truncated {
                    what: "request header",
                    received,
                }),
                clb1::Position::Payload(received) => Err(ProtocolError::Truncated {
                    what: "request payload",
                    received,
                }),
            },
            Machine::Http(machine) if machine.head.at_boundary() => Ok(()),
            Machine::Http(machine) => Err(ProtocolError::Truncated {
                what: "request header",
                received: machine.head.received(),
            }),
        }
    }

    /// Whether part of a request head has arrived but not all of it (the
    /// CLB1 16-byte header; the HTTP request line and header fields): the
    /// state a header timeout bounds. `false` at a request boundary, inside
    /// a CLB1 payload and after the session closed.
    pub fn in_request_head(&self) -> bool {
        if self.closed {
            return false;
        }
        match &self.machine {
            Machine::Clb1(machine) => {
                matches!(machine.framer.position(), clb1::Position::Header(_))
            }
            Machine::Http(machine) => !machine.head.at_boundary(),
        }
    }

    /// The protocol this session speaks.
    pub fn protocol(&self) -> Protocol {
        match self.machine {
            Machine::Clb1(_) => Protocol::Clb1,
            Machine::Http(_) => Protocol::Http,
        }
    }
}

/// CLB1 requests: a 16-byte header accumulator and a payload countdown.
#[derive(Debug)]
struct Clb1Server {
    framer: Framer,
    /// The checked header of the request whose payload is arriving.
    request: Option<Header>,
    max_message: u32,
}

impl Clb1Server {
    fn feed(
        &mut self,
        mut input: &[u8],
        out: &mut impl FnMut(Response),
    ) -> Result<Flow, ProtocolError> {
        while let Some(frame) = self.framer.next(&mut input) {
            match frame {
                clb1::Frame::Header(bytes) => {
                    let header = Header::parse(&bytes, self.max_message)?;
                    self.framer.expect_payload(header.req_payload_len());
                    self.request = Some(header);
                }
                clb1::Frame::End => {
                    if let Some(header) = self.request.take() {
                        out(Response::Clb1(header));
                    }
                }
            }
        }
        Ok(Flow::Continue)
    }
}

/// HTTP requests: heads found by a [`HeadReader`], answered by [`http1::answer`].
#[derive(Debug)]
struct HttpServer {
    head: HeadReader,
    /// The request line of the unfinished head was judged already.
    first_line_checked: bool,
    max_message: u32,
    files: Option<&'static FileSizes>,
}

impl HttpServer {
    fn feed(
        &mut self,
        mut input: &[u8],
        out: &mut impl FnMut(Response),
    ) -> Result<Flow, ProtocolError> {
        while !input.is_empty() {
            let (max_message, files) = (self.max_message, self.files);
            let answer = match self
                .head
                .read(&mut input, |head| http1::answer(head, max_message, files))
            {
                Ok(None) => {
                    if self.first_line_checked || !self.head.first_line_done() {
                        break;
                    }
                    self.first_line_checked = true;
                    match http1::check_request_line(self.head.unfinished()) {
                        Ok(()) => break,
                        Err(e) => Err(e),
                    }
                }
                Ok(Some(answer)) => {
                    self.first_line_checked = false;
                    answer
                }
                Err(too_large) => Err(RequestError::HeaderTooLarge {
                    len: too_large.len,
                    max: MAX_HEADER_SECTION,
                }),
            };
            match answer {
                Ok(response) => {
                    out(response);
                    if response.closes_connection() {
                        return Ok(Flow::Close);
                    }
                }
                Err(error) => {
                    out(Response::Http {
                        status: HttpStatus::BadRequest,
                        content_length: 0,
                        close: true,
                    });
                    return Err(error.into());
                }
            }
        }
        Ok(Flow::Continue)
    }
}

/// Writes into a fixed buffer that is known to be large enough.
struct SliceWriter<'a> {
    dst: &'a mut [u8],
    len: usize,
}

impl SliceWriter<'_> {
    /// Panics only if the buffer is too small, which [`Response::MAX_HEADER_LEN`] rules out.
    fn put(&mut self, bytes: &[u8]) {
        self.dst[self.len..self.len + bytes.len()].copy_from_slice(bytes);
        self.len += bytes.len();
    }

    fn put_decimal(&mut self, mut n: u64) {
        let mut digits = [0u8; 20];
        let mut start = digits.len();
        loop {
            start -= 1;
            digits[start] = b'0' + (n % 10) as u8;
            n /= 10;
            if n == 0 {
                break;
            }
        }
        self.put(&digits[start..]);
    }
}

#[cfg(test)]
mod tests;
