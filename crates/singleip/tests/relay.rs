//! The I/O server and both node flavours in one process on loopback: bytes
//! go through intact both ways with half-close, through the Rust API and
//! through a forwarding node; a stream whose client stops reading does not
//! hold up the others.

use connlab_os::Shutdown;
use connlab_proto::xfer::{AuthKey, Event, XferConfig, XferSession};
use connlab_singleip::{
    run_node, run_node_with_stats, run_server, ClusterListener, ClusterStream, ConnectRule,
    NodeConfig, NodeRunStats, Outbound, PortRange, SendLimit, ServerConfig, ServerStats,
};
use connlab_testkit::net::response_server;
use connlab_testkit::{echo_server, free_port, pattern, round_trip};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;
use std::time::Duration;

fn key() -> AuthKey {
    AuthKey::new(b"0123456789abcdef-test-key").unwrap()
}

struct Server {
    listen: SocketAddr,
    nodes: SocketAddr,
    stop: Arc<Shutdown>,
    thread: JoinHandle<ServerStats>,
}

fn start_server(limit: Option<SendLimit>) -> Server {
    start_server_with(move |c| c.send_limit = limit)
}

fn start_server_with(adjust: impl FnOnce(&mut ServerConfig) + Send + 'static) -> Server {
    let stop = Arc::new(Shutdown::new().unwrap());
    let (tx, rx) = mpsc::channel();
    let s = stop.clone();
    let thread = std::thread::spawn(move || {
        let mut config = ServerConfig::new(
            vec!["127.0.0.1:0".parse().unwrap()],
            "127.0.0.1:0".parse().unwrap(),
            key(),
        );
        adjust(&mut config);
        run_server(
            &config,
            s.wake_fd(),
            || s.requested(),
            |b| tx.send((b.listen[0], b.nodes)).unwrap(),
        )
        .unwrap()
    });
    let (listen, nodes) = rx.recv_timeout(Duration::from_secs(10)).unwrap();
    Server {
        listen,
        nodes,
        stop,
        thread,
    }
}

impl Server {
    fn stop(self) -> ServerStats {
        self.stop.trigger();
        self.thread.join().unwrap()
    }
}

/// A forwarding node in a thread, returned once it is ready.
struct Node {
    stop: Arc<Shutdown>,
    thread: JoinHandle<Result<NodeRunStats, connlab_singleip::Error>>,
}

impl Node {
    fn start(config: NodeConfig) -> Node {
        let stop = Arc::new(Shutdown::new().unwrap());
        let (tx, rx) = mpsc::channel();
        let s = stop.clone();
        let thread = std::thread::spawn(move || {
            run_node(
                &config,
                s.wake_fd(),
                || s.requested(),
                || tx.send(()).unwrap(),
            )
        });
        rx.recv_timeout(Duration::from_secs(10)).unwrap();
        Node { stop, thread }
    }

    fn stop(self) -> Result<NodeRunStats, connlab_singleip::Error> {
        self.stop.trigger();
        self.thread.join().unwrap()
    }
}

/// A cluster stream's server side: reads everything, writes it back,
/// half-closes, and keeps the stream until the client has read it all.
fn echo_until_closed(mut s: ClusterStream) {
    let mut buf = Vec::new();
    s.read_to_end(&mut buf).unwrap();
    s.write_all(&buf).unwrap();
    s.shutdown_write().unwrap();
    let mut rest = Vec::new();
    let _ = s.read_to_end(&mut rest);
}

#[test]
fn api_stream_echoes_with_half_close() {
    let server = start_server(None);
    let listener = ClusterListener::bind(server.nodes, key(), 7, server.listen.port()).unwrap();
    let node = std::thread::spawn(move || {
        for _ in 0..2 {
            let (s, _) = listener.accept().unwrap();
            echo_until_closed(s);
        }
        listener
    });
    for (n, seed) in [(10, 1u8), (300_000, 2)] {
        let data = pattern(n, seed);
        assert_eq!(round_trip(server.listen, &data), data);
    }
    let listener = node.join().unwrap();
    drop(listener);
    let stats = server.stop();
    assert_eq!(stats.nodes_authenticated, 1);
    assert_eq!(stats.clients_accepted, 2);
}

/// A forwarding node's configuration, splicing or not.
fn node_config(server: &Server, forward: SocketAddr, splice: bool) -> NodeConfig {
    let mut c = NodeConfig::new(server.nodes, key(), vec![server.listen.port()], forward);
    c.splice = splice;
    c
}

#[test]
fn forwarding_node_relays_to_a_local_server() {
    forwarding_node_relays(false);
}

#[test]
fn splicing_node_relays_to_a_local_server() {
    forwarding_node_relays(true);
}

fn forwarding_node_relays(splice: bool) {
    let server = start_server(Some(SendLimit::fixed_4x(16 * 1024)));
    let echo = echo_server();
    let node = Node::start(node_config(&server, echo, splice));
    let clients: Vec<_> = (0..8u8)
        .map(|i| {
            let addr = server.listen;
            std::thread::spawn(move || {
                let data = pattern(200_000 + i as usize * 1000, i);
                assert_eq!(round_trip(addr, &data), data);
            })
        })
        .collect();
    for c in clients {
        c.join().unwrap();
    }
    let node_stats = node.stop().unwrap();
    assert_eq!(node_stats.streams, 8);
    let stats = server.stop();
    assert_eq!(stats.connections.len(), 8);
    assert!(
        stats.connections.iter().all(|c| c.end == "closed"),
        "{:?}",
        stats.connections
    );
}

#[test]
fn stalled_reader_does_not_stop_the_other_streams() {
    let server = start_server(Some(SendLimit::from_bytes(16 * 1024)));
    // A node that sends 2 MB on every stream, as fast as credit allows.
    let listener = ClusterListener::bind(server.nodes, key(), 1, server.listen.port()).unwrap();
    const N: usize = 2_000_000;
    std::thread::spawn(move || loop {
        let Ok((mut s, _)) = listener.accept() else {
            return;
        };
        std::thread::spawn(move || {
            let data = pattern(N, 9);
            let _ = s.write_all(&data);
            let _ = s.shutdown_write();
            let mut rest = Vec::new();
            let _ = s.read_to_end(&mut rest);
        });
    });
    // The stalled client connects first and never reads.
    let stalled = TcpStream::connect(server.listen).unwrap();
    let others: Vec<_> = (0..4)
        .map(|_| {
            let addr = server.listen;
            std::thread::spawn(move || {
                let mut s = TcpStream::connect(addr).unwrap();
                s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
                let mut got = Vec::new();
                s.read_to_end(&mut got).unwrap();
                got.len()
            })
        })
        .collect();
    for o in others {
        assert_eq!(o.join().unwrap(), N);
    }
    drop(stalled);
    let stats = server.stop();
    // The default limit re-sizes send buffers by rate share.
    assert_eq!(stats.sndbuf_mode, "share");
    assert!(stats.sizing_rounds > 0);
    let sent: Vec<_> = stats
        .connections
        .iter()
        .filter(|c| c.bytes_to_client == N as u64)
        .collect();
    assert_eq!(sent.len(), 4, "{:?}", stats.connections);
    assert!(
        sent.iter()
            .all(|c| c.sndbuf_max_bytes >= 32 << 10 && c.sndbuf_last_bytes >= 32 << 10),
        "{sent:?}"
    );
}

#[test]
fn api_connect_opens_a_connection_from_the_io_server() {
    let server = start_server_with(|c| c.access.connect = vec![loopback_rule()]);
    let listener = ClusterListener::bind(server.nodes, key(), 2, server.listen.port()).unwrap();
    let echo = echo_server();
    let s = Arc::new(listener.connect(echo).unwrap());
    s.set_nodelay(true).unwrap();
    let data = pattern(250_000, 4);
    let (data2, w) = (data.clone(), s.clone());
    let writer = std::thread::spawn(move || {
        (&*w).write_all(&data2).unwrap();
        w.shutdown_write().unwrap();
    });
    let mut back = Vec::new();
    (&*s).read_to_end(&mut back).unwrap();
    writer.join().unwrap();
    assert_eq!(back, data);
    // A refused connect reports the errno.
    let closed = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let err = listener.connect(closed).err().unwrap();
    assert_eq!(err.kind(), std::io::ErrorKind::ConnectionRefused, "{err}");
    drop(s);
    drop(listener);
    let stats = server.stop();
    assert_eq!(stats.connects, 2);
    assert_eq!(stats.connect_failures, 1);
}

#[test]
fn client_reset_reaches_the_local_server_as_a_reset() {
    client_reset_reaches_the_local_server(false);
}

#[test]
fn client_reset_reaches_the_local_server_through_a_splicing_node() {
    client_reset_reaches_the_local_server(true);
}

fn client_reset_reaches_the_local_server(splice: bool) {
    let server = start_server(None);
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let local = l.local_addr().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let (mut s, _) = l.accept().unwrap();
        s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        let mut hello = [0u8; 5];
        s.read_exact(&mut hello).unwrap();
        tx.send(Ok(())).unwrap();
        let mut buf = [0u8; 1024];
        let outcome = loop {
            match s.read(&mut buf) {
                Ok(0) => break Err(std::io::ErrorKind::UnexpectedEof),
                Ok(_) => {}
                Err(e) => break Err(e.kind()),
            }
        };
        tx.send(outcome).unwrap();
    });
    let node = Node::start(node_config(&server, local, splice));
    let mut c = TcpStream::connect(server.listen).unwrap();
    c.write_all(b"hello").unwrap();
    // The local server has the bytes: the stream is fully set up.
    assert_eq!(rx.recv_timeout(Duration::from_secs(20)).unwrap(), Ok(()));
    socket2::SockRef::from(&c)
        .set_linger(Some(Duration::ZERO))
        .unwrap();
    drop(c);
    let outcome = rx.recv_timeout(Duration::from_secs(20)).unwrap();
    assert_eq!(outcome, Err(std::io::ErrorKind::ConnectionReset));
    let ns = node.stop().unwrap();
    assert_eq!(ns.resets_received, 1);
    let stats = server.stop();
    assert_eq!(stats.connections[0].end, "reset by client");
}

#[test]
fn silent_peer_is_refused_after_the_handshake_timeout() {
    let server = start_server_with(|c| c.handshake_timeout = Duration::from_millis(200));
    let mut s = TcpStream::connect(server.nodes).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let mut got = Vec::new();
    s.read_to_end(&mut got).unwrap();
    // GOAWAY AUTH_REQUIRED (7), then the server closed.
    assert_eq!(got.get(4), Some(&0x06), "{got:02x?}");
    assert_eq!(&got[12..16], &[0, 0, 0, 7]);
    let stats = server.stop();
    assert_eq!(stats.nodes_refused, 1);
    assert!(
        stats.nodes[0].end.contains("not authenticated"),
        "{:?}",
        stats.nodes
    );
    assert_eq!(stats.nodes_auth_timeout, 1);
}

#[test]
fn dropping_the_listener_fails_blocked_readers_instead_of_hanging_them() {
    let server = start_server(None);
    let listener = ClusterListener::bind(server.nodes, key(), 4, server.listen.port()).unwrap();
    let mut client = TcpStream::connect(server.listen).unwrap();
    client
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let (mut s, _) = listener.accept().unwrap();
    let reader = std::thread::spawn(move || {
        let mut buf = [0u8; 16];
        s.read(&mut buf)
    });
    drop(listener);
    let outcome = reader.join().unwrap();
    assert_eq!(
        outcome.err().map(|e| e.kind()),
        Some(std::io::ErrorKind::ConnectionAborted)
    );
    // The I/O server lost the node: the client sees its connection end.
    let mut buf = [0u8; 16];
    assert!(matches!(client.read(&mut buf), Ok(0) | Err(_)));
    let _ = server.stop();
}

#[test]
fn a_hung_node_is_given_up_after_unanswered_pings_and_only_its_clients_are_reset() {
    let server = start_server_with(|c| {
        c.ping_interval = Duration::from_millis(50);
        c.dead_after = Duration::from_millis(300);
    });
    // A node that authenticates, serves the port, then stops answering.
    let mut sock = TcpStream::connect(server.nodes).unwrap();
    sock.set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let mut session = XferSession::node(XferConfig::new(key(), [3; 32])).unwrap();
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    let mut granted = false;
    while !granted {
        session.drain_output(&mut out);
        sock.write_all(&out).unwrap();
        out.clear();
        let n = sock.read(&mut buf).unwrap();
        assert!(n > 0, "the server closed during the handshake");
        let mut events = Vec::new();
        session.feed(&buf[..n], &mut |e| events.push(e)).unwrap();
        for e in events {
            match e {
                Event::Established { .. } => session.listen(server.listen.port()).unwrap(),
                Event::ListenResult { errno, .. } => {
                    assert_eq!(errno, 0);
                    granted = true;
                }
                _ => {}
            }
        }
    }
    session.drain_output(&mut out);
    sock.write_all(&out).unwrap();
    let mut client = TcpStream::connect(server.listen).unwrap();
    client
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    // The node says nothing more; the server pings, then gives up: the
    // client's connection ends, and the node connection is closed.
    let mut cbuf = [0u8; 16];
    assert!(matches!(client.read(&mut cbuf), Ok(0) | Err(_)));
    let mut rest = Vec::new();
    let _ = sock.read_to_end(&mut rest);
    let stats = server.stop();
    assert!(
        stats.nodes[0].end.contains("PINGs unanswered"),
        "{:?}",
        stats.nodes
    );
    assert_eq!(stats.connections[0].end, "node lost");
}

/// Regression (found by the SAPS experiments): a node that keeps answering
/// PINGs, idle or busy, is never given up, however long it stays.
#[test]
fn a_live_node_outlasts_the_dead_after_deadline() {
    let server = start_server_with(|c| {
        c.ping_interval = Duration::from_millis(50);
        c.dead_after = Duration::from_millis(300);
    });
    let listener = ClusterListener::bind(server.nodes, key(), 9, server.listen.port()).unwrap();
    let node = std::thread::spawn(move || {
        let (s, _) = listener.accept().unwrap();
        echo_until_closed(s);
        listener
    });
    // Idle for several deadlines, answering only PINGs.
    std::thread::sleep(Duration::from_millis(1_200));
    let data = pattern(200_000, 5);
    assert_eq!(round_trip(server.listen, &data), data);
    drop(node.join().unwrap());
    let stats = server.stop();
    assert_eq!(stats.clients_accepted, 1);
}

/// A forwarding node whose I/O server completes the handshake and then hangs
/// gives up after its unanswered PINGs instead of waiting forever.
#[test]
fn a_node_gives_up_a_hung_io_server_after_unanswered_pings() {
    let fake = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = fake.local_addr().unwrap();
    let hung = std::thread::spawn(move || {
        let (mut sock, _) = fake.accept().unwrap();
        sock.set_read_timeout(Some(Duration::from_secs(20)))
            .unwrap();
        let mut session = XferSession::server(XferConfig::new(key(), [4; 32])).unwrap();
        let (mut out, mut buf) = (Vec::new(), [0u8; 4096]);
        let mut established = false;
        while !established {
            let n = sock.read(&mut buf).unwrap();
            assert!(n > 0, "the node closed during the handshake");
            let mut events = Vec::new();
            session.feed(&buf[..n], &mut |e| events.push(e)).unwrap();
            established = events
                .iter()
                .any(|e| matches!(e, Event::Established { .. }));
            session.drain_output(&mut out);
            sock.write_all(&out).unwrap();
            out.clear();
        }
        // Hang: read and drop whatever comes (LISTEN, PINGs), answer nothing.
        let mut rest = Vec::new();
        let _ = sock.read_to_end(&mut rest);
    });
    let stop = Shutdown::new().unwrap();
    let mut config = NodeConfig::new(addr, key(), vec![], echo_server());
    config.ping_interval = Duration::from_millis(50);
    config.dead_after = Duration::from_millis(300);
    let (stats, result) = run_node_with_stats(&config, stop.wake_fd(), || stop.requested(), || {});
    let err = result.expect_err("the node must give up").to_string();
    assert!(err.contains("PINGs unanswered"), "{err}");
    // The statistics survive the error and say why the run ended.
    assert_eq!(stats.end, err);
    hung.join().unwrap();
}

#[test]
fn forwarding_node_connects_outward_for_local_programs() {
    node_connects_outward(false);
}

#[test]
fn splicing_node_connects_outward_for_local_programs() {
    node_connects_outward(true);
}

fn node_connects_outward(splice: bool) {
    let server = start_server_with(|c| {
        c.send_limit = Some(SendLimit::from_bytes(16 * 1024));
        c.access.connect = vec![loopback_rule()];
    });
    let echo = echo_server();
    // A port nobody listens on: the I/O server's connect is refused.
    let closed = free_port();
    let (to_echo, to_closed) = (free_port(), free_port());
    let mut config = NodeConfig::new(server.nodes, key(), vec![], echo);
    config.splice = splice;
    config.outbound = vec![
        Outbound {
            listen: to_echo,
            connect: echo,
        },
        Outbound {
            listen: to_closed,
            connect: closed,
        },
    ];
    let node = Node::start(config);
    for i in 0..3u8 {
        let data = pattern(300_000, i);
        assert_eq!(round_trip(to_echo, &data), data);
    }
    // The refused destination resets (or closes) the local connection.
    let mut c = TcpStream::connect(to_closed).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let mut buf = [0u8; 8];
    assert!(matches!(c.read(&mut buf), Ok(0) | Err(_)));
    let st = node.stop().unwrap();
    assert_eq!(st.outbound_streams, 4, "{st:?}");
    assert_eq!(st.outbound_failures, 1, "{st:?}");
    assert_eq!(st.outbound_listen.len(), 2);
    let stats = server.stop();
    assert_eq!(stats.connects, 4, "{stats:?}");
    assert_eq!(stats.connect_failures, 1);
}

/// The test destinations live on the I/O server's own loopback, which a
/// CONNECT may reach only when a rule names it.
fn loopback_rule() -> ConnectRule {
    "127.0.0.0/8:*".parse().unwrap()
}

/// A raw node: authenticated by the reference session and, when `port` is
/// given, serving it. Returns the socket and the session (for more frames).
fn raw_node(nodes: SocketAddr, port: Option<u16>) -> (TcpStream, XferSession) {
    let mut sock = TcpStream::connect(nodes).unwrap();
    sock.set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let mut session = XferSession::node(XferConfig::new(key(), [5; 32])).unwrap();
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    let mut done = false;
    while !done {
        session.drain_output(&mut out);
        sock.write_all(&out).unwrap();
        out.clear();
        let n = sock.read(&mut buf).unwrap();
        assert!(n > 0, "the server closed during the handshake");
        let mut events = Vec::new();
        session.feed(&buf[..n], &mut |e| events.push(e)).unwrap();
        for e in events {
            match e {
                Event::Established { .. } => match port {
                    Some(p) => session.listen(p).unwrap(),
                    None => done = true,
                },
                Event::ListenResult { errno, .. } => {
                    assert_eq!(errno, 0);
                    done = true;
                }
                _ => {}
            }
        }
    }
    session.drain_output(&mut out);
    sock.write_all(&out).unwrap();
    (sock, session)
}

/// One frame's bytes (`docs/transfer-protocol.md` §2).
fn frame(kind: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let mut f = (payload.len() as u32).to_be_bytes().to_vec();
    f.extend_from_slice(&[kind, 0, 0, 0]);
    f.extend_from_slice(&stream.to_be_bytes());
    f.extend_from_slice(payload);
    f
}

#[test]
fn node_records_are_capped_and_the_rest_counted() {
    // Issue 17: every connection to the node port added a stats record,
    // unauthenticated ones too, without bound.
    let server = start_server(None);
    let extra = 25;
    for _ in 0..ServerStats::MAX_NODES + extra {
        let mut s = TcpStream::connect(server.nodes).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        // A frame before HELLO: GOAWAY AUTH_REQUIRED, then closed.
        s.write_all(&frame(0x04, 0, &[0; 8])).unwrap();
        let mut got = Vec::new();
        let _ = s.read_to_end(&mut got);
    }
    let stats = server.stop();
    assert_eq!(
        stats.node_connections,
        (ServerStats::MAX_NODES + extra) as u64
    );
    assert_eq!(stats.nodes.len(), ServerStats::MAX_NODES);
    assert_eq!(stats.nodes_not_listed, extra as u64);
    assert_eq!(stats.nodes_refused, (ServerStats::MAX_NODES + extra) as u64);
}

#[test]
fn a_real_node_gets_in_while_idle_connections_hold_every_pending_slot() {
    // Issue 29: refusing the newcomer at the cap let idle connections,
    // renewed every auth timeout, lock every real node out without the key.
    // Now the oldest unauthenticated connection gives its slot up.
    let server = start_server_with(|c| {
        c.max_pending_nodes = 2;
        c.handshake_timeout = Duration::from_secs(120);
    });
    let mut silent: Vec<TcpStream> = (0..2)
        .map(|_| TcpStream::connect(server.nodes).unwrap())
        .collect();
    // Both slots held; a real node still authenticates.
    let listener = ClusterListener::bind(server.nodes, key(), 2, server.listen.port());
    assert!(listener.is_ok(), "{:?}", listener.err());
    // The oldest idle connection was closed for it (a GOAWAY REFUSED, then
    // an end or a reset).
    assert!(closed_by_server(&mut silent[0]));
    drop(listener);
    drop(silent);
    let stats = server.stop();
    assert!(stats.nodes_over_pending_cap >= 1, "{stats:?}");
    assert!(stats.nodes_authenticated >= 1, "{stats:?}");
}

/// A TCP connection to `to` from source address `from` (any port).
fn connect_from(from: &str, to: SocketAddr) -> TcpStream {
    let s = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    let src: SocketAddr = format!("{from}:0").parse().unwrap();
    s.bind(&src.into()).unwrap();
    s.connect(&to.into()).unwrap();
    s.into()
}

/// Whether the server ended `s` (an end or a reset, after what it sent:
/// a GOAWAY REFUSED) within 20 s.
fn closed_by_server(s: &mut TcpStream) -> bool {
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let mut got = Vec::new();
    matches!(
        s.read_to_end(&mut got).map_err(|e| e.kind()),
        Ok(_) | Err(std::io::ErrorKind::ConnectionReset)
    )
}

#[test]
fn one_address_cannot_hold_more_than_its_share_of_pending_slots() {
    // Issue 29: unauthenticated connections are limited per source
    // address; one more from a full address closes that address's oldest,
    // never another address's.
    let server = start_server_with(|c| {
        c.max_pending_nodes = 8;
        c.max_pending_per_source = 2;
        c.handshake_timeout = Duration::from_secs(120);
    });
    let mut bystander = connect_from("127.0.0.1", server.nodes);
    let mut flood: Vec<TcpStream> = (0..5)
        .map(|_| connect_from("127.0.0.2", server.nodes))
        .collect();
    for (i, s) in flood.iter_mut().take(3).enumerate() {
        assert!(closed_by_server(s), "flood connection {i} was not closed");
    }
    // The last two of the flood and the bystander are still open; a real
    // node from a third address authenticates.
    let listener = ClusterListener::bind(server.nodes, key(), 2, server.listen.port());
    assert!(listener.is_ok(), "{:?}", listener.err());
    drop(listener);
    bystander.write_all(b"x").unwrap();
    let stats = server.stop();
    assert_eq!(stats.nodes_over_source_cap, 3, "{stats:?}");
    assert_eq!(stats.nodes_over_pending_cap, 0, "{stats:?}");
    let ended_for_source = stats
        .nodes
        .iter()
        .filter(|n| n.end.contains("--max-pending-per-source"))
        .count();
    assert_eq!(ended_for_source, 3, "{:?}", stats.nodes);
    assert!(
        stats
            .nodes
            .iter()
            .filter(|n| n.addr.starts_with("127.0.0.1:"))
            .all(|n| !n.end.contains("--max-pending-per-source")),
        "{:?}",
        stats.nodes
    );
}

#[test]
fn a_refused_node_says_why_and_retries_until_it_gets_in() {
    // Issue 29: a node refused before authentication exited with "writing:
    // Connection reset by peer" and never tried again. In front of a real
    // I/O server, a stand-in refuses the first connection the way the
    // server does when its unauthenticated slots are full (GOAWAY REFUSED,
    // then closed) and passes the next one through.
    let server = start_server(None);
    let front = TcpListener::bind("127.0.0.1:0").unwrap();
    let front_addr = front.local_addr().unwrap();
    let real = server.nodes;
    let stand_in = std::thread::spawn(move || {
        let (mut first, _) = front.accept().unwrap();
        first
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        let mut hello = [0u8; 512];
        let _ = first.read(&mut hello);
        let mut payload = 6u32.to_be_bytes().to_vec(); // REFUSED
        payload.extend_from_slice(b"unauthenticated slots full");
        first.write_all(&frame(0x06, 0, &payload)).unwrap();
        first.shutdown(std::net::Shutdown::Write).unwrap();
        let mut rest = Vec::new();
        let _ = first.read_to_end(&mut rest);
        let (client, _) = front.accept().unwrap();
        let upstream = TcpStream::connect(real).unwrap();
        let pipe = |mut from: TcpStream, mut to: TcpStream| {
            std::thread::spawn(move || {
                let _ = std::io::copy(&mut from, &mut to);
                let _ = to.shutdown(std::net::Shutdown::Write);
            })
        };
        let a = pipe(client.try_clone().unwrap(), upstream.try_clone().unwrap());
        let b = pipe(upstream, client);
        a.join().unwrap();
        b.join().unwrap();
    });
    let mut config = NodeConfig::new(front_addr, key(), vec![], echo_server());
    config.retry_backoff = Duration::from_millis(10);
    let stop = Arc::new(Shutdown::new().unwrap());
    let (tx, rx) = mpsc::channel();
    let s = stop.clone();
    let node = std::thread::spawn(move || {
        run_node_with_stats(
            &config,
            s.wake_fd(),
            || s.requested(),
            || tx.send(()).unwrap(),
        )
    });
    rx.recv_timeout(Duration::from_secs(20))
        .expect("the node never got in after the refusal");
    stop.trigger();
    let (stats, result) = node.join().unwrap();
    result.unwrap();
    assert_eq!(stats.refused_retries, 1, "{stats:?}");
    assert!(stats.version > 0, "{stats:?}");
    drop(server.stop());
    stand_in.join().unwrap();
}

#[test]
fn a_node_refused_every_time_gives_up_with_the_reason() {
    let front = TcpListener::bind("127.0.0.1:0").unwrap();
    let front_addr = front.local_addr().unwrap();
    let stand_in = std::thread::spawn(move || {
        for _ in 0..3 {
            let (mut c, _) = front.accept().unwrap();
            c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
            let mut hello = [0u8; 512];
            let _ = c.read(&mut hello);
            let mut payload = 6u32.to_be_bytes().to_vec();
            payload.extend_from_slice(b"unauthenticated slots full");
            c.write_all(&frame(0x06, 0, &payload)).unwrap();
            c.shutdown(std::net::Shutdown::Write).unwrap();
            let mut rest = Vec::new();
            let _ = c.read_to_end(&mut rest);
        }
    });
    let mut config = NodeConfig::new(front_addr, key(), vec![], echo_server());
    config.retry_backoff = Duration::from_millis(10);
    config.refused_retries = 2;
    let stop = Shutdown::new().unwrap();
    let (stats, result) = run_node_with_stats(&config, stop.wake_fd(), || stop.requested(), || {});
    let err = result.expect_err("refused three times").to_string();
    assert!(
        err.contains("refused the session before authentication")
            && err.contains("unauthenticated slots full"),
        "{err}"
    );
    assert_eq!(stats.refused_retries, 2);
    assert_eq!(stats.end, err);
    stand_in.join().unwrap();
}

#[test]
fn a_flooding_node_does_not_starve_another_nodes_clients() {
    // Issue 17: a node was read until EAGAIN, so one that writes faster
    // than the server parses held the loop and no other socket was served.
    let server = start_server_with(|c| c.node_read_budget = 4 * 1024);
    let (mut flood, _session) = raw_node(server.nodes, None);
    let listener = ClusterListener::bind(server.nodes, key(), 4, server.listen.port()).unwrap();
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (flooding_tx, flooding_rx) = mpsc::channel();
    let flooder = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            // ERROR frames with 512 bytes of text: no reply, no state.
            let mut payload = 1u32.to_be_bytes().to_vec();
            payload.extend_from_slice(&[b'x'; 512]);
            let one = frame(0x07, 0, &payload);
            let batch: Vec<u8> = one.iter().copied().cycle().take(one.len() * 256).collect();
            let mut sent = 0u64;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) && sent < (4 << 30) {
                if flood.write_all(&batch).is_err() {
                    break;
                }
                sent += batch.len() as u64;
                if sent >= 16 << 20 {
                    // Far past the kernel's buffers: the server is reading.
                    let _ = flooding_tx.send(());
                }
            }
            sent
        })
    };
    flooding_rx
        .recv_timeout(Duration::from_secs(30))
        .expect("the flood is under way");
    let acceptor = std::thread::spawn(move || {
        let (s, _) = listener.accept().unwrap();
        echo_until_closed(s);
        listener
    });
    let data = pattern(10_000, 9);
    assert_eq!(round_trip(server.listen, &data), data);
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let sent = flooder.join().unwrap();
    drop(acceptor.join().unwrap());
    let stats = server.stop();
    assert!(sent > 0);
    assert!(stats.node_read_budget_hits > 0, "{stats:?}");
}

#[test]
fn a_node_that_never_reads_its_replies_is_dropped_at_the_queue_cap() {
    // Issue 17: PONGs (and RESETs) for a node that never reads queued
    // without bound.
    let server = start_server_with(|c| c.max_node_queue = 64 * 1024);
    let (mut sock, _session) = raw_node(server.nodes, None);
    let ping = frame(0x04, 0, &[1; 8]);
    let batch: Vec<u8> = ping
        .iter()
        .copied()
        .cycle()
        .take(ping.len() * 4096)
        .collect();
    let mut sent = 0usize;
    let mut dropped = false;
    while sent < (64 << 20) {
        if sock.write_all(&batch).is_err() {
            dropped = true;
            break;
        }
        sent += batch.len();
    }
    assert!(
        dropped,
        "the server took {sent} bytes of PINGs and kept the node"
    );
    let stats = server.stop();
    assert_eq!(stats.nodes_dropped_queue, 1, "{stats:?}");
    assert!(
        stats.nodes[0].end.contains("queued toward it unread"),
        "{:?}",
        stats.nodes[0].end
    );
}

#[test]
fn connect_to_the_io_servers_own_addresses_is_denied_by_default() {
    let server = start_server(None);
    let listener = ClusterListener::bind(server.nodes, key(), 2, server.listen.port()).unwrap();
    let echo = echo_server();
    for dest in [echo, server.nodes, server.listen] {
        let err = listener.connect(dest).err().unwrap();
        assert_eq!(
            err.kind(),
            std::io::ErrorKind::PermissionDenied,
            "{dest}: {err}"
        );
    }
    drop(listener);
    let stats = server.stop();
    assert_eq!(stats.connects_denied, 3);
}

#[test]
fn listen_outside_the_allowed_ports_and_on_the_node_port_is_refused() {
    let allowed = free_port().port();
    let server = start_server_with(move |c| {
        c.access.listen = vec![PortRange {
            first: allowed,
            last: allowed,
        }]
    });
    let other = free_port().port();
    assert!(ClusterListener::bind(server.nodes, key(), 2, other).is_err());
    assert!(ClusterListener::bind(server.nodes, key(), 2, server.nodes.port()).is_err());
    let ok = ClusterListener::bind(server.nodes, key(), 2, allowed);
    assert!(ok.is_ok(), "{:?}", ok.err());
    drop(ok);
    let stats = server.stop();
    assert_eq!(stats.listens_denied, 2);
}

/// Issue 29: a port a node LISTENed on is let go (its descriptor closed)
/// once no node serves it, so LISTEN and UNLISTEN, or nodes coming and
/// going, cannot pile up descriptors.
#[test]
fn a_port_is_released_when_no_node_serves_it() {
    let server = start_server(None);
    let port = free_port().port();
    let ip = server.listen.ip();
    let node = ClusterListener::bind(server.nodes, key(), 2, port).unwrap();
    assert!(
        TcpListener::bind((ip, port)).is_err(),
        "the I/O server should listen on {port} while a node serves it"
    );
    drop(node);
    // The node's end reaches the server's loop a moment later.
    let released = (0..250).any(|_| {
        std::thread::sleep(Duration::from_millis(20));
        TcpListener::bind((ip, port)).is_ok()
    });
    assert!(released, "port {port} still held after its only node left");
    // Served again when a node comes back.
    let again = ClusterListener::bind(server.nodes, key(), 2, port);
    assert!(again.is_ok(), "{:?}", again.err());
    drop(again);
    server.stop();
}

/// Issue 29: one node asked for 3,000 ports and got 2,998. LISTENs beyond
/// `max_listens_per_node` are refused with EMFILE and counted; UNLISTEN
/// frees a place for another.
#[test]
fn listens_beyond_the_per_node_cap_are_refused() {
    let server = start_server_with(|c| c.max_listens_per_node = 3);
    let (mut sock, mut session) = raw_node(server.nodes, None);
    let ports: Vec<u16> = (0..5).map(|_| free_port().port()).collect();
    let listen = |sock: &mut TcpStream, session: &mut XferSession, port: u16| -> u32 {
        session.listen(port).unwrap();
        let mut out = Vec::new();
        session.drain_output(&mut out);
        sock.write_all(&out).unwrap();
        raw_node_await(sock, session, |e| match e {
            Event::ListenResult { port: p, errno } if *p == port => Some(*errno),
            _ => None,
        })
    };
    let errnos: Vec<u32> = ports
        .iter()
        .map(|&p| listen(&mut sock, &mut session, p))
        .collect();
    assert_eq!(errnos[..3], [0, 0, 0]);
    assert_eq!(errnos[3..], [libc::EMFILE as u32; 2], "{errnos:?}");
    // One given back: the next is granted.
    session.unlisten(ports[0]).unwrap();
    assert_eq!(listen(&mut sock, &mut session, ports[3]), 0);
    drop(sock);
    let stats = server.stop();
    assert_eq!(stats.listens_denied, 2, "{stats:?}");
}

/// A local server that reads to the end, answers with the count and closes:
/// its answer and its FIN reach the node together.
fn count_then_close_server() -> SocketAddr {
    let listener = connlab_testkit::net::loopback_listener();
    let addr = listener.local_addr().unwrap();
    connlab_testkit::net::serve_each(listener, |mut conn| {
        let mut got = Vec::new();
        if conn.read_to_end(&mut got).is_ok() {
            let _ = conn.write_all(format!("got {}", got.len()).as_bytes());
        }
    });
    addr
}

#[test]
fn a_message_and_its_end_arriving_together_pass_both_relays() {
    a_message_and_its_end_arriving_together(false);
}

#[test]
fn a_message_and_its_end_arriving_together_pass_a_splicing_node() {
    a_message_and_its_end_arriving_together(true);
}

fn a_message_and_its_end_arriving_together(splice: bool) {
    // A short read is taken to mean "drained"; a FIN queued behind the data
    // is returned only by the next read, so a relay whose event reported
    // the end must read on (else the stream would hang, on the I/O server
    // with the client's message and on the node with the server's answer).
    let server = start_server(Some(SendLimit::from_bytes(16 * 1024)));
    let node = Node::start(node_config(&server, count_then_close_server(), splice));
    for i in 0..100usize {
        let mut c = TcpStream::connect(server.listen).unwrap();
        c.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        let msg = pattern(1 + i * 997, i as u8);
        c.write_all(&msg).unwrap();
        c.shutdown(std::net::Shutdown::Write).unwrap();
        let mut back = Vec::new();
        c.read_to_end(&mut back).unwrap();
        assert_eq!(
            back,
            format!("got {}", msg.len()).as_bytes(),
            "connection {i}"
        );
    }
    let node_stats = node.stop().unwrap();
    assert_eq!(node_stats.streams, 100);
    let stats = server.stop();
    assert_eq!(stats.clients_accepted, 100);
}

/// A local server that reads a one-byte command, then answers: `b'r'`:
/// 200 kB of its pattern and a reset (linger 0); else `n` bytes of
/// `pattern(n, command)`, a half-close, and reads until the peer goes.
fn command_server(n: usize) -> SocketAddr {
    let listener = connlab_testkit::net::loopback_listener();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for mut conn in listener.incoming().flatten() {
            std::thread::spawn(move || {
                let mut cmd = [0u8; 1];
                if conn.read_exact(&mut cmd).is_err() {
                    return;
                }
                if cmd[0] == b'r' {
                    let _ = conn.write_all(&pattern(200_000, 1));
                    let _ = socket2::SockRef::from(&conn).set_linger(Some(Duration::ZERO));
                    return;
                }
                let _ = conn.write_all(&pattern(n, cmd[0]));
                let _ = conn.shutdown(std::net::Shutdown::Write);
                let mut sink = [0u8; 1024];
                while matches!(conn.read(&mut sink), Ok(k) if k > 0) {}
            });
        }
    });
    addr
}

/// Sends `cmd` and reads the answer to its end (or the error that ends it).
fn ask(addr: SocketAddr, cmd: u8) -> (Vec<u8>, Option<std::io::ErrorKind>) {
    let mut c = TcpStream::connect(addr).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    c.write_all(&[cmd]).unwrap();
    let mut got = Vec::new();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        match c.read(&mut buf) {
            Ok(0) => return (got, None),
            Ok(k) => got.extend_from_slice(&buf[..k]),
            Err(e) => return (got, Some(e.kind())),
        }
    }
}

/// Many streams of 1.5 MB responses at once, interleaved on the node
/// connection, through a node with a small window (so credit, not the
/// sockets, stops it often and frames are cut at odd sizes), with one
/// stream reset by its local server midway: every other stream arrives
/// byte-exact, and neither side saw a frame it should not have (a DATA
/// frame beyond credit is a FLOW_CONTROL error: GOAWAY, the node's run
/// fails and the I/O server counts a bad frame).
fn many_large_responses_and_a_reset(splice: bool) {
    const N: usize = 1_500_000;
    let server = start_server(Some(SendLimit::from_bytes(16 * 1024)));
    let mut config = node_config(&server, command_server(N), splice);
    config.initial_window = 5_000;
    let node = Node::start(config);
    let clients: Vec<_> = (0..12u8)
        .map(|i| {
            let addr = server.listen;
            let cmd = if i == 5 { b'r' } else { b'a' + i };
            std::thread::spawn(move || (cmd, ask(addr, cmd)))
        })
        .collect();
    for c in clients {
        let (cmd, (got, err)) = c.join().unwrap();
        if cmd == b'r' {
            // Reset by the local server: an error, or an end before the
            // server had written everything it meant to.
            assert!(err.is_some() || got.len() <= 200_000, "{err:?}");
            assert!(got[..] == pattern(200_000, 1)[..got.len()]);
        } else {
            assert_eq!(err, None, "stream {cmd}");
            assert!(got == pattern(N, cmd), "stream {cmd}: {} bytes", got.len());
        }
    }
    let ns = node.stop().expect("the node's session stayed sound");
    assert_eq!(ns.splice, splice);
    assert_eq!(ns.streams, 12);
    assert!(ns.bytes_from_local >= 11 * N as u64, "{ns:?}");
    let stats = server.stop();
    assert_eq!(stats.bad_frames, 0, "{stats:?}");
    assert_eq!(stats.nodes[0].stream_errors, 0, "{stats:?}");
    let closed = stats
        .connections
        .iter()
        .filter(|c| c.end == "closed")
        .count();
    assert_eq!(closed, 11, "{:?}", stats.connections);
}

#[test]
fn many_large_responses_and_a_reset_through_a_copying_node() {
    many_large_responses_and_a_reset(false);
}

#[test]
fn many_large_responses_and_a_reset_through_a_splicing_node() {
    many_large_responses_and_a_reset(true);
}

/// A client that reads slowly while another stream pushes data as fast as
/// it can, through a splicing node: the slow stream's credit runs out again
/// and again while the fast one's frames go on; both arrive byte-exact.
#[test]
fn a_slow_reader_and_a_fast_one_both_complete_through_a_splicing_node() {
    const N: usize = 2_000_000;
    let server = start_server(Some(SendLimit::from_bytes(16 * 1024)));
    let node = Node::start(node_config(&server, command_server(N), true));
    let slow = {
        let addr = server.listen;
        std::thread::spawn(move || {
            let mut c = TcpStream::connect(addr).unwrap();
            socket2::SockRef::from(&c)
                .set_recv_buffer_size(4096)
                .unwrap();
            c.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
            c.write_all(b"s").unwrap();
            let mut got = Vec::new();
            let mut buf = [0u8; 1000];
            let mut reads = 0u32;
            loop {
                match c.read(&mut buf) {
                    Ok(0) => return got,
                    Ok(k) => got.extend_from_slice(&buf[..k]),
                    Err(e) => panic!("slow reader: {e}"),
                }
                reads += 1;
                if reads.is_multiple_of(64) {
                    std::thread::sleep(Duration::from_millis(1));
                }
            }
        })
    };
    for seed in [b'f', b'g', b'h'] {
        let (got, err) = ask(server.listen, seed);
        assert_eq!(err, None);
        assert!(got == pattern(N, seed), "fast stream: {} bytes", got.len());
    }
    let got = slow.join().unwrap();
    assert!(got == pattern(N, b's'), "slow stream: {} bytes", got.len());
    let ns = node.stop().expect("the node's session stayed sound");
    assert_eq!(ns.bytes_from_local, 4 * N as u64);
    let stats = server.stop();
    assert_eq!(stats.bad_frames, 0);
}

/// Asks the cluster address for a response (seed in the request's last
/// byte) and returns it.
fn fetch(addr: SocketAddr, seed: u8) -> Vec<u8> {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    s.write_all(&[b'G', b'E', b'T', seed]).unwrap();
    let mut got = Vec::new();
    s.read_to_end(&mut got).unwrap();
    got
}

#[test]
fn a_100_kib_response_is_relayed_byte_exact_at_either_protocol_version() {
    const LEN: usize = 100 * 1024;
    let local = response_server(LEN);
    // (node's max version, server's max version, negotiated), copied and spliced.
    for (node_max, server_max, version) in [(2, 2, 2), (1, 2, 1), (2, 1, 1)] {
        for splice in [false, true] {
            let case = format!("node max {node_max}, server max {server_max}, splice {splice}");
            let server = start_server_with(move |c| c.max_version = server_max);
            let mut config = node_config(&server, local, splice);
            config.max_version = node_max;
            let node = Node::start(config);
            for seed in 0..3u8 {
                let got = fetch(server.listen, seed);
                assert_eq!(got.len(), LEN, "{case}");
                assert!(got == pattern(LEN, seed), "{case}: bytes differ");
            }
            let node_stats = node.stop().unwrap();
            assert_eq!(node_stats.version, version, "{case}");
            assert_eq!(node_stats.splice, splice, "{case}");
            assert_eq!(node_stats.bytes_from_local, 3 * LEN as u64, "{case}");
            let stats = server.stop();
            assert_eq!(stats.nodes.len(), 1, "{case}");
            assert_eq!(stats.nodes[0].version, version, "{case}");
            assert_eq!(stats.nodes[0].bytes_from_node, 3 * LEN as u64, "{case}");
            if version == 1 {
                // At version 1 no DATA frame carries more than 16 KiB, so a
                // response takes at least seven.
                assert!(stats.nodes[0].frames_received >= 3 * 7, "{case}");
            }
        }
    }
}

/// An I/O server with `--splice`, taking at most `max_version`.
fn start_splicing_server(
    max_version: u16,
    adjust: impl FnOnce(&mut ServerConfig) + Send + 'static,
) -> Server {
    start_server_with(move |c| {
        c.splice = true;
        c.max_version = max_version;
        adjust(c);
    })
}

/// Checks that a splicing server's run was sound: spliced something, no bad
/// frame, every connection closed normally.
fn assert_spliced_cleanly(stats: &ServerStats, case: &str) {
    assert!(stats.splice, "{case}");
    assert!(stats.spliced_payloads > 0, "{case}: {stats:?}");
    assert!(stats.spliced_bytes > 0, "{case}: {stats:?}");
    assert_eq!(stats.bad_frames, 0, "{case}: {stats:?}");
    assert!(
        stats.connections.iter().all(|c| c.end == "closed"),
        "{case}: {:?}",
        stats.connections
    );
}

#[test]
fn io_server_splice_relays_100_kib_and_16_mib_responses_byte_exact() {
    const SMALL: usize = 100 * 1024;
    const LARGE: usize = 16 << 20;
    let (small, large) = (response_server(SMALL), response_server(LARGE));
    for (server_max, version) in [(2, 2), (1, 1)] {
        for node_splice in [false, true] {
            let case = format!("version {version}, node splice {node_splice}");
            let server = start_splicing_server(server_max, |_| {});
            let small_node = Node::start(node_config(&server, small, node_splice));
            for seed in 0..2u8 {
                let got = fetch(server.listen, seed);
                assert_eq!(got.len(), SMALL, "{case}");
                assert!(got == pattern(SMALL, seed), "{case}: 100 KiB bytes differ");
            }
            small_node.stop().unwrap();
            let large_node = Node::start(node_config(&server, large, node_splice));
            let got = fetch(server.listen, 7);
            assert_eq!(got.len(), LARGE, "{case}");
            assert!(got == pattern(LARGE, 7), "{case}: 16 MiB bytes differ");
            let ns = large_node.stop().unwrap();
            assert_eq!(ns.version, version, "{case}");
            let stats = server.stop();
            assert_spliced_cleanly(&stats, &case);
            let from_nodes: u64 = stats.nodes.iter().map(|n| n.bytes_from_node).sum();
            assert_eq!(from_nodes, (2 * SMALL + LARGE) as u64, "{case}");
            let to_clients: u64 = stats.connections.iter().map(|c| c.bytes_to_client).sum();
            assert_eq!(to_clients, (2 * SMALL + LARGE) as u64, "{case}");
        }
    }
}

#[test]
fn io_server_splice_a_stalled_client_does_not_hold_up_its_node_connection() {
    const N: usize = 2_000_000;
    for node_splice in [false, true] {
        // A large window and small client socket buffers: the stalled
        // client's socket takes a little of what the node sends and the
        // rest must go to its queue, not stay in the node's pipe.
        let server = start_splicing_server(2, |c| {
            c.initial_window = 4 << 20;
            c.send_limit = Some(SendLimit::fixed_4x(4096));
        });
        let node = Node::start(node_config(&server, command_server(N), node_splice));
        // (Its receive buffer stays the default: a tiny one on loopback
        // makes TCP crawl on persist timers once read.)
        let mut stalled = TcpStream::connect(server.listen).unwrap();
        stalled
            .set_read_timeout(Some(Duration::from_secs(60)))
            .unwrap();
        stalled.write_all(b"s").unwrap();
        // The others, on the same node connection, finish while it waits.
        for seed in [b'f', b'g', b'h'] {
            let (got, err) = ask(server.listen, seed);
            assert_eq!(err, None);
            assert!(got == pattern(N, seed), "fast stream: {} bytes", got.len());
        }
        let mut got = Vec::new();
        stalled.read_to_end(&mut got).unwrap();
        assert!(
            got == pattern(N, b's'),
            "stalled stream: {} bytes",
            got.len()
        );
        drop(stalled);
        node.stop().expect("the node's session stayed sound");
        let stats = server.stop();
        let case = format!("node splice {node_splice}");
        assert!(stats.splice_spilled_bytes > 0, "{case}: {stats:?}");
        assert_spliced_cleanly(&stats, &case);
    }
}

#[test]
fn io_server_splice_a_client_reset_mid_response_costs_only_its_stream() {
    const N: usize = 4_000_000;
    for node_splice in [false, true] {
        let server = start_splicing_server(2, |_| {});
        let node = Node::start(node_config(&server, command_server(N), node_splice));
        let quitter = {
            let addr = server.listen;
            std::thread::spawn(move || {
                let mut c = TcpStream::connect(addr).unwrap();
                c.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
                c.write_all(b"q").unwrap();
                let mut got = vec![0u8; 300_000];
                c.read_exact(&mut got).unwrap();
                assert!(got == pattern(N, b'q')[..300_000]);
                // A reset, not an end.
                socket2::SockRef::from(&c)
                    .set_linger(Some(Duration::ZERO))
                    .unwrap();
            })
        };
        let others: Vec<_> = [b'a', b'b', b'c']
            .into_iter()
            .map(|seed| {
                let addr = server.listen;
                std::thread::spawn(move || (seed, ask(addr, seed)))
            })
            .collect();
        quitter.join().unwrap();
        for o in others {
            let (seed, (got, err)) = o.join().unwrap();
            assert_eq!(err, None);
            assert!(
                got == pattern(N, seed),
                "stream {seed}: {} bytes",
                got.len()
            );
        }
        let ns = node.stop().expect("the node's session stayed sound");
        assert_eq!(ns.streams, 4);
        let stats = server.stop();
        let case = format!("node splice {node_splice}");
        assert!(stats.splice, "{case}");
        assert!(stats.spliced_bytes > 0, "{case}: {stats:?}");
        assert_eq!(stats.bad_frames, 0, "{case}: {stats:?}");
        assert_eq!(stats.nodes[0].stream_errors, 0, "{case}: {stats:?}");
        let ends: Vec<&str> = stats.connections.iter().map(|c| c.end.as_str()).collect();
        assert_eq!(
            ends.iter().filter(|e| **e == "closed").count(),
            3,
            "{case}: {ends:?}"
        );
        assert_eq!(ends.len(), 4, "{case}: {ends:?}");
    }
}

/// Reads from a raw node's socket until the session reports what `want`
/// picks out.
fn raw_node_await<T>(
    sock: &mut TcpStream,
    session: &mut XferSession,
    mut want: impl FnMut(&Event) -> Option<T>,
) -> T {
    let mut buf = [0u8; 4096];
    loop {
        let n = sock.read(&mut buf).unwrap();
        assert!(n > 0, "the I/O server closed the node connection");
        let mut events = Vec::new();
        session.feed(&buf[..n], &mut |e| events.push(e)).unwrap();
        if let Some(found) = events.iter().find_map(&mut want) {
            return found;
        }
    }
}

#[test]
fn io_server_splice_refuses_bad_data_before_splicing_and_goes_on() {
    use connlab_proto::xfer::{ErrorCode, Frame, StreamId};
    let server = start_splicing_server(2, |_| {});
    let (mut sock, mut session) = raw_node(server.nodes, Some(server.listen.port()));
    let accepted = |e: &Event| match e {
        Event::Accepted { stream, .. } => Some(*stream),
        _ => None,
    };
    let mut first = TcpStream::connect(server.listen).unwrap();
    first
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let s1 = raw_node_await(&mut sock, &mut session, accepted);
    let mut second = TcpStream::connect(server.listen).unwrap();
    second
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let s2 = raw_node_await(&mut sock, &mut session, accepted);
    // Beyond the 64 KiB credit on the first stream, then 8 KiB on a stream
    // never opened, then a good 8 KiB and FIN on the second.
    let mut bytes = Vec::new();
    let frames = [
        Frame::Data {
            stream: s1,
            bytes: pattern(64 * 1024 + 1, 1),
        },
        Frame::Data {
            stream: StreamId(s2.0 + 100),
            bytes: pattern(8192, 2),
        },
        Frame::Data {
            stream: s2,
            bytes: pattern(8192, 3),
        },
        Frame::Fin { stream: s2 },
    ];
    for f in &frames {
        f.encode_for(2, &mut bytes).unwrap();
    }
    sock.write_all(&bytes).unwrap();
    let mut got = Vec::new();
    second.read_to_end(&mut got).unwrap();
    assert!(
        got == pattern(8192, 3),
        "second stream: {} bytes",
        got.len()
    );
    // Not one byte of the refused payload reached the first client.
    let mut first_got = Vec::new();
    let _ = first.read_to_end(&mut first_got);
    assert!(first_got.is_empty(), "{} bytes leaked", first_got.len());
    // The server reset the first stream with FLOW_CONTROL.
    let code = raw_node_await(&mut sock, &mut session, |e| match e {
        Event::Reset { stream, code } if *stream == s1 => Some(*code),
        _ => None,
    });
    assert_eq!(code, ErrorCode::FLOW_CONTROL);
    let stats = server.stop();
    assert_eq!(stats.bad_frames, 0, "{stats:?}");
    assert_eq!(stats.nodes[0].stream_errors, 2, "{stats:?}");
    assert!(stats.spliced_payloads >= 1, "{stats:?}");
    assert_eq!(stats.spliced_bytes + stats.splice_spilled_bytes, 8192);
}
