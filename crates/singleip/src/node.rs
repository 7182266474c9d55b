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
use connlab_proto::xfer::{AuthKey, ErrorCode, Event, XferConfig, XferSession, MAX_VERSION};
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

fn node_loop(
    config: &NodeConfig,
    stop_fd: RawFd,
    stop: impl Fn() -> bool,
    ready: impl FnOnce(),
    stats: &mut NodeRunStats,
    refused: &mut bool,
) -> Result<(), Error> {
    let addr = config.io_server;
    let session_error = |reason: String| Error::Session {
        addr: addr.to_string(),
        reason,
    };
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
    // Frames toward the I/O server: DATA built in place, or spliced.
    let mut wire = Wire {
        sock: TcpStream::from_std(std_sock),
        out: OutBuf::new(),
        splice,
        writable: true,
    };
    let nonce = os_nonce().map_err(|e| Error::io("reading a nonce (getrandom) for", addr, e))?;
    let mut xc = XferConfig::new(config.key.clone(), nonce);
    xc.node_id = config.node_id;
    xc.initial_window = config.initial_window;
    xc.max_streams = config.max_streams;
    xc.max_version = config.max_version;
    let mut session = XferSession::node(xc).map_err(|e| Error::Config(e.to_string()))?;
    let mut poll = Poll::new().map_err(|e| Error::io("creating", "an epoll instance", e))?;
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
    // Local connections' tokens follow the outbound listeners'.
    let first = FIRST + outbound.len();
    // Slots whose stream waits for CONNECTED.
    let mut waiting: HashSet<usize> = HashSet::new();
    let mut accept_ready: Vec<usize> = Vec::new();
    // Local connections something happened to in a loop turn (reused).
    let mut touched: Vec<usize> = Vec::new();
    let mut ready = Some(ready);
    let mut granted = 0usize;
    let mut relays: Vec<Option<Relay>> = Vec::new();
    let mut by_stream: HashMap<u32, usize> = HashMap::new();
    // Relays that stopped for a full node connection (splice).
    let mut wire_wait: Vec<usize> = Vec::new();
    let mut readable = true;
    // An event reported the connection's read side closed: read on until 0.
    let mut hup = false;
    let mut scratch = vec![0u8; 64 * 1024];
    let mut evs = Vec::new();
    let mut events = Events::with_capacity(1024);
    // Wake often enough for the liveness timer.
    let tick = Duration::from_secs(1)
        .min(config.ping_interval / 2)
        .max(Duration::from_millis(1));
    let (mut last_input, mut last_ping) = (Instant::now(), Instant::now());
    // The I/O server ended the connection (an end, a reset, or GOAWAY
    // REFUSED), as opposed to this node giving up on what it was sent.
    let mut server_ended = false;
    let result: Result<(), Error> = 'run: loop {
        // Output first: the HELLO is queued from the start.
        wire.out.take_session_output(&mut session);
        if let Err(e) = wire.flush() {
            server_ended = true;
            break 'run Err(session_error(format!("writing: {e}")));
        }
        if stop() {
            break Ok(());
        }
        let now = Instant::now();
        let silent = now.saturating_duration_since(last_input);
        if silent > config.dead_after {
            break Err(session_error(format!(
                "no input from the I/O server for {:?} (PINGs unanswered)",
                config.dead_after
            )));
        }
        if session.is_established()
            && silent > config.ping_interval
            && now.saturating_duration_since(last_ping) > config.ping_interval
        {
            last_ping = now;
            let _ = session.ping(0);
            continue;
        }
        // Relays waiting for an idle connection that is idle already go on
        // at once.
        let timeout = if !wire_wait.is_empty() && wire.idle() {
            Duration::ZERO
        } else {
            tick
        };
        if let Err(e) = poll.poll(&mut events, Some(timeout)) {
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            break Err(Error::io(
                "waiting for events (epoll_wait) on",
                "the node's sockets",
                e,
            ));
        }
        touched.clear();
        for event in &events {
            let gone = event.is_error() || event.is_read_closed();
            let r = event.is_readable() || gone;
            let w = event.is_writable() || gone || event.is_write_closed();
            match event.token() {
                STOP => {}
                SERVER => {
                    readable |= r;
                    wire.writable |= w;
                    hup |= gone;
                }
                Token(t) if t < first => accept_ready.push(t - FIRST),
                Token(t) => {
                    if let Some(relay) = relays.get_mut(t - first).and_then(Option::as_mut) {
                        relay.readable |= r;
                        relay.writable |= w;
                        relay.hup |= gone;
                        touched.push(t - first);
                    }
                }
            }
        }
        // The interconnect: read until EAGAIN, act on every event.
        while readable {
            let got = match wire.sock.read(&mut scratch) {
                Ok(0) => {
                    let why = match session.finish_input() {
                        Err(e) => format!("the I/O server closed the connection: {e}"),
                        Ok(()) => "the I/O server closed the connection".to_string(),
                    };
                    server_ended = true;
                    break 'run Err(session_error(why));
                }
                Ok(k) => {
                    last_input = Instant::now();
                    if k < scratch.len() && !hup {
                        // Drained (a short read): no EAGAIN read to prove it.
                        readable = false;
                    }
                    k
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    readable = false;
                    break;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    server_ended = true;
                    break 'run Err(session_error(format!("reading: {e}")));
                }
            };
            let fed = session.feed(&scratch[..got], &mut |e| evs.push(e));
            let now = Instant::now();
            for event in evs.drain(..) {
                match event {
                    Event::Established { version, .. } => {
                        stats.version = version;
                        for &port in &config.ports {
                            if let Err(e) = session.listen(port) {
                                break 'run Err(session_error(format!("LISTEN {port}: {e}")));
                            }
                        }
                        if config.ports.is_empty() {
                            if let Some(f) = ready.take() {
                                f();
                            }
                        }
                    }
                    Event::ListenResult { port, errno } => {
                        if errno != 0 {
                            break 'run Err(Error::PortRefused {
                                addr: addr.to_string(),
                                port,
                                source: io::Error::from_raw_os_error(errno as i32),
                            });
                        }
                        granted += 1;
                        if granted >= config.ports.len() {
                            if let Some(f) = ready.take() {
                                f();
                            }
                        }
                    }
                    Event::Accepted { stream, .. } => {
                        stats.streams += 1;
                        let slot = relays.iter().position(Option::is_none).unwrap_or_else(|| {
                            relays.push(None);
                            relays.len() - 1
                        });
                        let connected = TcpStream::connect(config.forward).and_then(|mut s| {
                            poll.registry()
                                .register(
                                    &mut s,
                                    Token(first + slot),
                                    Interest::READABLE | Interest::WRITABLE,
                                )
                                .map(|()| s)
                        });
                        match connected {
                            Ok(s) => {
                                let _ = s.set_nodelay(true);
                                relays[slot] = Some(Relay::new(s, stream, true));
                                by_stream.insert(stream.0, slot);
                            }
                            Err(_) => {
                                stats.forward_failures += 1;
                                let _ = session.reset(stream, ErrorCode::CONNECTION_RESET);
                            }
                        }
                    }
                    Event::Data { stream, bytes } => {
                        if let Some(&slot) = by_stream.get(&stream.0) {
                            if let Some(relay) = relays[slot].as_mut() {
                                relay.push(
                                    bytes,
                                    now,
                                    crate::ServerConfig::DEFAULT_MAX_FRAMES_PER_WINDOW,
                                );
                                touched.push(slot);
                            }
                        }
                    }
                    Event::Fin { stream } => {
                        if let Some(&slot) = by_stream.get(&stream.0) {
                            if let Some(relay) = relays[slot].as_mut() {
                                relay.fin_in = true;
                                touched.push(slot);
                            }
                        }
                    }
                    Event::Credit { stream, .. } => {
                        if let Some(&slot) = by_stream.get(&stream.0) {
                            touched.push(slot);
                        }
                    }
                    Event::Connected { stream, .. } => {
                        if let Some(&slot) = by_stream.get(&stream.0) {
                            waiting.remove(&slot);
                            touched.push(slot);
                        }
                    }
                    Event::ConnectFailed { stream, .. } => {
                        if let Some(slot) = by_stream.remove(&stream.0) {
                            waiting.remove(&slot);
                            if let Some(mut relay) = relays[slot].take() {
                                stats.outbound_failures += 1;
                                relay.abort();
                                let _ = poll.registry().deregister(&mut relay.sock);
                            }
                        }
                    }
                    Event::Reset { stream, .. } | Event::StreamError { stream, .. } => {
                        if let Some(slot) = by_stream.remove(&stream.0) {
                            waiting.remove(&slot);
                            if let Some(mut relay) = relays[slot].take() {
                                stats.resets_received += 1;
                                relay.abort();
                                let _ = poll.registry().deregister(&mut relay.sock);
                            }
                        }
                    }
                    Event::GoAway { code, reason } => {
                        if code == ErrorCode::REFUSED && !session.is_established() {
                            server_ended = true;
                            break 'run Err(session_error(format!(
                                "the I/O server refused the session before authentication: \
                                 {reason} (GOAWAY {code})"
                            )));
                        }
                        break 'run Err(session_error(format!("GOAWAY {code}: {reason}")));
                    }
                    _ => {}
                }
            }
            if let Err(e) = fed {
                // Send the GOAWAY the session queued, then give up.
                wire.flush_once(&mut session);
                break 'run Err(session_error(e.to_string()));
            }
        }
        // Local programs connecting outward: each becomes a CONNECT (only
        // once the session is up; until then they wait in the backlog).
        if session.is_established() {
            accept_ready.sort_unstable();
            accept_ready.dedup();
            for i in accept_ready.drain(..) {
                let (listener, dest) = &outbound[i];
                loop {
                    let mut local = match listener.accept() {
                        Ok((s, _)) => s,
                        Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                        // WouldBlock, or EMFILE and friends: next readiness.
                        Err(_) => break,
                    };
                    let slot = relays.iter().position(Option::is_none).unwrap_or_else(|| {
                        relays.push(None);
                        relays.len() - 1
                    });
                    let opened = session.connect(*dest).ok().filter(|_| {
                        poll.registry()
                            .register(
                                &mut local,
                                Token(first + slot),
                                Interest::READABLE | Interest::WRITABLE,
                            )
                            .is_ok()
                    });
                    match opened {
                        Some(stream) => {
                            let _ = local.set_nodelay(true);
                            stats.outbound_streams += 1;
                            relays[slot] = Some(Relay::new(local, stream, false));
                            by_stream.insert(stream.0, slot);
                            waiting.insert(slot);
                        }
                        None => {
                            // Too many streams, or the session is closing.
                            stats.outbound_failures += 1;
                            let _ = socket2::SockRef::from(&local).set_linger(Some(Duration::ZERO));
                        }
                    }
                }
            }
        }
        // Relays that waited for the node connection go on once it is idle.
        if !wire_wait.is_empty() {
            if let Err(e) = wire.flush() {
                server_ended = true;
                break 'run Err(session_error(format!("writing: {e}")));
            }
            if wire.idle() {
                for &slot in &wire_wait {
                    if let Some(relay) = relays.get_mut(slot).and_then(Option::as_mut) {
                        relay.wire_waiting = false;
                    }
                }
                touched.append(&mut wire_wait);
            }
        }
        // The local connections that something happened to.
        touched.retain(|slot| !waiting.contains(slot));
        touched.sort_unstable();
        touched.dedup();
        let now = Instant::now();
        for &slot in &touched {
            let Some(relay) = relays.get_mut(slot).and_then(Option::as_mut) else {
                continue;
            };
            let stream = relay.stream;
            let mut failed = false;
            if relay.connecting {
                match (relay.sock.take_error(), relay.sock.peer_addr()) {
                    (Ok(None), Ok(_)) => relay.connecting = false,
                    (Ok(None), Err(e)) if e.kind() == io::ErrorKind::NotConnected => continue,
                    _ => {
                        stats.forward_failures += 1;
                        failed = true;
                    }
                }
            }
            if !failed {
                let before = relay.stats.bytes_to_client;
                failed |= relay.pump_out(&mut session, u64::MAX, now).is_err();
                stats.bytes_to_local += relay.stats.bytes_to_client - before;
            }
            if !failed && wire.splice.is_some() {
                match relay.pump_in_splice(&mut session, &mut wire) {
                    Ok(SpliceIn { moved, waiting }) => {
                        stats.bytes_from_local += moved as u64;
                        // Once per relay: a relay touched again while the
                        // connection stays full is not queued twice.
                        if waiting && !relay.wire_waiting {
                            relay.wire_waiting = true;
                            wire_wait.push(slot);
                        }
                    }
                    Err(SpliceFailed::Local) => failed = true,
                    Err(SpliceFailed::Wire(e)) => {
                        break 'run Err(session_error(format!("writing: {e}")))
                    }
                }
            } else if !failed {
                let n = relay.pump_in(&mut session, &mut wire.out);
                failed |= n.is_err();
                stats.bytes_from_local += n.unwrap_or(0) as u64;
            }
            if failed || relay.done() {
                if let Some(mut relay) = relays[slot].take() {
                    by_stream.remove(&stream.0);
                    waiting.remove(&slot);
                    if failed {
                        relay.abort();
                        let _ = session.reset(stream, ErrorCode::CONNECTION_RESET);
                    }
                    let _ = poll.registry().deregister(&mut relay.sock);
                }
            }
        }
    };
    // Ended before authentication, and not for the key or the version:
    // the I/O server had no unauthenticated slot for this connection
    // (a GOAWAY REFUSED, or a close or reset that raced it). Worth a retry.
    let result = match result {
        Err(Error::Session { reason, .. }) if !session.is_established() && server_ended => {
            *refused = true;
            if reason.starts_with("the I/O server refused") {
                Err(session_error(reason))
            } else {
                Err(session_error(format!(
                    "the I/O server ended the session before authentication ({reason}): \
                     its unauthenticated slots may be full"
                )))
            }
        }
        other => other,
    };
    let _ = session.close(ErrorCode::NO_ERROR, "the node is stopping");
    wire.flush_once(&mut session);
    for relay in relays.iter_mut().flatten() {
        relay.abort();
    }
    stats.frames_received = session.stats().frames_received;
    stats.frames_sent = session.stats().frames_sent;
    stats.resets_sent = session.stats().resets_sent;
    result
}
