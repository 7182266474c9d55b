//! Property tests of both sessions, the guarantee every non-blocking engine
//! relies on: a byte stream split at arbitrary points gives the same responses,
//! the same result and the same EOF verdict as the stream fed whole; no input
//! panics; and `finish` reports truncation exactly when a stream stops
//! mid-message. Streams are mostly valid messages of random sizes, sometimes
//! with one corrupted byte, plus fully random bytes.

use connlab_proto::{
    encode_clb1_request_header, ClientSession, Flow, Header, HttpStatus, Protocol, ProtocolError,
    Response, ResponseDone, ServerConfig, ServerSession,
};
use proptest::collection::vec;
use proptest::option;
use proptest::prelude::*;
use proptest::sample::Index;

/// A small `max_message`, so that generated lengths are sometimes out of range.
const MAX: u32 = 1024;
const CONFIG: ServerConfig = ServerConfig {
    max_message: MAX,
    files: None,
};

// ---- generators ----

/// A CLB1 request; `max_resp` above [`MAX`] makes some out of range.
fn clb1_request(max_resp: u32) -> impl Strategy<Value = Vec<u8>> {
    (16u32..=300, 16..=max_resp, any::<u32>(), any::<u8>()).prop_map(
        |(req_len, resp_len, seq, fill)| {
            let mut request = vec![fill; req_len as usize];
            let mut header = [0; 16];
            encode_clb1_request_header(req_len, resp_len, seq, &mut header);
            request[..16].copy_from_slice(&header);
            request
        },
    )
}

/// An HTTP request; `hostile` adds fields and versions that end the connection.
fn http_request(hostile: bool) -> impl Strategy<Value = Vec<u8>> {
    let method = prop_oneof![6 => Just("GET"), 1 => Just("POST"), 1 => Just("HEAD")];
    let path = prop_oneof![
        4 => (0u32..1100).prop_map(|n| format!("/bytes/{n}")),
        1 => (0u32..100).prop_map(|n| format!("/bytes/{n}?x=/y")),
        1 => Just("/nope".to_owned()),
        1 => Just("/bytes/abc".to_owned()),
    ];
    let version = if hostile {
        prop_oneof![5 => Just("HTTP/1.1"), 1 => Just("HTTP/1.0")].boxed()
    } else {
        Just("HTTP/1.1").boxed()
    };
    let field = if hostile {
        prop_oneof![
            20 => Just("Host: connlab".to_owned()),
            3 => (0usize..1000).prop_map(|n| format!("X-Pad: {}", "a".repeat(n))),
            1 => (8100usize..8200).prop_map(|n| format!("X-Pad: {}", "a".repeat(n))),
            1 => Just("Connection: close".to_owned()),
            1 => Just("Connection: keep-alive".to_owned()),
            1 => Just("Content-Length: 0".to_owned()),
            1 => Just("Content-Length: 5".to_owned()),
            1 => Just("Transfer-Encoding: chunked".to_owned()),
        ]
        .boxed()
    } else {
        prop_oneof![
            3 => Just("Host: connlab".to_owned()),
            1 => (0usize..200).prop_map(|n| format!("X-Pad: {}", "a".repeat(n))),
            1 => Just("Content-Length: 0".to_owned()),
        ]
        .boxed()
    };
    let extra_fields = if hostile {
        option::weighted(0.05, 55usize..70).boxed()
    } else {
        Just(None).boxed()
    };
    let eol = prop_oneof![4 => Just("\r\n"), 1 => Just("\n")];
    (method, path, version, vec(field, 0..5), extra_fields, eol).prop_map(
        |(method, path, version, fields, extra_fields, eol)| {
            let mut request = format!("{method} {path} {version}{eol}");
            for field in fields {
                request.push_str(&field);
                request.push_str(eol);
            }
            for i in 0..extra_fields.unwrap_or(0) {
                request.push_str(&format!("X-{i}: y{eol}"));
            }
            request.push_str(eol);
            request.into_bytes()
        },
    )
}

/// A response as the server writes it: head, then payload.
fn encoded(response: Response, fill: u8) -> Vec<u8> {
    let mut head = [0; Response::MAX_HEADER_LEN];
    let len = response.encode_header(&mut head);
    let mut bytes = head[..len].to_vec();
    bytes.resize(len + response.payload_len() as usize, fill);
    bytes
}

fn clb1_response() -> impl Strategy<Value = Vec<u8>> {
    (16u32..=1100, any::<u32>(), any::<u8>()).prop_map(|(resp_len, seq, fill)| {
        let header = Header {
            req_len: 16,
            resp_len,
            seq,
        };
        encoded(Response::Clb1(header), fill)
    })
}

fn http_response() -> impl Strategy<Value = Vec<u8>> {
    let status = prop_oneof![
        Just(HttpStatus::Ok),
        Just(HttpStatus::BadRequest),
        Just(HttpStatus::NotFound),
        Just(HttpStatus::MethodNotAllowed),
    ];
    (
        status,
        0u64..500,
        proptest::bool::weighted(0.1),
        any::<u8>(),
    )
        .prop_map(|(status, content_length, close, fill)| {
            let response = Response::Http {
                status,
                content_length,
                close,
            };
            encoded(response, fill)
        })
}

/// Mostly-valid streams (messages, sometimes with one byte flipped), plus
/// random bytes with and without a plausible start.
fn stream_of(
    message: impl Strategy<Value = Vec<u8>>,
    start: &'static [u8],
) -> impl Strategy<Value = Vec<u8>> {
    let corruption = option::weighted(0.3, (any::<Index>(), 1u8..=255));
    prop_oneof![
        6 => (vec(message, 0..8), corruption).prop_map(|(messages, corruption)| {
            let mut stream = messages.concat();
            if let (Some((at, flip)), false) = (corruption, stream.is_empty()) {
                let at = at.index(stream.len());
                stream[at] ^= flip;
            }
            stream
        }),
        1 => vec(any::<u8>(), 0..400),
        1 => vec(any::<u8>(), 0..400).prop_map(move |tail| [start, &tail].concat()),
    ]
}

fn cuts() -> impl Strategy<Value = Vec<Index>> {
    vec(any::<Index>(), 0..12)
}

/// `stream` split at the given points (duplicates give empty chunks).
fn split<'a>(stream: &'a [u8], cuts: &[Index]) -> Vec<&'a [u8]> {
    let mut points: Vec<usize> = cuts.iter().map(|c| c.index(stream.len() + 1)).collect();
    points.sort_unstable();
    let mut chunks = Vec::with_capacity(points.len() + 1);
    let mut start = 0;
    for point in points {
        chunks.push(&stream[start..point]);
        start = point;
    }
    chunks.push(&stream[start..]);
    chunks
}

// ---- drivers ----

#[derive(Debug, PartialEq)]
struct Served {
    responses: Vec<Response>,
    /// The first result that was not `Ok(Flow::Continue)`, if any.
    result: Result<Flow, ProtocolError>,
    finish: Result<(), ProtocolError>,
}

fn serve(protocol: Protocol, chunks: &[&[u8]]) -> Served {
    let mut session = ServerSession::new(protocol, CONFIG);
    let mut responses = Vec::new();
    let mut result = Ok(Flow::Continue);
    for chunk in chunks {
        let before = responses.len();
        let fed = session.feed(chunk, &mut |r| responses.push(r));
        if result == Ok(Flow::Continue) {
            result = fed;
        } else {
            assert_eq!(fed, Ok(Flow::Close), "a closed session takes no input");
            assert_eq!(responses.len(), before, "a closed session answers nothing");
        }
    }
    Served {
        responses,
        result,
        finish: session.finish(),
    }
}

#[derive(Debug, PartialEq)]
struct Read {
    done: Vec<ResponseDone>,
    /// The first error, if any.
    result: Result<(), ProtocolError>,
    finish: Result<(), ProtocolError>,
    peer_closes: bool,
}

fn read(protocol: Protocol, chunks: &[&[u8]]) -> Read {
    let mut session = ClientSession::new(protocol, MAX);
    let mut done = Vec::new();
    let mut result = Ok(());
    for chunk in chunks {
        let fed = session.feed(chunk, &mut |d| done.push(d));
        if result.is_ok() {
            result = fed;
        }
    }
    Read {
        done,
        result,
        finish: session.finish(),
        peer_closes: session.peer_closes(),
    }
}

/// Offsets at which a stream of `messages` is between messages.
fn boundaries(messages: &[Vec<u8>]) -> Vec<usize> {
    messages
        .iter()
        .scan(0, |end, message| {
            *end += message.len();
            Some(*end)
        })
        .chain([0])
        .collect()
}

fn is_truncated<T>(result: &Result<T, ProtocolError>) -> bool {
    matches!(result, Err(ProtocolError::Truncated { .. }))
}

// ---- properties ----

proptest! {
    #[test]
    fn clb1_server_answers_the_same_however_input_is_split(
        stream in stream_of(clb1_request(1100), b"CLB1"),
        cuts in cuts(),
    ) {
        prop_assert_eq!(serve(Protocol::Clb1, &split(&stream, &cuts)), serve(Protocol::Clb1, &[&stream]));
    }

    #[test]
    fn http_server_answers_the_same_however_input_is_split(
        stream in stream_of(http_request(true), b"GET /bytes/"),
        cuts in cuts(),
    ) {
        prop_assert_eq!(serve(Protocol::Http, &split(&stream, &cuts)), serve(Protocol::Http, &[&stream]));
    }

    #[test]
    fn clb1_client_reads_the_same_however_input_is_split(
        stream in stream_of(clb1_response(), b"CLB1"),
        cuts in cuts(),
    ) {
        prop_assert_eq!(read(Protocol::Clb1, &split(&stream, &cuts)), read(Protocol::Clb1, &[&stream]));
    }

    #[test]
    fn http_client_reads_the_same_however_input_is_split(
        stream in stream_of(http_response(), b"HTTP/1.1 200 OK\r\n"),
        cuts in cuts(),
    ) {
        prop_assert_eq!(read(Protocol::Http, &split(&stream, &cuts)), read(Protocol::Http, &[&stream]));
    }

    #[test]
    fn no_input_panics_either_side(bytes in vec(any::<u8>(), 0..2000), cuts in cuts()) {
        let chunks = split(&bytes, &cuts);
        for protocol in Protocol::ALL {
            serve(protocol, &chunks);
            read(protocol, &chunks);
        }
    }

    #[test]
    fn clb1_server_reports_truncation_exactly_mid_request(
        requests in vec(clb1_request(MAX), 0..6),
        cut in any::<Index>(),
    ) {
        let stream = requests.concat();
        let cut = cut.index(stream.len() + 1);
        let served = serve(Protocol::Clb1, &[&stream[..cut]]);
        prop_assert_eq!(served.result, Ok(Flow::Continue));
        prop_assert_eq!(is_truncated(&served.finish), !boundaries(&requests).contains(&cut));
        prop_assert_eq!(served.finish.is_ok(), boundaries(&requests).contains(&cut));
    }

    #[test]
    fn http_server_reports_truncation_exactly_mid_request(
        requests in vec(http_request(false), 0..6),
        cut in any::<Index>(),
    ) {
        let stream = requests.concat();
        let cut = cut.index(stream.len() + 1);
        let served = serve(Protocol::Http, &[&stream[..cut]]);
        prop_assert_eq!(served.result, Ok(Flow::Continue));
        prop_assert_eq!(is_truncated(&served.finish), !boundaries(&requests).contains(&cut));
        prop_assert_eq!(served.finish.is_ok(), boundaries(&requests).contains(&cut));
    }

    #[test]
    fn clients_report_truncation_exactly_mid_response(
        clb1 in vec(clb1_response(), 0..6),
        http in vec(http_response(), 0..6),
        cut in any::<Index>(),
    ) {
        // CLB1 responses within range; HTTP responses keep the connection open.
        let clb1: Vec<Vec<u8>> = clb1.into_iter().filter(|r| r.len() <= MAX as usize).collect();
        let http: Vec<Vec<u8>> = http
            .into_iter()
            .filter(|r| !String::from_utf8_lossy(r).contains("Connection: close"))
            .collect();
        for (protocol, responses) in [(Protocol::Clb1, clb1), (Protocol::Http, http)] {
            let stream = responses.concat();
            let cut = cut.index(stream.len() + 1);
            let outcome = read(protocol, &[&stream[..cut]]);
            prop_assert_eq!(&outcome.result, &Ok(()));
            prop_assert_eq!(is_truncated(&outcome.finish), !boundaries(&responses).contains(&cut));
            prop_assert_eq!(outcome.finish.is_ok(), boundaries(&responses).contains(&cut));
        }
    }

    #[test]
    fn client_reads_what_the_server_writes(
        clb1 in vec(clb1_request(MAX), 0..6),
        http in vec(http_request(true), 0..6),
        server_cuts in cuts(),
        client_cuts in cuts(),
    ) {
        for (protocol, requests) in [(Protocol::Clb1, clb1), (Protocol::Http, http)] {
            let requests = requests.concat();
            let served = serve(protocol, &split(&requests, &server_cuts));
            let wire: Vec<u8> = served.responses.iter().flat_map(|&r| encoded(r, 0)).collect();
            let outcome = read(protocol, &split(&wire, &client_cuts));
            prop_assert_eq!(&outcome.result, &Ok(()));
            prop_assert_eq!(&outcome.finish, &Ok(()));
            prop_assert_eq!(outcome.done.len(), served.responses.len());
            for (done, response) in outcome.done.iter().zip(&served.responses) {
                let mut head = [0; Response::MAX_HEADER_LEN];
                let total = response.encode_header(&mut head) as u64 + response.payload_len();
                prop_assert_eq!(done.total_bytes, total);
                match *response {
                    Response::Clb1(header) => prop_assert_eq!(done.seq, Some(header.seq)),
                    Response::Http { status, .. } => prop_assert_eq!(done.status, Some(status.code())),
                }
            }
            let last_closes = served.responses.last().is_some_and(Response::closes_connection);
            prop_assert_eq!(outcome.peer_closes, last_closes);
        }
    }
}
