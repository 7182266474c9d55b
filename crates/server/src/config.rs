//! What a server run is asked to do, validated before any socket exists.

use connlab_os::CpuList;
use connlab_proto::Protocol;
use std::fmt;
use std::net::SocketAddr;
use std::str::FromStr;
use std::time::Duration;

/// Default `--header-timeout`, nginx's `client_header_timeout`.
pub const DEFAULT_HEADER_TIMEOUT: Duration = Duration::from_secs(60);

/// The I/O model that multiplexes connections.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EngineKind {
    /// A process per connection: `fork` after `accept`, the parent reaps.
    Processes,
    /// A thread per connection with a small stack, blocking I/O.
    Threads,
    /// One thread, `select(2)` on a bitmap sized to the highest descriptor.
    Select,
    /// One thread, `poll(2)`.
    Poll,
    /// One thread, `epoll(7)`, level-triggered unless edge-triggered is asked for.
    Epoll,
    /// One thread, io_uring: multishot accept, multishot receive into provided
    /// buffers, `sendmsg` for responses as every engine.
    Uring,
    /// One thread, the `poll` loop over connlab-rtsig: readiness kept by
    /// real-time signals (`F_SETSIG`) and the results of non-blocking I/O.
    Rtsig,
}

impl EngineKind {
    /// Every engine, in the order comparisons list them.
    pub const ALL: [EngineKind; 7] = [
        EngineKind::Processes,
        EngineKind::Threads,
        EngineKind::Select,
        EngineKind::Poll,
        EngineKind::Epoll,
        EngineKind::Uring,
        EngineKind::Rtsig,
    ];

    /// The name used on the command line, in results and in file names.
    pub fn name(self) -> &'static str {
        match self {
            EngineKind::Processes => "processes",
            EngineKind::Threads => "threads",
            EngineKind::Select => "select",
            EngineKind::Poll => "poll",
            EngineKind::Epoll => "epoll",
            EngineKind::Uring => "uring",
            EngineKind::Rtsig => "rtsig",
        }
    }

    /// One line on what the engine does, for `--help`.
    pub fn describe(self) -> &'static str {
        match self {
            EngineKind::Processes => "a process per connection (fork after accept)",
            EngineKind::Threads => "a thread per connection, blocking I/O",
            EngineKind::Select => "one thread, select(2), beyond 1024 descriptors",
            EngineKind::Poll => "one thread, poll(2)",
            EngineKind::Epoll => "one thread, epoll(7); level-triggered, or --edge-triggered",
            EngineKind::Uring => {
                "one thread, io_uring: multishot accept and receive into provided buffers"
            }
            EngineKind::Rtsig => {
                "one thread, poll loop over the RT-signal readiness table (connlab-rtsig)"
            }
        }
    }
}

impl fmt::Display for EngineKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for EngineKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        EngineKind::ALL
            .into_iter()
            .find(|e| e.name() == s)
            .ok_or_else(|| {
                let names: Vec<_> = EngineKind::ALL.iter().map(|e| e.name()).collect();
                format!("unknown engine {s:?}; expected one of {}", names.join(", "))
            })
    }
}

/// A validated server configuration.
#[derive(Clone, Debug)]
pub struct ServerConfig {
    /// The I/O model.
    pub engine: EngineKind,
    /// Edge-triggered epoll (only with [`EngineKind::Epoll`]).
    pub edge_triggered: bool,
    /// Address to listen on; port 0 picks a free port.
    pub listen: SocketAddr,
    /// Wire format spoken on every connection.
    pub protocol: Protocol,
    /// Largest `req_len`/`resp_len` (CLB1) or body (HTTP) accepted, in bytes.
    pub max_message: u32,
    /// `listen(2)` backlog.
    pub backlog: i32,
    /// CPUs to pin the server to (inherited by its threads and children).
    pub cpus: Option<CpuList>,
    /// Time every polling call and server cycle (event-loop engines only).
    pub profile_poll: bool,
    /// HTTP: paths served besides `/bytes/N` with their sizes (`--manifest`).
    pub files: Option<&'static connlab_proto::http1::FileSizes>,
    /// A request head must be complete this long after its first byte
    /// arrived, or the connection is closed (`None`: no limit).
    pub header_timeout: Option<Duration>,
    /// A connection with no bytes moved either way for this long is closed
    /// (`None`, the default: idle connections stay open).
    pub idle_timeout: Option<Duration>,
}

impl ServerConfig {
    /// A configuration with the defaults of `connlab serve`.
    pub fn new(engine: EngineKind, listen: SocketAddr, protocol: Protocol) -> Self {
        ServerConfig {
            engine,
            edge_triggered: false,
            listen,
            protocol,
            max_message: connlab_proto::ServerConfig::default().max_message,
            backlog: 4096,
            cpus: None,
            profile_poll: false,
            files: None,
            header_timeout: Some(DEFAULT_HEADER_TIMEOUT),
            idle_timeout: None,
        }
    }
}
