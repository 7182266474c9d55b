//! The node side of the I/O server: accepting and authenticating node
//! connections, acting on their frames (LISTEN, CONNECT, DATA, ...), writing
//! their output, their timers, and ending them.

use super::splice_out::{NodeSplice, SpliceStep};
use super::{shed_pending, token, Listener, Server, KIND_LISTENER, KIND_NODE};
use crate::os_nonce;
use crate::outbuf::OutBuf;
use crate::stats::{NodeStats, ServerStats};
use connlab_os::reserve::is_descriptor_limit;
use connlab_proto::xfer::{
    ErrorCode, Event, SockOpt, StreamId, XferConfig, XferError, XferSession,
};
use mio::net::{TcpListener, TcpStream};
use mio::Interest;
use std::collections::{BTreeSet, HashMap};
use std::io::{self, Read, Write};
use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

/// Whether `ip` is one of this host's own addresses (what a CONNECT may not
/// reach by default, `access`): loopback, unspecified, or an address a
/// socket can bind here (the kernel's own answer, interfaces and aliases
/// included). With `net.ipv4.ip_nonlocal_bind` set every address binds, so
/// every CONNECT needs an explicit rule: the check fails closed.
fn is_own_address(ip: IpAddr) -> bool {
    let ip = match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
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

pub(super) struct Node {
    pub(super) sock: TcpStream,
    pub(super) session: XferSession,
    /// Frames waiting for the node's socket, DATA built in place.
    pub(super) out: OutBuf,
    pub(super) readable: bool,
    pub(super) writable: bool,
    /// An event reported the read side closed: read on until 0 (see
    /// [`crate::relay`] on short reads).
    pub(super) hup: bool,
    /// Stream id -> client slot.
    pub(super) streams: HashMap<u32, usize>,
    pub(super) ports: BTreeSet<u16>,
    /// Its record, listed in `ServerStats::nodes` when it ends.
    pub(super) stats: NodeStats,
    /// Not authenticated yet: counted against `max_pending_nodes`.
    pub(super) pending: bool,
    /// The address it connected from (`max_pending_per_source`).
    pub(super) source: IpAddr,
    /// Its read stopped at the budget with input left: in `Server::backlog`.
    pub(super) in_backlog: bool,
    pub(super) accepted_at: Instant,
    /// When the node last sent anything.
    pub(super) last_input: Instant,
    pub(super) last_ping: Instant,
    /// `--splice`: the pipe, made at the first payload spliced.
    pub(super) splice: Option<NodeSplice>,
}

impl Server<'_> {
    pub(super) fn accept_nodes(&mut self) {
        loop {
            let (mut sock, addr) = match self.node_listener.accept() {
                Ok(c) => c,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) if is_descriptor_limit(&e) => {
                    if shed_pending(
                        &mut self.reserve,
                        &self.node_listener,
                        (&mut self.limit, &mut self.stats),
                        &mut self.accept_again,
                    ) {
                        self.stats.nodes_refused += 1;
                        continue;
                    }
                    return;
                }
                // Other accept errors (ENOBUFS): the loop tries again soon.
                Err(_) => {
                    self.accept_again = true;
                    return;
                }
            };
            self.stats.node_connections += 1;
            self.limit.served();
            let source = addr.ip();
            let from_source = self.oldest_pending(Some(source));
            if from_source.1 >= self.config.max_pending_per_source {
                // This address already holds its share of unauthenticated
                // slots: its own oldest gives way, so one address cannot
                // fill every slot (issue 29).
                self.stats.nodes_over_source_cap += 1;
                if let Some(i) = from_source.0 {
                    self.evict_pending(
                        i,
                        "unauthenticated slots full: too many from this address",
                        "refused: closed for a newer connection from the same address \
                         (--max-pending-per-source)",
                    );
                }
            }
            if self.pending >= self.config.max_pending_nodes {
                // Every unauthenticated slot is taken: the oldest gives its
                // slot up. Refusing the newcomer instead let sixteen idle
                // connections, renewed every auth timeout, lock every real
                // node out without the key (issue 29); now a flood must open
                // a full set of connections within one handshake's round
                // trip to keep a node out.
                let oldest = self.oldest_pending(None).0;
                self.stats.nodes_over_pending_cap += 1;
                match oldest {
                    Some(i) => self.evict_pending(
                        i,
                        "unauthenticated slots full",
                        "refused: closed for a newer connection while every unauthenticated \
                         slot was taken",
                    ),
                    None => {
                        self.stats.nodes_refused += 1;
                        let _ = socket2::SockRef::from(&sock).set_linger(Some(Duration::ZERO));
                        continue;
                    }
                }
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
                c.max_version = self.config.max_version;
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
                out: OutBuf::new(),
                readable: true,
                writable: true,
                hup: false,
                streams: HashMap::new(),
                ports: BTreeSet::new(),
                stats: node_stats,
                pending: true,
                source,
                in_backlog: false,
                accepted_at: Instant::now(),
                last_input: Instant::now(),
                last_ping: Instant::now(),
                splice: None,
            });
            self.on_node(idx);
        }
    }

    /// The oldest unauthenticated node connection (from `source` only, if
    /// given) and how many there are.
    fn oldest_pending(&self, source: Option<IpAddr>) -> (Option<usize>, usize) {
        let mut count = 0;
        let oldest = self
            .nodes
            .iter()
            .enumerate()
            .filter_map(|(i, n)| {
                n.as_ref()
                    .filter(|n| n.pending && source.is_none_or(|s| s == n.source))
                    .map(|n| (i, n.accepted_at))
            })
            .inspect(|_| count += 1)
            .min_by_key(|&(_, at)| at)
            .map(|(i, _)| i);
        (oldest, count)
    }

    /// Reads what the node sent, acts on it, and writes what is queued for it.
    pub(super) fn on_node(&mut self, n: usize) {
        // Reused between calls: no allocation per read.
        let mut events = std::mem::take(&mut self.node_events);
        self.read_node(n, &mut events);
        events.clear();
        self.node_events = events;
    }

    /// Reads what node `n` sent until `EAGAIN`, acting on every event, then
    /// writes what is queued for it.
    pub(super) fn read_node(&mut self, n: usize, events: &mut Vec<Event>) {
        let mut budget = self.config.node_read_budget.max(1);
        loop {
            // `--splice`: reads end where the next payload begins, so large
            // DATA payloads can be spliced; the copy path alone without it.
            let mut limit = usize::MAX;
            if self.config.splice {
                match self.splice_step(n, events, &mut budget) {
                    SpliceStep::Read(l) => limit = l,
                    SpliceStep::Again => continue,
                    SpliceStep::Stop => break,
                    SpliceStep::Gone => return,
                }
            }
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
            let want = budget.min(self.scratch.len()).min(limit);
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
                    if k < want && !node.hup {
                        // Drained (a short read): no EAGAIN read to prove it.
                        node.readable = false;
                    }
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
        self.flush_later(n);
    }

    /// Reads on from nodes whose last read stopped at the budget.
    pub(super) fn read_backlog(&mut self) {
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
    pub(super) fn connection_error(&mut self, n: usize, error: &XferError) {
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

    pub(super) fn on_event(&mut self, n: usize, event: Event, now: Instant) {
        let Some(node) = self.nodes.get_mut(n).and_then(Option::as_mut) else {
            return;
        };
        let slot_of = |node: &Node, s: StreamId| node.streams.get(&s.0).copied();
        match event {
            Event::Established { node_id, version } => {
                self.stats.nodes_authenticated += 1;
                if node.pending {
                    node.pending = false;
                    self.pending -= 1;
                }
                let st = &mut node.stats;
                st.authenticated = true;
                st.node_id = node_id;
                st.version = version;
            }
            Event::Listen { port } => {
                let errno = if !node.ports.contains(&port)
                    && node.ports.len() >= self.config.max_listens_per_node
                {
                    // One node may not take the server's descriptors.
                    self.stats.listens_denied += 1;
                    libc::EMFILE as u32
                } else if self.config.access.may_listen(port, self.node_addr.port()) {
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
                self.release_port(port);
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
    pub(super) fn ensure_listener(&mut self, port: u16) -> u32 {
        if self
            .listeners
            .iter()
            .flatten()
            .any(|l| l.addr.port() == port)
        {
            return 0;
        }
        let Some(ip) = self
            .listeners
            .first()
            .and_then(Option::as_ref)
            .map(|l| l.addr.ip())
        else {
            return libc::EADDRNOTAVAIL as u32;
        };
        let addr = SocketAddr::new(ip, port);
        let mut sock = match TcpListener::bind(addr) {
            Ok(s) => s,
            Err(e) => return e.raw_os_error().unwrap_or(libc::EACCES) as u32,
        };
        // A slot a released port left, else a new one.
        let idx = (self.configured..self.listeners.len())
            .find(|&i| self.listeners[i].is_none())
            .unwrap_or(self.listeners.len());
        if let Err(e) =
            self.poll
                .registry()
                .register(&mut sock, token(KIND_LISTENER, idx), Interest::READABLE)
        {
            return e.raw_os_error().unwrap_or(libc::EIO) as u32;
        }
        if !self.stats.listen.contains(&addr.to_string()) {
            self.stats.listen.push(addr.to_string());
        }
        let listener = Some(Listener { sock, addr });
        if idx == self.listeners.len() {
            self.listeners.push(listener);
        } else {
            self.listeners[idx] = listener;
        }
        0
    }

    /// Closes the listener of `port` once no node serves it, unless it is a
    /// configured cluster address: a port a node gave up (UNLISTEN, or the
    /// node went away) no longer holds a descriptor (issue 29: 3,000 LISTENs
    /// kept 3,000 descriptors after the node left).
    pub(super) fn release_port(&mut self, port: u16) {
        if self.ports.get(&port).is_some_and(|s| !s.nodes.is_empty()) {
            return;
        }
        self.ports.remove(&port);
        for i in self.configured..self.listeners.len() {
            if self.listeners[i]
                .as_ref()
                .is_some_and(|l| l.addr.port() == port)
            {
                if let Some(mut l) = self.listeners[i].take() {
                    let _ = self.poll.registry().deregister(&mut l.sock);
                }
            }
        }
    }

    /// Closes node connections still unauthenticated after the handshake
    /// timeout, pings silent nodes and gives up on those silent too long.
    pub(super) fn check_timers(&mut self, now: Instant) {
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

    /// Closes unauthenticated node connection `n` to make room for a newer
    /// one: GOAWAY REFUSED with `reason` (best effort, so the node can say
    /// why and retry), then closed with `end` as its record's end.
    fn evict_pending(&mut self, n: usize, reason: &str, end: &str) {
        if let Some(node) = self.nodes.get_mut(n).and_then(Option::as_mut) {
            let _ = node.session.close(ErrorCode::REFUSED, reason);
            node.writable = true;
        }
        self.flush_node(n);
        self.drop_node(n, end.into());
    }

    /// Lists a node connection's record (the first
    /// [`ServerStats::MAX_NODES`]; the rest are counted).
    pub(super) fn record_node(&mut self, stats: NodeStats) {
        if self.stats.nodes.len() < ServerStats::MAX_NODES {
            self.stats.nodes.push(stats);
        } else {
            self.stats.nodes_not_listed += 1;
        }
    }

    /// Writes node `n`'s output at the end of this loop turn
    /// ([`Server::flush_due_nodes`]), with whatever else the turn queues for
    /// it: one `send` per node per turn rather than one per client event.
    pub(super) fn flush_later(&mut self, n: usize) {
        self.flush_due.push(n);
    }

    /// Writes the output of every node [`Server::flush_later`] named.
    pub(super) fn flush_due_nodes(&mut self) {
        if self.flush_due.is_empty() {
            return;
        }
        let mut due = std::mem::take(&mut self.flush_due);
        due.sort_unstable();
        due.dedup();
        for &n in &due {
            self.flush_node(n);
        }
        due.clear();
        self.flush_due = due;
    }

    /// Writes the node's queued output; a write error ends the node.
    pub(super) fn flush_node(&mut self, n: usize) {
        let Some(node) = self.nodes.get_mut(n).and_then(Option::as_mut) else {
            return;
        };
        node.out.take_session_output(&mut node.session);
        while node.writable && !node.out.is_empty() {
            match node.sock.write(node.out.pending()) {
                Ok(k) => {
                    node.out.consume(k);
                    if !node.out.is_empty() {
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
        if node.out.len() > self.config.max_node_queue {
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
    pub(super) fn drop_node(&mut self, n: usize, end: String) {
        let Some(mut node) = self.nodes.get_mut(n).and_then(Option::take) else {
            return;
        };
        let slots: Vec<usize> = node.streams.values().copied().collect();
        for slot in slots {
            // A stream the client already ended after receiving all of it
            // closed normally: the node's hangup was only handled before
            // the client's end.
            let ended = self
                .clients
                .get(slot)
                .and_then(Option::as_ref)
                .is_some_and(|c| c.relay.ended_by_client());
            // The node entry is already out of the table: no RESET is queued.
            if ended {
                self.drop_client(slot, "closed", None, false);
            } else {
                self.drop_client(slot, "node lost", None, true);
            }
        }
        for port in &node.ports {
            if let Some(serving) = self.ports.get_mut(port) {
                serving.nodes.retain(|&x| x != n);
            }
        }
        for &port in &node.ports {
            self.release_port(port);
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
}
