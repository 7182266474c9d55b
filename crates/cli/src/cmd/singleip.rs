//! `connlab singleip`: the single-IP cluster front end. `io-server` holds the
//! cluster address and relays every client connection to an application
//! node; `app-node` connects to it and forwards each stream to a local
//! unmodified server.

use crate::Exit;
use anyhow::{anyhow, Context};
use clap::{Args, Subcommand};
use connlab_measure::units::{parse_duration, parse_size};
use connlab_os::Shutdown;
use connlab_proto::xfer::{MAX_VERSION, MIN_VERSION};
use connlab_singleip::{
    run_node_with_stats, run_server, ConnectRule, Error as SingleIpError, NodeOptions, Outbound,
    PortRange, SendBufferChoice, ServerConfig, ServerOptions,
};
use serde::Serialize;
use std::io::Write as _;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

/// Flags of `connlab singleip`.
#[derive(Args, Debug)]
pub(crate) struct SingleIpArgs {
    #[command(subcommand)]
    command: SingleIpCommand,
}

#[derive(Subcommand, Debug)]
enum SingleIpCommand {
    /// Hold the cluster address and relay its connections to application nodes.
    #[command(after_help = "\
Clients connect to --listen (the cluster address, VIP:PORT; repeat for more ports);
application nodes connect to --nodes and authenticate with the key in --key (a file of
at least 16 random bytes shared with every node: head -c 32 /dev/urandom > key). Each
client connection goes, as a stream of the CLXF transfer protocol
(docs/transfer-protocol.md), to the next node serving its port (round robin). A node
may also ask for a port not in --listen: it is bound on the first --listen address.
A node that dies or sends a bad frame resets only its own clients.

Toward clients each socket may hold at most --send-limit unsent bytes
(TCP_NOTSENT_LOWAT) in a send buffer sized by --send-buffer, and ready sockets are
written in deficit-round-robin order, --quantum bytes per turn. Measured
(BENCHMARKS.md): the bounded send buffer, which also bounds each connection's bytes in
flight, is what keeps a bottleneck queue short and streams fair at 2 ms RTT. The
default, --send-buffer share, gives every active connection the same allowance, twice
the fastest one's delivery rate, so a lone connection is not capped and connections
sharing a bottleneck are held to equal rates. A fixed buffer caps a connection near
buffer / RTT; --send-buffer auto lifts the bound and loses the effect. --send-limit off
is the paper's unlimited case: kernel default buffers, each socket written as far as
it takes.

Limits toward nodes (each hit is counted in --stats): at most --max-pending-nodes
node connections may be unauthenticated at once, and at most --max-pending-per-source
of them from one address (one more closes the oldest, so idle connections cannot
lock real nodes out), and one that has not authenticated within --auth-timeout is
closed; each node is read at most
--node-read-budget bytes per loop turn; a node that leaves more than --max-node-queue
bytes of replies unread is dropped; a stream's queue toward its client holds at most
--max-frames-per-window DATA payloads (credit counts payload bytes only, so more are
merged into the last). A node may CONNECT only where --allow-connect allows and LISTEN
only on ports --allow-listen allows; without them, anywhere except the I/O server's own
addresses (loopback, unspecified, any address bound on this host) and any port except
the --nodes port. Own addresses need a rule with a prefix longer than /0 naming them
(--allow-connect 127.0.0.1:6379). A denied CONNECT gets CONNECT_FAILED EACCES, a denied
LISTEN a LISTEN_RESULT EACCES. The key file may hold at most 64 KiB.

With --splice, DATA payloads of 4 KiB and more go from the node connection to their
client socket without entering user space: the node connection is read up to each
frame's end so every DATA header is seen before its payload, and a payload whose
client has nothing queued is spliced node socket -> pipe -> client socket. What the
client socket does not take at once goes to that stream's queue, so a slow client
never holds up the node connection; small frames and streams with queued bytes are
copied as without it. Measured (BENCHMARKS.md, 2026-11-27): 1.06x the copying relay's
requests per CPU s at 10 KiB responses, 2.0x at 100 KiB. Off by default because
spliced bytes go out as they arrive, outside the deficit-round-robin turns. --stats
records it (splice, spliced_payloads, spliced_bytes, splice_spilled_bytes).

Prints 'singleip: io-server ready ...' on stdout once listening. SIGINT/SIGTERM stop
it; it then writes --stats (JSON: per node frames, bytes, streams, resets, auth
failures; per connection bytes each way and queueing) and a summary on stderr.

Example:
  head -c 32 /dev/urandom > cluster.key
  connlab singleip io-server --listen 198.18.0.1:80 --nodes 10.0.0.1:7000 \\
      --key cluster.key --send-limit 16KiB --stats io.json")]
    IoServer(IoServerArgs),
    /// Connect to an I/O server and forward its streams to a local server.
    #[command(after_help = "\
Connects to the I/O server at --io-server, authenticates with --key, asks to serve each
--port of the cluster address (default: the port of --forward), and forwards every
client connection it receives to --forward, a local unmodified server (nginx,
connlab serve), with half-close and reset passed on both ways.

With --connect LOCAL=DEST the node also listens on LOCAL: each connection a local
program makes there is opened by the I/O server to DEST (CONNECT), so it leaves the
cluster from the cluster address; a refused DEST resets the local connection.

With --splice, bytes from the local server go to the I/O server without entering user
space: each stream's socket is spliced into the node connection's pipe, the DATA
header is sent, then the pipe is spliced to the node connection (zero copies in the
node instead of two; more system calls per byte). Bytes toward the local server are
copied as without it. Measured slower than copying (BENCHMARKS.md, 2026-11-27: 0.94x
the copying relay's requests per CPU s at 10 KiB, 0.79x at 100 KiB, even with CLXF
version 2's large frames), so off by default; --stats records it (splice).

Both ends speak CLXF version 2 by default, whose DATA frames carry up to 256 KiB (a
read of up to 64 KiB goes in one frame, spliced or copied); --max-version 1 keeps them
at 16 KiB, as version 1 peers expect. --stats and the exit summary show the version
negotiated (version).

Prints 'singleip: app-node ready ...' on stdout once every port is granted.
SIGINT/SIGTERM stop it and write --stats. A refused key or port, or a lost I/O
server, ends it with exit 1.

Example:
  connlab serve --engine epoll --listen 127.0.0.1:8080 &
  connlab singleip app-node --io-server 10.0.0.1:7000 --key cluster.key \\
      --forward 127.0.0.1:8080 --port 80")]
    AppNode(AppNodeArgs),
    /// The sweep's in-namespace helpers (echo/bulk server, RTT and transfer clients).
    #[command(hide = true)]
    Probe(crate::cmd::singleip_probe::ProbeArgs),
}

/// Flags of `connlab singleip io-server`.
#[derive(Args, Debug)]
struct IoServerArgs {
    /// A cluster address clients connect to (VIP:PORT); repeat for more.
    #[arg(long, required = true, value_name = "VIP:PORT")]
    listen: Vec<SocketAddr>,
    /// Where application nodes connect (ADDR:PORT).
    #[arg(long, value_name = "ADDR")]
    nodes: SocketAddr,
    /// File holding the shared key (at least 16 bytes).
    #[arg(long, value_name = "FILE")]
    key: PathBuf,
    /// Unsent bytes each client socket may hold (TCP_NOTSENT_LOWAT), or 'off'.
    #[arg(long, default_value = "16KiB", value_name = "BYTES|off")]
    send_limit: String,
    /// SO_SNDBUF of each client socket with a send limit: 'share' (re-sized every 10 ms
    /// to twice the fastest connection's delivery rate times the socket's base RTT,
    /// plus --send-limit; 'share:H' sets the factor), BYTES (fixed), '4x' (four times
    /// --send-limit, fixed) or 'auto' (kernel autotuning). The buffer also holds
    /// unacknowledged data, so a fixed one caps a connection's rate near BYTES x 2 / RTT
    /// (BENCHMARKS.md).
    #[arg(long, default_value = "share", value_name = "share[:H]|BYTES|4x|auto")]
    send_buffer: String,
    /// Bytes a client socket may be written per DRR turn (with a send limit).
    #[arg(long, default_value = "16KiB", value_parser = parse_size, value_name = "BYTES")]
    quantum: u64,
    /// Credit granted to nodes per stream: bytes queued per client in user space.
    #[arg(long, default_value = "64KiB", value_parser = parse_size, value_name = "BYTES")]
    window: u64,
    /// Node connections that may be unauthenticated at once; one more closes the oldest.
    #[arg(long, default_value_t = ServerConfig::DEFAULT_MAX_PENDING_NODES as u32, value_name = "N",
          value_parser = clap::value_parser!(u32).range(1..=65536))]
    max_pending_nodes: u32,
    /// Unauthenticated node connections one source address may hold; one more closes its oldest.
    #[arg(long, default_value_t = ServerConfig::DEFAULT_MAX_PENDING_PER_SOURCE as u32, value_name = "N",
          value_parser = clap::value_parser!(u32).range(1..=65536))]
    max_pending_per_source: u32,
    /// Ports one node may LISTEN on at once; more are refused (EMFILE).
    #[arg(long, default_value_t = ServerConfig::DEFAULT_MAX_LISTENS_PER_NODE as u32, value_name = "N",
          value_parser = clap::value_parser!(u32).range(1..=65535))]
    max_listens_per_node: u32,
    /// A node connection not authenticated within this time is closed (e.g. 10s, 500ms).
    #[arg(long, default_value = "10s", value_parser = parse_duration, value_name = "DURATION")]
    auth_timeout: Duration,
    /// Bytes read from one node per event-loop turn, so a flooding node cannot starve
    /// the others.
    #[arg(long, default_value = "256KiB", value_parser = parse_size, value_name = "BYTES")]
    node_read_budget: u64,
    /// Bytes queued toward a node that does not read (PONG, RESET, DATA) above which it
    /// is dropped.
    #[arg(long, default_value = "64MiB", value_parser = parse_size, value_name = "BYTES")]
    max_node_queue: u64,
    /// DATA payloads a stream's queue toward its client holds at once; more are merged
    /// into the last (bounds per-frame overhead within one window of credit).
    #[arg(long, default_value_t = ServerConfig::DEFAULT_MAX_FRAMES_PER_WINDOW as u32, value_name = "N",
          value_parser = clap::value_parser!(u32).range(1..=(1 << 24)))]
    max_frames_per_window: u32,
    /// Where nodes may CONNECT: `ADDR[/PREFIX][:PORTS]`, PORTS = P, P-Q or *, IPv6 in
    /// brackets (`[2001:db8::/32]:443`); repeatable or comma-separated. Default: anywhere
    /// except the I/O server's own addresses.
    #[arg(long, value_name = "NET:PORTS", value_delimiter = ',',
          value_parser = |t: &str| t.parse::<ConnectRule>())]
    allow_connect: Vec<ConnectRule>,
    /// Cluster ports nodes may LISTEN on: P, P-Q or *; repeatable or comma-separated.
    /// Default: any port except the --nodes port (never allowed).
    #[arg(long, value_name = "PORTS", value_delimiter = ',',
          value_parser = |t: &str| t.parse::<PortRange>())]
    allow_listen: Vec<PortRange>,
    /// The highest CLXF protocol version picked for a node: 2 lets DATA frames carry up
    /// to 256 KiB, 1 keeps them at 16 KiB (for measurement and older nodes).
    #[arg(long, default_value_t = MAX_VERSION, value_name = "1|2",
          value_parser = clap::value_parser!(u16).range(i64::from(MIN_VERSION)..=i64::from(MAX_VERSION)))]
    max_version: u16,
    /// Move DATA payloads of 4 KiB and more from node connections to client sockets
    /// with splice(2) through a pipe instead of copying them through user space (one
    /// pipe, two more descriptors, per node connection; none per client).
    #[arg(long)]
    splice: bool,
    /// Write the statistics as JSON to FILE on exit.
    #[arg(long, value_name = "FILE")]
    stats: Option<PathBuf>,
}

/// Flags of `connlab singleip app-node`.
#[derive(Args, Debug)]
struct AppNodeArgs {
    /// The I/O server's node address (its --nodes).
    #[arg(long, value_name = "ADDR")]
    io_server: SocketAddr,
    /// File holding the shared key (at least 16 bytes).
    #[arg(long, value_name = "FILE")]
    key: PathBuf,
    /// The local server each client connection is forwarded to.
    #[arg(long, value_name = "ADDR")]
    forward: SocketAddr,
    /// A cluster port to serve; repeat for more (default: the port of --forward).
    #[arg(long = "port", value_name = "P", value_parser = clap::value_parser!(u16).range(1..))]
    ports: Vec<u16>,
    /// This node's number, shown in the I/O server's statistics.
    #[arg(long, default_value_t = 0)]
    node_id: u32,
    /// Client connections the I/O server may hand this node at once; beyond
    /// it the next node serving the port gets them (or the client is reset).
    #[arg(long, default_value_t = 1024, value_parser = clap::value_parser!(u32).range(1..=(1 << 20)))]
    max_streams: u32,
    /// Credit granted to the I/O server per stream (bytes).
    #[arg(long, default_value = "64KiB", value_parser = parse_size, value_name = "BYTES")]
    window: u64,
    /// Outbound: listen on LOCAL (on this node); the I/O server opens each
    /// connection made to it to DEST, from the cluster address. Repeatable.
    #[arg(long = "connect", value_name = "LOCAL=DEST", value_parser = |t: &str| t.parse::<Outbound>())]
    outbound: Vec<Outbound>,
    /// Send the local server's bytes to the I/O server with splice(2) through a
    /// pipe instead of copying them through user space (one pipe, two more
    /// descriptors, for the node connection; none per stream).
    #[arg(long)]
    splice: bool,
    /// The highest CLXF protocol version offered to the I/O server: 2 lets DATA frames
    /// carry up to 256 KiB, 1 keeps them at 16 KiB (for measurement and older servers).
    #[arg(long, default_value_t = MAX_VERSION, value_name = "1|2",
          value_parser = clap::value_parser!(u16).range(i64::from(MIN_VERSION)..=i64::from(MAX_VERSION)))]
    max_version: u16,
    /// Times to connect again when the I/O server ends the session before
    /// authentication (its unauthenticated slots full), waiting 100 ms, then
    /// twice as long each time up to 5 s; 0 gives up at once. A wrong key is
    /// not retried.
    #[arg(long, default_value_t = 8, value_name = "N")]
    retries: u32,
    /// Write the statistics as JSON to FILE on exit.
    #[arg(long, value_name = "FILE")]
    stats: Option<PathBuf>,
}

/// Runs `connlab singleip`.
pub(crate) fn run(args: SingleIpArgs) -> Result<ExitCode, Exit> {
    match args.command {
        SingleIpCommand::IoServer(a) => io_server(a),
        SingleIpCommand::AppNode(a) => app_node(a),
        SingleIpCommand::Probe(a) => crate::cmd::singleip_probe::run(a),
    }
}

/// `--send-limit`: BYTES or `off` (`None`).
fn parse_send_limit(text: &str) -> Result<Option<u64>, Exit> {
    if text.eq_ignore_ascii_case("off") {
        return Ok(None);
    }
    parse_size(text)
        .map(Some)
        .map_err(|e| Exit::usage(anyhow!("--send-limit {text:?}: {e} (or 'off')")))
}

/// `--send-buffer`: share, share:H, 4x, auto or BYTES.
fn parse_send_buffer(text: &str) -> Result<SendBufferChoice, Exit> {
    let lower = text.to_ascii_lowercase();
    if let Some(h) = lower.strip_prefix("share:") {
        return h
            .parse()
            .ok()
            .filter(|h: &f64| (1.05..=16.0).contains(h))
            .map(|h| SendBufferChoice::Share(Some(h)))
            .ok_or_else(|| {
                Exit::usage(anyhow!(
                    "--send-buffer {text:?}: share:H takes a headroom H between 1.05 and 16"
                ))
            });
    }
    Ok(match lower.as_str() {
        "share" => SendBufferChoice::Share(None),
        "4x" => SendBufferChoice::FourX,
        "auto" => SendBufferChoice::Auto,
        _ => SendBufferChoice::Bytes(parse_size(text).map_err(|e| {
            Exit::usage(anyhow!("--send-buffer {text:?}: {e} (or share, 4x, auto)"))
        })?),
    })
}

/// `--stats` of the I/O server: the library's counters plus wall time.
#[derive(Serialize)]
struct Timed<T: Serialize> {
    #[serde(flatten)]
    stats: T,
    wall_s: f64,
}

fn write_stats<T: Serialize>(path: Option<&Path>, stats: T, started: Instant) -> Result<(), Exit> {
    let Some(path) = path else {
        return Ok(());
    };
    let doc = Timed {
        stats,
        wall_s: started.elapsed().as_secs_f64(),
    };
    crate::cmd::write_json("--stats", path, &doc)
}

fn setup_error(e: SingleIpError) -> Exit {
    match e {
        SingleIpError::Config(_) => Exit::usage(anyhow!("{e}")),
        other => anyhow!("{other}").into(),
    }
}

fn io_server(args: IoServerArgs) -> Result<ExitCode, Exit> {
    crate::cmd::check_output("--stats", args.stats.as_deref())?;
    let config = ServerOptions {
        listen: args.listen.clone(),
        nodes: args.nodes,
        key: args.key.clone(),
        send_limit: parse_send_limit(&args.send_limit)?,
        send_buffer: parse_send_buffer(&args.send_buffer)?,
        quantum: args.quantum,
        window: args.window,
        max_pending_nodes: args.max_pending_nodes,
        max_pending_per_source: args.max_pending_per_source,
        max_listens_per_node: args.max_listens_per_node,
        auth_timeout: args.auth_timeout,
        node_read_budget: args.node_read_budget,
        max_node_queue: args.max_node_queue,
        max_frames_per_window: args.max_frames_per_window,
        allow_connect: args.allow_connect.clone(),
        allow_listen: args.allow_listen.clone(),
        max_version: args.max_version,
        splice: args.splice,
    }
    .config()
    .map_err(setup_error)?;
    let send_limit = config.send_limit;
    let shutdown = Shutdown::on_termination_signals().context("installing signal handlers")?;
    let started = Instant::now();
    let stats = run_server(
        &config,
        shutdown.wake_fd(),
        || shutdown.requested(),
        |bound| {
            let listen: Vec<String> = bound.listen.iter().map(|a| a.to_string()).collect();
            let limit = match send_limit {
                Some(l) => format!(
                    "send limit {} B, send buffer {}, quantum {} B",
                    l.notsent_lowat, l.sndbuf, args.quantum
                ),
                None => "send limit off".to_string(),
            };
            let splice = if args.splice { ", splice" } else { "" };
            println!(
                "singleip: io-server ready: cluster {}, nodes {}, {limit}{splice}; Ctrl-C stops",
                listen.join(" "),
                bound.nodes
            );
            let _ = std::io::stdout().flush();
        },
    )
    .map_err(setup_error)?;
    let hit = stats.limits_hit();
    if !hit.is_empty() {
        eprintln!("singleip io-server: limits hit: {}", hit.join(", "));
    }
    eprintln!(
        "singleip io-server: {} clients ({} without a node), {} node connections ({} authenticated, {} refused, {} wrong key, {} bad frames)",
        stats.clients_accepted,
        stats.clients_no_node,
        stats.node_connections,
        stats.nodes_authenticated,
        stats.nodes_refused,
        stats.auth_failures,
        stats.bad_frames
    );
    if stats.splice {
        eprintln!(
            "singleip io-server: splice: {} payloads taken, {} B spliced to clients, {} B spilled to queues",
            stats.spliced_payloads, stats.spliced_bytes, stats.splice_spilled_bytes
        );
    }
    for n in &stats.nodes {
        eprintln!(
            "  node {} {}: CLXF version {}, {} streams, {} B to node, {} B from node, {} resets in, {} out: {}",
            n.node_id,
            n.addr,
            n.version,
            n.streams,
            n.bytes_to_node,
            n.bytes_from_node,
            n.resets_received,
            n.resets_sent,
            n.end
        );
    }
    write_stats(args.stats.as_deref(), stats, started)?;
    Ok(ExitCode::SUCCESS)
}

fn app_node(args: AppNodeArgs) -> Result<ExitCode, Exit> {
    crate::cmd::check_output("--stats", args.stats.as_deref())?;
    let options = NodeOptions {
        io_server: args.io_server,
        key: args.key.clone(),
        forward: args.forward,
        ports: args.ports.clone(),
        node_id: args.node_id,
        max_streams: args.max_streams,
        window: args.window,
        outbound: args.outbound.clone(),
        splice: args.splice,
        max_version: args.max_version,
        retries: args.retries,
    };
    let config = options.config().map_err(setup_error)?;
    let ports = &config.ports;
    let shutdown = Shutdown::on_termination_signals().context("installing signal handlers")?;
    let started = Instant::now();
    let (stats, result) = run_node_with_stats(
        &config,
        shutdown.wake_fd(),
        || shutdown.requested(),
        || {
            let outbound: String = args
                .outbound
                .iter()
                .map(|o| format!(", outbound {} -> {}", o.listen, o.connect))
                .collect();
            let splice = if args.splice { ", splice" } else { "" };
            println!(
                "singleip: app-node ready: node {} serving ports {ports:?} of {} -> {}{outbound}{splice}; Ctrl-C stops",
                args.node_id, args.io_server, args.forward
            );
            let _ = std::io::stdout().flush();
        },
    );
    if let Err(e) = result {
        // What was measured before the end is written all the same.
        write_stats(args.stats.as_deref(), stats, started)?;
        return Err(match options.port_hint(e) {
            Ok(hinted) => anyhow!(hinted).into(),
            Err(e) => setup_error(e),
        });
    }
    eprintln!(
        "singleip app-node: CLXF version {}, {} streams ({} local connects failed), {} outbound ({} failed), {} B to local, {} B from local, {} resets in, {} out",
        stats.version,
        stats.streams,
        stats.forward_failures,
        stats.outbound_streams,
        stats.outbound_failures,
        stats.bytes_to_local,
        stats.bytes_from_local,
        stats.resets_received,
        stats.resets_sent
    );
    write_stats(args.stats.as_deref(), stats, started)?;
    Ok(ExitCode::SUCCESS)
}
