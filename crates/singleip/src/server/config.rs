//! How the I/O server is configured: the addresses, the per-socket limit
//! toward clients and the bounds on what nodes may make it hold.

use crate::access::Access;
use crate::sizing::ShareSizing;
use connlab_proto::xfer::{AuthKey, XferConfig, MAX_VERSION};
use std::net::SocketAddr;
use std::time::Duration;

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
    /// The highest CLXF version picked for a node (1..=2, default 2): 1
    /// keeps DATA payloads at 16 KiB (measurement, interoperability).
    pub max_version: u16,
    /// A node connection that has not authenticated after this long is
    /// closed and counted as refused (so silent peers cannot hold slots).
    pub handshake_timeout: Duration,
    /// An authenticated node silent this long is sent a PING.
    pub ping_interval: Duration,
    /// An authenticated node silent this long (PINGs unanswered) is
    /// considered dead: its streams are reset (a hung node costs only its own
    /// clients, and not forever).
    pub dead_after: Duration,
    /// Node connections that may be unauthenticated at once; when one more
    /// arrives, the oldest of them is closed to make room and counted
    /// (`nodes_over_pending_cap`).
    pub max_pending_nodes: usize,
    /// Of those, how many one source address may hold; when one more comes
    /// from it, its own oldest is closed (`nodes_over_source_cap`), so a
    /// single address cannot take every slot.
    pub max_pending_per_source: usize,
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
    /// Ports one node may LISTEN on at once; more are refused (EMFILE) and
    /// counted (`listens_denied`), so one node cannot take the server's
    /// descriptors.
    pub max_listens_per_node: usize,
    /// Where nodes may CONNECT and which ports they may LISTEN on.
    pub access: Access,
    /// Move large DATA payloads from node connections to client sockets by
    /// splice(2) instead of through user memory (`--splice`; the research
    /// part, see the `splice_out` module). Off: the copy path alone.
    pub splice: bool,
}

impl ServerConfig {
    /// The default DRR quantum: 16 KiB, one full version 1 DATA payload.
    pub const DEFAULT_QUANTUM: u64 = 16 * 1024;
    /// Default [`ServerConfig::max_pending_nodes`].
    pub const DEFAULT_MAX_PENDING_NODES: usize = 16;
    /// Default [`ServerConfig::max_pending_per_source`]: a quarter of the
    /// default slots.
    pub const DEFAULT_MAX_PENDING_PER_SOURCE: usize = 4;
    /// Default [`ServerConfig::node_read_budget`]: 256 KiB.
    pub const DEFAULT_NODE_READ_BUDGET: usize = 256 * 1024;
    /// Default [`ServerConfig::max_node_queue`]: 64 MiB.
    pub const DEFAULT_MAX_NODE_QUEUE: usize = 64 << 20;
    /// Default [`ServerConfig::max_frames_per_window`].
    pub const DEFAULT_MAX_FRAMES_PER_WINDOW: usize = 1024;
    /// Default [`ServerConfig::max_listens_per_node`].
    pub const DEFAULT_MAX_LISTENS_PER_NODE: usize = 64;

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
            max_version: MAX_VERSION,
            handshake_timeout: Duration::from_secs(10),
            ping_interval: Duration::from_secs(5),
            dead_after: Duration::from_secs(20),
            max_pending_nodes: ServerConfig::DEFAULT_MAX_PENDING_NODES,
            max_pending_per_source: ServerConfig::DEFAULT_MAX_PENDING_PER_SOURCE,
            node_read_budget: ServerConfig::DEFAULT_NODE_READ_BUDGET,
            max_node_queue: ServerConfig::DEFAULT_MAX_NODE_QUEUE,
            max_frames_per_window: ServerConfig::DEFAULT_MAX_FRAMES_PER_WINDOW,
            max_listens_per_node: ServerConfig::DEFAULT_MAX_LISTENS_PER_NODE,
            access: Access::default(),
            splice: false,
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
