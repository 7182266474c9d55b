//! Test helper: a node session and an I/O server session wired back to back
//! in memory, authenticated, with port 80 listened on and streams accepted.

use connlab_proto::xfer::{AuthKey, Event, StreamId, XferConfig, XferSession};

/// The node, the server and `streams` streams the server accepted (from
/// 192.0.2.1:1000, :1001, ...), every stream granted `window` credit, at
/// the highest protocol version.
pub(crate) fn pair(window: u32, streams: u16) -> (XferSession, XferSession, Vec<StreamId>) {
    pair_at(window, streams, connlab_proto::xfer::MAX_VERSION)
}

/// [`pair`] with the node offering at most `max_version`.
pub(crate) fn pair_at(
    window: u32,
    streams: u16,
    max_version: u16,
) -> (XferSession, XferSession, Vec<StreamId>) {
    let key = AuthKey::new(&[7; 32]).unwrap();
    let mut nc = XferConfig::new(key.clone(), [1; 32]);
    nc.initial_window = window;
    nc.max_version = max_version;
    let mut node = XferSession::node(nc).unwrap();
    let mut sc = XferConfig::new(key, [2; 32]);
    sc.initial_window = window;
    let mut server = XferSession::server(sc).unwrap();
    let mut sink = |_e: Event| {};
    for _ in 0..4 {
        let mut bytes = Vec::new();
        node.drain_output(&mut bytes);
        server.feed(&bytes, &mut sink).unwrap();
        let mut bytes = Vec::new();
        server.drain_output(&mut bytes);
        node.feed(&bytes, &mut sink).unwrap();
    }
    node.listen(80).unwrap();
    let mut bytes = Vec::new();
    node.drain_output(&mut bytes);
    server.feed(&bytes, &mut sink).unwrap();
    server.listen_result(80, 0).unwrap();
    let accepted = (0..streams)
        .map(|i| {
            let from = std::net::SocketAddr::from(([192, 0, 2, 1], 1000 + i));
            server.accept(80, from).unwrap()
        })
        .collect();
    let mut bytes = Vec::new();
    server.drain_output(&mut bytes);
    node.feed(&bytes, &mut sink).unwrap();
    assert_eq!(node.version(), Some(max_version));
    (node, server, accepted)
}
