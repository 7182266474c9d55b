//! A CLXF session (`XferSession`) fed an arbitrary sequence of frames, raw
//! bytes and local calls, structure-aware with `arbitrary`.
//!
//! The session under test (the I/O server's end or the node's) is either
//! fresh, so the fuzzer attacks the handshake, or first completes an honest
//! handshake with a real peer session, so frames reach the stream table,
//! stream states and credit accounting. Checks: no panic; after a feed the
//! queued output is bounded by what came in; after an error or a close the
//! session takes nothing more; open streams stay within the limits.

#![no_main]

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use arbitrary::Arbitrary;
use connlab_proto::xfer::{
    AuthKey, ErrorCode, Frame, SockOpt, StreamId, XferConfig, XferSession, MAX_PAYLOAD,
};
use connlab_proto::Flow;
use libfuzzer_sys::fuzz_target;

/// A frame as the fuzzer builds it: stream ids, codes and lengths free, so
/// that invalid combinations (wrong parity, unknown stream, credit overflow)
/// are reached too; the encoder refuses only what the decoder would.
#[derive(Arbitrary, Debug)]
enum FrameSpec {
    Auth([u8; 32]),
    Ping(u64),
    Pong(u64),
    GoAway(u32, String),
    Error(u8, u32, String),
    Listen(u16),
    Unlisten(u16),
    ListenResult(u16, u32),
    Accept(u8, u16, bool, u16),
    Connect(u8, bool, u16),
    Connected(u8, u16),
    ConnectFailed(u8, u32),
    Data(u8, u16, u8),
    Fin(u8),
    Reset(u8, u32),
    Credit(u8, u32),
    SetOpt(u8, u16, u32),
}

/// Small stream ids hit the streams that exist; 255 stands for a large one.
fn stream(id: u8) -> StreamId {
    StreamId(if id == 255 { u32::MAX } else { u32::from(id) })
}

fn addr(v6: bool, port: u16) -> SocketAddr {
    let ip = if v6 {
        IpAddr::V6(Ipv6Addr::LOCALHOST)
    } else {
        IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1))
    };
    SocketAddr::new(ip, port)
}

fn text(s: String) -> String {
    s.chars().take(600).collect()
}

impl FrameSpec {
    fn frame(self) -> Frame {
        match self {
            FrameSpec::Auth(proof) => Frame::Auth { proof },
            FrameSpec::Ping(data) => Frame::Ping { data },
            FrameSpec::Pong(data) => Frame::Pong { data },
            FrameSpec::GoAway(code, reason) => Frame::GoAway {
                code: ErrorCode(code),
                reason: text(reason),
            },
            FrameSpec::Error(s, code, message) => Frame::Error {
                stream: stream(s),
                code: ErrorCode(code),
                message: text(message),
            },
            FrameSpec::Listen(port) => Frame::Listen { port },
            FrameSpec::Unlisten(port) => Frame::Unlisten { port },
            FrameSpec::ListenResult(port, errno) => Frame::ListenResult { port, errno },
            FrameSpec::Accept(s, local_port, v6, port) => Frame::Accept {
                stream: stream(s),
                local_port,
                peer: addr(v6, port),
            },
            FrameSpec::Connect(s, v6, port) => Frame::Connect {
                stream: stream(s),
                addr: addr(v6, port),
            },
            FrameSpec::Connected(s, local_port) => Frame::Connected {
                stream: stream(s),
                local_port,
            },
            FrameSpec::ConnectFailed(s, errno) => Frame::ConnectFailed {
                stream: stream(s),
                errno,
            },
            FrameSpec::Data(s, len, fill) => Frame::Data {
                stream: stream(s),
                bytes: vec![fill; usize::from(len) % (MAX_PAYLOAD + 2)],
            },
            FrameSpec::Fin(s) => Frame::Fin { stream: stream(s) },
            FrameSpec::Reset(s, code) => Frame::Reset {
                stream: stream(s),
                code: ErrorCode(code),
            },
            FrameSpec::Credit(s, increment) => Frame::Credit {
                stream: stream(s),
                increment,
            },
            FrameSpec::SetOpt(s, option, value) => Frame::SetOpt {
                stream: stream(s),
                option: SockOpt(option),
                value,
            },
        }
    }
}

/// One step: something arrives from the peer, or the application acts.
#[derive(Arbitrary, Debug)]
enum Op {
    /// A frame from the peer, fed in two parts split at `split`.
    Frame(FrameSpec, u8),
    /// Raw bytes from the peer.
    Bytes(Vec<u8>),
    /// The peer closes its sending side.
    FinishInput,
    Listen(u16),
    Unlisten(u16),
    Connect(bool, u16),
    ListenResult(u16, u32),
    Accept(u16, bool, u16),
    Connected(u8, u16),
    ConnectFailed(u8, u32),
    SendData(u8, u16),
    Finish(u8),
    Reset(u8, u32),
    Release(u8, u32),
    Grant(u8, u32),
    Ping(u64),
    SendError(u8, u32, String),
    Close(u32, String),
}

#[derive(Arbitrary, Debug)]
struct Input {
    /// Test the node's end (else the I/O server's).
    node: bool,
    /// Complete an honest handshake first.
    handshake: bool,
    auto_credit: bool,
    initial_window: u32,
    max_streams: u16,
    ops: Vec<Op>,
}

fn config(key: &[u8], nonce: u8, input: &Input) -> XferConfig {
    let mut config = XferConfig::new(AuthKey::new(key).expect("16-byte key"), [nonce; 32]);
    config.initial_window = input.initial_window % (1 << 20) + 1;
    config.max_streams = u32::from(input.max_streams % 64);
    config.auto_credit = input.auto_credit;
    config
}

/// Moves `from`'s output into `to` (and back) until neither has any.
fn pump(a: &mut XferSession, b: &mut XferSession) {
    let mut buf = Vec::new();
    for _ in 0..8 {
        if !a.has_output() && !b.has_output() {
            return;
        }
        for a_first in [true, false] {
            let (from, to) = if a_first {
                (&mut *a, &mut *b)
            } else {
                (&mut *b, &mut *a)
            };
            if from.has_output() {
                buf.clear();
                from.drain_output(&mut buf);
                to.feed(&buf, &mut |_| {}).expect("honest handshake");
            }
        }
    }
}

fuzz_target!(|input: Input| {
    let key = b"connlab-fuzz-key-0123456789";
    let (mut subject, mut peer) = if input.node {
        let node = XferSession::node(config(key, 1, &input)).expect("config");
        let server = XferSession::server(config(key, 2, &input)).expect("config");
        (node, server)
    } else {
        let server = XferSession::server(config(key, 2, &input)).expect("config");
        let node = XferSession::node(config(key, 1, &input)).expect("config");
        (server, node)
    };
    if input.handshake {
        pump(&mut subject, &mut peer);
        assert!(subject.is_established() && peer.is_established());
    }
    let limit = u32::from(input.max_streams % 64) as usize;
    let mut out = Vec::new();
    let mut ended = false;
    let mut streams: Vec<StreamId> = Vec::new();
    let pick = |streams: &[StreamId], i: u8| {
        streams
            .get(usize::from(i) % streams.len().max(1))
            .copied()
            .unwrap_or(StreamId(u32::from(i)))
    };
    for op in input.ops {
        let mut fed = 0usize;
        let mut feed = |subject: &mut XferSession, bytes: &[u8]| {
            fed += bytes.len();
            let result = subject.feed(bytes, &mut |_| {});
            if !matches!(result, Ok(Flow::Continue)) {
                ended = true;
            }
            result
        };
        out.clear();
        subject.drain_output(&mut out);
        match op {
            Op::Frame(spec, split) => {
                let mut bytes = Vec::new();
                if spec.frame().encode(&mut bytes).is_ok() {
                    let at = usize::from(split).min(bytes.len());
                    let _ = feed(&mut subject, &bytes[..at]);
                    let _ = feed(&mut subject, &bytes[at..]);
                }
            }
            Op::Bytes(bytes) => {
                let _ = feed(&mut subject, &bytes);
            }
            Op::FinishInput => {
                let _ = subject.finish_input();
            }
            Op::Listen(port) => drop(subject.listen(port)),
            Op::Unlisten(port) => drop(subject.unlisten(port)),
            Op::Connect(v6, port) => {
                if let Ok(id) = subject.connect(addr(v6, port)) {
                    streams.push(id);
                }
            }
            Op::ListenResult(port, errno) => drop(subject.listen_result(port, errno)),
            Op::Accept(local_port, v6, port) => {
                if let Ok(id) = subject.accept(local_port, addr(v6, port)) {
                    streams.push(id);
                }
            }
            Op::Connected(s, port) => drop(subject.connected(pick(&streams, s), port)),
            Op::ConnectFailed(s, errno) => drop(subject.connect_failed(pick(&streams, s), errno)),
            Op::SendData(s, len) => {
                let data = vec![7; usize::from(len)];
                if let Ok(n) = subject.send_data(pick(&streams, s), &data) {
                    assert!(n <= data.len());
                }
            }
            Op::Finish(s) => drop(subject.finish(pick(&streams, s))),
            Op::Reset(s, code) => drop(subject.reset(pick(&streams, s), ErrorCode(code))),
            Op::Release(s, len) => drop(subject.release(pick(&streams, s), len)),
            Op::Grant(s, n) => drop(subject.grant(pick(&streams, s), n)),
            Op::Ping(data) => drop(subject.ping(data)),
            Op::SendError(s, code, message) => {
                drop(subject.send_error(pick(&streams, s), ErrorCode(code), &text(message)))
            }
            Op::Close(code, reason) => drop(subject.close(ErrorCode(code), &text(reason))),
        }
        if fed > 0 {
            // Replies to peer input (PONG, CREDIT, RESET, GOAWAY, the
            // handshake) stay proportional to it: a peer that never reads
            // cannot make a feed queue without bound.
            out.clear();
            subject.drain_output(&mut out);
            assert!(
                out.len() <= 4 * fed + 1024,
                "{} output bytes after a {fed}-byte feed",
                out.len()
            );
        }
        if ended {
            let mut late = 0;
            let result = subject.feed(b"\0\0\0\0\x06\0\0\0\0\0\0\0", &mut |_| late += 1);
            assert!(
                subject.is_closed() || result.is_err(),
                "session takes input after it ended: {result:?}"
            );
            assert_eq!(late, 0);
        }
        // Streams the peer opened are capped at max_streams; ours are not.
        assert!(subject.open_streams() <= limit + streams.len());
        for &s in &streams {
            let _ = (
                subject.stream_state(s),
                subject.send_credit(s),
                subject.recv_window(s),
            );
        }
        let _ = (
            subject.stats(),
            subject.version(),
            subject.node_id(),
            subject.role(),
        );
    }
});
