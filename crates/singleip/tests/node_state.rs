//! Issue 29: whatever nodes ask of the I/O server (LISTEN, UNLISTEN,
//! CONNECT) and however they leave, nothing they made stays open once every
//! node has left. A test binary of its own, so the process's descriptor
//! count is this test's alone: the I/O server runs in a thread of it.

use connlab_os::Shutdown;
use connlab_proto::xfer::{AuthKey, Event, XferConfig, XferSession};
use connlab_singleip::{run_server, ConnectRule, ServerConfig, ServerStats};
use connlab_testkit::{echo_server, free_port};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use std::collections::BTreeSet;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

/// Node slots: a slot's node connects at its first operation, and again
/// after it left.
const NODES: usize = 3;
/// Cluster ports the nodes ask for.
const PORTS: usize = 4;

fn key() -> AuthKey {
    AuthKey::new(b"0123456789abcdef-node-state").unwrap()
}

#[derive(Clone, Copy, Debug)]
enum Op {
    Listen(usize, usize),
    Unlisten(usize, usize),
    Connect(usize),
    Leave(usize),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (0..NODES, 0..PORTS).prop_map(|(n, p)| Op::Listen(n, p)),
        (0..NODES, 0..PORTS).prop_map(|(n, p)| Op::Unlisten(n, p)),
        (0..NODES).prop_map(Op::Connect),
        (0..NODES).prop_map(Op::Leave),
    ]
}

/// An authenticated node speaking through the reference session.
struct Node {
    sock: TcpStream,
    session: XferSession,
    ports: BTreeSet<u16>,
}

impl Node {
    fn join(nodes: SocketAddr) -> Node {
        let sock = TcpStream::connect(nodes).unwrap();
        sock.set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        let session = XferSession::node(XferConfig::new(key(), [9; 32])).unwrap();
        let mut node = Node {
            sock,
            session,
            ports: BTreeSet::new(),
        };
        node.until(|e| matches!(e, Event::Established { .. }).then_some(()));
        node
    }

    fn flush(&mut self) {
        let mut out = Vec::new();
        self.session.drain_output(&mut out);
        self.sock.write_all(&out).unwrap();
    }

    /// Writes what is queued, then reads until `want` picks an event.
    fn until<T>(&mut self, mut want: impl FnMut(&Event) -> Option<T>) -> T {
        let mut buf = [0u8; 4096];
        loop {
            self.flush();
            let n = self.sock.read(&mut buf).unwrap();
            assert!(n > 0, "the I/O server closed a node's connection");
            let mut events = Vec::new();
            self.session
                .feed(&buf[..n], &mut |e| events.push(e))
                .unwrap();
            if let Some(t) = events.iter().find_map(&mut want) {
                self.flush();
                return t;
            }
        }
    }
}

/// Descriptors this process holds.
fn open_descriptors() -> usize {
    std::fs::read_dir("/proc/self/fd").unwrap().count()
}

/// The descriptor count once two looks 100 ms apart agree.
fn steady_count() -> usize {
    let mut last = open_descriptors();
    loop {
        std::thread::sleep(Duration::from_millis(100));
        let now = open_descriptors();
        if now == last {
            return now;
        }
        last = now;
    }
}

/// Waits up to 5 s for the descriptor count to come back to `baseline`.
fn settles_at(baseline: usize) -> usize {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let n = open_descriptors();
        if n == baseline || Instant::now() > deadline {
            return n;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn nodes_leave_no_socket_behind() {
    let echo = echo_server();
    let ports: Vec<u16> = (0..PORTS).map(|_| free_port().port()).collect();
    let stop = Arc::new(Shutdown::new().unwrap());
    let (tx, rx) = mpsc::channel();
    let s = stop.clone();
    let server = std::thread::spawn(move || -> ServerStats {
        let mut config = ServerConfig::new(
            vec!["127.0.0.1:0".parse().unwrap()],
            "127.0.0.1:0".parse().unwrap(),
            key(),
        );
        let rule: ConnectRule = "127.0.0.0/8:*".parse().unwrap();
        config.access.connect = vec![rule];
        run_server(
            &config,
            s.wake_fd(),
            || s.requested(),
            |b| tx.send(b.nodes).unwrap(),
        )
        .unwrap()
    });
    let nodes_addr = rx.recv_timeout(Duration::from_secs(10)).unwrap();
    // The echo server and the I/O server are up; a node's first
    // connection makes no lasting descriptor of the test's own.
    drop(Node::join(nodes_addr));
    let baseline = steady_count();
    let mut runner = TestRunner::new(Config {
        cases: 24,
        ..Config::default()
    });
    let strategy = proptest::collection::vec(op(), 1..40);
    let result = runner.run(&strategy, |ops| {
        let mut slots: Vec<Option<Node>> = (0..NODES).map(|_| None).collect();
        for op in ops {
            let n = match op {
                Op::Listen(n, _) | Op::Unlisten(n, _) | Op::Connect(n) | Op::Leave(n) => n,
            };
            if let Op::Leave(_) = op {
                slots[n] = None;
                continue;
            }
            let node = slots[n].get_or_insert_with(|| Node::join(nodes_addr));
            match op {
                Op::Listen(_, p) => {
                    let port = ports[p];
                    if node.ports.contains(&port) {
                        continue;
                    }
                    node.session.listen(port).unwrap();
                    let errno = node.until(|e| match e {
                        Event::ListenResult { port: q, errno } if *q == port => Some(*errno),
                        _ => None,
                    });
                    // A port another node released (or serves) is granted.
                    prop_assert_eq!(errno, 0, "LISTEN {}", port);
                    node.ports.insert(port);
                }
                Op::Unlisten(_, p) => {
                    let port = ports[p];
                    if node.ports.remove(&port) {
                        node.session.unlisten(port).unwrap();
                        node.flush();
                    }
                }
                Op::Connect(_) => {
                    let stream = node.session.connect(echo).unwrap();
                    let up = node.until(|e| match e {
                        Event::Connected { stream: s, .. } if *s == stream => Some(true),
                        Event::ConnectFailed { stream: s, .. } if *s == stream => Some(false),
                        _ => None,
                    });
                    prop_assert!(up, "CONNECT to the echo server failed");
                }
                Op::Leave(_) => unreachable!(),
            }
        }
        drop(slots);
        let now = settles_at(baseline);
        prop_assert_eq!(now, baseline, "descriptors left open after every node left");
        Ok(())
    });
    stop.trigger();
    let stats = server.join().unwrap();
    if let Err(e) = result {
        panic!("{e}\n{stats:?}");
    }
    assert!(stats.nodes_authenticated > 24, "{stats:?}");
}
