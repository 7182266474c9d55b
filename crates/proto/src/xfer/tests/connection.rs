//! The connection: stream ids and roles, accept and connect, limits,
//! ping, error and goaway, truncated input and bad configs.

use super::*;

#[test]
fn stream_id_reuse_and_wrong_parity_end_the_connection() {
    let (mut pair, s) = with_stream(config(KEY, 1), config(KEY, 2));
    let (result, _) = inject(
        &mut pair.node,
        Frame::Accept {
            stream: s,
            local_port: 80,
            peer: client(),
        },
    );
    assert!(matches!(
        result,
        Err(XferError::Connection {
            reason: "stream id is not above the last one the peer opened",
            ..
        })
    ));
    assert!(pair.node.is_closed());

    let (mut pair, _) = with_stream(config(KEY, 1), config(KEY, 2));
    let (result, _) = inject(
        &mut pair.node,
        Frame::Accept {
            stream: StreamId(7),
            local_port: 80,
            peer: client(),
        },
    );
    assert!(matches!(
        result,
        Err(XferError::Connection { stream: 7, .. })
    ));
}

#[test]
fn frames_from_the_wrong_role_end_the_connection() {
    let mut pair = established();
    let (result, _) = inject(
        &mut pair.server,
        Frame::Accept {
            stream: StreamId(2),
            local_port: 80,
            peer: client(),
        },
    );
    assert_eq!(
        result,
        Err(XferError::WrongDirection {
            offset: 108,
            kind: FrameKind::Accept,
            sender: Role::Node
        })
    );
    let mut pair = established();
    let (result, _) = inject(&mut pair.node, Frame::Auth { proof: [0; 32] });
    assert!(matches!(result, Err(XferError::WrongDirection { .. })));
}

#[test]
fn accept_needs_a_served_port() {
    let mut pair = established();
    assert_eq!(
        pair.server.accept(80, client()),
        Err(LocalError::PortNotServed { port: 80 })
    );
    // A server that ignores that is refused by the node, stream by stream.
    let (_, error) = inject_stream_error(
        &mut pair.node,
        Frame::Accept {
            stream: StreamId(2),
            local_port: 80,
            peer: client(),
        },
    );
    assert!(matches!(
        error,
        XferError::Stream {
            code: ErrorCode::REFUSED,
            ..
        }
    ));
    // A refused LISTEN is forgotten; UNLISTEN too.
    pair.node.listen(81).unwrap();
    pair.pump();
    pair.server.listen_result(81, errno::EADDRINUSE).unwrap();
    pair.pump();
    assert!(pair.node_events.contains(&Event::ListenResult {
        port: 81,
        errno: errno::EADDRINUSE
    }));
    assert!(matches!(
        pair.server.accept(81, client()),
        Err(LocalError::PortNotServed { port: 81 })
    ));
    pair.node.listen(82).unwrap();
    pair.pump();
    pair.server.listen_result(82, errno::OK).unwrap();
    pair.node.unlisten(82).unwrap();
    pair.pump();
    assert!(pair.server_events.contains(&Event::Unlisten { port: 82 }));
    assert!(pair.server.accept(82, client()).is_err());
}

#[test]
fn stream_limits_are_enforced_at_both_ends() {
    let mut node = config(KEY, 1);
    node.max_streams = 1;
    let (mut pair, s) = with_stream(node, config(KEY, 2));
    assert_eq!(
        pair.server.accept(80, client()),
        Err(LocalError::StreamLimit {
            op: "accept",
            max: 1
        })
    );
    let (stream, error) = inject_stream_error(
        &mut pair.node,
        Frame::Accept {
            stream: StreamId(4),
            local_port: 80,
            peer: client(),
        },
    );
    assert_eq!(stream, StreamId(4));
    assert!(matches!(
        error,
        XferError::Stream {
            code: ErrorCode::REFUSED,
            ..
        }
    ));
    // Closing the first stream makes room again.
    pair.node.reset(s, ErrorCode::CANCEL).unwrap();
    pair.pump();
    // The server's id 4 was never used on its side, so it continues from there.
    assert!(pair.server.accept(80, client()).is_ok());
}

#[test]
fn connect_succeeds_or_fails_with_an_errno() {
    let mut pair = established();
    let target: SocketAddr = "[2001:db8::5]:443".parse().unwrap();
    let s = pair.node.connect(target).unwrap();
    assert_eq!(s, StreamId(1));
    assert_eq!(pair.node.stream_state(s), StreamState::Connecting);
    assert!(matches!(
        pair.node.send_data(s, b"x"),
        Err(LocalError::WrongState {
            state: StreamState::Connecting,
            ..
        })
    ));
    pair.pump();
    assert_eq!(
        Pair::take(&mut pair.server_events),
        [Event::ConnectRequest {
            stream: s,
            addr: target
        }]
    );
    pair.server.connected(s, 40001).unwrap();
    pair.node.set_option(s, SockOpt::NODELAY, 1).unwrap();
    pair.pump();
    assert_eq!(
        Pair::take(&mut pair.node_events),
        [Event::Connected {
            stream: s,
            local_port: 40001
        }]
    );
    assert_eq!(
        Pair::take(&mut pair.server_events),
        [Event::SetOpt {
            stream: s,
            option: SockOpt::NODELAY,
            value: 1
        }]
    );
    assert_eq!(pair.node.send_data(s, b"hi"), Ok(2));
    pair.pump();
    assert_eq!(
        Pair::take(&mut pair.server_events),
        [Event::Data {
            stream: s,
            bytes: b"hi".to_vec()
        }]
    );

    let s2 = pair.node.connect(target).unwrap();
    assert_eq!(s2, StreamId(3));
    pair.pump();
    pair.server.connect_failed(s2, errno::ECONNREFUSED).unwrap();
    pair.pump();
    assert!(pair.node_events.contains(&Event::ConnectFailed {
        stream: s2,
        errno: errno::ECONNREFUSED
    }));
    assert_eq!(pair.node.stream_state(s2), StreamState::Closed);
    assert_eq!(pair.node.stream_state(StreamId(5)), StreamState::Idle);
}

#[test]
fn data_before_connected_resets_the_stream() {
    let mut pair = established();
    let s = pair.node.connect(client()).unwrap();
    pair.pump();
    Pair::take(&mut pair.server_events);
    let (_, error) = inject_stream_error(
        &mut pair.server,
        Frame::Data {
            stream: s,
            bytes: vec![1],
        },
    );
    assert!(matches!(
        error,
        XferError::Stream {
            code: ErrorCode::PROTOCOL,
            reason: "DATA before CONNECTED",
            ..
        }
    ));
}

#[test]
fn role_specific_calls_are_refused_on_the_other_role() {
    let mut pair = established();
    assert_eq!(
        pair.node.accept(80, client()),
        Err(LocalError::WrongRole {
            op: "accept",
            role: Role::Server
        })
    );
    assert!(matches!(
        pair.server.connect(client()),
        Err(LocalError::WrongRole { .. })
    ));
    assert!(matches!(
        pair.server.listen(80),
        Err(LocalError::WrongRole { .. })
    ));
}

#[test]
fn ping_error_and_goaway() {
    let mut pair = established();
    pair.node.ping(0xfeed).unwrap();
    pair.server
        .send_error(StreamId(9), ErrorCode::UNSUPPORTED, "option 99")
        .unwrap();
    pair.pump();
    assert_eq!(
        Pair::take(&mut pair.node_events),
        [
            Event::PeerError {
                stream: StreamId(9),
                code: ErrorCode::UNSUPPORTED,
                message: "option 99".into()
            },
            Event::Pong { data: 0xfeed }
        ]
    );
    pair.server
        .close(ErrorCode::NO_ERROR, "shutting down")
        .unwrap();
    assert!(pair.server.is_closed());
    let mut bytes = Vec::new();
    pair.server.drain_output(&mut bytes);
    let mut events = Vec::new();
    assert_eq!(
        pair.node.feed(&bytes, &mut |e| events.push(e)),
        Ok(Flow::Close)
    );
    assert_eq!(
        events,
        [Event::GoAway {
            code: ErrorCode::NO_ERROR,
            reason: "shutting down".into()
        }]
    );
    assert!(matches!(pair.node.ping(1), Err(LocalError::Closed { .. })));
}

#[test]
fn a_handshake_frame_after_the_handshake_ends_the_connection() {
    let mut pair = established();
    let (result, _) = inject(
        &mut pair.node,
        Frame::Challenge(Challenge {
            version: 1,
            initial_window: 1,
            max_streams: 1,
            nonce: [0; 32],
            proof: [0; 32],
        }),
    );
    assert!(matches!(result, Err(XferError::Connection { .. })));
}

#[test]
fn truncated_input_is_reported_at_eof() {
    let mut pair = established();
    pair.node.ping(1).unwrap();
    let mut bytes = Vec::new();
    pair.node.drain_output(&mut bytes);
    pair.server.feed(&bytes[..5], &mut |_| {}).unwrap();
    assert_eq!(
        pair.server.finish_input(),
        Err(XferError::Truncated {
            offset: 108,
            received: 5
        })
    );
    pair.server.feed(&bytes[5..], &mut |_| {}).unwrap();
    assert_eq!(pair.server.finish_input(), Ok(()));
}

#[test]
fn bad_configs_are_refused() {
    let mut bad = config(KEY, 1);
    bad.initial_window = 0;
    assert!(matches!(
        XferSession::node(bad),
        Err(LocalError::BadConfig {
            field: "initial_window",
            ..
        })
    ));
    let mut bad = config(KEY, 1);
    bad.max_streams = MAX_STREAMS_LIMIT + 1;
    assert!(matches!(
        XferSession::server(bad),
        Err(LocalError::BadConfig {
            field: "max_streams",
            ..
        })
    ));
}
