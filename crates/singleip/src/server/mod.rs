//! The I/O server: one mio (edge-triggered epoll) loop holds the cluster
//! address's listeners, the node listener, every node connection
//! ([`XferSession::server`](connlab_proto::xfer::XferSession::server)) and every client socket.
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
//! - With [`ServerConfig::splice`] (`--splice`, the research part),
//!   DATA payloads of 4 KiB and more go from the node connection to their
//!   client socket by splice(2) where the client has nothing queued
//!   (`splice_out.rs`); the copy path is unchanged without it.
//! - A node that sends a bad frame gets GOAWAY and is closed; a node that
//!   dies or misbehaves resets only its own clients. Unauthenticated nodes
//!   are refused and counted.

mod buffers;
mod clients;
mod config;
mod nodes;
mod splice_out;

use crate::drr::FairQueue;
use crate::stats::ServerStats;
use crate::Error;
use buffers::Sizer;
use clients::Client;
use connlab_os::reserve::{FdReserve, LimitEpisodes, Shed};
use connlab_proto::xfer::{ErrorCode, Event};
use mio::net::TcpListener;
use mio::unix::SourceFd;
use mio::{Events, Interest, Poll, Token};
use nodes::Node;
use std::collections::BTreeMap;
use std::io;
use std::net::SocketAddr;
use std::os::fd::RawFd;
use std::time::{Duration, Instant};

pub use config::{Bound, SendBuffer, SendLimit, ServerConfig};

const STOP: Token = Token(0);
const NODE_LISTENER: Token = Token(4);
const KIND_LISTENER: usize = 1;
const KIND_NODE: usize = 2;
const KIND_CLIENT: usize = 3;
const READ_CHUNK: usize = 64 * 1024;

fn token(kind: usize, idx: usize) -> Token {
    Token(idx * 4 + kind)
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
        listen: server.listeners.iter().flatten().map(|l| l.addr).collect(),
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
        if server.accept_again {
            server.accept_again = false;
            server.accept_nodes();
            for l in 0..server.listeners.len() {
                server.accept_clients(l);
            }
        }
        let timeout = match &server.sizer {
            _ if !server.fq.is_empty() || !server.backlog.is_empty() => Duration::ZERO,
            _ if server.accept_again => ACCEPT_RETRY.min(tick),
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
                        node.hup |= gone;
                        server.on_node(idx);
                    }
                }
                KIND_CLIENT => {
                    if let Some(c) = server.clients.get_mut(idx).and_then(Option::as_mut) {
                        c.relay.readable |= readable;
                        c.relay.writable |= writable;
                        c.relay.hup |= gone;
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
        // Node output of the whole turn (requests, CREDITs) in one write each.
        server.flush_due_nodes();
        server.resize_send_buffers(now);
        server.check_timers(now);
    }
    Ok(server.finish())
}

/// How soon the loop tries a listener again after it stopped at the
/// descriptor limit without draining its queue.
const ACCEPT_RETRY: Duration = Duration::from_millis(10);

/// Sheds one connection pending on `listener` at the descriptor limit
/// (accepted with the reserve's descriptor and reset), counting it in
/// `shed` (and a new stretch at the limit in `fd_limit_episodes`); `true`
/// when one was shed and the caller may accept again. When
/// not even the reserve could be had, `accept_again` asks the loop to
/// retry soon.
fn shed_pending(
    reserve: &mut FdReserve,
    listener: &TcpListener,
    (limit, stats): (&mut LimitEpisodes, &mut ServerStats),
    accept_again: &mut bool,
) -> bool {
    let outcome = reserve.shed(|| {
        let (c, _) = listener.accept()?;
        let _ = socket2::SockRef::from(&c).set_linger(Some(Duration::ZERO));
        Ok(())
    });
    match outcome {
        Shed::One => {
            limit.shed(&mut stats.shed, &mut stats.fd_limit_episodes);
            true
        }
        Shed::Empty => false,
        Shed::Stuck => {
            *accept_again = true;
            false
        }
    }
}

/// A listener on a cluster address.
struct Listener {
    sock: TcpListener,
    addr: SocketAddr,
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
    /// Listeners by token index: the configured cluster addresses first
    /// (never closed), then ports nodes LISTEN on, closed (`None`) when no
    /// node serves them any more.
    listeners: Vec<Option<Listener>>,
    /// How many of `listeners` are the configured cluster addresses.
    configured: usize,
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
    /// Nodes with output to write at the end of the loop turn.
    flush_due: Vec<usize>,
    scratch: Vec<u8>,
    /// Nodes whose read stopped at `node_read_budget` with input left.
    backlog: Vec<usize>,
    /// Node connections not authenticated yet.
    pending: usize,
    /// The spare descriptor that sheds connections at the descriptor limit.
    reserve: FdReserve,
    /// Whether the server is at its descriptor limit now.
    limit: LimitEpisodes,
    /// A listener stopped at the descriptor limit with connections possibly
    /// still queued: edge-triggered, it will not say so again, so the loop
    /// retries it (the node listener and each cluster listener).
    accept_again: bool,
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
            listeners.push(Some(Listener { sock, addr }));
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
            splice: config.splice,
            ..ServerStats::default()
        };
        Ok(Server {
            config,
            poll,
            configured: listeners.len(),
            listeners,
            node_listener,
            node_addr,
            nodes: Vec::new(),
            clients: Vec::new(),
            free_clients: Vec::new(),
            ports: BTreeMap::new(),
            // Unlimited: every turn writes as much as the socket takes.
            fq: FairQueue::new(if limited { config.quantum } else { u64::MAX }),
            sizer: Sizer::for_limit(config.send_limit),
            node_events: Vec::new(),
            touched_nodes: Vec::new(),
            flush_due: Vec::new(),
            scratch: vec![0; READ_CHUNK],
            backlog: Vec::new(),
            pending: 0,
            reserve: FdReserve::new(),
            limit: LimitEpisodes::default(),
            accept_again: false,
            stats,
        })
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
