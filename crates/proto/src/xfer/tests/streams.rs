//! Streams: data both ways, half close, credit, resets and unknown ids.

use super::*;

#[test]
fn data_flows_both_ways_and_half_close_ends_the_stream() {
    let (mut pair, s) = with_stream(config(KEY, 1), config(KEY, 2));
    assert_eq!(pair.server.send_data(s, b"GET / HTTP/1.0\r\n\r\n"), Ok(18));
    pair.server.finish(s).unwrap();
    assert_eq!(pair.server.stream_state(s), StreamState::HalfClosedLocal);
    assert_eq!(
        pair.server.send_data(s, b"x"),
        Err(LocalError::WrongState {
            op: "send_data",
            stream: s,
            state: StreamState::HalfClosedLocal
        })
    );
    pair.pump();
    assert_eq!(
        Pair::take(&mut pair.node_events),
        [
            Event::Data {
                stream: s,
                bytes: b"GET / HTTP/1.0\r\n\r\n".to_vec()
            },
            Event::Fin { stream: s }
        ]
    );
    assert_eq!(pair.node.stream_state(s), StreamState::HalfClosedRemote);
    // The half-closed-remote side still sends.
    assert_eq!(pair.node.send_data(s, b"HTTP/1.0 200 OK\r\n\r\n"), Ok(19));
    pair.node.finish(s).unwrap();
    assert_eq!(pair.node.stream_state(s), StreamState::Closed);
    pair.pump();
    assert_eq!(
        Pair::take(&mut pair.server_events),
        [
            Event::Data {
                stream: s,
                bytes: b"HTTP/1.0 200 OK\r\n\r\n".to_vec()
            },
            Event::Fin { stream: s },
            Event::Closed { stream: s }
        ]
    );
    assert_eq!(pair.server.stream_state(s), StreamState::Closed);
    assert_eq!(pair.server.open_streams(), 0);
    assert_eq!(pair.node.open_streams(), 0);
}

#[test]
fn data_after_fin_resets_only_that_stream() {
    let (mut pair, s) = with_stream(config(KEY, 1), config(KEY, 2));
    let other = pair.server.accept(80, client()).unwrap();
    pair.server.finish(s).unwrap();
    pair.pump();
    Pair::take(&mut pair.node_events);
    let (_, error) = inject_stream_error(
        &mut pair.node,
        Frame::Data {
            stream: s,
            bytes: vec![1],
        },
    );
    assert!(matches!(
        error,
        XferError::Stream {
            code: ErrorCode::STREAM_CLOSED,
            ..
        }
    ));
    assert_eq!(
        output(&mut pair.node),
        [Frame::Reset {
            stream: s,
            code: ErrorCode::STREAM_CLOSED
        }]
    );
    assert_eq!(pair.node.stream_state(s), StreamState::Closed);
    assert_eq!(pair.node.stream_state(other), StreamState::Open);
    assert_eq!(pair.node.stats().stream_errors, 1);
    assert_eq!(pair.node.stats().resets_sent, 1, "the stream error's RESET");
}

#[test]
fn the_sender_api_never_exceeds_credit_and_release_returns_it() {
    let mut node = config(KEY, 1);
    node.initial_window = 100;
    let (mut pair, s) = with_stream(node, config(KEY, 2));
    assert_eq!(pair.server.send_credit(s), Some(100));
    assert_eq!(pair.server.send_data(s, &[7; 150]), Ok(100));
    assert_eq!(
        pair.server.send_data(s, &[7; 50]),
        Err(LocalError::NoCredit { stream: s })
    );
    pair.pump();
    assert_eq!(
        Pair::take(&mut pair.node_events),
        [Event::Data {
            stream: s,
            bytes: vec![7; 100]
        }]
    );
    assert_eq!(pair.node.recv_window(s), Some(0));
    // Releasing less than half the window sends nothing yet.
    pair.node.release(s, 40).unwrap();
    assert!(!pair.node.has_output());
    pair.node.release(s, 20).unwrap();
    assert_eq!(
        pair.node.release(s, 41),
        Err(LocalError::ReleaseTooLarge {
            stream: s,
            len: 41,
            unreleased: 40
        })
    );
    pair.pump();
    assert_eq!(
        Pair::take(&mut pair.server_events),
        [Event::Credit {
            stream: s,
            available: 60
        }]
    );
    assert_eq!(pair.server.send_data(s, &[8; 60]), Ok(60));
}

#[test]
fn data_beyond_credit_is_a_stream_error_at_the_receiver() {
    let mut node = config(KEY, 1);
    node.initial_window = 100;
    let (mut pair, s) = with_stream(node, config(KEY, 2));
    let (result, events) = inject(
        &mut pair.node,
        Frame::Data {
            stream: s,
            bytes: vec![0; 101],
        },
    );
    assert_eq!(result, Ok(Flow::Continue));
    let expected = XferError::FlowControl {
        offset: 128,
        stream: s,
        len: 101,
        credit: 100,
    };
    assert_eq!(
        events,
        [Event::StreamError {
            stream: s,
            error: expected.clone()
        }]
    );
    assert_eq!(
        expected.to_string(),
        "frame at byte 128: DATA of 101 bytes on stream 2 exceeds its remaining credit of 100"
    );
    assert_eq!(
        output(&mut pair.node),
        [Frame::Reset {
            stream: s,
            code: ErrorCode::FLOW_CONTROL
        }]
    );
    assert!(pair.node.is_established());
}

#[test]
fn a_stalled_stream_does_not_block_another() {
    let mut node = config(KEY, 1);
    node.initial_window = 64;
    let (mut pair, a) = with_stream(node, config(KEY, 2));
    let b = pair.server.accept(80, client()).unwrap();
    pair.pump();
    Pair::take(&mut pair.node_events);
    // Stream a's reader never releases: a runs out of credit.
    assert_eq!(pair.server.send_data(a, &[1; 64]), Ok(64));
    assert_eq!(
        pair.server.send_data(a, &[1]),
        Err(LocalError::NoCredit { stream: a })
    );
    for _ in 0..10 {
        assert_eq!(pair.server.send_data(b, &[2; 64]), Ok(64));
        pair.pump();
        pair.node.release(b, 64).unwrap();
        pair.pump();
    }
    let b_bytes: usize = pair
        .node_events
        .iter()
        .map(|e| match e {
            Event::Data { stream, bytes } if *stream == b => bytes.len(),
            _ => 0,
        })
        .sum();
    assert_eq!(b_bytes, 640);
    assert_eq!(pair.server.send_credit(a), Some(0));
}

#[test]
fn credit_overflow_and_zero_credit_reset_the_stream() {
    let (mut pair, s) = with_stream(config(KEY, 1), config(KEY, 2));
    let (_, error) = inject_stream_error(
        &mut pair.server,
        Frame::Credit {
            stream: s,
            increment: MAX_WINDOW,
        },
    );
    assert!(matches!(error, XferError::BadCredit { .. }));
    assert_eq!(pair.server.stream_state(s), StreamState::Closed);
}

#[test]
fn auto_credit_returns_credit_on_delivery() {
    let mut node = config(KEY, 1);
    node.initial_window = 10;
    node.auto_credit = true;
    let (mut pair, s) = with_stream(node, config(KEY, 2));
    for _ in 0..5 {
        assert_eq!(pair.server.send_data(s, &[1; 10]), Ok(10));
        pair.pump();
    }
    assert_eq!(pair.server.send_credit(s), Some(10));
}

#[test]
fn grant_widens_a_window() {
    let mut node = config(KEY, 1);
    node.initial_window = 10;
    let (mut pair, s) = with_stream(node, config(KEY, 2));
    pair.node.grant(s, 1000).unwrap();
    pair.pump();
    assert_eq!(pair.server.send_credit(s), Some(1010));
    assert!(matches!(
        pair.node.grant(s, MAX_WINDOW),
        Err(LocalError::BadGrant { .. })
    ));
}

#[test]
fn reset_ends_the_stream_and_late_frames_are_ignored() {
    let (mut pair, s) = with_stream(config(KEY, 1), config(KEY, 2));
    pair.node.reset(s, ErrorCode::CANCEL).unwrap();
    // The server's data crosses the RESET.
    pair.server.send_data(s, b"late").unwrap();
    pair.pump();
    assert_eq!(
        Pair::take(&mut pair.server_events),
        [Event::Reset {
            stream: s,
            code: ErrorCode::CANCEL
        }]
    );
    assert!(pair.node_events.is_empty());
    assert_eq!(pair.node.stats().frames_ignored, 1);
    assert_eq!(pair.node.stats().stream_errors, 0);
    assert_eq!(pair.node.stats().resets_sent, 1, "the explicit RESET");
    assert_eq!(pair.server.stream_state(s), StreamState::Closed);
    assert!(matches!(
        pair.server.send_data(s, b"x"),
        Err(LocalError::UnknownStream { .. })
    ));
}

#[test]
fn unknown_stream_ids_cost_only_that_stream() {
    let (mut pair, s) = with_stream(config(KEY, 1), config(KEY, 2));
    // Never opened: answered with RESET UNKNOWN_STREAM.
    let (stream, error) = inject_stream_error(
        &mut pair.node,
        Frame::Data {
            stream: StreamId(1000),
            bytes: vec![1],
        },
    );
    assert_eq!(stream, StreamId(1000));
    assert!(matches!(
        error,
        XferError::Stream {
            code: ErrorCode::UNKNOWN_STREAM,
            ..
        }
    ));
    assert_eq!(
        output(&mut pair.node),
        [Frame::Reset {
            stream: StreamId(1000),
            code: ErrorCode::UNKNOWN_STREAM
        }]
    );
    // A RESET of an unknown stream is never answered.
    let (result, events) = inject(
        &mut pair.node,
        Frame::Reset {
            stream: StreamId(77),
            code: ErrorCode::CANCEL,
        },
    );
    assert_eq!(result, Ok(Flow::Continue));
    assert!(events.is_empty());
    assert!(!pair.node.has_output());
    assert_eq!(pair.node.stream_state(s), StreamState::Open);
}

#[test]
fn a_data_header_takes_credit_like_send_data_and_frames_the_callers_payload() {
    let mut node = config(KEY, 1);
    node.initial_window = 100;
    let (mut pair, s) = with_stream(node, config(KEY, 2));
    // What send_data would queue, the caller lays out itself.
    let header = pair.server.send_data_header(s, 60).unwrap();
    let mut expected = Vec::new();
    Frame::encode_data(s, &[5; 60], &mut expected).unwrap();
    assert_eq!(header[..], expected[..HEADER_LEN]);
    assert_eq!(pair.server.send_credit(s), Some(40));
    assert!(!pair.server.has_output());
    assert_eq!(
        pair.server.send_data_header(s, 41),
        Err(LocalError::NoCredit { stream: s })
    );
    assert!(matches!(
        pair.server.send_data_header(s, 0),
        Err(LocalError::TooLarge { .. })
    ));
    assert!(matches!(
        pair.server
            .send_data_header(s, pair.server.max_data_payload() + 1),
        Err(LocalError::TooLarge { .. })
    ));
    assert_eq!(pair.server.send_credit(s), Some(40));
    assert!(matches!(
        pair.server.send_data_header(StreamId(4), 1),
        Err(LocalError::UnknownStream { .. })
    ));
    // The peer takes header plus payload as an ordinary DATA frame, and
    // FIN queued afterwards follows it.
    let mut bytes = header.to_vec();
    bytes.extend_from_slice(&[5; 60]);
    pair.server.finish(s).unwrap();
    pair.server.drain_output(&mut bytes);
    let events = &mut pair.node_events;
    pair.node.feed(&bytes, &mut |e| events.push(e)).unwrap();
    assert_eq!(
        Pair::take(&mut pair.node_events),
        [
            Event::Data {
                stream: s,
                bytes: vec![5; 60]
            },
            Event::Fin { stream: s }
        ]
    );
    assert_eq!(pair.server.stats().data_bytes_sent, 60);
    // After FIN this end may send no more.
    assert!(matches!(
        pair.server.send_data_header(s, 1),
        Err(LocalError::WrongState { .. })
    ));
}
