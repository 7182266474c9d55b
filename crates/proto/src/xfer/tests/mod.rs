//! Session tests: a node and an I/O server session wired back to back, and
//! hand-made frames injected where a well-behaved peer would not send them.

use std::net::SocketAddr;

use super::*;
use crate::Flow;

const KEY: &[u8] = b"0123456789abcdef0123456789abcdef";

fn config(key: &[u8], nonce: u8) -> XferConfig {
    let mut config = XferConfig::new(AuthKey::new(key).unwrap(), [nonce; 32]);
    config.node_id = 42;
    config
}

fn client() -> SocketAddr {
    "198.51.100.9:50123".parse().unwrap()
}

/// A node and a server session and the events each has seen.
struct Pair {
    node: XferSession,
    server: XferSession,
    node_events: Vec<Event>,
    server_events: Vec<Event>,
}

impl Pair {
    fn new(node: XferConfig, server: XferConfig) -> Pair {
        Pair {
            node: XferSession::node(node).unwrap(),
            server: XferSession::server(server).unwrap(),
            node_events: Vec::new(),
            server_events: Vec::new(),
        }
    }

    /// Moves output both ways until neither side has any; panics on errors.
    fn pump(&mut self) {
        while self.node.has_output() || self.server.has_output() {
            let mut bytes = Vec::new();
            self.node.drain_output(&mut bytes);
            let events = &mut self.server_events;
            self.server.feed(&bytes, &mut |e| events.push(e)).unwrap();
            let mut bytes = Vec::new();
            self.server.drain_output(&mut bytes);
            let events = &mut self.node_events;
            self.node.feed(&bytes, &mut |e| events.push(e)).unwrap();
        }
    }

    fn take(events: &mut Vec<Event>) -> Vec<Event> {
        std::mem::take(events)
    }
}

fn established_with(node: XferConfig, server: XferConfig) -> Pair {
    // The highest version both speak.
    let version = node.max_version.min(server.max_version);
    let mut pair = Pair::new(node, server);
    pair.pump();
    let expected = Event::Established {
        version,
        node_id: 42,
    };
    assert_eq!(
        Pair::take(&mut pair.node_events),
        std::slice::from_ref(&expected)
    );
    assert_eq!(Pair::take(&mut pair.server_events), [expected]);
    pair
}

fn established() -> Pair {
    established_with(config(KEY, 1), config(KEY, 2))
}

/// An established pair with the node serving port 80 and one accepted stream.
fn with_stream(node: XferConfig, server: XferConfig) -> (Pair, StreamId) {
    let mut pair = established_with(node, server);
    pair.node.listen(80).unwrap();
    pair.pump();
    assert_eq!(
        Pair::take(&mut pair.server_events),
        [Event::Listen { port: 80 }]
    );
    pair.server.listen_result(80, errno::OK).unwrap();
    let stream = pair.server.accept(80, client()).unwrap();
    pair.pump();
    assert_eq!(
        Pair::take(&mut pair.node_events),
        [
            Event::ListenResult { port: 80, errno: 0 },
            Event::Accepted {
                stream,
                local_port: 80,
                peer: client()
            }
        ]
    );
    (pair, stream)
}

/// Feeds one hand-made frame to `session`.
fn inject(session: &mut XferSession, frame: Frame) -> (Result<Flow, XferError>, Vec<Event>) {
    let mut bytes = Vec::new();
    frame.encode(&mut bytes).unwrap();
    let mut events = Vec::new();
    let result = session.feed(&bytes, &mut |e| events.push(e));
    (result, events)
}

/// Feeds `frame` to `session` and checks that it cost one stream only: the
/// session continues and reports exactly one stream error, returned.
fn inject_stream_error(session: &mut XferSession, frame: Frame) -> (StreamId, XferError) {
    let (result, events) = inject(session, frame);
    assert_eq!(result, Ok(Flow::Continue));
    match <[Event; 1]>::try_from(events) {
        Ok([Event::StreamError { stream, error }]) => (stream, error),
        other => panic!("one stream error expected, got {other:?}"),
    }
}

/// Decodes a session's queued output.
fn output(session: &mut XferSession) -> Vec<Frame> {
    let mut bytes = Vec::new();
    session.drain_output(&mut bytes);
    decode_all(&bytes)
}

/// Decodes whole frames (at version 2, which takes whatever version 1 takes
/// and larger DATA).
fn decode_all(bytes: &[u8]) -> Vec<Frame> {
    let mut decoder = FrameDecoder::with_version(MAX_VERSION);
    let mut input = bytes;
    let mut frames = Vec::new();
    while let Some(frame) = decoder.decode(&mut input).unwrap() {
        frames.push(frame);
    }
    frames
}

mod chunking;
mod connection;
mod handshake;
mod streams;
mod taken;
mod versions;
