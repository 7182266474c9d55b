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
    load_key, run_node_with_stats, run_server, Access, ConnectRule, Error as SingleIpError,
    NodeConfig, Outbound, PortRange, SendBuffer, SendLimit, ServerConfig, ShareSizing,
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
    #[arg(long = "connect", value_name = "LOCAL=DEST", value_parser = parse_outbound)]
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

/// `--connect LOCAL=DEST`: two socket addresses.
fn parse_outbound(text: &str) -> Result<Outbound, String> {
    let (listen, connect) = text.split_once('=').ok_or_else(|| {
        format!("{text:?}: expected LOCAL=DEST, e.g. 127.0.0.1:9000=203.0.113.7:443")
    })?;
    let addr = |what: &str, t: &str| {
        t.trim()
            .parse::<SocketAddr>()
            .map_err(|e| format!("{what} {t:?}: {e} (an IP:PORT)"))
    };
    Ok(Outbound {
        listen: addr("LOCAL", listen)?,
        connect: addr("DEST", connect)?,
    })
}

/// Runs `connlab singleip`.
pub(crate) fn run(args: SingleIpArgs) -> Result<ExitCode, Exit> {
    match args.command {
        SingleIpCommand::IoServer(a) => io_server(a),
        SingleIpCommand::AppNode(a) => app_node(a),
        SingleIpCommand::Probe(a) => crate::cmd::singleip_probe::run(a),
    }
}

/// Key problems are configuration errors (exit 2).
fn key(path: &Path) -> Result<connlab_proto::xfer::AuthKey, Exit> {
    load_key(path).map_err(|e| Exit::usage(anyhow!("--key: {e}")))
}

fn window(flag: &str, bytes: u64) -> Result<u32, Exit> {
    u32::try_from(bytes)
        .ok()
        .filter(|w| (1024..=connlab_proto::xfer::MAX_WINDOW).contains(w))
        .ok_or_else(|| Exit::usage(anyhow!("{flag} {bytes}: between 1 KiB and 2 GiB - 1")))
}

/// A size flag within `min..=max` bytes.
fn bounded(flag: &str, bytes: u64, min: u64, max: u64) -> Result<usize, Exit> {
    if !(min..=max).contains(&bytes) {
        return Err(Exit::usage(anyhow!(
            "{flag} {bytes}: between {min} B and {max} B"
        )));
    }
    usize::try_from(bytes).map_err(|_| Exit::usage(anyhow!("{flag} {bytes}: too large here")))
}

fn parse_send_limit(text: &str) -> Result<Option<SendLimit>, Exit> {
    if text.eq_ignore_ascii_case("off") {
        return Ok(None);
    }
    let bytes = parse_size(text)
        .map_err(|e| Exit::usage(anyhow!("--send-limit {text:?}: {e} (or 'off')")))?;
    let bytes = u32::try_from(bytes)
        .ok()
        .filter(|b| (1..=(64 << 20)).contains(b))
        .ok_or_else(|| {
            Exit::usage(anyhow!(
                "--send-limit {bytes}: between 1 B and 64 MiB, or 'off'"
            ))
        })?;
    Ok(Some(SendLimit::from_bytes(bytes)))
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
    let json = serde_json::to_string_pretty(&doc).context("encoding the statistics")?;
    connlab_os::files::write_atomic(path, json + "\n")
        .with_context(|| format!("writing --stats file {}", path.display()))?;
    Ok(())
}

fn setup_error(e: SingleIpError) -> Exit {
    match e {
        SingleIpError::Config(_) => Exit::usage(anyhow!("{e}")),
        other => anyhow!("{other}").into(),
    }
}

/// A refused cluster port names the flag that chooses it: `--port`
/// (default: the port of `--forward`, which is often what is taken when the
/// local server and the I/O server share an address).
fn port_hint(e: SingleIpError, default_port: bool) -> Exit {
    let SingleIpError::PortRefused { port, source, .. } = &e else {
        return setup_error(e);
    };
    let taken = source.raw_os_error() == Some(libc::EADDRINUSE);
    let why = if taken {
        format!("port {port} is already in use on the cluster address")
    } else {
        format!("the I/O server may not serve port {port} (its --allow-listen)")
    };
    let default = if default_port {
        " (without --port the cluster port is the port of --forward)"
    } else {
        ""
    };
    anyhow!("{e}\nhint: {why}; --port P chooses the cluster port this node serves{default}").into()
}

/// Applies `--send-buffer` to a send limit.
fn with_send_buffer(limit: Option<SendLimit>, text: &str) -> Result<Option<SendLimit>, Exit> {
    let Some(mut limit) = limit else {
        if !text.eq_ignore_ascii_case("share") {
            return Err(Exit::usage(anyhow!(
                "--send-buffer applies with a --send-limit, not with --send-limit off"
            )));
        }
        return Ok(None);
    };
    let lower = text.to_ascii_lowercase();
    if let Some(h) = lower.strip_prefix("share:") {
        let headroom: f64 = h
            .parse()
            .ok()
            .filter(|h: &f64| (1.05..=16.0).contains(h))
            .ok_or_else(|| {
                Exit::usage(anyhow!(
                    "--send-buffer {text:?}: share:H takes a headroom H between 1.05 and 16"
                ))
            })?;
        let mut rules = ShareSizing::for_unsent_limit(limit.notsent_lowat);
        rules.headroom = headroom;
        limit.sndbuf = SendBuffer::Share(rules);
        return Ok(Some(limit));
    }
    limit.sndbuf = match lower.as_str() {
        "share" => limit.sndbuf,
        "4x" => SendLimit::fixed_4x(limit.notsent_lowat).sndbuf,
        "auto" => SendBuffer::Auto,
        _ => {
            let bytes = parse_size(text).map_err(|e| {
                Exit::usage(anyhow!("--send-buffer {text:?}: {e} (or share, 4x, auto)"))
            })?;
            SendBuffer::Fixed(
                usize::try_from(bytes)
                    .ok()
                    .filter(|b| (4096..=(256 << 20)).contains(b))
                    .ok_or_else(|| {
                        Exit::usage(anyhow!("--send-buffer {bytes}: between 4 KiB and 256 MiB"))
                    })?,
            )
        }
    };
    Ok(Some(limit))
}

/// How `--send-buffer` came out, for the ready line.
fn describe_send_buffer(b: SendBuffer) -> String {
    match b {
        SendBuffer::Auto => "auto".into(),
        SendBuffer::Fixed(bytes) => format!("{bytes} B"),
        SendBuffer::Share(r) => format!(
            "share ({}x the fastest rate x RTT + {} B, {}-{} B, every {:?})",
            r.headroom, r.unsent, r.floor, r.ceiling, r.period
        ),
    }
}

/// Two listeners on one address: the second bind would fail with "Address
/// already in use", which reads like another program's fault (issue 29).
/// Port 0 (any free port) never collides.
fn same_address(listen: &[SocketAddr], nodes: SocketAddr) -> Result<(), Exit> {
    let overlaps = |a: SocketAddr, b: SocketAddr| {
        a.port() != 0
            && a.port() == b.port()
            && (a.ip() == b.ip() || a.ip().is_unspecified() || b.ip().is_unspecified())
    };
    for (i, &a) in listen.iter().enumerate() {
        if overlaps(a, nodes) {
            return Err(Exit::usage(anyhow!(
                "--listen {a} and --nodes {nodes} are the same address: clients and nodes need \
                 a listener each"
            )));
        }
        if let Some(&b) = listen[..i].iter().find(|&&b| overlaps(a, b)) {
            return Err(Exit::usage(anyhow!(
                "--listen {a} is given twice (or overlaps --listen {b})"
            )));
        }
    }
    Ok(())
}

fn io_server(args: IoServerArgs) -> Result<ExitCode, Exit> {
    crate::cmd::check_output("--stats", args.stats.as_deref())?;
    same_address(&args.listen, args.nodes)?;
    let send_limit = with_send_buffer(parse_send_limit(&args.send_limit)?, &args.send_buffer)?;
    if !(512..=(16 << 20)).contains(&args.quantum) {
        return Err(Exit::usage(anyhow!(
            "--quantum {}: between 512 B and 16 MiB",
            args.quantum
        )));
    }
    let key = key(&args.key)?;
    let mut config = ServerConfig::new(args.listen.clone(), args.nodes, key);
    config.send_limit = send_limit;
    config.quantum = args.quantum;
    config.initial_window = window("--window", args.window)?;
    config.max_pending_nodes = args.max_pending_nodes as usize;
    config.max_pending_per_source = args.max_pending_per_source as usize;
    config.max_listens_per_node = args.max_listens_per_node as usize;
    if args.auth_timeout.is_zero() {
        return Err(Exit::usage(anyhow!("--auth-timeout must be above 0")));
    }
    config.handshake_timeout = args.auth_timeout;
    config.node_read_budget = bounded("--node-read-budget", args.node_read_budget, 1024, 1 << 30)?;
    // At least a window's worth of DATA plus room for control frames.
    config.max_node_queue = bounded("--max-node-queue", args.max_node_queue, 64 * 1024, 1 << 40)?;
    config.max_frames_per_window = args.max_frames_per_window as usize;
    config.max_version = args.max_version;
    config.splice = args.splice;
    config.access = Access {
        connect: args.allow_connect.clone(),
        listen: args.allow_listen.clone(),
    };
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
                    l.notsent_lowat,
                    describe_send_buffer(l.sndbuf),
                    args.quantum
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
    let limits = [
        (stats.nodes_over_pending_cap, "over --max-pending-nodes"),
        (stats.nodes_over_source_cap, "over --max-pending-per-source"),
        (stats.nodes_auth_timeout, "past --auth-timeout"),
        (
            stats.node_read_budget_hits,
            "reads stopped at --node-read-budget",
        ),
        (stats.nodes_dropped_queue, "nodes over --max-node-queue"),
        (stats.connects_denied, "CONNECTs denied (--allow-connect)"),
        (stats.listens_denied, "LISTENs denied (--allow-listen)"),
        (
            stats.frames_merged,
            "payloads merged (--max-frames-per-window)",
        ),
        (stats.shed, "connections reset at once: out of descriptors"),
    ];
    let hit: Vec<String> = limits
        .iter()
        .filter(|(n, _)| *n > 0)
        .map(|(n, what)| format!("{n} {what}"))
        .collect();
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
    let key = key(&args.key)?;
    let ports = if args.ports.is_empty() {
        vec![args.forward.port()]
    } else {
        args.ports.clone()
    };
    let mut config = NodeConfig::new(args.io_server, key, ports.clone(), args.forward);
    config.node_id = args.node_id;
    config.max_streams = args.max_streams;
    config.initial_window = window("--window", args.window)?;
    config.outbound = args.outbound.clone();
    config.splice = args.splice;
    config.max_version = args.max_version;
    config.refused_retries = args.retries;
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
        return Err(port_hint(e, args.ports.is_empty()));
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
