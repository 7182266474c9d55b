//! The loadgen experiment file: server, workload, placement, quick
//! settings, and the points of its sweep.

use super::values::{ClientIo, LoadgenTable, Rate, Ratio, WireProtocol};
use super::LoadgenError;
use crate::sweep_file::{read_text, Bytes, Span, SweepFileError};
use connlab_server::EngineKind;
use serde::{Deserialize, Serialize};
use std::path::Path;
use std::time::Duration;

/// `[server]`: the `connlab serve` under the load.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LoadgenServer {
    /// Engines, one point each (innermost axis: they alternate within a repetition).
    pub engines: Vec<EngineKind>,
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
    /// The client's I/O paths (`connlab load --io`), one point each
    /// (default: `["epoll"]`).
    #[serde(default = "default_io")]
    pub io: Vec<ClientIo>,
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
fn default_io() -> Vec<ClientIo> {
    vec![ClientIo::Epoll]
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
    pub engines: Option<Vec<EngineKind>>,
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
    /// `[validity]`: the gates every point must pass and the attempts (a
    /// loadgen sweep has no A/A control: `control` may only be `"none"`).
    #[serde(default)]
    pub validity: crate::validity::ValidityLimits,
}

/// One point of the plan.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LoadgenParams {
    /// Server engine.
    pub engine: EngineKind,
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
    /// The client's I/O path (points written before the axis existed: epoll).
    #[serde(default)]
    pub io: ClientIo,
    /// Repetition, from 1.
    pub repetition: u32,
}

impl LoadgenParams {
    /// The point's file name, stable across runs:
    /// `<engine>-<N>c-<ratio>-<rate>rps[-src<addrs>]-<K>sh[-uring]-rep<k>`
    /// (the client's I/O path is named when it is not epoll, so an epoll
    /// point keeps the id it had before the axis existed).
    pub fn id(&self) -> String {
        let rate = match self.rate {
            Rate::PerSecond(n) => format!("{n}rps"),
            Rate::Max => "max".into(),
        };
        let src = self
            .source_addrs
            .as_deref()
            .map_or(String::new(), |s| format!("-src{}", s.replace(',', "+")));
        let io = match self.io {
            ClientIo::Epoll => String::new(),
            other => format!("-{}", other.name()),
        };
        format!(
            "{}-{}c-{}-{rate}{src}-{}sh{io}-rep{}",
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
        let text = read_text(path)?;
        LoadgenExperiment::from_toml(&text, &path.display().to_string())
    }

    /// Parses and validates experiment text; `origin` names it in errors.
    pub fn from_toml(text: &str, origin: &str) -> Result<LoadgenExperiment, LoadgenError> {
        // Every error names the field and the line (crate::values::parse_toml).
        let exp: LoadgenExperiment = crate::values::parse_toml(text, origin)?;
        exp.validate().map_err(SweepFileError::in_field(origin))?;
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
        if w.io.is_empty() {
            return bad(
                "workload.io",
                "give at least one I/O path (\"epoll\" or \"uring\")",
            );
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
        self.validity.check()?;
        if let Some(Some(c)) = self.validity.control_choice() {
            return Err((
                "validity.control".into(),
                format!(
                    "{c:?}: a loadgen sweep measures no A/A control; leave it out, or write \"none\""
                ),
            ));
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
    /// source addresses, shards, the client's I/O paths, and engines
    /// innermost, so engines (and I/O paths, and shard counts) alternate
    /// within a repetition.
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
                                for &io in &w.io {
                                    for &engine in &engines {
                                        plan.push(LoadgenParams {
                                            engine,
                                            connections,
                                            active_ratio: ratio.clone(),
                                            rate,
                                            source_addrs: src.clone(),
                                            shards,
                                            io,
                                            repetition,
                                        });
                                    }
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
