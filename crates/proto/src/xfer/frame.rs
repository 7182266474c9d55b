//! The frame codec: [`Frame::encode`] and the incremental [`FrameDecoder`],
//! the one checked way in from untrusted bytes. The decoder keeps at most one
//! 12-byte header and, once the header is validated against its type's
//! payload range in the negotiated version, at most one payload: up to
//! [`MAX_PAYLOAD`] bytes in version 1 and before the version is known, up
//! to [`MAX_DATA_PAYLOAD_V2`] for DATA in version 2.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

#[cfg(doc)]
use super::MAX_DATA_PAYLOAD_V2;
use super::{
    max_data_payload, ErrorCode, LocalError, Role, SockOpt, StreamId, XferError, FLAGS_AT,
    HEADER_LEN, LEN_AT, MAGIC, MAX_PAYLOAD, MAX_TEXT, RESERVED_AT, STREAM_AT, TYPE_AT,
};

/// A frame's type, the byte at header offset 4.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum FrameKind {
    /// Node to server, first frame: magic, versions, node id, limits, nonce.
    Hello = 0x01,
    /// Server to node: chosen version, limits, nonce, server proof.
    Challenge = 0x02,
    /// Node to server: node proof.
    Auth = 0x03,
    /// Either way: 8 opaque bytes to echo in a PONG.
    Ping = 0x04,
    /// Either way: the echo of a PING.
    Pong = 0x05,
    /// Either way: the sender ends the connection (code, reason).
    GoAway = 0x06,
    /// Either way: a non-fatal error report about the connection or a stream.
    Error = 0x07,
    /// Node to server: "I serve port P on the cluster address".
    Listen = 0x10,
    /// Node to server: "I no longer serve port P".
    Unlisten = 0x11,
    /// Server to node: the outcome of a LISTEN (errno-like code).
    ListenResult = 0x12,
    /// Server to node: a client connected; opens an even stream.
    Accept = 0x20,
    /// Node to server: open a TCP connection to an address; opens an odd stream.
    Connect = 0x21,
    /// Server to node: the CONNECT succeeded.
    Connected = 0x22,
    /// Server to node: the CONNECT failed (errno-like code); closes the stream.
    ConnectFailed = 0x23,
    /// Either way: stream bytes, within the receiver's credit.
    Data = 0x30,
    /// Either way: the sender's half of the stream is closed.
    Fin = 0x31,
    /// Either way: the stream is abandoned in both directions (code).
    Reset = 0x32,
    /// Either way: more send credit on a stream (bytes).
    Credit = 0x33,
    /// Node to server: set a socket option on the stream's client connection.
    SetOpt = 0x34,
}

impl FrameKind {
    /// Every frame type, in type-byte order.
    pub const ALL: [FrameKind; 19] = [
        FrameKind::Hello,
        FrameKind::Challenge,
        FrameKind::Auth,
        FrameKind::Ping,
        FrameKind::Pong,
        FrameKind::GoAway,
        FrameKind::Error,
        FrameKind::Listen,
        FrameKind::Unlisten,
        FrameKind::ListenResult,
        FrameKind::Accept,
        FrameKind::Connect,
        FrameKind::Connected,
        FrameKind::ConnectFailed,
        FrameKind::Data,
        FrameKind::Fin,
        FrameKind::Reset,
        FrameKind::Credit,
        FrameKind::SetOpt,
    ];

    /// The type with this type byte, if any.
    pub fn from_byte(byte: u8) -> Option<FrameKind> {
        FrameKind::ALL.into_iter().find(|kind| *kind as u8 == byte)
    }

    /// The name used in `docs/transfer-protocol.md`, e.g. `"LISTEN_RESULT"`.
    pub fn name(self) -> &'static str {
        match self {
            FrameKind::Hello => "HELLO",
            FrameKind::Challenge => "CHALLENGE",
            FrameKind::Auth => "AUTH",
            FrameKind::Ping => "PING",
            FrameKind::Pong => "PONG",
            FrameKind::GoAway => "GOAWAY",
            FrameKind::Error => "ERROR",
            FrameKind::Listen => "LISTEN",
            FrameKind::Unlisten => "UNLISTEN",
            FrameKind::ListenResult => "LISTEN_RESULT",
            FrameKind::Accept => "ACCEPT",
            FrameKind::Connect => "CONNECT",
            FrameKind::Connected => "CONNECTED",
            FrameKind::ConnectFailed => "CONNECT_FAILED",
            FrameKind::Data => "DATA",
            FrameKind::Fin => "FIN",
            FrameKind::Reset => "RESET",
            FrameKind::Credit => "CREDIT",
            FrameKind::SetOpt => "SETOPT",
        }
    }

    /// The valid payload lengths of the type in version 1 (and before a
    /// version is negotiated).
    pub fn payload_range(self) -> (u32, u32) {
        let text = 4 + MAX_TEXT as u32;
        match self {
            FrameKind::Hello => (HELLO_LEN as u32, HELLO_LEN as u32),
            FrameKind::Challenge => (CHALLENGE_LEN as u32, CHALLENGE_LEN as u32),
            FrameKind::Auth => (32, 32),
            FrameKind::Ping | FrameKind::Pong => (8, 8),
            FrameKind::GoAway | FrameKind::Error => (4, text),
            FrameKind::Listen | FrameKind::Unlisten | FrameKind::Connected => (2, 2),
            FrameKind::ListenResult => (6, 6),
            FrameKind::Accept => (10, 22),
            FrameKind::Connect => (8, 20),
            FrameKind::ConnectFailed | FrameKind::Reset | FrameKind::Credit => (4, 4),
            FrameKind::Data => (0, MAX_PAYLOAD as u32),
            FrameKind::Fin => (0, 0),
            FrameKind::SetOpt => (8, 8),
        }
    }

    /// The valid payload lengths of the type in protocol `version`: as in
    /// version 1 ([`FrameKind::payload_range`]) but for DATA, which takes up
    /// to [`max_data_payload`]`(version)` bytes.
    pub fn payload_range_in(self, version: u16) -> (u32, u32) {
        match self {
            FrameKind::Data => (0, max_data_payload(version) as u32),
            kind => kind.payload_range(),
        }
    }

    /// Whether the frame belongs on stream 0 (`Some(true)`), on a stream other
    /// than 0 (`Some(false)`) or on either (`None`, ERROR only).
    pub fn on_connection(self) -> Option<bool> {
        match self {
            FrameKind::Hello
            | FrameKind::Challenge
            | FrameKind::Auth
            | FrameKind::Ping
            | FrameKind::Pong
            | FrameKind::GoAway
            | FrameKind::Listen
            | FrameKind::Unlisten
            | FrameKind::ListenResult => Some(true),
            FrameKind::Error => None,
            FrameKind::Accept
            | FrameKind::Connect
            | FrameKind::Connected
            | FrameKind::ConnectFailed
            | FrameKind::Data
            | FrameKind::Fin
            | FrameKind::Reset
            | FrameKind::Credit
            | FrameKind::SetOpt => Some(false),
        }
    }

    /// The only role that may send the frame, or `None` if both may.
    pub fn sender(self) -> Option<Role> {
        match self {
            FrameKind::Hello
            | FrameKind::Auth
            | FrameKind::Listen
            | FrameKind::Unlisten
            | FrameKind::Connect
            | FrameKind::SetOpt => Some(Role::Node),
            FrameKind::Challenge
            | FrameKind::ListenResult
            | FrameKind::Accept
            | FrameKind::Connected
            | FrameKind::ConnectFailed => Some(Role::Server),
            FrameKind::Ping
            | FrameKind::Pong
            | FrameKind::GoAway
            | FrameKind::Error
            | FrameKind::Data
            | FrameKind::Fin
            | FrameKind::Reset
            | FrameKind::Credit => None,
        }
    }
}

impl fmt::Display for FrameKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Payload length of HELLO.
const HELLO_LEN: usize = 52;
/// Payload length of CHALLENGE.
const CHALLENGE_LEN: usize = 76;
/// CHALLENGE bytes covered by the proofs: all but the server proof.
pub(crate) const CHALLENGE_SIGNED_LEN: usize = 44;

/// HELLO: the node's opening frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Hello {
    /// Lowest protocol version the node speaks (payload bytes 4..6).
    pub min_version: u16,
    /// Highest protocol version the node speaks (bytes 6..8).
    pub max_version: u16,
    /// The node's number, for the server's logs and tables (bytes 8..12).
    pub node_id: u32,
    /// Credit the node grants the server on every new stream, in bytes (bytes 12..16).
    pub initial_window: u32,
    /// Streams the server may have open at once that the server opened (bytes 16..20).
    pub max_streams: u32,
    /// The node's fresh random nonce (bytes 20..52).
    pub nonce: [u8; 32],
}

impl Hello {
    /// The 52-byte payload.
    pub(crate) fn payload(&self) -> [u8; HELLO_LEN] {
        let mut p = [0; HELLO_LEN];
        p[0..4].copy_from_slice(&MAGIC);
        p[4..6].copy_from_slice(&self.min_version.to_be_bytes());
        p[6..8].copy_from_slice(&self.max_version.to_be_bytes());
        p[8..12].copy_from_slice(&self.node_id.to_be_bytes());
        p[12..16].copy_from_slice(&self.initial_window.to_be_bytes());
        p[16..20].copy_from_slice(&self.max_streams.to_be_bytes());
        p[20..52].copy_from_slice(&self.nonce);
        p
    }
}

/// CHALLENGE: the server's answer to HELLO.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Challenge {
    /// The version chosen from the node's range (payload bytes 0..2; bytes
    /// 2..4 are reserved, zero).
    pub version: u16,
    /// Credit the server grants the node on every new stream, in bytes (bytes 4..8).
    pub initial_window: u32,
    /// Streams the node may have open at once that the node opened (bytes 8..12).
    pub max_streams: u32,
    /// The server's fresh random nonce (bytes 12..44).
    pub nonce: [u8; 32],
    /// HMAC-SHA256 proof that the server knows the key (bytes 44..76).
    pub proof: [u8; 32],
}

impl Challenge {
    /// The 76-byte payload.
    pub(crate) fn payload(&self) -> [u8; CHALLENGE_LEN] {
        let mut p = [0; CHALLENGE_LEN];
        p[0..2].copy_from_slice(&self.version.to_be_bytes());
        p[4..8].copy_from_slice(&self.initial_window.to_be_bytes());
        p[8..12].copy_from_slice(&self.max_streams.to_be_bytes());
        p[12..44].copy_from_slice(&self.nonce);
        p[44..76].copy_from_slice(&self.proof);
        p
    }
}

/// One frame of the transfer protocol. Field comments give payload byte
/// offsets; `docs/transfer-protocol.md` has the full layout.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Frame {
    /// Node's first frame (stream 0).
    Hello(Hello),
    /// Server's answer to HELLO (stream 0).
    Challenge(Challenge),
    /// Node's proof (stream 0).
    Auth {
        /// HMAC-SHA256 proof that the node knows the key.
        proof: [u8; 32],
    },
    /// Keepalive probe (stream 0).
    Ping {
        /// Opaque bytes echoed in the PONG.
        data: u64,
    },
    /// Keepalive answer (stream 0).
    Pong {
        /// The PING's bytes.
        data: u64,
    },
    /// The sender ends the connection after this frame (stream 0).
    GoAway {
        /// Why ([`ErrorCode::NO_ERROR`] for a normal shutdown), bytes 0..4.
        code: ErrorCode,
        /// UTF-8 text, at most [`MAX_TEXT`] bytes, bytes 4.. .
        reason: String,
    },
    /// Non-fatal error report, about stream `stream` or the connection (0).
    Error {
        /// The stream concerned, 0 for the connection.
        stream: StreamId,
        /// The code, bytes 0..4.
        code: ErrorCode,
        /// UTF-8 text, at most [`MAX_TEXT`] bytes, bytes 4.. .
        message: String,
    },
    /// "I serve this port on the cluster address" (stream 0).
    Listen {
        /// The TCP port, bytes 0..2, not 0.
        port: u16,
    },
    /// "I no longer serve this port" (stream 0).
    Unlisten {
        /// The TCP port, bytes 0..2, not 0.
        port: u16,
    },
    /// Outcome of a LISTEN (stream 0).
    ListenResult {
        /// The port, bytes 0..2.
        port: u16,
        /// 0 on success, else a Linux errno, bytes 2..6.
        errno: u32,
    },
    /// A client connected to `local_port`; opens server stream `stream`.
    Accept {
        /// The new even stream id.
        stream: StreamId,
        /// The cluster port the client connected to.
        local_port: u16,
        /// The client's address and port.
        peer: SocketAddr,
    },
    /// Open a TCP connection to `addr`; opens node stream `stream`.
    Connect {
        /// The new odd stream id.
        stream: StreamId,
        /// Where to connect.
        addr: SocketAddr,
    },
    /// The CONNECT on `stream` succeeded.
    Connected {
        /// The stream.
        stream: StreamId,
        /// The local port of the server's connection, bytes 0..2.
        local_port: u16,
    },
    /// The CONNECT on `stream` failed; the stream is closed.
    ConnectFailed {
        /// The stream.
        stream: StreamId,
        /// A Linux errno, bytes 0..4.
        errno: u32,
    },
    /// Stream bytes (the whole payload).
    Data {
        /// The stream.
        stream: StreamId,
        /// The bytes, at most [`MAX_PAYLOAD`] in version 1 and
        /// [`MAX_DATA_PAYLOAD_V2`] in version 2.
        bytes: Vec<u8>,
    },
    /// The sender will send no more DATA on `stream`.
    Fin {
        /// The stream.
        stream: StreamId,
    },
    /// The stream is abandoned both ways.
    Reset {
        /// The stream.
        stream: StreamId,
        /// Why, bytes 0..4.
        code: ErrorCode,
    },
    /// More send credit on `stream`.
    Credit {
        /// The stream.
        stream: StreamId,
        /// Bytes added to the credit, 1..=2^31-1, bytes 0..4.
        increment: u32,
    },
    /// Set a socket option on the stream's client connection.
    SetOpt {
        /// The stream.
        stream: StreamId,
        /// Option id, bytes 0..2 (bytes 2..4 reserved, zero).
        option: SockOpt,
        /// Option value, bytes 4..8.
        value: u32,
    },
}

impl Frame {
    /// The frame's type.
    pub fn kind(&self) -> FrameKind {
        match self {
            Frame::Hello(_) => FrameKind::Hello,
            Frame::Challenge(_) => FrameKind::Challenge,
            Frame::Auth { .. } => FrameKind::Auth,
            Frame::Ping { .. } => FrameKind::Ping,
            Frame::Pong { .. } => FrameKind::Pong,
            Frame::GoAway { .. } => FrameKind::GoAway,
            Frame::Error { .. } => FrameKind::Error,
            Frame::Listen { .. } => FrameKind::Listen,
            Frame::Unlisten { .. } => FrameKind::Unlisten,
            Frame::ListenResult { .. } => FrameKind::ListenResult,
            Frame::Accept { .. } => FrameKind::Accept,
            Frame::Connect { .. } => FrameKind::Connect,
            Frame::Connected { .. } => FrameKind::Connected,
            Frame::ConnectFailed { .. } => FrameKind::ConnectFailed,
            Frame::Data { .. } => FrameKind::Data,
            Frame::Fin { .. } => FrameKind::Fin,
            Frame::Reset { .. } => FrameKind::Reset,
            Frame::Credit { .. } => FrameKind::Credit,
            Frame::SetOpt { .. } => FrameKind::SetOpt,
        }
    }

    /// The frame's stream id (0 for connection frames).
    pub fn stream(&self) -> StreamId {
        match self {
            Frame::Error { stream, .. }
            | Frame::Accept { stream, .. }
            | Frame::Connect { stream, .. }
            | Frame::Connected { stream, .. }
            | Frame::ConnectFailed { stream, .. }
            | Frame::Data { stream, .. }
            | Frame::Fin { stream }
            | Frame::Reset { stream, .. }
            | Frame::Credit { stream, .. }
            | Frame::SetOpt { stream, .. } => *stream,
            _ => StreamId::CONNECTION,
        }
    }

    /// Appends the frame, header and payload, to `dst` and returns its length,
    /// within the limits of version 1 (as before any version is negotiated).
    /// Refuses, appending nothing, frames the decoder would reject: DATA over
    /// [`MAX_PAYLOAD`], text over [`MAX_TEXT`], a stream frame on stream 0 or
    /// a connection frame on another stream, port 0 in LISTEN and UNLISTEN,
    /// a CREDIT of 0 or over 2^31 - 1.
    pub fn encode(&self, dst: &mut Vec<u8>) -> Result<usize, LocalError> {
        self.encode_for(1, dst)
    }

    /// [`Frame::encode`] within the limits of protocol `version`: the same
    /// but for DATA, which may carry [`max_data_payload`]`(version)` bytes.
    pub fn encode_for(&self, version: u16, dst: &mut Vec<u8>) -> Result<usize, LocalError> {
        self.check(max_data_payload(version))?;
        let start = dst.len();
        dst.extend_from_slice(&[0; HEADER_LEN]);
        dst[start + TYPE_AT] = self.kind() as u8;
        dst[start + STREAM_AT..start + STREAM_AT + 4]
            .copy_from_slice(&self.stream().0.to_be_bytes());
        match self {
            Frame::Hello(hello) => dst.extend_from_slice(&hello.payload()),
            Frame::Challenge(challenge) => dst.extend_from_slice(&challenge.payload()),
            Frame::Auth { proof } => dst.extend_from_slice(proof),
            Frame::Ping { data } | Frame::Pong { data } => {
                dst.extend_from_slice(&data.to_be_bytes())
            }
            Frame::GoAway { code, reason: text }
            | Frame::Error {
                code,
                message: text,
                ..
            } => {
                dst.extend_from_slice(&code.0.to_be_bytes());
                dst.extend_from_slice(text.as_bytes());
            }
            Frame::Listen { port } | Frame::Unlisten { port } => {
                dst.extend_from_slice(&port.to_be_bytes())
            }
            Frame::ListenResult { port, errno } => {
                dst.extend_from_slice(&port.to_be_bytes());
                dst.extend_from_slice(&errno.to_be_bytes());
            }
            Frame::Accept {
                local_port, peer, ..
            } => {
                dst.extend_from_slice(&[family(peer.ip()), 0]);
                dst.extend_from_slice(&local_port.to_be_bytes());
                dst.extend_from_slice(&peer.port().to_be_bytes());
                put_ip(dst, peer.ip());
            }
            Frame::Connect { addr, .. } => {
                dst.extend_from_slice(&[family(addr.ip()), 0]);
                dst.extend_from_slice(&addr.port().to_be_bytes());
                put_ip(dst, addr.ip());
            }
            Frame::Connected { local_port, .. } => dst.extend_from_slice(&local_port.to_be_bytes()),
            Frame::ConnectFailed { errno, .. } => dst.extend_from_slice(&errno.to_be_bytes()),
            Frame::Data { bytes, .. } => dst.extend_from_slice(bytes),
            Frame::Fin { .. } => {}
            Frame::Reset { code, .. } => dst.extend_from_slice(&code.0.to_be_bytes()),
            Frame::Credit { increment, .. } => dst.extend_from_slice(&increment.to_be_bytes()),
            Frame::SetOpt { option, value, .. } => {
                dst.extend_from_slice(&option.0.to_be_bytes());
                dst.extend_from_slice(&[0, 0]);
                dst.extend_from_slice(&value.to_be_bytes());
            }
        }
        let len = dst.len() - start - HEADER_LEN;
        // `check` bounded every payload by MAX_DATA_PAYLOAD_V2 at most, so
        // the length fits.
        dst[start + LEN_AT..start + LEN_AT + 4].copy_from_slice(&(len as u32).to_be_bytes());
        Ok(dst.len() - start)
    }

    /// Appends a DATA frame carrying `bytes` on `stream` to `dst`, as
    /// [`Frame::encode`] of a `Frame::Data` would, without first copying the
    /// payload into a frame (the relay's hot path). Refuses, appending
    /// nothing, stream 0 and payloads over [`MAX_PAYLOAD`] (version 1).
    pub fn encode_data(
        stream: StreamId,
        bytes: &[u8],
        dst: &mut Vec<u8>,
    ) -> Result<usize, LocalError> {
        Frame::encode_data_for(1, stream, bytes, dst)
    }

    /// [`Frame::encode_data`] within the limits of protocol `version`:
    /// payloads up to [`max_data_payload`]`(version)` bytes.
    pub fn encode_data_for(
        version: u16,
        stream: StreamId,
        bytes: &[u8],
        dst: &mut Vec<u8>,
    ) -> Result<usize, LocalError> {
        let max = max_data_payload(version);
        if bytes.len() > max {
            return Err(LocalError::TooLarge {
                what: "DATA payload",
                len: bytes.len() as u64,
                max: max as u64,
            });
        }
        if stream == StreamId::CONNECTION {
            return Err(LocalError::UnknownStream {
                op: FrameKind::Data.name(),
                stream,
            });
        }
        let header = Frame::data_header(stream, bytes.len() as u32);
        dst.reserve(HEADER_LEN + bytes.len());
        dst.extend_from_slice(&header);
        dst.extend_from_slice(bytes);
        Ok(HEADER_LEN + bytes.len())
    }

    /// The header of a DATA frame of `len` payload bytes on `stream`,
    /// unchecked (callers check the stream and `len` against the negotiated
    /// version's limit).
    pub(crate) fn data_header(stream: StreamId, len: u32) -> [u8; HEADER_LEN] {
        let mut header = [0u8; HEADER_LEN];
        header[LEN_AT..LEN_AT + 4].copy_from_slice(&len.to_be_bytes());
        header[TYPE_AT] = FrameKind::Data as u8;
        header[STREAM_AT..STREAM_AT + 4].copy_from_slice(&stream.0.to_be_bytes());
        header
    }

    /// The limits [`Frame::encode_for`] enforces, DATA payloads up to `max_data`.
    fn check(&self, max_data: usize) -> Result<(), LocalError> {
        let too_large = |what, len: usize, max: usize| {
            Err(LocalError::TooLarge {
                what,
                len: len as u64,
                max: max as u64,
            })
        };
        match self {
            Frame::Data { bytes, .. } if bytes.len() > max_data => {
                return too_large("DATA payload", bytes.len(), max_data)
            }
            Frame::GoAway { reason: text, .. } | Frame::Error { message: text, .. }
                if text.len() > MAX_TEXT =>
            {
                return too_large("text", text.len(), MAX_TEXT)
            }
            Frame::Listen { port: 0 } => return Err(LocalError::PortZero { op: "LISTEN" }),
            Frame::Unlisten { port: 0 } => return Err(LocalError::PortZero { op: "UNLISTEN" }),
            Frame::Credit { increment, .. }
                if *increment == 0 || *increment > super::MAX_WINDOW =>
            {
                return Err(LocalError::TooLarge {
                    what: "CREDIT increment (1..=2^31-1)",
                    len: u64::from(*increment),
                    max: u64::from(super::MAX_WINDOW),
                })
            }
            _ => {}
        }
        let stream = self.stream();
        match self.kind().on_connection() {
            Some(true) if stream != StreamId::CONNECTION => Err(LocalError::UnknownStream {
                op: self.kind().name(),
                stream,
            }),
            Some(false) if stream == StreamId::CONNECTION => Err(LocalError::UnknownStream {
                op: self.kind().name(),
                stream,
            }),
            _ => Ok(()),
        }
    }
}

fn family(ip: IpAddr) -> u8 {
    match ip {
        IpAddr::V4(_) => 4,
        IpAddr::V6(_) => 6,
    }
}

fn put_ip(dst: &mut Vec<u8>, ip: IpAddr) {
    match ip {
        IpAddr::V4(ip) => dst.extend_from_slice(&ip.octets()),
        IpAddr::V6(ip) => dst.extend_from_slice(&ip.octets()),
    }
}

/// Splits a byte stream into checked [`Frame`]s. Bytes may arrive in any
/// chunking; after an error every later call returns the same error.
///
/// A new decoder checks lengths against version 1's limits, which hold for
/// the handshake frames whatever the version; once the version is
/// negotiated, [`FrameDecoder::set_version`] switches to its limits (DATA up
/// to [`MAX_DATA_PAYLOAD_V2`] in version 2).
#[derive(Clone, Debug)]
pub struct FrameDecoder {
    header: [u8; HEADER_LEN],
    /// Header bytes of the current frame received so far.
    filled: usize,
    /// The validated header of the frame whose payload is arriving.
    body: Option<Body>,
    /// Bytes consumed since the start of the connection.
    consumed: u64,
    /// Offset of the frame being assembled (or just returned).
    frame_start: u64,
    failed: Option<XferError>,
    /// The protocol version whose limits apply (1 until negotiated).
    version: u16,
    /// Buffers of consumed DATA payloads given back
    /// ([`FrameDecoder::recycle`]), each of capacity at most the version's
    /// DATA limit.
    spare: Vec<Vec<u8>>,
    /// The capacity of the buffers in `spare`, in bytes.
    spare_bytes: usize,
    /// Payload bytes of the current DATA frame still to come that are not
    /// buffered: taken elsewhere ([`FrameDecoder::take_payload`]) and
    /// reported by [`FrameDecoder::consume_taken`], or dropped as fed.
    taken: usize,
    /// The whole payload length of the frame in `taken`.
    taken_len: usize,
}

/// Bytes of payload buffers a decoder keeps for reuse at most: 1 MiB, 64
/// buffers of 16 KiB or 4 of 256 KiB.
const MAX_SPARE_BYTES: usize = 64 * MAX_PAYLOAD;

impl Default for FrameDecoder {
    fn default() -> FrameDecoder {
        FrameDecoder {
            header: [0; HEADER_LEN],
            filled: 0,
            body: None,
            consumed: 0,
            frame_start: 0,
            failed: None,
            version: 1,
            spare: Vec::new(),
            spare_bytes: 0,
            taken: 0,
            taken_len: 0,
        }
    }
}

#[derive(Clone, Debug)]
struct Body {
    kind: FrameKind,
    stream: u32,
    len: usize,
    /// Payload bytes so far; capacity at most `len` (checked against the
    /// version's limit), or for DATA at most the larger of `len` and the
    /// capacity of a recycled buffer (see `FrameDecoder::data_buffer`).
    buf: Vec<u8>,
}

impl FrameDecoder {
    /// A decoder at the start of a connection, with version 1's limits.
    pub fn new() -> FrameDecoder {
        FrameDecoder::default()
    }

    /// A decoder at the start of a connection whose version is already
    /// known (tests, tools reading one direction of a captured connection).
    pub fn with_version(version: u16) -> FrameDecoder {
        let mut decoder = FrameDecoder::new();
        decoder.set_version(version);
        decoder
    }

    /// Applies the limits of protocol `version` to the frames from now on
    /// (a session calls it once the handshake has chosen the version and
    /// the peer has proved the key; 0 or 1 mean version 1's limits).
    pub fn set_version(&mut self, version: u16) {
        self.version = version.max(1);
    }

    /// The protocol version whose limits the decoder applies.
    pub fn version(&self) -> u16 {
        self.version
    }

    /// The largest DATA payload the decoder accepts now.
    pub fn max_data_payload(&self) -> usize {
        max_data_payload(self.version)
    }

    /// Consumes bytes from the front of `input` up to the end of the next
    /// frame and returns it, or `Ok(None)` once `input` is used up without
    /// completing one. The header is checked (type, flags, reserved, length
    /// for the type, stream id 0 or not) before any payload is buffered.
    pub fn decode(&mut self, input: &mut &[u8]) -> Result<Option<Frame>, XferError> {
        if let Some(error) = &self.failed {
            return Err(error.clone());
        }
        let result = self.step(input);
        if let Err(error) = &result {
            self.failed = Some(error.clone());
        }
        result
    }

    /// Takes back the buffer of a DATA payload this decoder returned, once
    /// its bytes are consumed: a later DATA payload is copied into it instead
    /// of a new allocation. Buffers under half of [`MAX_PAYLOAD`] or over the
    /// version's DATA limit of capacity (small or merged payloads), and
    /// buffers beyond 1 MiB kept in all, are dropped.
    pub fn recycle(&mut self, mut buf: Vec<u8>) {
        let cap = buf.capacity();
        if self.spare_bytes + cap <= MAX_SPARE_BYTES
            && (MAX_PAYLOAD / 2..=self.max_data_payload()).contains(&cap)
        {
            buf.clear();
            self.spare_bytes += cap;
            self.spare.push(buf);
        }
    }

    /// A buffer for a DATA payload of `len` bytes: a recycled one if any
    /// (grown by the caller if `len` exceeds it), else a new one, of
    /// [`MAX_PAYLOAD`] capacity when `len` is at least half that and at most
    /// that (so it can be recycled for any later version 1 payload; at most
    /// twice the bytes it holds), else of `len`.
    fn data_buffer(&mut self, len: usize) -> Vec<u8> {
        match self.spare.pop() {
            Some(buf) => {
                self.spare_bytes -= buf.capacity();
                buf
            }
            None if len >= MAX_PAYLOAD / 2 => Vec::with_capacity(len.max(MAX_PAYLOAD)),
            None => Vec::with_capacity(len),
        }
    }

    /// The DATA frame whose header was just decoded and none of whose
    /// payload was taken yet: its stream and payload length (never 0). A
    /// caller that feeds input only up to [`FrameDecoder::until_next_payload`]
    /// sees every frame in this state before its payload, and may then move
    /// the payload itself ([`FrameDecoder::take_payload`]).
    pub fn pending_data(&self) -> Option<(StreamId, usize)> {
        match &self.body {
            Some(body)
                if body.kind == FrameKind::Data && body.len > 0 && body.buf.capacity() == 0 =>
            {
                Some((StreamId(body.stream), body.len))
            }
            _ => None,
        }
    }

    /// Takes the payload of the [`FrameDecoder::pending_data`] frame out of
    /// the decoder: it is not buffered and no [`Frame::Data`] is returned
    /// for it; its bytes are accounted with [`FrameDecoder::consume_taken`]
    /// as they are moved elsewhere, and bytes fed to
    /// [`FrameDecoder::decode`] meanwhile count as payload and are dropped.
    /// Returns the stream and length, or `None` (nothing changed) when no
    /// DATA frame is pending.
    pub fn take_payload(&mut self) -> Option<(StreamId, usize)> {
        let pending = self.pending_data()?;
        self.body = None;
        self.taken = pending.1;
        self.taken_len = pending.1;
        Some(pending)
    }

    /// Payload bytes of a taken frame ([`FrameDecoder::take_payload`]) still
    /// to come; 0 when none is being taken.
    pub fn taken_remaining(&self) -> usize {
        self.taken
    }

    /// Accounts `n` payload bytes of the taken frame as consumed elsewhere;
    /// returns the bytes accounted (at most [`FrameDecoder::taken_remaining`]).
    /// The frame ends with its last byte.
    pub fn consume_taken(&mut self, n: usize) -> usize {
        let n = n.min(self.taken);
        self.taken -= n;
        self.consumed += n as u64;
        n
    }

    /// How many input bytes finish the current frame and the header after
    /// it and no more: a caller reading at most this much per read stops
    /// where the next frame's payload begins, so that frame's header is
    /// decoded before any of its payload is read
    /// ([`FrameDecoder::pending_data`]). Between frames (or in a header),
    /// the header bytes still missing.
    pub fn until_next_payload(&self) -> usize {
        if self.taken > 0 {
            return self.taken + HEADER_LEN;
        }
        match &self.body {
            Some(body) => body.len - body.buf.len() + HEADER_LEN,
            None => HEADER_LEN - self.filled,
        }
    }

    /// Offset in the connection of the header of the frame last returned (or
    /// being assembled).
    pub fn frame_offset(&self) -> u64 {
        self.frame_start
    }

    /// Whether the input so far ends at a frame boundary; if not, how many
    /// bytes of the unfinished frame arrived, as an error.
    pub fn finish(&self) -> Result<(), XferError> {
        let received = match &self.body {
            Some(body) => (HEADER_LEN + body.buf.len()) as u64,
            None if self.taken > 0 => (HEADER_LEN + self.taken_len - self.taken) as u64,
            None => self.filled as u64,
        };
        if received == 0 {
            Ok(())
        } else {
            Err(XferError::Truncated {
                offset: self.frame_start,
                received,
            })
        }
    }

    fn step(&mut self, input: &mut &[u8]) -> Result<Option<Frame>, XferError> {
        if self.taken > 0 {
            // A payload taken elsewhere: fed bytes of it are dropped.
            let n = self.taken.min(input.len());
            *input = &input[n..];
            self.consume_taken(n);
            if self.taken > 0 {
                return Ok(None);
            }
        }
        if self.body.is_none() {
            if self.filled == 0 {
                self.frame_start = self.consumed;
            }
            let n = (HEADER_LEN - self.filled).min(input.len());
            self.header[self.filled..self.filled + n].copy_from_slice(&input[..n]);
            *input = &input[n..];
            self.filled += n;
            self.consumed += n as u64;
            if self.filled < HEADER_LEN {
                return Ok(None);
            }
            self.filled = 0;
            let (kind, stream, len) = check_header(&self.header, self.frame_start, self.version)?;
            self.body = Some(Body {
                kind,
                stream,
                len,
                buf: Vec::new(),
            });
        }
        let Some(body) = &mut self.body else {
            return Ok(None);
        };
        let need = body.len - body.buf.len();
        let n = need.min(input.len());
        if n == 0 && need > 0 {
            // Just the header so far: nothing is allocated for the payload
            // yet (it may be taken elsewhere, `take_payload`).
            return Ok(None);
        }
        if n == need && body.buf.is_empty() {
            // The whole payload is here: parse it in place.
            let payload = &input[..n];
            *input = &input[n..];
            self.consumed += n as u64;
            let (kind, stream) = (body.kind, body.stream);
            self.body = None;
            if kind == FrameKind::Data {
                // Copied into a recycled buffer when there is one.
                let mut bytes = if n == 0 {
                    Vec::new()
                } else {
                    self.data_buffer(n)
                };
                bytes.extend_from_slice(payload);
                return Ok(Some(Frame::Data {
                    stream: StreamId(stream),
                    bytes,
                }));
            }
            return parse_payload(kind, stream, payload, self.frame_start).map(Some);
        }
        if body.buf.capacity() == 0 {
            let (kind, len) = (body.kind, body.len);
            let mut buf = if kind == FrameKind::Data {
                self.data_buffer(len)
            } else {
                Vec::new()
            };
            buf.reserve_exact(len);
            let Some(body) = &mut self.body else {
                return Ok(None);
            };
            body.buf = buf;
        }
        let Some(body) = &mut self.body else {
            return Ok(None);
        };
        body.buf.extend_from_slice(&input[..n]);
        *input = &input[n..];
        self.consumed += n as u64;
        if body.buf.len() < body.len {
            return Ok(None);
        }
        let (kind, stream, buf) = (body.kind, body.stream, std::mem::take(&mut body.buf));
        self.body = None;
        if kind == FrameKind::Data {
            // Hand the buffer over instead of copying it.
            return Ok(Some(Frame::Data {
                stream: StreamId(stream),
                bytes: buf,
            }));
        }
        parse_payload(kind, stream, &buf, self.frame_start).map(Some)
    }
}

/// Checks a frame header against the limits of `version`; returns the type,
/// stream id and payload length.
fn check_header(
    h: &[u8; HEADER_LEN],
    offset: u64,
    version: u16,
) -> Result<(FrameKind, u32, usize), XferError> {
    let frame_type = h[TYPE_AT];
    let kind = FrameKind::from_byte(frame_type)
        .ok_or(XferError::UnknownFrameType { offset, frame_type })?;
    if h[FLAGS_AT] != 0 {
        return Err(XferError::ReservedNotZero {
            offset,
            kind,
            field: "flags",
            at: FLAGS_AT,
            value: u16::from(h[FLAGS_AT]),
        });
    }
    let reserved = u16::from_be_bytes([h[RESERVED_AT], h[RESERVED_AT + 1]]);
    if reserved != 0 {
        return Err(XferError::ReservedNotZero {
            offset,
            kind,
            field: "reserved",
            at: RESERVED_AT,
            value: reserved,
        });
    }
    let len = be_u32(h, LEN_AT);
    let (min, max) = kind.payload_range_in(version);
    if !(min..=max).contains(&len) {
        return Err(XferError::BadLength {
            offset,
            kind,
            len,
            min,
            max,
        });
    }
    let stream = be_u32(h, STREAM_AT);
    let reason = match kind.on_connection() {
        Some(true) if stream != 0 => Some("must be 0 for a connection frame"),
        Some(false) if stream == 0 => Some("must not be 0 for a stream frame"),
        _ => None,
    };
    if let Some(reason) = reason {
        return Err(XferError::BadStreamId {
            offset,
            kind,
            stream,
            reason,
        });
    }
    Ok((kind, stream, len as usize))
}

/// Parses a payload whose length is already within the type's range.
fn parse_payload(kind: FrameKind, stream: u32, p: &[u8], offset: u64) -> Result<Frame, XferError> {
    let bad = |field, at, value: u64| XferError::BadField {
        offset,
        kind,
        field,
        at,
        value,
    };
    let sid = StreamId(stream);
    Ok(match kind {
        FrameKind::Hello => {
            let got = [p[0], p[1], p[2], p[3]];
            if got != MAGIC {
                return Err(XferError::BadMagic { offset, got });
            }
            Frame::Hello(Hello {
                min_version: be_u16(p, 4),
                max_version: be_u16(p, 6),
                node_id: be_u32(p, 8),
                initial_window: be_u32(p, 12),
                max_streams: be_u32(p, 16),
                nonce: array32(p, 20),
            })
        }
        FrameKind::Challenge => {
            let reserved = be_u16(p, 2);
            if reserved != 0 {
                return Err(bad("reserved", 2, u64::from(reserved)));
            }
            Frame::Challenge(Challenge {
                version: be_u16(p, 0),
                initial_window: be_u32(p, 4),
                max_streams: be_u32(p, 8),
                nonce: array32(p, 12),
                proof: array32(p, 44),
            })
        }
        FrameKind::Auth => Frame::Auth {
            proof: array32(p, 0),
        },
        FrameKind::Ping => Frame::Ping { data: be_u64(p, 0) },
        FrameKind::Pong => Frame::Pong { data: be_u64(p, 0) },
        FrameKind::GoAway => Frame::GoAway {
            code: ErrorCode(be_u32(p, 0)),
            reason: received_text(&p[4..]),
        },
        FrameKind::Error => Frame::Error {
            stream: sid,
            code: ErrorCode(be_u32(p, 0)),
            message: received_text(&p[4..]),
        },
        FrameKind::Listen | FrameKind::Unlisten => {
            let port = be_u16(p, 0);
            if port == 0 {
                return Err(bad("port", 0, 0));
            }
            if kind == FrameKind::Listen {
                Frame::Listen { port }
            } else {
                Frame::Unlisten { port }
            }
        }
        FrameKind::ListenResult => Frame::ListenResult {
            port: be_u16(p, 0),
            errno: be_u32(p, 2),
        },
        FrameKind::Accept => {
            let ip = ip_at(p, 6, &bad)?;
            Frame::Accept {
                stream: sid,
                local_port: be_u16(p, 2),
                peer: SocketAddr::new(ip, be_u16(p, 4)),
            }
        }
        FrameKind::Connect => {
            let ip = ip_at(p, 4, &bad)?;
            Frame::Connect {
                stream: sid,
                addr: SocketAddr::new(ip, be_u16(p, 2)),
            }
        }
        FrameKind::Connected => Frame::Connected {
            stream: sid,
            local_port: be_u16(p, 0),
        },
        FrameKind::ConnectFailed => Frame::ConnectFailed {
            stream: sid,
            errno: be_u32(p, 0),
        },
        FrameKind::Data => Frame::Data {
            stream: sid,
            bytes: p.to_vec(),
        },
        FrameKind::Fin => Frame::Fin { stream: sid },
        FrameKind::Reset => Frame::Reset {
            stream: sid,
            code: ErrorCode(be_u32(p, 0)),
        },
        FrameKind::Credit => Frame::Credit {
            stream: sid,
            increment: be_u32(p, 0),
        },
        FrameKind::SetOpt => {
            let reserved = be_u16(p, 2);
            if reserved != 0 {
                return Err(bad("reserved", 2, u64::from(reserved)));
            }
            Frame::SetOpt {
                stream: sid,
                option: SockOpt(be_u16(p, 0)),
                value: be_u32(p, 4),
            }
        }
    })
}

/// The address after the family byte (payload byte 0) and reserved byte
/// (byte 1, zero): 4 bytes for family 4, 16 for family 6, at `at`, ending the
/// payload.
fn ip_at(
    p: &[u8],
    at: usize,
    bad: &impl Fn(&'static str, usize, u64) -> XferError,
) -> Result<IpAddr, XferError> {
    if p[1] != 0 {
        return Err(bad("reserved", 1, u64::from(p[1])));
    }
    let rest = &p[at..];
    match (p[0], rest.len()) {
        (4, 4) => Ok(IpAddr::V4(Ipv4Addr::new(
            rest[0], rest[1], rest[2], rest[3],
        ))),
        (6, 16) => {
            let mut octets = [0; 16];
            octets.copy_from_slice(rest);
            Ok(IpAddr::V6(Ipv6Addr::from(octets)))
        }
        (4 | 6, len) => Err(bad("address length", at, len as u64)),
        (family, _) => Err(bad("family", 0, u64::from(family))),
    }
}

fn be_u16(p: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([p[at], p[at + 1]])
}

fn be_u32(p: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([p[at], p[at + 1], p[at + 2], p[at + 3]])
}

fn be_u64(p: &[u8], at: usize) -> u64 {
    let mut b = [0; 8];
    b.copy_from_slice(&p[at..at + 8]);
    u64::from_be_bytes(b)
}

fn array32(p: &[u8], at: usize) -> [u8; 32] {
    let mut b = [0; 32];
    b.copy_from_slice(&p[at..at + 32]);
    b
}

/// A received GOAWAY reason or ERROR message: invalid UTF-8 is replaced,
/// not rejected, and the result is cut at a character boundary to
/// [`MAX_TEXT`] bytes (each replacement character takes three), so that a
/// decoded frame keeps the limit [`Frame::encode`] checks.
fn received_text(bytes: &[u8]) -> String {
    let mut text = String::from_utf8_lossy(bytes).into_owned();
    let mut end = text.len().min(MAX_TEXT);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text.truncate(end);
    text
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::xfer::MAX_DATA_PAYLOAD_V2;
    use proptest::prelude::*;

    /// CREDIT of 4096 bytes on stream 3 (`docs/transfer-protocol.md` example).
    const CREDIT_BYTES: [u8; 16] = [
        0x00, 0x00, 0x00, 0x04, 0x33, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x03, 0x00, 0x00, 0x10,
        0x00,
    ];

    /// ACCEPT of a client at 192.0.2.7:40000 on port 80, stream 2.
    const ACCEPT_BYTES: [u8; 22] = [
        0x00, 0x00, 0x00, 0x0a, 0x20, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0x04, 0x00, 0x00,
        0x50, 0x9c, 0x40, 0xc0, 0x00, 0x02, 0x07,
    ];

    fn encode(frame: &Frame) -> Vec<u8> {
        let mut out = Vec::new();
        let len = frame.encode(&mut out).unwrap();
        assert_eq!(len, out.len());
        out
    }

    fn decode_all(mut bytes: &[u8]) -> Result<Vec<Frame>, XferError> {
        let mut decoder = FrameDecoder::new();
        let mut frames = Vec::new();
        while let Some(frame) = decoder.decode(&mut bytes)? {
            frames.push(frame);
        }
        assert!(bytes.is_empty());
        decoder.finish()?;
        Ok(frames)
    }

    /// One frame of every type.
    fn examples() -> Vec<Frame> {
        let v6: SocketAddr = "[2001:db8::1]:443".parse().unwrap();
        let v4: SocketAddr = "192.0.2.7:40000".parse().unwrap();
        vec![
            Frame::Hello(Hello {
                min_version: 1,
                max_version: 3,
                node_id: 9,
                initial_window: 65536,
                max_streams: 1024,
                nonce: [7; 32],
            }),
            Frame::Challenge(Challenge {
                version: 1,
                initial_window: 1,
                max_streams: 0,
                nonce: [8; 32],
                proof: [9; 32],
            }),
            Frame::Auth { proof: [3; 32] },
            Frame::Ping { data: u64::MAX },
            Frame::Pong { data: 1 },
            Frame::GoAway {
                code: ErrorCode::AUTH_FAILED,
                reason: "bad key".into(),
            },
            Frame::Error {
                stream: StreamId(5),
                code: ErrorCode::UNSUPPORTED,
                message: String::new(),
            },
            Frame::Error {
                stream: StreamId::CONNECTION,
                code: ErrorCode(999),
                message: "é".into(),
            },
            Frame::Listen { port: 80 },
            Frame::Unlisten { port: 65535 },
            Frame::ListenResult {
                port: 80,
                errno: crate::xfer::errno::EADDRINUSE,
            },
            Frame::Accept {
                stream: StreamId(2),
                local_port: 80,
                peer: v4,
            },
            Frame::Accept {
                stream: StreamId(4),
                local_port: 8080,
                peer: v6,
            },
            Frame::Connect {
                stream: StreamId(1),
                addr: v4,
            },
            Frame::Connect {
                stream: StreamId(3),
                addr: v6,
            },
            Frame::Connected {
                stream: StreamId(1),
                local_port: 50000,
            },
            Frame::ConnectFailed {
                stream: StreamId(3),
                errno: crate::xfer::errno::ECONNREFUSED,
            },
            Frame::Data {
                stream: StreamId(2),
                bytes: b"GET / HTTP/1.1\r\n\r\n".to_vec(),
            },
            Frame::Data {
                stream: StreamId(2),
                bytes: vec![0xab; MAX_PAYLOAD],
            },
            Frame::Data {
                stream: StreamId(2),
                bytes: Vec::new(),
            },
            Frame::Fin {
                stream: StreamId(u32::MAX),
            },
            Frame::Reset {
                stream: StreamId(2),
                code: ErrorCode::CANCEL,
            },
            Frame::Credit {
                stream: StreamId(3),
                increment: crate::xfer::MAX_WINDOW,
            },
            Frame::SetOpt {
                stream: StreamId(2),
                option: SockOpt::NODELAY,
                value: 1,
            },
        ]
    }

    #[test]
    fn every_frame_type_round_trips() {
        let frames = examples();
        let kinds: BTreeSet<FrameKind> = frames.iter().map(Frame::kind).collect();
        assert_eq!(kinds.len(), FrameKind::ALL.len(), "an example per type");
        for frame in frames {
            let bytes = encode(&frame);
            assert_eq!(bytes[TYPE_AT], frame.kind() as u8);
            assert_eq!(decode_all(&bytes), Ok(vec![frame.clone()]), "{frame:?}");
        }
    }

    use std::collections::BTreeSet;

    #[test]
    fn encodes_the_documented_examples() {
        let credit = Frame::Credit {
            stream: StreamId(3),
            increment: 4096,
        };
        assert_eq!(encode(&credit), CREDIT_BYTES);
        let accept = Frame::Accept {
            stream: StreamId(2),
            local_port: 80,
            peer: "192.0.2.7:40000".parse().unwrap(),
        };
        assert_eq!(encode(&accept), ACCEPT_BYTES);
        assert_eq!(decode_all(&ACCEPT_BYTES), Ok(vec![accept]));
    }

    #[test]
    fn type_bytes_and_names_are_consistent() {
        for kind in FrameKind::ALL {
            assert_eq!(FrameKind::from_byte(kind as u8), Some(kind));
            assert_eq!(kind.to_string(), kind.name());
        }
        assert_eq!(FrameKind::from_byte(0), None);
        assert_eq!(FrameKind::from_byte(0xff), None);
    }

    #[test]
    fn encode_refuses_what_decode_would_reject() {
        let mut out = Vec::new();
        let too_big = Frame::Data {
            stream: StreamId(1),
            bytes: vec![0; MAX_PAYLOAD + 1],
        };
        assert!(matches!(
            too_big.encode(&mut out),
            Err(LocalError::TooLarge { .. })
        ));
        let long = Frame::GoAway {
            code: ErrorCode::NO_ERROR,
            reason: "x".repeat(MAX_TEXT + 1),
        };
        assert!(long.encode(&mut out).is_err());
        let on_zero = Frame::Fin {
            stream: StreamId(0),
        };
        assert!(on_zero.encode(&mut out).is_err());
        assert!(Frame::Listen { port: 0 }.encode(&mut out).is_err());
        let zero_credit = Frame::Credit {
            stream: StreamId(1),
            increment: 0,
        };
        assert!(zero_credit.encode(&mut out).is_err());
        assert!(Frame::encode_data(StreamId(1), &[0; MAX_PAYLOAD + 1], &mut out).is_err());
        assert!(Frame::encode_data(StreamId(0), b"x", &mut out).is_err());
        assert!(out.is_empty(), "nothing appended on refusal");
    }

    #[test]
    fn rejects_an_unknown_type_naming_offset_and_byte() {
        let mut bytes = encode(&Frame::Ping { data: 1 });
        bytes.extend_from_slice(&[0, 0, 0, 0, 0x99, 0, 0, 0, 0, 0, 0, 0]);
        let err = decode_all(&bytes).unwrap_err();
        assert_eq!(
            err,
            XferError::UnknownFrameType {
                offset: 20,
                frame_type: 0x99
            }
        );
        assert_eq!(
            err.to_string(),
            "frame at byte 20: unknown frame type 0x99 at header byte 4"
        );
    }

    #[test]
    fn rejects_flags_and_reserved_bits() {
        let mut bytes = CREDIT_BYTES;
        bytes[FLAGS_AT] = 1;
        assert!(matches!(
            decode_all(&bytes),
            Err(XferError::ReservedNotZero { field: "flags", .. })
        ));
        let mut bytes = CREDIT_BYTES;
        bytes[RESERVED_AT + 1] = 1;
        assert!(matches!(
            decode_all(&bytes),
            Err(XferError::ReservedNotZero {
                field: "reserved",
                ..
            })
        ));
    }

    #[test]
    fn rejects_a_huge_length_before_buffering_any_payload() {
        let mut decoder = FrameDecoder::new();
        let header = [0xff, 0xff, 0xff, 0xff, 0x30, 0, 0, 0, 0, 0, 0, 1];
        let mut input: &[u8] = &header;
        let err = decoder.decode(&mut input).unwrap_err();
        assert_eq!(
            err,
            XferError::BadLength {
                offset: 0,
                kind: FrameKind::Data,
                len: u32::MAX,
                min: 0,
                max: MAX_PAYLOAD as u32
            }
        );
        assert_eq!(err.code(), ErrorCode::FRAME_SIZE);
        // Poisoned: the same error again, whatever comes next.
        let mut more: &[u8] = &CREDIT_BYTES;
        assert_eq!(decoder.decode(&mut more), Err(err));
    }

    #[test]
    fn rejects_wrong_lengths_for_fixed_size_frames() {
        let mut bytes = CREDIT_BYTES.to_vec();
        bytes[3] = 5;
        bytes.push(0);
        assert!(matches!(
            decode_all(&bytes),
            Err(XferError::BadLength {
                kind: FrameKind::Credit,
                len: 5,
                ..
            })
        ));
    }

    #[test]
    fn rejects_stream_ids_on_the_wrong_side_of_zero() {
        let mut bytes = CREDIT_BYTES;
        bytes[STREAM_AT + 3] = 0;
        assert!(matches!(
            decode_all(&bytes),
            Err(XferError::BadStreamId { stream: 0, .. })
        ));
        let mut ping = encode(&Frame::Ping { data: 0 });
        ping[STREAM_AT] = 1;
        assert!(matches!(
            decode_all(&ping),
            Err(XferError::BadStreamId {
                kind: FrameKind::Ping,
                ..
            })
        ));
    }

    #[test]
    fn rejects_bad_payload_fields() {
        let mut hello = encode(&examples()[0]);
        hello[HEADER_LEN] = b'X';
        assert!(matches!(
            decode_all(&hello),
            Err(XferError::BadMagic { offset: 0, .. })
        ));
        let mut accept = ACCEPT_BYTES;
        accept[HEADER_LEN] = 6; // family 6 with a 4-byte address
        assert!(matches!(
            decode_all(&accept),
            Err(XferError::BadField {
                field: "address length",
                ..
            })
        ));
        accept[HEADER_LEN] = 5;
        assert!(matches!(
            decode_all(&accept),
            Err(XferError::BadField {
                field: "family",
                value: 5,
                ..
            })
        ));
        let mut listen = encode(&Frame::Listen { port: 1 });
        listen[HEADER_LEN + 1] = 0;
        assert!(matches!(
            decode_all(&listen),
            Err(XferError::BadField { field: "port", .. })
        ));
    }

    #[test]
    fn data_payloads_reuse_recycled_buffers_whole_or_split() {
        let mut wire = Vec::new();
        Frame::encode_data(StreamId(1), &[1; 100], &mut wire).unwrap();
        Frame::encode_data(StreamId(3), &[2; 3000], &mut wire).unwrap();
        let mut d = FrameDecoder::new();
        let spare = Vec::with_capacity(MAX_PAYLOAD);
        let at = spare.as_ptr();
        d.recycle(spare);
        // Whole in the input: copied into the recycled buffer.
        let mut input = &wire[..HEADER_LEN + 100 + HEADER_LEN + 1000];
        let Some(Frame::Data { stream, bytes }) = d.decode(&mut input).unwrap() else {
            panic!("DATA expected");
        };
        assert_eq!((stream, &bytes[..]), (StreamId(1), &[1u8; 100][..]));
        assert_eq!(bytes.as_ptr(), at);
        d.recycle(bytes);
        // Split across two inputs: assembled in it too.
        assert_eq!(d.decode(&mut input).unwrap(), None);
        let mut rest = &wire[HEADER_LEN + 100 + HEADER_LEN + 1000..];
        let Some(Frame::Data { stream, bytes }) = d.decode(&mut rest).unwrap() else {
            panic!("DATA expected");
        };
        assert_eq!((stream, &bytes[..]), (StreamId(3), &[2u8; 3000][..]));
        assert_eq!(bytes.as_ptr(), at);
        assert!(rest.is_empty());
        // Without a spare buffer decoding allocates as before.
        let mut again = &wire[..HEADER_LEN + 100];
        let Some(Frame::Data { bytes: fresh, .. }) = d.decode(&mut again).unwrap() else {
            panic!("DATA expected");
        };
        assert_eq!(fresh, [1; 100]);
        assert_ne!(fresh.as_ptr(), at);
        assert_eq!(fresh.capacity(), 100);
        // A large payload gets a full-size buffer, fit for any later one.
        let mut big = Vec::new();
        Frame::encode_data(StreamId(1), &[3; 9000], &mut big).unwrap();
        let Some(Frame::Data { bytes, .. }) = d.decode(&mut &big[..]).unwrap() else {
            panic!("DATA expected");
        };
        assert_eq!(bytes.capacity(), MAX_PAYLOAD);
    }

    /// A DATA frame of `len` bytes on stream 1, as version 2 encodes it.
    fn data_v2(len: usize) -> Vec<u8> {
        let mut out = Vec::new();
        Frame::encode_data_for(2, StreamId(1), &vec![0x5a; len], &mut out).unwrap();
        out
    }

    /// Decodes whole frames with a decoder at `version`.
    fn decode_all_in(version: u16, mut bytes: &[u8]) -> Result<Vec<Frame>, XferError> {
        let mut decoder = FrameDecoder::with_version(version);
        let mut frames = Vec::new();
        while let Some(frame) = decoder.decode(&mut bytes)? {
            frames.push(frame);
        }
        decoder.finish()?;
        Ok(frames)
    }

    #[test]
    fn data_limits_follow_the_version() {
        assert_eq!(FrameKind::Data.payload_range(), (0, 16_384));
        assert_eq!(FrameKind::Data.payload_range_in(1), (0, 16_384));
        assert_eq!(FrameKind::Data.payload_range_in(2), (0, 262_144));
        for kind in FrameKind::ALL {
            if kind != FrameKind::Data {
                assert_eq!(kind.payload_range_in(2), kind.payload_range(), "{kind}");
            }
        }
        assert_eq!(FrameDecoder::new().version(), 1);
        assert_eq!(FrameDecoder::new().max_data_payload(), MAX_PAYLOAD);
        assert_eq!(FrameDecoder::with_version(2).max_data_payload(), 262_144);
    }

    #[test]
    fn a_version_1_decoder_refuses_a_data_payload_of_16385_bytes() {
        let bytes = data_v2(MAX_PAYLOAD + 1);
        for version in [0, 1] {
            let err = decode_all_in(version, &bytes).unwrap_err();
            assert_eq!(
                err,
                XferError::BadLength {
                    offset: 0,
                    kind: FrameKind::Data,
                    len: 16_385,
                    min: 0,
                    max: 16_384
                }
            );
            assert_eq!(err.code(), ErrorCode::FRAME_SIZE);
        }
        // And before any version is set, as for the handshake frames.
        assert!(decode_all(&bytes).is_err());
    }

    #[test]
    fn a_version_2_decoder_takes_64_kib_and_256_kib_data_payloads() {
        for len in [MAX_PAYLOAD + 1, 64 * 1024, MAX_DATA_PAYLOAD_V2] {
            let frames = decode_all_in(2, &data_v2(len)).unwrap();
            assert_eq!(
                frames,
                [Frame::Data {
                    stream: StreamId(1),
                    bytes: vec![0x5a; len]
                }]
            );
        }
    }

    #[test]
    fn a_version_2_decoder_refuses_a_data_payload_over_262144_bytes() {
        let mut bytes = data_v2(MAX_DATA_PAYLOAD_V2);
        bytes[LEN_AT..LEN_AT + 4].copy_from_slice(&(262_145u32).to_be_bytes());
        bytes.push(0);
        let err = decode_all_in(2, &bytes).unwrap_err();
        assert_eq!(
            err,
            XferError::BadLength {
                offset: 0,
                kind: FrameKind::Data,
                len: 262_145,
                min: 0,
                max: 262_144
            }
        );
        assert_eq!(err.code(), ErrorCode::FRAME_SIZE);
    }

    #[test]
    fn version_2_keeps_every_other_frames_limits() {
        // A GOAWAY one byte over its version 1 range is refused at version 2 too.
        let mut bytes = encode(&Frame::GoAway {
            code: ErrorCode::NO_ERROR,
            reason: "a".repeat(MAX_TEXT),
        });
        let len = (4 + MAX_TEXT + 1) as u32;
        bytes[LEN_AT..LEN_AT + 4].copy_from_slice(&len.to_be_bytes());
        bytes.push(b'a');
        assert!(matches!(
            decode_all_in(2, &bytes),
            Err(XferError::BadLength {
                kind: FrameKind::GoAway,
                ..
            })
        ));
    }

    #[test]
    fn set_version_applies_to_the_frames_after_it() {
        let big = data_v2(20_000);
        let mut bytes = encode(&Frame::Ping { data: 9 });
        bytes.extend_from_slice(&big);
        let mut d = FrameDecoder::new();
        let mut input = &bytes[..];
        assert_eq!(d.decode(&mut input), Ok(Some(Frame::Ping { data: 9 })));
        d.set_version(2);
        assert!(matches!(d.decode(&mut input), Ok(Some(Frame::Data { .. }))));
        assert!(input.is_empty());
    }

    #[test]
    fn encode_for_checks_the_versions_data_limit() {
        let mut out = Vec::new();
        let frame = |len| Frame::Data {
            stream: StreamId(1),
            bytes: vec![1; len],
        };
        assert!(frame(MAX_PAYLOAD + 1).encode(&mut out).is_err());
        assert!(frame(MAX_PAYLOAD + 1).encode_for(1, &mut out).is_err());
        assert!(frame(MAX_DATA_PAYLOAD_V2 + 1)
            .encode_for(2, &mut out)
            .is_err());
        assert!(Frame::encode_data(StreamId(1), &[0; MAX_PAYLOAD + 1], &mut out).is_err());
        assert!(
            Frame::encode_data_for(2, StreamId(1), &[0; MAX_DATA_PAYLOAD_V2 + 1], &mut out)
                .is_err()
        );
        assert!(out.is_empty(), "nothing appended on refusal");
        let n = frame(MAX_DATA_PAYLOAD_V2).encode_for(2, &mut out).unwrap();
        assert_eq!(n, HEADER_LEN + MAX_DATA_PAYLOAD_V2);
        assert_eq!(out[..4], (262_144u32).to_be_bytes());
        let mut direct = Vec::new();
        Frame::encode_data_for(2, StreamId(1), &[1; MAX_DATA_PAYLOAD_V2], &mut direct).unwrap();
        assert_eq!(out, direct);
    }

    #[test]
    fn large_version_2_payloads_reuse_recycled_buffers_within_a_byte_budget() {
        let mut d = FrameDecoder::with_version(2);
        let payload = |d: &mut FrameDecoder, len: usize| {
            let bytes = data_v2(len);
            let Some(Frame::Data { bytes, .. }) = d.decode(&mut &bytes[..]).unwrap() else {
                panic!("DATA expected");
            };
            bytes
        };
        let first = payload(&mut d, 64 * 1024);
        assert!(first.capacity() >= 64 * 1024);
        let at = first.as_ptr();
        d.recycle(first);
        let second = payload(&mut d, 64 * 1024);
        assert_eq!(second.as_ptr(), at, "the recycled buffer is reused");
        // At most 1 MiB is kept: four 256 KiB buffers, not five.
        let held: Vec<Vec<u8>> = (0..5)
            .map(|_| payload(&mut d, MAX_DATA_PAYLOAD_V2))
            .collect();
        for buf in held {
            d.recycle(buf);
        }
        assert_eq!(d.spare.len(), 4);
        assert_eq!(d.spare_bytes, 4 * MAX_DATA_PAYLOAD_V2);
        // A version 1 decoder drops buffers over its limit.
        let mut v1 = FrameDecoder::new();
        v1.recycle(Vec::with_capacity(64 * 1024));
        assert!(v1.spare.is_empty());
    }

    #[test]
    fn reports_a_truncated_frame_at_eof() {
        let bytes = encode(&examples()[0]);
        let mut decoder = FrameDecoder::new();
        let mut input = &bytes[..20];
        assert_eq!(decoder.decode(&mut input), Ok(None));
        assert_eq!(
            decoder.finish(),
            Err(XferError::Truncated {
                offset: 0,
                received: 20
            })
        );
    }

    #[test]
    fn invalid_utf8_text_is_replaced_not_rejected() {
        let mut bytes = encode(&Frame::GoAway {
            code: ErrorCode::NO_ERROR,
            reason: "ab".into(),
        });
        let n = bytes.len();
        bytes[n - 1] = 0xff;
        assert_eq!(
            decode_all(&bytes),
            Ok(vec![Frame::GoAway {
                code: ErrorCode::NO_ERROR,
                reason: "a\u{fffd}".into()
            }])
        );
    }

    #[test]
    fn replaced_text_stays_within_max_text_and_encodes_again() {
        // 512 invalid bytes become 512 three-byte replacement characters.
        let mut bytes = encode(&Frame::GoAway {
            code: ErrorCode::NO_ERROR,
            reason: "a".repeat(MAX_TEXT),
        });
        let n = bytes.len();
        bytes[n - MAX_TEXT..].fill(0xff);
        let mut error = encode(&Frame::Error {
            stream: StreamId(2),
            code: ErrorCode::CANCEL,
            message: "a".repeat(MAX_TEXT),
        });
        let n = error.len();
        error[n - MAX_TEXT..].fill(0x80);
        bytes.extend_from_slice(&error);
        let frames = decode_all(&bytes).unwrap();
        assert_eq!(frames.len(), 2);
        for frame in &frames {
            let (Frame::GoAway { reason: text, .. } | Frame::Error { message: text, .. }) = frame
            else {
                panic!("decoded {frame:?}");
            };
            assert!(text.len() <= MAX_TEXT, "{} bytes", text.len());
            assert!(text.chars().all(|c| c == '\u{fffd}'));
            assert_eq!(decode_all(&encode(frame)), Ok(vec![frame.clone()]));
        }
    }

    fn addr() -> impl Strategy<Value = SocketAddr> {
        prop_oneof![
            (any::<[u8; 4]>(), any::<u16>())
                .prop_map(|(ip, port)| SocketAddr::new(IpAddr::from(ip), port)),
            (any::<[u8; 16]>(), any::<u16>())
                .prop_map(|(ip, port)| SocketAddr::new(IpAddr::from(ip), port)),
        ]
    }

    pub(crate) fn frame() -> impl Strategy<Value = Frame> {
        let sid = (1..=u32::MAX).prop_map(StreamId);
        let text = "\\PC{0,100}";
        prop_oneof![
            (any::<[u16; 2]>(), any::<[u32; 3]>(), any::<[u8; 32]>()).prop_map(|(v, n, nonce)| {
                Frame::Hello(Hello {
                    min_version: v[0],
                    max_version: v[1],
                    node_id: n[0],
                    initial_window: n[1],
                    max_streams: n[2],
                    nonce,
                })
            }),
            (
                any::<u16>(),
                any::<[u32; 2]>(),
                any::<[u8; 32]>(),
                any::<[u8; 32]>()
            )
                .prop_map(|(version, n, nonce, proof)| Frame::Challenge(Challenge {
                    version,
                    initial_window: n[0],
                    max_streams: n[1],
                    nonce,
                    proof,
                })),
            any::<[u8; 32]>().prop_map(|proof| Frame::Auth { proof }),
            any::<u64>().prop_map(|data| Frame::Ping { data }),
            any::<u64>().prop_map(|data| Frame::Pong { data }),
            (any::<u32>(), text).prop_map(|(c, reason)| Frame::GoAway {
                code: ErrorCode(c),
                reason
            }),
            (any::<u32>(), any::<u32>(), text).prop_map(|(s, c, message)| Frame::Error {
                stream: StreamId(s),
                code: ErrorCode(c),
                message
            }),
            (1..=u16::MAX).prop_map(|port| Frame::Listen { port }),
            (1..=u16::MAX).prop_map(|port| Frame::Unlisten { port }),
            (any::<u16>(), any::<u32>())
                .prop_map(|(port, errno)| Frame::ListenResult { port, errno }),
            (sid.clone(), any::<u16>(), addr()).prop_map(|(stream, local_port, peer)| {
                Frame::Accept {
                    stream,
                    local_port,
                    peer,
                }
            }),
            (sid.clone(), addr()).prop_map(|(stream, addr)| Frame::Connect { stream, addr }),
            (sid.clone(), any::<u16>())
                .prop_map(|(stream, local_port)| Frame::Connected { stream, local_port }),
            (sid.clone(), any::<u32>())
                .prop_map(|(stream, errno)| Frame::ConnectFailed { stream, errno }),
            (sid.clone(), proptest::collection::vec(any::<u8>(), 0..300))
                .prop_map(|(stream, bytes)| Frame::Data { stream, bytes }),
            sid.clone().prop_map(|stream| Frame::Fin { stream }),
            (sid.clone(), any::<u32>()).prop_map(|(stream, c)| Frame::Reset {
                stream,
                code: ErrorCode(c)
            }),
            (sid.clone(), 1..=crate::xfer::MAX_WINDOW)
                .prop_map(|(stream, increment)| Frame::Credit { stream, increment }),
            (sid, any::<u16>(), any::<u32>()).prop_map(|(stream, o, value)| Frame::SetOpt {
                stream,
                option: SockOpt(o),
                value
            }),
        ]
    }

    /// A frame as version 2 may send it: any frame, or DATA of any length
    /// up to [`MAX_DATA_PAYLOAD_V2`] (one fill byte, so large ones are cheap).
    pub(crate) fn frame_v2() -> impl Strategy<Value = Frame> {
        prop_oneof![
            3 => frame(),
            1 => (
                1..=u32::MAX,
                prop_oneof![
                    Just(0usize),
                    Just(MAX_PAYLOAD),
                    Just(MAX_PAYLOAD + 1),
                    Just(MAX_DATA_PAYLOAD_V2),
                    0..=MAX_DATA_PAYLOAD_V2
                ],
                any::<u8>()
            )
                .prop_map(|(s, len, fill)| Frame::Data {
                    stream: StreamId(s),
                    bytes: vec![fill; len],
                }),
        ]
    }

    proptest! {
        #[test]
        fn decode_inverts_encode_at_version_2(frame in frame_v2()) {
            let mut bytes = Vec::new();
            frame.encode_for(2, &mut bytes).unwrap();
            prop_assert_eq!(decode_all_in(2, &bytes), Ok(vec![frame]));
        }

        #[test]
        fn any_chunking_decodes_the_same_frames_at_version_2(
            frames in proptest::collection::vec(frame_v2(), 1..6),
            cuts in proptest::collection::vec(any::<prop::sample::Index>(), 0..20),
        ) {
            let mut bytes = Vec::new();
            for frame in &frames {
                frame.encode_for(2, &mut bytes).unwrap();
            }
            let mut points: Vec<usize> = cuts.iter().map(|c| c.index(bytes.len() + 1)).collect();
            points.push(0);
            points.push(bytes.len());
            points.sort_unstable();
            let mut decoder = FrameDecoder::with_version(2);
            let mut decoded = Vec::new();
            for pair in points.windows(2) {
                let mut chunk = &bytes[pair[0]..pair[1]];
                while let Some(frame) = decoder.decode(&mut chunk).unwrap() {
                    if let Frame::Data { bytes, .. } = &frame {
                        decoder.recycle(bytes.clone());
                    }
                    decoded.push(frame);
                }
                prop_assert!(chunk.is_empty());
            }
            prop_assert_eq!(decoder.finish(), Ok(()));
            prop_assert_eq!(decoded, frames);
        }

        #[test]
        fn a_data_payload_over_the_versions_limit_is_frame_size(
            version in 1u16..=2,
            over in 1usize..=1024,
        ) {
            let len = max_data_payload(version) + over;
            let mut bytes = Frame::data_header(StreamId(1), len as u32).to_vec();
            bytes.resize(HEADER_LEN + len, 0);
            let err = decode_all_in(version, &bytes).unwrap_err();
            prop_assert_eq!(err.code(), ErrorCode::FRAME_SIZE);
        }

        #[test]
        fn encode_data_is_encode_of_a_data_frame(
            stream in 1u32..=u32::MAX,
            bytes in proptest::collection::vec(any::<u8>(), 0..=MAX_PAYLOAD),
            prefix in proptest::collection::vec(any::<u8>(), 0..4),
        ) {
            let (mut a, mut b) = (prefix.clone(), prefix);
            let frame = Frame::Data { stream: StreamId(stream), bytes: bytes.clone() };
            prop_assert_eq!(frame.encode(&mut a), Frame::encode_data(StreamId(stream), &bytes, &mut b));
            prop_assert_eq!(a, b);
        }

        #[test]
        fn decode_inverts_encode(frame in frame()) {
            let bytes = encode(&frame);
            prop_assert_eq!(decode_all(&bytes), Ok(vec![frame]));
        }

        #[test]
        fn arbitrary_bytes_never_panic_the_decoder(
            bytes in proptest::collection::vec(any::<u8>(), 0..2000),
            cut in any::<prop::sample::Index>(),
        ) {
            let mut decoder = FrameDecoder::new();
            let at = cut.index(bytes.len() + 1);
            for mut chunk in [&bytes[..at], &bytes[at..]] {
                while let Ok(Some(_)) = decoder.decode(&mut chunk) {}
            }
            let _ = decoder.finish();
        }

        #[test]
        fn any_chunking_decodes_the_same_frames(
            frames in proptest::collection::vec(frame(), 1..12),
            cuts in proptest::collection::vec(any::<prop::sample::Index>(), 0..20),
        ) {
            let mut bytes = Vec::new();
            for frame in &frames {
                frame.encode(&mut bytes).unwrap();
            }
            let mut points: Vec<usize> = cuts.iter().map(|c| c.index(bytes.len() + 1)).collect();
            points.push(0);
            points.push(bytes.len());
            points.sort_unstable();
            let mut decoder = FrameDecoder::new();
            let mut decoded = Vec::new();
            for pair in points.windows(2) {
                let mut chunk = &bytes[pair[0]..pair[1]];
                while let Some(frame) = decoder.decode(&mut chunk).unwrap() {
                    decoded.push(frame);
                }
                prop_assert!(chunk.is_empty());
            }
            prop_assert_eq!(decoder.finish(), Ok(()));
            prop_assert_eq!(decoded, frames);
        }
    }
}
