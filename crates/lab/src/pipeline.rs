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
use crate::verdict::Judgement;
use connlab_os::Environment;
use serde::{Deserialize, Serialize};
use std::path::Path;

/// Schema tag of `pipeline.json`.
pub const PIPELINE_SWEEP_SCHEMA: &str = "connlab.pipeline.sweep/1";

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
    pub modes: Vec<crate::values::PipelineMode>,
    /// Lines: `memory:800mbit`, `memory:unlimited`, `udp`.
    pub links: Vec<String>,
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

/// `[paper]`: what the paper measured and claims, to print and judge
/// beside our runs.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PipelinePaper {
    /// The paper, as the report names it.
    pub citation: String,
    /// The line of the paper's runs, as `[pipeline] links` names lines: our
    /// runs over it (with `messages` messages) stand beside the paper's.
    pub link: String,
    /// Messages per run in the paper.
    pub messages: u64,
    /// What should carry over from the paper's machine to this one (report
    /// text).
    #[serde(default)]
    pub carries_over: String,
    /// Table cells.
    #[serde(default)]
    pub cells: Vec<PipelinePaperCell>,
    /// The line alone (no protocol layer), per message size.
    #[serde(default)]
    pub line: Vec<PipelinePaperLine>,
    /// Statements of the text, each judged on our runs.
    #[serde(default)]
    pub claims: Vec<PipelineClaim>,
}

/// One cell of the paper's tables: a message size and a layer count.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PipelinePaperCell {
    /// The table it comes from, e.g. `Table 2`.
    pub table: String,
    /// User bytes per message.
    pub message_size: SizeValue,
    /// Layers.
    pub layers: u32,
    /// Throughput, Mbit/s.
    pub mbit_s: f64,
    /// Relative capacity (throughput x layers / the one-layer throughput).
    pub relative_capacity: f64,
    /// Efficiency (relative capacity / layers).
    pub efficiency: f64,
}

/// The paper's line alone at one message size.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PipelinePaperLine {
    /// Where the figure is, e.g. `Section 3, loop-back over HIPPI`.
    pub source: String,
    /// User bytes per message.
    pub message_size: SizeValue,
    /// Throughput, Mbit/s.
    pub mbit_s: f64,
}

/// What a claim measures.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ClaimStatistic {
    /// Efficiency at each of `layers` and each message size, within
    /// `expect_min` ..= `expect_max`.
    Efficiency,
    /// Relative capacity, the same way.
    RelativeCapacity,
    /// Throughput at `layers` / the line alone, within the bounds.
    LineShare,
    /// Efficiency at the most `layers` below that at the fewest, at every
    /// message size.
    EfficiencyFalls,
    /// Not measurable here; `unmeasurable` says why.
    NotMeasured,
}

/// One statement of the paper.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PipelineClaim {
    /// Short id for the report.
    pub id: String,
    /// Where the paper says it.
    pub source: String,
    /// The statement, in our words.
    pub text: String,
    /// What to measure.
    pub statistic: ClaimStatistic,
    /// Layer counts it speaks of.
    #[serde(default)]
    pub layers: Vec<u32>,
    /// Message sizes it speaks of; absent: every size of the paper.
    #[serde(default)]
    pub message_sizes: Option<Vec<SizeValue>>,
    /// The mode it speaks of.
    #[serde(default = "layer_parallel")]
    pub mode: String,
    /// Smallest value for the claim to hold.
    #[serde(default)]
    pub expect_min: Option<f64>,
    /// Largest value for the claim to hold.
    #[serde(default)]
    pub expect_max: Option<f64>,
    /// For `not-measured`: why.
    #[serde(default)]
    pub unmeasurable: Option<String>,
}

fn layer_parallel() -> String {
    "layer-parallel".into()
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
        if let Some(p) = &exp.paper {
            validate_paper(p, &bad)?;
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
                        if m.line_alone && m.loss == 0.0 && matches!(link, LinkSpec::Memory(_)) {
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

type Bad<'a> = dyn Fn(&str, String) -> ExperimentError + 'a;

fn validate_paper(p: &PipelinePaper, bad: &Bad<'_>) -> Result<(), ExperimentError> {
    LinkSpec::parse(&p.link).map_err(|e| bad("paper.link", e))?;
    if p.messages == 0 {
        return Err(bad("paper.messages", "at least 1".into()));
    }
    let positive = |field: String, v: f64| {
        if v.is_finite() && v > 0.0 {
            Ok(())
        } else {
            Err(bad(&field, format!("{v}: a positive number")))
        }
    };
    let mut seen: Vec<(u64, u32)> = Vec::new();
    for (i, c) in p.cells.iter().enumerate() {
        let f = |name: &str| format!("paper.cells[{i}].{name}");
        if c.table.trim().is_empty() {
            return Err(bad(&f("table"), "name the table".into()));
        }
        let size = size_of(&c.message_size).map_err(|e| bad(&f("message_size"), e))?;
        if !(1..=16).contains(&c.layers) {
            return Err(bad(&f("layers"), format!("{}: between 1 and 16", c.layers)));
        }
        positive(f("mbit_s"), c.mbit_s)?;
        positive(f("relative_capacity"), c.relative_capacity)?;
        positive(f("efficiency"), c.efficiency)?;
        if c.efficiency > 1.5 {
            return Err(bad(
                &f("efficiency"),
                format!("{}: a fraction (at most 1.5)", c.efficiency),
            ));
        }
        if seen.contains(&(size, c.layers)) {
            return Err(bad(
                &f("layers"),
                format!("a second cell for {size} B at {} layers", c.layers),
            ));
        }
        seen.push((size, c.layers));
    }
    for (i, l) in p.line.iter().enumerate() {
        size_of(&l.message_size).map_err(|e| bad(&format!("paper.line[{i}].message_size"), e))?;
        positive(format!("paper.line[{i}].mbit_s"), l.mbit_s)?;
    }
    for (i, c) in p.claims.iter().enumerate() {
        let f = |name: &str| format!("paper.claims[{i}].{name}");
        if c.id.trim().is_empty() || c.text.trim().is_empty() {
            return Err(bad(&f("text"), "give the claim an id and a text".into()));
        }
        if !PIPELINE_MODES.contains(&c.mode.as_str()) {
            return Err(bad(
                &f("mode"),
                format!("{:?}: layer-parallel or run-to-completion", c.mode),
            ));
        }
        if let Some(n) = c.layers.iter().find(|n| !(1..=16).contains(*n)) {
            return Err(bad(&f("layers"), format!("{n}: between 1 and 16")));
        }
        for (j, s) in c.message_sizes.iter().flatten().enumerate() {
            size_of(s).map_err(|e| bad(&format!("paper.claims[{i}].message_sizes[{j}]"), e))?;
        }
        match c.statistic {
            ClaimStatistic::NotMeasured => {
                if c.unmeasurable
                    .as_deref()
                    .is_none_or(|u| u.trim().is_empty())
                {
                    return Err(bad(
                        &f("unmeasurable"),
                        "say why a not-measured claim cannot be measured".into(),
                    ));
                }
            }
            ClaimStatistic::EfficiencyFalls => {
                if c.layers.len() < 2 {
                    return Err(bad(&f("layers"), "name at least two layer counts".into()));
                }
            }
            _ => {
                if c.layers.is_empty() {
                    return Err(bad(&f("layers"), "name at least one layer count".into()));
                }
                if c.expect_min.is_none() && c.expect_max.is_none() {
                    return Err(bad(
                        &f("expect_min"),
                        "give expect_min, expect_max or both".into(),
                    ));
                }
            }
        }
    }
    Ok(())
}

impl PipelinePaperCell {
    /// The cell's message size in bytes (validated when the file was read).
    pub fn message_bytes(&self) -> Result<u64, String> {
        size_of(&self.message_size)
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
        Some(b) if b > 0.0 && layers > 0 => {
            let rc = connlab_pipeline::relative_capacity(throughput, layers as usize, b);
            (Some(rc), Some(rc / f64::from(layers)))
        }
        _ => (None, None),
    }
}

/// Largest projected efficiency taken as physical: above it the projected
/// run with more layers beats the projected one-layer run, which the stage
/// timings cannot support.
pub const MAX_PROJECTED_EFFICIENCY: f64 = 1.1;

/// Projected relative capacity and efficiency of a run at `layers` against
/// its one-layer `base` run, or why there are none.
pub fn projected_capacity(
    run: &connlab_pipeline::PipelineResult,
    layers: u32,
    base: Option<&connlab_pipeline::PipelineResult>,
) -> Result<(f64, f64), String> {
    let p = run
        .projection
        .value()
        .map_err(|why| format!("no projection: {why}"))?;
    let base = base.ok_or("no projection: no one-layer run to compare with")?;
    let b = base
        .projection
        .value()
        .map_err(|why| format!("no projection: the one-layer run has none ({why})"))?;
    let (Some(rc), Some(eff)) = capacity(p, layers, Some(b)) else {
        return Err("no projection: the one-layer projection is zero".into());
    };
    if eff > MAX_PROJECTED_EFFICIENCY {
        return Err(format!(
            "no projection: projected efficiency {eff:.2} is above 1 (the {layers}-layer projection, {p:.0} Mbit/s, beats the one-layer one, {b:.0} Mbit/s, bounded by {})",
            base.projection.bound
        ));
    }
    Ok((rc, eff))
}

/// `8 KiB`, `1,000 B`.
pub fn size_text(bytes: u64) -> String {
    if bytes > 0 && bytes.is_multiple_of(1024) {
        format!("{} KiB", bytes / 1024)
    } else {
        format!("{bytes} B")
    }
}

/// Median and range of one figure over repetitions.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Spread {
    /// Median (the mean of the middle two for an even count).
    pub median: f64,
    /// Smallest.
    pub min: f64,
    /// Largest.
    pub max: f64,
    /// Values.
    pub n: usize,
}

impl Spread {
    /// The spread of `values`; `None` if there are none.
    pub fn of(values: &[f64]) -> Option<Spread> {
        let mut v: Vec<f64> = values.iter().copied().filter(|v| v.is_finite()).collect();
        if v.is_empty() {
            return None;
        }
        v.sort_by(f64::total_cmp);
        let n = v.len();
        Some(Spread {
            median: if n % 2 == 1 {
                v[n / 2]
            } else {
                (v[n / 2 - 1] + v[n / 2]) / 2.0
            },
            min: v[0],
            max: v[n - 1],
            n,
        })
    }

    /// `0.87 (0.85–0.90)`, or `0.87` when every value is the same.
    pub fn text(&self, digits: usize) -> String {
        let m = format!("{:.digits$}", self.median);
        let (a, b) = (
            format!("{:.digits$}", self.min),
            format!("{:.digits$}", self.max),
        );
        if a == b {
            m
        } else {
            format!("{m} ({a}–{b})")
        }
    }
}

/// Our figures for one mode, line, size, message count and layer count:
/// one value per repetition.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct OursCell {
    /// Finished repetitions.
    pub runs: usize,
    /// Measured Mbit/s, relative capacity, efficiency.
    pub measured: [Vec<f64>; 3],
    /// Projected Mbit/s, relative capacity, efficiency.
    pub projected: [Vec<f64>; 3],
    /// Why repetitions have no projected Mbit/s (distinct reasons).
    pub no_projection: Vec<String>,
    /// Why repetitions have no projected relative capacity (distinct).
    pub no_projected_capacity: Vec<String>,
    /// What bounded the projections (distinct).
    pub bounds: Vec<String>,
}

/// A claim judged on the paper's own values, our measured and our
/// projected figures.
#[derive(Clone, Debug)]
pub struct ClaimResult {
    /// The claim.
    pub claim: PipelineClaim,
    /// On the paper's tables.
    pub paper: Judgement,
    /// On our measured figures (this machine's CPUs shared by every thread).
    pub measured: Judgement,
    /// On our projected figures (one core per thread).
    pub projected: Judgement,
}

/// Where a claim's values come from.
#[derive(Clone, Copy, PartialEq)]
enum Source {
    Paper,
    Measured,
    Projected,
}

fn within(v: f64, c: &PipelineClaim) -> bool {
    c.expect_min.is_none_or(|m| v >= m) && c.expect_max.is_none_or(|m| v <= m)
}

fn values_text(v: &[f64]) -> String {
    Spread::of(v).map_or("—".into(), |s| {
        let (a, b) = (format!("{:.2}", s.min), format!("{:.2}", s.max));
        if a == b {
            a
        } else {
            format!("{a}–{b}")
        }
    })
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
        let json = serde_json::to_string_pretty(self).map_err(|e| crate::ResultsError::Format {
            path: path.display().to_string(),
            message: e.to_string(),
        })?;
        connlab_os::files::write_atomic(&path, json + "\n").map_err(io(&path))?;
        let csv = dir.join("runs.csv");
        connlab_os::files::write_atomic(&csv, self.csv()).map_err(io(&csv))
    }

    /// One row per run, for pandas. `projected_*` is the bounded
    /// projection (empty when there is none, `no_projection` says why);
    /// `layers_only_mbit_s` the layer stages alone.
    pub fn csv(&self) -> String {
        let mut out = String::from(
            "id,mode,link,message_size,layers,repetition,messages,messages_delivered,verified,\
             throughput_mbit_s,messages_per_s,relative_capacity,efficiency,\
             projected_mbit_s,projected_relative_capacity,projected_efficiency,\
             projected_bound,no_projection,layers_only_mbit_s,retransmissions,elapsed_s\n",
        );
        let opt = |v: Option<f64>| v.map_or(String::new(), |v| format!("{v:.4}"));
        let text = |t: &str| format!("\"{}\"", t.replace('"', "'"));
        for r in &self.runs {
            let x = &r.result;
            let base = self.run(&r.params.baseline()).map(|b| &b.result);
            let (rc, eff) = capacity(
                x.throughput_mbit_s,
                r.params.layers,
                base.map(|b| b.throughput_mbit_s),
            );
            let (prc, peff, why) = match projected_capacity(x, r.params.layers, base) {
                Ok((rc, eff)) => (Some(rc), Some(eff), String::new()),
                Err(e) => (None, None, e),
            };
            let why = match x.projection.value() {
                Err(e) => e.to_string(),
                Ok(_) => why,
            };
            out += &format!(
                "{},{},{},{},{},{},{},{},{},{:.3},{:.1},{},{},{},{},{},{},{},{},{},{:.4}\n",
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
                opt(rc),
                opt(eff),
                opt(x.projection.mbit_s),
                opt(prc),
                opt(peff),
                text(&x.projection.bound),
                text(&why),
                opt(x.projection.layers_only_mbit_s),
                x.retransmissions,
                x.elapsed_s
            );
        }
        out
    }

    /// The paper's conditions as this sweep labels them: line and messages
    /// per run.
    pub fn paper_conditions(&self) -> Option<(String, u64)> {
        let p = self.experiment.paper.as_ref()?;
        Some((LinkSpec::parse(&p.link).ok()?.label(), p.messages))
    }

    /// Our line alone, Mbit/s of user data, and what stands in for it: the
    /// pipeline needs at least one layer, so the paper's line's configured
    /// rate (a frame without layer headers is all user data) stands in.
    pub fn line_alone_mbit_s(&self) -> Option<f64> {
        match LinkSpec::parse(&self.experiment.paper.as_ref()?.link).ok()? {
            LinkSpec::Memory(Some(bps)) => Some(bps as f64 / 1e6),
            _ => None,
        }
    }

    /// Our line alone (the zero-layer runs) at a size over a line (label)
    /// with a message count, per repetition.
    pub fn line_alone_runs(&self, link: &str, message_size: u64, messages: u64) -> Vec<(u32, f64)> {
        self.runs
            .iter()
            .filter(|r| {
                r.params.layers == 0
                    && r.params.link.label() == link
                    && r.params.message_size == message_size
                    && r.params.messages == messages
            })
            .map(|r| (r.params.repetition, r.result.throughput_mbit_s))
            .collect()
    }

    /// Our figures for a mode, line (label), size, message count and layers.
    pub fn cell(
        &self,
        mode: &str,
        link: &str,
        message_size: u64,
        messages: u64,
        layers: u32,
    ) -> OursCell {
        let mut c = OursCell::default();
        let push = |v: &mut Vec<String>, s: String| {
            if !v.contains(&s) {
                v.push(s);
            }
        };
        for r in self.runs.iter().filter(|r| {
            r.params.mode == mode
                && r.params.link.label() == link
                && r.params.message_size == message_size
                && r.params.messages == messages
                && r.params.layers == layers
        }) {
            c.runs += 1;
            let x = &r.result;
            let base = self.run(&r.params.baseline()).map(|b| &b.result);
            c.measured[0].push(x.throughput_mbit_s);
            let (rc, eff) = capacity(
                x.throughput_mbit_s,
                layers,
                base.map(|b| b.throughput_mbit_s),
            );
            c.measured[1].extend(rc);
            c.measured[2].extend(eff);
            match x.projection.value() {
                Ok(v) => {
                    c.projected[0].push(v);
                    push(&mut c.bounds, x.projection.bound.clone());
                }
                Err(why) => push(&mut c.no_projection, why.to_string()),
            }
            match projected_capacity(x, layers, base) {
                Ok((rc, eff)) => {
                    c.projected[1].push(rc);
                    c.projected[2].push(eff);
                }
                Err(why) => push(&mut c.no_projected_capacity, why),
            }
        }
        c
    }

    /// Every claim of the paper, judged.
    pub fn claims(&self) -> Vec<ClaimResult> {
        let Some(paper) = &self.experiment.paper else {
            return Vec::new();
        };
        paper
            .claims
            .iter()
            .map(|c| ClaimResult {
                claim: c.clone(),
                paper: self.judge(c, Source::Paper),
                measured: self.judge(c, Source::Measured),
                projected: self.judge(c, Source::Projected),
            })
            .collect()
    }

    fn claim_sizes(&self, c: &PipelineClaim) -> Vec<u64> {
        match &c.message_sizes {
            Some(v) => v.iter().filter_map(|s| size_of(s).ok()).collect(),
            None => {
                let v = self.experiment.paper_sizes();
                if v.is_empty() {
                    let mut v: Vec<u64> = self.runs.iter().map(|r| r.params.message_size).collect();
                    v.sort_unstable();
                    v.dedup();
                    v
                } else {
                    v
                }
            }
        }
    }

    /// The values of a statistic at one size and layer count, or why none.
    fn values(
        &self,
        c: &PipelineClaim,
        from: Source,
        size: u64,
        layers: u32,
        statistic: ClaimStatistic,
    ) -> Result<Vec<f64>, String> {
        let exp = &self.experiment;
        if from == Source::Paper {
            let cell = exp
                .paper_cell(size, layers)
                .ok_or("not in the paper's tables")?;
            return match statistic {
                ClaimStatistic::RelativeCapacity => Ok(vec![cell.relative_capacity]),
                ClaimStatistic::LineShare => {
                    let line = exp.paper_line(size).ok_or("no line-alone figure")?;
                    Ok(vec![cell.mbit_s / line.mbit_s])
                }
                _ => Ok(vec![cell.efficiency]),
            };
        }
        let (link, messages) = self
            .paper_conditions()
            .ok_or("the experiment names no paper line")?;
        let cell = self.cell(&c.mode, &link, size, messages, layers);
        if cell.runs == 0 {
            return Err(format!(
                "no {} run over {link} with {messages} messages",
                c.mode
            ));
        }
        let set = if from == Source::Measured {
            &cell.measured
        } else {
            &cell.projected
        };
        let why = |reasons: &[String]| {
            reasons
                .first()
                .cloned()
                .unwrap_or_else(|| "no value".into())
        };
        let v = match statistic {
            ClaimStatistic::RelativeCapacity => set[1].clone(),
            ClaimStatistic::LineShare => {
                let alone = self.line_alone_runs(&link, size, messages);
                if alone.is_empty() {
                    let line = self
                        .line_alone_mbit_s()
                        .ok_or("the paper's line has no rate here (unlimited or UDP)")?;
                    set[0].iter().map(|v| v / line).collect()
                } else {
                    // Each repetition's figure against the same repetition's
                    // line alone (the median line alone if it has none).
                    let all: Vec<f64> = alone.iter().map(|a| a.1).collect();
                    let median = Spread::of(&all).map_or(f64::NAN, |s| s.median);
                    self.runs
                        .iter()
                        .filter(|r| {
                            r.params.mode == c.mode
                                && r.params.link.label() == link
                                && r.params.message_size == size
                                && r.params.messages == messages
                                && r.params.layers == layers
                        })
                        .filter_map(|r| {
                            let v = if from == Source::Measured {
                                Some(r.result.throughput_mbit_s)
                            } else {
                                r.result.projection.mbit_s
                            }?;
                            let line = alone
                                .iter()
                                .find(|a| a.0 == r.params.repetition)
                                .map_or(median, |a| a.1);
                            (line > 0.0).then(|| v / line)
                        })
                        .collect()
                }
            }
            _ => set[2].clone(),
        };
        if v.is_empty() {
            return Err(match (from, statistic) {
                (Source::Projected, ClaimStatistic::LineShare) => why(&cell.no_projection),
                (Source::Projected, _) => why(&cell.no_projected_capacity),
                _ => "no one-layer run to compare with".into(),
            });
        }
        Ok(v)
    }

    fn judge(&self, c: &PipelineClaim, from: Source) -> Judgement {
        if c.statistic == ClaimStatistic::NotMeasured {
            return Judgement::cannot_measure(c.unmeasurable.clone().unwrap_or_default());
        }
        let sizes = self.claim_sizes(c);
        let (mut parts, mut judged, mut failed) = (Vec::new(), 0, false);
        for &size in &sizes {
            if c.statistic == ClaimStatistic::EfficiencyFalls {
                let (lo, hi) = (
                    c.layers.iter().copied().min().unwrap_or(1),
                    c.layers.iter().copied().max().unwrap_or(1),
                );
                let stat = ClaimStatistic::Efficiency;
                match (
                    self.values(c, from, size, lo, stat),
                    self.values(c, from, size, hi, stat),
                ) {
                    (Ok(a), Ok(b)) => {
                        let ok = b.iter().copied().fold(f64::MIN, f64::max)
                            < a.iter().copied().fold(f64::MAX, f64::min);
                        judged += 1;
                        failed |= !ok;
                        parts.push(format!(
                            "{}: {} at {lo} layers, {} at {hi}{}",
                            size_text(size),
                            values_text(&a),
                            values_text(&b),
                            if ok { "" } else { " (not lower)" }
                        ));
                    }
                    (Err(e), _) | (_, Err(e)) => parts.push(format!("{}: {e}", size_text(size))),
                }
                continue;
            }
            for &l in &c.layers {
                match self.values(c, from, size, l, c.statistic) {
                    Ok(v) => {
                        let ok = v.iter().all(|x| within(*x, c));
                        judged += 1;
                        failed |= !ok;
                        parts.push(format!(
                            "{} {l} {}: {}{}",
                            size_text(size),
                            if l == 1 { "layer" } else { "layers" },
                            values_text(&v),
                            if ok { "" } else { " (outside)" }
                        ));
                    }
                    Err(e) => parts.push(format!(
                        "{} {l} {}: {e}",
                        size_text(size),
                        if l == 1 { "layer" } else { "layers" }
                    )),
                }
            }
        }
        let detail = parts.join("; ");
        if failed {
            Judgement::does_not_hold(detail)
        } else if judged == 0 {
            Judgement::cannot_measure(detail)
        } else {
            Judgement::holds(detail)
        }
    }

    /// The finished run with these parameters.
    pub fn run(&self, params: &PipelineRunParams) -> Option<&PipelineRunRecord> {
        self.runs.iter().find(|r| r.params == *params)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Verdict;

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
[paper]
citation = "the paper"
link = "memory:800mbit"
messages = 500
[[paper.cells]]
table = "Table 2"
message_size = "8KiB"
layers = 5
mbit_s = 28.8
relative_capacity = 4.34
efficiency = 0.87
[[paper.line]]
source = "Section 3"
message_size = 8192
mbit_s = 35.8
[[paper.claims]]
id = "e5"
source = "Section 4"
text = "about 90% at 5 layers"
statistic = "efficiency"
layers = [5]
expect_min = 0.85
"#;

    #[test]
    fn plans_layers_innermost_with_the_one_layer_baseline() {
        let e = PipelineExperiment::from_toml(FILE, "p.toml").unwrap();
        assert_eq!(
            crate::ExperimentKind::of_text(FILE, "p.toml").unwrap(),
            crate::ExperimentKind::Pipeline
        );
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
        assert_eq!(e.paper_cell(8192, 5).map(|c| c.efficiency), Some(0.87));
        assert!(e.paper_cell(8192, 3).is_none());
        assert_eq!(e.paper_line(8192).map(|l| l.mbit_s), Some(35.8));
        assert_eq!(e.paper_sizes(), [8192]);
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
            (
                "layers = 5\nmbit_s",
                "layers = 0\nmbit_s",
                "paper.cells[0].layers",
            ),
            ("mbit_s = 28.8", "mbit_s = -1", "paper.cells[0].mbit_s"),
            (
                "message_size = \"8KiB\"",
                "message_size = \"8 parsecs\"",
                "paper.cells[0].message_size",
            ),
            ("mbit_s = 35.8", "mbit_s = 0", "paper.line[0].mbit_s"),
            ("expect_min = 0.85", "", "paper.claims[0].expect_min"),
            (
                "statistic = \"efficiency\"",
                "statistic = \"not-measured\"",
                "paper.claims[0].unmeasurable",
            ),
            (
                "link = \"memory:800mbit\"\nmessages",
                "link = \"tcp\"\nmessages",
                "paper.link",
            ),
        ] {
            let text = FILE.replacen(from, to, 1);
            let err = PipelineExperiment::from_toml(&text, "p.toml")
                .unwrap_err()
                .to_string();
            assert!(err.contains(field), "{to}: {err}");
        }
        // Unknown fields and the old list shape are refused, naming the key.
        let err = PipelineExperiment::from_toml(
            &FILE.replace("efficiency = 0.87", "efficiency = 0.87\nefficency = 1"),
            "p.toml",
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("efficency"), "{err}");
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

    #[test]
    fn the_experiment_files_parse_into_typed_values() {
        let paper = PipelineExperiment::from_toml(
            include_str!("../../../experiments/pipeline-tables.toml"),
            "pipeline-tables.toml",
        )
        .unwrap();
        let p = paper.paper.as_ref().unwrap();
        assert_eq!(p.cells.len(), 18, "Tables 1-3, six layer counts each");
        assert_eq!(paper.paper_sizes(), [1024, 8192, 32768]);
        assert_eq!(paper.paper_cell(8192, 5).map(|c| c.mbit_s), Some(28.8));
        assert_eq!(
            paper.paper_cell(32768, 11).map(|c| c.efficiency),
            Some(0.74)
        );
        assert_eq!(paper.paper_line(1024).map(|l| l.mbit_s), Some(4.7));
        assert_eq!(paper.paper_line(32768).map(|l| l.mbit_s), Some(98.2));
        assert!(p
            .claims
            .iter()
            .any(|c| c.statistic == ClaimStatistic::NotMeasured));
        // The paper's matrix: 6 layer counts x 3 sizes x 2 modes x 3
        // repetitions, and the line alone at each size and repetition.
        let plan = paper.plan(false);
        assert_eq!(plan.len(), 6 * 3 * 2 * 3 + 3 * 3);
        assert_eq!(plan.iter().filter(|r| r.layers == 0).count(), 9);
        assert!(plan
            .iter()
            .filter(|r| r.layers == 0)
            .all(|r| r.mode == "layer-parallel"));
        assert!(plan
            .iter()
            .all(|r| r.messages == 500 && r.link == LinkSpec::Memory(Some(800_000_000))));
        assert!(paper.plan(true).len() <= 21);
        let ext = PipelineExperiment::from_toml(
            include_str!("../../../experiments/pipeline-extended.toml"),
            "pipeline-extended.toml",
        )
        .unwrap();
        assert!(ext.paper.is_none());
        assert!(ext.plan(false).iter().all(|r| r.messages == 5000));
    }

    fn projection(mbit_s: Option<f64>, bound: &str) -> connlab_pipeline::Projection {
        connlab_pipeline::Projection {
            mbit_s,
            bound: bound.into(),
            unsupported: mbit_s.is_none().then(|| "too few busy samples".to_string()),
            ..Default::default()
        }
    }

    /// Two repetitions at 1 and 5 layers, 8 KiB, over the paper's line.
    fn sweep(measured_5: [f64; 2], projected_5: [Option<f64>; 2]) -> PipelineSweep {
        let exp = PipelineExperiment::from_toml(FILE, "p.toml").unwrap();
        let mut runs = Vec::new();
        for rep in 0..2 {
            for (layers, measured, projected) in [
                (1, 100.0, Some(700.0)),
                (5, measured_5[rep], projected_5[rep]),
            ] {
                let params = PipelineRunParams {
                    link: LinkSpec::Memory(Some(800_000_000)),
                    mode: "layer-parallel".into(),
                    message_size: 8192,
                    layers,
                    messages: 500,
                    repetition: rep as u32 + 1,
                };
                runs.push(PipelineRunRecord {
                    id: params.id(),
                    params,
                    result: connlab_pipeline::PipelineResult::synthetic(
                        layers as usize,
                        8192,
                        connlab_pipeline::Mode::LayerParallel,
                        measured,
                        projection(projected, "line"),
                    ),
                    relative_capacity: None,
                    efficiency: None,
                    projected_relative_capacity: None,
                    projected_efficiency: None,
                    finished_unix_s: 0.0,
                });
            }
        }
        PipelineSweep {
            schema: PIPELINE_SWEEP_SCHEMA.into(),
            experiment: exp,
            quick: false,
            environment: Environment::capture(),
            started_unix_s: 0.0,
            runs_total: 4,
            runs,
        }
    }

    #[test]
    fn cells_give_medians_spreads_and_why_no_projection() {
        let s = sweep([90.0, 80.0], [Some(690.0), None]);
        let c = s.cell("layer-parallel", "memory-800mbit", 8192, 500, 5);
        assert_eq!(c.runs, 2);
        let eff = Spread::of(&c.measured[2]).unwrap();
        assert!((eff.median - 0.85).abs() < 1e-9 && (eff.min - 0.8).abs() < 1e-9);
        assert_eq!(eff.text(2), "0.85 (0.80–0.90)");
        assert_eq!(c.projected[0], [690.0]);
        assert_eq!(c.bounds, ["line"]);
        assert!(c.no_projection[0].contains("too few busy samples"));
        assert!(c.no_projected_capacity[0].starts_with("no projection"));
        assert_eq!(Spread::of(&[]), None);
    }

    #[test]
    fn a_claim_holds_only_across_the_spread() {
        // Efficiencies 0.9 and 0.8 (claim: at least 0.85): does not hold.
        let s = sweep([90.0, 80.0], [Some(690.0), Some(680.0)]);
        let c = &s.claims()[0];
        assert_eq!(c.paper.verdict, Verdict::Holds, "{}", c.paper.detail);
        assert_eq!(c.measured.verdict, Verdict::FAILS, "{}", c.measured.detail);
        assert!(
            c.measured.detail.contains("0.80–0.90"),
            "{}",
            c.measured.detail
        );
        assert_eq!(
            c.projected.verdict,
            Verdict::Holds,
            "{}",
            c.projected.detail
        );
        // Both repetitions at 0.9 or more: holds.
        let s = sweep([95.0, 90.0], [None, None]);
        let c = &s.claims()[0];
        assert_eq!(c.measured.verdict, Verdict::Holds);
        assert!(matches!(c.projected.verdict, Verdict::CannotMeasure(_)));
        assert!(
            c.projected.detail.contains("no projection"),
            "{}",
            c.projected.detail
        );
    }

    #[test]
    fn projected_efficiency_above_one_is_no_projection() {
        let base = connlab_pipeline::PipelineResult::synthetic(
            1,
            8192,
            connlab_pipeline::Mode::LayerParallel,
            100.0,
            projection(Some(100.0), "CPU share"),
        );
        let run = connlab_pipeline::PipelineResult::synthetic(
            5,
            8192,
            connlab_pipeline::Mode::LayerParallel,
            100.0,
            projection(Some(150.0), "receiver sink"),
        );
        let err = projected_capacity(&run, 5, Some(&base)).unwrap_err();
        assert!(err.contains("above 1"), "{err}");
        let unsupported = connlab_pipeline::PipelineResult::synthetic(
            1,
            8192,
            connlab_pipeline::Mode::LayerParallel,
            100.0,
            projection(None, ""),
        );
        let err = projected_capacity(&run, 5, Some(&unsupported)).unwrap_err();
        assert!(err.contains("one-layer run has none"), "{err}");
        let (rc, eff) = projected_capacity(&base, 5, Some(&base)).unwrap();
        assert!((rc - 5.0).abs() < 1e-9 && (eff - 1.0).abs() < 1e-9);
    }

    #[test]
    fn line_share_uses_the_measured_line_alone() {
        let mut s = sweep([90.0, 80.0], [Some(690.0), Some(680.0)]);
        if let Some(p) = s.experiment.paper.as_mut() {
            p.claims[0].statistic = ClaimStatistic::LineShare;
            p.claims[0].layers = vec![1];
            p.claims[0].expect_min = Some(0.9);
        }
        // Without zero-layer runs the configured 800 Mbit/s stands in:
        // 100 / 800.
        let c = &s.claims()[0];
        assert_eq!(c.measured.verdict, Verdict::FAILS);
        assert!(c.measured.detail.contains("0.12"), "{}", c.measured.detail);
        // The paper: 35.8 line alone, no 1-layer cell in this file.
        assert!(matches!(c.paper.verdict, Verdict::CannotMeasure(_)));
        for rep in 1..=2 {
            let params = PipelineRunParams {
                link: LinkSpec::Memory(Some(800_000_000)),
                mode: "layer-parallel".into(),
                message_size: 8192,
                layers: 0,
                messages: 500,
                repetition: rep,
            };
            s.runs.push(PipelineRunRecord {
                id: params.id(),
                params,
                result: connlab_pipeline::PipelineResult::synthetic(
                    0,
                    8192,
                    connlab_pipeline::Mode::LayerParallel,
                    105.0,
                    projection(Some(105.0), "line"),
                ),
                relative_capacity: None,
                efficiency: None,
                projected_relative_capacity: None,
                projected_efficiency: None,
                finished_unix_s: 0.0,
            });
        }
        assert_eq!(s.line_alone_runs("memory-800mbit", 8192, 500).len(), 2);
        let c = &s.claims()[0];
        assert_eq!(c.measured.verdict, Verdict::Holds, "{}", c.measured.detail);
        assert!(c.measured.detail.contains("0.95"), "{}", c.measured.detail);
        // The line alone has no relative capacity.
        assert_eq!(capacity(105.0, 0, Some(100.0)), (None, None));
    }
}
