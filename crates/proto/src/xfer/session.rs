//! [`XferSession`], one end of a node connection: the handshake, the stream
//! table, stream states and credit accounting. Bytes in through
//! [`XferSession::feed`], [`Event`]s out through a callback, frames to send in
//! an output buffer the driver empties with [`XferSession::drain_output`].

use std::collections::{BTreeSet, HashMap};
use std::net::SocketAddr;

use super::auth::{NODE_LABEL, SERVER_LABEL};
use super::{
    max_data_payload, AuthKey, Challenge, ErrorCode, Frame, FrameDecoder, FrameKind, Hello,
    LocalError, Role, SockOpt, StreamId, XferError, HEADER_LEN, MAX_STREAMS_LIMIT, MAX_TEXT,
    MAX_VERSION, MAX_WINDOW, MIN_VERSION,
};
use crate::Flow;

/// Settings of one end of a node connection.
#[derive(Clone, Debug)]
pub struct XferConfig {
    /// The key shared by the I/O server and its nodes.
    pub key: AuthKey,
    /// A fresh random nonce for this connection (from the OS's random source;
    /// never reuse one: it is what keeps old proofs from being replayed).
    pub nonce: [u8; 32],
    /// The node's number (node side; the server ignores it).
    pub node_id: u32,
    /// Credit granted to the peer on every new stream, in bytes
    /// (1..=[`MAX_WINDOW`]). Memory for received data is bounded by
    /// `initial_window` x `max_streams` plus what [`XferSession::grant`] adds.
    pub initial_window: u32,
    /// Streams the peer may have open at once that the peer opened
    /// (0..=[`MAX_STREAMS_LIMIT`]); more are refused with RESET REFUSED.
    pub max_streams: u32,
    /// Return credit for DATA as soon as it is delivered in an
    /// [`Event::Data`] (the application then buffers without bound); when
    /// false, the application calls [`XferSession::release`] as it consumes.
    pub auto_credit: bool,
    /// The highest protocol version this end offers (node) or picks
    /// (server), [`MIN_VERSION`]..=[`MAX_VERSION`]; 1 forces version 1
    /// (16 KiB DATA payloads) for measurement and interoperability.
    pub max_version: u16,
}

impl XferConfig {
    /// The default `initial_window`: 64 KiB.
    pub const DEFAULT_WINDOW: u32 = 64 * 1024;
    /// The default `max_streams`: 1024.
    pub const DEFAULT_MAX_STREAMS: u32 = 1024;

    /// A configuration with the defaults, node id 0 and explicit credit return.
    pub fn new(key: AuthKey, nonce: [u8; 32]) -> XferConfig {
        XferConfig {
            key,
            nonce,
            node_id: 0,
            initial_window: XferConfig::DEFAULT_WINDOW,
            max_streams: XferConfig::DEFAULT_MAX_STREAMS,
            auto_credit: false,
            max_version: MAX_VERSION,
        }
    }
}

/// The state of a stream as this end sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum StreamState {
    /// Never opened.
    Idle,
    /// Opened by CONNECT; waiting for CONNECTED (node) or for the driver's
    /// [`XferSession::connected`] (server). No DATA either way yet.
    Connecting,
    /// Both directions open.
    Open,
    /// This end sent FIN; it may still receive.
    HalfClosedLocal,
    /// The peer sent FIN; this end may still send.
    HalfClosedRemote,
    /// Both FINs went by, or a RESET or CONNECT_FAILED ended it.
    Closed,
}

/// Something the peer did, in arrival order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    /// The handshake completed: both sides proved the key (node: the server's
    /// proof checked and AUTH sent; server: the node's proof checked).
    Established {
        /// The negotiated protocol version.
        version: u16,
        /// The node's id.
        node_id: u32,
    },
    /// Server side: the node asks to serve `port`; answer with
    /// [`XferSession::listen_result`].
    Listen {
        /// The port.
        port: u16,
    },
    /// Server side: the node no longer serves `port`.
    Unlisten {
        /// The port.
        port: u16,
    },
    /// Node side: the server's answer to a LISTEN.
    ListenResult {
        /// The port.
        port: u16,
        /// 0 on success, else a Linux errno.
        errno: u32,
    },
    /// Node side: a client connected to `local_port`, on the new `stream`.
    Accepted {
        /// The stream.
        stream: StreamId,
        /// The cluster port it connected to.
        local_port: u16,
        /// The client's address.
        peer: SocketAddr,
    },
    /// Server side: the node asks for a connection to `addr` on `stream`;
    /// answer with [`XferSession::connected`] or [`XferSession::connect_failed`].
    ConnectRequest {
        /// The stream.
        stream: StreamId,
        /// Where to connect.
        addr: SocketAddr,
    },
    /// Node side: the connection of a CONNECT is up.
    Connected {
        /// The stream.
        stream: StreamId,
        /// The server's local port for it.
        local_port: u16,
    },
    /// Node side: the CONNECT failed; the stream is closed.
    ConnectFailed {
        /// The stream.
        stream: StreamId,
        /// A Linux errno.
        errno: u32,
    },
    /// Stream bytes. Unless `auto_credit`, call [`XferSession::release`] as
    /// they are consumed, or the peer runs out of credit.
    Data {
        /// The stream.
        stream: StreamId,
        /// The bytes (never empty).
        bytes: Vec<u8>,
    },
    /// The peer will send no more on `stream`.
    Fin {
        /// The stream.
        stream: StreamId,
    },
    /// Both directions of `stream` finished (after the peer's FIN, when this
    /// end had already sent its own); the stream is gone.
    Closed {
        /// The stream.
        stream: StreamId,
    },
    /// The peer reset `stream`; it is gone.
    Reset {
        /// The stream.
        stream: StreamId,
        /// The peer's code.
        code: ErrorCode,
    },
    /// A frame broke a stream-level rule: this end reset `stream` (RESET
    /// queued) and the connection goes on.
    StreamError {
        /// The stream.
        stream: StreamId,
        /// What the frame did wrong, and where.
        error: XferError,
    },
    /// The peer granted credit: `available` bytes may now be sent on `stream`.
    Credit {
        /// The stream.
        stream: StreamId,
        /// Send credit after the grant.
        available: u32,
    },
    /// Server side: set a socket option on the stream's client connection.
    /// Answer unknown options with [`XferSession::send_error`] and
    /// [`ErrorCode::UNSUPPORTED`].
    SetOpt {
        /// The stream.
        stream: StreamId,
        /// The option.
        option: SockOpt,
        /// Its value.
        value: u32,
    },
    /// The answer to a [`XferSession::ping`].
    Pong {
        /// The ping's data.
        data: u64,
    },
    /// The peer reported a non-fatal error (ERROR frame).
    PeerError {
        /// The stream concerned, 0 for the connection.
        stream: StreamId,
        /// The code.
        code: ErrorCode,
        /// The peer's message.
        message: String,
    },
    /// The peer ended the connection; every stream is gone. Close the socket.
    GoAway {
        /// The peer's code.
        code: ErrorCode,
        /// The peer's reason.
        reason: String,
    },
}

/// Counters of one session; the driver sums them over its connections.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct XferStats {
    /// Frames decoded from the peer.
    pub frames_received: u64,
    /// Frames queued for the peer.
    pub frames_sent: u64,
    /// DATA payload bytes accepted from the peer.
    pub data_bytes_received: u64,
    /// DATA payload bytes queued for the peer.
    pub data_bytes_sent: u64,
    /// Handshakes refused because a proof did not match the key, by this
    /// end or by the peer (GOAWAY `AUTH_FAILED` before the handshake ended).
    pub auth_failures: u64,
    /// Streams opened, by either end.
    pub streams_opened: u64,
    /// Streams this end reset because of a bad frame.
    pub stream_errors: u64,
    /// RESETs queued for the peer: by [`XferSession::reset`] and for stream
    /// errors.
    pub resets_sent: u64,
    /// RESETs received.
    pub resets_received: u64,
    /// Frames on streams already closed, ignored.
    pub frames_ignored: u64,
    /// Connections ended by this end because of a bad frame (GOAWAY sent).
    pub connection_errors: u64,
}

#[derive(Clone, Debug)]
enum Phase {
    /// Server: waiting for HELLO.
    AwaitHello,
    /// Node: HELLO sent, waiting for CHALLENGE.
    AwaitChallenge(Hello),
    /// Server: CHALLENGE sent, waiting for AUTH.
    AwaitAuth(Hello, Challenge),
    /// Authenticated both ways.
    Established,
    /// GOAWAY sent or received.
    Closed,
}

#[derive(Clone, Debug)]
struct Stream {
    state: StreamState,
    /// Bytes this end may still send.
    send_credit: u32,
    /// Bytes the peer may still send.
    recv_window: u32,
    /// Bytes delivered in events and not yet released.
    unreleased: u32,
    /// Bytes released and not yet returned to the peer in a CREDIT.
    unannounced: u32,
}

/// One end of a node connection, the node's or the I/O server's.
#[derive(Debug)]
pub struct XferSession {
    role: Role,
    config: XferConfig,
    phase: Phase,
    decoder: FrameDecoder,
    out: Vec<u8>,
    version: u16,
    node_id: u32,
    /// Credit the peer grants on each new stream.
    peer_window: u32,
    /// Streams this end may have open that it opened.
    peer_max_streams: u32,
    streams: HashMap<u32, Stream>,
    /// Next id this end opens (u64 so exhaustion is visible).
    next_local: u64,
    /// Highest id the peer opened (0: none yet).
    highest_peer: u32,
    local_open: u32,
    peer_open: u32,
    /// Node: ports announced (and not refused). Server: ports granted.
    ports: BTreeSet<u16>,
    stats: XferStats,
}

impl XferSession {
    /// The node end of a new connection; the HELLO is queued at once.
    pub fn node(config: XferConfig) -> Result<XferSession, LocalError> {
        let mut session = XferSession::new(Role::Node, config)?;
        let hello = Hello {
            min_version: MIN_VERSION,
            max_version: session.config.max_version,
            node_id: session.config.node_id,
            initial_window: session.config.initial_window,
            max_streams: session.config.max_streams,
            nonce: session.config.nonce,
        };
        session.push(Frame::Hello(hello));
        session.phase = Phase::AwaitChallenge(hello);
        Ok(session)
    }

    /// The I/O server end of a new connection; it waits for the node's HELLO.
    pub fn server(config: XferConfig) -> Result<XferSession, LocalError> {
        XferSession::new(Role::Server, config)
    }

    fn new(role: Role, config: XferConfig) -> Result<XferSession, LocalError> {
        check_range(config.initial_window, 1, MAX_WINDOW)
            .map_err(|(value, min, max)| bad_config("initial_window", value, min, max))?;
        check_range(config.max_streams, 0, MAX_STREAMS_LIMIT)
            .map_err(|(value, min, max)| bad_config("max_streams", value, min, max))?;
        check_range(
            u32::from(config.max_version),
            u32::from(MIN_VERSION),
            u32::from(MAX_VERSION),
        )
        .map_err(|(value, min, max)| bad_config("max_version", value, min, max))?;
        Ok(XferSession {
            role,
            node_id: config.node_id,
            config,
            phase: Phase::AwaitHello,
            decoder: FrameDecoder::new(),
            out: Vec::new(),
            version: 0,
            peer_window: 0,
            peer_max_streams: 0,
            streams: HashMap::new(),
            next_local: match role {
                Role::Node => 1,
                Role::Server => 2,
            },
            highest_peer: 0,
            local_open: 0,
            peer_open: 0,
            ports: BTreeSet::new(),
            stats: XferStats::default(),
        })
    }

    /// Feeds bytes from the peer in any chunking and reports what they did
    /// via `events`, in order. Frames to send in reply (PONG, CHALLENGE, AUTH,
    /// CREDIT, RESET, GOAWAY) are queued in the output.
    ///
    /// A stream-level error resets that stream ([`Event::StreamError`]) and
    /// the feed goes on. A connection-level error queues a GOAWAY with its
    /// code and message and is returned: send the output, then close.
    /// `Ok(Flow::Close)` means the session ended (the peer's GOAWAY, or
    /// earlier): later feeds ignore their input and return `Ok(Flow::Close)`.
    pub fn feed(
        &mut self,
        mut input: &[u8],
        events: &mut impl FnMut(Event),
    ) -> Result<Flow, XferError> {
        loop {
            if matches!(self.phase, Phase::Closed) {
                return Ok(Flow::Close);
            }
            let frame = match self.decoder.decode(&mut input) {
                Ok(Some(frame)) => frame,
                Ok(None) => return Ok(Flow::Continue),
                Err(error) => return Err(self.fail(error)),
            };
            self.stats.frames_received += 1;
            let offset = self.decoder.frame_offset();
            if let Err(error) = self.handle(frame, offset, events) {
                match error.stream() {
                    Some(stream) => self.stream_failed(stream, error, events),
                    None => return Err(self.fail(error)),
                }
            }
        }
    }

    /// The peer closed its sending side: `Ok(())` at a frame boundary or once
    /// the session is closed, else [`XferError::Truncated`].
    pub fn finish_input(&self) -> Result<(), XferError> {
        match self.phase {
            Phase::Closed => Ok(()),
            _ => self.decoder.finish(),
        }
    }

    /// Moves every queued output byte to the end of `dst`.
    pub fn drain_output(&mut self, dst: &mut Vec<u8>) {
        if dst.is_empty() {
            // Hand the buffer over instead of copying it; each side keeps
            // an allocation for next time.
            std::mem::swap(dst, &mut self.out);
        } else {
            dst.append(&mut self.out);
        }
    }

    /// Gives back the buffer of an [`Event::Data`] payload once its bytes
    /// are consumed, so a later payload reuses the allocation
    /// ([`FrameDecoder::recycle`]). Optional; credit is returned by
    /// [`XferSession::release`] as before.
    pub fn recycle(&mut self, buf: Vec<u8>) {
        self.decoder.recycle(buf);
    }

    /// How many input bytes finish the current frame and the next header
    /// ([`FrameDecoder::until_next_payload`]): feeding at most this much at
    /// a time, a driver sees every DATA header before its payload
    /// ([`XferSession::pending_data`]).
    pub fn until_next_payload(&self) -> usize {
        self.decoder.until_next_payload()
    }

    /// The DATA frame whose header was just fed, none of its payload yet:
    /// its stream and payload length. Only on an established session.
    pub fn pending_data(&self) -> Option<(StreamId, usize)> {
        if !self.is_established() {
            return None;
        }
        self.decoder.pending_data()
    }

    /// Takes the payload of the [`XferSession::pending_data`] frame for the
    /// driver to move itself (splice), with every check and all accounting
    /// of [`XferSession::feed`] done now, before any payload byte is read:
    ///
    /// - `Ok(Some((stream, len)))`: accepted; credit, stream state and
    ///   counters are as after the copying path's [`Event::Data`] (with
    ///   `auto_credit`, released too). Move the `len` bytes, reporting each
    ///   part with [`XferSession::consume_taken`], and call
    ///   [`XferSession::release`] as they reach their destination.
    /// - `Ok(None)`: no DATA pending, or the frame is not for a live stream:
    ///   ignored (closed stream) or a stream error reported in `events`
    ///   ([`Event::StreamError`], RESET queued) exactly as `feed` would.
    ///   Feed the payload as usual; its bytes are dropped.
    /// - `Err`: a connection error, as from `feed` (GOAWAY queued).
    pub fn take_pending_data(
        &mut self,
        events: &mut impl FnMut(Event),
    ) -> Result<Option<(StreamId, u32)>, XferError> {
        if self.pending_data().is_none() {
            return Ok(None);
        }
        let Some((stream, len)) = self.decoder.take_payload() else {
            return Ok(None);
        };
        self.stats.frames_received += 1;
        let offset = self.decoder.frame_offset();
        // At most the version's DATA limit, checked with the header.
        let len = u32::try_from(len).unwrap_or(u32::MAX);
        match self.accept_data(stream, len, offset) {
            Ok(true) => {
                if self.config.auto_credit {
                    self.release_inner(stream, len);
                }
                Ok(Some((stream, len)))
            }
            Ok(false) => Ok(None),
            Err(error) => match error.stream() {
                Some(stream) => {
                    self.stream_failed(stream, error, events);
                    Ok(None)
                }
                None => Err(self.fail(error)),
            },
        }
    }

    /// Payload bytes of the frame taken by
    /// [`XferSession::take_pending_data`] still to be moved.
    pub fn taken_remaining(&self) -> usize {
        self.decoder.taken_remaining()
    }

    /// Accounts `n` payload bytes of the taken frame as moved by the driver;
    /// returns the bytes accounted (at most [`XferSession::taken_remaining`]).
    pub fn consume_taken(&mut self, n: usize) -> usize {
        self.decoder.consume_taken(n)
    }

    /// Whether output is queued.
    pub fn has_output(&self) -> bool {
        !self.out.is_empty()
    }

    /// This end's role.
    pub fn role(&self) -> Role {
        self.role
    }

    /// Whether the handshake completed and the session is not closed.
    pub fn is_established(&self) -> bool {
        matches!(self.phase, Phase::Established)
    }

    /// Whether the session ended (GOAWAY sent or received).
    pub fn is_closed(&self) -> bool {
        matches!(self.phase, Phase::Closed)
    }

    /// The negotiated version, once chosen (server: on HELLO; node: on
    /// CHALLENGE).
    pub fn version(&self) -> Option<u16> {
        (self.version != 0).then_some(self.version)
    }

    /// The largest DATA payload of the negotiated version (version 1's
    /// [`MAX_PAYLOAD`](super::MAX_PAYLOAD) until a version is chosen): what
    /// [`XferSession::send_data`] cuts at and [`XferSession::send_data_header`]
    /// takes at most.
    pub fn max_data_payload(&self) -> usize {
        max_data_payload(self.version)
    }

    /// The node's id (the server learns it from HELLO).
    pub fn node_id(&self) -> u32 {
        self.node_id
    }

    /// The session's counters.
    pub fn stats(&self) -> &XferStats {
        &self.stats
    }

    /// Streams currently open (any state but idle and closed).
    pub fn open_streams(&self) -> usize {
        self.streams.len()
    }

    /// The state of `stream` as this end sees it.
    pub fn stream_state(&self, stream: StreamId) -> StreamState {
        match self.streams.get(&stream.0) {
            Some(s) => s.state,
            None if stream.0 == 0 || self.is_idle(stream.0) => StreamState::Idle,
            None => StreamState::Closed,
        }
    }

    /// Bytes this end may still send on `stream`, if it is open.
    pub fn send_credit(&self, stream: StreamId) -> Option<u32> {
        self.streams.get(&stream.0).map(|s| s.send_credit)
    }

    /// Bytes the peer may still send on `stream` before more credit, if it is open.
    pub fn recv_window(&self, stream: StreamId) -> Option<u32> {
        self.streams.get(&stream.0).map(|s| s.recv_window)
    }

    /// Node: announce that this node serves `port` on the cluster address.
    /// ACCEPTs for it are taken from now on (until a LISTEN_RESULT refuses it).
    pub fn listen(&mut self, port: u16) -> Result<(), LocalError> {
        self.ready("listen", Role::Node)?;
        if port == 0 {
            return Err(LocalError::PortZero { op: "listen" });
        }
        self.ports.insert(port);
        self.push(Frame::Listen { port });
        Ok(())
    }

    /// Node: stop serving `port`; ACCEPTs for it are refused from now on.
    pub fn unlisten(&mut self, port: u16) -> Result<(), LocalError> {
        self.ready("unlisten", Role::Node)?;
        if port == 0 {
            return Err(LocalError::PortZero { op: "unlisten" });
        }
        self.ports.remove(&port);
        self.push(Frame::Unlisten { port });
        Ok(())
    }

    /// Node: ask the server for a TCP connection to `addr` on a new stream,
    /// which stays [`StreamState::Connecting`] until [`Event::Connected`].
    pub fn connect(&mut self, addr: SocketAddr) -> Result<StreamId, LocalError> {
        self.ready("connect", Role::Node)?;
        let stream = self.open_local("connect", StreamState::Connecting)?;
        self.push(Frame::Connect { stream, addr });
        Ok(stream)
    }

    /// Node: set a socket option on the client connection of `stream`.
    pub fn set_option(
        &mut self,
        stream: StreamId,
        option: SockOpt,
        value: u32,
    ) -> Result<(), LocalError> {
        self.ready("set_option", Role::Node)?;
        self.get("set_option", stream)?;
        self.push(Frame::SetOpt {
            stream,
            option,
            value,
        });
        Ok(())
    }

    /// Server: answer a LISTEN: `errno` 0 grants the port (then
    /// [`XferSession::accept`] may use it), else refuses it.
    pub fn listen_result(&mut self, port: u16, errno: u32) -> Result<(), LocalError> {
        self.ready("listen_result", Role::Server)?;
        if errno == 0 {
            self.ports.insert(port);
        } else {
            self.ports.remove(&port);
        }
        self.push(Frame::ListenResult { port, errno });
        Ok(())
    }

    /// Server: a client at `peer` connected to `local_port`, a port this node
    /// serves; hands it to the node on a new stream.
    pub fn accept(&mut self, local_port: u16, peer: SocketAddr) -> Result<StreamId, LocalError> {
        self.ready("accept", Role::Server)?;
        if !self.ports.contains(&local_port) {
            return Err(LocalError::PortNotServed { port: local_port });
        }
        let stream = self.open_local("accept", StreamState::Open)?;
        self.push(Frame::Accept {
            stream,
            local_port,
            peer,
        });
        Ok(stream)
    }

    /// Server: the connection asked for on `stream` is up.
    pub fn connected(&mut self, stream: StreamId, local_port: u16) -> Result<(), LocalError> {
        self.ready("connected", Role::Server)?;
        self.expect_connecting("connected", stream)?.state = StreamState::Open;
        self.push(Frame::Connected { stream, local_port });
        Ok(())
    }

    /// Server: the connection asked for on `stream` failed with `errno`; the
    /// stream is closed.
    pub fn connect_failed(&mut self, stream: StreamId, errno: u32) -> Result<(), LocalError> {
        self.ready("connect_failed", Role::Server)?;
        self.expect_connecting("connect_failed", stream)?;
        self.remove(stream.0);
        self.push(Frame::ConnectFailed { stream, errno });
        Ok(())
    }

    /// Queues as much of `data` as the stream's credit allows, in DATA frames
    /// of at most [`XferSession::max_data_payload`] bytes, and returns how
    /// many bytes were taken (like a non-blocking write). With no credit at
    /// all it refuses with [`LocalError::NoCredit`]: wait for [`Event::Credit`].
    pub fn send_data(&mut self, stream: StreamId, data: &[u8]) -> Result<usize, LocalError> {
        let s = self.data_stream(stream)?;
        if data.is_empty() {
            return Ok(0);
        }
        if s.send_credit == 0 {
            return Err(LocalError::NoCredit { stream });
        }
        let n = data.len().min(s.send_credit as usize);
        s.send_credit -= n as u32;
        let version = self.version;
        for chunk in data[..n].chunks(max_data_payload(version)) {
            // Straight into the output: one copy of the payload, not two.
            let encoded = Frame::encode_data_for(version, stream, chunk, &mut self.out);
            debug_assert!(encoded.is_ok(), "session built a bad frame: {encoded:?}");
            self.stats.frames_sent += 1;
        }
        self.stats.data_bytes_sent += n as u64;
        Ok(n)
    }

    /// [`XferSession::send_data`] for a payload the caller sends itself: takes
    /// `len` bytes of `stream`'s credit for one DATA frame and returns the
    /// frame's header. The caller sends the header and then exactly `len`
    /// payload bytes, after everything [`XferSession::drain_output`] handed
    /// out before this call and before anything it hands out after (drain
    /// first). A relay reads its socket straight into place behind the
    /// header, so the payload is never copied into the session's output.
    /// Refuses a `len` of 0 or over [`XferSession::max_data_payload`]
    /// ([`LocalError::TooLarge`]) or over the credit ([`LocalError::NoCredit`]).
    pub fn send_data_header(
        &mut self,
        stream: StreamId,
        len: usize,
    ) -> Result<[u8; HEADER_LEN], LocalError> {
        let max = self.max_data_payload();
        let s = self.data_stream(stream)?;
        if len == 0 || len > max {
            return Err(LocalError::TooLarge {
                what: "DATA payload (1..=the negotiated version's limit)",
                len: len as u64,
                max: max as u64,
            });
        }
        if len > s.send_credit as usize {
            return Err(LocalError::NoCredit { stream });
        }
        s.send_credit -= len as u32;
        self.stats.frames_sent += 1;
        self.stats.data_bytes_sent += len as u64;
        Ok(Frame::data_header(stream, len as u32))
    }

    /// Half-closes `stream`: queues FIN; this end sends no more DATA on it.
    pub fn finish(&mut self, stream: StreamId) -> Result<(), LocalError> {
        self.established("finish")?;
        let s = self.get("finish", stream)?;
        match s.state {
            StreamState::Open => s.state = StreamState::HalfClosedLocal,
            StreamState::HalfClosedRemote => self.remove(stream.0),
            state => {
                return Err(LocalError::WrongState {
                    op: "finish",
                    stream,
                    state,
                })
            }
        }
        self.push(Frame::Fin { stream });
        Ok(())
    }

    /// Abandons `stream` both ways: queues RESET with `code`; the stream is gone.
    pub fn reset(&mut self, stream: StreamId, code: ErrorCode) -> Result<(), LocalError> {
        self.established("reset")?;
        self.get("reset", stream)?;
        self.remove(stream.0);
        self.push(Frame::Reset { stream, code });
        self.stats.resets_sent += 1;
        Ok(())
    }

    /// The application consumed `len` bytes delivered on `stream`: they count
    /// toward a CREDIT, queued once half the initial window is released.
    pub fn release(&mut self, stream: StreamId, len: u32) -> Result<(), LocalError> {
        self.established("release")?;
        let s = self.get("release", stream)?;
        if len > s.unreleased {
            return Err(LocalError::ReleaseTooLarge {
                stream,
                len,
                unreleased: s.unreleased,
            });
        }
        self.release_inner(stream, len);
        Ok(())
    }

    /// Grants `increment` bytes of credit on `stream` beyond what was
    /// released (a larger window for a fast stream); queues a CREDIT now.
    pub fn grant(&mut self, stream: StreamId, increment: u32) -> Result<(), LocalError> {
        self.established("grant")?;
        let s = self.get("grant", stream)?;
        let window = s.recv_window + s.unreleased + s.unannounced;
        if increment == 0 || u64::from(window) + u64::from(increment) > u64::from(MAX_WINDOW) {
            return Err(LocalError::BadGrant {
                stream,
                increment,
                window,
            });
        }
        s.recv_window += increment;
        self.push(Frame::Credit { stream, increment });
        Ok(())
    }

    /// Queues a PING; the peer's PONG comes back as [`Event::Pong`]. When to
    /// ping and when to give up is the driver's choice (this crate has no clock).
    pub fn ping(&mut self, data: u64) -> Result<(), LocalError> {
        self.established("ping")?;
        self.push(Frame::Ping { data });
        Ok(())
    }

    /// Queues a non-fatal ERROR report about `stream` (0: the connection);
    /// `message` is cut to [`MAX_TEXT`] bytes.
    pub fn send_error(
        &mut self,
        stream: StreamId,
        code: ErrorCode,
        message: &str,
    ) -> Result<(), LocalError> {
        self.established("send_error")?;
        self.push(Frame::Error {
            stream,
            code,
            message: truncate(message),
        });
        Ok(())
    }

    /// Ends the session: queues GOAWAY with `code` and `reason` (cut to
    /// [`MAX_TEXT`] bytes); every stream is gone. Send the output, then close.
    pub fn close(&mut self, code: ErrorCode, reason: &str) -> Result<(), LocalError> {
        if self.is_closed() {
            return Err(LocalError::Closed { op: "close" });
        }
        self.push(Frame::GoAway {
            code,
            reason: truncate(reason),
        });
        self.shut();
        Ok(())
    }

    fn handle(
        &mut self,
        frame: Frame,
        offset: u64,
        events: &mut impl FnMut(Event),
    ) -> Result<(), XferError> {
        let kind = frame.kind();
        if let Frame::GoAway { code, reason } = frame {
            // The peer refused this end's proof: a handshake failed on the
            // key, counted on both ends.
            if code == ErrorCode::AUTH_FAILED && !matches!(self.phase, Phase::Established) {
                self.stats.auth_failures += 1;
            }
            self.shut();
            events(Event::GoAway { code, reason });
            return Ok(());
        }
        let unauthenticated = |expected| XferError::Unauthenticated {
            offset,
            kind,
            expected,
        };
        match (&self.phase, frame) {
            (Phase::AwaitHello, Frame::Hello(hello)) => self.on_hello(hello, offset),
            (Phase::AwaitHello, _) => Err(unauthenticated(FrameKind::Hello)),
            (Phase::AwaitChallenge(hello), Frame::Challenge(challenge)) => {
                let hello = *hello;
                self.on_challenge(hello, challenge, offset, events)
            }
            (Phase::AwaitChallenge(_), _) => Err(unauthenticated(FrameKind::Challenge)),
            (Phase::AwaitAuth(hello, challenge), Frame::Auth { proof }) => {
                let (hello, challenge) = (*hello, *challenge);
                if !self
                    .config
                    .key
                    .verify(NODE_LABEL, &hello, &challenge, &proof)
                {
                    return Err(XferError::AuthFailed {
                        offset,
                        prover: Role::Node,
                    });
                }
                self.phase = Phase::Established;
                // The node's frames after its AUTH may use the version's limits.
                self.decoder.set_version(self.version);
                events(Event::Established {
                    version: self.version,
                    node_id: self.node_id,
                });
                Ok(())
            }
            (Phase::AwaitAuth(..), _) => Err(unauthenticated(FrameKind::Auth)),
            (Phase::Established, frame) => self.on_frame(frame, offset, events),
            (Phase::Closed, _) => Ok(()),
        }
    }

    /// Server: checks HELLO, chooses the version (the highest both speak),
    /// queues CHALLENGE.
    fn on_hello(&mut self, hello: Hello, offset: u64) -> Result<(), XferError> {
        let supported_max = self.config.max_version;
        let version = hello.max_version.min(supported_max);
        if hello.min_version > hello.max_version || version < hello.min_version.max(MIN_VERSION) {
            return Err(XferError::VersionMismatch {
                offset,
                min: hello.min_version,
                max: hello.max_version,
                supported_min: MIN_VERSION,
                supported_max,
            });
        }
        check_limits(
            FrameKind::Hello,
            hello.initial_window,
            12,
            hello.max_streams,
            16,
            offset,
        )?;
        let mut challenge = Challenge {
            version,
            initial_window: self.config.initial_window,
            max_streams: self.config.max_streams,
            nonce: self.config.nonce,
            proof: [0; 32],
        };
        challenge.proof = self.config.key.proof(SERVER_LABEL, &hello, &challenge);
        // The decoder keeps version 1's limits until AUTH proves the node,
        // so an unauthenticated peer cannot make it buffer a larger payload.
        self.version = version;
        self.node_id = hello.node_id;
        self.peer_window = hello.initial_window;
        self.peer_max_streams = hello.max_streams;
        self.push(Frame::Challenge(challenge));
        self.phase = Phase::AwaitAuth(hello, challenge);
        Ok(())
    }

    /// Node: checks CHALLENGE and the server's proof, queues AUTH.
    fn on_challenge(
        &mut self,
        hello: Hello,
        challenge: Challenge,
        offset: u64,
        events: &mut impl FnMut(Event),
    ) -> Result<(), XferError> {
        if !(hello.min_version..=hello.max_version).contains(&challenge.version) {
            return Err(XferError::VersionMismatch {
                offset,
                min: challenge.version,
                max: challenge.version,
                supported_min: hello.min_version,
                supported_max: hello.max_version,
            });
        }
        check_limits(
            FrameKind::Challenge,
            challenge.initial_window,
            4,
            challenge.max_streams,
            8,
            offset,
        )?;
        let key = &self.config.key;
        if !key.verify(SERVER_LABEL, &hello, &challenge, &challenge.proof) {
            return Err(XferError::AuthFailed {
                offset,
                prover: Role::Server,
            });
        }
        let proof = key.proof(NODE_LABEL, &hello, &challenge);
        self.push(Frame::Auth { proof });
        self.version = challenge.version;
        // The server is proven: its frames after CHALLENGE may use the
        // version's limits.
        self.decoder.set_version(challenge.version);
        self.peer_window = challenge.initial_window;
        self.peer_max_streams = challenge.max_streams;
        self.phase = Phase::Established;
        events(Event::Established {
            version: self.version,
            node_id: self.node_id,
        });
        Ok(())
    }

    /// Every frame after the handshake: the state machine's one match over
    /// frame types, kept whole so each transition reads beside the others.
    #[allow(clippy::too_many_lines)]
    fn on_frame(
        &mut self,
        frame: Frame,
        offset: u64,
        events: &mut impl FnMut(Event),
    ) -> Result<(), XferError> {
        let kind = frame.kind();
        let sender = self.role.peer();
        if kind.sender().is_some_and(|allowed| allowed != sender) {
            return Err(XferError::WrongDirection {
                offset,
                kind,
                sender,
            });
        }
        let stream_error = |stream, code, reason| XferError::Stream {
            offset,
            kind,
            stream,
            code,
            reason,
        };
        match frame {
            Frame::Hello(_) | Frame::Challenge(_) | Frame::Auth { .. } => {
                Err(XferError::Connection {
                    offset,
                    kind,
                    stream: 0,
                    reason: "handshake frame after the handshake",
                })
            }
            Frame::GoAway { code, reason } => {
                // Reached only through `handle`, which takes GOAWAY first.
                self.shut();
                events(Event::GoAway { code, reason });
                Ok(())
            }
            Frame::Ping { data } => {
                self.push(Frame::Pong { data });
                Ok(())
            }
            Frame::Pong { data } => {
                events(Event::Pong { data });
                Ok(())
            }
            Frame::Error {
                stream,
                code,
                message,
            } => {
                events(Event::PeerError {
                    stream,
                    code,
                    message,
                });
                Ok(())
            }
            Frame::Listen { port } => {
                events(Event::Listen { port });
                Ok(())
            }
            Frame::Unlisten { port } => {
                self.ports.remove(&port);
                events(Event::Unlisten { port });
                Ok(())
            }
            Frame::ListenResult { port, errno } => {
                if errno != 0 {
                    self.ports.remove(&port);
                }
                events(Event::ListenResult { port, errno });
                Ok(())
            }
            Frame::Accept {
                stream,
                local_port,
                peer,
            } => {
                self.open_peer(stream, kind, offset)?;
                if !self.ports.contains(&local_port) {
                    return Err(stream_error(
                        stream,
                        ErrorCode::REFUSED,
                        "ACCEPT for a port the node does not serve",
                    ));
                }
                self.insert_peer(stream, StreamState::Open);
                events(Event::Accepted {
                    stream,
                    local_port,
                    peer,
                });
                Ok(())
            }
            Frame::Connect { stream, addr } => {
                self.open_peer(stream, kind, offset)?;
                self.insert_peer(stream, StreamState::Connecting);
                events(Event::ConnectRequest { stream, addr });
                Ok(())
            }
            Frame::Connected { stream, local_port } => {
                let Some(s) = self.live(stream, kind, offset)? else {
                    return Ok(());
                };
                if s.state != StreamState::Connecting {
                    return Err(stream_error(
                        stream,
                        ErrorCode::PROTOCOL,
                        "CONNECTED on a stream that is not connecting",
                    ));
                }
                s.state = StreamState::Open;
                events(Event::Connected { stream, local_port });
                Ok(())
            }
            Frame::ConnectFailed { stream, errno } => {
                let Some(s) = self.live(stream, kind, offset)? else {
                    return Ok(());
                };
                if s.state != StreamState::Connecting {
                    return Err(stream_error(
                        stream,
                        ErrorCode::PROTOCOL,
                        "CONNECT_FAILED on a stream that is not connecting",
                    ));
                }
                self.remove(stream.0);
                events(Event::ConnectFailed { stream, errno });
                Ok(())
            }
            Frame::Data { stream, bytes } => {
                // The decoder bounds a payload by the version's limit.
                let len = bytes.len() as u32;
                if self.accept_data(stream, len, offset)? && len > 0 {
                    events(Event::Data { stream, bytes });
                    if self.config.auto_credit {
                        self.release_inner(stream, len);
                    }
                }
                Ok(())
            }
            Frame::Fin { stream } => {
                let Some(s) = self.live(stream, kind, offset)? else {
                    return Ok(());
                };
                match s.state {
                    StreamState::Open => {
                        s.state = StreamState::HalfClosedRemote;
                        events(Event::Fin { stream });
                    }
                    StreamState::HalfClosedLocal => {
                        self.remove(stream.0);
                        events(Event::Fin { stream });
                        events(Event::Closed { stream });
                    }
                    StreamState::Connecting => {
                        return Err(stream_error(
                            stream,
                            ErrorCode::PROTOCOL,
                            "FIN before CONNECTED",
                        ))
                    }
                    _ => return Err(stream_error(stream, ErrorCode::STREAM_CLOSED, "second FIN")),
                }
                Ok(())
            }
            Frame::Reset { stream, code } => {
                if self.live(stream, kind, offset)?.is_some() {
                    self.remove(stream.0);
                    self.stats.resets_received += 1;
                    events(Event::Reset { stream, code });
                }
                Ok(())
            }
            Frame::Credit { stream, increment } => {
                let Some(s) = self.live(stream, kind, offset)? else {
                    return Ok(());
                };
                let credit = s.send_credit;
                if increment == 0
                    || u64::from(credit) + u64::from(increment) > u64::from(MAX_WINDOW)
                {
                    return Err(XferError::BadCredit {
                        offset,
                        stream,
                        increment,
                        credit,
                    });
                }
                s.send_credit += increment;
                let available = s.send_credit;
                if matches!(
                    s.state,
                    StreamState::Open | StreamState::HalfClosedRemote | StreamState::Connecting
                ) {
                    events(Event::Credit { stream, available });
                }
                Ok(())
            }
            Frame::SetOpt {
                stream,
                option,
                value,
            } => {
                if self.live(stream, kind, offset)?.is_some() {
                    events(Event::SetOpt {
                        stream,
                        option,
                        value,
                    });
                }
                Ok(())
            }
        }
    }

    /// The checks and accounting of a DATA frame of `len` payload bytes on
    /// `stream`, before its payload is used: `Ok(true)` if accepted (credit
    /// and counters updated), `Ok(false)` if the stream is closed (ignored),
    /// a stream error otherwise.
    fn accept_data(&mut self, stream: StreamId, len: u32, offset: u64) -> Result<bool, XferError> {
        let kind = FrameKind::Data;
        let stream_error = |code, reason| XferError::Stream {
            offset,
            kind,
            stream,
            code,
            reason,
        };
        let Some(s) = self.live(stream, kind, offset)? else {
            return Ok(false);
        };
        match s.state {
            StreamState::Open | StreamState::HalfClosedLocal => {}
            StreamState::Connecting => {
                return Err(stream_error(ErrorCode::PROTOCOL, "DATA before CONNECTED"))
            }
            _ => return Err(stream_error(ErrorCode::STREAM_CLOSED, "DATA after FIN")),
        }
        if len > s.recv_window {
            return Err(XferError::FlowControl {
                offset,
                stream,
                len,
                credit: s.recv_window,
            });
        }
        s.recv_window -= len;
        s.unreleased += len;
        self.stats.data_bytes_received += u64::from(len);
        Ok(true)
    }

    /// Checks an opening frame's stream id (connection errors: wrong parity,
    /// not above the last) and the stream limit (stream error: REFUSED).
    fn open_peer(
        &mut self,
        stream: StreamId,
        kind: FrameKind,
        offset: u64,
    ) -> Result<(), XferError> {
        let connection_error = |reason| XferError::Connection {
            offset,
            kind,
            stream: stream.0,
            reason,
        };
        if !self.role.peer().owns(stream.0) {
            return Err(connection_error(
                "stream id has the parity of the receiver's streams",
            ));
        }
        if stream.0 <= self.highest_peer {
            return Err(connection_error(
                "stream id is not above the last one the peer opened",
            ));
        }
        self.highest_peer = stream.0;
        if self.peer_open >= self.config.max_streams {
            return Err(XferError::Stream {
                offset,
                kind,
                stream,
                code: ErrorCode::REFUSED,
                reason: "the peer already has max_streams streams open",
            });
        }
        Ok(())
    }

    fn insert_peer(&mut self, stream: StreamId, state: StreamState) {
        self.streams.insert(
            stream.0,
            Stream {
                state,
                send_credit: self.peer_window,
                recv_window: self.config.initial_window,
                unreleased: 0,
                unannounced: 0,
            },
        );
        self.peer_open += 1;
        self.stats.streams_opened += 1;
    }

    fn open_local(&mut self, op: &'static str, state: StreamState) -> Result<StreamId, LocalError> {
        if self.local_open >= self.peer_max_streams {
            return Err(LocalError::StreamLimit {
                op,
                max: self.peer_max_streams,
            });
        }
        let Ok(id) = u32::try_from(self.next_local) else {
            return Err(LocalError::StreamIdsExhausted { op });
        };
        self.next_local += 2;
        self.streams.insert(
            id,
            Stream {
                state,
                send_credit: self.peer_window,
                recv_window: self.config.initial_window,
                unreleased: 0,
                unannounced: 0,
            },
        );
        self.local_open += 1;
        self.stats.streams_opened += 1;
        Ok(StreamId(id))
    }

    /// The stream of a non-opening frame: `Some` if open, `None` if it was
    /// closed (the frame is ignored), a stream error UNKNOWN_STREAM if it was
    /// never opened (except for RESET, which is never answered).
    fn live(
        &mut self,
        stream: StreamId,
        kind: FrameKind,
        offset: u64,
    ) -> Result<Option<&mut Stream>, XferError> {
        if !self.streams.contains_key(&stream.0) {
            if self.is_idle(stream.0) && kind != FrameKind::Reset {
                return Err(XferError::Stream {
                    offset,
                    kind,
                    stream,
                    code: ErrorCode::UNKNOWN_STREAM,
                    reason: "the stream was never opened",
                });
            }
            self.stats.frames_ignored += 1;
        }
        Ok(self.streams.get_mut(&stream.0))
    }

    /// Whether `id` was never opened.
    fn is_idle(&self, id: u32) -> bool {
        if self.role.owns(id) {
            u64::from(id) >= self.next_local
        } else {
            id > self.highest_peer
        }
    }

    fn remove(&mut self, id: u32) {
        if self.streams.remove(&id).is_some() {
            if self.role.owns(id) {
                self.local_open -= 1;
            } else {
                self.peer_open -= 1;
            }
        }
    }

    fn release_inner(&mut self, stream: StreamId, len: u32) {
        let threshold = (self.config.initial_window / 2).max(1);
        let Some(s) = self.streams.get_mut(&stream.0) else {
            return;
        };
        s.unreleased -= len;
        s.unannounced += len;
        let receiving = matches!(
            s.state,
            StreamState::Open | StreamState::HalfClosedLocal | StreamState::Connecting
        );
        if receiving && s.unannounced >= threshold {
            let increment = s.unannounced;
            s.unannounced = 0;
            s.recv_window += increment;
            self.push(Frame::Credit { stream, increment });
        }
    }

    fn stream_failed(
        &mut self,
        stream: StreamId,
        error: XferError,
        events: &mut impl FnMut(Event),
    ) {
        self.stats.stream_errors += 1;
        self.stats.resets_sent += 1;
        self.remove(stream.0);
        self.push(Frame::Reset {
            stream,
            code: error.code(),
        });
        events(Event::StreamError { stream, error });
    }

    /// A connection-level error: queue GOAWAY and close.
    fn fail(&mut self, error: XferError) -> XferError {
        if matches!(error, XferError::AuthFailed { .. }) {
            self.stats.auth_failures += 1;
        }
        self.stats.connection_errors += 1;
        self.push(Frame::GoAway {
            code: error.code(),
            reason: truncate(&error.to_string()),
        });
        self.shut();
        error
    }

    fn shut(&mut self) {
        self.phase = Phase::Closed;
        self.streams.clear();
        self.local_open = 0;
        self.peer_open = 0;
    }

    fn push(&mut self, frame: Frame) {
        // Every frame the session builds is within the limits encode checks.
        let encoded = frame.encode(&mut self.out);
        debug_assert!(encoded.is_ok(), "session built a bad frame: {encoded:?}");
        self.stats.frames_sent += 1;
    }

    fn established(&self, op: &'static str) -> Result<(), LocalError> {
        match self.phase {
            Phase::Established => Ok(()),
            Phase::Closed => Err(LocalError::Closed { op }),
            _ => Err(LocalError::NotEstablished { op }),
        }
    }

    fn ready(&self, op: &'static str, role: Role) -> Result<(), LocalError> {
        if self.role != role {
            return Err(LocalError::WrongRole { op, role });
        }
        self.established(op)
    }

    /// The stream DATA may be sent on: the connection is established and
    /// the stream open or half-closed by the peer (shared by both sends).
    fn data_stream(&mut self, stream: StreamId) -> Result<&mut Stream, LocalError> {
        self.established("send_data")?;
        let s = self.get("send_data", stream)?;
        if !matches!(s.state, StreamState::Open | StreamState::HalfClosedRemote) {
            return Err(LocalError::WrongState {
                op: "send_data",
                stream,
                state: s.state,
            });
        }
        Ok(s)
    }

    fn get(&mut self, op: &'static str, stream: StreamId) -> Result<&mut Stream, LocalError> {
        self.streams
            .get_mut(&stream.0)
            .ok_or(LocalError::UnknownStream { op, stream })
    }

    fn expect_connecting(
        &mut self,
        op: &'static str,
        stream: StreamId,
    ) -> Result<&mut Stream, LocalError> {
        let s = self.get(op, stream)?;
        if s.state != StreamState::Connecting {
            return Err(LocalError::WrongState {
                op,
                stream,
                state: s.state,
            });
        }
        Ok(s)
    }
}

fn check_range(value: u32, min: u32, max: u32) -> Result<(), (u32, u32, u32)> {
    if (min..=max).contains(&value) {
        Ok(())
    } else {
        Err((value, min, max))
    }
}

fn bad_config(field: &'static str, value: u32, min: u32, max: u32) -> LocalError {
    LocalError::BadConfig {
        field,
        value: u64::from(value),
        min: u64::from(min),
        max: u64::from(max),
    }
}

/// The peer's `initial_window` (1..=MAX_WINDOW) and `max_streams`
/// (0..=MAX_STREAMS_LIMIT) at their payload offsets.
fn check_limits(
    kind: FrameKind,
    window: u32,
    window_at: usize,
    max_streams: u32,
    max_streams_at: usize,
    offset: u64,
) -> Result<(), XferError> {
    if check_range(window, 1, MAX_WINDOW).is_err() {
        return Err(XferError::BadField {
            offset,
            kind,
            field: "initial_window",
            at: window_at,
            value: u64::from(window),
        });
    }
    if max_streams > MAX_STREAMS_LIMIT {
        return Err(XferError::BadField {
            offset,
            kind,
            field: "max_streams",
            at: max_streams_at,
            value: u64::from(max_streams),
        });
    }
    Ok(())
}

/// `text` cut to at most MAX_TEXT bytes at a character boundary.
fn truncate(text: &str) -> String {
    let mut end = text.len().min(MAX_TEXT);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text[..end].to_string()
}
