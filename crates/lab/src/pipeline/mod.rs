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

mod experiment;
mod paper;
mod rows;
mod sweep;
#[cfg(test)]
mod tests;

pub use experiment::{
    LinkSpec, MessageCounts, PipelineExperiment, PipelineMatrix, PipelineQuick, PipelineRunParams,
    PIPELINE_MODES,
};
pub use paper::{
    ClaimStatistic, PipelineClaim, PipelinePaper, PipelinePaperCell, PipelinePaperLine,
};
pub use rows::PipelineRunRow;
pub use sweep::{
    capacity, projected_capacity, size_text, ClaimResult, OursCell, PipelineRunRecord,
    PipelineSweep, Spread, MAX_PROJECTED_EFFICIENCY,
};

/// Schema tag of `pipeline.json`.
pub const PIPELINE_SWEEP_SCHEMA: &str = "connlab.pipeline.sweep/1";
