//! The HTTP/1.1 mode of `shared/protocol.md` §2: how the server answers one
//! request head, the limits it enforces, and the header-field rules
//! (`Connection` tokens, `Content-Length` digits) that the client's response
//! parser shares. Heads are parsed with httparse into a fixed array of
//! [`MAX_HEADERS`] fields, so parsing never allocates.

use crate::server::{HttpStatus, Response};
use std::collections::HashMap;

/// Largest request or response head accepted, in bytes, counting the
/// request or status line and the terminating blank line (8 KiB).
pub const MAX_HEADER_SECTION: usize = 8192;

/// Most header fields accepted in one head.
pub const MAX_HEADERS: usize = 64;

/// A request the server answers with `400 Bad Request` and a close.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RequestError {
    /// No end of the header section within [`MAX_HEADER_SECTION`] bytes.
    #[error("request header section exceeds {max} bytes (no end within the first {len})")]
    HeaderTooLarge {
        /// Bytes received without finding the end of the header section.
        len: usize,
        /// The limit, [`MAX_HEADER_SECTION`].
        max: usize,
    },
    /// The request line or a header field is not valid HTTP/1.x.
    #[error("malformed request: {reason}")]
    Malformed {
        /// What is wrong, e.g. "invalid token in request line".
        reason: String,
    },
    /// More than [`MAX_HEADERS`] header fields.
    #[error("request has more than {max} header fields")]
    TooManyHeaders {
        /// The limit, [`MAX_HEADERS`].
        max: usize,
    },
    /// A `Content-Length` other than 0, or any `Transfer-Encoding`: requests
    /// in connlab's HTTP mode have no body.
    #[error("request has a body, which is not allowed: header field {field} is {value:?}")]
    BodyNotAllowed {
        /// The header field that announces a body.
        field: String,
        /// Its value as sent (non-UTF-8 bytes replaced).
        value: String,
    },
}

/// Prefix of the path that always has content: `/bytes/N`.
const BYTES_PATH: &str = "/bytes/";

/// Paths served besides `/bytes/N`, each with the size of its body: a web
/// file set's manifest (`connlab serve --manifest`), handed over as a table
/// so that the protocol code reads no file.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FileSizes {
    sizes: HashMap<String, u64>,
}

impl FileSizes {
    /// A table of `(path, size in bytes)`; each path is as requested, with
    /// its leading `/` (a later duplicate wins).
    pub fn new(files: impl IntoIterator<Item = (String, u64)>) -> Self {
        FileSizes {
            sizes: files.into_iter().collect(),
        }
    }

    /// The body size of `path` (query string excluded), if it is listed.
    pub fn size(&self, path: &str) -> Option<u64> {
        self.sizes.get(path).copied()
    }

    /// How many paths are listed.
    pub fn len(&self) -> usize {
        self.sizes.len()
    }

    /// True when no path is listed.
    pub fn is_empty(&self) -> bool {
        self.sizes.is_empty()
    }
}

/// Answers one complete request head (which ends with its blank line) as
/// `shared/protocol.md` §2 says: `GET /bytes/N` is 200 with N bytes, a path
/// listed in `files` 200 with its size, any other path 404, any other method
/// 405, each with the connection's keep-alive rule.
pub(crate) fn answer(
    head: &[u8],
    max_message: u32,
    files: Option<&FileSizes>,
) -> Result<Response, RequestError> {
    let mut fields = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut request = httparse::Request::new(&mut fields);
    match request.parse(head) {
        Ok(httparse::Status::Complete(len)) if len == head.len() => {}
        Ok(_) => return Err(malformed("header section ends inside the request line")),
        Err(httparse::Error::TooManyHeaders) => {
            return Err(RequestError::TooManyHeaders { max: MAX_HEADERS })
        }
        Err(e) => return Err(malformed(&describe(e, "request line"))),
    }
    let (Some(method), Some(path), Some(version)) = (request.method, request.path, request.version)
    else {
        return Err(malformed("incomplete request line"));
    };
    let mut connection = ConnectionOptions::default();
    for field in request.headers.iter() {
        let announces_body = if field.name.eq_ignore_ascii_case("content-length") {
            parse_decimal(field.value.trim_ascii()) != Some(0)
        } else if field.name.eq_ignore_ascii_case("transfer-encoding") {
            true
        } else {
            connection.note(field);
            false
        };
        if announces_body {
            return Err(RequestError::BodyNotAllowed {
                field: canonical_name(field.name).to_owned(),
                value: String::from_utf8_lossy(field.value).into_owned(),
            });
        }
    }
    let (status, content_length) = if method != "GET" {
        (HttpStatus::MethodNotAllowed, 0)
    } else if let Some(n) = requested_bytes(path, max_message) {
        (HttpStatus::Ok, n)
    } else if let Some(n) = files.and_then(|f| f.size(without_query(path))) {
        (HttpStatus::Ok, n)
    } else {
        (HttpStatus::NotFound, 0)
    };
    Ok(Response::Http {
        status,
        content_length,
        close: connection.closes(version),
    })
}

/// Checks the request line of a head that has not ended yet: garbage
/// without a blank line after it would otherwise wait for the header
/// timeout instead of drawing a 400 at once (issue 29). `Ok` while the
/// line is incomplete or valid.
pub(crate) fn check_request_line(unfinished: &[u8]) -> Result<(), RequestError> {
    let start = unfinished
        .iter()
        .position(|&b| b != b'\r' && b != b'\n')
        .unwrap_or(unfinished.len());
    let text = &unfinished[start..];
    let Some(end) = memchr::memchr(b'\n', text) else {
        return Ok(());
    };
    // No room for fields: only the request line is judged here.
    let mut fields = [httparse::EMPTY_HEADER; 1];
    let mut request = httparse::Request::new(&mut fields);
    match request.parse(&text[..=end]) {
        Ok(_) | Err(httparse::Error::TooManyHeaders) => Ok(()),
        Err(e) => Err(malformed(&describe(e, "request line"))),
    }
}

/// What the `Connection` header fields of one message say (RFC 9112 §9.3).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct ConnectionOptions {
    close: bool,
    keep_alive: bool,
}

impl ConnectionOptions {
    /// Takes in one header field; ignores all but `Connection`.
    pub(crate) fn note(&mut self, field: &httparse::Header<'_>) {
        if field.name.eq_ignore_ascii_case("connection") {
            for token in field.value.split(|&b| b == b',').map(<[u8]>::trim_ascii) {
                self.close |= token.eq_ignore_ascii_case(b"close");
                self.keep_alive |= token.eq_ignore_ascii_case(b"keep-alive");
            }
        }
    }

    /// Whether the connection closes after this message: HTTP/1.1 (minor
    /// version 1) persists unless `close`; HTTP/1.0 closes unless `keep-alive`.
    pub(crate) fn closes(self, minor_version: u8) -> bool {
        self.close || (minor_version == 0 && !self.keep_alive)
    }
}

/// A non-empty run of ASCII digits as a number; `None` for anything else or
/// on overflow.
pub(crate) fn parse_decimal(digits: &[u8]) -> Option<u64> {
    if digits.is_empty() {
        return None;
    }
    digits.iter().try_fold(0u64, |n, &b| {
        b.is_ascii_digit()
            .then(|| n.checked_mul(10)?.checked_add(u64::from(b - b'0')))?
    })
}

/// Words for an httparse error; errors in the first line say which line.
pub(crate) fn describe(error: httparse::Error, first_line: &str) -> String {
    match error {
        httparse::Error::Token | httparse::Error::Version | httparse::Error::Status => {
            format!("{error} in {first_line}")
        }
        httparse::Error::NewLine => format!("{error} (line endings must be CRLF or LF)"),
        httparse::Error::HeaderName
        | httparse::Error::HeaderValue
        | httparse::Error::TooManyHeaders => error.to_string(),
    }
}

fn malformed(reason: &str) -> RequestError {
    RequestError::Malformed {
        reason: reason.to_owned(),
    }
}

fn canonical_name(name: &str) -> &str {
    if name.eq_ignore_ascii_case("content-length") {
        "Content-Length"
    } else if name.eq_ignore_ascii_case("transfer-encoding") {
        "Transfer-Encoding"
    } else {
        name
    }
}

/// N for a `/bytes/N` path (query string ignored) with N at most `max_message`.
fn requested_bytes(path: &str, max_message: u32) -> Option<u64> {
    let n = parse_decimal(without_query(path).strip_prefix(BYTES_PATH)?.as_bytes())?;
    (n <= u64::from(max_message)).then_some(n)
}

/// `path` without its query string.
fn without_query(path: &str) -> &str {
    path.split_once('?').map_or(path, |(path, _query)| path)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAX: u32 = 1 << 20;

    fn answer_str(head: &str) -> Result<Response, RequestError> {
        answer(head.as_bytes(), MAX, None)
    }

    fn http(status: HttpStatus, content_length: u64, close: bool) -> Response {
        Response::Http {
            status,
            content_length,
            close,
        }
    }

    #[test]
    fn serves_bytes_path_with_keep_alive() {
        assert_eq!(
            answer_str("GET /bytes/1234 HTTP/1.1\r\nHost: x\r\n\r\n"),
            Ok(http(HttpStatus::Ok, 1234, false))
        );
    }

    #[test]
    fn serves_listed_files_with_their_sizes_and_404_for_the_rest() {
        let files = FileSizes::new([
            ("/paper/f0001.html".to_string(), 5_120),
            ("/img/a.gif".to_string(), 0),
        ]);
        let ask = |path: &str| {
            answer(
                format!("GET {path} HTTP/1.1\r\n\r\n").as_bytes(),
                MAX,
                Some(&files),
            )
        };
        assert_eq!(
            ask("/paper/f0001.html"),
            Ok(http(HttpStatus::Ok, 5_120, false))
        );
        assert_eq!(ask("/img/a.gif?v=2"), Ok(http(HttpStatus::Ok, 0, false)));
        assert_eq!(ask("/bytes/7"), Ok(http(HttpStatus::Ok, 7, false)));
        assert_eq!(
            ask("/paper/f0002.html"),
            Ok(http(HttpStatus::NotFound, 0, false))
        );
        assert_eq!(
            answer_str("GET /paper/f0001.html HTTP/1.1\r\n\r\n"),
            Ok(http(HttpStatus::NotFound, 0, false)),
            "without a table only /bytes/N has content"
        );
    }

    #[test]
    fn ignores_the_query_string() {
        assert_eq!(
            answer_str("GET /bytes/10?x=/bytes/5 HTTP/1.1\r\n\r\n"),
            Ok(http(HttpStatus::Ok, 10, false))
        );
    }

    #[test]
    fn answers_404_for_other_paths() {
        for path in [
            "/nope",
            "/bytes/abc",
            "/bytes/",
            "/bytes/1x",
            "/bytes/-1",
            "/bytes",
        ] {
            let head = format!("GET {path} HTTP/1.1\r\n\r\n");
            assert_eq!(
                answer_str(&head),
                Ok(http(HttpStatus::NotFound, 0, false)),
                "{path}"
            );
        }
    }

    #[test]
    fn answers_404_above_the_maximum_message() {
        let head = format!("GET /bytes/{} HTTP/1.1\r\n\r\n", MAX + 1);
        assert_eq!(answer_str(&head), Ok(http(HttpStatus::NotFound, 0, false)));
        let head = "GET /bytes/99999999999999999999999 HTTP/1.1\r\n\r\n";
        assert_eq!(answer_str(head), Ok(http(HttpStatus::NotFound, 0, false)));
    }

    #[test]
    fn answers_405_to_other_methods_and_keeps_the_connection() {
        assert_eq!(
            answer_str("POST /bytes/5 HTTP/1.1\r\n\r\n"),
            Ok(http(HttpStatus::MethodNotAllowed, 0, false))
        );
    }

    #[test]
    fn follows_the_connection_header() {
        let cases = [
            ("HTTP/1.1", "", false),
            ("HTTP/1.1", "Connection: close\r\n", true),
            ("HTTP/1.1", "Connection: Upgrade, CLOSE\r\n", true),
            ("HTTP/1.1", "Connection: closed\r\n", false),
            ("HTTP/1.0", "", true),
            ("HTTP/1.0", "Connection: Keep-Alive\r\n", false),
            ("HTTP/1.0", "Connection: keep-alive, close\r\n", true),
        ];
        for (version, field, close) in cases {
            let head = format!("GET /bytes/1 {version}\r\n{field}\r\n");
            assert_eq!(
                answer_str(&head),
                Ok(http(HttpStatus::Ok, 1, close)),
                "{version} {field:?}"
            );
        }
    }

    #[test]
    fn accepts_a_zero_content_length() {
        assert_eq!(
            answer_str("GET /bytes/1 HTTP/1.1\r\nContent-Length: 0\r\n\r\n"),
            Ok(http(HttpStatus::Ok, 1, false))
        );
    }

    #[test]
    fn rejects_a_request_body_naming_the_field() {
        let err = answer_str("GET /bytes/1 HTTP/1.1\r\ncontent-length: 5\r\n\r\n").unwrap_err();
        assert_eq!(
            err,
            RequestError::BodyNotAllowed {
                field: "Content-Length".into(),
                value: "5".into()
            }
        );
        assert_eq!(
            err.to_string(),
            "request has a body, which is not allowed: header field Content-Length is \"5\""
        );
        let err =
            answer_str("GET /bytes/1 HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n").unwrap_err();
        assert_eq!(
            err,
            RequestError::BodyNotAllowed {
                field: "Transfer-Encoding".into(),
                value: "chunked".into()
            }
        );
    }

    #[test]
    fn judges_the_request_line_before_the_head_ends() {
        assert!(check_request_line(b"GET / HT").is_ok());
        assert!(check_request_line(b"GET / HTTP/1.1\r\n").is_ok());
        assert!(check_request_line(b"\r\nGET /x HTTP/1.0\r\nHost: a\r\n").is_ok());
        let err = check_request_line(b"GARBAGE\r\n").unwrap_err();
        assert!(err.to_string().contains("request line"), "{err}");
        assert!(check_request_line(b"\x16\x03\x01 hello\n").is_err());
    }

    #[test]
    fn rejects_a_malformed_request_line_saying_what() {
        let err = answer_str("GET /a b HTTP/1.1\r\n\r\n").unwrap_err();
        assert_eq!(
            err.to_string(),
            "malformed request: invalid HTTP version in request line"
        );
        let err = answer_str("G(T / HTTP/1.1\r\n\r\n").unwrap_err();
        assert_eq!(
            err.to_string(),
            "malformed request: invalid token in request line"
        );
        let err = answer_str("GET / HTTP/1.1\r\nbad header\r\n\r\n").unwrap_err();
        assert_eq!(err.to_string(), "malformed request: invalid header name");
    }

    #[test]
    fn rejects_more_than_64_header_fields() {
        let mut head = String::from("GET /bytes/1 HTTP/1.1\r\n");
        for i in 0..MAX_HEADERS {
            head.push_str(&format!("X-{i}: y\r\n"));
        }
        let mut at_limit = head.clone();
        at_limit.push_str("\r\n");
        assert!(answer_str(&at_limit).is_ok());
        head.push_str("X-last: y\r\n\r\n");
        let err = answer_str(&head).unwrap_err();
        assert_eq!(err, RequestError::TooManyHeaders { max: 64 });
        assert_eq!(err.to_string(), "request has more than 64 header fields");
    }

    #[test]
    fn parses_decimal_digits_only() {
        assert_eq!(parse_decimal(b"0"), Some(0));
        assert_eq!(parse_decimal(b"007"), Some(7));
        assert_eq!(parse_decimal(b"18446744073709551615"), Some(u64::MAX));
        assert_eq!(parse_decimal(b"18446744073709551616"), None);
        assert_eq!(parse_decimal(b""), None);
        assert_eq!(parse_decimal(b"+1"), None);
        assert_eq!(parse_decimal(b"1 "), None);
    }
}
