//! The application node, forwarding mode: one mio loop holds the
//! interconnect connection ([`XferSession::node`]) and, for every stream the
//! I/O server accepts, a TCP connection to a local unmodified server. Bytes
//! move both ways under the stream's credit, half-closes become
//! `shutdown(SHUT_WR)` and FIN, a reset on either side resets the other.
//!
//! Outbound ([`Outbound`]): a local program that connects to one of the
//! node's outbound listeners gets a connection opened by the I/O server
//! (CONNECT), so it leaves the cluster from the cluster address; bytes wait
//! until the I/O server reports it CONNECTED, and a CONNECT_FAILED resets the
//! local connection.

use crate::outbuf::OutBuf;
use crate::relay::{Relay, SpliceFailed, SpliceIn};
use crate::splice::{SpliceOut, Wire};
use crate::stats::NodeRunStats;
use crate::{os_nonce, Error};
use connlab_proto::xfer::{
    AuthKey, ErrorCode, Event, StreamId, XferConfig, XferSession, MAX_VERSION,
};
use mio::net::TcpListener;
use mio::net::TcpStream;
use mio::unix::SourceFd;
use mio::{Events, Interest, Poll, Token};
use std::collections::{HashMap, HashSet};
use std::io::{self, Read};
use std::net::SocketAddr;
use std::os::fd::RawFd;
use std::time::{Duration, Instant};

/// How an application node runs.
#[derive(Clone, Debug)]
pub struct NodeConfig {
    /// The I/O server's node address.
    pub io_server: SocketAddr,
    /// The shared key.
    pub key: AuthKey,
    /// This node's number (informational, shown in the server's statistics).
    pub node_id: u32,
    /// Cluster ports this node serves (LISTEN).
    pub ports: Vec<u16>,
    /// The local server each stream is forwarded to.
    pub forward: SocketAddr,
    /// Credit granted to the I/O server on each stream.
    pub initial_window: u32,
    /// Streams the I/O server may have open on this node at once.
    pub max_streams: u32,
    /// The highest CLXF version offered to the I/O server (1..=2, default
    /// 2): 1 keeps DATA payloads at 16 KiB (measurement, interoperability).
    pub max_version: u16,
    /// Silence from the I/O server after which the node sends a PING.
    pub ping_interval: Duration,
    /// Silence after which the I/O server is given up (its answers to PINGs
    /// count as input), so a hung server does not hold the node forever.
    pub dead_after: Duration,
    /// Local listeners whose connections the I/O server opens outward.
    pub outbound: Vec<Outbound>,
    /// Move the local servers' bytes to the I/O server with splice(2)
    /// through a pipe (one per node connection), not through user space.
    pub splice: bool,
    /// Times to connect again when the I/O server ends the session before
    /// it is authenticated (GOAWAY REFUSED, or the connection closed: its
    /// unauthenticated slots were full), waiting [`NodeConfig::retry_backoff`]
    /// doubled each time, up to 5 s. A wrong key is not retried.
    pub refused_retries: u32,
    /// The first wait before such a retry.
    pub retry_backoff: Duration,
}

/// The longest wait between two retries of a refused session.
const MAX_RETRY_BACKOFF: Duration = Duration::from_secs(5);

/// A local listener of the node: each connection to `listen` becomes a
/// connection from the I/O server (the cluster address) to `connect`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Outbound {
    /// Where local programs connect (on the node).
    pub listen: SocketAddr,
    /// Where the I/O server connects for them.
    pub connect: SocketAddr,
}

impl NodeConfig {
    /// A configuration with the protocol's default window and stream limit.
    pub fn new(
        io_server: SocketAddr,
        key: AuthKey,
        ports: Vec<u16>,
        forward: SocketAddr,
    ) -> NodeConfig {
        NodeConfig {
            io_server,
            key,
            node_id: 0,
            ports,
            forward,
            initial_window: XferConfig::DEFAULT_WINDOW,
            max_streams: XferConfig::DEFAULT_MAX_STREAMS,
            max_version: MAX_VERSION,
            ping_interval: Duration::from_secs(5),
            dead_after: Duration::from_secs(20),
            outbound: Vec::new(),
            splice: false,
            refused_retries: 8,
            retry_backoff: Duration::from_millis(100),
        }
    }
}

const STOP: Token = Token(0);
const SERVER: Token = Token(1);
const FIRST: usize = 2;

/// Connects to the I/O server, authenticates, serves `config.ports` and
/// forwards every stream to `config.forward` until `stop_fd` becomes
/// readable and `stop()` is true. `ready` is called once every port is
/// granted. An I/O server that refuses the key or a port, or goes away,
/// ends the run with an error.
pub fn run_node(
    config: &NodeConfig,
    stop_fd: RawFd,
    stop: impl Fn() -> bool,
    ready: impl FnOnce(),
) -> Result<NodeRunStats, Error> {
    let (stats, result) = run_node_with_stats(config, stop_fd, stop, ready);
    result.map(|()| stats)
}

/// [`run_node`], returning the statistics also when the run ends with an
/// error (their `end` then says why), so `--stats` is written either way.
pub fn run_node_with_stats(
    config: &NodeConfig,
    stop_fd: RawFd,
    stop: impl Fn() -> bool,
    ready: impl FnOnce(),
) -> (NodeRunStats, Result<(), Error>) {
    let mut ready = Some(ready);
    let mut retries = 0;
    loop {
        let mut stats = NodeRunStats {
            schema: "connlab.singleip.app-node.stats/1",
            io_server: config.io_server.to_string(),
            forward: config.forward.to_string(),
            ports: config.ports.clone(),
            splice: config.splice,
            end: "open".into(),
            refused_retries: u64::from(retries),
            ..NodeRunStats::default()
        };
        let mut refused = false;
        let result = node_loop(
            config,
            stop_fd,
            &stop,
            || {
                if let Some(f) = ready.take() {
                    f();
                }
            },
            &mut stats,
            &mut refused,
        );
        if let Err(e) = &result {
            if refused && retries < config.refused_retries && !stop() {
                let wait = config
                    .retry_backoff
                    .saturating_mul(1 << retries.min(16))
                    .min(MAX_RETRY_BACKOFF);
                retries += 1;
                eprintln!(
                    "singleip app-node: {e}; connecting again in {wait:?} (retry {retries} of {})",
                    config.refused_retries
                );
                if !sleep_unless_stopped(stop_fd, wait, &stop) {
                    continue;
                }
                stats.end = "stopped".into();
                return (stats, Ok(()));
            }
        }
        stats.end = match &result {
            Ok(()) => "stopped".into(),
            Err(e) => e.to_string(),
        };
        return (stats, result);
    }
}

/// Waits `wait`, or until `stop_fd` is readable and `stop()` says so;
/// true when stopped.
fn sleep_unless_stopped(stop_fd: RawFd, wait: Duration, stop: impl Fn() -> bool) -> bool {
    let until = Instant::now() + wait;
    loop {
        if stop() {
            return true;
        }
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return false;
        }
        let mut fd = libc::pollfd {
            fd: stop_fd,
            events: libc::POLLIN,
            revents: 0,
        };
        let ms = left.as_millis().clamp(1, i32::MAX as u128) as libc::c_int;
        // SAFETY: one valid pollfd for the duration of the call.
        unsafe { libc::poll(&mut fd, 1, ms) };
    }
}

/// One session with the I/O server: connects, serves until stopped or
/// ended, then closes. `refused` is set when the I/O server ended the
/// session before authentication, which is worth a retry.
fn node_loop(
    config: &NodeConfig,
    stop_fd: RawFd,
    stop: impl Fn() -> bool,
    ready: impl FnOnce(),
    stats: &mut NodeRunStats,
    refused: &mut bool,
) -> Result<(), Error> {
    let mut node = Node::connect(config, stop_fd, stats, Box::new(ready))?;
    let result = node.serve(stop);
    node.finish(result, refused)
}

/// The state of one session: the interconnect, the local connections and
/// what the loop keeps between turns.
struct Node<'a> {
    config: &'a NodeConfig,
    stats: &'a mut NodeRunStats,
    /// Called once every port is granted (taken when called).
    ready: Option<Box<dyn FnOnce() + 'a>>,
    /// Frames toward the I/O server: DATA built in place, or spliced.
    wire: Wire,
    session: XferSession,
    poll: Poll,
    /// The outbound listeners, each with where the I/O server connects.
    outbound: Vec<(TcpListener, SocketAddr)>,
    /// The first local connection's token: they follow the outbound
    /// listeners'.
    first: usize,
    /// Slots whose stream waits for CONNECTED.
    waiting: HashSet<usize>,
    /// Outbound listeners reported readable.
    accept_ready: Vec<usize>,
    /// Local connections something happened to in a loop turn (reused).
    touched: Vec<usize>,
    /// Ports the I/O server granted.
    granted: usize,
    relays: Vec<Option<Relay>>,
    by_stream: HashMap<u32, usize>,
    /// Relays that stopped for a full node connection (splice).
    wire_wait: Vec<usize>,
    /// The interconnect may have bytes to read.
    readable: bool,
    /// An event reported the connection's read side closed: read on until 0.
    hup: bool,
    scratch: Vec<u8>,
    evs: Vec<Event>,
    events: Events,
    /// Wake often enough for the liveness timer.
    tick: Duration,
    last_input: Instant,
    last_ping: Instant,
    /// The I/O server ended the connection (an end, a reset, or GOAWAY
    /// REFUSED), as opposed to this node giving up on what it was sent.
    server_ended: bool,
}

impl<'a> Node<'a> {
    /// Connects to the I/O server, starts the session (its HELLO queued)
    /// and opens the outbound listeners.
    fn connect(
        config: &'a NodeConfig,
        stop_fd: RawFd,
        stats: &'a mut NodeRunStats,
        ready: Box<dyn FnOnce() + 'a>,
    ) -> Result<Node<'a>, Error> {
        let addr = config.io_server;
        let std_sock = std::net::TcpStream::connect(addr)
            .map_err(|e| Error::io("connecting to the I/O server at", addr, e))?;
        std_sock
            .set_nonblocking(true)
            .map_err(|e| Error::io("setting non-blocking mode on the connection to", addr, e))?;
        let _ = std_sock.set_nodelay(true);
        let splice = if config.splice {
            Some(SpliceOut::new().map_err(|e| Error::io("creating a pipe (splice) for", addr, e))?)
        } else {
            None
        };
        let mut wire = Wire {
            sock: TcpStream::from_std(std_sock),
            out: OutBuf::new(),
            splice,
            writable: true,
        };
        let nonce =
            os_nonce().map_err(|e| Error::io("reading a nonce (getrandom) for", addr, e))?;
        let mut xc = XferConfig::new(config.key.clone(), nonce);
        xc.node_id = config.node_id;
        xc.initial_window = config.initial_window;
        xc.max_streams = config.max_streams;
        xc.max_version = config.max_version;
        let session = XferSession::node(xc).map_err(|e| Error::Config(e.to_string()))?;
        let poll = Poll::new().map_err(|e| Error::io("creating", "an epoll instance", e))?;
        poll.registry()
            .register(&mut SourceFd(&stop_fd), STOP, Interest::READABLE)
            .map_err(|e| Error::io("registering the stop descriptor", stop_fd, e))?;
        poll.registry()
            .register(
                &mut wire.sock,
                SERVER,
                Interest::READABLE | Interest::WRITABLE,
            )
            .map_err(|e| Error::io("registering the connection to", addr, e))?;
        let outbound = outbound_listeners(config, &poll, stats)?;
        let first = FIRST + outbound.len();
        let tick = Duration::from_secs(1)
            .min(config.ping_interval / 2)
            .max(Duration::from_millis(1));
        Ok(Node {
            config,
            stats,
            ready: Some(ready),
            wire,
            session,
            poll,
            outbound,
            first,
            waiting: HashSet::new(),
            accept_ready: Vec::new(),
            touched: Vec::new(),
            granted: 0,
            relays: Vec::new(),
            by_stream: HashMap::new(),
            wire_wait: Vec::new(),
            readable: true,
            hup: false,
            scratch: vec![0u8; 64 * 1024],
            evs: Vec::new(),
            events: Events::with_capacity(1024),
            tick,
            last_input: Instant::now(),
            last_ping: Instant::now(),
            server_ended: false,
        })
    }

    /// The loop: output, liveness, wait, the interconnect's input, the
    /// outbound accepts and the local connections, until `stop()` or an
    /// error.
    fn serve(&mut self, stop: impl Fn() -> bool) -> Result<(), Error> {
        loop {
            // Output first: the HELLO is queued from the start.
            self.wire.out.take_session_output(&mut self.session);
            self.flush()?;
            if stop() {
                return Ok(());
            }
            if self.keep_alive()? {
                continue;
            }
            if !self.wait()? {
                continue;
            }
            self.read_server()?;
            // Local programs connecting outward wait in the backlog until
            // the session is up.
            if self.session.is_established() {
                self.accept_outbound();
            }
            self.resume_wire_waiters()?;
            self.pump_touched()?;
        }
    }

    /// The session's error with `reason`.
    fn session_error(&self, reason: String) -> Error {
        Error::Session {
            addr: self.config.io_server.to_string(),
            reason,
        }
    }

    /// The session's error for the I/O server ending the connection.
    fn server_end(&mut self, reason: String) -> Error {
        self.server_ended = true;
        self.session_error(reason)
    }

    /// Writes what waits for the interconnect.
    fn flush(&mut self) -> Result<(), Error> {
        match self.wire.flush() {
            Ok(()) => Ok(()),
            Err(e) => Err(self.server_end(format!("writing: {e}"))),
        }
    }

    /// Gives up on a silent I/O server, or PINGs one silent for a while:
    /// true when a PING was queued (to be written at once).
    fn keep_alive(&mut self) -> Result<bool, Error> {
        let config = self.config;
        let now = Instant::now();
        let silent = now.saturating_duration_since(self.last_input);
        if silent > config.dead_after {
            return Err(self.session_error(format!(
                "no input from the I/O server for {:?} (PINGs unanswered)",
                config.dead_after
            )));
        }
        if self.session.is_established()
            && silent > config.ping_interval
            && now.saturating_duration_since(self.last_ping) > config.ping_interval
        {
            self.last_ping = now;
            let _ = self.session.ping(0);
            return Ok(true);
        }
        Ok(false)
    }

    /// Waits for events and notes them: the interconnect's readiness, the
    /// outbound listeners to accept on, the local connections touched.
    /// False when interrupted by a signal.
    fn wait(&mut self) -> Result<bool, Error> {
        // Relays waiting for an idle connection that is idle already go on
        // at once.
        let timeout = if !self.wire_wait.is_empty() && self.wire.idle() {
            Duration::ZERO
        } else {
            self.tick
        };
        if let Err(e) = self.poll.poll(&mut self.events, Some(timeout)) {
            if e.kind() == io::ErrorKind::Interrupted {
                return Ok(false);
            }
            return Err(Error::io(
                "waiting for events (epoll_wait) on",
                "the node's sockets",
                e,
            ));
        }
        self.touched.clear();
        let first = self.first;
        for event in &self.events {
            let gone = event.is_error() || event.is_read_closed();
            let r = event.is_readable() || gone;
            let w = event.is_writable() || gone || event.is_write_closed();
            match event.token() {
                STOP => {}
                SERVER => {
                    self.readable |= r;
                    self.wire.writable |= w;
                    self.hup |= gone;
                }
                Token(t) if t < first => self.accept_ready.push(t - FIRST),
                Token(t) => {
                    if let Some(relay) = self.relays.get_mut(t - first).and_then(Option::as_mut) {
                        relay.readable |= r;
                        relay.writable |= w;
                        relay.hup |= gone;
                        self.touched.push(t - first);
                    }
                }
            }
        }
        Ok(true)
    }

    /// The interconnect: reads until `EAGAIN` and acts on every event.
    fn read_server(&mut self) -> Result<(), Error> {
        while self.readable {
            let got = match self.wire.sock.read(&mut self.scratch) {
                Ok(0) => {
                    let why = match self.session.finish_input() {
                        Err(e) => format!("the I/O server closed the connection: {e}"),
                        Ok(()) => "the I/O server closed the connection".to_string(),
                    };
                    return Err(self.server_end(why));
                }
                Ok(k) => {
                    self.last_input = Instant::now();
                    if k < self.scratch.len() && !self.hup {
                        // Drained (a short read): no EAGAIN read to prove it.
                        self.readable = false;
                    }
                    k
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    self.readable = false;
                    break;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(self.server_end(format!("reading: {e}"))),
            };
            let evs = &mut self.evs;
            let fed = self
                .session
                .feed(&self.scratch[..got], &mut |e| evs.push(e));
            let now = Instant::now();
            let mut evs = std::mem::take(&mut self.evs);
            for event in evs.drain(..) {
                self.on_event(event, now)?;
            }
            self.evs = evs;
            if let Err(e) = fed {
                // Send the GOAWAY the session queued, then give up.
                self.wire.flush_once(&mut self.session);
                return Err(self.session_error(e.to_string()));
            }
        }
        Ok(())
    }

    /// Acts on one event of the session.
    fn on_event(&mut self, event: Event, now: Instant) -> Result<(), Error> {
        match event {
            Event::Established { version, .. } => {
                self.stats.version = version;
                for &port in &self.config.ports {
                    if let Err(e) = self.session.listen(port) {
                        return Err(self.session_error(format!("LISTEN {port}: {e}")));
                    }
                }
                if self.config.ports.is_empty() {
                    self.call_ready();
                }
            }
            Event::ListenResult { port, errno } => {
                if errno != 0 {
                    return Err(Error::PortRefused {
                        addr: self.config.io_server.to_string(),
                        port,
                        source: io::Error::from_raw_os_error(errno as i32),
                    });
                }
                self.granted += 1;
                if self.granted >= self.config.ports.len() {
                    self.call_ready();
                }
            }
            Event::Accepted { stream, .. } => self.forward(stream),
            Event::Data { stream, bytes } => {
                if let Some(&slot) = self.by_stream.get(&stream.0) {
                    if let Some(relay) = self.relays[slot].as_mut() {
                        relay.push(
                            bytes,
                            now,
                            crate::ServerConfig::DEFAULT_MAX_FRAMES_PER_WINDOW,
                        );
                        self.touched.push(slot);
                    }
                }
            }
            Event::Fin { stream } => {
                if let Some(&slot) = self.by_stream.get(&stream.0) {
                    if let Some(relay) = self.relays[slot].as_mut() {
                        relay.fin_in = true;
                        self.touched.push(slot);
                    }
                }
            }
            Event::Credit { stream, .. } => {
                if let Some(&slot) = self.by_stream.get(&stream.0) {
                    self.touched.push(slot);
                }
            }
            Event::Connected { stream, .. } => {
                if let Some(&slot) = self.by_stream.get(&stream.0) {
                    self.waiting.remove(&slot);
                    self.touched.push(slot);
                }
            }
            Event::ConnectFailed { stream, .. } => {
                let dropped = self.drop_stream(stream);
                self.stats.outbound_failures += u64::from(dropped);
            }
            Event::Reset { stream, .. } | Event::StreamError { stream, .. } => {
                let dropped = self.drop_stream(stream);
                self.stats.resets_received += u64::from(dropped);
            }
            Event::GoAway { code, reason } => {
                if code == ErrorCode::REFUSED && !self.session.is_established() {
                    return Err(self.server_end(format!(
                        "the I/O server refused the session before authentication: \
                         {reason} (GOAWAY {code})"
                    )));
                }
                return Err(self.session_error(format!("GOAWAY {code}: {reason}")));
            }
            _ => {}
        }
        Ok(())
    }

    /// Calls `ready` unless it was called already.
    fn call_ready(&mut self) {
        if let Some(f) = self.ready.take() {
            f();
        }
    }

    /// A free relay slot, grown by one if none is.
    fn free_slot(&mut self) -> usize {
        self.relays
            .iter()
            .position(Option::is_none)
            .unwrap_or_else(|| {
                self.relays.push(None);
                self.relays.len() - 1
            })
    }

    /// A stream the I/O server accepted: connects it to the local server,
    /// or resets it when that fails.
    fn forward(&mut self, stream: StreamId) {
        self.stats.streams += 1;
        let slot = self.free_slot();
        let token = Token(self.first + slot);
        let connected = TcpStream::connect(self.config.forward).and_then(|mut s| {
            self.poll
                .registry()
                .register(&mut s, token, Interest::READABLE | Interest::WRITABLE)
                .map(|()| s)
        });
        match connected {
            Ok(s) => {
                let _ = s.set_nodelay(true);
                self.relays[slot] = Some(Relay::new(s, stream, true));
                self.by_stream.insert(stream.0, slot);
            }
            Err(_) => {
                self.stats.forward_failures += 1;
                let _ = self.session.reset(stream, ErrorCode::CONNECTION_RESET);
            }
        }
    }

    /// Aborts the local connection of a stream the I/O server ended: true
    /// when there was one.
    fn drop_stream(&mut self, stream: StreamId) -> bool {
        let Some(slot) = self.by_stream.remove(&stream.0) else {
            return false;
        };
        self.waiting.remove(&slot);
        let Some(mut relay) = self.relays[slot].take() else {
            return false;
        };
        relay.abort();
        let _ = self.poll.registry().deregister(&mut relay.sock);
        true
    }

    /// Local programs connecting outward: each becomes a CONNECT.
    fn accept_outbound(&mut self) {
        let mut ready = std::mem::take(&mut self.accept_ready);
        ready.sort_unstable();
        ready.dedup();
        for i in ready.drain(..) {
            loop {
                let mut local = match self.outbound[i].0.accept() {
                    Ok((s, _)) => s,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    // WouldBlock, or EMFILE and friends: next readiness.
                    Err(_) => break,
                };
                let dest = self.outbound[i].1;
                let slot = self.free_slot();
                let token = Token(self.first + slot);
                let registry = self.poll.registry();
                let opened = self.session.connect(dest).ok().filter(|_| {
                    registry
                        .register(&mut local, token, Interest::READABLE | Interest::WRITABLE)
                        .is_ok()
                });
                match opened {
                    Some(stream) => {
                        let _ = local.set_nodelay(true);
                        self.stats.outbound_streams += 1;
                        self.relays[slot] = Some(Relay::new(local, stream, false));
                        self.by_stream.insert(stream.0, slot);
                        self.waiting.insert(slot);
                    }
                    None => {
                        // Too many streams, or the session is closing.
                        self.stats.outbound_failures += 1;
                        let _ = socket2::SockRef::from(&local).set_linger(Some(Duration::ZERO));
                    }
                }
            }
        }
        self.accept_ready = ready;
    }

    /// Relays that waited for the node connection go on once it is idle.
    fn resume_wire_waiters(&mut self) -> Result<(), Error> {
        if self.wire_wait.is_empty() {
            return Ok(());
        }
        self.flush()?;
        if self.wire.idle() {
            for &slot in &self.wire_wait {
                if let Some(relay) = self.relays.get_mut(slot).and_then(Option::as_mut) {
                    relay.wire_waiting = false;
                }
            }
            self.touched.append(&mut self.wire_wait);
        }
        Ok(())
    }

    /// Moves the bytes of the local connections that something happened
    /// to, and closes those that are done or failed.
    fn pump_touched(&mut self) -> Result<(), Error> {
        let mut touched = std::mem::take(&mut self.touched);
        touched.retain(|slot| !self.waiting.contains(slot));
        touched.sort_unstable();
        touched.dedup();
        let now = Instant::now();
        for &slot in &touched {
            self.pump(slot, now)?;
        }
        self.touched = touched;
        Ok(())
    }

    /// One local connection: finishes its connect, moves bytes both ways,
    /// and closes it when done or failed (resetting the stream if failed).
    fn pump(&mut self, slot: usize, now: Instant) -> Result<(), Error> {
        let Some(relay) = self.relays.get_mut(slot).and_then(Option::as_mut) else {
            return Ok(());
        };
        let stream = relay.stream;
        let mut failed = false;
        if relay.connecting {
            match (relay.sock.take_error(), relay.sock.peer_addr()) {
                (Ok(None), Ok(_)) => relay.connecting = false,
                (Ok(None), Err(e)) if e.kind() == io::ErrorKind::NotConnected => return Ok(()),
                _ => {
                    self.stats.forward_failures += 1;
                    failed = true;
                }
            }
        }
        if !failed {
            let before = relay.stats.bytes_to_client;
            failed |= relay.pump_out(&mut self.session, u64::MAX, now).is_err();
            self.stats.bytes_to_local += relay.stats.bytes_to_client - before;
        }
        if !failed && self.wire.splice.is_some() {
            match relay.pump_in_splice(&mut self.session, &mut self.wire) {
                Ok(SpliceIn { moved, waiting }) => {
                    self.stats.bytes_from_local += moved as u64;
                    // Once per relay: a relay touched again while the
                    // connection stays full is not queued twice.
                    if waiting && !relay.wire_waiting {
                        relay.wire_waiting = true;
                        self.wire_wait.push(slot);
                    }
                }
                Err(SpliceFailed::Local) => failed = true,
                Err(SpliceFailed::Wire(e)) => {
                    return Err(self.session_error(format!("writing: {e}")))
                }
            }
        } else if !failed {
            let n = relay.pump_in(&mut self.session, &mut self.wire.out);
            failed |= n.is_err();
            self.stats.bytes_from_local += n.unwrap_or(0) as u64;
        }
        if failed || relay.done() {
            if let Some(mut relay) = self.relays[slot].take() {
                self.by_stream.remove(&stream.0);
                self.waiting.remove(&slot);
                if failed {
                    relay.abort();
                    let _ = self.session.reset(stream, ErrorCode::CONNECTION_RESET);
                }
                let _ = self.poll.registry().deregister(&mut relay.sock);
            }
        }
        Ok(())
    }

    /// Ends the session: words an early end by the I/O server as a refusal
    /// (setting `refused`), closes the session, aborts the local
    /// connections and records the session's counters.
    fn finish(mut self, result: Result<(), Error>, refused: &mut bool) -> Result<(), Error> {
        // Ended before authentication, and not for the key or the version:
        // the I/O server had no unauthenticated slot for this connection
        // (a GOAWAY REFUSED, or a close or reset that raced it). Worth a retry.
        let result = match result {
            Err(Error::Session { reason, .. })
                if !self.session.is_established() && self.server_ended =>
            {
                *refused = true;
                if reason.starts_with("the I/O server refused") {
                    Err(self.session_error(reason))
                } else {
                    Err(self.session_error(format!(
                        "the I/O server ended the session before authentication ({reason}): \
                         its unauthenticated slots may be full"
                    )))
                }
            }
            other => other,
        };
        let _ = self
            .session
            .close(ErrorCode::NO_ERROR, "the node is stopping");
        self.wire.flush_once(&mut self.session);
        for relay in self.relays.iter_mut().flatten() {
            relay.abort();
        }
        self.stats.frames_received = self.session.stats().frames_received;
        self.stats.frames_sent = self.session.stats().frames_sent;
        self.stats.resets_sent = self.session.stats().resets_sent;
        result
    }
}

/// Binds and registers the outbound listeners (tokens from [`FIRST`]),
/// recording their addresses in `stats`.
fn outbound_listeners(
    config: &NodeConfig,
    poll: &Poll,
    stats: &mut NodeRunStats,
) -> Result<Vec<(TcpListener, SocketAddr)>, Error> {
    let mut outbound = Vec::new();
    for (i, o) in config.outbound.iter().enumerate() {
        let mut l = TcpListener::bind(o.listen)
            .map_err(|e| Error::io("binding the outbound listener", o.listen, e))?;
        poll.registry()
            .register(&mut l, Token(FIRST + i), Interest::READABLE)
            .map_err(|e| Error::io("registering the outbound listener", o.listen, e))?;
        stats.outbound_listen.push(
            l.local_addr()
                .map_or_else(|_| o.listen.to_string(), |a| a.to_string()),
        );
        outbound.push((l, o.connect));
    }
    Ok(outbound)
}
