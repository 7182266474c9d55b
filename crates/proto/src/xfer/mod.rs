//! The single-IP cluster transfer protocol (`docs/transfer-protocol.md`): one
//! interconnect connection per application node carries every client TCP
//! connection the I/O server relays to that node, as framed streams with
//! per-stream credit-based flow control, after a mutual HMAC-SHA256
//! challenge-response handshake.
//!
//! - [`Frame`] is one frame; [`Frame::encode`] writes it and [`FrameDecoder`]
//!   is the one checked way in from untrusted bytes, in any chunking, never
//!   allocating more than one payload of the negotiated version's limit
//!   ([`MAX_PAYLOAD`] in version 1, [`MAX_DATA_PAYLOAD_V2`] for DATA in
//!   version 2) before a frame is validated.
//! - [`XferSession`] is one end of a node connection, the node's or the I/O
//!   server's ([`Role`]): bytes in, [`Event`]s out, frames to send in an output
//!   buffer, and calls such as [`XferSession::accept`] or
//!   [`XferSession::send_data`] that queue frames. No socket, no clock: the
//!   driver decides when to ping and when to give up on a silent peer.
//! - A driver that moves DATA payloads itself (splice) feeds at most
//!   [`XferSession::until_next_payload`] bytes at a time, so every DATA
//!   header is decoded before its payload, and takes the payload with
//!   [`XferSession::take_pending_data`]: the same checks and credit
//!   accounting as a copied payload, done before any payload byte is read,
//!   then [`XferSession::consume_taken`] as the bytes move.

mod auth;
mod error;
mod frame;
mod session;
#[cfg(test)]
mod tests;

pub use auth::AuthKey;
pub use error::{LocalError, XferError};
pub use frame::{Challenge, Frame, FrameDecoder, FrameKind, Hello};
pub use session::{Event, StreamState, XferConfig, XferSession, XferStats};

use std::fmt;

/// Length of the frame header: payload length (4), type (1), flags (1),
/// reserved (2), stream id (4).
pub const HEADER_LEN: usize = 12;
/// Offset of the big-endian `u32` payload length in the frame header.
pub const LEN_AT: usize = 0;
/// Offset of the frame type byte in the frame header.
pub const TYPE_AT: usize = 4;
/// Offset of the flags byte (0 in version 1) in the frame header.
pub const FLAGS_AT: usize = 5;
/// Offset of the reserved big-endian `u16` (0 in version 1) in the frame header.
pub const RESERVED_AT: usize = 6;
/// Offset of the big-endian `u32` stream id in the frame header.
pub const STREAM_AT: usize = 8;

/// Largest DATA payload in version 1, in bytes, and the limit before a
/// version is negotiated. No other frame's payload comes near it in any
/// version.
pub const MAX_PAYLOAD: usize = 16 * 1024;
/// Largest DATA payload in version 2, in bytes: 256 KiB. Every other frame
/// keeps its version 1 range.
pub const MAX_DATA_PAYLOAD_V2: usize = 256 * 1024;
/// Largest text (UTF-8 reason or message) in GOAWAY and ERROR frames, in bytes.
pub const MAX_TEXT: usize = 512;
/// Largest per-stream credit a receiver may grant: 2^31 - 1 bytes.
pub const MAX_WINDOW: u32 = (1 << 31) - 1;
/// Largest `max_streams` a peer may announce in its hello.
pub const MAX_STREAMS_LIMIT: u32 = 1 << 20;
/// The magic at the start of a HELLO payload.
pub const MAGIC: [u8; 4] = *b"CLXF";
/// The lowest protocol version this implementation speaks.
pub const MIN_VERSION: u16 = 1;
/// The highest protocol version this implementation speaks.
pub const MAX_VERSION: u16 = 2;

/// Largest DATA payload in protocol `version`: [`MAX_DATA_PAYLOAD_V2`] in
/// version 2, else (version 1, or 0 for "not negotiated yet")
/// [`MAX_PAYLOAD`].
pub const fn max_data_payload(version: u16) -> usize {
    match version {
        2 => MAX_DATA_PAYLOAD_V2,
        _ => MAX_PAYLOAD,
    }
}

/// Which end of a node connection a session is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Role {
    /// An application node: it connects to the I/O server, authenticates,
    /// announces the ports it serves and opens odd-numbered streams (CONNECT).
    Node,
    /// The I/O server: it holds the cluster address's TCP connections and
    /// opens even-numbered streams (ACCEPT) to nodes.
    Server,
}

impl Role {
    /// The other end.
    pub fn peer(self) -> Role {
        match self {
            Role::Node => Role::Server,
            Role::Server => Role::Node,
        }
    }

    /// Whether streams opened by this role have odd ids (nodes) or even ids
    /// (the I/O server).
    fn owns(self, stream: u32) -> bool {
        match self {
            Role::Node => stream & 1 == 1,
            Role::Server => stream & 1 == 0,
        }
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Role::Node => "node",
            Role::Server => "I/O server",
        })
    }
}

/// A stream id: odd for streams the node opened, even (and not 0) for streams
/// the I/O server opened; 0 is the connection itself.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct StreamId(pub u32);

impl StreamId {
    /// Stream 0: frames about the whole connection.
    pub const CONNECTION: StreamId = StreamId(0);
}

impl fmt::Display for StreamId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// The code in RESET, GOAWAY and ERROR frames. Unknown values are kept as they
/// are; a receiver treats an unknown code like [`ErrorCode::INTERNAL`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ErrorCode(pub u32);

impl ErrorCode {
    /// No error: a normal GOAWAY, a LISTEN_RESULT that succeeded.
    pub const NO_ERROR: ErrorCode = ErrorCode(0);
    /// The peer broke a rule of the protocol.
    pub const PROTOCOL: ErrorCode = ErrorCode(1);
    /// A frame's payload length is wrong for its type.
    pub const FRAME_SIZE: ErrorCode = ErrorCode(2);
    /// DATA beyond the stream's credit, a zero or overflowing CREDIT.
    pub const FLOW_CONTROL: ErrorCode = ErrorCode(3);
    /// DATA or FIN after the sender's FIN.
    pub const STREAM_CLOSED: ErrorCode = ErrorCode(4);
    /// A frame on a stream that was never opened.
    pub const UNKNOWN_STREAM: ErrorCode = ErrorCode(5);
    /// The stream was refused (stream limit, port not served) before any data.
    pub const REFUSED: ErrorCode = ErrorCode(6);
    /// A frame other than the handshake's before authentication.
    pub const AUTH_REQUIRED: ErrorCode = ErrorCode(7);
    /// A proof did not match the shared key.
    pub const AUTH_FAILED: ErrorCode = ErrorCode(8);
    /// No protocol version in common.
    pub const VERSION: ErrorCode = ErrorCode(9);
    /// The application abandoned the stream.
    pub const CANCEL: ErrorCode = ErrorCode(10);
    /// The client's TCP connection was reset (server to node) or the node's
    /// application aborted it (node to server, which then resets the client).
    pub const CONNECTION_RESET: ErrorCode = ErrorCode(11);
    /// An internal failure of the sender.
    pub const INTERNAL: ErrorCode = ErrorCode(12);
    /// A request the receiver does not support (an unknown socket option).
    pub const UNSUPPORTED: ErrorCode = ErrorCode(13);

    /// The code's name, e.g. `"FLOW_CONTROL"`, or `None` for codes this
    /// version does not define.
    pub fn name(self) -> Option<&'static str> {
        Some(match self.0 {
            0 => "NO_ERROR",
            1 => "PROTOCOL",
            2 => "FRAME_SIZE",
            3 => "FLOW_CONTROL",
            4 => "STREAM_CLOSED",
            5 => "UNKNOWN_STREAM",
            6 => "REFUSED",
            7 => "AUTH_REQUIRED",
            8 => "AUTH_FAILED",
            9 => "VERSION",
            10 => "CANCEL",
            11 => "CONNECTION_RESET",
            12 => "INTERNAL",
            13 => "UNSUPPORTED",
            _ => return None,
        })
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.name() {
            Some(name) => write!(f, "{name} ({})", self.0),
            None => write!(f, "unknown code {}", self.0),
        }
    }
}

/// A socket option id in SETOPT frames. Unknown ids are passed to the
/// application, which answers them with an ERROR frame of code
/// [`ErrorCode::UNSUPPORTED`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SockOpt(pub u16);

impl SockOpt {
    /// `TCP_NODELAY` on the client connection: value 0 (off) or 1 (on).
    pub const NODELAY: SockOpt = SockOpt(1);
    /// `SO_KEEPALIVE` on the client connection: value 0 (off) or 1 (on).
    pub const KEEPALIVE: SockOpt = SockOpt(2);
}

/// Errno-like numbers in CONNECT_FAILED and LISTEN_RESULT: Linux `errno`
/// values, so the I/O server passes its `connect(2)` error through unchanged.
pub mod errno {
    /// Success (LISTEN_RESULT only).
    pub const OK: u32 = 0;
    /// `EACCES`: the node may not serve that port.
    pub const EACCES: u32 = 13;
    /// `EADDRINUSE`: another node already serves that port.
    pub const EADDRINUSE: u32 = 98;
    /// `ENETUNREACH`.
    pub const ENETUNREACH: u32 = 101;
    /// `ETIMEDOUT`.
    pub const ETIMEDOUT: u32 = 110;
    /// `ECONNREFUSED`.
    pub const ECONNREFUSED: u32 = 111;
    /// `EHOSTUNREACH`.
    pub const EHOSTUNREACH: u32 = 113;
}
