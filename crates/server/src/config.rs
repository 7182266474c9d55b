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
    /// One thread, io_uring: multishot accept, multishot receive into a
    /// provided-buffer ring, `sendmsg` entries submitted with the wait
    /// ([`UringFeatures`] says which of these are used).
    Uring,
    /// One thread, the `poll` loop over connlab-rtsig: readiness kept by
    /// real-time signals (`F_SETSIG`) and the results of non-blocking I/O.
    Rtsig,
}

impl EngineKind {
    /// Whether `--workers` applies: the event engines that run one loop
    /// on one thread (the processes and threads engines already spread
    /// over a process or thread per connection). rtsig gives each loop
    /// its own signal thread and readiness table.
    pub fn has_workers(self) -> bool {
        matches!(
            self,
            EngineKind::Select
                | EngineKind::Poll
                | EngineKind::Epoll
                | EngineKind::Uring
                | EngineKind::Rtsig
        )
    }

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

    /// What the engine does, one sentence for `connlab serve --help` (which
    /// wraps it).
    pub fn describe(self) -> &'static str {
        match self {
            EngineKind::Processes => "a process per connection (fork after accept)",
            EngineKind::Threads => "a thread per connection, blocking I/O",
            EngineKind::Select => "one thread, select(2), beyond 1024 descriptors",
            EngineKind::Poll => "one thread, poll(2)",
            EngineKind::Epoll => "one thread, epoll(7); level-triggered, or --edge-triggered",
            EngineKind::Uring => {
                "one thread, io_uring: multishot accept, multishot receive into a \
                 provided-buffer ring, sendmsg entries submitted with the wait, \
                 SINGLE_ISSUER + DEFER_TASKRUN (Linux 6.1; see --uring-features)"
            }
            EngineKind::Rtsig => {
                "one thread, the poll loop over connlab-rtsig: a readiness table kept by \
                 real-time signals (F_SETSIG) and the results of non-blocking I/O"
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

/// The engines' names in [`EngineKind::ALL`]'s order, for the
/// unknown-variant error of their deserialization.
const ENGINE_NAMES: &[&str] = &[
    "processes",
    "threads",
    "select",
    "poll",
    "epoll",
    "uring",
    "rtsig",
];

/// Written as its [`name`](EngineKind::name), as on the command line.
impl serde::Serialize for EngineKind {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.name())
    }
}

/// Read from its [`name`](EngineKind::name); any other string is an
/// unknown variant, listed with the names.
impl<'de> serde::Deserialize<'de> for EngineKind {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Name;

        impl serde::de::Visitor<'_> for Name {
            type Value = EngineKind;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an engine name")
            }

            fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<EngineKind, E> {
                EngineKind::ALL
                    .into_iter()
                    .find(|e| e.name() == s)
                    .ok_or_else(|| E::unknown_variant(s, ENGINE_NAMES))
            }
        }

        deserializer.deserialize_str(Name)
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
    /// The optional io_uring features the uring engine may use (only with
    /// [`EngineKind::Uring`]); each is probed at start.
    pub uring_features: UringFeatures,
    /// Event loops, one thread each (event engines only; 1: the loop runs
    /// on the calling thread).
    pub workers: usize,
    /// How the loops share the listening address when `workers` > 1.
    pub accept: AcceptMode,
}

/// How several event loops accept connections on one address.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum AcceptMode {
    /// One listener per loop, bound with `SO_REUSEPORT`: the kernel hashes
    /// each new connection to one of them.
    #[default]
    Reuseport,
    /// One listener every loop watches (epoll with `EPOLLEXCLUSIVE`, so one
    /// loop wakes per connection).
    Shared,
}

impl AcceptMode {
    /// `reuseport` or `shared`.
    pub fn name(self) -> &'static str {
        match self {
            AcceptMode::Reuseport => "reuseport",
            AcceptMode::Shared => "shared",
        }
    }
}

impl FromStr for AcceptMode {
    type Err = String;
    fn from_str(s: &str) -> Result<AcceptMode, String> {
        match s {
            "reuseport" => Ok(AcceptMode::Reuseport),
            "shared" => Ok(AcceptMode::Shared),
            _ => Err(format!("--accept {s:?}: expected reuseport or shared")),
        }
    }
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
            uring_features: UringFeatures::default(),
            workers: 1,
            accept: AcceptMode::default(),
        }
    }
}

/// One optional io_uring feature of the uring engine.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum UringFeature {
    /// `IORING_ACCEPT_MULTISHOT` (5.19); off: one accept per completion.
    MultishotAccept,
    /// `IORING_RECV_MULTISHOT` (6.0); off: one receive per completion.
    MultishotRecv,
    /// Receive buffers in a registered provided-buffer ring (5.19), recycled
    /// by a store to shared memory; off: `IORING_OP_PROVIDE_BUFFERS` entries.
    BufRing,
    /// `sendmsg` as a ring entry, submitted with the loop turn's wait (one
    /// `io_uring_enter` per turn); a full socket is waited for inside the
    /// kernel. Off: `sendmsg(2)` from the loop and a POLLOUT entry when full.
    RingSend,
    /// `SINGLE_ISSUER` + `DEFER_TASKRUN` (6.1); off or missing:
    /// `COOP_TASKRUN` + `TASKRUN_FLAG` (5.19), else plain task work.
    DeferTaskrun,
    /// Connections in the ring's registered file table (direct descriptors
    /// by index, no file lookup per operation).
    FixedFiles,
    /// A kernel thread polls the submission queue (`SQPOLL`); off by default.
    Sqpoll,
}

impl UringFeature {
    /// Every feature, in the order they are listed.
    pub const ALL: [UringFeature; 7] = [
        UringFeature::MultishotAccept,
        UringFeature::MultishotRecv,
        UringFeature::BufRing,
        UringFeature::RingSend,
        UringFeature::DeferTaskrun,
        UringFeature::FixedFiles,
        UringFeature::Sqpoll,
    ];

    /// The name used by `--uring-features`.
    pub fn name(self) -> &'static str {
        match self {
            UringFeature::MultishotAccept => "multishot-accept",
            UringFeature::MultishotRecv => "multishot-recv",
            UringFeature::BufRing => "buf-ring",
            UringFeature::RingSend => "ring-send",
            UringFeature::DeferTaskrun => "defer-taskrun",
            UringFeature::FixedFiles => "fixed-files",
            UringFeature::Sqpoll => "sqpoll",
        }
    }

    fn bit(self) -> u8 {
        1 << (self as u8)
    }
}

/// A set of [`UringFeature`]s. The default is every feature but `sqpoll`.
///
/// Written as a comma-separated list applied left to right: `all`, `none`
/// and `default` reset the set, `NAME` or `+NAME` adds a feature, `-NAME`
/// removes it. A list that starts with `+` or `-` changes the default
/// (`-ring-send`); one that starts with a name is the whole set
/// (`buf-ring,ring-send`), as [`fmt::Display`] writes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct UringFeatures(u8);

impl UringFeatures {
    /// No optional feature: the engine's plainest io_uring use.
    pub const NONE: UringFeatures = UringFeatures(0);

    /// Every feature, `sqpoll` included.
    pub fn all() -> UringFeatures {
        UringFeatures(UringFeature::ALL.iter().fold(0, |b, f| b | f.bit()))
    }

    /// Whether `feature` is in the set.
    pub fn has(self, feature: UringFeature) -> bool {
        self.0 & feature.bit() != 0
    }

    /// The set with `feature` added (`on`) or removed.
    pub fn with(self, feature: UringFeature, on: bool) -> UringFeatures {
        if on {
            UringFeatures(self.0 | feature.bit())
        } else {
            UringFeatures(self.0 & !feature.bit())
        }
    }
}

impl Default for UringFeatures {
    fn default() -> UringFeatures {
        UringFeatures::all().with(UringFeature::Sqpoll, false)
    }
}

impl fmt::Display for UringFeatures {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<_> = UringFeature::ALL
            .iter()
            .filter(|&&x| self.has(x))
            .map(|x| x.name())
            .collect();
        if names.is_empty() {
            f.write_str("none")
        } else {
            f.write_str(&names.join(","))
        }
    }
}

impl FromStr for UringFeatures {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let items: Vec<&str> = s
            .split(',')
            .map(str::trim)
            .filter(|i| !i.is_empty())
            .collect();
        // A list of names is the whole set; `+`/`-` first changes the default.
        let mut set = match items.first() {
            Some(first) if !first.starts_with(['+', '-']) => UringFeatures::NONE,
            _ => UringFeatures::default(),
        };
        for item in items {
            match item {
                "all" => set = UringFeatures::all(),
                "none" => set = UringFeatures::NONE,
                "default" => set = UringFeatures::default(),
                _ => {
                    let (on, name) = match item.strip_prefix('-') {
                        Some(name) => (false, name),
                        None => (true, item.strip_prefix('+').unwrap_or(item)),
                    };
                    let feature = UringFeature::ALL
                        .into_iter()
                        .find(|f| f.name() == name)
                        .ok_or_else(|| {
                            let names: Vec<_> =
                                UringFeature::ALL.iter().map(|f| f.name()).collect();
                            format!(
                                "unknown io_uring feature {name:?}; expected all, none, default \
                                 or [+|-] one of {}",
                                names.join(", ")
                            )
                        })?;
                    set = set.with(feature, on);
                }
            }
        }
        Ok(set)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::de::value::{Error as DeError, StrDeserializer};
    use serde::Deserialize;

    #[test]
    fn engines_deserialize_from_their_names_only() {
        let names: Vec<_> = EngineKind::ALL.iter().map(|e| e.name()).collect();
        assert_eq!(names, ENGINE_NAMES);
        for engine in EngineKind::ALL {
            let read = EngineKind::deserialize(StrDeserializer::<DeError>::new(engine.name()));
            assert_eq!(read, Ok(engine));
        }
        let Err(e) = EngineKind::deserialize(StrDeserializer::<DeError>::new("kqueue")) else {
            panic!("kqueue is no engine");
        };
        assert_eq!(
            e.to_string(),
            "unknown variant `kqueue`, expected one of `processes`, `threads`, `select`, \
             `poll`, `epoll`, `uring`, `rtsig`"
        );
    }

    #[test]
    fn uring_features_parse_from_the_default_left_to_right() {
        let default = UringFeatures::default();
        assert!(!default.has(UringFeature::Sqpoll));
        assert!(default.has(UringFeature::RingSend));
        assert_eq!("".parse(), Ok(default));
        assert_eq!(
            "buf-ring".parse(),
            Ok(UringFeatures::NONE.with(UringFeature::BufRing, true))
        );
        assert_eq!("none".parse(), Ok(UringFeatures::NONE));
        assert_eq!("all".parse(), Ok(UringFeatures::all()));
        assert_eq!(
            "-ring-send".parse(),
            Ok(default.with(UringFeature::RingSend, false))
        );
        assert_eq!(
            "none, +buf-ring,sqpoll".parse(),
            Ok(UringFeatures::NONE
                .with(UringFeature::BufRing, true)
                .with(UringFeature::Sqpoll, true))
        );
        assert!("fast".parse::<UringFeatures>().is_err());
    }

    #[test]
    fn uring_features_display_parses_back() {
        for set in [
            UringFeatures::NONE,
            UringFeatures::default(),
            UringFeatures::all(),
            UringFeatures::NONE.with(UringFeature::FixedFiles, true),
        ] {
            assert_eq!(set.to_string().parse(), Ok(set), "{set}");
        }
    }
}
