//! Load-generator experiments (`kind = "loadgen"`): `connlab load` (one
//! process, or N shards merged exactly) against one `connlab serve` on
//! loopback, each pinned where the file says, every point repeated. They
//! measure the load generator itself (how closely it keeps its send
//! schedule, how fast it sets connections up, what a connection costs in
//! memory, whether shards merge into the same result as one process) and the
//! engines' service latency under the locality paper's workload shape.
//!
//! ```text
//! DIR/experiment.toml     the experiment file as run
//! DIR/loadgen.json        LoadgenInfo: experiment, environment, plan size, whether --quick
//! DIR/points/<id>.json    one LoadgenPoint per finished point (temporary name, then rename)
//! DIR/logs/<id>/          server stats and output, each client's result and output
//! ```
//!
//! Point ids name every axis (`epoll-1000c-1of4-20000rps-1sh-rep1`, with
//! `-src<addrs>` when the file lists source addresses), so a second run of
//! the same sweep skips the points already written.

use crate::peers::{Bytes, ServeEngine, Span};
use connlab_loadgen::LoadResult;
use connlab_measure::{ActiveRatio, DeviationSummary, Summary};
use connlab_os::Environment;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Schema tag of `loadgen.json`.
pub const LOADGEN_SWEEP_SCHEMA: &str = "connlab.loadgen.sweep/1";
/// Schema tag of a point file of a loadgen sweep.
pub const LOADGEN_POINT_SCHEMA: &str = "connlab.loadgen.point/1";

/// Why a loadgen experiment or results directory could not be read.
#[derive(Debug, thiserror::Error)]
pub enum LoadgenError {
    /// The file could not be read.
    #[error("{path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// The I/O error.
        source: std::io::Error,
    },
    /// A field has the wrong type or value, or is unknown.
    #[error("{origin}: {field}: {message}")]
    Field {
        /// The file (or other origin) of the text.
        origin: String,
        /// The field at fault, as a path (`workload.active_ratios[1]`).
        field: String,
        /// What is wrong.
        message: String,
    },
    /// The text is not TOML or JSON at all.
    #[error("{origin}: {message}")]
    Syntax {
        /// The file.
        origin: String,
        /// The parser's message.
        message: String,
    },
}

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

/// `[server]`: the `connlab serve` under the load.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LoadgenServer {
    /// Engines, one point each (innermost axis: they alternate within a repetition).
    pub engines: Vec<ServeEngine>,
    /// Wire format [default: clb1].
    #[serde(default)]
    pub protocol: WireProtocol,
}

/// `[workload]`: what `connlab load` asks for; every list is an axis.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LoadgenWorkload {
    /// Connections in total (over all shards).
    pub connections: Vec<u64>,
    /// Shares of connections that carry requests.
    pub active_ratios: Vec<Ratio>,
    /// Requests per second in total, or `"max"`.
    pub rates: Vec<Rate>,
    /// Closed loop (`"max"`): requests outstanding per active connection.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub depth: Option<u32>,
    /// Request size, header included [default: 128].
    #[serde(default = "default_request")]
    pub request_size: Bytes,
    /// Response size [default: 10KiB].
    #[serde(default = "default_response")]
    pub response_size: Bytes,
    /// Measured time of every point.
    pub duration: Span,
    /// Time at full load before measuring [default: 1s].
    #[serde(default = "default_warmup")]
    pub warmup: Span,
    /// Local addresses to spread connections over (`--source-addrs`), one
    /// point each (`127.0.0.1`, `127.0.0.2-127.0.0.5`); empty: the kernel's choice.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub source_addrs: Vec<String>,
    /// Client processes: 1 is one `connlab load`; N runs `--shard i/N`
    /// with one `--start-at` and merges the results (default: `[1]`).
    #[serde(default = "default_shards")]
    pub shards: Vec<u32>,
}

fn default_request() -> Bytes {
    Bytes(128)
}
fn default_response() -> Bytes {
    Bytes(10 * 1024)
}
fn default_warmup() -> Span {
    Span(Duration::from_secs(1))
}
fn default_shards() -> Vec<u32> {
    vec![1]
}
fn three() -> u32 {
    3
}

/// `[placement]`: where each thread runs (`--cpu` of serve and load).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LoadgenPlacement {
    /// CPU of the server and all its threads and children.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_cpu: Option<usize>,
    /// CPU of the client's writer thread (and of the reader when
    /// `reader_cpu` is not given).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub writer_cpu: Option<usize>,
    /// CPU of the client's reader thread.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reader_cpu: Option<usize>,
}

impl LoadgenPlacement {
    /// The `--cpu` list of `connlab load` (writer first, reader last).
    pub fn client_cpu_list(&self) -> Option<String> {
        match (self.writer_cpu, self.reader_cpu) {
            (Some(w), Some(r)) => Some(format!("{w},{r}")),
            (Some(w), None) => Some(w.to_string()),
            _ => None,
        }
    }
}

/// `[quick]`: replacements for `connlab sweep --quick`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LoadgenQuick {
    /// Measured time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration: Option<Span>,
    /// Repetitions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repetitions: Option<u32>,
    /// Connection counts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connections: Option<Vec<u64>>,
    /// Engines.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub engines: Option<Vec<ServeEngine>>,
}

/// The `kind = "loadgen"` tag.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LoadgenTag {
    /// A load-generator experiment.
    Loadgen,
}

/// A loadgen experiment file (`kind = "loadgen"`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LoadgenExperiment {
    /// Always `loadgen`.
    pub kind: LoadgenTag,
    /// Short name (results directory, report title).
    pub name: String,
    /// One-line title.
    pub title: String,
    /// Longer description for the report.
    #[serde(default)]
    pub description: String,
    /// The report's tables, in order.
    pub tables: Vec<LoadgenTable>,
    /// Repetitions of every point [default: 3]; the other axes run within each.
    #[serde(default = "three")]
    pub repetitions: u32,
    /// The server.
    pub server: LoadgenServer,
    /// The client's workload.
    pub workload: LoadgenWorkload,
    /// CPUs of server, writer and reader.
    #[serde(default)]
    pub placement: LoadgenPlacement,
    /// Replacements for `--quick`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quick: Option<LoadgenQuick>,
}

/// One point of the plan.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LoadgenParams {
    /// Server engine.
    pub engine: ServeEngine,
    /// Connections in total.
    pub connections: u64,
    /// Active ratio.
    pub active_ratio: Ratio,
    /// Rate in total.
    pub rate: Rate,
    /// `--source-addrs`, if the file lists any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_addrs: Option<String>,
    /// Client processes.
    pub shards: u32,
    /// Repetition, from 1.
    pub repetition: u32,
}

impl LoadgenParams {
    /// The point's file name, stable across runs:
    /// `<engine>-<N>c-<ratio>-<rate>rps[-src<addrs>]-<K>sh-rep<k>`.
    pub fn id(&self) -> String {
        let rate = match self.rate {
            Rate::PerSecond(n) => format!("{n}rps"),
            Rate::Max => "max".into(),
        };
        let src = self
            .source_addrs
            .as_deref()
            .map_or(String::new(), |s| format!("-src{}", s.replace(',', "+")));
        format!(
            "{}-{}c-{}-{rate}{src}-{}sh-rep{}",
            self.engine.name(),
            self.connections,
            self.active_ratio.id_part(),
            self.shards,
            self.repetition
        )
    }

    /// The point's setting: everything but the repetition.
    pub fn setting(&self) -> LoadgenParams {
        LoadgenParams {
            repetition: 0,
            ..self.clone()
        }
    }
}

impl LoadgenExperiment {
    /// Reads and validates an experiment file.
    pub fn from_file(path: &Path) -> Result<LoadgenExperiment, LoadgenError> {
        let text = std::fs::read_to_string(path).map_err(|source| LoadgenError::Read {
            path: path.display().to_string(),
            source,
        })?;
        LoadgenExperiment::from_toml(&text, &path.display().to_string())
    }

    /// Parses and validates experiment text; `origin` names it in errors.
    pub fn from_toml(text: &str, origin: &str) -> Result<LoadgenExperiment, LoadgenError> {
        let de = toml::Deserializer::parse(text).map_err(|e| LoadgenError::Syntax {
            origin: origin.into(),
            message: e.to_string().trim_end().into(),
        })?;
        let exp: LoadgenExperiment =
            serde_path_to_error::deserialize(de).map_err(|e| LoadgenError::Field {
                origin: origin.into(),
                field: e.path().to_string(),
                message: e.inner().message().trim().to_string(),
            })?;
        exp.validate()
            .map_err(|(field, message)| LoadgenError::Field {
                origin: origin.into(),
                field,
                message,
            })?;
        Ok(exp)
    }

    fn validate(&self) -> Result<(), (String, String)> {
        let bad = |f: &str, m: &str| Err((f.to_string(), m.to_string()));
        let ok_name = !self.name.is_empty()
            && self
                .name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "_-.".contains(c));
        if !ok_name {
            return bad("name", "use letters, digits, '_', '-' and '.'");
        }
        if self.tables.is_empty() {
            return bad("tables", "name at least one table");
        }
        if self.repetitions == 0 {
            return bad("repetitions", "must be at least 1");
        }
        if self.server.engines.is_empty() {
            return bad("server.engines", "give at least one engine");
        }
        let w = &self.workload;
        if w.connections.is_empty() {
            return bad("workload.connections", "give at least one count");
        }
        if let Some(i) = w.connections.iter().position(|c| *c == 0) {
            return bad(&format!("workload.connections[{i}]"), "must be at least 1");
        }
        if w.active_ratios.is_empty() {
            return bad("workload.active_ratios", "give at least one ratio");
        }
        if w.rates.is_empty() {
            return bad("workload.rates", "give at least one rate");
        }
        match w.depth {
            Some(0) => return bad("workload.depth", "must be at least 1"),
            Some(_) if !w.rates.contains(&Rate::Max) => {
                return bad("workload.depth", "only with rate \"max\" (closed loop)")
            }
            _ => {}
        }
        if w.shards.is_empty() {
            return bad("workload.shards", "give at least one count");
        }
        if let Some(i) = w.shards.iter().position(|s| *s == 0) {
            return bad(&format!("workload.shards[{i}]"), "must be at least 1");
        }
        if let Some(i) = w.source_addrs.iter().position(|s| {
            s.is_empty()
                || !s
                    .chars()
                    .all(|c| c.is_ascii_hexdigit() || ".:,-".contains(c))
        }) {
            return bad(
                &format!("workload.source_addrs[{i}]"),
                "an address, a range (127.0.0.2-127.0.0.5) or a comma list",
            );
        }
        if let Some(i) = w
            .connections
            .iter()
            .position(|c| w.shards.iter().any(|s| u64::from(*s) > *c))
        {
            return bad(
                &format!("workload.connections[{i}]"),
                "fewer connections than shards",
            );
        }
        if self.placement.reader_cpu.is_some() && self.placement.writer_cpu.is_none() {
            return bad(
                "placement.reader_cpu",
                "give writer_cpu too (load pins the writer to the first CPU of its list)",
            );
        }
        if self.tables.contains(&LoadgenTable::Memory) && w.connections.len() < 2 {
            return bad(
                "tables",
                "\"memory\" needs two or more connection counts (the slope between them)",
            );
        }
        if self.tables.contains(&LoadgenTable::Shards) && !w.shards.contains(&1) {
            return bad(
                "tables",
                "\"shards\" compares with one process: put 1 in workload.shards",
            );
        }
        if let Some(q) = &self.quick {
            if q.repetitions == Some(0) {
                return bad("quick.repetitions", "must be at least 1");
            }
            if q.connections.as_ref().is_some_and(|c| c.is_empty()) {
                return bad("quick.connections", "give at least one count");
            }
            if q.engines.as_ref().is_some_and(|e| e.is_empty()) {
                return bad("quick.engines", "give at least one engine");
            }
        }
        Ok(())
    }

    fn quick_field<T>(&self, quick: bool, f: impl Fn(&LoadgenQuick) -> Option<T>) -> Option<T> {
        if quick {
            self.quick.as_ref().and_then(f)
        } else {
            None
        }
    }

    /// The measured time (the `[quick]` one with `quick`).
    pub fn duration(&self, quick: bool) -> Duration {
        self.quick_field(quick, |q| q.duration)
            .unwrap_or(self.workload.duration)
            .0
    }

    /// Every point: repetitions outermost, then connections, ratios, rates,
    /// source addresses, shards, and engines innermost, so engines (and
    /// shard counts) alternate within a repetition.
    pub fn plan(&self, quick: bool) -> Vec<LoadgenParams> {
        let reps = self
            .quick_field(quick, |q| q.repetitions)
            .unwrap_or(self.repetitions);
        let conns = self
            .quick_field(quick, |q| q.connections.clone())
            .unwrap_or_else(|| self.workload.connections.clone());
        let engines = self
            .quick_field(quick, |q| q.engines.clone())
            .unwrap_or_else(|| self.server.engines.clone());
        let w = &self.workload;
        let sources: Vec<Option<String>> = if w.source_addrs.is_empty() {
            vec![None]
        } else {
            w.source_addrs.iter().cloned().map(Some).collect()
        };
        let mut plan = Vec::new();
        for repetition in 1..=reps {
            for &connections in &conns {
                for ratio in &w.active_ratios {
                    for &rate in &w.rates {
                        for src in &sources {
                            for &shards in &w.shards {
                                for &engine in &engines {
                                    plan.push(LoadgenParams {
                                        engine,
                                        connections,
                                        active_ratio: ratio.clone(),
                                        rate,
                                        source_addrs: src.clone(),
                                        shards,
                                        repetition,
                                    });
                                }
                            }
                        }
                    }
                }
            }
        }
        plan
    }

    /// Whether `other` measures the same thing (titles and descriptions
    /// aside): a results directory of `other` may be resumed by this one.
    pub fn same_measurement(&self, other: &LoadgenExperiment) -> bool {
        self.server == other.server
            && self.workload == other.workload
            && self.placement == other.placement
            && self.quick == other.quick
    }
}

fn first_line(s: &str) -> String {
    s.lines().next().unwrap_or_default().trim().to_string()
}

/// What the client (or the shards, merged) measured.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ClientFigures {
    /// Connections established.
    pub established: u64,
    /// Connections that failed to open.
    pub failed_connections: u64,
    /// Seconds from the first connect to the last established.
    pub setup_s: f64,
    /// Connections established per second of set-up.
    pub setup_rate_per_s: f64,
    /// Requests sent in the measured window.
    pub measured_sent: u64,
    /// Responses completed in the measured window.
    pub measured_completed: u64,
    /// Errors of every kind, summed.
    pub errors: u64,
    /// Completed responses per second.
    pub achieved_rate_per_s: f64,
    /// Service latency (send to response), microseconds.
    pub service_latency_us: Summary,
    /// Send lag (actual send after its scheduled instant), microseconds.
    pub send_lag_us: Summary,
    /// Deviation of inter-send gaps from the schedule's, microseconds.
    pub send_deviation_us: DeviationSummary,
    /// Client CPU seconds, user + system (summed over shards).
    pub cpu_s: f64,
    /// Client peak RSS, KiB (as `connlab load` or `connlab merge` reports it).
    pub max_rss_kib: u64,
    /// CPU the writer ran on, as the client reports it.
    #[serde(default)]
    pub writer_cpu: Option<usize>,
    /// CPU the reader ran on.
    #[serde(default)]
    pub reader_cpu: Option<usize>,
    /// Shards merged: the spread of their start instants, ms.
    #[serde(default)]
    pub start_skew_ms: Option<f64>,
    /// Warnings the client gave.
    #[serde(default)]
    pub warnings: Vec<String>,
}

impl ClientFigures {
    /// The figures of a `connlab load` (or merged) result.
    pub fn from_result(r: &LoadResult) -> ClientFigures {
        ClientFigures {
            established: r.connections.established,
            failed_connections: r.connections.failed,
            setup_s: r.connections.setup_s,
            setup_rate_per_s: r.connections.setup_rate_per_s,
            measured_sent: r.requests.sent,
            measured_completed: r.requests.completed,
            errors: r.requests.errors.values().sum(),
            achieved_rate_per_s: r.achieved_rate_per_s,
            service_latency_us: r.service_latency_us,
            send_lag_us: r.send_lag_us,
            send_deviation_us: r.send_deviation_us,
            cpu_s: r.client_cpu_s.user + r.client_cpu_s.sys,
            max_rss_kib: r.client_max_rss_kib,
            writer_cpu: r.placement.writer_cpu,
            reader_cpu: r.placement.reader_cpu,
            start_skew_ms: r.merged.as_ref().map(|m| m.start_skew_ms),
            warnings: r.warnings.clone(),
        }
    }
}

/// What the server's `--stats` said at shutdown.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ServerFigures {
    /// CPU seconds, user + system, over its whole life.
    pub cpu_s: Option<f64>,
    /// Peak RSS, KiB.
    pub max_rss_kib: Option<u64>,
}

/// One finished point of a loadgen sweep (`DIR/points/<id>.json`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LoadgenPoint {
    /// [`LOADGEN_POINT_SCHEMA`].
    pub schema: String,
    /// [`LoadgenParams::id`].
    pub id: String,
    /// What was measured.
    pub params: LoadgenParams,
    /// The client's (or merged shards') figures.
    pub client: ClientFigures,
    /// The server's figures.
    pub server: ServerFigures,
    /// Command lines: the server's first, then each client's.
    pub commands: Vec<Vec<String>>,
    /// Wall-clock seconds of the clients' run.
    pub wall_s: f64,
    /// When the point finished (Unix seconds).
    pub finished_unix_s: f64,
}

/// `DIR/loadgen.json`: the sweep as a whole.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct LoadgenInfo {
    /// [`LOADGEN_SWEEP_SCHEMA`].
    pub schema: String,
    /// The experiment as run.
    pub experiment: LoadgenExperiment,
    /// Whether this is a `--quick` sweep.
    pub quick: bool,
    /// Machine, kernel and tool versions.
    pub environment: Environment,
    /// When the sweep first started (Unix seconds).
    pub started_unix_s: f64,
    /// Points in the plan.
    pub points_total: usize,
}

/// A loadgen results directory, read back.
#[derive(Clone, Debug)]
pub struct LoadgenDir {
    /// `loadgen.json`.
    pub info: LoadgenInfo,
    /// Finished points in plan order.
    pub points: Vec<LoadgenPoint>,
}

impl LoadgenDir {
    /// `DIR/loadgen.json`.
    pub fn info_path(dir: &Path) -> PathBuf {
        dir.join("loadgen.json")
    }

    /// `DIR/points/<id>.json`.
    pub fn point_path(dir: &Path, id: &str) -> PathBuf {
        dir.join("points").join(format!("{id}.json"))
    }

    /// `DIR/logs/<id>/`.
    pub fn log_dir(dir: &Path, id: &str) -> PathBuf {
        dir.join("logs").join(id)
    }

    /// Writes `value` as JSON to `path` whole: a temporary file, then a rename.
    pub fn write_json<T: Serialize>(path: &Path, value: &T) -> std::io::Result<()> {
        crate::results::write_json_whole(path, value, true).map_err(std::io::Error::other)
    }

    /// Reads `loadgen.json`.
    pub fn read_info(dir: &Path) -> Result<LoadgenInfo, LoadgenError> {
        read_json(&LoadgenDir::info_path(dir))
    }

    /// Reads one point file.
    pub fn read_point(path: &Path) -> Result<LoadgenPoint, LoadgenError> {
        read_json(path)
    }

    /// Reads a results directory; points not in the plan are left out.
    pub fn open(dir: &Path) -> Result<LoadgenDir, LoadgenError> {
        let info = LoadgenDir::read_info(dir)?;
        let mut points = Vec::new();
        for p in info.experiment.plan(info.quick) {
            let path = LoadgenDir::point_path(dir, &p.id());
            if path.exists() {
                let point = LoadgenDir::read_point(&path)?;
                if point.params == p {
                    points.push(point);
                }
            }
        }
        Ok(LoadgenDir { info, points })
    }
}

fn read_json<T: serde::de::DeserializeOwned>(path: &Path) -> Result<T, LoadgenError> {
    let origin = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|source| LoadgenError::Read {
        path: origin.clone(),
        source,
    })?;
    let mut de = serde_json::Deserializer::from_str(&text);
    serde_path_to_error::deserialize(&mut de).map_err(|e| LoadgenError::Field {
        origin,
        field: e.path().to_string(),
        message: first_line(&e.inner().to_string()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = r#"
kind = "loadgen"
name = "t"
title = "two engines, two sizes"
tables = ["latency", "memory", "shards"]
repetitions = 2

[server]
engines = ["poll", "epoll"]

[workload]
connections = [100, 2000]
active_ratios = ["1/4"]
rates = [2000]
duration = "1s"
shards = [1, 2]

[placement]
server_cpu = 1
writer_cpu = 0
reader_cpu = 1

[quick]
connections = [100]
engines = ["epoll"]
repetitions = 1
"#;

    fn parse(text: &str) -> Result<LoadgenExperiment, LoadgenError> {
        LoadgenExperiment::from_toml(text, "t.toml")
    }

    #[test]
    fn parses_into_typed_values() {
        assert!(
            crate::ExperimentKind::of_text(FILE, "f").ok() == Some(crate::ExperimentKind::Loadgen)
        );
        let e = parse(FILE).unwrap();
        assert_eq!(e.workload.active_ratios[0].value, 0.25);
        assert_eq!(e.workload.rates, [Rate::PerSecond(2000)]);
        assert_eq!(e.workload.response_size, Bytes(10240));
        assert_eq!(e.workload.warmup.0, Duration::from_secs(1));
        assert_eq!(e.server.protocol, WireProtocol::Clb1);
        assert_eq!(e.placement.client_cpu_list().as_deref(), Some("0,1"));
        let plan = e.plan(false);
        assert_eq!(plan.len(), 2 * 2 * 2 * 2);
        assert_eq!(plan[0].id(), "poll-100c-1of4-2000rps-1sh-rep1");
        assert_eq!(plan[1].id(), "epoll-100c-1of4-2000rps-1sh-rep1");
        assert_eq!(plan[2].id(), "poll-100c-1of4-2000rps-2sh-rep1");
        let quick: Vec<String> = e.plan(true).iter().map(LoadgenParams::id).collect();
        assert_eq!(
            quick,
            [
                "epoll-100c-1of4-2000rps-1sh-rep1",
                "epoll-100c-1of4-2000rps-2sh-rep1"
            ]
        );
        let src = parse(&FILE.replace(
            "shards = [1, 2]",
            "shards = [1, 2]\nsource_addrs = [\"127.0.0.1\", \"127.0.0.2-127.0.0.5\"]",
        ))
        .unwrap();
        assert!(src
            .plan(false)
            .iter()
            .any(|p| p.id() == "epoll-2000c-1of4-2000rps-src127.0.0.2-127.0.0.5-2sh-rep2"));
    }

    #[test]
    fn serializes_back_to_the_same_experiment() {
        let e = parse(FILE).unwrap();
        let json = serde_json::to_string(&e).unwrap();
        let back: LoadgenExperiment = serde_json::from_str(&json).unwrap();
        assert_eq!(back, e);
        assert!(back.same_measurement(&e));
    }

    fn error(text: &str) -> String {
        parse(text).unwrap_err().to_string()
    }

    #[test]
    fn errors_name_the_file_and_field() {
        for (from, to, field) in [
            (
                "engines = [\"poll\", \"epoll\"]",
                "engines = [\"poll\", \"epol\"]",
                "server.engines[1]:",
            ),
            (
                "active_ratios = [\"1/4\"]",
                "active_ratios = [\"1/4\", \"2\"]",
                "workload.active_ratios[1]:",
            ),
            ("rates = [2000]", "rates = [\"fast\"]", "workload.rates[0]:"),
            (
                "duration = \"1s\"",
                "duration = \"soon\"",
                "workload.duration:",
            ),
            (
                "duration = \"1s\"",
                "duration = \"1s\"\nrate = 5",
                "workload.rate: unknown field",
            ),
            (
                "connections = [100, 2000]",
                "connections = [100]",
                "tables:",
            ),
            ("shards = [1, 2]", "shards = [2]", "tables:"),
            (
                "connections = [100, 2000]",
                "connections = [100, 0]",
                "workload.connections[1]:",
            ),
            ("writer_cpu = 0\n", "", "placement.reader_cpu:"),
            (
                "tables = [\"latency\", \"memory\", \"shards\"]",
                "tables = [\"speed\"]",
                "tables[0]:",
            ),
            (
                "rates = [2000]",
                "rates = [2000]\ndepth = 2",
                "workload.depth:",
            ),
            ("kind = \"loadgen\"", "kind = \"peers\"", "kind:"),
            ("repetitions = 1", "repetitions = 0", "quick.repetitions:"),
        ] {
            let text = FILE.replace(from, to);
            assert_ne!(text, FILE, "{from}");
            let e = error(&text);
            assert!(e.starts_with(&format!("t.toml: {field}")), "{to}: {e}");
        }
    }
}

#[cfg(test)]
mod shipped {
    use super::LoadgenExperiment;
    use std::path::Path;

    #[test]
    fn the_shipped_loadgen_experiments_parse() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../experiments");
        let mut names = Vec::new();
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let text = std::fs::read_to_string(&path).unwrap_or_default();
            if path.extension().is_some_and(|e| e == "toml")
                && crate::ExperimentKind::of_text(&text, "f").ok()
                    == Some(crate::ExperimentKind::Loadgen)
            {
                let e = LoadgenExperiment::from_file(&path).unwrap_or_else(|e| panic!("{e}"));
                let (quick, full) = (e.plan(true), e.plan(false));
                assert!(!quick.is_empty() && quick.len() <= full.len());
                assert!(e.duration(true) < e.duration(false), "{}", path.display());
                assert!(e.repetitions >= 3, "{}", path.display());
                names.push(e.name);
            }
        }
        names.sort();
        assert_eq!(
            names,
            [
                "loadgen-engines",
                "loadgen-pacing",
                "loadgen-scale",
                "loadgen-shards"
            ]
        );
    }

    /// One test per shipped file, so a failure names the file.
    fn parses(file: &str) -> LoadgenExperiment {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../experiments")
            .join(file);
        LoadgenExperiment::from_file(&path).unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn pacing_parses() {
        let e = parses("loadgen-pacing.toml");
        assert_eq!(e.placement.client_cpu_list().as_deref(), Some("0,1"));
        assert_eq!(e.plan(false)[0].connections, 1000);
    }

    #[test]
    fn scale_parses() {
        let e = parses("loadgen-scale.toml");
        assert_eq!(e.workload.source_addrs.len(), 2);
        assert_eq!(e.workload.connections, [100, 19000]);
    }

    #[test]
    fn engines_parses() {
        let e = parses("loadgen-engines.toml");
        assert_eq!(e.server.engines.len(), 5);
        assert_eq!(e.workload.connections, [400, 2000, 10000]);
    }

    #[test]
    fn shards_parses() {
        let e = parses("loadgen-shards.toml");
        assert_eq!(e.workload.shards, [1, 2]);
    }
}
