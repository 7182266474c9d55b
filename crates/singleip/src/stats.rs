//! Counters of the I/O server and the application node, serialised as the
//! `--stats` JSON documents (`connlab.singleip.io-server.stats/1` and
//! `connlab.singleip.app-node.stats/1`).

use connlab_proto::xfer::XferStats;
use serde::Serialize;

/// One node connection as the I/O server saw it.
#[derive(Clone, Debug, Default, Serialize)]
pub struct NodeStats {
    /// The node's number from its HELLO (0 until known).
    pub node_id: u32,
    /// The node's address on the interconnect.
    pub addr: String,
    /// Whether it authenticated.
    pub authenticated: bool,
    /// The CLXF version negotiated with it (0 until chosen).
    pub version: u16,
    /// Frames received from it.
    pub frames_received: u64,
    /// Frames sent to it.
    pub frames_sent: u64,
    /// Stream bytes received from it (toward clients).
    pub bytes_from_node: u64,
    /// Stream bytes sent to it (from clients).
    pub bytes_to_node: u64,
    /// Streams opened on it (ACCEPT and CONNECT).
    pub streams: u64,
    /// RESETs it sent.
    pub resets_received: u64,
    /// RESETs sent to it (client resets, stream errors).
    pub resets_sent: u64,
    /// Streams reset because of a bad frame of its.
    pub stream_errors: u64,
    /// Handshakes it failed (wrong key).
    pub auth_failures: u64,
    /// Ports it served.
    pub ports: Vec<u16>,
    /// How the connection ended (`open` while it lasts).
    pub end: String,
}

impl NodeStats {
    pub(crate) fn absorb(&mut self, s: &XferStats) {
        self.frames_received = s.frames_received;
        self.frames_sent = s.frames_sent;
        self.bytes_from_node = s.data_bytes_received;
        self.bytes_to_node = s.data_bytes_sent;
        self.streams = s.streams_opened;
        self.resets_received = s.resets_received;
        self.stream_errors = s.stream_errors;
        self.auth_failures = self.auth_failures.max(s.auth_failures);
    }
}

/// One client connection (one stream) as the I/O server relayed it.
#[derive(Clone, Debug, Default, Serialize)]
pub struct ConnStats {
    /// The stream id on its node connection.
    pub stream: u32,
    /// The node's id.
    pub node_id: u32,
    /// The client (accepted) or the destination (CONNECT).
    pub peer: String,
    /// Whether the node opened it with CONNECT (active open).
    pub connect: bool,
    /// Bytes written to the client socket.
    pub bytes_to_client: u64,
    /// Bytes read from the client socket.
    pub bytes_from_client: u64,
    /// Most bytes queued in user space toward the client at once.
    pub queued_max_bytes: u64,
    /// DATA payloads that went through the queue toward the client.
    pub queued_chunks: u64,
    /// Sum over those payloads of the time from arrival to fully written, us.
    pub queue_wait_us_total: u64,
    /// Longest such time, us.
    pub queue_wait_us_max: u64,
    /// Largest send buffer set by rate-share sizing, bytes as the kernel
    /// counts them (0 without it).
    pub sndbuf_max_bytes: u64,
    /// The send buffer it had last, bytes.
    pub sndbuf_last_bytes: u64,
    /// Times its send buffer was re-sized.
    pub sndbuf_changes: u64,
    /// Its lowest RTT as `TCP_INFO` gave it at the last re-sizing, us.
    pub min_rtt_us: u32,
    /// The base RTT its buffer was sized with then, us (`sizing::base_rtts`).
    pub base_rtt_us: u32,
    /// How it ended: `closed`, `reset by client`, `reset by node`, `node lost`,
    /// `connect failed`, `open` (still open at exit).
    pub end: String,
}

/// What the I/O server did (`--stats`).
#[derive(Clone, Debug, Default, Serialize)]
pub struct ServerStats {
    /// Schema name and version.
    pub schema: &'static str,
    /// Cluster addresses listened on.
    pub listen: Vec<String>,
    /// Where nodes connect.
    pub nodes_addr: String,
    /// `TCP_NOTSENT_LOWAT` per client socket, bytes (`None`: unlimited).
    pub send_limit_bytes: Option<u64>,
    /// `SO_SNDBUF` asked per client socket with a fixed buffer, bytes.
    pub sndbuf_bytes: Option<u64>,
    /// How client send buffers are sized: `auto` (kernel), `fixed`, or
    /// `share` (re-sized to a rate share, see `sizing`).
    pub sndbuf_mode: &'static str,
    /// Rate-share sizing rounds run.
    pub sizing_rounds: u64,
    /// DRR quantum, bytes (`None`: unlimited writes).
    pub quantum_bytes: Option<u64>,
    /// Client connections accepted on the cluster address.
    pub clients_accepted: u64,
    /// Client connections reset at once: no node served their port, or
    /// every node serving it was at its `max_streams`.
    pub clients_no_node: u64,
    /// Connections (clients or nodes) accepted and reset at once because
    /// the I/O server was out of descriptors.
    pub shed: u64,
    /// Stretches of time at the descriptor limit (each began with a shed
    /// connection after an accepted one).
    pub fd_limit_episodes: u64,
    /// CONNECT requests carried out.
    pub connects: u64,
    /// CONNECT requests that failed.
    pub connect_failures: u64,
    /// Node connections accepted (authenticated or not).
    pub node_connections: u64,
    /// Node connections that authenticated.
    pub nodes_authenticated: u64,
    /// Node connections refused before authenticating (wrong key, a frame
    /// before the handshake, garbage, or closed mid-handshake).
    pub nodes_refused: u64,
    /// Of those, handshakes with a wrong proof.
    pub auth_failures: u64,
    /// Node connections ended by a bad frame (GOAWAY sent).
    pub bad_frames: u64,
    /// Turns the DRR writer gave to client sockets.
    pub drr_turns: u64,
    /// Times a node connection arrived while `max_pending_nodes`
    /// unauthenticated ones were open: the oldest of those was closed to
    /// make room (also in `nodes_refused`).
    pub nodes_over_pending_cap: u64,
    /// Node connections that found their source address holding
    /// `max_pending_per_source` unauthenticated connections: its oldest
    /// was closed (also in `nodes_refused`).
    pub nodes_over_source_cap: u64,
    /// Node connections closed for not authenticating within the auth
    /// timeout (also in `nodes_refused`).
    pub nodes_auth_timeout: u64,
    /// Times a node's read stopped at the per-turn read budget.
    pub node_read_budget_hits: u64,
    /// Nodes dropped because more than `max_node_queue` bytes were queued
    /// toward them unread.
    pub nodes_dropped_queue: u64,
    /// CONNECTs refused by the allow-list (`CONNECT_FAILED` `EACCES`; also in
    /// `connect_failures`).
    pub connects_denied: u64,
    /// LISTENs refused by the allow-list (`LISTEN_RESULT` `EACCES`).
    pub listens_denied: u64,
    /// DATA payloads merged into the one before because their stream's
    /// queue already held `max_frames_per_window` payloads.
    pub frames_merged: u64,
    /// Whether DATA payloads from nodes went to client sockets by splice(2)
    /// (`--splice`) where it pays rather than through user-space buffers.
    pub splice: bool,
    /// DATA payloads taken out of the node connection for splicing.
    pub spliced_payloads: u64,
    /// Payload bytes spliced straight from a node connection to a client
    /// socket.
    pub spliced_bytes: u64,
    /// Payload bytes of spliced payloads the client socket did not take at
    /// once, read from the pipe into the stream's user-space queue.
    pub splice_spilled_bytes: u64,
    /// Per node connection, in closing order (unauthenticated ones
    /// included; first [`ServerStats::MAX_NODES`]).
    pub nodes: Vec<NodeStats>,
    /// Node connections beyond [`ServerStats::MAX_NODES`], counted only.
    pub nodes_not_listed: u64,
    /// Per client connection, in closing order (first [`ServerStats::MAX_CONNS`]).
    pub connections: Vec<ConnStats>,
    /// Connections beyond [`ServerStats::MAX_CONNS`], counted only.
    pub connections_not_listed: u64,
}

impl ServerStats {
    /// Connections listed individually; the rest are counted.
    pub const MAX_CONNS: usize = 10_000;
    /// Node connections listed individually; the rest are counted.
    pub const MAX_NODES: usize = 1_000;
}

/// What an application node did (`--stats`).
#[derive(Clone, Debug, Default, Serialize)]
pub struct NodeRunStats {
    /// Schema name and version.
    pub schema: &'static str,
    /// The I/O server's address.
    pub io_server: String,
    /// The local server streams are forwarded to.
    pub forward: String,
    /// Ports served.
    pub ports: Vec<u16>,
    /// Whether the local servers' bytes went to the I/O server by
    /// splice(2) (`--splice`) rather than through user-space buffers.
    pub splice: bool,
    /// The CLXF version negotiated with the I/O server (0 if the handshake
    /// did not complete).
    pub version: u16,
    /// Streams accepted.
    pub streams: u64,
    /// Streams whose local connection failed (reset toward the I/O server).
    pub forward_failures: u64,
    /// Bytes from the I/O server written to the local server.
    pub bytes_to_local: u64,
    /// Bytes from the local server sent to the I/O server.
    pub bytes_from_local: u64,
    /// Streams reset by the I/O server.
    pub resets_received: u64,
    /// Streams this node reset (local server reset or failed, and stream
    /// errors in what the I/O server sent).
    pub resets_sent: u64,
    /// Frames received.
    pub frames_received: u64,
    /// Frames sent.
    pub frames_sent: u64,
    /// Outbound listeners (`--connect`), as bound.
    pub outbound_listen: Vec<String>,
    /// Local connections opened outward through the I/O server (CONNECT).
    pub outbound_streams: u64,
    /// Of those, or refused before, the ones that failed (CONNECT_FAILED,
    /// no stream free): the local connection was reset.
    pub outbound_failures: u64,
    /// Times the node connected again because the I/O server ended the
    /// session before authentication (its unauthenticated slots full).
    pub refused_retries: u64,
    /// How the session ended.
    pub end: String,
}
