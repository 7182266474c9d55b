//! DATA payloads taken out of the session (`take_pending_data`, for a
//! driver that splices them): the same checks, credit and counters as the
//! copying path, decided before any payload byte is read.

use super::*;
use proptest::prelude::*;

/// Encodes `frames` as the node would send them.
fn wire(frames: &[Frame]) -> Vec<u8> {
    let mut bytes = Vec::new();
    for frame in frames {
        frame.encode_for(MAX_VERSION, &mut bytes).unwrap();
    }
    bytes
}

/// Events, taken (stream, length) pairs and the result of a feed.
type Fed = (Vec<Event>, Vec<(StreamId, u32)>, Result<Flow, XferError>);

/// Feeds `bytes` the way a splicing driver reads them: at most
/// `until_next_payload` at a time; a DATA payload of at least `threshold`
/// bytes is taken and accounted with `consume_taken` (its bytes never fed).
/// Returns the events, the taken (stream, len) pairs and the result.
fn feed_taking(session: &mut XferSession, mut bytes: &[u8], threshold: usize) -> Fed {
    let mut events = Vec::new();
    let mut taken = Vec::new();
    while !bytes.is_empty() {
        if let Some((_, len)) = session.pending_data() {
            if len >= threshold {
                match session.take_pending_data(&mut |e| events.push(e)) {
                    Ok(Some(t)) => {
                        taken.push(t);
                        let n = session.taken_remaining();
                        assert_eq!(n, len);
                        assert_eq!(session.consume_taken(n), n);
                        bytes = &bytes[n..];
                        continue;
                    }
                    Ok(None) => {}
                    Err(e) => return (events, taken, Err(e)),
                }
            }
        }
        let n = session.until_next_payload().min(bytes.len());
        let result = session.feed(&bytes[..n], &mut |e| events.push(e));
        bytes = &bytes[n..];
        if result != Ok(Flow::Continue) {
            return (events, taken, result);
        }
    }
    (events, taken, Ok(Flow::Continue))
}

/// Two server sessions fed the same node input: a handshake, LISTEN 80 and
/// one accepted stream with a 64 KiB window.
fn established_twins() -> (XferSession, XferSession, StreamId) {
    let mut server_config = config(KEY, 2);
    server_config.initial_window = 64 * 1024;
    let mut node = XferSession::node(config(KEY, 1)).unwrap();
    let mut a = XferSession::server(server_config.clone()).unwrap();
    let mut b = XferSession::server(server_config).unwrap();
    let mut sink = |_e: Event| {};
    // Handshake and LISTEN, both servers fed the same bytes.
    for _ in 0..4 {
        let mut out = Vec::new();
        node.drain_output(&mut out);
        a.feed(&out, &mut sink).unwrap();
        b.feed(&out, &mut sink).unwrap();
        let mut back = Vec::new();
        a.drain_output(&mut back);
        let mut other = Vec::new();
        b.drain_output(&mut other);
        assert_eq!(back, other);
        node.feed(&back, &mut sink).unwrap();
        if a.is_established() && node.is_established() {
            break;
        }
    }
    node.listen(80).unwrap();
    let mut out = Vec::new();
    node.drain_output(&mut out);
    a.feed(&out, &mut sink).unwrap();
    b.feed(&out, &mut sink).unwrap();
    a.listen_result(80, errno::OK).unwrap();
    b.listen_result(80, errno::OK).unwrap();
    let stream = a.accept(80, client()).unwrap();
    assert_eq!(b.accept(80, client()).unwrap(), stream);
    let _ = (output(&mut a), output(&mut b));
    (a, b, stream)
}

#[test]
fn a_taken_payload_is_accounted_like_a_copied_one() {
    let (mut copy, mut take, s) = established_twins();
    let frames = [
        Frame::Data {
            stream: s,
            bytes: vec![7; 20_000],
        },
        Frame::Data {
            stream: s,
            bytes: vec![1; 100],
        },
        Frame::Data {
            stream: s,
            bytes: vec![9; 4096],
        },
        Frame::Fin { stream: s },
    ];
    let bytes = wire(&frames);
    let (copy_events, none, r1) = feed_taking(&mut copy, &bytes, usize::MAX);
    assert!(none.is_empty());
    let (take_events, taken, r2) = feed_taking(&mut take, &bytes, 4096);
    assert_eq!((r1, r2), (Ok(Flow::Continue), Ok(Flow::Continue)));
    assert_eq!(taken, [(s, 20_000), (s, 4096)]);
    // The copying session reported every payload; the taking one only the
    // small one, then the FIN, in the same order.
    assert_eq!(copy_events.len(), 4);
    assert_eq!(
        take_events,
        [
            Event::Data {
                stream: s,
                bytes: vec![1; 100]
            },
            Event::Fin { stream: s }
        ]
    );
    assert_eq!(copy.stats(), take.stats());
    assert_eq!(copy.recv_window(s), take.recv_window(s));
    assert_eq!(copy.stream_state(s), take.stream_state(s));
    // Releasing the same bytes returns the same CREDIT frames.
    copy.release(s, 24_196).unwrap();
    take.release(s, 24_196).unwrap();
    assert_eq!(output(&mut copy), output(&mut take));
    assert_eq!(copy.finish_input(), Ok(()));
    assert_eq!(take.finish_input(), Ok(()));
}

#[test]
fn data_beyond_credit_is_refused_before_its_payload_is_taken() {
    let (mut copy, mut take, s) = established_twins();
    let bytes = wire(&[
        Frame::Data {
            stream: s,
            bytes: vec![3; 64 * 1024 + 1],
        },
        Frame::Ping { data: 5 },
    ]);
    let (copy_events, _, r1) = feed_taking(&mut copy, &bytes, usize::MAX);
    // Header only, then the driver asks to take the payload: refused.
    let n = take.until_next_payload();
    assert_eq!(n, HEADER_LEN);
    take.feed(&bytes[..n], &mut |_| {}).unwrap();
    assert_eq!(take.pending_data(), Some((s, 64 * 1024 + 1)));
    let mut events = Vec::new();
    assert_eq!(take.take_pending_data(&mut |e| events.push(e)), Ok(None));
    assert!(matches!(
        events.as_slice(),
        [Event::StreamError {
            error: XferError::FlowControl {
                len: 65_537,
                credit: 65_536,
                ..
            },
            ..
        }]
    ));
    assert_eq!(events, copy_events);
    assert_eq!(
        output(&mut take),
        [Frame::Reset {
            stream: s,
            code: ErrorCode::FLOW_CONTROL
        }]
    );
    // The payload is then fed and dropped; the connection goes on.
    let rest = &bytes[n..];
    let mut after = Vec::new();
    assert_eq!(take.feed(rest, &mut |e| after.push(e)), Ok(Flow::Continue));
    assert!(after.is_empty());
    assert_eq!(r1, Ok(Flow::Continue));
    assert_eq!(output(&mut take), [Frame::Pong { data: 5 }]);
    let _ = output(&mut copy);
    assert_eq!(copy.stats(), take.stats());
}

#[test]
fn data_on_an_unknown_or_closed_stream_is_not_taken() {
    let (mut copy, mut take, s) = established_twins();
    let unknown = StreamId(s.0 + 2);
    let bytes = wire(&[
        Frame::Data {
            stream: unknown,
            bytes: vec![1; 8192],
        },
        Frame::Reset {
            stream: s,
            code: ErrorCode::CANCEL,
        },
        Frame::Data {
            stream: s,
            bytes: vec![2; 8192],
        },
        Frame::Ping { data: 1 },
    ]);
    let (copy_events, none, r1) = feed_taking(&mut copy, &bytes, usize::MAX);
    assert!(none.is_empty());
    let (take_events, taken, r2) = feed_taking(&mut take, &bytes, 4096);
    assert_eq!((r1, r2), (Ok(Flow::Continue), Ok(Flow::Continue)));
    assert!(taken.is_empty(), "a payload was taken: {taken:?}");
    assert_eq!(copy_events, take_events);
    assert!(matches!(
        take_events[0],
        Event::StreamError {
            error: XferError::Stream {
                code: ErrorCode::UNKNOWN_STREAM,
                ..
            },
            ..
        }
    ));
    assert_eq!(copy.stats(), take.stats());
    assert_eq!(take.stats().frames_ignored, 1);
    assert_eq!(output(&mut copy), output(&mut take));
}

#[test]
fn a_taken_payload_may_arrive_in_parts_and_truncation_is_reported() {
    let (_, mut take, s) = established_twins();
    let bytes = wire(&[Frame::Data {
        stream: s,
        bytes: vec![4; 10_000],
    }]);
    take.feed(&bytes[..HEADER_LEN], &mut |_| {}).unwrap();
    assert_eq!(take.take_pending_data(&mut |_| {}), Ok(Some((s, 10_000))));
    assert_eq!(take.pending_data(), None);
    assert_eq!(take.consume_taken(4000), 4000);
    assert_eq!(take.until_next_payload(), 6000 + HEADER_LEN);
    assert!(matches!(
        take.finish_input(),
        Err(XferError::Truncated { received: 4012, .. })
    ));
    // Never more than the frame.
    assert_eq!(take.consume_taken(7000), 6000);
    assert_eq!(take.taken_remaining(), 0);
    assert_eq!(take.finish_input(), Ok(()));
    assert_eq!(take.recv_window(s), Some(64 * 1024 - 10_000));
}

#[test]
fn a_header_alone_allocates_nothing_and_small_frames_finish_at_once() {
    let mut decoder = FrameDecoder::with_version(2);
    let bytes = wire(&[
        Frame::Data {
            stream: StreamId(1),
            bytes: vec![5; 300],
        },
        Frame::Fin {
            stream: StreamId(1),
        },
    ]);
    let mut input = &bytes[..HEADER_LEN];
    assert_eq!(decoder.decode(&mut input), Ok(None));
    assert_eq!(decoder.pending_data(), Some((StreamId(1), 300)));
    assert_eq!(decoder.until_next_payload(), 300 + HEADER_LEN);
    // Feeding the payload and the next header completes both frames: FIN
    // has no payload, so it is returned without waiting for more input.
    let mut input = &bytes[HEADER_LEN..];
    assert!(matches!(
        decoder.decode(&mut input),
        Ok(Some(Frame::Data { .. }))
    ));
    assert_eq!(
        decoder.decode(&mut input),
        Ok(Some(Frame::Fin {
            stream: StreamId(1)
        }))
    );
    assert_eq!(decoder.pending_data(), None);
    assert_eq!(decoder.until_next_payload(), HEADER_LEN);
}

/// Events with DATA payloads reduced to their stream and length, taken
/// payloads included where they were taken.
fn feed_normalized(
    session: &mut XferSession,
    mut bytes: &[u8],
    threshold: usize,
) -> (Vec<String>, Result<Flow, XferError>) {
    let mut events = Vec::new();
    let mut log = Vec::new();
    let flush = |events: &mut Vec<Event>, log: &mut Vec<String>| {
        for e in events.drain(..) {
            log.push(match e {
                Event::Data { stream, bytes } => format!("data {stream} {}", bytes.len()),
                other => format!("{other:?}"),
            });
        }
    };
    while !bytes.is_empty() {
        if let Some((_, len)) = session.pending_data() {
            if len >= threshold {
                let taken = session.take_pending_data(&mut |e| events.push(e));
                flush(&mut events, &mut log);
                match taken {
                    Ok(Some((stream, len))) => {
                        log.push(format!("data {stream} {len}"));
                        let n = session.consume_taken(bytes.len());
                        bytes = &bytes[n..];
                        continue;
                    }
                    Ok(None) => {}
                    Err(e) => return (log, Err(e)),
                }
            }
        }
        let n = session.until_next_payload().min(bytes.len());
        let result = session.feed(&bytes[..n], &mut |e| events.push(e));
        flush(&mut events, &mut log);
        bytes = &bytes[n..];
        if result != Ok(Flow::Continue) {
            return (log, result);
        }
    }
    (log, Ok(Flow::Continue))
}

proptest! {
    #[test]
    fn taking_payloads_changes_nothing_but_where_they_go(
        frames in proptest::collection::vec(
            prop_oneof![
                frame::tests::frame(),
                (0usize..20_000).prop_map(|n| Frame::Data { stream: StreamId(2), bytes: vec![1; n] }),
                Just(Frame::Fin { stream: StreamId(2) }),
            ],
            0..24,
        ),
        threshold in 1usize..8192,
    ) {
        let (mut copy, mut take, s) = established_twins();
        prop_assert_eq!(s, StreamId(2));
        let bytes = wire(&frames);
        let (copied, r1) = feed_normalized(&mut copy, &bytes, usize::MAX);
        let (taken, r2) = feed_normalized(&mut take, &bytes, threshold);
        prop_assert_eq!(copied, taken);
        prop_assert_eq!(r1, r2);
        prop_assert_eq!(copy.stats(), take.stats());
        prop_assert_eq!(copy.recv_window(s), take.recv_window(s));
        prop_assert_eq!(copy.stream_state(s), take.stream_state(s));
        prop_assert_eq!(output(&mut copy), output(&mut take));
        prop_assert_eq!(copy.finish_input(), take.finish_input());
    }
}
