//! The experiment file's tables and values: server, clients, topology, web
//! workload, the matrix of points and the metrics.

use super::paper::Paper;
use crate::values::{
    ActivePolicy, Arrival, CpuSet, CpuShare, LinkRate, Protocol, Span, WebModel, WebPolicy,
};
use serde::{Deserialize, Serialize};

/// The I/O models of the locality paper, in its column order.
pub const ENGINES: [&str; 5] = ["processes", "threads", "select", "poll", "epoll"];

/// Why an experiment file was refused.
#[derive(Debug, thiserror::Error)]
pub enum ExperimentError {
    /// The file could not be read.
    #[error("{path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// The I/O error.
        source: std::io::Error,
    },
    /// Not valid TOML, or a field of the wrong type or name; `message` carries
    /// the line and column.
    #[error("{origin}: {message}")]
    Parse {
        /// The file.
        origin: String,
        /// The TOML parser's message.
        message: String,
    },
    /// Valid TOML, but a value out of range.
    #[error("{origin}: {field}: {message}")]
    Invalid {
        /// The file.
        origin: String,
        /// The field, e.g. `matrix.active_ratios[2]`.
        field: String,
        /// What is wrong with it.
        message: String,
    },
}

/// One experiment file.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Experiment {
    /// The `kind` tag: `locality`, or `web` with a `[web]` section (see
    /// [`ExperimentKind`](crate::ExperimentKind)); absent in older files.
    /// Not written to `sweep.json`, whose format predates it.
    #[serde(default, skip_serializing)]
    pub kind: Option<crate::ExperimentKind>,
    /// Short name, used in file names (`locality-table3`).
    pub name: String,
    /// Title shown on the report.
    pub title: String,
    /// What the experiment shows, in a sentence or two.
    #[serde(default)]
    pub description: String,
    /// The hosts.
    pub topology: TopologySection,
    /// The server under test.
    pub server: ServerSection,
    /// How the client shards run.
    #[serde(default)]
    pub client: ClientSection,
    /// The parameter matrix.
    pub matrix: Matrix,
    /// Replacements for `--quick`: a reduced matrix and short points.
    #[serde(default)]
    pub quick: Option<MatrixOverride>,
    /// The paper table this experiment reproduces, if any.
    #[serde(default)]
    pub paper: Option<Paper>,
    /// The load-balancing experiments: web backends behind a gateway.
    #[serde(default)]
    pub web: Option<WebSection>,
    /// The gates every point must pass, and the A/A control.
    #[serde(default)]
    pub validity: crate::validity::ValidityLimits,
}

/// Gateway configurations a web experiment's `server.engines` may name:
/// `direct` (clients to the first backend), `nat` and `proxy` (`connlab
/// gateway --mode ...`), `haproxy` (HAProxy `mode tcp`, `balance source`,
/// or `roundrobin`/`leastconn` under those policies). A balancing
/// configuration may add `:N` to balance only the first N backends
/// (`proxy:4`), so one sweep compares backend counts (the gateway's limit).
pub const WEB_CONFIGS: [&str; 4] = ["direct", "nat", "proxy", "haproxy"];

/// A web experiment's engine name split into its gateway configuration and
/// backend count: `proxy:4` is `("proxy", Some(4))`, `nat` is `("nat", None)`
/// (all backends). Errors name what is wrong.
pub fn web_config(engine: &str) -> Result<(&str, Option<u32>), String> {
    let (config, count) = match engine.split_once(':') {
        Some((c, n)) => {
            let n: u32 = n.parse().ok().filter(|n| *n >= 1).ok_or_else(|| {
                format!("{engine:?}: the backend count after ':' must be a whole number from 1")
            })?;
            (c, Some(n))
        }
        None => (engine, None),
    };
    if !WEB_CONFIGS.contains(&config) {
        return Err(format!(
            "{engine:?}: a web experiment names gateway configurations: direct, nat, proxy or haproxy, optionally with :N backends"
        ));
    }
    if config == "direct" && count.is_some_and(|n| n != 1) {
        return Err(format!("{engine:?}: direct always uses one backend"));
    }
    Ok((config, count))
}

/// `[web]`: nginx backends serving a web file set, each under a CPU quota,
/// reached through the gateway configuration each point names in
/// `server.engines` (see [`WEB_CONFIGS`]); the server host is the gateway.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WebSection {
    /// File-set model: paper, specweb96 or surge.
    #[serde(default = "default_model")]
    pub model: WebModel,
    /// Backend hosts (`web1` .. `webN`), 1 to 8.
    pub backends: u32,
    /// CPU quota of every backend, e.g. `25%` (`connlab cap`).
    #[serde(default = "default_backend_cpu")]
    pub backend_cpu: CpuShare,
    /// Balancing policy of `nat` and `proxy`.
    #[serde(default = "default_policy")]
    pub policy: WebPolicy,
}

fn default_model() -> WebModel {
    WebModel::Paper
}

fn default_backend_cpu() -> CpuShare {
    CpuShare::full()
}

fn default_policy() -> WebPolicy {
    WebPolicy::IpMod
}

/// `[topology]`: one server host and K client hosts on one bridge.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TopologySection {
    /// Name of the server's host (namespace suffix).
    #[serde(default = "default_server_host")]
    pub server_host: String,
    /// Number of client hosts (`client1` .. `clientK`), one load shard each.
    pub client_hosts: u32,
    /// Rate limit of every host link, e.g. `1gbit`, `100mbit`, or `none`.
    #[serde(default)]
    pub link_rate: Option<LinkRate>,
}

fn default_server_host() -> String {
    "server".into()
}

/// `[server]`.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerSection {
    /// Engines to measure, in report column order: server engines, or a web
    /// experiment's gateway configurations (each checked as an
    /// [`EngineName`](crate::values::EngineName) when read, and against the
    /// kind in `validate`; text because the report reads them).
    #[serde(deserialize_with = "crate::values::checked_list::<crate::values::EngineName, _>")]
    pub engines: Vec<String>,
    /// Wire format: `clb1` or `http` (checked as a [`Protocol`]; text
    /// because the report prints it).
    #[serde(
        default = "default_protocol",
        deserialize_with = "crate::values::checked::<Protocol, _>"
    )]
    pub protocol: String,
    /// CPUs to pin the server to, e.g. `1`.
    #[serde(default)]
    pub cpu: Option<CpuSet>,
    /// Run the server with `--profile-poll` (time per polling call and per
    /// cycle in its statistics).
    #[serde(default)]
    pub profile_poll: bool,
}

fn default_protocol() -> String {
    "clb1".into()
}

/// `[client]`: settings every shard shares.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClientSection {
    /// CPUs for each shard's writer (first) and reader (last), e.g. `0`.
    #[serde(default)]
    pub cpu: Option<CpuSet>,
    /// `fixed` (the paper) or `poisson`.
    #[serde(default)]
    pub arrival: Option<Arrival>,
    /// Seed of the active-set choice.
    #[serde(default)]
    pub seed: Option<u64>,
    /// Run each shard's writer under SCHED_FIFO at this priority (1-99), so
    /// sends preempt the shards' readers sharing its CPU.
    #[serde(default)]
    pub writer_priority: Option<i32>,
    /// Time between launching the shards and their common start, e.g. `5s`;
    /// by default 2 s plus 1 s per 2,000 connections (connection set-up).
    #[serde(default)]
    pub start_lead: Option<Span>,
    /// `fixed` (a seeded active set, the locality paper) or `rotating`
    /// (closed loop: the active ratio caps the requests outstanding and each
    /// goes to a random idle connection, the polling paper).
    #[serde(default)]
    pub active_policy: Option<ActivePolicy>,
    /// Closed loop (`rates = ["max"]`): requests outstanding per active connection.
    #[serde(default)]
    pub depth: Option<u32>,
}

/// A size in the file: bytes as a number, or text with a unit (`10KiB`).
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(untagged)]
pub enum SizeValue {
    /// Bytes.
    Bytes(u64),
    /// Text such as `10KiB`.
    Text(String),
}

/// An active ratio in the file: a number, or text (`1/16`, `6.25%`).
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(untagged)]
pub enum RatioValue {
    /// A number in (0, 1].
    Number(f64),
    /// Text such as `1/16`.
    Text(String),
}

/// A rate in the file: requests per second, or `"max"` (closed loop).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum RateValue {
    /// Requests per second in total.
    PerSecond(f64),
    /// `max`: closed loop at the highest rate the server sustains.
    Text(String),
}

impl RateValue {
    /// Requests per second, or 0 for closed loop (`max`).
    pub(super) fn per_second(&self) -> Result<f64, String> {
        match self {
            RateValue::PerSecond(r) if r.is_finite() && *r > 0.0 => Ok(*r),
            RateValue::PerSecond(r) => Err(format!(
                "{r}: a positive number of requests per second, or \"max\""
            )),
            RateValue::Text(t) if t.trim().eq_ignore_ascii_case("max") => Ok(0.0),
            RateValue::Text(t) => Err(format!(
                "{t:?}: a positive number of requests per second, or \"max\""
            )),
        }
    }
}

/// `[matrix]`: every combination is one point per engine and repetition.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Matrix {
    /// Total connections (over all shards).
    pub connections: Vec<u64>,
    /// Shares of connections that carry traffic.
    pub active_ratios: Vec<RatioValue>,
    /// Requests per second in total (over all shards), or `"max"` for
    /// closed loop.
    pub rates: Vec<RateValue>,
    /// Request size, header included.
    pub request_size: SizeValue,
    /// Response size.
    pub response_size: SizeValue,
    /// Measured time per point, e.g. `10s`.
    pub duration: Span,
    /// Warm-up per point, e.g. `1s`.
    #[serde(default = "default_warmup")]
    pub warmup: Span,
    /// Repetitions of the whole matrix.
    #[serde(default = "default_repetitions")]
    pub repetitions: u32,
}

fn default_warmup() -> Span {
    Span::from_secs(1)
}

fn default_repetitions() -> u32 {
    1
}

/// `[quick]`: fields that replace the matrix's under `--quick`.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MatrixOverride {
    /// Replaces `matrix.connections`.
    pub connections: Option<Vec<u64>>,
    /// Replaces `matrix.active_ratios`.
    pub active_ratios: Option<Vec<RatioValue>>,
    /// Replaces `matrix.rates`.
    pub rates: Option<Vec<RateValue>>,
    /// Replaces `matrix.duration`.
    pub duration: Option<Span>,
    /// Replaces `matrix.warmup`.
    pub warmup: Option<Span>,
    /// Replaces `matrix.repetitions`.
    pub repetitions: Option<u32>,
}

/// Which statistic a paper table reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Metric {
    /// Service latency (response received - request sent): Tables 3 and 4.
    ServiceLatency,
    /// Send-timing deviation from the ideal schedule: Table 5 and Figure 2.
    SendDeviation,
    /// How the send deviations spread (the locality paper's Figure 2): the
    /// share of sends beyond 10 µs either way, the share within 1 µs of the
    /// median, and the number of sends.
    SendShares,
    /// Time per polling call at the server (`--profile-poll`): the polling
    /// paper's Figures 6, 7, 9 and 10.
    PollCall,
    /// The server's cycle (`--profile-poll`): one polling call and the I/O
    /// it reported, the polling paper's Figure 9.
    Cycle,
    /// Web experiments: each backend's CPU as a share of one CPU, over the
    /// backends the configuration uses (`direct` one, `nat:4` four): the
    /// load-balancing paper's Figure 2 and Table 2.
    BackendCpu,
    /// The achieved request rate, the response traffic and the share of
    /// requests that failed: the load-balancing paper's peak rate (Figure 2)
    /// and Table 2, the polling paper's Figure 7.
    Throughput,
    /// Web experiments: the busy share of the gateway's CPU (`/proc/stat`,
    /// so the kernel's forwarding counts), the gateway process's own CPU,
    /// and the busiest of the other CPUs (clients and backends): Table 2.
    GatewayCpu,
}

impl Metric {
    /// Names of the metric's three statistics, in table column order (a
    /// claim's `statistic` is one of them).
    pub fn stat_names(self) -> [&'static str; 3] {
        match self {
            Metric::ServiceLatency => ["mean", "median", "stddev"],
            Metric::SendDeviation => ["stddev", "median", "max"],
            Metric::SendShares => ["over 10 us", "near median", "sends"],
            Metric::PollCall => ["CPU mean", "wall median", "wall mean"],
            Metric::Cycle => ["mean", "median", "p99"],
            Metric::BackendCpu => ["mean", "busiest", "total"],
            Metric::Throughput => ["rate", "traffic", "errors"],
            Metric::GatewayCpu => ["busy", "process", "others busy"],
        }
    }

    /// Whether the metric is measured only by web experiments (`[web]`):
    /// throughput is the clients' and every experiment has it.
    pub fn is_web(self) -> bool {
        matches!(self, Metric::BackendCpu | Metric::GatewayCpu)
    }
}

/// How a claim reduces each engine's rows before comparing (`over`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Over {
    /// Row by row (the default).
    #[default]
    Rows,
    /// The highest value over the engine's rows, per repetition: the
    /// load-balancing paper's peak request rate.
    Peak,
    /// How the ratio against the `versus` engine changes from row `from` to
    /// row `to`: (engine / versus at `to`) / (engine / versus at `from`),
    /// per repetition. The polling paper's "the gain is larger at a small
    /// active ratio".
    Change,
}

/// How a claim compares two values (`compare`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Compare {
    /// The quotient (the default): `to ÷ from`, or engine ÷ versus.
    #[default]
    Ratio,
    /// The difference, in the statistic's unit: `to - from`, or engine -
    /// versus (the load-balancing paper's added response time).
    Difference,
}

/// The parameter a paper table varies along its rows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Vary {
    /// Total connections.
    Connections,
    /// The active ratio.
    ActiveRatio,
    /// The request rate.
    Rate,
}
