//! The I/O server: one mio (edge-triggered epoll) loop holds the cluster
//! address's listeners, the node listener, every node connection
//! ([`XferSession::server`]) and every client socket.
//!
//! - A client connection on a served port goes to the next node serving that
//!   port (round robin) as an ACCEPT stream; a CONNECT from a node becomes a
//!   non-blocking connect and then CONNECTED or CONNECT_FAILED.
//! - Bytes move with the transfer protocol's per-stream credit: a client is
//!   read only while its node granted credit, and the node gets credit back
//!   only as bytes reach the client socket, so memory per connection is
//!   bounded by the window and a stalled client stops only its own stream.
//! - Toward clients: with a [`SendLimit`] each socket holds at most
//!   `notsent_lowat` unsent bytes before epoll stops reporting it writable,
//!   and ready sockets are written in [`FairQueue`] (deficit round robin)
//!   order, at most one quantum of deficit per turn. Without one (the paper's
//!   unlimited case) kernel buffers are left alone and each turn writes as
//!   much as the socket takes.
//! - A node that sends a bad frame gets GOAWAY and is closed; a node that
//!   dies or misbehaves resets only its own clients. Unauthenticated nodes
//!   are refused and counted.

use crate::access::Access;
use crate::drr::{After, FairQueue};
use crate::relay::Relay;
use crate::sizing::{self, ShareSizing};
use crate::stats::{ConnStats, NodeStats, ServerStats};
use crate::{os_nonce, Error};
use connlab_os::tcp;
use connlab_proto::xfer::{
    AuthKey, ErrorCode, Event, SockOpt, StreamId, XferConfig, XferError, XferSession,
};
use mio::net::{TcpListener, TcpStream};
use mio::unix::SourceFd;
use mio::{Events, Interest, Poll, Token};
use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::io::{self, Read, Write};
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, RawFd};
use std::time::{Duration, Instant};

/// How much each client socket may hold: the modern form of the paper's
/// per-connection limit on the interface queue.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SendLimit {
    /// `TCP_NOTSENT_LOWAT`: unsent bytes above which the socket is not
    /// reported writable (tcp(7)).
    pub notsent_lowat: u32,
    /// How each socket's send buffer is sized.
    pub sndbuf: SendBuffer,
}

/// How a limited client socket's send buffer (`SO_SNDBUF`) is sized. The
/// buffer also holds the bytes in flight, so it bounds a connection's rate
/// near buffer / RTT and its share of a bottleneck's queue.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum SendBuffer {
    /// The kernel's autotuning.
    Auto,
    /// This many bytes asked for (the kernel doubles it, socket(7)).
    Fixed(usize),
    /// Re-sized to a rate share of the fastest connection ([`ShareSizing`]).
    Share(ShareSizing),
}

impl SendLimit {
    /// The limit `--send-limit BYTES` sets: `TCP_NOTSENT_LOWAT` = `bytes`
    /// and send buffers sized by rate share ([`ShareSizing::for_unsent_limit`]).
    pub fn from_bytes(bytes: u32) -> SendLimit {
        SendLimit {
            notsent_lowat: bytes,
            sndbuf: SendBuffer::Share(ShareSizing::for_unsent_limit(bytes)),
        }
    }

    /// `bytes` with a fixed send buffer of four times that (at least 16 KiB):
    /// the default before rate-share sizing (`--send-buffer 4x`).
    pub fn fixed_4x(bytes: u32) -> SendLimit {
        SendLimit {
            notsent_lowat: bytes,
            sndbuf: SendBuffer::Fixed((bytes as usize).saturating_mul(4).max(16 * 1024)),
        }
    }
}

/// How the I/O server runs.
#[derive(Clone, Debug)]
pub struct ServerConfig {
    /// The cluster addresses (VIP:PORT) clients connect to.
    pub listen: Vec<SocketAddr>,
    /// Where application nodes connect.
    pub nodes: SocketAddr,
    /// The shared key.
    pub key: AuthKey,
    /// The per-socket limit toward clients; `None` reproduces the paper's
    /// unlimited case (default buffers, write as much as possible).
    pub send_limit: Option<SendLimit>,
    /// DRR quantum in bytes (used with a send limit).
    pub quantum: u64,
    /// Credit granted to nodes on each stream (bounds bytes queued per
    /// client connection in user space).
    pub initial_window: u32,
    /// Streams a node may open (CONNECT) at once.
    pub max_streams: u32,
    /// A node connection that has not authenticated after this long is
    /// closed and counted as refused (so silent peers cannot hold slots).
    pub handshake_timeout: Duration,
    /// An authenticated node silent this long is sent a PING.
    pub ping_interval: Duration,
    /// An authenticated node silent this long (PINGs unanswered) is
    /// considered dead: its streams are reset (a hung node costs only its own
    /// clients, and not forever).
    pub dead_after: Duration,
    /// Node connections that may be unauthenticated at once; more are reset
    /// on arrival and counted (`nodes_over_pending_cap`).
    pub max_pending_nodes: usize,
    /// Bytes read from one node per event-loop turn; the rest waits for the
    /// next turn, so one flooding node cannot starve clients and other nodes.
    pub node_read_budget: usize,
    /// Bytes queued toward one node (replies it does not read: PONG, RESET,
    /// DATA) above which it is dropped and counted (`nodes_dropped_queue`).
    pub max_node_queue: usize,
    /// DATA payloads one stream's queue toward its client holds at once;
    /// beyond it payloads are merged into the last one. Credit counts payload
    /// bytes only (`docs/transfer-protocol.md` §6), so this bounds the
    /// per-payload overhead a node can make the server hold within a window.
    pub max_frames_per_window: usize,
    /// Where nodes may CONNECT and which ports they may LISTEN on.
    pub access: Access,
}

impl ServerConfig {
    /// The default DRR quantum: one full DATA payload, 16 KiB.
    pub const DEFAULT_QUANTUM: u64 = 16 * 1024;
    /// Default [`ServerConfig::max_pending_nodes`].
    pub const DEFAULT_MAX_PENDING_NODES: usize = 16;
    /// Default [`ServerConfig::node_read_budget`]: 256 KiB.
    pub const DEFAULT_NODE_READ_BUDGET: usize = 256 * 1024;
    /// Default [`ServerConfig::max_node_queue`]: 64 MiB.
    pub const DEFAULT_MAX_NODE_QUEUE: usize = 64 << 20;
    /// Default [`ServerConfig::max_frames_per_window`].
    pub const DEFAULT_MAX_FRAMES_PER_WINDOW: usize = 1024;

    /// A configuration with the defaults (limit off, 16 KiB quantum,
    /// protocol default window and stream limit).
    pub fn new(listen: Vec<SocketAddr>, nodes: SocketAddr, key: AuthKey) -> ServerConfig {
        ServerConfig {
            listen,
            nodes,
            key,
            send_limit: None,
            quantum: ServerConfig::DEFAULT_QUANTUM,
            initial_window: XferConfig::DEFAULT_WINDOW,
            max_streams: XferConfig::DEFAULT_MAX_STREAMS,
            handshake_timeout: Duration::from_secs(10),
            ping_interval: Duration::from_secs(5),
            dead_after: Duration::from_secs(20),
            max_pending_nodes: ServerConfig::DEFAULT_MAX_PENDING_NODES,
            node_read_budget: ServerConfig::DEFAULT_NODE_READ_BUDGET,
            max_node_queue: ServerConfig::DEFAULT_MAX_NODE_QUEUE,
            max_frames_per_window: ServerConfig::DEFAULT_MAX_FRAMES_PER_WINDOW,
            access: Access::default(),
        }
    }
}

/// Addresses the server is bound to, passed to the `ready` callback.
#[derive(Clone, Debug)]
pub struct Bound {
    /// The cluster addresses, as bound (port 0 resolved).
    pub listen: Vec<SocketAddr>,
    /// The node address, as bound.
    pub nodes: SocketAddr,
}

const STOP: Token = Token(0);
const NODE_LISTENER: Token = Token(4);
const KIND_LISTENER: usize = 1;
const KIND_NODE: usize = 2;
const KIND_CLIENT: usize = 3;
const READ_CHUNK: usize = 64 * 1024;
/// `TCP_INFO` readings a socket's delivery rate is taken over (the span is
/// `RATE_READINGS - 1` sizing periods).
const RATE_READINGS: usize = 3;
/// Sockets read per call of a sizing pass (each a `TCP_INFO`, about a
/// microsecond, sometimes a `setsockopt`).
const SIZING_BATCH: usize = 32;

fn token(kind: usize, idx: usize) -> Token {
    Token(idx * 4 + kind)
}

/// Whether `ip` is one of this host's own addresses (what a CONNECT may not
/// reach by default, `access`): loopback, unspecified, or an address a
/// socket can bind here (the kernel's own answer, interfaces and aliases
/// included). With `net.ipv4.ip_nonlocal_bind` set every address binds, so
/// every CONNECT needs an explicit rule: the check fails closed.
fn is_own_address(ip: std::net::IpAddr) -> bool {
    let ip = match ip {
        std::net::IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, std::net::IpAddr::V4),
        v4 => v4,
    };
    if ip.is_loopback() || ip.is_unspecified() || ip.is_multicast() {
        return true;
    }
    let domain = socket2::Domain::for_address(SocketAddr::new(ip, 0));
    match socket2::Socket::new(domain, socket2::Type::STREAM, None) {
        Ok(s) => s.bind(&SocketAddr::new(ip, 0).into()).is_ok(),
        // Unsure: deny.
        Err(_) => true,
    }
}

/// Runs the I/O server until `stop_fd` becomes readable and `stop()` is
/// true (a shutdown latch), then returns its statistics. `ready` is called
/// once every address is bound.
pub fn run_server(
    config: &ServerConfig,
    stop_fd: RawFd,
    stop: impl Fn() -> bool,
    ready: impl FnOnce(&Bound),
) -> Result<ServerStats, Error> {
    let mut server = Server::bind(config)?;
    server
        .poll
        .registry()
        .register(&mut SourceFd(&stop_fd), STOP, Interest::READABLE)
        .map_err(|e| Error::io("registering the stop descriptor", stop_fd, e))?;
    let bound = Bound {
        listen: server.listeners.iter().map(|l| l.addr).collect(),
        nodes: server.node_addr,
    };
    server.stats.listen = bound.listen.iter().map(|a| a.to_string()).collect();
    server.stats.nodes_addr = bound.nodes.to_string();
    ready(&bound);
    let mut events = Events::with_capacity(1024);
    // Idle wake-ups often enough for the node timers (a PING must go out
    // and its answer come back well inside `dead_after`).
    let tick = Duration::from_secs(1)
        .min(config.ping_interval / 2)
        .min(config.handshake_timeout / 2)
        .max(Duration::from_millis(1));
    while !stop() {
        let timeout = match &server.sizer {
            _ if !server.fq.is_empty() || !server.backlog.is_empty() => Duration::ZERO,
            Some(sizer) if sizer.in_pass() => Duration::ZERO,
            Some(sizer) if sizer.sent_since => {
                tick.min(sizer.next.saturating_duration_since(Instant::now()))
            }
            _ => tick,
        };
        if let Err(e) = server.poll.poll(&mut events, Some(timeout)) {
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(Error::io(
                "waiting for events (epoll_wait) on",
                "the I/O server's sockets",
                e,
            ));
        }
        for event in &events {
            let t = event.token();
            if t == STOP {
                continue;
            }
            if t == NODE_LISTENER {
                server.accept_nodes();
                continue;
            }
            let (kind, idx) = (t.0 % 4, t.0 / 4);
            let gone = event.is_error() || event.is_read_closed();
            let readable = event.is_readable() || gone;
            let writable = event.is_writable() || gone || event.is_write_closed();
            match kind {
                KIND_LISTENER => server.accept_clients(idx),
                KIND_NODE => {
                    if let Some(node) = server.nodes.get_mut(idx).and_then(Option::as_mut) {
                        node.readable |= readable;
                        node.writable |= writable;
                        server.on_node(idx);
                    }
                }
                KIND_CLIENT => {
                    if let Some(c) = server.clients.get_mut(idx).and_then(Option::as_mut) {
                        c.relay.readable |= readable;
                        c.relay.writable |= writable;
                        server.on_client(idx);
                    }
                }
                _ => {}
            }
        }
        server.read_backlog();
        // One clock reading serves the writer, the sizing and the timers.
        let now = Instant::now();
        server.serve_clients(now);
        server.resize_send_buffers(now);
        server.check_timers(now);
    }
    Ok(server.finish())
}

struct Listener {
    sock: TcpListener,
    addr: SocketAddr,
}

struct Node {
    sock: TcpStream,
    session: XferSession,
    out: Vec<u8>,
    out_pos: usize,
    readable: bool,
    writable: bool,
    /// Stream id -> client slot.
    streams: HashMap<u32, usize>,
    ports: BTreeSet<u16>,
    /// Its record, listed in `ServerStats::nodes` when it ends.
    stats: NodeStats,
    /// Not authenticated yet: counted against `max_pending_nodes`.
    pending: bool,
    /// Its read stopped at the budget with input left: in `Server::backlog`.
    in_backlog: bool,
    accepted_at: Instant,
    /// When the node last sent anything.
    last_input: Instant,
    last_ping: Instant,
}

struct Client {
    relay: Relay,
    node: usize,
    /// Rate-share sizing state (with `SendBuffer::Share`).
    sizing: Option<ConnSizing>,
}

/// What rate-share sizing knows of one client socket.
struct ConnSizing {
    /// When the socket was added.
    born: Instant,
    /// When and `tcpi_bytes_acked` at the last few readings, oldest first:
    /// the delivery rate is taken over these (a few periods), as one period
    /// of ACKs is bursty.
    readings: VecDeque<(Instant, u64)>,
    /// The relay's `blocked` count at the last reading.
    blocked: u64,
    /// The lowest RTT seen, microseconds.
    min_rtt_us: u32,
    /// The send buffer set, bytes as the kernel counts them.
    sk_bytes: usize,
}

/// Rate-share sizing across the client sockets.
struct Sizer {
    rules: ShareSizing,
    /// The fastest delivery rate in the last round, bytes per second.
    fastest: f64,
    next: Instant,
    /// Whether any client socket was written since the last pass began (an
    /// idle server neither wakes up nor scans).
    sent_since: bool,
    /// The next client slot of the pass under way (`None`: no pass).
    cursor: Option<usize>,
    /// The fastest rate and the lowest RTTs seen so far in this pass.
    pass_fastest: f64,
    pass_rtts: Vec<Duration>,
    /// Base-RTT group starts from the last complete pass.
    groups: Vec<Duration>,
}

impl Sizer {
    fn in_pass(&self) -> bool {
        self.cursor.is_some()
    }
}

/// Nodes serving a port, taken in turn.
#[derive(Default)]
struct Serving {
    nodes: Vec<usize>,
    next: usize,
}

struct Server<'c> {
    config: &'c ServerConfig,
    poll: Poll,
    listeners: Vec<Listener>,
    node_listener: TcpListener,
    node_addr: SocketAddr,
    nodes: Vec<Option<Node>>,
    clients: Vec<Option<Client>>,
    free_clients: Vec<usize>,
    ports: BTreeMap<u16, Serving>,
    fq: FairQueue,
    sizer: Option<Sizer>,
    /// Scratch of `on_node` (events of one read) and `serve_clients` (nodes
    /// with output), kept to avoid an allocation per loop turn.
    node_events: Vec<Event>,
    touched_nodes: Vec<usize>,
    scratch: Vec<u8>,
    /// Nodes whose read stopped at `node_read_budget` with input left.
    backlog: Vec<usize>,
    /// Node connections not authenticated yet.
    pending: usize,
    stats: ServerStats,
}

impl<'c> Server<'c> {
    fn bind(config: &'c ServerConfig) -> Result<Server<'c>, Error> {
        if config.listen.is_empty() {
            return Err(Error::Config("no cluster address to listen on".into()));
        }
        let poll = Poll::new().map_err(|e| Error::io("creating", "an epoll instance", e))?;
        let mut listeners = Vec::new();
        for addr in &config.listen {
            let mut sock = TcpListener::bind(*addr)
                .map_err(|e| Error::io("binding the cluster address", addr, e))?;
            let addr = sock
                .local_addr()
                .map_err(|e| Error::io("reading the bound address of", addr, e))?;
            poll.registry()
                .register(
                    &mut sock,
                    token(KIND_LISTENER, listeners.len()),
                    Interest::READABLE,
                )
                .map_err(|e| Error::io("registering the listener", addr, e))?;
            listeners.push(Listener { sock, addr });
        }
        let mut node_listener = TcpListener::bind(config.nodes)
            .map_err(|e| Error::io("binding the node address", config.nodes, e))?;
        let node_addr = node_listener
            .local_addr()
            .map_err(|e| Error::io("reading the bound address of", config.nodes, e))?;
        poll.registry()
            .register(&mut node_listener, NODE_LISTENER, Interest::READABLE)
            .map_err(|e| Error::io("registering the node listener", node_addr, e))?;
        let limited = config.send_limit.is_some();
        let stats = ServerStats {
            schema: "connlab.singleip.io-server.stats/1",
            send_limit_bytes: config.send_limit.map(|l| u64::from(l.notsent_lowat)),
            sndbuf_bytes: match config.send_limit.map(|l| l.sndbuf) {
                Some(SendBuffer::Fixed(b)) => Some(b as u64),
                _ => None,
            },
            sndbuf_mode: match config.send_limit.map(|l| l.sndbuf) {
                None | Some(SendBuffer::Auto) => "auto",
                Some(SendBuffer::Fixed(_)) => "fixed",
                Some(SendBuffer::Share(_)) => "share",
            },
            quantum_bytes: limited.then_some(config.quantum),
            ..ServerStats::default()
        };
        Ok(Server {
            config,
            poll,
            listeners,
            node_listener,
            node_addr,
            nodes: Vec::new(),
            clients: Vec::new(),
            free_clients: Vec::new(),
            ports: BTreeMap::new(),
            // Unlimited: every turn writes as much as the socket takes.
            fq: FairQueue::new(if limited { config.quantum } else { u64::MAX }),
            sizer: match config.send_limit.map(|l| l.sndbuf) {
                Some(SendBuffer::Share(rules)) => Some(Sizer {
                    rules,
                    fastest: 0.0,
                    next: Instant::now() + rules.period,
                    sent_since: false,
                    cursor: None,
                    pass_fastest: 0.0,
                    pass_rtts: Vec::new(),
                    groups: Vec::new(),
                }),
                _ => None,
            },
            node_events: Vec::new(),
            touched_nodes: Vec::new(),
            scratch: vec![0; READ_CHUNK],
            backlog: Vec::new(),
            pending: 0,
            stats,
        })
    }

    fn accept_nodes(&mut self) {
        loop {
            let (mut sock, addr) = match self.node_listener.accept() {
                Ok(c) => c,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                // EMFILE and friends: try again at the next readiness.
                Err(_) => return,
            };
            self.stats.node_connections += 1;
            if self.pending >= self.config.max_pending_nodes {
                // Counted, not listed: a flood of these must not grow memory.
                self.stats.nodes_over_pending_cap += 1;
                self.stats.nodes_refused += 1;
                let _ = socket2::SockRef::from(&sock).set_linger(Some(Duration::ZERO));
                continue;
            }
            let mut node_stats = NodeStats {
                addr: addr.to_string(),
                end: "open".into(),
                ..NodeStats::default()
            };
            let session = os_nonce().map_err(|e| e.to_string()).and_then(|nonce| {
                let mut c = XferConfig::new(self.config.key.clone(), nonce);
                c.initial_window = self.config.initial_window;
                c.max_streams = self.config.max_streams;
                XferSession::server(c).map_err(|e| e.to_string())
            });
            let session = match session {
                Ok(s) => s,
                Err(e) => {
                    node_stats.end = format!("refused: no session ({e})");
                    self.stats.nodes_refused += 1;
                    self.record_node(node_stats);
                    continue;
                }
            };
            let _ = sock.set_nodelay(true);
            let idx = match self.nodes.iter().position(Option::is_none) {
                Some(i) => i,
                None => {
                    self.nodes.push(None);
                    self.nodes.len() - 1
                }
            };
            let both = Interest::READABLE | Interest::WRITABLE;
            if self
                .poll
                .registry()
                .register(&mut sock, token(KIND_NODE, idx), both)
                .is_err()
            {
                node_stats.end = "refused: could not register".into();
                self.stats.nodes_refused += 1;
                self.record_node(node_stats);
                continue;
            }
            self.pending += 1;
            self.nodes[idx] = Some(Node {
                sock,
                session,
                out: Vec::new(),
                out_pos: 0,
                readable: true,
                writable: true,
                streams: HashMap::new(),
                ports: BTreeSet::new(),
                stats: node_stats,
                pending: true,
                in_backlog: false,
                accepted_at: Instant::now(),
                last_input: Instant::now(),
                last_ping: Instant::now(),
            });
            self.on_node(idx);
        }
    }

    fn accept_clients(&mut self, l: usize) {
        loop {
            let Some(listener) = self.listeners.get(l) else {
                return;
            };
            let port = listener.addr.port();
            let (sock, peer) = match listener.sock.accept() {
                Ok(c) => c,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(_) => return,
            };
            self.stats.clients_accepted += 1;
            // Round robin over the nodes serving the port; a node at its
            // stream limit is skipped.
            let mut opened = None;
            if let Some(serving) = self.ports.get_mut(&port) {
                for _ in 0..serving.nodes.len() {
                    let n = serving.nodes[serving.next % serving.nodes.len()];
                    serving.next = serving.next.wrapping_add(1);
                    if let Some(node) = self.nodes.get_mut(n).and_then(Option::as_mut) {
                        if let Ok(stream) = node.session.accept(port, peer) {
                            opened = Some((n, stream));
                            break;
                        }
                    }
                }
            }
            let Some((n, stream)) = opened else {
                self.stats.clients_no_node += 1;
                let _ = socket2::SockRef::from(&sock).set_linger(Some(Duration::ZERO));
                continue;
            };
            let slot = self.add_client(sock, n, stream, peer, false);
            if slot.is_none() {
                if let Some(node) = self.nodes.get_mut(n).and_then(Option::as_mut) {
                    let _ = node.session.reset(stream, ErrorCode::INTERNAL);
                }
            }
            self.flush_node(n);
        }
    }

    /// Registers a client socket relayed on `stream` of node `n`.
    fn add_client(
        &mut self,
        mut sock: TcpStream,
        n: usize,
        stream: StreamId,
        peer: SocketAddr,
        connecting: bool,
    ) -> Option<usize> {
        let _ = sock.set_nodelay(true);
        let mut sizing = None;
        if let Some(limit) = self.config.send_limit {
            let fd = sock.as_raw_fd();
            let _ = tcp::set_notsent_lowat(fd, limit.notsent_lowat as usize);
            match (limit.sndbuf, &self.sizer) {
                (SendBuffer::Fixed(b), _) => {
                    let _ = socket2::SockRef::from(&sock).set_send_buffer_size(b);
                }
                (SendBuffer::Share(rules), Some(sizer)) => {
                    // Before any sample of its own: the handshake's RTT and
                    // the allowance every active connection has now. With no
                    // allowance yet the RTT changes nothing (a young socket
                    // gets `initial`): no TCP_INFO per accept then.
                    let info = if sizer.fastest > 0.0 {
                        tcp::tcp_info(fd).unwrap_or_default()
                    } else {
                        tcp::TcpInfo::default()
                    };
                    let rtt_us = if info.min_rtt_us > 0 {
                        info.min_rtt_us
                    } else {
                        info.rtt_us
                    };
                    let rtt = Duration::from_micros(rtt_us.into());
                    let sk_bytes = rules.target_at_age(sizer.fastest, rtt, Duration::ZERO);
                    let _ = tcp::set_send_buffer(fd, sk_bytes / 2);
                    let now = Instant::now();
                    sizing = Some(ConnSizing {
                        born: now,
                        readings: VecDeque::from([(now, info.bytes_acked)]),
                        blocked: 0,
                        min_rtt_us: rtt_us,
                        sk_bytes,
                    });
                }
                _ => {}
            }
        }
        let slot = self.free_clients.pop().unwrap_or_else(|| {
            self.clients.push(None);
            self.clients.len() - 1
        });
        let both = Interest::READABLE | Interest::WRITABLE;
        if self
            .poll
            .registry()
            .register(&mut sock, token(KIND_CLIENT, slot), both)
            .is_err()
        {
            let _ = socket2::SockRef::from(&sock).set_linger(Some(Duration::ZERO));
            self.free_clients.push(slot);
            return None;
        }
        let node = self.nodes.get_mut(n).and_then(Option::as_mut)?;
        let mut relay = Relay::new(sock, stream, connecting);
        relay.stats.peer = peer.to_string();
        relay.stats.connect = connecting;
        relay.stats.node_id = node.session.node_id();
        if let Some(z) = &sizing {
            relay.stats.sndbuf_max_bytes = z.sk_bytes as u64;
            relay.stats.sndbuf_last_bytes = z.sk_bytes as u64;
        }
        node.streams.insert(stream.0, slot);
        self.clients[slot] = Some(Client {
            relay,
            node: n,
            sizing,
        });
        Some(slot)
    }

    /// Reads what the node sent, acts on it, and writes what is queued for it.
    fn on_node(&mut self, n: usize) {
        // Reused between calls: no allocation per read.
        let mut events = std::mem::take(&mut self.node_events);
        self.read_node(n, &mut events);
        events.clear();
        self.node_events = events;
    }

    /// Reads what node `n` sent until `EAGAIN`, acting on every event, then
    /// writes what is queued for it.
    fn read_node(&mut self, n: usize, events: &mut Vec<Event>) {
        let mut budget = self.config.node_read_budget.max(1);
        loop {
            let Some(node) = self.nodes.get_mut(n).and_then(Option::as_mut) else {
                return;
            };
            if !node.readable {
                break;
            }
            if budget == 0 {
                // Input may be left (edge-triggered: no new event will say
                // so): read on at the next turn, after the others.
                self.stats.node_read_budget_hits += 1;
                if !node.in_backlog {
                    node.in_backlog = true;
                    self.backlog.push(n);
                }
                break;
            }
            let want = budget.min(self.scratch.len());
            let got = match node.sock.read(&mut self.scratch[..want]) {
                Ok(0) => {
                    let end = match node.session.finish_input() {
                        Ok(()) if node.session.is_closed() => "closed".to_string(),
                        Ok(()) => "node closed the connection".to_string(),
                        Err(e) => format!("node closed the connection: {e}"),
                    };
                    self.drop_node(n, end);
                    return;
                }
                Ok(k) => {
                    // Any input proves the node alive (regression: only the
                    // handshake set this, so every node was dropped after
                    // `dead_after` however busy it was).
                    node.last_input = Instant::now();
                    budget -= k;
                    k
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    node.readable = false;
                    break;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    self.drop_node(n, format!("reading from the node: {e}"));
                    return;
                }
            };
            let result = node
                .session
                .feed(&self.scratch[..got], &mut |e| events.push(e));
            // The read's time stamps every DATA payload it carried.
            let now = node.last_input;
            for event in events.drain(..) {
                self.on_event(n, event, now);
            }
            match result {
                Ok(connlab_proto::Flow::Continue) => {}
                Ok(connlab_proto::Flow::Close) => {
                    self.drop_node(n, "the node said GOAWAY".into());
                    return;
                }
                Err(error) => {
                    self.connection_error(n, &error);
                    return;
                }
            }
        }
        self.flush_node(n);
    }

    /// Reads on from nodes whose last read stopped at the budget.
    fn read_backlog(&mut self) {
        if self.backlog.is_empty() {
            return;
        }
        let backlog = std::mem::take(&mut self.backlog);
        for &n in &backlog {
            if let Some(node) = self.nodes.get_mut(n).and_then(Option::as_mut) {
                node.in_backlog = false;
                self.on_node(n);
            }
        }
    }

    /// The node broke the protocol: GOAWAY was queued; send it and close.
    fn connection_error(&mut self, n: usize, error: &XferError) {
        let Some(node) = self.nodes.get_mut(n).and_then(Option::as_mut) else {
            return;
        };
        self.stats.bad_frames += 1;
        if !node.session.is_established() && !node.stats.authenticated {
            self.stats.nodes_refused += 1;
            if matches!(error, XferError::AuthFailed { .. }) {
                self.stats.auth_failures += 1;
            }
        }
        node.writable = true;
        self.flush_node(n);
        self.drop_node(n, format!("connection error: {error}"));
    }

    fn on_event(&mut self, n: usize, event: Event, now: Instant) {
        let Some(node) = self.nodes.get_mut(n).and_then(Option::as_mut) else {
            return;
        };
        let slot_of = |node: &Node, s: StreamId| node.streams.get(&s.0).copied();
        match event {
            Event::Established { node_id, .. } => {
                self.stats.nodes_authenticated += 1;
                if node.pending {
                    node.pending = false;
                    self.pending -= 1;
                }
                let st = &mut node.stats;
                st.authenticated = true;
                st.node_id = node_id;
            }
            Event::Listen { port } => {
                let errno = if self.config.access.may_listen(port, self.node_addr.port()) {
                    self.ensure_listener(port)
                } else {
                    self.stats.listens_denied += 1;
                    libc::EACCES as u32
                };
                let Some(node) = self.nodes.get_mut(n).and_then(Option::as_mut) else {
                    return;
                };
                let _ = node.session.listen_result(port, errno);
                if errno == 0 {
                    node.ports.insert(port);
                    let serving = self.ports.entry(port).or_default();
                    if !serving.nodes.contains(&n) {
                        serving.nodes.push(n);
                    }
                }
            }
            Event::Unlisten { port } => {
                node.ports.remove(&port);
                if let Some(serving) = self.ports.get_mut(&port) {
                    serving.nodes.retain(|&x| x != n);
                }
            }
            Event::ConnectRequest { stream, addr } => {
                self.stats.connects += 1;
                if !self
                    .config
                    .access
                    .may_connect(addr, is_own_address(addr.ip()))
                {
                    self.stats.connects_denied += 1;
                    self.stats.connect_failures += 1;
                    let _ = node.session.connect_failed(stream, libc::EACCES as u32);
                    return;
                }
                match TcpStream::connect(addr) {
                    Ok(sock) => {
                        if self.add_client(sock, n, stream, addr, true).is_none() {
                            self.stats.connect_failures += 1;
                            if let Some(node) = self.nodes.get_mut(n).and_then(Option::as_mut) {
                                let _ = node.session.connect_failed(stream, libc::EMFILE as u32);
                            }
                        }
                    }
                    Err(e) => {
                        self.stats.connect_failures += 1;
                        let errno = e.raw_os_error().unwrap_or(libc::EIO) as u32;
                        let _ = node.session.connect_failed(stream, errno);
                    }
                }
            }
            Event::Data { stream, bytes } => {
                if let Some(slot) = slot_of(node, stream) {
                    if let Some(c) = self.clients[slot].as_mut() {
                        if c.relay.push(bytes, now, self.config.max_frames_per_window) {
                            self.stats.frames_merged += 1;
                        }
                        if c.relay.writable {
                            self.fq.activate(slot);
                        }
                    }
                }
            }
            Event::Fin { stream } => {
                if let Some(slot) = slot_of(node, stream) {
                    if let Some(c) = self.clients[slot].as_mut() {
                        c.relay.fin_in = true;
                        self.fq.activate(slot);
                    }
                }
            }
            Event::Reset { stream, code } => {
                if let Some(slot) = slot_of(node, stream) {
                    self.drop_client(slot, &format!("reset by node ({code})"), None, true);
                }
            }
            Event::StreamError { stream, error } => {
                if let Some(slot) = slot_of(node, stream) {
                    self.drop_client(slot, &format!("reset: {error}"), None, true);
                }
            }
            Event::Credit { stream, .. } => {
                if let Some(slot) = slot_of(node, stream) {
                    self.pump_client_in(slot);
                }
            }
            Event::SetOpt {
                stream,
                option,
                value,
            } => {
                let Some(slot) = slot_of(node, stream) else {
                    return;
                };
                let Some(c) = self.clients[slot].as_ref() else {
                    return;
                };
                let result = match option {
                    SockOpt::NODELAY => c
                        .relay
                        .sock
                        .set_nodelay(value != 0)
                        .map_err(|e| e.to_string()),
                    SockOpt::KEEPALIVE => socket2::SockRef::from(&c.relay.sock)
                        .set_keepalive(value != 0)
                        .map_err(|e| e.to_string()),
                    other => Err(format!("socket option {} is not supported", other.0)),
                };
                if let Err(message) = result {
                    let _ = node
                        .session
                        .send_error(stream, ErrorCode::UNSUPPORTED, &message);
                }
            }
            Event::GoAway { code, .. } => {
                // A node refuses the server's proof with GOAWAY AUTH_FAILED:
                // the keys differ. Counted like a wrong node proof.
                if code == ErrorCode::AUTH_FAILED && !node.session.is_established() {
                    let st = &mut node.stats;
                    if !st.authenticated {
                        st.auth_failures += 1;
                        self.stats.auth_failures += 1;
                    }
                }
            }
            Event::Closed { .. }
            | Event::Pong { .. }
            | Event::PeerError { .. }
            | Event::ListenResult { .. }
            | Event::Accepted { .. }
            | Event::Connected { .. }
            | Event::ConnectFailed { .. } => {}
        }
    }

    /// 0 when a listener serves `port` on the cluster address (binding one on
    /// the first cluster address's IP if needed), else the bind errno.
    fn ensure_listener(&mut self, port: u16) -> u32 {
        if self.listeners.iter().any(|l| l.addr.port() == port) {
            return 0;
        }
        let addr = SocketAddr::new(self.listeners[0].addr.ip(), port);
        let mut sock = match TcpListener::bind(addr) {
            Ok(s) => s,
            Err(e) => return e.raw_os_error().unwrap_or(libc::EACCES) as u32,
        };
        let idx = self.listeners.len();
        if let Err(e) =
            self.poll
                .registry()
                .register(&mut sock, token(KIND_LISTENER, idx), Interest::READABLE)
        {
            return e.raw_os_error().unwrap_or(libc::EIO) as u32;
        }
        self.stats.listen.push(addr.to_string());
        self.listeners.push(Listener { sock, addr });
        0
    }

    fn on_client(&mut self, slot: usize) {
        let Some(c) = self.clients[slot].as_mut() else {
            return;
        };
        let n = c.node;
        let Some(node) = self.nodes.get_mut(n).and_then(Option::as_mut) else {
            return;
        };
        if c.relay.connecting {
            let stream = c.relay.stream;
            match (c.relay.sock.take_error(), c.relay.sock.peer_addr()) {
                (Ok(None), Ok(_)) => {
                    c.relay.connecting = false;
                    let port = c.relay.sock.local_addr().map(|a| a.port()).unwrap_or(0);
                    let _ = node.session.connected(stream, port);
                }
                (Ok(None), Err(e)) if e.kind() == io::ErrorKind::NotConnected => return,
                (Ok(Some(e)) | Err(e), _) | (Ok(None), Err(e)) => {
                    self.stats.connect_failures += 1;
                    let errno = e.raw_os_error().unwrap_or(libc::ECONNREFUSED) as u32;
                    let _ = node.session.connect_failed(stream, errno);
                    self.drop_client(slot, "connect failed", None, false);
                    self.flush_node(n);
                    return;
                }
            }
        }
        self.pump_client_in(slot);
        if let Some(c) = self.clients[slot].as_ref() {
            if c.relay.writable && (c.relay.queued() > 0 || c.relay.fin_in) {
                self.fq.activate(slot);
            }
        }
        self.flush_node(n);
    }

    /// Client socket -> node, as far as the node's credit allows.
    fn pump_client_in(&mut self, slot: usize) {
        let Some(c) = self.clients[slot].as_mut() else {
            return;
        };
        let Some(node) = self.nodes.get_mut(c.node).and_then(Option::as_mut) else {
            return;
        };
        match c.relay.pump_in(&mut node.session, &mut self.scratch) {
            Ok(_) if c.relay.done() => self.drop_client(slot, "closed", None, false),
            Ok(_) => {}
            Err(_) => self.drop_client(
                slot,
                "reset by client",
                Some(ErrorCode::CONNECTION_RESET),
                true,
            ),
        }
    }

    /// The DRR writer: ready client sockets in turn, at most their deficit
    /// each, until every one is empty or blocked or the budget for this
    /// pass is spent (so node input is not starved).
    fn serve_clients(&mut self, now: Instant) {
        let mut budget = self.clients.len() * 2 + 16;
        // Reused between calls: no allocation per loop turn.
        let mut touched = std::mem::take(&mut self.touched_nodes);
        while budget > 0 {
            let Some(turn) = self.fq.next_turn() else {
                break;
            };
            budget -= 1;
            self.stats.drr_turns += 1;
            let Some(c) = self.clients.get_mut(turn.flow).and_then(Option::as_mut) else {
                self.fq.remove(turn.flow);
                continue;
            };
            let n = c.node;
            let Some(node) = self.nodes.get_mut(n).and_then(Option::as_mut) else {
                continue;
            };
            touched.push(n);
            match c.relay.pump_out(&mut node.session, turn.allowance, now) {
                Ok(sent) => {
                    if sent > 0 {
                        if let Some(sizer) = self.sizer.as_mut() {
                            sizer.sent_since = true;
                        }
                    }
                    let after = if c.relay.queued() == 0 {
                        After::Empty
                    } else if c.relay.writable {
                        After::Backlogged
                    } else {
                        After::Blocked
                    };
                    self.fq.complete(turn, sent as u64, after);
                    if c.relay.done() {
                        self.drop_client(turn.flow, "closed", None, false);
                    }
                }
                Err(_) => self.drop_client(
                    turn.flow,
                    "reset by client",
                    Some(ErrorCode::CONNECTION_RESET),
                    true,
                ),
            }
        }
        touched.sort_unstable();
        touched.dedup();
        for &n in &touched {
            self.flush_node(n);
        }
        touched.clear();
        self.touched_nodes = touched;
    }

    /// Rate-share sizing, a pass over the client sockets when one is due:
    /// reads `TCP_INFO` of every socket that filled up (a short write or
    /// `EAGAIN`) since its last reading,
    /// keeps the fastest delivery rate, and re-sizes those sockets' send
    /// buffers to the allowance it gives ([`ShareSizing`]); idle sockets keep
    /// theirs. A pass goes [`SIZING_BATCH`] readings per call, between
    /// event-loop turns, so thousands of connections do not stall the loop;
    /// sockets are sized with the fastest rate so far in this pass or the
    /// last, and the base RTTs of the last pass's groups.
    fn resize_send_buffers(&mut self, now: Instant) {
        let Some(sizer) = self.sizer.as_mut() else {
            return;
        };
        if !sizer.in_pass() {
            if now < sizer.next || !sizer.sent_since {
                return;
            }
            sizer.sent_since = false;
            sizer.cursor = Some(0);
        }
        let rules = sizer.rules;
        let mut reads = 0;
        let mut slot = sizer.cursor.unwrap_or(0);
        while slot < self.clients.len() && reads < SIZING_BATCH {
            let this = slot;
            slot += 1;
            let Some(c) = self.clients[this].as_mut() else {
                continue;
            };
            let Some(z) = c.sizing.as_mut() else { continue };
            // Only sockets that filled up since their last reading: one that
            // never does (a request-response) is not held by its buffer, and
            // reading it would only cost (measured: +190 us at p99 with 5,000
            // such connections). It keeps the buffer it has.
            if c.relay.blocked == z.blocked {
                continue;
            }
            z.blocked = c.relay.blocked;
            reads += 1;
            let Ok(info) = tcp::tcp_info(c.relay.sock.as_raw_fd()) else {
                continue;
            };
            if z.readings.len() >= RATE_READINGS {
                z.readings.pop_front();
            }
            z.readings.push_back((now, info.bytes_acked));
            if let (Some(&(t0, a0)), Some(&(t1, a1))) = (z.readings.front(), z.readings.back()) {
                // Too short a span makes a noisy sample: such a socket is
                // sized this pass but sets the pace only later.
                let span = t1.saturating_duration_since(t0);
                if span >= rules.period / 2 {
                    let r = sizing::rate(a1.saturating_sub(a0), span);
                    sizer.pass_fastest = sizer.pass_fastest.max(r);
                }
            }
            if info.min_rtt_us > 0 {
                z.min_rtt_us = info.min_rtt_us;
            }
            let rtt = Duration::from_micros(z.min_rtt_us.into());
            sizer.pass_rtts.push(rtt);
            let base = sizing::base_in(&sizer.groups, rtt, rules.same_path);
            let fastest = sizer.pass_fastest.max(sizer.fastest);
            let target = rules.target_at_age(fastest, base, now.saturating_duration_since(z.born));
            let st = &mut c.relay.stats;
            st.min_rtt_us = z.min_rtt_us;
            st.base_rtt_us = base.as_micros().try_into().unwrap_or(u32::MAX);
            if ShareSizing::worth_changing(z.sk_bytes, target)
                && tcp::set_send_buffer(c.relay.sock.as_raw_fd(), target / 2).is_ok()
            {
                z.sk_bytes = target;
                st.sndbuf_changes += 1;
                st.sndbuf_last_bytes = target as u64;
                st.sndbuf_max_bytes = st.sndbuf_max_bytes.max(target as u64);
            }
        }
        if slot < self.clients.len() {
            sizer.cursor = Some(slot);
            return;
        }
        // The pass is complete.
        sizer.cursor = None;
        sizer.fastest = sizer.pass_fastest;
        sizer.pass_fastest = 0.0;
        sizer.groups = sizing::group_starts(&sizer.pass_rtts, rules.same_path);
        sizer.next = now + rules.period_for(sizer.pass_rtts.len());
        sizer.pass_rtts.clear();
        self.stats.sizing_rounds += 1;
    }

    /// Closes node connections still unauthenticated after the handshake
    /// timeout, pings silent nodes and gives up on those silent too long.
    fn check_timers(&mut self, now: Instant) {
        let c = self.config;
        for n in 0..self.nodes.len() {
            let Some(node) = self.nodes[n].as_mut() else {
                continue;
            };
            if node.session.is_closed() {
                continue;
            }
            let end = if !node.session.is_established() {
                if now.saturating_duration_since(node.accepted_at) <= c.handshake_timeout {
                    continue;
                }
                let _ = node
                    .session
                    .close(ErrorCode::AUTH_REQUIRED, "no authentication in time");
                self.stats.nodes_auth_timeout += 1;
                format!(
                    "refused: not authenticated within {:?}",
                    c.handshake_timeout
                )
            } else {
                let silent = now.saturating_duration_since(node.last_input);
                if silent > c.dead_after {
                    let _ = node
                        .session
                        .close(ErrorCode::CANCEL, "no answer to PING in time");
                    format!("no input for {:?} (PINGs unanswered)", c.dead_after)
                } else {
                    if silent > c.ping_interval
                        && now.saturating_duration_since(node.last_ping) > c.ping_interval
                    {
                        node.last_ping = now;
                        let _ = node.session.ping(0);
                        self.flush_node(n);
                    }
                    continue;
                }
            };
            node.writable = true;
            self.flush_node(n);
            self.drop_node(n, end);
        }
    }

    /// Removes a client: optionally resets its stream (`reset`) and its
    /// socket (`abort`), and records its statistics.
    fn drop_client(&mut self, slot: usize, end: &str, reset: Option<ErrorCode>, abort: bool) {
        let Some(mut c) = self.clients.get_mut(slot).and_then(Option::take) else {
            return;
        };
        self.fq.remove(slot);
        if abort {
            c.relay.abort();
        }
        let _ = self.poll.registry().deregister(&mut c.relay.sock);
        if let Some(node) = self.nodes.get_mut(c.node).and_then(Option::as_mut) {
            node.streams.remove(&c.relay.stream.0);
            if let Some(code) = reset {
                let _ = node.session.reset(c.relay.stream, code);
            }
        }
        c.relay.stats.end = end.to_string();
        self.record(c.relay.stats);
        self.free_clients.push(slot);
    }

    /// Lists a node connection's record (the first
    /// [`ServerStats::MAX_NODES`]; the rest are counted).
    fn record_node(&mut self, stats: NodeStats) {
        if self.stats.nodes.len() < ServerStats::MAX_NODES {
            self.stats.nodes.push(stats);
        } else {
            self.stats.nodes_not_listed += 1;
        }
    }

    fn record(&mut self, stats: ConnStats) {
        if self.stats.connections.len() < ServerStats::MAX_CONNS {
            self.stats.connections.push(stats);
        } else {
            self.stats.connections_not_listed += 1;
        }
    }

    /// Writes the node's queued output; a write error ends the node.
    fn flush_node(&mut self, n: usize) {
        let Some(node) = self.nodes.get_mut(n).and_then(Option::as_mut) else {
            return;
        };
        node.session.drain_output(&mut node.out);
        while node.writable && node.out_pos < node.out.len() {
            match node.sock.write(&node.out[node.out_pos..]) {
                Ok(k) => {
                    node.out_pos += k;
                    if node.out_pos < node.out.len() {
                        node.writable = false;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => node.writable = false,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    self.drop_node(n, format!("writing to the node: {e}"));
                    return;
                }
            }
        }
        if node.out_pos == node.out.len() {
            node.out.clear();
            node.out_pos = 0;
        } else if node.out_pos > READ_CHUNK {
            node.out.drain(..node.out_pos);
            node.out_pos = 0;
        }
        if node.out.len() - node.out_pos > self.config.max_node_queue {
            // A node that does not read its replies (PONG, RESET, DATA)
            // would make them queue without bound.
            self.stats.nodes_dropped_queue += 1;
            let max = self.config.max_node_queue;
            self.drop_node(
                n,
                format!("dropped: more than {max} B queued toward it unread"),
            );
        }
    }

    /// Ends a node connection: its clients are reset, its ports freed.
    fn drop_node(&mut self, n: usize, end: String) {
        let Some(mut node) = self.nodes.get_mut(n).and_then(Option::take) else {
            return;
        };
        let slots: Vec<usize> = node.streams.values().copied().collect();
        for slot in slots {
            // The node entry is already out of the table: no RESET is queued.
            self.drop_client(slot, "node lost", None, true);
        }
        for port in &node.ports {
            if let Some(serving) = self.ports.get_mut(port) {
                serving.nodes.retain(|&x| x != n);
            }
        }
        let _ = self.poll.registry().deregister(&mut node.sock);
        if node.pending {
            self.pending -= 1;
        }
        let mut st = node.stats;
        st.absorb(node.session.stats());
        st.resets_sent = node.session.stats().resets_sent;
        st.ports = node.ports.iter().copied().collect();
        if !st.authenticated && !end.starts_with("connection error") {
            self.stats.nodes_refused += 1;
        }
        st.end = end;
        self.record_node(st);
    }

    fn finish(mut self) -> ServerStats {
        // Frames that arrived before the stop (a node's GOAWAY, a refused
        // handshake) are still counted.
        for n in 0..self.nodes.len() {
            if let Some(node) = self.nodes[n].as_mut() {
                node.readable = true;
                self.on_node(n);
            }
        }
        for n in 0..self.nodes.len() {
            if let Some(node) = self.nodes[n].as_mut() {
                let _ = node
                    .session
                    .close(ErrorCode::NO_ERROR, "the I/O server is shutting down");
                node.writable = true;
                self.flush_node(n);
                self.drop_node(n, "I/O server stopped".into());
            }
        }
        for slot in 0..self.clients.len() {
            if let Some(c) = self.clients[slot].take() {
                let mut st = c.relay.stats;
                st.end = "open".into();
                self.record(st);
            }
        }
        self.stats
    }
}
