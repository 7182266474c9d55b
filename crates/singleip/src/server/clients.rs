//! The client side of the I/O server: accepting client connections onto
//! node streams, completing CONNECTs, moving bytes in both directions under
//! the stream credit, the deficit-round-robin writer, and ending clients.

use super::buffers::ConnSizing;
use super::{shed_pending, token, Server, KIND_CLIENT};
use crate::drr::After;
use crate::relay::Relay;
use crate::stats::{ConnStats, ServerStats};
use connlab_os::reserve::is_descriptor_limit;
use connlab_proto::xfer::{ErrorCode, StreamId};
use mio::net::TcpStream;
use mio::Interest;
use std::io;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

/// A client socket relayed on one node stream.
pub(super) struct Client {
    pub(super) relay: Relay,
    pub(super) node: usize,
    /// Rate-share sizing state (with `SendBuffer::Share`).
    pub(super) sizing: Option<ConnSizing>,
}

impl Server<'_> {
    pub(super) fn accept_clients(&mut self, l: usize) {
        loop {
            let Some(listener) = self.listeners.get(l).and_then(Option::as_ref) else {
                return;
            };
            let port = listener.addr.port();
            let (sock, peer) = match listener.sock.accept() {
                Ok(c) => c,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) if is_descriptor_limit(&e) => {
                    if shed_pending(
                        &mut self.reserve,
                        &listener.sock,
                        (&mut self.limit, &mut self.stats),
                        &mut self.accept_again,
                    ) {
                        continue;
                    }
                    return;
                }
                Err(_) => {
                    self.accept_again = true;
                    return;
                }
            };
            self.stats.clients_accepted += 1;
            self.limit.served();
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
            self.flush_later(n);
        }
    }

    /// Registers a client socket relayed on `stream` of node `n`.
    pub(super) fn add_client(
        &mut self,
        mut sock: TcpStream,
        n: usize,
        stream: StreamId,
        peer: SocketAddr,
        connecting: bool,
    ) -> Option<usize> {
        let _ = sock.set_nodelay(true);
        let sizing = self.size_new_socket(&sock);
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

    pub(super) fn on_client(&mut self, slot: usize) {
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
        self.flush_later(n);
    }

    /// Client socket -> node, as far as the node's credit allows.
    pub(super) fn pump_client_in(&mut self, slot: usize) {
        let Some(c) = self.clients[slot].as_mut() else {
            return;
        };
        let Some(node) = self.nodes.get_mut(c.node).and_then(Option::as_mut) else {
            return;
        };
        match c.relay.pump_in(&mut node.session, &mut node.out) {
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
    pub(super) fn serve_clients(&mut self, now: Instant) {
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
        self.flush_due.append(&mut touched);
        self.touched_nodes = touched;
    }

    /// Removes a client: optionally resets its stream (`reset`) and its
    /// socket (`abort`), and records its statistics.
    pub(super) fn drop_client(
        &mut self,
        slot: usize,
        end: &str,
        reset: Option<ErrorCode>,
        abort: bool,
    ) {
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

    pub(super) fn record(&mut self, stats: ConnStats) {
        if self.stats.connections.len() < ServerStats::MAX_CONNS {
            self.stats.connections.push(stats);
        } else {
            self.stats.connections_not_listed += 1;
        }
    }
}
