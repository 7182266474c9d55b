//! The pipeline experiment file: the matrix of layers and sizes, the lines,
//! quick settings, and the runs of its sweep.

use super::paper::{size_of, validate_paper, PipelinePaper, PipelinePaperCell, PipelinePaperLine};
use crate::experiment::{parse_link_rate, ExperimentError, SizeValue};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;

/// A pipeline experiment file.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PipelineExperiment {
    /// The `kind = "pipeline"` tag (see [`ExperimentKind`](crate::ExperimentKind));
    /// absent in older files. Not written to `pipeline.json`, whose format
    /// predates it.
    #[serde(default, skip_serializing)]
    pub kind: Option<crate::ExperimentKind>,
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
    /// The paper's values and claims, to print and judge beside ours.
    #[serde(default)]
    pub paper: Option<PipelinePaper>,
    /// `[validity]`: the gates every run must pass (`completion`, `steal`,
    /// `foreign_cpu`, `machine`) and the attempts per run.
    #[serde(default)]
    pub validity: crate::validity::ValidityLimits,
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
    /// `layer-parallel`, `run-to-completion`, `run-to-completion-shared`.
    pub modes: Vec<crate::values::PipelineMode>,
    /// Lines: `memory:800mbit`, `memory:unlimited`, `udp`, or
    /// `memory:per-size` (paced at the rate `line_per_size` gives each
    /// message size).
    pub links: Vec<String>,
    /// `[pipeline.line_per_size]`: the rate of the `memory:per-size` line
    /// for each message size, keyed by size (`1024`, `"8KiB"`), valued as
    /// `memory:RATE` takes rates (`"4.7mbit"`). Required with that line, for
    /// every size the matrix and `[quick]` run; not allowed without it.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub line_per_size: BTreeMap<String, String>,
    /// Window of every layer, in PDUs (the library's default when absent).
    #[serde(default)]
    pub window: Option<u32>,
    /// Loss probability of the line (0 to 0.5).
    #[serde(default)]
    pub loss: f64,
    /// Also run the line alone (no layer, layer-parallel threads: source,
    /// two line threads, sink) at every size over every lossless memory
    /// line: the counterpart of the paper's loop-back figure.
    #[serde(default)]
    pub line_alone: bool,
    /// Repetitions of every run.
    #[serde(default = "one")]
    pub repetitions: u32,
    /// Threads per side in run-to-completion mode.
    #[serde(default = "one_usize")]
    pub rtc_threads: usize,
    /// Workers per side in `run-to-completion-shared` mode (2 to 16): each
    /// takes whole messages through every layer, all of them sharing each
    /// layer's connection state under its lock.
    #[serde(default = "two_usize")]
    pub shared_workers: usize,
    /// CPUs for the threads, as `connlab pipeline --cpu-map` takes them.
    #[serde(default)]
    pub cpu_map: Option<String>,
    /// Seed of the data and of the line's losses.
    #[serde(default = "one_u64")]
    pub seed: u64,
}

pub(super) fn one() -> u32 {
    1
}
fn one_usize() -> usize {
    1
}
fn two_usize() -> usize {
    2
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

pub(super) fn layer_parallel() -> String {
    "layer-parallel".into()
}

/// A line as an experiment names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum LinkSpec {
    /// The in-process wire; `None` is unlimited.
    Memory(Option<u64>),
    /// The in-process wire paced at a rate per message size
    /// (`[pipeline.line_per_size]`; see [`PipelineExperiment::line_rate`]).
    MemoryPerSize,
    /// UDP sockets on loopback.
    Udp,
}

/// How `links` names the line paced per message size.
pub(super) const PER_SIZE_LINK: &str = "memory:per-size";

impl LinkSpec {
    /// Parses `memory`, `memory:800mbit`, `memory:unlimited`,
    /// `memory:per-size` or `udp`.
    pub fn parse(text: &str) -> Result<LinkSpec, String> {
        let t = text.trim();
        match t.split_once(':') {
            None if t == "udp" => Ok(LinkSpec::Udp),
            None if t == "memory" => Ok(LinkSpec::Memory(None)),
            Some(("memory", "per-size")) => Ok(LinkSpec::MemoryPerSize),
            Some(("memory", rate)) => Ok(LinkSpec::Memory(parse_link_rate(rate)?)),
            _ => Err(format!(
                "{text:?}: a line is memory, memory:RATE (800mbit, unlimited), {PER_SIZE_LINK} or udp"
            )),
        }
    }

    /// Whether this is an in-process wire (which may carry the line alone).
    pub fn is_memory(&self) -> bool {
        matches!(self, LinkSpec::Memory(_) | LinkSpec::MemoryPerSize)
    }

    /// The label used in ids and tables: `memory-800mbit`,
    /// `memory-unlimited`, `memory-per-size`, `udp`.
    pub fn label(&self) -> String {
        match self {
            LinkSpec::Udp => "udp".into(),
            LinkSpec::MemoryPerSize => "memory-per-size".into(),
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
    /// `layer-parallel`, `run-to-completion` or `run-to-completion-shared`.
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
pub const PIPELINE_MODES: [&str; 3] = [
    "layer-parallel",
    "run-to-completion",
    "run-to-completion-shared",
];

impl PipelineExperiment {
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
        crate::kind::expect(text, origin, &[crate::ExperimentKind::Pipeline])?;
        let exp: PipelineExperiment = crate::values::parse_toml(text, origin)?;
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
        if m.links.is_empty() {
            return Err(bad("pipeline.links", "name at least one line".into()));
        }
        for (i, l) in m.links.iter().enumerate() {
            LinkSpec::parse(l).map_err(|e| bad(&format!("pipeline.links[{i}]"), e))?;
        }
        check_line_per_size(&exp, &bad)?;
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
        if !(2..=16).contains(&m.shared_workers) {
            return Err(bad(
                "pipeline.shared_workers",
                format!(
                    "{}: between 2 and 16 (one worker per side is run-to-completion)",
                    m.shared_workers
                ),
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
        if let Some(p) = &exp.paper {
            validate_paper(p, &bad)?;
        }
        crate::singleip::check_validity(&exp.validity, &bad)?;
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
                        if m.line_alone && m.loss == 0.0 && link.is_memory() {
                            plan.push(PipelineRunParams {
                                link: *link,
                                mode: "layer-parallel".into(),
                                message_size,
                                layers: 0,
                                messages,
                                repetition,
                            });
                        }
                        for mode in &m.modes {
                            for &l in &layers {
                                plan.push(PipelineRunParams {
                                    link: *link,
                                    mode: mode.as_str().to_string(),
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

    /// The rate of a line at a message size, bit/s: a `memory:RATE` line's
    /// rate, the `memory:per-size` line's rate for that size from
    /// `[pipeline.line_per_size]`, `None` for an unlimited or UDP line (or
    /// a size the table lacks, which validation rules out for planned runs).
    pub fn line_rate(&self, link: LinkSpec, message_size: u64) -> Option<u64> {
        match link {
            LinkSpec::Memory(rate) => rate,
            LinkSpec::MemoryPerSize => line_per_size(&self.pipeline)
                .ok()?
                .into_iter()
                .find(|(size, _)| *size == message_size)
                .map(|(_, bps)| bps),
            LinkSpec::Udp => None,
        }
    }

    /// The library's mode for a mode as the file names it, with the file's
    /// workers per side for run-to-completion (`rtc_threads`) and
    /// run-to-completion-shared (`shared_workers`).
    pub fn library_mode(&self, mode: &str) -> connlab_pipeline::Mode {
        use crate::values::PipelineMode;
        match mode.parse::<PipelineMode>() {
            Ok(PipelineMode::RunToCompletion) => connlab_pipeline::Mode::RunToCompletion {
                threads: self.pipeline.rtc_threads,
            },
            Ok(PipelineMode::RunToCompletionShared) => connlab_pipeline::Mode::RunToCompletion {
                threads: self.pipeline.shared_workers,
            },
            Ok(PipelineMode::LayerParallel) | Err(_) => connlab_pipeline::Mode::LayerParallel,
        }
    }

    /// Threads a run of `mode` at `layers` starts (see
    /// [`connlab_pipeline::PipelineConfig::thread_count`]).
    pub fn threads_of(&self, mode: &str, layers: u32) -> usize {
        connlab_pipeline::PipelineConfig {
            layers: layers as usize,
            mode: self.library_mode(mode),
            ..connlab_pipeline::PipelineConfig::default()
        }
        .thread_count()
    }

    /// The paper's cell for a message size and layer count, if it has one.
    pub fn paper_cell(&self, message_size: u64, layers: u32) -> Option<&PipelinePaperCell> {
        self.paper
            .as_ref()?
            .cells
            .iter()
            .find(|c| c.layers == layers && size_of(&c.message_size).ok() == Some(message_size))
    }

    /// The paper's line-alone figure for a message size.
    pub fn paper_line(&self, message_size: u64) -> Option<&PipelinePaperLine> {
        self.paper
            .as_ref()?
            .line
            .iter()
            .find(|l| size_of(&l.message_size).ok() == Some(message_size))
    }

    /// The message sizes of the paper's tables, ascending.
    pub fn paper_sizes(&self) -> Vec<u64> {
        let mut v: Vec<u64> = self
            .paper
            .as_ref()
            .map(|p| {
                p.cells
                    .iter()
                    .filter_map(|c| size_of(&c.message_size).ok())
                    .collect()
            })
            .unwrap_or_default();
        v.sort_unstable();
        v.dedup();
        v
    }
}

/// `[pipeline.line_per_size]` as (bytes, bit/s) pairs, or the first entry
/// that does not parse as `(field, message)`.
fn line_per_size(m: &PipelineMatrix) -> Result<Vec<(u64, u64)>, (String, String)> {
    let mut out: Vec<(u64, u64)> = Vec::new();
    for (key, rate) in &m.line_per_size {
        let field = format!("pipeline.line_per_size.{key:?}");
        let size = size_of(&SizeValue::Text(key.clone())).map_err(|e| {
            (
                field.clone(),
                format!("the key must be a message size: {e}"),
            )
        })?;
        let bps = match parse_link_rate(rate) {
            Ok(Some(bps)) if bps > 0 => bps,
            Ok(_) => {
                return Err((
                    field,
                    format!("{rate:?}: a positive rate such as \"4.7mbit\" (not unlimited)"),
                ))
            }
            Err(e) => return Err((field, format!("{rate:?}: {e}"))),
        };
        if out.iter().any(|(s, _)| *s == size) {
            return Err((field, format!("a second rate for {size} B")));
        }
        out.push((size, bps));
    }
    Ok(out)
}

/// `[pipeline.line_per_size]` parses, is given exactly when a line (or the
/// paper's line) is `memory:per-size`, and has a rate for every message
/// size the matrix and `[quick]` run.
fn check_line_per_size(
    exp: &PipelineExperiment,
    bad: &dyn Fn(&str, String) -> ExperimentError,
) -> Result<(), ExperimentError> {
    let m = &exp.pipeline;
    let rates = line_per_size(m).map_err(|(field, message)| bad(&field, message))?;
    let per_size = |l: &String| LinkSpec::parse(l).ok() == Some(LinkSpec::MemoryPerSize);
    let used = m.links.iter().position(per_size);
    match (used, rates.is_empty()) {
        (Some(i), true) => {
            return Err(bad(
                &format!("pipeline.links[{i}]"),
                format!(
                    "{PER_SIZE_LINK} needs [pipeline.line_per_size]: a rate for each message size"
                ),
            ))
        }
        (None, false) => {
            return Err(bad(
                "pipeline.line_per_size",
                format!("given, but no line of pipeline.links is {PER_SIZE_LINK}"),
            ))
        }
        _ => {}
    }
    if used.is_none() {
        return Ok(());
    }
    let quick = exp.quick.as_ref().and_then(|q| q.message_sizes.as_ref());
    for (field, sizes) in [
        ("pipeline.message_sizes", Some(&m.message_sizes)),
        ("quick.message_sizes", quick),
    ] {
        for (i, v) in sizes.into_iter().flatten().enumerate() {
            let Ok(size) = size_of(v) else { continue };
            if !rates.iter().any(|(s, _)| *s == size) {
                return Err(bad(
                    "pipeline.line_per_size",
                    format!("no rate for {size} B ({field}[{i}]); the {PER_SIZE_LINK} line needs one for every size"),
                ));
            }
        }
    }
    Ok(())
}
