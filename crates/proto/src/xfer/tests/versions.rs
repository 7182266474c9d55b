//! Version negotiation and what it changes: version 2 lets DATA carry up to
//! 256 KiB, version 1 keeps it at 16 KiB, and each end's frame decoder
//! checks the negotiated version's limit.

use super::*;

/// `config` offering (node) or picking (server) at most `max_version`.
fn config_at(key: &[u8], nonce: u8, max_version: u16) -> XferConfig {
    let mut config = config(key, nonce);
    config.max_version = max_version;
    config
}

/// A hand-made DATA frame of `len` bytes on `stream`, whatever the limits.
fn raw_data(stream: StreamId, len: usize) -> Vec<u8> {
    let mut bytes = vec![0; HEADER_LEN + len];
    bytes[LEN_AT..LEN_AT + 4].copy_from_slice(&(len as u32).to_be_bytes());
    bytes[TYPE_AT] = FrameKind::Data as u8;
    bytes[STREAM_AT..STREAM_AT + 4].copy_from_slice(&stream.0.to_be_bytes());
    bytes[HEADER_LEN..].fill(0x7e);
    bytes
}

/// The DATA events among `events`: (stream, payload length).
fn data_events(events: &[Event]) -> Vec<(StreamId, usize)> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::Data { stream, bytes } => Some((*stream, bytes.len())),
            _ => None,
        })
        .collect()
}

#[test]
fn a_version_1_node_and_a_version_2_server_negotiate_1() {
    let pair = established_with(config_at(KEY, 1, 1), config(KEY, 2));
    for session in [&pair.node, &pair.server] {
        assert_eq!(session.version(), Some(1));
        assert_eq!(session.max_data_payload(), MAX_PAYLOAD);
    }
}

#[test]
fn a_version_2_node_and_a_version_1_server_negotiate_1() {
    let pair = established_with(config(KEY, 1), config_at(KEY, 2, 1));
    for session in [&pair.node, &pair.server] {
        assert_eq!(session.version(), Some(1));
        assert_eq!(session.max_data_payload(), MAX_PAYLOAD);
    }
}

#[test]
fn the_hello_of_a_version_1_node_is_byte_for_byte_version_1() {
    let mut node = XferSession::node(config_at(KEY, 1, 1)).unwrap();
    let frames = output(&mut node);
    let [Frame::Hello(hello)] = frames.as_slice() else {
        panic!("one HELLO expected, got {frames:?}");
    };
    assert_eq!((hello.min_version, hello.max_version), (1, 1));
    let mut node = XferSession::node(config(KEY, 1)).unwrap();
    let frames = output(&mut node);
    let [Frame::Hello(hello)] = frames.as_slice() else {
        panic!("one HELLO expected, got {frames:?}");
    };
    assert_eq!((hello.min_version, hello.max_version), (1, 2));
}

#[test]
fn at_version_1_a_data_payload_of_16385_bytes_is_frame_size() {
    // Toward the node.
    let (mut pair, s) = with_stream(config_at(KEY, 1, 1), config(KEY, 2));
    let mut events = Vec::new();
    let err = pair
        .node
        .feed(&raw_data(s, MAX_PAYLOAD + 1), &mut |e| events.push(e))
        .unwrap_err();
    assert_data_too_long(&err, 16_385, 16_384);
    assert!(pair.node.is_closed());
    assert!(matches!(
        output(&mut pair.node).as_slice(),
        [Frame::GoAway {
            code: ErrorCode::FRAME_SIZE,
            ..
        }]
    ));
    // Toward the server.
    let (mut pair, s) = with_stream(config_at(KEY, 1, 1), config(KEY, 2));
    let err = pair
        .server
        .feed(&raw_data(s, MAX_PAYLOAD + 1), &mut |_| {})
        .unwrap_err();
    assert_eq!(err.code(), ErrorCode::FRAME_SIZE);
    // A full version 1 payload still passes.
    let (mut pair, s) = with_stream(config_at(KEY, 1, 1), config(KEY, 2));
    pair.node
        .feed(&raw_data(s, MAX_PAYLOAD), &mut |e| events.push(e))
        .unwrap();
    assert_eq!(data_events(&events), [(s, MAX_PAYLOAD)]);
}

#[test]
fn at_version_2_a_64_kib_data_frame_passes_both_ways() {
    let (mut pair, s) = with_stream(config(KEY, 1), config(KEY, 2));
    assert_eq!(pair.server.version(), Some(2));
    assert_eq!(pair.server.max_data_payload(), 262_144);
    // Hand-made, toward the node (the default window is 64 KiB).
    let mut events = Vec::new();
    pair.node
        .feed(&raw_data(s, 64 * 1024), &mut |e| events.push(e))
        .unwrap();
    assert_eq!(data_events(&events), [(s, 64 * 1024)]);
    assert_eq!(pair.node.recv_window(s), Some(0));
    // Through send_data, toward the server: one frame, not four.
    let body = vec![3u8; 64 * 1024];
    assert_eq!(pair.node.send_data(s, &body), Ok(64 * 1024));
    let frames = output(&mut pair.node);
    assert_eq!(frames.len(), 1);
    let mut bytes = Vec::new();
    Frame::Data {
        stream: s,
        bytes: body,
    }
    .encode_for(2, &mut bytes)
    .unwrap();
    let mut events = Vec::new();
    pair.server.feed(&bytes, &mut |e| events.push(e)).unwrap();
    assert_eq!(data_events(&events), [(s, 64 * 1024)]);
}

#[test]
fn at_version_2_a_data_payload_over_262144_bytes_is_frame_size() {
    let mut node = config(KEY, 1);
    node.initial_window = MAX_WINDOW;
    let (mut pair, s) = with_stream(node, config(KEY, 2));
    let mut events = Vec::new();
    pair.node
        .feed(&raw_data(s, MAX_DATA_PAYLOAD_V2), &mut |e| events.push(e))
        .unwrap();
    assert_eq!(data_events(&events), [(s, MAX_DATA_PAYLOAD_V2)]);
    let err = pair
        .node
        .feed(&raw_data(s, MAX_DATA_PAYLOAD_V2 + 1), &mut |_| {})
        .unwrap_err();
    assert_data_too_long(&err, 262_145, 262_144);
}

#[test]
fn senders_cut_data_at_the_negotiated_limit_within_the_credit() {
    for (max_version, frames) in [(1, 19), (2, 2)] {
        let mut node = config_at(KEY, 1, max_version);
        node.initial_window = 300_000;
        let (mut pair, s) = with_stream(node, config(KEY, 2));
        // More than the credit: only the credit's worth is taken.
        assert_eq!(pair.server.send_data(s, &vec![9; 400_000]), Ok(300_000));
        let sent = output(&mut pair.server);
        let lens: Vec<usize> = sent
            .iter()
            .map(|f| match f {
                Frame::Data { bytes, .. } => bytes.len(),
                other => panic!("DATA expected, got {other:?}"),
            })
            .collect();
        assert_eq!(lens.len(), frames, "version {max_version}");
        assert_eq!(lens.iter().sum::<usize>(), 300_000);
        let max = pair.server.max_data_payload();
        assert!(lens.iter().all(|&n| n <= max));
        assert_eq!(lens[0], max);
    }
}

#[test]
fn a_data_header_may_carry_the_negotiated_limit_and_no_more() {
    let mut node = config(KEY, 1);
    node.initial_window = MAX_WINDOW;
    let (mut pair, s) = with_stream(node, config(KEY, 2));
    assert!(pair.server.send_data_header(s, MAX_DATA_PAYLOAD_V2).is_ok());
    assert!(matches!(
        pair.server.send_data_header(s, MAX_DATA_PAYLOAD_V2 + 1),
        Err(LocalError::TooLarge { max: 262_144, .. })
    ));
    let mut node = config_at(KEY, 1, 1);
    node.initial_window = MAX_WINDOW;
    let (mut pair, s) = with_stream(node, config(KEY, 2));
    assert!(pair.server.send_data_header(s, MAX_PAYLOAD).is_ok());
    assert!(matches!(
        pair.server.send_data_header(s, MAX_PAYLOAD + 1),
        Err(LocalError::TooLarge { max: 16_384, .. })
    ));
}

#[test]
fn before_the_version_is_chosen_version_1_limits_apply() {
    // A server that has not seen HELLO yet: a large DATA is FRAME_SIZE, not
    // AUTH_REQUIRED, because the length is checked first.
    let mut server = XferSession::server(config(KEY, 2)).unwrap();
    assert_eq!(server.max_data_payload(), MAX_PAYLOAD);
    let err = server
        .feed(&raw_data(StreamId(1), MAX_PAYLOAD + 1), &mut |_| {})
        .unwrap_err();
    assert_eq!(err.code(), ErrorCode::FRAME_SIZE);
}

#[test]
fn an_unauthenticated_node_is_held_to_version_1_limits() {
    // The server picks version 2 on HELLO but applies its limits only once
    // AUTH proves the node: before that a peer cannot make it buffer more
    // than a version 1 payload.
    let mut server = XferSession::server(config(KEY, 2)).unwrap();
    let hello = Hello {
        min_version: 1,
        max_version: 2,
        node_id: 42,
        initial_window: 1000,
        max_streams: 10,
        nonce: [9; 32],
    };
    let (result, _) = inject(&mut server, Frame::Hello(hello));
    assert_eq!(result, Ok(Flow::Continue));
    assert_eq!(server.version(), Some(2));
    assert_eq!(server.max_data_payload(), MAX_DATA_PAYLOAD_V2);
    let err = server
        .feed(&raw_data(StreamId(1), MAX_PAYLOAD + 1), &mut |_| {})
        .unwrap_err();
    assert_data_too_long(&err, 16_385, 16_384);
}

#[test]
fn max_version_outside_the_supported_range_is_refused() {
    for bad in [0, 3] {
        let config = config_at(KEY, 1, bad);
        assert!(matches!(
            XferSession::node(config.clone()),
            Err(LocalError::BadConfig {
                field: "max_version",
                ..
            })
        ));
        assert!(XferSession::server(config).is_err());
    }
}

/// `err` is the FRAME_SIZE connection error of a DATA payload of `len`
/// bytes against a limit of `max`.
fn assert_data_too_long(err: &XferError, len: u32, max: u32) {
    assert_eq!(err.code(), ErrorCode::FRAME_SIZE);
    assert!(
        matches!(
            err,
            XferError::BadLength { kind: FrameKind::Data, len: l, max: m, .. } if *l == len && *m == max
        ),
        "{err:?}"
    );
}
