//! The client side of one connection, for the load generator: request encoders
//! ([`encode_clb1_request_header`], [`encode_http_get`]) and [`ClientSession`],
//! which turns response bytes in any chunking into one [`ResponseDone`] per
//! complete response. Payloads are counted and skipped, never buffered, with the
//! same CLB1 framer and HTTP head reader the server uses.

use crate::clb1::{self, Framer, Header};
use crate::head::HeadReader;
use crate::http1::{self, ConnectionOptions, MAX_HEADERS, MAX_HEADER_SECTION};
use crate::payload::Discard;
use crate::{Protocol, ProtocolError};

/// One complete response.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ResponseDone {
    /// CLB1: the echoed `seq`. HTTP: `None`.
    pub seq: Option<u32>,
    /// HTTP: the status code. CLB1: `None`.
    pub status: Option<u16>,
    /// Bytes of the response on the wire, head and payload.
    pub total_bytes: u64,
}

/// Client side of one connection: response bytes in, [`ResponseDone`]s out.
#[derive(Debug)]
pub struct ClientSession {
    machine: Machine,
    /// A feed returned an error: later input is ignored.
    failed: bool,
}

#[derive(Debug)]
enum Machine {
    Clb1(Clb1Client),
    Http(HttpClient),
}

impl ClientSession {
    /// A session at the start of a connection. `max_message` bounds CLB1
    /// `resp_len`; HTTP bodies have no limit since they are only counted.
    pub fn new(protocol: Protocol, max_message: u32) -> Self {
        let machine = match protocol {
            Protocol::Clb1 => Machine::Clb1(Clb1Client {
                framer: Framer::new(),
                response: None,
                max_message,
            }),
            Protocol::Http => Machine::Http(HttpClient {
                head: HeadReader::default(),
                body: None,
                peer_closes: false,
            }),
        };
        ClientSession {
            machine,
            failed: false,
        }
    }

    /// Parses responses in any chunking and calls `done` once per complete
    /// response, in order. CLB1: checks the magic and `resp_len` in
    /// `16..=max_message`. HTTP: checks the status line, requires
    /// `Content-Length` (no chunked bodies; none for 204 and 304), limits the
    /// head to 8 KiB, and rejects bytes after a response that closes the
    /// connection. After an error, later feeds ignore their input and return `Ok(())`.
    pub fn feed(
        &mut self,
        input: &[u8],
        done: &mut impl FnMut(ResponseDone),
    ) -> Result<(), ProtocolError> {
        if self.failed {
            return Ok(());
        }
        let result = match &mut self.machine {
            Machine::Clb1(machine) => machine.feed(input, done),
            Machine::Http(machine) => machine.feed(input, done),
        };
        self.failed = result.is_err();
        result
    }

    /// The server sent EOF: `Ok(())` between responses (or after an error was
    /// already returned), `Err(ProtocolError::Truncated { .. })` mid-response.
    pub fn finish(&self) -> Result<(), ProtocolError> {
        if self.failed {
            return Ok(());
        }
        let truncated = |what, received| Err(ProtocolError::Truncated { what, received });
        match &self.machine {
            Machine::Clb1(machine) => match machine.framer.position() {
                clb1::Position::Boundary => Ok(()),
                clb1::Position::Header(received) => truncated("response header", received),
                clb1::Position::Payload(received) => truncated("response payload", received),
            },
            Machine::Http(HttpClient {
                body: Some(body), ..
            }) => truncated("response payload", body.payload.received()),
            Machine::Http(machine) if machine.head.at_boundary() => Ok(()),
            Machine::Http(machine) => truncated("response header", machine.head.received()),
        }
    }

    /// HTTP: a response head said the server closes the connection after that
    /// response (`Connection: close`, or HTTP/1.0 without keep-alive). CLB1: never.
    pub fn peer_closes(&self) -> bool {
        match &self.machine {
            Machine::Clb1(_) => false,
            Machine::Http(machine) => machine.peer_closes,
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

/// Writes a CLB1 request header; the same bytes as [`Header::emit`].
pub fn encode_clb1_request_header(req_len: u32, resp_len: u32, seq: u32, dst: &mut [u8; 16]) {
    Header {
        req_len,
        resp_len,
        seq,
    }
    .emit(dst);
}

/// Appends `GET {path} HTTP/1.1\r\nHost: connlab\r\n`, then
/// `Connection: close\r\n` unless `keep_alive`, then `\r\n` to `dst`, which
/// does not allocate once `dst` has room. `path` must be a valid request target.
pub fn encode_http_get(path: &str, keep_alive: bool, dst: &mut Vec<u8>) {
    dst.extend_from_slice(b"GET ");
    dst.extend_from_slice(path.as_bytes());
    dst.extend_from_slice(b" HTTP/1.1\r\nHost: connlab\r\n");
    if !keep_alive {
        dst.extend_from_slice(b"Connection: close\r\n");
    }
    dst.extend_from_slice(b"\r\n");
}

/// CLB1 responses: a 16-byte header accumulator and a payload countdown.
#[derive(Debug)]
struct Clb1Client {
    framer: Framer,
    /// The checked header of the response whose payload is arriving.
    response: Option<Header>,
    max_message: u32,
}

impl Clb1Client {
    fn feed(
        &mut self,
        mut input: &[u8],
        done: &mut impl FnMut(ResponseDone),
    ) -> Result<(), ProtocolError> {
        while let Some(frame) = self.framer.next(&mut input) {
            match frame {
                clb1::Frame::Header(bytes) => {
                    let header = Header::parse_response(&bytes, self.max_message)
                        .map_err(|e| bad_response(e.to_string()))?;
                    self.framer.expect_payload(header.resp_payload_len());
                    self.response = Some(header);
                }
                clb1::Frame::End => {
                    if let Some(header) = self.response.take() {
                        done(ResponseDone {
                            seq: Some(header.seq),
                            status: None,
                            total_bytes: u64::from(header.resp_len),
                        });
                    }
                }
            }
        }
        Ok(())
    }
}

/// HTTP responses: heads found by a [`HeadReader`], bodies counted.
#[derive(Debug)]
struct HttpClient {
    head: HeadReader,
    body: Option<Body>,
    peer_closes: bool,
}

/// The body of the response in progress.
#[derive(Debug)]
struct Body {
    payload: Discard,
    head_len: u64,
    status: u16,
}

/// What the client needs from a response head.
struct ResponseHead {
    status: u16,
    content_length: u64,
    closes: bool,
}

impl HttpClient {
    fn feed(
        &mut self,
        mut input: &[u8],
        done: &mut impl FnMut(ResponseDone),
    ) -> Result<(), ProtocolError> {
        loop {
            if let Some(body) = &mut self.body {
                if !body.payload.take(&mut input) {
                    return Ok(());
                }
                done(ResponseDone {
                    seq: None,
                    status: Some(body.status),
                    total_bytes: body.head_len + body.payload.received(),
                });
                self.body = None;
            }
            if input.is_empty() {
                return Ok(());
            }
            if self.peer_closes {
                return Err(bad_response(
                    "data after a response that closes the connection",
                ));
            }
            let parsed = self
                .head
                .read(&mut input, |head| (head.len() as u64, parse_head(head)))
                .map_err(|too_large| {
                    bad_response(format!(
                        "response head exceeds {MAX_HEADER_SECTION} bytes (no end within the first {})",
                        too_large.len
                    ))
                })?;
            let Some((head_len, head)) = parsed else {
                return Ok(());
            };
            let head = head?;
            self.peer_closes = head.closes;
            self.body = Some(Body {
                payload: Discard::new(head.content_length),
                head_len,
                status: head.status,
            });
        }
    }
}

/// Checks one complete response head (RFC 9112 §6.3 for the body length).
fn parse_head(head: &[u8]) -> Result<ResponseHead, ProtocolError> {
    let mut fields = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut response = httparse::Response::new(&mut fields);
    match response.parse(head) {
        Ok(httparse::Status::Complete(len)) if len == head.len() => {}
        Ok(_) => return Err(bad_response("head ends inside the status line")),
        Err(httparse::Error::TooManyHeaders) => {
            return Err(bad_response(format!(
                "more than {MAX_HEADERS} header fields"
            )))
        }
        Err(e) => return Err(bad_response(http1::describe(e, "status line"))),
    }
    let (Some(version), Some(status)) = (response.version, response.code) else {
        return Err(bad_response("incomplete status line"));
    };
    let mut connection = ConnectionOptions::default();
    let mut content_length = None;
    for field in response.headers.iter() {
        if field.name.eq_ignore_ascii_case("content-length") {
            let value = field.value.trim_ascii();
            let Some(n) = http1::parse_decimal(value) else {
                return Err(bad_response(format!(
                    "Content-Length {:?} is not a number",
                    String::from_utf8_lossy(value)
                )));
            };
            if content_length.is_some_and(|earlier| earlier != n) {
                return Err(bad_response("conflicting Content-Length fields"));
            }
            content_length = Some(n);
        } else if field.name.eq_ignore_ascii_case("transfer-encoding") {
            return Err(bad_response(format!(
                "Transfer-Encoding {:?} is not supported, only Content-Length bodies",
                String::from_utf8_lossy(field.value)
            )));
        } else {
            connection.note(field);
        }
    }
    let content_length = match status {
        100..=199 => {
            return Err(bad_response(format!(
                "interim status {status} is not supported"
            )))
        }
        204 | 304 => 0,
        _ => content_length.ok_or_else(|| {
            bad_response(format!("status {status} response has no Content-Length"))
        })?,
    };
    Ok(ResponseHead {
        status,
        content_length,
        closes: connection.closes(version),
    })
}

fn bad_response(reason: impl Into<String>) -> ProtocolError {
    ProtocolError::BadResponse {
        reason: reason.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ErrorKind;

    const MAX: u32 = 1 << 20;

    fn clb1_response(resp_len: u32, seq: u32) -> Vec<u8> {
        let mut response = vec![0x5a; resp_len as usize];
        let mut header = [0; 16];
        encode_clb1_request_header(40, resp_len, seq, &mut header);
        response[..16].copy_from_slice(&header);
        response
    }

    fn run(
        protocol: Protocol,
        chunks: &[&[u8]],
    ) -> (ClientSession, Vec<ResponseDone>, Result<(), ProtocolError>) {
        let mut session = ClientSession::new(protocol, MAX);
        let mut responses = Vec::new();
        let mut result = Ok(());
        for chunk in chunks {
            let r = session.feed(chunk, &mut |d| responses.push(d));
            if result.is_ok() {
                result = r;
            }
        }
        (session, responses, result)
    }

    fn http_done(status: u16, total_bytes: u64) -> ResponseDone {
        ResponseDone {
            seq: None,
            status: Some(status),
            total_bytes,
        }
    }

    #[test]
    fn encodes_the_protocol_example_request_header() {
        let mut header = [0; 16];
        encode_clb1_request_header(128, 10240, 7, &mut header);
        assert_eq!(
            header,
            [
                0x43, 0x4c, 0x42, 0x31, 0x00, 0x00, 0x00, 0x80, 0x00, 0x00, 0x28, 0x00, 0x00, 0x00,
                0x00, 0x07
            ]
        );
    }

    #[test]
    fn encodes_http_gets() {
        let mut dst = Vec::new();
        encode_http_get("/bytes/10", true, &mut dst);
        encode_http_get("/a", false, &mut dst);
        assert_eq!(
            dst,
            b"GET /bytes/10 HTTP/1.1\r\nHost: connlab\r\n\r\n\
              GET /a HTTP/1.1\r\nHost: connlab\r\nConnection: close\r\n\r\n"
        );
    }

    #[test]
    fn reports_clb1_responses_with_seq_and_size() {
        let mut stream = clb1_response(100, 1);
        stream.extend(clb1_response(16, 2));
        let chunks: Vec<&[u8]> = stream.chunks(7).collect();
        let (session, responses, result) = run(Protocol::Clb1, &chunks);
        assert_eq!(result, Ok(()));
        assert_eq!(
            responses,
            [
                ResponseDone {
                    seq: Some(1),
                    status: None,
                    total_bytes: 100
                },
                ResponseDone {
                    seq: Some(2),
                    status: None,
                    total_bytes: 16
                }
            ]
        );
        assert_eq!(session.finish(), Ok(()));
    }

    #[test]
    fn rejects_clb1_responses_with_bad_magic_or_length() {
        let mut response = clb1_response(100, 1);
        response[3] = b'2';
        let (_, _, result) = run(Protocol::Clb1, &[&response]);
        let err = result.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::BadResponse);
        assert!(err
            .to_string()
            .starts_with("bad response: bad magic at byte 0"));
        let mut header = [0; 16];
        encode_clb1_request_header(16, MAX + 1, 1, &mut header);
        let (session, _, result) = run(Protocol::Clb1, &[&header]);
        assert_eq!(
            result.unwrap_err().to_string(),
            "bad response: resp_len 1048577 at byte 8 is outside 16..=1048576"
        );
        assert_eq!(session.finish(), Ok(()));
    }

    #[test]
    fn reports_eof_inside_a_clb1_response() {
        let response = clb1_response(100, 1);
        let (session, _, _) = run(Protocol::Clb1, &[&response[..10]]);
        assert_eq!(
            session.finish(),
            Err(ProtocolError::Truncated {
                what: "response header",
                received: 10
            })
        );
        let (session, _, _) = run(Protocol::Clb1, &[&response[..30]]);
        assert_eq!(
            session.finish(),
            Err(ProtocolError::Truncated {
                what: "response payload",
                received: 14
            })
        );
    }

    #[test]
    fn reports_http_responses_with_status_and_size() {
        let head = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n";
        let mut stream = head.to_vec();
        stream.extend_from_slice(b"hello");
        stream.extend_from_slice(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n");
        for chunk_len in [1, 3, stream.len()] {
            let chunks: Vec<&[u8]> = stream.chunks(chunk_len).collect();
            let (session, responses, result) = run(Protocol::Http, &chunks);
            assert_eq!(result, Ok(()));
            assert_eq!(
                responses,
                [http_done(200, head.len() as u64 + 5), http_done(404, 45)]
            );
            assert_eq!(session.finish(), Ok(()));
            assert!(!session.peer_closes());
        }
    }

    #[test]
    fn notes_connection_close() {
        let stream = b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nConnection: close\r\n\r\nx";
        let (session, responses, result) = run(Protocol::Http, &[stream]);
        assert_eq!(result, Ok(()));
        assert_eq!(responses.len(), 1);
        assert!(session.peer_closes());
        let mut more = stream.to_vec();
        more.extend_from_slice(b"HTTP/1.1 200 OK\r\n");
        let (_, responses, result) = run(Protocol::Http, &[&more]);
        assert_eq!(responses.len(), 1);
        assert_eq!(
            result.unwrap_err().to_string(),
            "bad response: data after a response that closes the connection"
        );
    }

    #[test]
    fn allows_no_body_for_204_and_304() {
        let stream = b"HTTP/1.1 204 No Content\r\n\r\nHTTP/1.1 304 Not Modified\r\nContent-Length: 9\r\n\r\n";
        let (_, responses, result) = run(Protocol::Http, &[stream]);
        assert_eq!(result, Ok(()));
        assert_eq!(responses, [http_done(204, 27), http_done(304, 48)]);
    }

    #[test]
    fn rejects_http_responses_it_cannot_frame() {
        let cases: [(&[u8], &str); 6] = [
            (
                b"HTTP/1.1 200 OK\r\n\r\n",
                "status 200 response has no Content-Length",
            ),
            (
                b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n",
                "Transfer-Encoding \"chunked\" is not supported, only Content-Length bodies",
            ),
            (
                b"HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n",
                "Content-Length \"x\" is not a number",
            ),
            (
                b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
                "conflicting Content-Length fields",
            ),
            (
                b"HTTP/1.1 2x0 OK\r\n\r\n",
                "invalid response status in status line",
            ),
            (
                b"HTTP/1.1 100 Continue\r\n\r\n",
                "interim status 100 is not supported",
            ),
        ];
        for (stream, reason) in cases {
            let (_, responses, result) = run(Protocol::Http, &[stream]);
            assert!(responses.is_empty());
            assert_eq!(result, Err(bad_response(reason)));
        }
    }

    #[test]
    fn rejects_an_http_head_over_8_kib() {
        let mut stream = b"HTTP/1.1 200 OK\r\nX: ".to_vec();
        stream.resize(MAX_HEADER_SECTION + 1, b'a');
        let (_, _, result) = run(Protocol::Http, &[&stream]);
        assert_eq!(
            result.unwrap_err().to_string(),
            "bad response: response head exceeds 8192 bytes (no end within the first 8193)"
        );
    }

    #[test]
    fn reports_eof_inside_an_http_response() {
        let stream = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhel";
        let (session, _, _) = run(Protocol::Http, &[stream]);
        assert_eq!(
            session.finish(),
            Err(ProtocolError::Truncated {
                what: "response payload",
                received: 3
            })
        );
        let (session, _, _) = run(Protocol::Http, &[&stream[..10]]);
        assert_eq!(
            session.finish(),
            Err(ProtocolError::Truncated {
                what: "response header",
                received: 10
            })
        );
    }

    #[test]
    fn ignores_input_after_an_error() {
        let mut session = ClientSession::new(Protocol::Clb1, MAX);
        let mut count = 0;
        assert!(session
            .feed(b"XXXXXXXXXXXXXXXX", &mut |_| count += 1)
            .is_err());
        assert_eq!(
            session.feed(&clb1_response(16, 1), &mut |_| count += 1),
            Ok(())
        );
        assert_eq!(count, 0);
        assert_eq!(session.protocol(), Protocol::Clb1);
    }
}
