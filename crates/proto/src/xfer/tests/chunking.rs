//! Any chunking of a recorded conversation gives the same events.

use super::*;
use proptest::prelude::*;

/// A scripted conversation: the bytes each side sends, recorded from a run.
fn conversation() -> (Vec<u8>, Vec<u8>) {
    let mut node_bytes = Vec::new();
    let mut server_bytes = Vec::new();
    let mut node = XferSession::node(config(KEY, 1)).unwrap();
    let mut server = XferSession::server(config(KEY, 2)).unwrap();
    let mut step = |node: &mut XferSession, server: &mut XferSession| {
        let mut b = Vec::new();
        node.drain_output(&mut b);
        server.feed(&b, &mut |_| {}).unwrap();
        node_bytes.extend_from_slice(&b);
        let mut b = Vec::new();
        server.drain_output(&mut b);
        node.feed(&b, &mut |_| {}).unwrap();
        server_bytes.extend_from_slice(&b);
    };
    step(&mut node, &mut server);
    step(&mut node, &mut server);
    node.listen(80).unwrap();
    step(&mut node, &mut server);
    server.listen_result(80, 0).unwrap();
    let a = server.accept(80, client()).unwrap();
    server.send_data(a, &[5; 40_000]).unwrap();
    server.finish(a).unwrap();
    let c = node.connect(client()).unwrap();
    node.ping(3).unwrap();
    step(&mut node, &mut server);
    node.release(a, 40_000).unwrap();
    server.connected(c, 1234).unwrap();
    step(&mut node, &mut server);
    node.send_data(c, b"hello").unwrap();
    node.reset(a, ErrorCode::CANCEL).unwrap();
    step(&mut node, &mut server);
    (node_bytes, server_bytes)
}

fn events_of(session: &mut XferSession, chunks: &[&[u8]]) -> (Vec<Event>, Result<Flow, XferError>) {
    let mut events = Vec::new();
    let mut result = Ok(Flow::Continue);
    for chunk in chunks {
        result = session.feed(chunk, &mut |e| events.push(e));
        if result.is_err() {
            break;
        }
    }
    (events, result)
}

fn split<'a>(bytes: &'a [u8], cuts: &[prop::sample::Index]) -> Vec<&'a [u8]> {
    let mut points: Vec<usize> = cuts.iter().map(|c| c.index(bytes.len() + 1)).collect();
    points.push(0);
    points.push(bytes.len());
    points.sort_unstable();
    points.windows(2).map(|w| &bytes[w[0]..w[1]]).collect()
}

proptest! {
    #[test]
    fn any_chunking_of_a_conversation_gives_the_same_events(
        cuts in proptest::collection::vec(any::<prop::sample::Index>(), 0..30),
    ) {
        // Replayed into fresh sessions (same keys and nonces, so the proofs
        // hold); what the replaying side did not do itself shows up as stream
        // errors, the same ones however the bytes are cut.
        let (node_bytes, server_bytes) = conversation();
        for (bytes, role) in [(&node_bytes, Role::Server), (&server_bytes, Role::Node)] {
            let fresh = || match role {
                Role::Server => XferSession::server(config(KEY, 2)).unwrap(),
                Role::Node => XferSession::node(config(KEY, 1)).unwrap(),
            };
            let mut whole = fresh();
            let (expected, result) = events_of(&mut whole, &[bytes]);
            prop_assert_eq!(result, Ok(Flow::Continue));
            prop_assert!(expected.len() >= 3, "{:?}", expected);
            let mut chunked = fresh();
            let (events, result) = events_of(&mut chunked, &split(bytes, &cuts));
            prop_assert_eq!(result, Ok(Flow::Continue));
            prop_assert_eq!(events, expected);
            let (mut a, mut b) = (Vec::new(), Vec::new());
            whole.drain_output(&mut a);
            chunked.drain_output(&mut b);
            prop_assert_eq!(a, b);
        }
    }

    #[test]
    fn arbitrary_bytes_never_panic_a_fresh_session(
        bytes in proptest::collection::vec(any::<u8>(), 0..600),
        cuts in proptest::collection::vec(any::<prop::sample::Index>(), 0..5),
    ) {
        for mut session in [
            XferSession::server(config(KEY, 2)).unwrap(),
            XferSession::node(config(KEY, 1)).unwrap(),
        ] {
            let _ = events_of(&mut session, &split(&bytes, &cuts));
            let _ = session.finish_input();
        }
    }

    #[test]
    fn arbitrary_frames_never_panic_an_established_session(
        frames in proptest::collection::vec(frame::tests::frame(), 0..30),
        on_node in any::<bool>(),
    ) {
        let (mut pair, s) = with_stream(config(KEY, 1), config(KEY, 2));
        pair.server.send_data(s, b"abc").unwrap();
        let mut bytes = Vec::new();
        for frame in &frames {
            frame.encode(&mut bytes).unwrap();
        }
        let session = if on_node { &mut pair.node } else { &mut pair.server };
        let (_, result) = events_of(session, &[&bytes]);
        // Errors are either returned and end the session, or cost a stream.
        if result.is_err() {
            prop_assert!(session.is_closed());
        }
        let _ = output(session);
    }

    #[test]
    fn arbitrary_bytes_after_the_handshake_never_panic(
        bytes in proptest::collection::vec(any::<u8>(), 0..600),
    ) {
        let (mut pair, _) = with_stream(config(KEY, 1), config(KEY, 2));
        let _ = events_of(&mut pair.node, &[&bytes]);
        let _ = events_of(&mut pair.server, &[&bytes]);
    }
}
