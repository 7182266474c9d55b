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
                Ok(None) => break,
                Ok(Some(answer)) => answer,
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
mod tests {
    use super::*;
    use crate::ErrorKind;

    /// `shared/protocol.md` §1: a 128-byte request for a 10 KiB response, seq 7.
    const EXAMPLE_HEADER: [u8; 16] = [
        0x43, 0x4c, 0x42, 0x31, 0x00, 0x00, 0x00, 0x80, 0x00, 0x00, 0x28, 0x00, 0x00, 0x00, 0x00,
        0x07,
    ];

    fn example_request() -> Vec<u8> {
        let mut request = EXAMPLE_HEADER.to_vec();
        request.extend((0..112).map(|i| i as u8));
        request
    }

    fn clb1_request(req_len: u32, resp_len: u32, seq: u32) -> Vec<u8> {
        let mut request = vec![0xab; req_len as usize];
        let mut header = [0; 16];
        Header {
            req_len,
            resp_len,
            seq,
        }
        .emit(&mut header);
        request[..16].copy_from_slice(&header);
        request
    }

    /// Feeds `chunks` in order; returns the responses and every feed's result.
    fn run(
        protocol: Protocol,
        chunks: &[&[u8]],
    ) -> (
        ServerSession,
        Vec<Response>,
        Vec<Result<Flow, ProtocolError>>,
    ) {
        let mut session = ServerSession::new(protocol, ServerConfig::default());
        let mut responses = Vec::new();
        let results = chunks
            .iter()
            .map(|chunk| session.feed(chunk, &mut |r| responses.push(r)))
            .collect();
        (session, responses, results)
    }

    fn http(status: HttpStatus, content_length: u64, close: bool) -> Response {
        Response::Http {
            status,
            content_length,
            close,
        }
    }

    fn head_of(response: Response) -> String {
        let mut dst = [0; Response::MAX_HEADER_LEN];
        let len = response.encode_header(&mut dst);
        String::from_utf8(dst[..len].to_vec()).unwrap()
    }

    const BAD_REQUEST: Response = Response::Http {
        status: HttpStatus::BadRequest,
        content_length: 0,
        close: true,
    };

    #[test]
    fn in_request_head_only_between_first_and_last_head_byte() {
        let mut session = ServerSession::new(Protocol::Clb1, ServerConfig::default());
        let request = example_request();
        let mut feed = |bytes: &[u8]| {
            let _ = session.feed(bytes, &mut |_| {});
            session.in_request_head()
        };
        assert!(feed(&request[..1]));
        assert!(feed(&request[1..15]));
        assert!(!feed(&request[15..20]), "inside the payload");
        assert!(!feed(&request[20..]), "at the boundary");

        let mut session = ServerSession::new(Protocol::Http, ServerConfig::default());
        let mut feed = |bytes: &[u8]| {
            let _ = session.feed(bytes, &mut |_| {});
            session.in_request_head()
        };
        assert!(!feed(b"\r\n"), "blank lines before a request");
        assert!(feed(b"GET /bytes/1 HTTP/1.1\r\nHost: a\r\n"));
        assert!(!feed(b"\r\n"), "head complete");
        assert!(
            feed(b"GET /bytes/1 HTTP/1.1\r\n\r\nGET"),
            "the next head began"
        );
        assert!(
            !feed(b" /bytes/1 HTTP/1.0\r\n\r\n"),
            "closed after HTTP/1.0"
        );
    }

    #[test]
    fn answers_the_protocol_example_request() {
        let request = example_request();
        let (session, responses, results) = run(Protocol::Clb1, &[&request]);
        let expected = Response::Clb1(Header {
            req_len: 128,
            resp_len: 10240,
            seq: 7,
        });
        assert_eq!(responses, [expected]);
        assert_eq!(results, [Ok(Flow::Continue)]);
        assert_eq!(session.finish(), Ok(()));
        let mut head = [0; Response::MAX_HEADER_LEN];
        assert_eq!(expected.encode_header(&mut head), 16);
        assert_eq!(head[..16], EXAMPLE_HEADER);
        assert_eq!(expected.payload_len(), 10224);
        assert!(!expected.closes_connection());
    }

    #[test]
    fn answers_only_once_the_whole_payload_arrived() {
        let request = example_request();
        let (session, responses, _) = run(Protocol::Clb1, &[&request[..127]]);
        assert!(responses.is_empty());
        assert_eq!(
            session.finish(),
            Err(ProtocolError::Truncated {
                what: "request payload",
                received: 111
            })
        );
    }

    #[test]
    fn answers_a_header_only_request_at_once() {
        let request = clb1_request(16, 16, 3);
        let (_, responses, _) = run(Protocol::Clb1, &[&request]);
        assert_eq!(
            responses,
            [Response::Clb1(Header {
                req_len: 16,
                resp_len: 16,
                seq: 3
            })]
        );
        assert_eq!(responses[0].payload_len(), 0);
    }

    #[test]
    fn answers_clb1_requests_fed_one_byte_at_a_time() {
        let mut stream = example_request();
        stream.extend(clb1_request(20, 100, 8));
        let chunks: Vec<&[u8]> = stream.chunks(1).collect();
        let (session, responses, results) = run(Protocol::Clb1, &chunks);
        assert_eq!(responses.len(), 2);
        assert_eq!(responses[1].payload_len(), 84);
        assert!(results.iter().all(|r| *r == Ok(Flow::Continue)));
        assert_eq!(session.finish(), Ok(()));
    }

    #[test]
    fn closes_connection_on_bad_magic() {
        let mut request = example_request();
        request[0] = b'X';
        let mut stream = example_request();
        stream.extend(&request);
        let (session, responses, results) = run(Protocol::Clb1, &[&stream, &example_request()]);
        assert_eq!(responses.len(), 1);
        let err = results[0].clone().unwrap_err();
        assert_eq!(err.kind(), ErrorKind::BadMagic);
        assert_eq!(
            err.to_string(),
            "bad magic at byte 0: expected \"CLB1\", got [58, 4c, 42, 31]"
        );
        assert_eq!(results[1], Ok(Flow::Close));
        assert_eq!(session.finish(), Ok(()));
    }

    #[test]
    fn closes_connection_on_out_of_range_lengths() {
        let max = ServerConfig::default().max_message;
        let cases = [
            (15, 16, ErrorKind::ReqLenOutOfRange, "req_len 15 at byte 4"),
            (
                max + 1,
                16,
                ErrorKind::ReqLenOutOfRange,
                "req_len 16777217 at byte 4",
            ),
            (
                16,
                15,
                ErrorKind::RespLenOutOfRange,
                "resp_len 15 at byte 8",
            ),
            (
                16,
                max + 1,
                ErrorKind::RespLenOutOfRange,
                "resp_len 16777217 at byte 8",
            ),
        ];
        for (req_len, resp_len, kind, message) in cases {
            let request = clb1_request(16, 16, 0);
            let mut header = [0; 16];
            Header {
                req_len,
                resp_len,
                seq: 0,
            }
            .emit(&mut header);
            let (_, responses, results) = run(Protocol::Clb1, &[&header, &request]);
            assert!(responses.is_empty());
            let err = results[0].clone().unwrap_err();
            assert_eq!(err.kind(), kind);
            assert!(err.to_string().starts_with(message), "{err}");
            assert_eq!(results[1], Ok(Flow::Close));
        }
    }

    #[test]
    fn reports_eof_inside_a_clb1_header() {
        let (session, _, _) = run(Protocol::Clb1, &[&EXAMPLE_HEADER[..5]]);
        let err = session.finish().unwrap_err();
        assert_eq!(
            err,
            ProtocolError::Truncated {
                what: "request header",
                received: 5
            }
        );
        assert_eq!(
            err.to_string(),
            "connection ended 5 bytes into a request header"
        );
    }

    #[test]
    fn serves_get_bytes_with_keep_alive() {
        let (session, responses, results) = run(
            Protocol::Http,
            &[b"GET /bytes/100 HTTP/1.1\r\nHost: x\r\n\r\n"],
        );
        assert_eq!(responses, [http(HttpStatus::Ok, 100, false)]);
        assert_eq!(results, [Ok(Flow::Continue)]);
        assert_eq!(session.finish(), Ok(()));
        assert_eq!(
            head_of(responses[0]),
            "HTTP/1.1 200 OK\r\nContent-Length: 100\r\nConnection: keep-alive\r\n\r\n"
        );
        assert_eq!(responses[0].payload_len(), 100);
    }

    #[test]
    fn answers_post_with_405_and_keeps_the_connection() {
        let (_, responses, results) = run(Protocol::Http, &[b"POST /bytes/1 HTTP/1.1\r\n\r\n"]);
        assert_eq!(responses, [http(HttpStatus::MethodNotAllowed, 0, false)]);
        assert_eq!(results, [Ok(Flow::Continue)]);
        assert_eq!(
            head_of(responses[0]),
            "HTTP/1.1 405 Method Not Allowed\r\nContent-Length: 0\r\nConnection: keep-alive\r\n\r\n"
        );
    }

    #[test]
    fn answers_unknown_paths_with_404() {
        let (_, responses, _) = run(
            Protocol::Http,
            &[b"GET /nope HTTP/1.1\r\n\r\nGET /bytes/abc HTTP/1.1\r\n\r\n"],
        );
        assert_eq!(responses, [http(HttpStatus::NotFound, 0, false); 2]);
    }

    #[test]
    fn closes_after_an_http_1_0_request() {
        let (session, responses, results) = run(
            Protocol::Http,
            &[
                b"GET /bytes/5 HTTP/1.0\r\n\r\nGET /bytes/6 HTTP/1.1\r\n\r\n",
                b"more",
            ],
        );
        assert_eq!(responses, [http(HttpStatus::Ok, 5, true)]);
        assert_eq!(results, [Ok(Flow::Close), Ok(Flow::Close)]);
        assert_eq!(session.finish(), Ok(()));
        assert_eq!(
            head_of(responses[0]),
            "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: close\r\n\r\n"
        );
    }

    #[test]
    fn keeps_an_http_1_0_connection_that_asks_for_keep_alive() {
        let (_, responses, results) = run(
            Protocol::Http,
            &[b"GET /bytes/5 HTTP/1.0\r\nConnection: keep-alive\r\n\r\n"],
        );
        assert_eq!(responses, [http(HttpStatus::Ok, 5, false)]);
        assert_eq!(results, [Ok(Flow::Continue)]);
    }

    #[test]
    fn closes_when_the_request_says_connection_close() {
        let (_, responses, results) = run(
            Protocol::Http,
            &[b"GET /bytes/5 HTTP/1.1\r\nconnection: Close\r\n\r\nGET /bytes/1 HTTP/1.1\r\n\r\n"],
        );
        assert_eq!(responses, [http(HttpStatus::Ok, 5, true)]);
        assert_eq!(results, [Ok(Flow::Close)]);
    }

    #[test]
    fn answers_pipelined_requests_in_order() {
        let stream = b"GET /bytes/1 HTTP/1.1\r\n\r\nGET /x HTTP/1.1\r\n\r\n\
                       DELETE /bytes/3 HTTP/1.1\r\n\r\nGET /bytes/4 HTTP/1.1\r\n\r\n";
        let expected = [
            http(HttpStatus::Ok, 1, false),
            http(HttpStatus::NotFound, 0, false),
            http(HttpStatus::MethodNotAllowed, 0, false),
            http(HttpStatus::Ok, 4, false),
        ];
        let (_, whole, _) = run(Protocol::Http, &[stream]);
        assert_eq!(whole, expected);
        let chunks: Vec<&[u8]> = stream.chunks(1).collect();
        let (session, bytewise, results) = run(Protocol::Http, &chunks);
        assert_eq!(bytewise, expected);
        assert!(results.iter().all(|r| *r == Ok(Flow::Continue)));
        assert_eq!(session.finish(), Ok(()));
    }

    #[test]
    fn skips_blank_lines_between_requests() {
        let (session, responses, _) = run(
            Protocol::Http,
            &[
                b"\r\nGET /bytes/1 HTTP/1.1\r\n\r\n\r\n",
                b"\r\nGET /bytes/2 HTTP/1.1\n\n\r\n",
            ],
        );
        assert_eq!(
            responses,
            [
                http(HttpStatus::Ok, 1, false),
                http(HttpStatus::Ok, 2, false)
            ]
        );
        assert_eq!(session.finish(), Ok(()));
    }

    #[test]
    fn rejects_an_oversize_header_section_with_400() {
        let mut request = b"GET /bytes/1 HTTP/1.1\r\nX-Big: ".to_vec();
        request.resize(MAX_HEADER_SECTION + 100, b'a');
        let (_, responses, results) = run(Protocol::Http, &[&request[..5000], &request[5000..]]);
        assert_eq!(responses, [BAD_REQUEST]);
        let err = results[1].clone().unwrap_err();
        assert_eq!(
            err,
            ProtocolError::Http(RequestError::HeaderTooLarge {
                len: 8193,
                max: 8192
            })
        );
        assert_eq!(err.kind(), ErrorKind::HttpHeaderTooLarge);
        assert_eq!(
            err.to_string(),
            "request header section exceeds 8192 bytes (no end within the first 8193)"
        );
        assert_eq!(
            head_of(responses[0]),
            "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
        );
    }

    #[test]
    fn accepts_a_header_section_of_exactly_8_kib() {
        let mut request = b"GET /bytes/1 HTTP/1.1\r\nX-Big: ".to_vec();
        request.resize(MAX_HEADER_SECTION - 4, b'a');
        request.extend_from_slice(b"\r\n\r\n");
        let (_, responses, _) = run(Protocol::Http, &[&request]);
        assert_eq!(responses, [http(HttpStatus::Ok, 1, false)]);
    }

    #[test]
    fn rejects_a_malformed_request_line_with_400() {
        let (_, responses, results) = run(Protocol::Http, &[b"GET / HTTP/2.0\r\n\r\n"]);
        assert_eq!(responses, [BAD_REQUEST]);
        let err = results[0].clone().unwrap_err();
        assert_eq!(err.kind(), ErrorKind::HttpMalformed);
        assert_eq!(
            err.to_string(),
            "malformed request: invalid HTTP version in request line"
        );
    }

    #[test]
    fn rejects_too_many_headers_with_400() {
        let mut request = b"GET /bytes/1 HTTP/1.1\r\n".to_vec();
        for i in 0..65 {
            request.extend_from_slice(format!("X-{i}: v\r\n").as_bytes());
        }
        request.extend_from_slice(b"\r\n");
        let (_, responses, results) = run(Protocol::Http, &[&request]);
        assert_eq!(responses, [BAD_REQUEST]);
        assert_eq!(
            results[0].clone().unwrap_err().kind(),
            ErrorKind::HttpTooManyHeaders
        );
    }

    #[test]
    fn rejects_request_bodies_with_400() {
        for field in ["Content-Length: 5", "Transfer-Encoding: chunked"] {
            let request = format!("GET /bytes/1 HTTP/1.1\r\n{field}\r\n\r\nhello");
            let (_, responses, results) = run(Protocol::Http, &[request.as_bytes()]);
            assert_eq!(responses, [BAD_REQUEST], "{field}");
            let err = results[0].clone().unwrap_err();
            assert_eq!(err.kind(), ErrorKind::HttpBodyNotAllowed);
            assert!(err.to_string().contains(field.split(':').next().unwrap()));
        }
    }

    #[test]
    fn answers_earlier_pipelined_requests_before_a_bad_one() {
        let (_, responses, results) = run(
            Protocol::Http,
            &[b"GET /bytes/1 HTTP/1.1\r\n\r\nBAD\r\n\r\nGET /bytes/2 HTTP/1.1\r\n\r\n"],
        );
        assert_eq!(responses, [http(HttpStatus::Ok, 1, false), BAD_REQUEST]);
        assert!(results[0].is_err());
    }

    #[test]
    fn reports_eof_inside_an_http_head() {
        let (session, _, _) = run(Protocol::Http, &[b"GET /bytes/1 HTTP/1.1\r\n"]);
        assert_eq!(
            session.finish(),
            Err(ProtocolError::Truncated {
                what: "request header",
                received: 23
            })
        );
    }

    #[test]
    fn encodes_the_longest_http_head_within_the_buffer() {
        let head = head_of(http(HttpStatus::MethodNotAllowed, u64::MAX, false));
        assert_eq!(
            head,
            "HTTP/1.1 405 Method Not Allowed\r\nContent-Length: 18446744073709551615\r\n\
             Connection: keep-alive\r\n\r\n"
        );
        assert!(head.len() <= 97);
    }

    #[test]
    fn names_status_codes_and_reasons() {
        let statuses = [
            (HttpStatus::Ok, 200, "OK"),
            (HttpStatus::BadRequest, 400, "Bad Request"),
            (HttpStatus::NotFound, 404, "Not Found"),
            (HttpStatus::MethodNotAllowed, 405, "Method Not Allowed"),
        ];
        for (status, code, reason) in statuses {
            assert_eq!((status.code(), status.reason()), (code, reason));
        }
    }

    #[test]
    fn reports_its_protocol() {
        for protocol in Protocol::ALL {
            assert_eq!(
                ServerSession::new(protocol, ServerConfig::default()).protocol(),
                protocol
            );
        }
        assert_eq!(ServerConfig::default().max_message, 16 * 1024 * 1024);
    }
}
