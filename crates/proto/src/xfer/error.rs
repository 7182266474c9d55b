//! Errors of the transfer protocol: [`XferError`] for what a peer sent (each
//! names the frame's byte offset in the connection and costs either one stream
//! or the connection, see [`XferError::is_stream_error`]) and [`LocalError`]
//! for calls the session refuses without sending anything.

use super::{ErrorCode, FrameKind, Role, StreamId, StreamState};

/// A peer broke the transfer protocol. `offset` is the position in the
/// connection's input (bytes fed since the start) of the offending frame's
/// header. Stream-level errors reset one stream; all others end the connection.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum XferError {
    /// The frame type byte (header byte 4) is not a type of this version.
    #[error("frame at byte {offset}: unknown frame type 0x{frame_type:02x} at header byte 4")]
    UnknownFrameType {
        /// Offset of the frame.
        offset: u64,
        /// The type byte.
        frame_type: u8,
    },
    /// Flags (header byte 5) or the reserved field (bytes 6..8) are not zero.
    #[error("frame at byte {offset}: {kind} has non-zero {field} 0x{value:x} at header byte {at}")]
    ReservedNotZero {
        /// Offset of the frame.
        offset: u64,
        /// The frame's type.
        kind: FrameKind,
        /// "flags" or "reserved".
        field: &'static str,
        /// Header byte of the field.
        at: usize,
        /// The value found.
        value: u16,
    },
    /// The payload length (header bytes 0..4) is wrong for the frame type.
    #[error("frame at byte {offset}: {kind} payload length {len} at header byte 0 is outside {min}..={max}")]
    BadLength {
        /// Offset of the frame.
        offset: u64,
        /// The frame's type.
        kind: FrameKind,
        /// The declared payload length.
        len: u32,
        /// Smallest valid length for the type.
        min: u32,
        /// Largest valid length for the type.
        max: u32,
    },
    /// A connection frame on a stream other than 0, or a stream frame on stream 0.
    #[error("frame at byte {offset}: {kind} on stream {stream} (header byte 8): {reason}")]
    BadStreamId {
        /// Offset of the frame.
        offset: u64,
        /// The frame's type.
        kind: FrameKind,
        /// The stream id found.
        stream: u32,
        /// What the id should have been.
        reason: &'static str,
    },
    /// A payload field has a value the format does not allow.
    #[error("frame at byte {offset}: {kind} field {field} at payload byte {at} has invalid value {value}")]
    BadField {
        /// Offset of the frame.
        offset: u64,
        /// The frame's type.
        kind: FrameKind,
        /// The field's name in `docs/transfer-protocol.md`.
        field: &'static str,
        /// Offset of the field in the payload.
        at: usize,
        /// The value found.
        value: u64,
    },
    /// The HELLO payload does not start with `CLXF`: the peer speaks another protocol.
    #[error("frame at byte {offset}: bad magic {got:02x?} at payload byte 0 of HELLO, expected \"CLXF\"")]
    BadMagic {
        /// Offset of the frame.
        offset: u64,
        /// The four bytes found.
        got: [u8; 4],
    },
    /// The node offered no version the server speaks, or the server chose one
    /// the node did not offer.
    #[error("frame at byte {offset}: no common protocol version: offered {min}..={max}, supported {supported_min}..={supported_max}")]
    VersionMismatch {
        /// Offset of the frame.
        offset: u64,
        /// Lowest version offered.
        min: u16,
        /// Highest version offered.
        max: u16,
        /// Lowest version accepted by the receiver.
        supported_min: u16,
        /// Highest version accepted by the receiver.
        supported_max: u16,
    },
    /// A frame other than the next handshake frame arrived before the peer
    /// authenticated: unauthenticated peers are refused.
    #[error("frame at byte {offset}: {kind} before authentication (expected {expected})")]
    Unauthenticated {
        /// Offset of the frame.
        offset: u64,
        /// The frame's type.
        kind: FrameKind,
        /// The handshake frame expected at this point.
        expected: FrameKind,
    },
    /// The peer's proof does not match the shared key: wrong key, or an impostor.
    #[error("frame at byte {offset}: the {prover}'s proof does not match the shared key")]
    AuthFailed {
        /// Offset of the frame.
        offset: u64,
        /// Who failed to prove knowledge of the key.
        prover: Role,
    },
    /// A frame type this peer's role may not send (e.g. ACCEPT from a node).
    #[error("frame at byte {offset}: {kind} may not be sent by the {sender}")]
    WrongDirection {
        /// Offset of the frame.
        offset: u64,
        /// The frame's type.
        kind: FrameKind,
        /// The peer's role.
        sender: Role,
    },
    /// A connection-level rule was broken (stream id reuse or wrong parity,
    /// a handshake frame after the handshake).
    #[error("frame at byte {offset}: {kind} on stream {stream}: {reason}")]
    Connection {
        /// Offset of the frame.
        offset: u64,
        /// The frame's type.
        kind: FrameKind,
        /// The stream id of the frame.
        stream: u32,
        /// The rule broken.
        reason: &'static str,
    },
    /// A stream-level rule was broken: the stream is reset with `code`, the
    /// connection and its other streams go on.
    #[error("frame at byte {offset}: {kind} on stream {stream}: {reason} (reset with {code})")]
    Stream {
        /// Offset of the frame.
        offset: u64,
        /// The frame's type.
        kind: FrameKind,
        /// The stream reset.
        stream: StreamId,
        /// The code sent in the RESET.
        code: ErrorCode,
        /// The rule broken.
        reason: &'static str,
    },
    /// DATA beyond the credit granted on its stream (stream-level: the stream
    /// is reset with FLOW_CONTROL).
    #[error("frame at byte {offset}: DATA of {len} bytes on stream {stream} exceeds its remaining credit of {credit}")]
    FlowControl {
        /// Offset of the frame.
        offset: u64,
        /// The stream reset.
        stream: StreamId,
        /// Payload length of the DATA.
        len: u32,
        /// Credit left on the stream.
        credit: u32,
    },
    /// A CREDIT that is zero or would raise the send credit past 2^31 - 1
    /// (stream-level: the stream is reset with FLOW_CONTROL).
    #[error("frame at byte {offset}: CREDIT of {increment} on stream {stream} with {credit} already granted is zero or exceeds 2^31-1")]
    BadCredit {
        /// Offset of the frame.
        offset: u64,
        /// The stream reset.
        stream: StreamId,
        /// The increment.
        increment: u32,
        /// The credit before the increment.
        credit: u32,
    },
    /// The connection ended in the middle of a frame.
    #[error("connection ended {received} bytes into the frame at byte {offset}")]
    Truncated {
        /// Offset of the frame.
        offset: u64,
        /// Bytes of the frame (header included) received.
        received: u64,
    },
}

impl XferError {
    /// The code to send: in the RESET for stream-level errors, in the GOAWAY
    /// for the others.
    pub fn code(&self) -> ErrorCode {
        match self {
            XferError::BadLength { .. } => ErrorCode::FRAME_SIZE,
            XferError::VersionMismatch { .. } => ErrorCode::VERSION,
            XferError::Unauthenticated { .. } => ErrorCode::AUTH_REQUIRED,
            XferError::AuthFailed { .. } => ErrorCode::AUTH_FAILED,
            XferError::Stream { code, .. } => *code,
            XferError::FlowControl { .. } | XferError::BadCredit { .. } => ErrorCode::FLOW_CONTROL,
            XferError::UnknownFrameType { .. }
            | XferError::ReservedNotZero { .. }
            | XferError::BadStreamId { .. }
            | XferError::BadField { .. }
            | XferError::BadMagic { .. }
            | XferError::WrongDirection { .. }
            | XferError::Connection { .. }
            | XferError::Truncated { .. } => ErrorCode::PROTOCOL,
        }
    }

    /// The stream a stream-level error resets; `None` for errors that end the
    /// connection.
    pub fn stream(&self) -> Option<StreamId> {
        match self {
            XferError::Stream { stream, .. }
            | XferError::FlowControl { stream, .. }
            | XferError::BadCredit { stream, .. } => Some(*stream),
            _ => None,
        }
    }

    /// Whether the error costs only its stream (true) or the connection.
    pub fn is_stream_error(&self) -> bool {
        self.stream().is_some()
    }

    /// Offset in the connection's input of the frame that caused the error.
    pub fn offset(&self) -> u64 {
        match self {
            XferError::UnknownFrameType { offset, .. }
            | XferError::ReservedNotZero { offset, .. }
            | XferError::BadLength { offset, .. }
            | XferError::BadStreamId { offset, .. }
            | XferError::BadField { offset, .. }
            | XferError::BadMagic { offset, .. }
            | XferError::VersionMismatch { offset, .. }
            | XferError::Unauthenticated { offset, .. }
            | XferError::AuthFailed { offset, .. }
            | XferError::WrongDirection { offset, .. }
            | XferError::Connection { offset, .. }
            | XferError::Stream { offset, .. }
            | XferError::FlowControl { offset, .. }
            | XferError::BadCredit { offset, .. }
            | XferError::Truncated { offset, .. } => *offset,
        }
    }
}

/// The session refused a call: nothing was queued and the session is unchanged.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum LocalError {
    /// The shared key is too short to resist guessing; use at least 16 random bytes.
    #[error("the shared key has {len} bytes; at least {min} are required")]
    KeyTooShort {
        /// Length of the key given.
        len: usize,
        /// The least length accepted.
        min: usize,
    },
    /// A configuration value is out of range.
    #[error("{field} {value} is outside {min}..={max}")]
    BadConfig {
        /// The field of [`XferConfig`](super::XferConfig).
        field: &'static str,
        /// The value given.
        value: u64,
        /// Smallest accepted value.
        min: u64,
        /// Largest accepted value.
        max: u64,
    },
    /// The handshake has not completed; wait for [`Event::Established`](super::Event::Established).
    #[error("{op}: the session is not authenticated yet")]
    NotEstablished {
        /// The refused call.
        op: &'static str,
    },
    /// The session ended (GOAWAY sent or received, or a connection error).
    #[error("{op}: the session is closed")]
    Closed {
        /// The refused call.
        op: &'static str,
    },
    /// The call belongs to the other role (e.g. `accept` on a node).
    #[error("{op} is for the {role} only")]
    WrongRole {
        /// The refused call.
        op: &'static str,
        /// The role that may make it.
        role: Role,
    },
    /// No such stream is open (never opened, or closed or reset since).
    #[error("{op}: stream {stream} is not open")]
    UnknownStream {
        /// The refused call.
        op: &'static str,
        /// The stream.
        stream: StreamId,
    },
    /// The stream's state forbids the call (data after FIN, data before CONNECTED).
    #[error("{op}: stream {stream} is {state:?}")]
    WrongState {
        /// The refused call.
        op: &'static str,
        /// The stream.
        stream: StreamId,
        /// Its state.
        state: StreamState,
    },
    /// The peer granted no credit on this stream: wait for
    /// [`Event::Credit`](super::Event::Credit).
    #[error("send_data: stream {stream} has no send credit")]
    NoCredit {
        /// The stream.
        stream: StreamId,
    },
    /// The peer allows no more concurrent streams opened by this side.
    #[error("{op}: the peer allows at most {max} concurrent streams opened by this side")]
    StreamLimit {
        /// The refused call.
        op: &'static str,
        /// The peer's limit.
        max: u32,
    },
    /// Every stream id of this side was used: open a new connection.
    #[error("{op}: stream ids are exhausted")]
    StreamIdsExhausted {
        /// The refused call.
        op: &'static str,
    },
    /// More bytes released than were delivered and not yet released.
    #[error("release of {len} bytes on stream {stream} exceeds the {unreleased} bytes delivered and not released")]
    ReleaseTooLarge {
        /// The stream.
        stream: StreamId,
        /// Bytes the call released.
        len: u32,
        /// Bytes that could be released.
        unreleased: u32,
    },
    /// A grant would raise the stream's window past 2^31 - 1, or is zero.
    #[error(
        "grant of {increment} on stream {stream} with window {window} is zero or exceeds 2^31-1"
    )]
    BadGrant {
        /// The stream.
        stream: StreamId,
        /// The increment asked for.
        increment: u32,
        /// The window before it.
        window: u32,
    },
    /// `accept` for a port the node has not announced with LISTEN (or that
    /// the server refused).
    #[error("accept: the node does not serve port {port}")]
    PortNotServed {
        /// The port.
        port: u16,
    },
    /// Port 0 cannot be served.
    #[error("{op}: port 0 is not a port")]
    PortZero {
        /// The refused call.
        op: &'static str,
    },
    /// A frame field is too large to encode (DATA over the version's limit,
    /// [`max_data_payload`](super::max_data_payload), text over
    /// [`MAX_TEXT`](super::MAX_TEXT), a window over 2^31 - 1).
    #[error("{what} of {len} is over the limit of {max}")]
    TooLarge {
        /// The field.
        what: &'static str,
        /// Its length or value.
        len: u64,
        /// The limit.
        max: u64,
    },
}
