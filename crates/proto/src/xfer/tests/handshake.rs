//! The handshake: authentication, versions, and what is refused before it
//! completes.

use super::*;

#[test]
fn handshake_authenticates_both_sides_and_negotiates_the_version() {
    let pair = established();
    for session in [&pair.node, &pair.server] {
        assert!(session.is_established());
        assert_eq!(session.version(), Some(2));
        assert_eq!(session.node_id(), 42);
        assert_eq!(session.stats().auth_failures, 0);
    }
    assert_eq!(pair.node.role(), Role::Node);
    assert_eq!(pair.server.role(), Role::Server);
}

#[test]
fn a_server_with_another_key_is_refused_by_the_node() {
    let mut pair = Pair::new(config(KEY, 1), config(b"another key, 16+ bytes", 2));
    let mut bytes = Vec::new();
    pair.node.drain_output(&mut bytes);
    pair.server.feed(&bytes, &mut |_| {}).unwrap();
    let mut bytes = Vec::new();
    pair.server.drain_output(&mut bytes);
    let err = pair.node.feed(&bytes, &mut |_| {}).unwrap_err();
    assert_eq!(
        err,
        XferError::AuthFailed {
            offset: 0,
            prover: Role::Server
        }
    );
    assert_eq!(pair.node.stats().auth_failures, 1);
    assert!(pair.node.is_closed());
    let mut goaway = Vec::new();
    pair.node.drain_output(&mut goaway);
    assert!(matches!(
        decode_all(&goaway).as_slice(),
        [Frame::GoAway {
            code: ErrorCode::AUTH_FAILED,
            ..
        }]
    ));
    // The server learns of it from the GOAWAY and counts it too.
    let mut events = Vec::new();
    pair.server.feed(&goaway, &mut |e| events.push(e)).unwrap();
    assert_eq!(pair.server.stats().auth_failures, 1);
    assert!(pair.server.is_closed());
    assert!(matches!(
        events.as_slice(),
        [Event::GoAway {
            code: ErrorCode::AUTH_FAILED,
            ..
        }]
    ));
}

#[test]
fn a_node_with_a_wrong_proof_is_refused_and_counted() {
    let mut node = XferSession::node(config(KEY, 1)).unwrap();
    let mut server = XferSession::server(config(KEY, 2)).unwrap();
    let mut bytes = Vec::new();
    node.drain_output(&mut bytes);
    server.feed(&bytes, &mut |_| {}).unwrap();
    assert!(matches!(
        output(&mut server).as_slice(),
        [Frame::Challenge(_)]
    ));
    // An impostor cannot compute the proof; any other 32 bytes fail.
    let (result, events) = inject(&mut server, Frame::Auth { proof: [0; 32] });
    let err = result.unwrap_err();
    assert!(matches!(
        err,
        XferError::AuthFailed {
            prover: Role::Node,
            ..
        }
    ));
    assert_eq!(
        err.to_string(),
        "frame at byte 64: the node's proof does not match the shared key"
    );
    assert!(events.is_empty());
    assert_eq!(server.stats().auth_failures, 1);
    assert_eq!(server.stats().connection_errors, 1);
    assert!(!server.is_established());
    assert!(matches!(
        output(&mut server).as_slice(),
        [Frame::GoAway {
            code: ErrorCode::AUTH_FAILED,
            ..
        }]
    ));
    // Nothing more is taken from this peer.
    let (result, _) = inject(&mut server, Frame::Listen { port: 80 });
    assert_eq!(result, Ok(Flow::Close));
}

#[test]
fn frames_before_authentication_are_refused() {
    let mut server = XferSession::server(config(KEY, 2)).unwrap();
    let (result, events) = inject(&mut server, Frame::Listen { port: 80 });
    assert_eq!(
        result,
        Err(XferError::Unauthenticated {
            offset: 0,
            kind: FrameKind::Listen,
            expected: FrameKind::Hello
        })
    );
    assert!(events.is_empty());
    assert!(matches!(
        output(&mut server).as_slice(),
        [Frame::GoAway {
            code: ErrorCode::AUTH_REQUIRED,
            ..
        }]
    ));

    // Between HELLO and AUTH too.
    let mut node = XferSession::node(config(KEY, 1)).unwrap();
    let mut server = XferSession::server(config(KEY, 2)).unwrap();
    let mut bytes = Vec::new();
    node.drain_output(&mut bytes);
    server.feed(&bytes, &mut |_| {}).unwrap();
    let (result, _) = inject(
        &mut server,
        Frame::Connect {
            stream: StreamId(1),
            addr: client(),
        },
    );
    assert!(matches!(
        result,
        Err(XferError::Unauthenticated {
            expected: FrameKind::Auth,
            ..
        })
    ));

    // And on the node before CHALLENGE.
    let mut node = XferSession::node(config(KEY, 1)).unwrap();
    let (result, _) = inject(
        &mut node,
        Frame::Accept {
            stream: StreamId(2),
            local_port: 80,
            peer: client(),
        },
    );
    assert!(matches!(result, Err(XferError::Unauthenticated { .. })));

    // The local API refuses too.
    let mut node = XferSession::node(config(KEY, 1)).unwrap();
    assert_eq!(
        node.listen(80),
        Err(LocalError::NotEstablished { op: "listen" })
    );
}

#[test]
fn no_common_version_ends_the_connection() {
    let mut server = XferSession::server(config(KEY, 2)).unwrap();
    let hello = Hello {
        min_version: 3,
        max_version: 7,
        node_id: 1,
        initial_window: 1000,
        max_streams: 10,
        nonce: [0; 32],
    };
    let (result, _) = inject(&mut server, Frame::Hello(hello));
    let err = result.unwrap_err();
    assert_eq!(err.code(), ErrorCode::VERSION);
    assert_eq!(
        err.to_string(),
        "frame at byte 0: no common protocol version: offered 3..=7, supported 1..=2"
    );
}

#[test]
fn a_peer_goaway_before_authentication_is_reported() {
    let mut node = XferSession::node(config(KEY, 1)).unwrap();
    let (result, events) = inject(
        &mut node,
        Frame::GoAway {
            code: ErrorCode::VERSION,
            reason: "no".into(),
        },
    );
    assert_eq!(result, Ok(Flow::Close));
    assert_eq!(
        events,
        [Event::GoAway {
            code: ErrorCode::VERSION,
            reason: "no".into()
        }]
    );
}
