//! `[paper]` of a pipeline experiment: the table's cells and lines, the
//! claims, and their checks.

use super::experiment::{layer_parallel, LinkSpec, PIPELINE_MODES};
use crate::experiment::{ExperimentError, SizeValue};
use serde::{Deserialize, Serialize};

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
    /// Relative capacity at the most `layers` above that at the fewest, at
    /// every message size.
    CapacityRises,
    /// At each of `layers`, efficiency higher with each larger message
    /// size (the paper: 32 KiB > 8 KiB > 1 KiB at every layer count).
    EfficiencyBySize,
    /// The share of work-carrying layer-lock acquisitions (a PDU, an SDU,
    /// a release, a new message; not idle polls) that found the lock held
    /// by another worker, over every layer of both sides, in each run of a
    /// run-to-completion mode at each of `layers`, within the bounds (the
    /// lock contention of connection state shared between workers; the
    /// paper's Section 4 (3)). Judged on measured runs only: no projection
    /// models lock waits, and the paper reports no such figure.
    LockContention,
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

type Bad<'a> = dyn Fn(&str, String) -> ExperimentError + 'a;

pub(super) fn validate_paper(p: &PipelinePaper, bad: &Bad<'_>) -> Result<(), ExperimentError> {
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
                format!("{:?}: one of {}", c.mode, PIPELINE_MODES.join(", ")),
            ));
        }
        if c.statistic == ClaimStatistic::LockContention && c.mode == "layer-parallel" {
            return Err(bad(
                &f("mode"),
                "\"layer-parallel\": lock-contention speaks of a run-to-completion mode (layer-parallel takes no layer lock)".into(),
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
            ClaimStatistic::EfficiencyFalls | ClaimStatistic::CapacityRises => {
                if c.layers.len() < 2 {
                    return Err(bad(&f("layers"), "name at least two layer counts".into()));
                }
            }
            ClaimStatistic::EfficiencyBySize => {
                if c.layers.is_empty() {
                    return Err(bad(&f("layers"), "name at least one layer count".into()));
                }
                if c.message_sizes.as_ref().is_some_and(|s| s.len() < 2) {
                    return Err(bad(
                        &f("message_sizes"),
                        "name at least two sizes to compare (or none: the paper's)".into(),
                    ));
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

pub(super) fn size_of(v: &SizeValue) -> Result<u64, String> {
    match v {
        SizeValue::Bytes(n) => Ok(*n),
        SizeValue::Text(t) => connlab_measure::units::parse_size(t),
    }
}
