//! Layer-parallel pipeline experiments (`connlab sweep` of a file with a
//! `[pipeline]` section): the fifth paper's tables, layers × message sizes,
//! in both modes, over each line, and the results directory they write.
//!
//! ```text
//! DIR/experiment.toml   the experiment file as run
//! DIR/pipeline.json     PipelineSweep: environment, every finished run
//! DIR/runs.csv          one row per run (pandas.read_csv)
//! ```
//!
//! `pipeline.json` is rewritten (temporary name, then rename) after every
//! run, so an interrupted sweep keeps what it measured and resumes from it.

use crate::experiment::{parse_link_rate, ExperimentError, SizeValue};
use connlab_os::Environment;
use serde::{Deserialize, Serialize};
use std::path::Path;

/// Schema tag of `pipeline.json`.
pub const PIPELINE_SWEEP_SCHEMA: &str = "connlab.pipeline.sweep/1";

/// A pipeline experiment file.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PipelineExperiment {
    /// Short name (results directory, report title).
    pub name: String,
    /// One-line title.
    pub title: String,
    /// Longer description for the report.
    #[serde(default)]
    pub description: String,
    /// The matrix.
    pub pipeline: PipelineMatrix,
    /// Replacements for `--quick`.
    #[serde(default)]
    pub quick: Option<PipelineQuick>,
    /// The paper's values, to print beside ours.
    #[serde(default)]
    pub paper: Vec<PipelinePaperValue>,
}

/// `[pipeline]`: what every run varies and shares.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PipelineMatrix {
    /// Layer counts; 1 is added when missing (relative capacity needs it).
    pub layers: Vec<u32>,
    /// User bytes per message: numbers or text (`8KiB`).
    pub message_sizes: Vec<SizeValue>,
    /// Messages per run: one count or a list (the paper's 500, and more for
    /// stable numbers).
    pub messages: MessageCounts,
    /// `layer-parallel`, `run-to-completion`.
    pub modes: Vec<String>,
    /// Lines: `memory:800mbit`, `memory:unlimited`, `udp`.
    pub links: Vec<String>,
    /// Window of every layer, in PDUs (the library's default when absent).
    #[serde(default)]
    pub window: Option<u32>,
    /// Loss probability of the line (0 to 0.5).
    #[serde(default)]
    pub loss: f64,
    /// Repetitions of every run.
    #[serde(default = "one")]
    pub repetitions: u32,
    /// Threads per side in run-to-completion mode.
    #[serde(default = "one_usize")]
    pub rtc_threads: usize,
    /// CPUs for the threads, as `connlab pipeline --cpu-map` takes them.
    #[serde(default)]
    pub cpu_map: Option<String>,
    /// Seed of the data and of the line's losses.
    #[serde(default = "one_u64")]
    pub seed: u64,
}

fn one() -> u32 {
    1
}
fn one_usize() -> usize {
    1
}
fn one_u64() -> u64 {
    1
}

/// `[quick]`: a smaller matrix for `--quick`.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PipelineQuick {
    /// Layer counts.
    #[serde(default)]
    pub layers: Option<Vec<u32>>,
    /// Message sizes.
    #[serde(default)]
    pub message_sizes: Option<Vec<SizeValue>>,
    /// Messages per run.
    #[serde(default)]
    pub messages: Option<MessageCounts>,
    /// Repetitions.
    #[serde(default)]
    pub repetitions: Option<u32>,
}

/// `messages = 500` or `messages = [500, 20000]`.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(untagged)]
pub enum MessageCounts {
    /// One count.
    One(u64),
    /// Several counts, each a dimension value.
    Many(Vec<u64>),
}

impl MessageCounts {
    /// The counts as a list.
    pub fn counts(&self) -> Vec<u64> {
        match self {
            MessageCounts::One(n) => vec![*n],
            MessageCounts::Many(v) => v.clone(),
        }
    }
}

/// One value the paper reports, for one message size and layer count.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PipelinePaperValue {
    /// User bytes per message; absent: every size.
    #[serde(default)]
    pub message_size: Option<SizeValue>,
    /// Layers.
    pub layers: u32,
    /// Efficiency (relative capacity / layers).
    #[serde(default)]
    pub efficiency: Option<f64>,
    /// Relative capacity (throughput × layers / throughput at one layer).
    #[serde(default)]
    pub relative_capacity: Option<f64>,
    /// Where the value comes from (the paper's text, a table).
    #[serde(default)]
    pub source: Option<String>,
}

/// A line as an experiment names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum LinkSpec {
    /// The in-process wire; `None` is unlimited.
    Memory(Option<u64>),
    /// UDP sockets on loopback.
    Udp,
}

impl LinkSpec {
    /// Parses `memory`, `memory:800mbit`, `memory:unlimited` or `udp`.
    pub fn parse(text: &str) -> Result<LinkSpec, String> {
        let t = text.trim();
        match t.split_once(':') {
            None if t == "udp" => Ok(LinkSpec::Udp),
            None if t == "memory" => Ok(LinkSpec::Memory(None)),
            Some(("memory", rate)) => Ok(LinkSpec::Memory(parse_link_rate(rate)?)),
            _ => Err(format!(
                "{text:?}: a line is memory, memory:RATE (800mbit, unlimited) or udp"
            )),
        }
    }

    /// The label used in ids and tables: `memory-800mbit`, `memory-unlimited`, `udp`.
    pub fn label(&self) -> String {
        match self {
            LinkSpec::Udp => "udp".into(),
            LinkSpec::Memory(None) => "memory-unlimited".into(),
            LinkSpec::Memory(Some(bps)) if bps % 1_000_000 == 0 => {
                format!("memory-{}mbit", bps / 1_000_000)
            }
            LinkSpec::Memory(Some(bps)) => format!("memory-{bps}bit"),
        }
    }
}

/// One run of a pipeline experiment.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PipelineRunParams {
    /// The line.
    pub link: LinkSpec,
    /// `layer-parallel` or `run-to-completion`.
    pub mode: String,
    /// User bytes per message.
    pub message_size: u64,
    /// Layers per side.
    pub layers: u32,
    /// Messages.
    pub messages: u64,
    /// Repetition, from 1.
    pub repetition: u32,
}

impl PipelineRunParams {
    /// A stable identifier: `layer-parallel-memory-800mbit-s8192-m500-l5-rep1`.
    pub fn id(&self) -> String {
        format!(
            "{}-{}-s{}-m{}-l{}-rep{}",
            self.mode,
            self.link.label(),
            self.message_size,
            self.messages,
            self.layers,
            self.repetition
        )
    }

    /// The same run at one layer: its throughput is the baseline of
    /// relative capacity.
    pub fn baseline(&self) -> PipelineRunParams {
        PipelineRunParams {
            layers: 1,
            ..self.clone()
        }
    }
}

/// The modes a pipeline experiment may name.
pub const PIPELINE_MODES: [&str; 2] = ["layer-parallel", "run-to-completion"];

impl PipelineExperiment {
    /// Whether `text` (TOML) is a pipeline experiment: it has a `[pipeline]` table.
    pub fn is_pipeline(text: &str) -> bool {
        toml::from_str::<toml::Table>(text).is_ok_and(|t| t.contains_key("pipeline"))
    }

    /// Reads and validates a file.
    pub fn from_file(path: &Path) -> Result<PipelineExperiment, ExperimentError> {
        let text = std::fs::read_to_string(path).map_err(|source| ExperimentError::Read {
            path: path.display().to_string(),
            source,
        })?;
        PipelineExperiment::from_toml(&text, &path.display().to_string())
    }

    /// Parses and validates; `origin` names the text in errors.
    pub fn from_toml(text: &str, origin: &str) -> Result<PipelineExperiment, ExperimentError> {
        let exp: PipelineExperiment = toml::from_str(text).map_err(|e| ExperimentError::Parse {
            origin: origin.to_string(),
            message: e.to_string().trim_end().to_string(),
        })?;
        let bad = |field: &str, message: String| ExperimentError::Invalid {
            origin: origin.to_string(),
            field: field.to_string(),
            message,
        };
        let m = &exp.pipeline;
        let layers = |field: &str, l: &[u32]| -> Result<(), ExperimentError> {
            if l.is_empty() {
                return Err(bad(field, "name at least one layer count".into()));
            }
            if let Some(n) = l.iter().find(|n| !(1..=16).contains(*n)) {
                return Err(bad(field, format!("{n}: between 1 and 16")));
            }
            Ok(())
        };
        let sizes = |field: &str, s: &[SizeValue]| -> Result<(), ExperimentError> {
            if s.is_empty() {
                return Err(bad(field, "name at least one message size".into()));
            }
            for (i, v) in s.iter().enumerate() {
                let n = size_of(v).map_err(|e| bad(&format!("{field}[{i}]"), e))?;
                if !(8..=65_000).contains(&n) {
                    return Err(bad(
                        &format!("{field}[{i}]"),
                        format!("{n} B: between 8 B and 65,000 B (one UDP datagram)"),
                    ));
                }
            }
            Ok(())
        };
        layers("pipeline.layers", &m.layers)?;
        sizes("pipeline.message_sizes", &m.message_sizes)?;
        let counts = m.messages.counts();
        if counts.is_empty() || counts.contains(&0) {
            return Err(bad("pipeline.messages", "counts of at least 1".into()));
        }
        if m.modes.is_empty() {
            return Err(bad("pipeline.modes", "name at least one mode".into()));
        }
        for (i, mode) in m.modes.iter().enumerate() {
            if !PIPELINE_MODES.contains(&mode.as_str()) {
                return Err(bad(
                    &format!("pipeline.modes[{i}]"),
                    format!("{mode:?}: layer-parallel or run-to-completion"),
                ));
            }
        }
        if m.links.is_empty() {
            return Err(bad("pipeline.links", "name at least one line".into()));
        }
        for (i, l) in m.links.iter().enumerate() {
            LinkSpec::parse(l).map_err(|e| bad(&format!("pipeline.links[{i}]"), e))?;
        }
        if !(0.0..=0.5).contains(&m.loss) {
            return Err(bad(
                "pipeline.loss",
                format!("{}: between 0 and 0.5", m.loss),
            ));
        }
        if m.repetitions == 0 {
            return Err(bad("pipeline.repetitions", "at least 1".into()));
        }
        if !(1..=16).contains(&m.rtc_threads) {
            return Err(bad(
                "pipeline.rtc_threads",
                format!("{}: between 1 and 16", m.rtc_threads),
            ));
        }
        if m.window == Some(0) {
            return Err(bad("pipeline.window", "at least 1".into()));
        }
        if let Some(q) = &exp.quick {
            if let Some(l) = &q.layers {
                layers("quick.layers", l)?;
            }
            if let Some(s) = &q.message_sizes {
                sizes("quick.message_sizes", s)?;
            }
            if q.messages
                .as_ref()
                .is_some_and(|m| m.counts().is_empty() || m.counts().contains(&0))
                || q.repetitions == Some(0)
            {
                return Err(bad("quick", "messages and repetitions: at least 1".into()));
            }
        }
        for (i, p) in exp.paper.iter().enumerate() {
            if let Some(s) = &p.message_size {
                size_of(s).map_err(|e| bad(&format!("paper[{i}].message_size"), e))?;
            }
        }
        Ok(exp)
    }

    /// Every run, repetitions outermost, then line, message size and mode,
    /// layers innermost and ascending (so a run's one-layer baseline has
    /// already run when it finishes).
    pub fn plan(&self, quick: bool) -> Vec<PipelineRunParams> {
        let q = if quick {
            self.quick.clone().unwrap_or_default()
        } else {
            PipelineQuick::default()
        };
        let m = &self.pipeline;
        let mut layers = q.layers.unwrap_or_else(|| m.layers.clone());
        layers.push(1);
        layers.sort_unstable();
        layers.dedup();
        let sizes: Vec<u64> = q
            .message_sizes
            .as_ref()
            .unwrap_or(&m.message_sizes)
            .iter()
            .filter_map(|s| size_of(s).ok())
            .collect();
        let counts = q.messages.as_ref().unwrap_or(&m.messages).counts();
        let reps = q.repetitions.unwrap_or(m.repetitions);
        let links: Vec<LinkSpec> = m
            .links
            .iter()
            .filter_map(|l| LinkSpec::parse(l).ok())
            .collect();
        let mut plan = Vec::new();
        for repetition in 1..=reps {
            for &messages in &counts {
                for link in &links {
                    for &message_size in &sizes {
                        for mode in &m.modes {
                            for &l in &layers {
                                plan.push(PipelineRunParams {
                                    link: *link,
                                    mode: mode.clone(),
                                    message_size,
                                    layers: l,
                                    messages,
                                    repetition,
                                });
                            }
                        }
                    }
                }
            }
        }
        plan
    }

    /// The paper's value for a message size and layer count, if it gives one.
    pub fn paper_value(&self, message_size: u64, layers: u32) -> Option<&PipelinePaperValue> {
        self.paper.iter().find(|p| {
            p.layers == layers
                && p.message_size
                    .as_ref()
                    .is_none_or(|s| size_of(s).ok() == Some(message_size))
        })
    }
}

fn size_of(v: &SizeValue) -> Result<u64, String> {
    match v {
        SizeValue::Bytes(n) => Ok(*n),
        SizeValue::Text(t) => connlab_measure::units::parse_size(t),
    }
}

/// One finished run in `pipeline.json`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct PipelineRunRecord {
    /// `PipelineRunParams::id`.
    pub id: String,
    /// The parameters.
    pub params: PipelineRunParams,
    /// The library's result (throughput, per layer, projection).
    pub result: connlab_pipeline::PipelineResult,
    /// Throughput × layers / the one-layer throughput of the same mode,
    /// line, size and repetition (the paper's definition).
    pub relative_capacity: Option<f64>,
    /// Relative capacity / layers.
    pub efficiency: Option<f64>,
    /// The same from the projected (one core per thread) throughputs.
    pub projected_relative_capacity: Option<f64>,
    /// Projected relative capacity / layers.
    pub projected_efficiency: Option<f64>,
    /// Unix seconds when the run finished.
    pub finished_unix_s: f64,
}

/// `pipeline.json`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct PipelineSweep {
    /// [`PIPELINE_SWEEP_SCHEMA`].
    pub schema: String,
    /// The experiment as run.
    pub experiment: PipelineExperiment,
    /// Whether `--quick` reduced it.
    pub quick: bool,
    /// Where it ran.
    pub environment: Environment,
    /// Unix seconds at the start.
    pub started_unix_s: f64,
    /// Runs planned.
    pub runs_total: usize,
    /// Finished runs, in plan order.
    pub runs: Vec<PipelineRunRecord>,
}

/// Relative capacity and efficiency of `throughput` at `layers` against
/// the one-layer `base` (the paper's definitions); `None` without a base.
pub fn capacity(throughput: f64, layers: u32, base: Option<f64>) -> (Option<f64>, Option<f64>) {
    match base {
        Some(b) if b > 0.0 => {
            let rc = connlab_pipeline::relative_capacity(throughput, layers as usize, b);
            (Some(rc), Some(rc / f64::from(layers)))
        }
        _ => (None, None),
    }
}

impl PipelineSweep {
    /// Reads `DIR/pipeline.json`.
    pub fn open(dir: &Path) -> Result<PipelineSweep, crate::ResultsError> {
        let path = dir.join("pipeline.json");
        let text = std::fs::read_to_string(&path).map_err(|source| crate::ResultsError::Io {
            path: path.display().to_string(),
            source,
        })?;
        let sweep: PipelineSweep =
            serde_json::from_str(&text).map_err(|e| crate::ResultsError::Format {
                path: path.display().to_string(),
                message: e.to_string(),
            })?;
        if sweep.schema != PIPELINE_SWEEP_SCHEMA {
            return Err(crate::ResultsError::Format {
                path: path.display().to_string(),
                message: format!(
                    "schema {:?}, expected {PIPELINE_SWEEP_SCHEMA}",
                    sweep.schema
                ),
            });
        }
        Ok(sweep)
    }

    /// Writes `DIR/pipeline.json` (temporary name, then rename) and `DIR/runs.csv`.
    pub fn save(&self, dir: &Path) -> Result<(), crate::ResultsError> {
        let io = |path: &Path| {
            let path = path.display().to_string();
            move |source| crate::ResultsError::Io { path, source }
        };
        let path = dir.join("pipeline.json");
        let tmp = dir.join(".pipeline.json.tmp");
        let json = serde_json::to_string_pretty(self).map_err(|e| crate::ResultsError::Format {
            path: path.display().to_string(),
            message: e.to_string(),
        })?;
        std::fs::write(&tmp, json + "\n").map_err(io(&tmp))?;
        std::fs::rename(&tmp, &path).map_err(io(&path))?;
        let csv = dir.join("runs.csv");
        std::fs::write(&csv, self.csv()).map_err(io(&csv))
    }

    /// One row per run, for pandas.
    pub fn csv(&self) -> String {
        let mut out = String::from(
            "id,mode,link,message_size,layers,repetition,messages,messages_delivered,verified,\
             throughput_mbit_s,messages_per_s,relative_capacity,efficiency,\
             projected_throughput_mbit_s,projected_relative_capacity,projected_efficiency,\
             projected_bottleneck,retransmissions,elapsed_s\n",
        );
        let opt = |v: Option<f64>| v.map_or(String::new(), |v| format!("{v:.4}"));
        for r in &self.runs {
            let x = &r.result;
            out += &format!(
                "{},{},{},{},{},{},{},{},{},{:.3},{:.1},{},{},{:.3},{},{},{},{},{:.4}\n",
                r.id,
                r.params.mode,
                r.params.link.label(),
                r.params.message_size,
                r.params.layers,
                r.params.repetition,
                r.params.messages,
                x.messages_delivered,
                x.verified,
                x.throughput_mbit_s,
                x.messages_per_s,
                opt(r.relative_capacity),
                opt(r.efficiency),
                x.projected_throughput_mbit_s,
                opt(r.projected_relative_capacity),
                opt(r.projected_efficiency),
                x.projected_bottleneck.replace(',', ";"),
                x.retransmissions,
                x.elapsed_s
            );
        }
        out
    }

    /// The finished run with these parameters.
    pub fn run(&self, params: &PipelineRunParams) -> Option<&PipelineRunRecord> {
        self.runs.iter().find(|r| r.params == *params)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = r#"
name = "p"
title = "P"
[pipeline]
layers = [3, 5]
message_sizes = ["1KiB", 8192]
messages = 500
modes = ["layer-parallel", "run-to-completion"]
links = ["memory:800mbit", "memory:unlimited"]
[quick]
layers = [3]
messages = 50
[[paper]]
layers = 5
efficiency = 0.9
"#;

    #[test]
    fn plans_layers_innermost_with_the_one_layer_baseline() {
        let e = PipelineExperiment::from_toml(FILE, "p.toml").unwrap();
        assert!(PipelineExperiment::is_pipeline(FILE));
        let plan = e.plan(false);
        assert_eq!(plan.len(), 2 * 2 * 2 * 3);
        assert_eq!(
            plan.iter().take(3).map(|p| p.layers).collect::<Vec<_>>(),
            [1, 3, 5]
        );
        assert_eq!(
            plan[0].id(),
            "layer-parallel-memory-800mbit-s1024-m500-l1-rep1"
        );
        assert_eq!(plan[1].baseline(), plan[0]);
        let quick = e.plan(true);
        assert_eq!(quick.len(), 2 * 2 * 2 * 2);
        assert!(quick.iter().all(|p| p.messages == 50));
        assert_eq!(e.paper_value(8192, 5).and_then(|p| p.efficiency), Some(0.9));
        assert!(e.paper_value(8192, 3).is_none());
    }

    #[test]
    fn bad_values_name_their_field() {
        for (from, to, field) in [
            ("layers = [3, 5]", "layers = [0]", "pipeline.layers"),
            ("layers = [3, 5]", "layers = []", "pipeline.layers"),
            ("\"1KiB\", 8192", "\"1KiB\", 4", "pipeline.message_sizes[1]"),
            ("messages = 500", "messages = 0", "pipeline.messages"),
            ("messages = 500", "messages = [500, 0]", "pipeline.messages"),
            ("\"run-to-completion\"]", "\"rtc\"]", "pipeline.modes[1]"),
            (
                "\"memory:800mbit\",",
                "\"memory:fast\",",
                "pipeline.links[0]",
            ),
        ] {
            let text = FILE.replace(from, to);
            let err = PipelineExperiment::from_toml(&text, "p.toml")
                .unwrap_err()
                .to_string();
            assert!(err.contains(field), "{to}: {err}");
        }
        let err = PipelineExperiment::from_toml("[pipeline]\nlayers = 3\n", "x.toml")
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("x.toml"), "{err}");
    }

    #[test]
    fn links_parse_and_label() {
        assert_eq!(
            LinkSpec::parse("memory:800mbit"),
            Ok(LinkSpec::Memory(Some(800_000_000)))
        );
        assert_eq!(LinkSpec::parse("memory"), Ok(LinkSpec::Memory(None)));
        assert_eq!(LinkSpec::parse("udp"), Ok(LinkSpec::Udp));
        assert!(LinkSpec::parse("tcp").is_err());
        assert_eq!(
            LinkSpec::Memory(Some(800_000_000)).label(),
            "memory-800mbit"
        );
        assert_eq!(capacity(50.0, 5, Some(100.0)), (Some(2.5), Some(0.5)));
        assert_eq!(capacity(50.0, 5, None), (None, None));
    }
}
