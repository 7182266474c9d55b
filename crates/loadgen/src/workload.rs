//! What a load run is asked to do (validated before any socket exists), and
//! the live counters a front end can show while it runs.

use connlab_measure::{ActiveRatio, Arrival, Shard};
use connlab_os::CpuList;
use connlab_proto::Protocol;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::time::{Duration, SystemTime};

/// Which connections carry the requests.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ActivePolicy {
    /// The locality paper: a seeded active set chosen once carries every request.
    Fixed,
    /// The polling paper: closed loop, the ratio caps how many connections have
    /// a request outstanding, and each new request goes to a connection drawn at
    /// random from all of them (the active set rotates).
    Rotating,
}

impl ActivePolicy {
    /// `fixed` or `rotating`.
    pub fn name(self) -> &'static str {
        match self {
            ActivePolicy::Fixed => "fixed",
            ActivePolicy::Rotating => "rotating",
        }
    }
}

impl std::str::FromStr for ActivePolicy {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "fixed" => Ok(ActivePolicy::Fixed),
            "rotating" => Ok(ActivePolicy::Rotating),
            _ => Err(format!(
                "unknown active policy {s:?}; expected fixed or rotating"
            )),
        }
    }
}

/// How the client waits for responses (`--io`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum IoPath {
    /// The reader waits for readiness with `epoll_wait` and reads with `recv`.
    #[default]
    Epoll,
    /// The reader keeps a multishot receive armed on every connection,
    /// filling a registered provided-buffer ring, and takes completions
    /// with one `io_uring_enter` per loop turn; in closed loop that call
    /// also submits the turn's next requests as SENDMSG entries.
    Uring,
}

impl IoPath {
    /// `epoll` or `uring`.
    pub fn name(self) -> &'static str {
        match self {
            IoPath::Epoll => "epoll",
            IoPath::Uring => "uring",
        }
    }
}

impl std::str::FromStr for IoPath {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "epoll" => Ok(IoPath::Epoll),
            "uring" => Ok(IoPath::Uring),
            _ => Err(format!("unknown I/O path {s:?}; expected epoll or uring")),
        }
    }
}

/// How requests are paced.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Rate {
    /// Open loop: this many requests per second in total, on a schedule.
    PerSecond(f64),
    /// Closed loop: `depth` requests outstanding on every active connection.
    Max {
        /// Outstanding requests per active connection.
        depth: u32,
    },
}

/// One load run.
#[derive(Clone, Debug)]
pub struct Workload {
    /// The server.
    pub target: SocketAddr,
    /// Connections opened before measuring.
    pub connections: usize,
    /// Share of the connections that carry traffic.
    pub active_ratio: ActiveRatio,
    /// CLB1 request length, header included (HTTP requests are one GET line).
    pub request_size: u32,
    /// Response length asked for (CLB1 `resp_len`; HTTP body bytes).
    pub response_size: u32,
    /// Pacing.
    pub rate: Rate,
    /// Fixed intervals or Poisson arrivals (open loop).
    pub arrival: Arrival,
    /// Measured time, after the warm-up.
    pub duration: Duration,
    /// Time run at the same load before measuring (not recorded).
    pub warmup: Duration,
    /// Wire format.
    pub protocol: Protocol,
    /// HTTP request target.
    pub path: String,
    /// Local addresses to spread connections over (empty: the kernel picks).
    pub source_addrs: Vec<IpAddr>,
    /// Seed of the active-set choice and of Poisson arrivals.
    pub seed: u64,
    /// How long the writer spins (instead of sleeping) before each send.
    pub spin: Duration,
    /// How long to wait for outstanding responses after the last send.
    pub drain_timeout: Duration,
    /// CPUs the writer and reader run on: the first for the writer, the last
    /// for the reader (the same when only one is given).
    pub cpus: Option<CpuList>,
    /// Which slice of the workload this process runs ([`Shard::WHOLE`] for all).
    pub shard: Shard,
    /// Wall-clock instant at which measurement starts (warm-up first), so that
    /// shards on several machines start together; `None`: as soon as every
    /// connection is open.
    pub start_at: Option<SystemTime>,
    /// Run the writer thread under `SCHED_FIFO` at this priority (1-99).
    pub writer_priority: Option<i32>,
    /// Which connections carry the requests.
    pub active_policy: ActivePolicy,
    /// HTTP requests drawn from a file set instead of one `path`.
    pub files: Option<FileSet>,
    /// HTTP without keep-alive: every request on a new connection
    /// (`Connection: close`), `connections` workers at once.
    pub connection_per_request: bool,
    /// How the reader waits for responses.
    pub io: IoPath,
}

/// A file set the requests are drawn from (`--manifest`).
#[derive(Clone, Debug)]
pub struct FileSet {
    /// The files and how they are chosen.
    pub mix: std::sync::Arc<crate::request::FileMix>,
    /// Where the manifest came from (for the result).
    pub source: String,
    /// The popularity as given (`manifest`, `uniform`, `zipf:S`).
    pub popularity: String,
}

/// Counters updated while a run goes on, for progress displays.
#[derive(Debug, Default)]
pub struct Progress {
    /// Connections established so far.
    pub established: AtomicU64,
    /// Requests sent.
    pub sent: AtomicU64,
    /// Responses completed.
    pub completed: AtomicU64,
    /// Errors of any kind.
    pub errors: AtomicU64,
    /// Set once all connections are open and the schedule has started.
    pub measuring: AtomicBool,
}

/// Where per-request records go (for CDFs): called from the reader thread for
/// each measured request, so it should buffer.
pub trait RecordSink: Send {
    /// One completed request.
    fn record(&mut self, record: &crate::RequestRecord);
}
