//! connlab's wire formats as sans-I/O state machines (`shared/protocol.md`):
//! CLB1, the request/response benchmark protocol, and the minimal HTTP/1.1 mode.
//! Bytes go in, [`Response`]s and [`ResponseDone`]s come out; this crate never
//! touches a socket, a thread or a clock, so every server engine, the load
//! generator and any front end reuse the same parsers and one fix fixes them all.
//!
//! - [`ServerSession`] is the server side of one connection: request bytes in,
//!   the [`Response`] owed for each request out.
//! - [`ClientSession`] is the client side: response bytes in, one
//!   [`ResponseDone`] per complete response out, with [`encode_clb1_request_header`]
//!   and [`encode_http_get`] to write requests.
//! - [`clb1::Header::parse`] is the one checked way in from untrusted CLB1 bytes.
//! - [`xfer`] is the single-IP cluster transfer protocol between the I/O
//!   server and its application nodes (`docs/transfer-protocol.md`):
//!   [`XferSession`] for either end, [`xfer::FrameDecoder`] for its frames.

#![warn(clippy::unwrap_used)]

pub mod clb1;
pub mod client;
mod error;
mod head;
pub mod http1;
mod payload;
mod server;
pub mod xfer;

pub use clb1::{Header, HeaderError};
pub use client::{encode_clb1_request_header, encode_http_get, ClientSession, ResponseDone};
pub use error::{ErrorKind, ProtocolError};
pub use http1::RequestError;
pub use server::{Flow, HttpStatus, Response, ServerConfig, ServerSession};
pub use xfer::{XferConfig, XferError, XferSession};

/// Which wire format a connection speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Protocol {
    /// CLB1, the binary request/response protocol (`shared/protocol.md` §1).
    Clb1,
    /// The minimal HTTP/1.1 mode (`shared/protocol.md` §2).
    Http,
}

impl Protocol {
    /// Every protocol, in declaration order.
    pub const ALL: [Protocol; 2] = [Protocol::Clb1, Protocol::Http];

    /// The protocol's name on the command line and in results: `"clb1"` or `"http"`.
    pub fn name(self) -> &'static str {
        match self {
            Protocol::Clb1 => "clb1",
            Protocol::Http => "http",
        }
    }
}

impl std::str::FromStr for Protocol {
    type Err = String;

    /// `clb1` or `http`, as [`Protocol::name`] gives them.
    fn from_str(s: &str) -> Result<Self, String> {
        Protocol::ALL
            .into_iter()
            .find(|p| p.name() == s)
            .ok_or_else(|| format!("unknown protocol {s:?}; expected clb1 or http"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_protocols_in_lowercase() {
        assert_eq!(Protocol::Clb1.name(), "clb1");
        assert_eq!(Protocol::Http.name(), "http");
        assert_eq!(Protocol::ALL, [Protocol::Clb1, Protocol::Http]);
    }

    #[test]
    fn parses_the_names_it_gives() {
        for p in Protocol::ALL {
            assert_eq!(p.name().parse::<Protocol>(), Ok(p));
        }
        let err = "HTTP".parse::<Protocol>().unwrap_err();
        assert!(err.contains("expected clb1 or http"), "{err}");
    }
}
