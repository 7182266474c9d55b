//! Experiment files: what to measure, on which topology, and which paper table
//! the result reproduces. Parsed from TOML with every error naming the file and
//! the field; expanded by [`Experiment::plan`] into the points of a sweep.

use crate::values::{
    parse_toml, ActivePolicy, Arrival, CpuSet, CpuShare, LinkRate, Protocol, Span, WebModel,
    WebPolicy,
};
use connlab_measure::units::parse_size_u32;
use connlab_measure::ActiveRatio;
use connlab_server::EngineKind;
use serde::{Deserialize, Serialize};
use std::path::Path;
use std::time::Duration;

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
    fn per_second(&self) -> Result<f64, String> {
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
    /// Time per polling call at the server (`--profile-poll`): the polling
    /// paper's Figures 6, 7, 9 and 10.
    PollCall,
    /// Web experiments: each backend's CPU as a share of one CPU, over the
    /// backends the configuration uses (`direct` one, `nat:4` four): the
    /// load-balancing paper's Figure 2 and Table 2.
    BackendCpu,
    /// Web experiments: the achieved request rate, the response traffic and
    /// the share of requests that failed: the load-balancing paper's peak
    /// rate (Figure 2) and Table 2.
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
            Metric::PollCall => ["CPU mean", "wall median", "wall mean"],
            Metric::BackendCpu => ["mean", "busiest", "total"],
            Metric::Throughput => ["rate", "traffic", "errors"],
            Metric::GatewayCpu => ["busy", "process", "others busy"],
        }
    }

    /// Whether the metric is measured only by web experiments (`[web]`).
    pub fn is_web(self) -> bool {
        matches!(
            self,
            Metric::BackendCpu | Metric::Throughput | Metric::GatewayCpu
        )
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

/// `[paper]`: the table this experiment reproduces and the paper's values.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Paper {
    /// E.g. `Table 3`.
    pub table: String,
    /// Citation of the paper.
    pub source: String,
    /// The statistic the table reports.
    pub metric: Metric,
    /// The parameter along the table's rows.
    pub vary: Vary,
    /// Remarks shown under the table (e.g. where the values come from).
    #[serde(default)]
    pub note: String,
    /// The paper's cells, matched to ours by engine and parameters.
    #[serde(default)]
    pub cells: Vec<PaperCell>,
    /// Further paper tables computed from this sweep's points (Table 5 from
    /// the runs of Table 3).
    #[serde(default)]
    pub derived: Vec<PaperDerived>,
    /// The paper's claims, checked against ours.
    #[serde(default)]
    pub claims: Vec<PaperClaim>,
    /// Settings of the paper this machine cannot run, reached by extending
    /// our measurements (the report says so and why).
    #[serde(default)]
    pub projection: Option<PaperProjection>,
}

/// `[paper.projection]`: the paper's values of one parameter beyond what
/// runs here (40,000 connections against a 20,000 open-files limit); the
/// report extends a line through our medians to them, where the data
/// support one.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PaperProjection {
    /// The parameter projected along.
    pub along: Vary,
    /// The paper's values to project to.
    pub to: Vec<f64>,
    /// Why these settings cannot run here.
    pub why: String,
}

/// How a derived table picks, per engine, the point it reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DerivedPick {
    /// The setting whose first statistic (the median over repetitions) is
    /// the largest of the sweep: the locality paper's Table 5 reports each
    /// engine's worst send deviation.
    LargestFirstStat,
    /// The setting with the highest achieved request rate (median over
    /// repetitions): the load-balancing paper's Table 2 reports each
    /// configuration at its limit.
    HighestRate,
}

/// `[[paper.derived]]`: a paper table computed from this sweep's points.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PaperDerived {
    /// E.g. `Table 5`.
    pub table: String,
    /// The statistic the table reports.
    pub metric: Metric,
    /// Which point stands for each engine.
    pub pick: DerivedPick,
    /// Remarks shown under the table.
    #[serde(default)]
    pub note: String,
    /// The paper's cells (usually by engine only).
    #[serde(default)]
    pub cells: Vec<PaperCell>,
}

/// One cell of the paper's table. Parameters left out match any value.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PaperCell {
    /// Engine column.
    pub engine: String,
    /// Total connections of the row.
    #[serde(default)]
    pub connections: Option<u64>,
    /// Active ratio of the row.
    #[serde(default)]
    pub active_ratio: Option<RatioValue>,
    /// Rate of the row.
    #[serde(default)]
    pub rate_per_s: Option<f64>,
    /// Mean in microseconds.
    #[serde(default)]
    pub mean_us: Option<f64>,
    /// Median in microseconds.
    #[serde(default)]
    pub median_us: Option<f64>,
    /// Standard deviation in microseconds.
    #[serde(default)]
    pub stddev_us: Option<f64>,
    /// Maximum in microseconds (send deviation).
    #[serde(default)]
    pub max_us: Option<f64>,
    /// Requests per second the configuration carried (`throughput`'s rate).
    #[serde(default)]
    pub req_per_s: Option<f64>,
    /// Response traffic in Mbit/s (`throughput`'s traffic).
    #[serde(default)]
    pub mbit_per_s: Option<f64>,
    /// The gateway's CPU utilisation as a share of its CPU, 0-1
    /// (`gateway_cpu`'s busy).
    #[serde(default)]
    pub gateway_cpu_share: Option<f64>,
    /// The web servers' CPU utilisation, mean over the servers, as a share
    /// of one CPU, 0-1 (`backend_cpu`'s mean).
    #[serde(default)]
    pub backend_cpu_share: Option<f64>,
}

impl PaperCell {
    /// The cell's three statistics in the order of `metric`'s
    /// [`Metric::stat_names`].
    pub fn stats(&self, metric: Metric) -> [Option<f64>; 3] {
        match metric {
            Metric::ServiceLatency => [self.mean_us, self.median_us, self.stddev_us],
            Metric::SendDeviation => [self.stddev_us, self.median_us, self.max_us],
            Metric::PollCall => [self.mean_us, self.median_us, None],
            Metric::BackendCpu => [self.backend_cpu_share, None, None],
            Metric::Throughput => [self.req_per_s, self.mbit_per_s, None],
            Metric::GatewayCpu => [self.gateway_cpu_share, None, None],
        }
    }
}

/// A claim of the paper, in one of four shapes:
///
/// - **along a parameter** (`from` and `to` given, no `versus`): for each
///   engine, the statistic at row `to` divided by the one at row `from`
///   (rows along `along`, the other parameters equal);
/// - **versus an engine** (`versus` given): at every row (or the rows whose
///   `along` value lies in `[from, to]`), each engine's statistic divided by
///   the `versus` engine's;
/// - **a peak** (`over = "peak"`): each engine's highest value over its rows
///   (those in `[from, to]` if given, and with `peak_within_us` only rows
///   whose mean service latency stays within it), taken per repetition,
///   divided by the `versus` engine's peak, or judged as a value without
///   `versus`;
/// - **a plain value** (none of these): the statistic itself at every row.
///
/// `compare = "difference"` subtracts instead of dividing (along, versus
/// and peak-versus claims). The claim holds when our whole spread of the
/// ratio, difference or value lies within `[expect_min, expect_max]`.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PaperClaim {
    /// The paper's table, figure or section the claim comes from; defaults
    /// to [`Paper::table`].
    #[serde(default)]
    pub source: String,
    /// The claim in words, as the paper or the design states it.
    pub text: String,
    /// Engines it is about.
    pub engines: Vec<String>,
    /// The metric; defaults to [`Paper::metric`].
    #[serde(default)]
    pub metric: Option<Metric>,
    /// One of the metric's [`Metric::stat_names`]; defaults to the first.
    #[serde(default)]
    pub statistic: Option<String>,
    /// The parameter `from` and `to` refer to; defaults to [`Paper::vary`].
    #[serde(default)]
    pub along: Option<Vary>,
    /// Row value the ratio starts from (or the low end of the rows compared).
    #[serde(default)]
    pub from: Option<f64>,
    /// Row value the ratio ends at (or the high end of the rows compared).
    #[serde(default)]
    pub to: Option<f64>,
    /// The paper's ratio, if its text gives one (the report computes it from
    /// the paper's cells instead when they cover the claim's rows).
    #[serde(default)]
    pub paper_ratio: Option<f64>,
    /// The paper's number when it is not a ratio: a difference (`compare =
    /// "difference"`) or a value, in the metric's stored unit (µs for
    /// times, shares for CPU, req/s or Mbit/s for throughput).
    #[serde(default)]
    pub paper_value: Option<f64>,
    /// `rows` (the default) or `peak`: compare each engine's highest value
    /// over its rows.
    #[serde(default)]
    pub over: Over,
    /// `ratio` (the default) or `difference`.
    #[serde(default)]
    pub compare: Compare,
    /// With `over = "peak"`: a row counts towards an engine's peak only in
    /// the repetitions whose mean service latency there stays at or below
    /// this many µs (a saturated open-loop point still reports the offered
    /// rate while its queue grows).
    #[serde(default)]
    pub peak_within_us: Option<f64>,
    /// A short heading for the report's brief table of the paper's numbers
    /// beside ours (claims without one are listed only with the claims).
    #[serde(default)]
    pub label: Option<String>,
    /// The paper's number as the range its text gives (`46-47 %` of the
    /// direct server's CPU: `[0.46, 0.47]`), in the unit of `paper_ratio`
    /// or `paper_value`; its midpoint stands for it where one number is
    /// needed (ours / paper).
    #[serde(default)]
    pub paper_range: Option<[f64; 2]>,
    /// Print the claim's ratios as percentages (0.465 as 46.5 %).
    #[serde(default)]
    pub percent: bool,
    /// Compare each engine with this one at the same row.
    #[serde(default)]
    pub versus: Option<String>,
    /// The claim holds when our whole spread is at least this.
    #[serde(default)]
    pub expect_min: Option<f64>,
    /// The claim holds when our whole spread is at most this.
    #[serde(default)]
    pub expect_max: Option<f64>,
    /// The claim cannot be measured on this setup, and why.
    #[serde(default)]
    pub unmeasurable: Option<String>,
}

/// The shape of a [`PaperClaim`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ClaimShape<'a> {
    /// The ratio of the statistic between rows `from` and `to`.
    Along {
        /// Start row.
        from: f64,
        /// End row.
        to: f64,
    },
    /// Each engine against `engine` at the same row, at rows in `range`.
    Versus {
        /// The engine divided by.
        engine: &'a str,
        /// Rows compared: `along` within `[from, to]`; all rows if `None`.
        range: Option<(f64, f64)>,
    },
    /// Each engine's highest value over the rows in `range` (all if
    /// `None`), against the `versus` engine's highest, or alone.
    Peak {
        /// The engine compared with, if any.
        versus: Option<&'a str>,
        /// Rows considered: `along` within `[from, to]`; all rows if `None`.
        range: Option<(f64, f64)>,
    },
    /// The statistic itself, at every row.
    Value,
}

impl PaperClaim {
    /// The claim's metric, given the paper's.
    pub fn metric_in(&self, paper: &Paper) -> Metric {
        self.metric.unwrap_or(paper.metric)
    }

    /// The parameter the claim's rows vary along, given the paper's.
    pub fn along_in(&self, paper: &Paper) -> Vary {
        self.along.unwrap_or(paper.vary)
    }

    /// Index of the claim's statistic in its metric's
    /// [`Metric::stat_names`] (0 when unnamed or unknown; validated on load).
    pub fn statistic_index(&self, paper: &Paper) -> usize {
        let names = self.metric_in(paper).stat_names();
        self.statistic
            .as_deref()
            .and_then(|s| names.iter().position(|n| *n == s))
            .unwrap_or(0)
    }

    /// The paper's number the claim's text states: `paper_ratio`,
    /// `paper_value`, or the midpoint of `paper_range`.
    pub fn paper_stated(&self) -> Option<f64> {
        self.paper_ratio
            .or(self.paper_value)
            .or(self.paper_range.map(|[a, b]| (a + b) / 2.0))
    }

    /// The claim's shape.
    pub fn shape(&self) -> ClaimShape<'_> {
        if self.over == Over::Peak {
            return ClaimShape::Peak {
                versus: self.versus.as_deref(),
                range: self.from.zip(self.to).map(|(a, b)| (a.min(b), a.max(b))),
            };
        }
        match (&self.versus, self.from, self.to) {
            (Some(v), from, to) => ClaimShape::Versus {
                engine: v,
                range: from.zip(to).map(|(a, b)| (a.min(b), a.max(b))),
            },
            (None, Some(from), Some(to)) => ClaimShape::Along { from, to },
            _ => ClaimShape::Value,
        }
    }
}

/// One measurement of a sweep: one engine at one cell of the matrix.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PointParams {
    /// Server engine.
    pub engine: String,
    /// Total connections.
    pub connections: u64,
    /// Active ratio as a number.
    pub active_ratio: f64,
    /// Active ratio as written in the experiment (`1/16`).
    pub active_ratio_label: String,
    /// Requests per second in total; 0 means closed loop (`max`).
    pub rate_per_s: f64,
    /// Request size in bytes.
    pub request_size_bytes: u32,
    /// Response size in bytes.
    pub response_size_bytes: u32,
    /// Measured seconds.
    pub duration_s: f64,
    /// Warm-up seconds.
    pub warmup_s: f64,
    /// Repetition, from 1.
    pub repetition: u32,
}

impl PointParams {
    /// A stable identifier, usable as a file name:
    /// `epoll-c400-a1_16-r2000-rep1`.
    pub fn id(&self) -> String {
        let ratio: String = self
            .active_ratio_label
            .chars()
            .map(|c| match c {
                '/' => '_',
                '%' => 'p',
                c if c.is_ascii_alphanumeric() || c == '.' => c,
                _ => '-',
            })
            .collect();
        format!(
            "{}-c{}-a{}-r{}-rep{}",
            self.engine.replace(':', "-b"),
            self.connections,
            ratio,
            self.rate_label(),
            self.repetition
        )
    }

    /// Whether the point runs closed loop (`--rate max`).
    pub fn closed_loop(&self) -> bool {
        self.rate_per_s == 0.0
    }

    /// The rate as `--rate` takes it: a number, or `max`.
    pub fn rate_label(&self) -> String {
        rate_label(self.rate_per_s)
    }
}

/// A rate for display and `--rate`: the number, or `max` for closed loop (0).
pub fn rate_label(rate_per_s: f64) -> String {
    if rate_per_s == 0.0 {
        "max".into()
    } else {
        rate_per_s.to_string()
    }
}

impl Experiment {
    /// Reads and validates an experiment file.
    pub fn from_file(path: &Path) -> Result<Experiment, ExperimentError> {
        let text = std::fs::read_to_string(path).map_err(|source| ExperimentError::Read {
            path: path.display().to_string(),
            source,
        })?;
        Experiment::from_toml(&text, &path.display().to_string())
    }

    /// Parses and validates experiment text; `origin` names it in errors.
    pub fn from_toml(text: &str, origin: &str) -> Result<Experiment, ExperimentError> {
        crate::kind::expect(
            text,
            origin,
            &[crate::ExperimentKind::Locality, crate::ExperimentKind::Web],
        )?;
        let mut exp: Experiment = parse_toml(text, origin)?;
        if let Some(p) = &mut exp.paper {
            for c in &mut p.claims {
                if c.source.trim().is_empty() {
                    c.source = p.table.clone();
                }
            }
        }
        exp.validate(origin)?;
        Ok(exp)
    }

    /// The paper table this reproduces (`Table 3`), if any.
    pub fn reproduces(&self) -> Option<&str> {
        self.paper.as_ref().map(|p| p.table.as_str())
    }

    /// Backend host names of a web experiment: `web1` .. `webN`.
    pub fn backend_hosts(&self) -> Vec<String> {
        let n = self.web.as_ref().map_or(0, |w| w.backends);
        (1..=n).map(|i| format!("web{i}")).collect()
    }

    /// The backend hosts a web engine uses: the first N for `config:N`, one
    /// for `direct`, all of them otherwise.
    pub fn backend_hosts_of(&self, engine: &str) -> Vec<String> {
        let mut hosts = self.backend_hosts();
        match web_config(engine) {
            Ok(("direct", _)) => hosts.truncate(1),
            Ok((_, Some(n))) => hosts.truncate(n as usize),
            _ => {}
        }
        hosts
    }

    /// Client host names: `client1` .. `clientK`.
    pub fn client_hosts(&self) -> Vec<String> {
        (1..=self.topology.client_hosts)
            .map(|i| format!("client{i}"))
            .collect()
    }

    /// The link rate in bits per second, `None` for unlimited.
    pub fn link_rate_bps(&self) -> Option<u64> {
        self.topology.link_rate.as_ref().and_then(LinkRate::bps)
    }

    /// The lead between launching the shards and their common start for a
    /// point with `connections` in total.
    pub fn start_lead(&self, connections: u64) -> Duration {
        match &self.client.start_lead {
            Some(d) => d.get(),
            None => Duration::from_secs(2) + Duration::from_secs_f64(connections as f64 / 2000.0),
        }
    }

    /// Every point of the sweep, repetitions outermost and engines innermost
    /// (so engines compared in one row run close together in time).
    pub fn plan(&self, quick: bool) -> Vec<PointParams> {
        let q = if quick {
            self.quick.clone().unwrap_or_default()
        } else {
            MatrixOverride::default()
        };
        let m = &self.matrix;
        let connections = q.connections.as_ref().unwrap_or(&m.connections);
        let ratios = q.active_ratios.as_ref().unwrap_or(&m.active_ratios);
        let rates = q.rates.as_ref().unwrap_or(&m.rates);
        let duration = q.duration.as_ref().unwrap_or(&m.duration);
        let warmup = q.warmup.as_ref().unwrap_or(&m.warmup);
        let repetitions = q.repetitions.unwrap_or(m.repetitions);
        let (duration_s, warmup_s) = (duration.secs(), warmup.secs());
        let request = size_bytes(&m.request_size).unwrap_or(0);
        let response = size_bytes(&m.response_size).unwrap_or(0);
        let mut points = Vec::new();
        for repetition in 1..=repetitions {
            for &c in connections {
                for ratio in ratios {
                    let (active_ratio, label) = ratio_value(ratio).unwrap_or((1.0, "1".into()));
                    for rate in rates {
                        let rate = rate.per_second().unwrap_or(0.0);
                        for engine in &self.server.engines {
                            points.push(PointParams {
                                engine: engine.clone(),
                                connections: c,
                                active_ratio,
                                active_ratio_label: label.clone(),
                                rate_per_s: rate,
                                request_size_bytes: request,
                                response_size_bytes: response,
                                duration_s,
                                warmup_s,
                                repetition,
                            });
                        }
                    }
                }
            }
        }
        points
    }

    fn validate(&self, origin: &str) -> Result<(), ExperimentError> {
        let bad = |field: &str, message: String| ExperimentError::Invalid {
            origin: origin.to_string(),
            field: field.to_string(),
            message,
        };
        if self.name.is_empty()
            || !self
                .name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        {
            return Err(bad(
                "name",
                format!("{:?}: use letters, digits, - and _", self.name),
            ));
        }
        let host_ok = |h: &str| {
            !h.is_empty()
                && h.len() <= 12
                && h.chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
        };
        if !host_ok(&self.topology.server_host) || self.topology.server_host.starts_with("client") {
            return Err(bad(
                "topology.server_host",
                format!(
                    "{:?}: 1-12 lowercase letters and digits, not starting with \"client\"",
                    self.topology.server_host
                ),
            ));
        }
        if !(1..=32).contains(&self.topology.client_hosts) {
            return Err(bad(
                "topology.client_hosts",
                format!("{}: between 1 and 32", self.topology.client_hosts),
            ));
        }
        if self.server.engines.is_empty() {
            return Err(bad("server.engines", "name at least one engine".into()));
        }
        for (i, e) in self.server.engines.iter().enumerate() {
            if let Some(w) = &self.web {
                let (_, count) =
                    web_config(e).map_err(|m| bad(&format!("server.engines[{i}]"), m))?;
                if count.is_some_and(|n| n > w.backends) {
                    return Err(bad(
                        &format!("server.engines[{i}]"),
                        format!("{e:?}: more backends than web.backends = {}", w.backends),
                    ));
                }
            } else {
                e.parse::<EngineKind>()
                    .map_err(|m| bad(&format!("server.engines[{i}]"), m))?;
            }
            if self.server.engines[..i].contains(e) {
                return Err(bad(&format!("server.engines[{i}]"), format!("{e:?} twice")));
            }
        }
        if let Some(w) = &self.web {
            if self.server.protocol != "http" {
                return Err(bad(
                    "server.protocol",
                    "a web experiment speaks http".into(),
                ));
            }
            if !(1..=8).contains(&w.backends) {
                return Err(bad(
                    "web.backends",
                    format!("{}: between 1 and 8", w.backends),
                ));
            }
        }
        if let Some(p) = self.client.writer_priority {
            if !(1..=99).contains(&p) {
                return Err(bad(
                    "client.writer_priority",
                    format!("{p}: between 1 and 99"),
                ));
            }
        }
        let rotating = self.client.active_policy == Some(ActivePolicy::Rotating);
        if let Some(d) = self.client.depth {
            if d == 0 || (rotating && d != 1) {
                return Err(bad(
                    "client.depth",
                    format!(
                        "{d}: at least 1{}",
                        if rotating {
                            ", and exactly 1 with the rotating policy"
                        } else {
                            ""
                        }
                    ),
                ));
            }
        }
        let m = &self.matrix;
        size_bytes(&m.request_size).map_err(|e| bad("matrix.request_size", e))?;
        size_bytes(&m.response_size).map_err(|e| bad("matrix.response_size", e))?;
        let q = self.quick.clone().unwrap_or_default();
        for (section, over) in [("matrix", MatrixOverride::default()), ("quick", q)] {
            let conns = over.connections.as_ref().unwrap_or(&m.connections);
            let ratios = over.active_ratios.as_ref().unwrap_or(&m.active_ratios);
            let rates = over.rates.as_ref().unwrap_or(&m.rates);
            let duration = over.duration.as_ref().unwrap_or(&m.duration);
            let reps = over.repetitions.unwrap_or(m.repetitions);
            check_list(conns, &format!("{section}.connections"), origin, |c| {
                if *c >= u64::from(self.topology.client_hosts) {
                    Ok(())
                } else {
                    Err(format!(
                        "{c}: at least one connection per client host ({})",
                        self.topology.client_hosts
                    ))
                }
            })?;
            let mut labels = Vec::new();
            for (i, r) in ratios.iter().enumerate() {
                let (_, label) =
                    ratio_value(r).map_err(|e| bad(&format!("{section}.active_ratios[{i}]"), e))?;
                labels.push(label);
            }
            check_list(&labels, &format!("{section}.active_ratios"), origin, |_| {
                Ok(())
            })?;
            check_list(rates, &format!("{section}.rates"), origin, |r| {
                r.per_second().map(|_| ())
            })?;
            if rotating {
                if let Some(i) = rates.iter().position(|r| r.per_second() != Ok(0.0)) {
                    return Err(bad(
                        &format!("{section}.rates[{i}]"),
                        "the rotating active policy runs closed loop: use \"max\"".into(),
                    ));
                }
            }
            if duration.get().is_zero() {
                return Err(bad(
                    &format!("{section}.duration"),
                    "must be positive".into(),
                ));
            }
            if reps == 0 {
                return Err(bad(&format!("{section}.repetitions"), "at least 1".into()));
            }
        }
        if let Some(p) = &self.paper {
            self.validate_paper(p, origin)?;
        }
        Ok(())
    }
}

impl Experiment {
    /// Checks `[paper]`: engines named by cells and claims exist, claim
    /// statistics belong to their metric, and claim bounds agree.
    fn validate_paper(&self, p: &Paper, origin: &str) -> Result<(), ExperimentError> {
        let bad = |field: String, message: String| ExperimentError::Invalid {
            origin: origin.to_string(),
            field,
            message,
        };
        let engine_ok = |field: String, e: &str| {
            if self.server.engines.iter().any(|x| x == e) {
                Ok(())
            } else {
                Err(bad(field, format!("{e:?} is not in server.engines")))
            }
        };
        let check_cells = |prefix: &str, cells: &[PaperCell]| -> Result<(), ExperimentError> {
            for (i, c) in cells.iter().enumerate() {
                engine_ok(format!("{prefix}[{i}].engine"), &c.engine)?;
                if let Some(r) = &c.active_ratio {
                    ratio_value(r).map_err(|e| bad(format!("{prefix}[{i}].active_ratio"), e))?;
                }
                for (name, v) in [
                    ("mean_us", c.mean_us),
                    ("median_us", c.median_us),
                    ("stddev_us", c.stddev_us),
                    ("max_us", c.max_us),
                ] {
                    if v.is_some_and(|v| !v.is_finite()) {
                        return Err(bad(
                            format!("{prefix}[{i}].{name}"),
                            "a finite number of microseconds".into(),
                        ));
                    }
                }
                for (name, v, what) in [
                    ("req_per_s", c.req_per_s, "requests per second"),
                    ("mbit_per_s", c.mbit_per_s, "Mbit/s"),
                    (
                        "gateway_cpu_share",
                        c.gateway_cpu_share,
                        "share of the gateway's CPU (0.78 for 78%)",
                    ),
                    (
                        "backend_cpu_share",
                        c.backend_cpu_share,
                        "share of one CPU (0.56 for 56%)",
                    ),
                ] {
                    let Some(v) = v else { continue };
                    if !v.is_finite() || v < 0.0 {
                        return Err(bad(
                            format!("{prefix}[{i}].{name}"),
                            format!("{v}: a non-negative number, the {what}"),
                        ));
                    }
                    if self.web.is_none() {
                        return Err(bad(
                            format!("{prefix}[{i}].{name}"),
                            "a web value, but the experiment has no [web] section".into(),
                        ));
                    }
                }
            }
            Ok(())
        };
        let web_metric = |field: String, m: Metric| {
            if m.is_web() && self.web.is_none() {
                Err(bad(
                    field,
                    format!(
                        "{}: a web metric, but the experiment has no [web] section",
                        serde_name(&m)
                    ),
                ))
            } else {
                Ok(())
            }
        };
        web_metric("paper.metric".into(), p.metric)?;
        check_cells("paper.cells", &p.cells)?;
        if let Some(proj) = &p.projection {
            if proj.to.is_empty() {
                return Err(bad(
                    "paper.projection.to".into(),
                    "give at least one value to project to".into(),
                ));
            }
            for (i, v) in proj.to.iter().enumerate() {
                if !v.is_finite() || *v <= 0.0 {
                    return Err(bad(
                        format!("paper.projection.to[{i}]"),
                        format!("{v}: a positive number"),
                    ));
                }
            }
        }
        for (d, derived) in p.derived.iter().enumerate() {
            if derived.table.trim().is_empty() {
                return Err(bad(
                    format!("paper.derived[{d}].table"),
                    "name the paper's table, e.g. \"Table 5\"".into(),
                ));
            }
            web_metric(format!("paper.derived[{d}].metric"), derived.metric)?;
            check_cells(&format!("paper.derived[{d}].cells"), &derived.cells)?;
        }
        for (i, c) in p.claims.iter().enumerate() {
            let field = |name: &str| format!("paper.claims[{i}].{name}");
            if c.engines.is_empty() {
                return Err(bad(field("engines"), "name at least one engine".into()));
            }
            for (j, e) in c.engines.iter().enumerate() {
                engine_ok(field(&format!("engines[{j}]")), e)?;
            }
            if let Some(v) = &c.versus {
                engine_ok(field("versus"), v)?;
                if c.engines.contains(v) {
                    return Err(bad(
                        field("versus"),
                        format!("{v:?} is also in engines: an engine against itself"),
                    ));
                }
            }
            let metric = c.metric_in(p);
            web_metric(field("metric"), metric)?;
            if let Some(s) = &c.statistic {
                let names = metric.stat_names();
                if !names.contains(&s.as_str()) {
                    return Err(bad(
                        field("statistic"),
                        format!(
                            "{s:?}: the {} statistics are {}",
                            serde_name(&metric),
                            names.map(|n| format!("{n:?}")).join(", ")
                        ),
                    ));
                }
            }
            for (name, v) in [
                ("from", c.from),
                ("to", c.to),
                ("paper_ratio", c.paper_ratio),
                ("paper_value", c.paper_value),
                ("peak_within_us", c.peak_within_us),
                ("expect_min", c.expect_min),
                ("expect_max", c.expect_max),
            ] {
                if v.is_some_and(|v| !v.is_finite()) {
                    return Err(bad(field(name), "a finite number".into()));
                }
            }
            match (c.from, c.to) {
                (Some(_), None) => {
                    return Err(bad(field("to"), "give to with from (or neither)".into()))
                }
                (None, Some(_)) => {
                    return Err(bad(field("from"), "give from with to (or neither)".into()))
                }
                (Some(f), Some(t)) if c.versus.is_none() && c.over == Over::Rows && f == t => {
                    return Err(bad(
                        field("to"),
                        format!("{t}: the same row as from; a ratio needs two rows"),
                    ))
                }
                _ => {}
            }
            if let (Some(lo), Some(hi)) = (c.expect_min, c.expect_max) {
                if lo > hi {
                    return Err(bad(
                        field("expect_min"),
                        format!("{lo} is above expect_max = {hi}: no value can hold"),
                    ));
                }
            }
            let shape = c.shape();
            let single = matches!(
                shape,
                ClaimShape::Value | ClaimShape::Peak { versus: None, .. }
            );
            if c.compare == Compare::Difference {
                if single {
                    return Err(bad(
                        field("compare"),
                        "a difference needs two values: give versus, or from and to".into(),
                    ));
                }
                if c.paper_ratio.is_some() {
                    return Err(bad(
                        field("paper_ratio"),
                        "a difference claim gives the paper's number as paper_value".into(),
                    ));
                }
            } else if !single && c.paper_value.is_some() {
                return Err(bad(
                    field("paper_value"),
                    "a ratio claim gives the paper's number as paper_ratio".into(),
                ));
            }
            if let Some(w) = c.peak_within_us {
                if c.over != Over::Peak {
                    return Err(bad(
                        field("peak_within_us"),
                        "only a peak claim (over = \"peak\") limits its rows by latency".into(),
                    ));
                }
                if w <= 0.0 {
                    return Err(bad(
                        field("peak_within_us"),
                        format!("{w}: a positive number of microseconds"),
                    ));
                }
            }
            if let Some([lo, hi]) = c.paper_range {
                if !lo.is_finite() || !hi.is_finite() || lo > hi {
                    return Err(bad(
                        field("paper_range"),
                        format!("[{lo}, {hi}]: two finite numbers, the lower first"),
                    ));
                }
                if c.paper_ratio.is_some() || c.paper_value.is_some() {
                    return Err(bad(
                        field("paper_range"),
                        "give the paper's number once: paper_range, paper_ratio or paper_value"
                            .into(),
                    ));
                }
            }
            if c.percent && (single || c.compare == Compare::Difference) {
                return Err(bad(
                    field("percent"),
                    "only ratios print as percentages".into(),
                ));
            }
            if c.label.as_deref().is_some_and(|l| l.trim().is_empty()) {
                return Err(bad(
                    field("label"),
                    "a short heading, or leave label out".into(),
                ));
            }
            if single
                && c.expect_min.is_none()
                && c.expect_max.is_none()
                && c.unmeasurable.is_none()
            {
                return Err(bad(
                    field("expect_max"),
                    "a value claim (no from/to, no versus) or a peak without versus needs expect_min or expect_max, or unmeasurable".into(),
                ));
            }
            if c.unmeasurable
                .as_deref()
                .is_some_and(|u| u.trim().is_empty())
            {
                return Err(bad(
                    field("unmeasurable"),
                    "say why the claim cannot be measured here".into(),
                ));
            }
        }
        Ok(())
    }
}

/// A unit enum's name as written in the file (`send_deviation`).
fn serde_name<T: Serialize>(v: &T) -> String {
    serde_json::to_value(v)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default()
}

/// Checks every element and refuses duplicates, naming the index.
fn check_list<T: PartialEq + std::fmt::Debug>(
    items: &[T],
    field: &str,
    origin: &str,
    check: impl Fn(&T) -> Result<(), String>,
) -> Result<(), ExperimentError> {
    let bad = |i: usize, message: String| ExperimentError::Invalid {
        origin: origin.to_string(),
        field: format!("{field}[{i}]"),
        message,
    };
    if items.is_empty() {
        return Err(ExperimentError::Invalid {
            origin: origin.to_string(),
            field: field.to_string(),
            message: "give at least one value".into(),
        });
    }
    for (i, item) in items.iter().enumerate() {
        check(item).map_err(|m| bad(i, m))?;
        if items[..i].contains(item) {
            return Err(bad(i, format!("{item:?} twice")));
        }
    }
    Ok(())
}

fn size_bytes(v: &SizeValue) -> Result<u32, String> {
    match v {
        SizeValue::Bytes(b) => {
            u32::try_from(*b).map_err(|_| format!("{b} bytes is over the 4 GiB limit"))
        }
        SizeValue::Text(t) => parse_size_u32(t),
    }
}

/// The ratio and its label as written.
pub(crate) fn ratio_value(v: &RatioValue) -> Result<(f64, String), String> {
    let (parsed, label) = match v {
        RatioValue::Number(n) => (ActiveRatio::new(*n), n.to_string()),
        RatioValue::Text(t) => (t.parse::<ActiveRatio>(), t.trim().to_string()),
    };
    parsed.map(|r| (r.get(), label)).map_err(|e| e.to_string())
}

/// Parses a link rate as `tc` writes it: `1gbit`, `100mbit`, `512kbit`,
/// `1000000bit`; `none` means unlimited (`Ok(None)`).
pub fn parse_link_rate(text: &str) -> Result<Option<u64>, String> {
    let t = text.trim().to_ascii_lowercase();
    if t == "none" || t == "unlimited" {
        return Ok(None);
    }
    let bps = connlab_measure::units::parse_rate(text).map_err(|e| format!("{e}, or none"))?;
    if bps > 100_000_000_000 {
        return Err(format!("{text:?}: between 8kbit and 100gbit"));
    }
    Ok(Some(bps))
}

#[cfg(test)]
mod tests {
    use super::*;

    const MINIMAL: &str = r#"
name = "t"
title = "T"
[topology]
client_hosts = 2
link_rate = "1gbit"
[server]
engines = ["select", "epoll"]
[matrix]
connections = [10, 40]
active_ratios = ["1", 0.5, "1/16"]
rates = [100]
request_size = 128
response_size = "10KiB"
duration = "2s"
[quick]
connections = [10]
duration = "1s"
"#;

    #[test]
    fn plans_every_combination_engines_innermost() {
        let e = Experiment::from_toml(MINIMAL, "t.toml").unwrap();
        let p = e.plan(false);
        assert_eq!(p.len(), 2 * 3 * 2);
        assert_eq!(p[0].engine, "select");
        assert_eq!(p[1].engine, "epoll");
        assert_eq!(p[0].id(), "select-c10-a1-r100-rep1");
        assert_eq!(p[4].id(), "select-c10-a1_16-r100-rep1");
        assert_eq!(p[4].active_ratio, 1.0 / 16.0);
        assert_eq!(p[0].response_size_bytes, 10240);
        let ids: std::collections::HashSet<_> = p.iter().map(PointParams::id).collect();
        assert_eq!(ids.len(), p.len(), "ids are unique");
        let q = e.plan(true);
        assert_eq!(q.len(), 3 * 2);
        assert_eq!(q[0].duration_s, 1.0);
        assert_eq!(e.link_rate_bps(), Some(1_000_000_000));
    }

    #[test]
    fn errors_name_the_file_and_field() {
        for (from, to, says) in [
            ("rates = [100]", "rates = [0]", "matrix.rates[0]"),
            ("rates = [100]", "rates = [\"fast\"]", "matrix.rates[0]"),
            ("\"1/16\"]", "\"2/1\"]", "matrix.active_ratios[2]"),
            (
                "\"select\", \"epoll\"",
                "\"select\", \"kqueue\"",
                "server.engines[1]",
            ),
            ("[10, 40]", "[10, 10]", "matrix.connections[1]"),
            ("[10, 40]", "[1, 40]", "matrix.connections[0]"),
            ("\"1gbit\"", "\"fast\"", "topology.link_rate"),
            ("duration = \"1s\"", "duration = \"x\"", "quick.duration"),
            (
                "client_hosts = 2",
                "client_hosts = 0",
                "topology.client_hosts",
            ),
        ] {
            let text = MINIMAL.replacen(from, to, 1);
            let err = Experiment::from_toml(&text, "t.toml")
                .unwrap_err()
                .to_string();
            assert!(err.starts_with("t.toml: "), "{err}");
            assert!(err.contains(says), "{to}: {err}");
        }
        let err = Experiment::from_toml(&MINIMAL.replace("rates", "rate"), "t.toml")
            .unwrap_err()
            .to_string();
        assert!(err.contains("line"), "TOML errors carry the line: {err}");
    }

    #[test]
    fn closed_loop_rotating_points() {
        let text = MINIMAL
            .replace("rates = [100]", "rates = [\"max\"]")
            .replace(
                "[matrix]",
                "[client]\nactive_policy = \"rotating\"\ndepth = 1\n[matrix]",
            );
        let e = Experiment::from_toml(&text, "t.toml").unwrap();
        let p = e.plan(false);
        assert!(p[0].closed_loop());
        assert_eq!(p[0].rate_label(), "max");
        assert_eq!(p[0].id(), "select-c10-a1-rmax-rep1");
        // Rotating needs closed loop and depth 1.
        let open = MINIMAL.replace(
            "[matrix]",
            "[client]\nactive_policy = \"rotating\"\n[matrix]",
        );
        let err = Experiment::from_toml(&open, "t.toml")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("matrix.rates[0]") && err.contains("max"),
            "{err}"
        );
        let deep = text.replace("depth = 1", "depth = 4");
        let err = Experiment::from_toml(&deep, "t.toml")
            .unwrap_err()
            .to_string();
        assert!(err.contains("client.depth"), "{err}");
        let bad = text.replace("\"rotating\"", "\"random\"");
        let err = Experiment::from_toml(&bad, "t.toml")
            .unwrap_err()
            .to_string();
        assert!(err.contains("client.active_policy"), "{err}");
    }

    #[test]
    fn web_experiments_name_gateway_configurations() {
        let web = MINIMAL.replace(
            "engines = [\"select\", \"epoll\"]",
            "engines = [\"direct\", \"nat\"]\nprotocol = \"http\"",
        ) + "[web]\nbackends = 2\nbackend_cpu = \"25%\"\n";
        let e = Experiment::from_toml(&web, "w.toml").unwrap();
        assert_eq!(e.backend_hosts(), vec!["web1", "web2"]);
        assert_eq!(e.web.as_ref().unwrap().policy, WebPolicy::IpMod);
        for (from, to, says) in [
            ("\"nat\"]", "\"kqueue\"]", "server.engines[1]"),
            ("backends = 2", "backends = 0", "web.backends"),
            ("\"25%\"", "\"lots\"", "web.backend_cpu"),
            (
                "protocol = \"http\"",
                "protocol = \"clb1\"",
                "server.protocol",
            ),
        ] {
            let err = Experiment::from_toml(&web.replacen(from, to, 1), "w.toml")
                .unwrap_err()
                .to_string();
            assert!(err.contains(says), "{to}: {err}");
        }
    }

    const PAPER: &str = r#"
[paper]
table = "Table 3"
source = "test"
metric = "service_latency"
vary = "connections"
[[paper.cells]]
engine = "select"
connections = 10
rate_per_s = 100
mean_us = 1130.0
[[paper.derived]]
table = "Table 5"
metric = "send_deviation"
pick = "largest_first_stat"
[[paper.derived.cells]]
engine = "select"
stddev_us = 7.08
[[paper.derived.cells]]
engine = "epoll"
max_us = 337.0
[[paper.claims]]
text = "select grows"
engines = ["select"]
from = 10
to = 40
paper_ratio = 4.0
expect_min = 2.0
[[paper.claims]]
source = "Figure 2"
text = "send deviation stays below 1 ms"
engines = ["select", "epoll"]
metric = "send_deviation"
statistic = "max"
expect_max = 1000.0
[[paper.claims]]
source = "Table 3"
text = "select slower than epoll"
engines = ["select"]
versus = "epoll"
statistic = "median"
along = "rate"
from = 100
to = 100
expect_min = 1.0
"#;

    #[test]
    fn paper_sections_parse_into_typed_values() {
        let e = Experiment::from_toml(&(MINIMAL.to_string() + PAPER), "t.toml").unwrap();
        let p = e.paper.as_ref().unwrap();
        assert_eq!(p.derived[0].pick, DerivedPick::LargestFirstStat);
        assert_eq!(
            p.derived[0].cells[0].stats(Metric::SendDeviation)[0],
            Some(7.08)
        );
        let c = &p.claims;
        assert_eq!(
            c[0].source, "Table 3",
            "source defaults to the paper's table"
        );
        assert_eq!(
            c[0].shape(),
            ClaimShape::Along {
                from: 10.0,
                to: 40.0
            }
        );
        assert_eq!(c[1].source, "Figure 2");
        assert_eq!(c[1].metric_in(p), Metric::SendDeviation);
        assert_eq!(c[1].statistic_index(p), 2);
        assert_eq!(c[1].shape(), ClaimShape::Value);
        assert_eq!(c[2].along_in(p), Vary::Rate);
        assert_eq!(c[2].statistic_index(p), 1);
        assert_eq!(
            c[2].shape(),
            ClaimShape::Versus {
                engine: "epoll",
                range: Some((100.0, 100.0))
            }
        );
    }

    #[test]
    fn bad_paper_fields_are_named() {
        let text = MINIMAL.to_string() + PAPER;
        for (from, to, says) in [
            (
                "statistic = \"max\"",
                "statistic = \"mean\"",
                "paper.claims[1].statistic",
            ),
            (
                "expect_max = 1000.0",
                "expect_max = 1000.0\nexpect_min = 2000.0",
                "paper.claims[1].expect_min",
            ),
            (
                "engine = \"epoll\"\nmax_us",
                "engine = \"kqueue\"\nmax_us",
                "paper.derived[0].cells[1].engine",
            ),
            ("to = 40\n", "", "paper.claims[0].to"),
            ("expect_max = 1000.0", "", "paper.claims[1].expect_max"),
            (
                "versus = \"epoll\"",
                "versus = \"select\"",
                "paper.claims[2].versus",
            ),
            ("pick = \"largest_first_stat\"", "pick = \"first\"", "pick"),
            (
                "metric = \"send_deviation\"\nstatistic",
                "metric = \"speed\"\nstatistic",
                "metric",
            ),
            (
                "engine = \"select\"\nconnections",
                "engine = \"poll\"\nconnections",
                "paper.cells[0].engine",
            ),
        ] {
            assert!(text.contains(from), "{from}");
            let err = Experiment::from_toml(&text.replacen(from, to, 1), "t.toml")
                .unwrap_err()
                .to_string();
            assert!(
                err.starts_with("t.toml: ") && err.contains(says),
                "{to}: {err}"
            );
        }
    }

    /// A web experiment with the load-balancing paper's claim forms.
    fn web_paper() -> String {
        MINIMAL.replace(
            "engines = [\"select\", \"epoll\"]",
            "engines = [\"direct\", \"nat\", \"nat:2\"]\nprotocol = \"http\"",
        ) + r#"[web]
backends = 2
[paper]
table = "Table 2"
source = "test"
metric = "throughput"
vary = "rate"
[[paper.cells]]
engine = "nat:2"
req_per_s = 1826.42
mbit_per_s = 143.5617
[[paper.derived]]
table = "Table 2 (gateway CPU)"
metric = "gateway_cpu"
pick = "highest_rate"
[[paper.derived.cells]]
engine = "nat:2"
gateway_cpu_share = 0.78
[[paper.claims]]
label = "peak"
text = "the peak doubles"
engines = ["nat"]
versus = "direct"
statistic = "rate"
over = "peak"
peak_within_us = 10000.0
paper_ratio = 1.9
expect_min = 1.6
[[paper.claims]]
text = "the gateway adds response time"
engines = ["nat"]
versus = "direct"
compare = "difference"
metric = "service_latency"
from = 100
to = 100
paper_value = 20000.0
expect_min = 0.0
[[paper.claims]]
text = "each backend about half"
engines = ["nat"]
versus = "direct"
metric = "backend_cpu"
paper_range = [0.46, 0.47]
percent = true
expect_min = 0.4
"#
    }

    #[test]
    fn web_claims_parse_into_typed_values() {
        let e = Experiment::from_toml(&web_paper(), "w.toml").unwrap();
        let p = e.paper.as_ref().unwrap();
        assert_eq!(p.metric, Metric::Throughput);
        assert_eq!(p.cells[0].stats(Metric::Throughput)[0], Some(1826.42));
        assert_eq!(p.derived[0].pick, DerivedPick::HighestRate);
        assert_eq!(
            p.derived[0].cells[0].stats(Metric::GatewayCpu)[0],
            Some(0.78)
        );
        let c = &p.claims;
        assert_eq!(
            c[0].shape(),
            ClaimShape::Peak {
                versus: Some("direct"),
                range: None
            }
        );
        assert_eq!(c[0].label.as_deref(), Some("peak"));
        assert_eq!(c[1].compare, Compare::Difference);
        assert_eq!(c[1].paper_stated(), Some(20000.0));
        assert_eq!(c[2].metric_in(p), Metric::BackendCpu);
        assert!((c[2].paper_stated().unwrap() - 0.465).abs() < 1e-12);
        assert!(c[2].percent);
    }

    #[test]
    fn bad_web_claim_fields_are_named() {
        let text = web_paper();
        for (from, to, says) in [
            ("over = \"peak\"", "over = \"top\"", "over"),
            (
                "compare = \"difference\"",
                "compare = \"minus\"",
                "compare",
            ),
            (
                "peak_within_us = 10000.0",
                "peak_within_us = -1.0",
                "paper.claims[0].peak_within_us",
            ),
            (
                "over = \"peak\"\n",
                "",
                "paper.claims[0].peak_within_us",
            ),
            (
                "paper_value = 20000.0",
                "paper_ratio = 20000.0",
                "paper.claims[1].paper_ratio",
            ),
            (
                "paper_ratio = 1.9",
                "paper_value = 1.9",
                "paper.claims[0].paper_value",
            ),
            (
                "paper_range = [0.46, 0.47]",
                "paper_range = [0.47, 0.46]",
                "paper.claims[2].paper_range",
            ),
            (
                "versus = \"direct\"\ncompare = \"difference\"\nmetric = \"service_latency\"\nfrom = 100\nto = 100\n",
                "compare = \"difference\"\nmetric = \"service_latency\"\n",
                "paper.claims[1].compare",
            ),
            (
                "req_per_s = 1826.42",
                "req_per_s = -1.0",
                "paper.cells[0].req_per_s",
            ),
            (
                "gateway_cpu_share = 0.78",
                "gateway_share = 0.78",
                "gateway_share",
            ),
            (
                "statistic = \"rate\"",
                "statistic = \"mean\"",
                "paper.claims[0].statistic",
            ),
            ("label = \"peak\"", "label = \" \"", "paper.claims[0].label"),
            (
                "metric = \"backend_cpu\"\npaper_range",
                "metric = \"backend_cpu\"\nexpect_max = 1.0\npaper_range",
                "",
            ),
        ] {
            assert!(text.contains(from), "{from}");
            let result = Experiment::from_toml(&text.replacen(from, to, 1), "w.toml");
            if says.is_empty() {
                assert!(result.is_ok(), "{to}: {:?}", result.err());
                continue;
            }
            let err = result.unwrap_err().to_string();
            assert!(
                err.starts_with("w.toml: ") && err.contains(says),
                "{to}: {err}"
            );
        }
        // A web metric needs a [web] section.
        let locality = MINIMAL.to_string()
            + "[paper]\ntable = \"T\"\nsource = \"s\"\nmetric = \"backend_cpu\"\nvary = \"rate\"\n";
        let err = Experiment::from_toml(&locality, "t.toml")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("paper.metric") && err.contains("[web]"),
            "{err}"
        );
    }

    #[test]
    fn link_rates_parse_like_tc() {
        assert_eq!(parse_link_rate("100mbit"), Ok(Some(100_000_000)));
        assert_eq!(parse_link_rate("1.5Gbit"), Ok(Some(1_500_000_000)));
        assert_eq!(parse_link_rate("none"), Ok(None));
        assert!(parse_link_rate("1gb").is_err());
        assert!(parse_link_rate("1bit").is_err());
    }

    proptest::proptest! {
        #[test]
        fn arbitrary_text_never_panics(text in ".{0,200}") {
            let _ = Experiment::from_toml(&text, "p.toml");
        }
    }
}

#[cfg(test)]
mod shipped {
    use super::Experiment;
    use std::path::Path;

    #[test]
    fn the_shipped_experiments_parse() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../experiments");
        let mut n = 0;
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "toml") {
                let text = std::fs::read_to_string(&path).unwrap();
                match crate::ExperimentKind::of_text(&text, "x")
                    .ok()
                    .map(|k| k.name())
                {
                    Some("suite") => {
                        crate::Suite::from_file(&path).unwrap_or_else(|e| panic!("{e}"));
                        n += 1;
                        continue;
                    }
                    Some("singleip") => {
                        crate::SingleIpExperiment::from_file(&path)
                            .unwrap_or_else(|e| panic!("{e}"));
                        n += 1;
                        continue;
                    }
                    Some("peers") => {
                        crate::PeersExperiment::from_file(&path).unwrap_or_else(|e| panic!("{e}"));
                        n += 1;
                        continue;
                    }
                    Some("loadgen") => {
                        crate::LoadgenExperiment::from_file(&path)
                            .unwrap_or_else(|e| panic!("{e}"));
                        n += 1;
                        continue;
                    }
                    _ => {}
                }
                if crate::ExperimentKind::of_text(&text, "x").ok()
                    == Some(crate::ExperimentKind::Pipeline)
                {
                    let p = crate::PipelineExperiment::from_file(&path)
                        .unwrap_or_else(|e| panic!("{e}"));
                    let (quick, full) = (p.plan(true), p.plan(false));
                    assert!(!quick.is_empty() && quick.len() < full.len());
                    n += 1;
                    continue;
                }
                let e = Experiment::from_file(&path).unwrap_or_else(|e| panic!("{e}"));
                assert!(e.topology.client_hosts >= 2, "{}", path.display());
                // --quick runs fewer points or shorter ones.
                let (quick, full) = (e.plan(true), e.plan(false));
                let seconds = |plan: &[super::PointParams]| -> f64 {
                    plan.iter().map(|p| p.duration_s + p.warmup_s).sum()
                };
                assert!(
                    !quick.is_empty()
                        && quick.len() <= full.len()
                        && seconds(&quick) < seconds(&full),
                    "{}",
                    path.display()
                );
                n += 1;
            }
        }
        assert!(n >= 3);
    }
}
