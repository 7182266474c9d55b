use super::*;
use crate::ErrorKind;

/// `shared/protocol.md` §1: a 128-byte request for a 10 KiB response, seq 7.
const EXAMPLE_HEADER: [u8; 16] = [
    0x43, 0x4c, 0x42, 0x31, 0x00, 0x00, 0x00, 0x80, 0x00, 0x00, 0x28, 0x00, 0x00, 0x00, 0x00, 0x07,
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
fn rejects_garbage_without_a_blank_line_at_once() {
    // Issue 29: the head never ends, so only the request line can tell.
    let (_, responses, results) = run(Protocol::Http, &[b"GARB", b"AGE\r\n"]);
    assert_eq!(responses, [BAD_REQUEST]);
    assert!(results[0].is_ok());
    let err = results[1].clone().unwrap_err();
    assert_eq!(err.kind(), ErrorKind::HttpMalformed);
    assert!(err.to_string().contains("request line"), "{err}");
    // A valid request line whose head is still coming waits for it.
    let (_, responses, results) = run(
        Protocol::Http,
        &[b"GET /bytes/1 HTTP/1.1\r\n", b"Host: a\r\n", b"\r\n"],
    );
    assert!(results.iter().all(Result::is_ok), "{results:?}");
    assert_eq!(responses.len(), 1);
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
