//! The crate's error type, [`ProtocolError`]: every way a peer can break the
//! wire formats, with an [`ErrorKind`] for each so that engines and the load
//! generator can count errors in fixed-size tables without matching messages.

use crate::clb1::HeaderError;
use crate::http1::RequestError;

/// A peer broke the wire format; the connection it came on must close.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ProtocolError {
    /// A CLB1 request header failed [`Header::parse`](crate::Header::parse).
    #[error(transparent)]
    Clb1(#[from] HeaderError),
    /// An HTTP request the server answered with `400 Bad Request`.
    #[error(transparent)]
    Http(#[from] RequestError),
    /// The peer closed the connection in the middle of a message.
    #[error("connection ended {received} bytes into a {what}")]
    Truncated {
        /// The part of the message that was cut: "request header",
        /// "request payload", "response header" or "response payload".
        what: &'static str,
        /// Bytes of that part received before the end.
        received: u64,
    },
    /// Client side only: the server's response breaks the format (bad magic,
    /// length out of range, bad status line, no `Content-Length`, ...).
    #[error("bad response: {reason}")]
    BadResponse {
        /// What is wrong with the response.
        reason: String,
    },
}

impl ProtocolError {
    /// The error's kind, for counting.
    pub fn kind(&self) -> ErrorKind {
        match self {
            ProtocolError::Clb1(HeaderError::BadMagic(_)) => ErrorKind::BadMagic,
            ProtocolError::Clb1(HeaderError::ReqLenOutOfRange { .. }) => {
                ErrorKind::ReqLenOutOfRange
            }
            ProtocolError::Clb1(HeaderError::RespLenOutOfRange { .. }) => {
                ErrorKind::RespLenOutOfRange
            }
            ProtocolError::Http(RequestError::HeaderTooLarge { .. }) => {
                ErrorKind::HttpHeaderTooLarge
            }
            ProtocolError::Http(RequestError::Malformed { .. }) => ErrorKind::HttpMalformed,
            ProtocolError::Http(RequestError::TooManyHeaders { .. }) => {
                ErrorKind::HttpTooManyHeaders
            }
            ProtocolError::Http(RequestError::BodyNotAllowed { .. }) => {
                ErrorKind::HttpBodyNotAllowed
            }
            ProtocolError::Truncated { .. } => ErrorKind::Truncated,
            ProtocolError::BadResponse { .. } => ErrorKind::BadResponse,
        }
    }
}

/// The kind of a [`ProtocolError`], without its details: an index into
/// per-kind counters and a stable snake_case name for results.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ErrorKind {
    /// CLB1 header without the `CLB1` magic.
    BadMagic,
    /// CLB1 `req_len` outside `16..=max`.
    ReqLenOutOfRange,
    /// CLB1 `resp_len` outside `16..=max`.
    RespLenOutOfRange,
    /// HTTP request head over 8 KiB.
    HttpHeaderTooLarge,
    /// HTTP request that is not valid HTTP/1.x.
    HttpMalformed,
    /// HTTP request with more than 64 header fields.
    HttpTooManyHeaders,
    /// HTTP request with a body.
    HttpBodyNotAllowed,
    /// Connection closed in the middle of a message.
    Truncated,
    /// Malformed response (client side).
    BadResponse,
}

impl ErrorKind {
    /// Every kind, in declaration order: `ALL[k.index()] == k`.
    pub const ALL: [ErrorKind; 9] = [
        ErrorKind::BadMagic,
        ErrorKind::ReqLenOutOfRange,
        ErrorKind::RespLenOutOfRange,
        ErrorKind::HttpHeaderTooLarge,
        ErrorKind::HttpMalformed,
        ErrorKind::HttpTooManyHeaders,
        ErrorKind::HttpBodyNotAllowed,
        ErrorKind::Truncated,
        ErrorKind::BadResponse,
    ];

    /// The snake_case name used in results, e.g. `"bad_magic"`.
    pub fn name(self) -> &'static str {
        match self {
            ErrorKind::BadMagic => "bad_magic",
            ErrorKind::ReqLenOutOfRange => "req_len_out_of_range",
            ErrorKind::RespLenOutOfRange => "resp_len_out_of_range",
            ErrorKind::HttpHeaderTooLarge => "http_header_too_large",
            ErrorKind::HttpMalformed => "http_malformed",
            ErrorKind::HttpTooManyHeaders => "http_too_many_headers",
            ErrorKind::HttpBodyNotAllowed => "http_body_not_allowed",
            ErrorKind::Truncated => "truncated",
            ErrorKind::BadResponse => "bad_response",
        }
    }

    /// The kind's position in [`ErrorKind::ALL`].
    pub fn index(self) -> usize {
        self as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn indexes_kinds_by_their_position_in_all() {
        for (i, kind) in ErrorKind::ALL.into_iter().enumerate() {
            assert_eq!(kind.index(), i);
        }
        let mut sorted = ErrorKind::ALL;
        sorted.sort();
        assert_eq!(sorted, ErrorKind::ALL);
    }

    #[test]
    fn names_kinds_in_snake_case() {
        let names: Vec<&str> = ErrorKind::ALL.iter().map(|k| k.name()).collect();
        assert_eq!(
            names,
            [
                "bad_magic",
                "req_len_out_of_range",
                "resp_len_out_of_range",
                "http_header_too_large",
                "http_malformed",
                "http_too_many_headers",
                "http_body_not_allowed",
                "truncated",
                "bad_response"
            ]
        );
    }

    #[test]
    fn maps_every_variant_to_its_kind() {
        let errors = [
            ProtocolError::from(HeaderError::BadMagic(*b"XXXX")),
            HeaderError::ReqLenOutOfRange { len: 1, max: 16 }.into(),
            HeaderError::RespLenOutOfRange { len: 1, max: 16 }.into(),
            RequestError::HeaderTooLarge { len: 1, max: 1 }.into(),
            RequestError::Malformed { reason: "x".into() }.into(),
            RequestError::TooManyHeaders { max: 64 }.into(),
            RequestError::BodyNotAllowed {
                field: "Content-Length".into(),
                value: "1".into(),
            }
            .into(),
            ProtocolError::Truncated {
                what: "request header",
                received: 1,
            },
            ProtocolError::BadResponse { reason: "x".into() },
        ];
        let kinds: Vec<ErrorKind> = errors.iter().map(ProtocolError::kind).collect();
        assert_eq!(kinds, ErrorKind::ALL);
    }

    #[test]
    fn shows_the_inner_message_for_wrapped_errors() {
        let err = ProtocolError::from(HeaderError::ReqLenOutOfRange { len: 15, max: 16 });
        assert_eq!(err.to_string(), "req_len 15 at byte 4 is outside 16..=16");
    }
}
