//! Values a loadgen experiment file writes: active ratios, request rates,
//! the wire protocol and the result tables.

use connlab_measure::ActiveRatio;
use serde::{Deserialize, Serialize};

/// An active ratio in a file: `"1/16"`, `0.0625` or `"6.25%"`; kept as
/// written (the `--active-ratio` value and the label) with its value.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "RawRatio", into = "String")]
pub struct Ratio {
    /// As written in the file.
    pub label: String,
    /// The share, in (0, 1].
    pub value: f64,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum RawRatio {
    Number(f64),
    Text(String),
}

impl TryFrom<RawRatio> for Ratio {
    type Error = String;
    fn try_from(v: RawRatio) -> Result<Self, String> {
        let label = match v {
            RawRatio::Number(n) => n.to_string(),
            RawRatio::Text(t) => t.trim().to_string(),
        };
        let r: ActiveRatio = label.parse().map_err(|e| format!("{e}"))?;
        Ok(Ratio {
            label,
            value: r.get(),
        })
    }
}

impl From<Ratio> for String {
    fn from(r: Ratio) -> String {
        r.label
    }
}

impl Ratio {
    /// The ratio in a point id: `1of16`, `0.25`.
    pub fn id_part(&self) -> String {
        self.label.replace('/', "of").replace('%', "pct")
    }
}

/// A request rate in a file: requests per second in total, or `"max"`
/// (closed loop).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "RawRate", into = "String")]
pub enum Rate {
    /// Open loop at this many requests per second in total.
    PerSecond(u64),
    /// Closed loop: the next request when a response arrives.
    Max,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum RawRate {
    Number(u64),
    Text(String),
}

impl TryFrom<RawRate> for Rate {
    type Error = String;
    fn try_from(v: RawRate) -> Result<Self, String> {
        match v {
            RawRate::Number(0) => Err("0: give a positive number of requests per second".into()),
            RawRate::Number(n) => Ok(Rate::PerSecond(n)),
            RawRate::Text(t) if t.trim().eq_ignore_ascii_case("max") => Ok(Rate::Max),
            RawRate::Text(t) => match t.trim().parse::<u64>() {
                Ok(n) if n > 0 => Ok(Rate::PerSecond(n)),
                _ => Err(format!(
                    "{t:?}: give requests per second (e.g. 2000) or \"max\""
                )),
            },
        }
    }
}

impl From<Rate> for String {
    fn from(r: Rate) -> String {
        r.label()
    }
}

impl Rate {
    /// The `--rate` value: the number, or `max`.
    pub fn label(self) -> String {
        match self {
            Rate::PerSecond(n) => n.to_string(),
            Rate::Max => "max".into(),
        }
    }
}

/// The wire format client and server speak.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum WireProtocol {
    /// CLB1 (`shared/protocol.md`), the load generator's own format.
    #[default]
    Clb1,
    /// HTTP/1.1 keep-alive.
    Http,
}

impl WireProtocol {
    /// The `--protocol` value.
    pub fn name(self) -> &'static str {
        match self {
            WireProtocol::Clb1 => "clb1",
            WireProtocol::Http => "http",
        }
    }
}

/// How `connlab load` waits for responses and sends closed-loop requests
/// (its `--io`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ClientIo {
    /// `epoll_wait` and plain `recv`/`sendmsg` calls.
    #[default]
    Epoll,
    /// io_uring: multishot receives, and closed-loop sends in the same ring.
    Uring,
}

impl ClientIo {
    /// The `--io` value.
    pub fn name(self) -> &'static str {
        match self {
            ClientIo::Epoll => "epoll",
            ClientIo::Uring => "uring",
        }
    }
}

/// A table of the report: which figures it shows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum LoadgenTable {
    /// How closely sends keep their schedule: send lag p50/p99/p99.9/max,
    /// send deviation stddev/max.
    Pacing,
    /// Service latency: mean, median, stddev, p99, max.
    Latency,
    /// Connection set-up: established, seconds, connections per second.
    Setup,
    /// Peak RSS of client and server, and bytes per connection from its
    /// slope between the smallest and the largest connection count.
    Memory,
    /// CPU seconds of client and server.
    Cpu,
    /// N shards merged against one process: requests and latency, and
    /// their ratio to one process in the same repetition.
    Shards,
}

impl LoadgenTable {
    /// The name used in files.
    pub fn name(self) -> &'static str {
        match self {
            LoadgenTable::Pacing => "pacing",
            LoadgenTable::Latency => "latency",
            LoadgenTable::Setup => "setup",
            LoadgenTable::Memory => "memory",
            LoadgenTable::Cpu => "cpu",
            LoadgenTable::Shards => "shards",
        }
    }
}
