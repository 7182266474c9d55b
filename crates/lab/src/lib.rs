//! The lab: what an experiment asks for and what a sweep leaves behind.
//!
//! An experiment is a TOML file (see `experiments/` and [`Experiment`]): a
//! topology of network-namespace hosts, the server engines, and a parameter
//! matrix. [`Experiment::plan`] expands the matrix into [`PointParams`], one per
//! measurement, each with a stable id so an interrupted sweep resumes where it
//! stopped. A sweep writes one directory ([`SweepDir`]): the experiment file, a
//! [`SweepInfo`] and one [`PointResult`] per finished point; `connlab report`
//! reads nothing else. Running the points (namespaces, processes) is the CLI's
//! job; this crate does no I/O beyond reading and writing those files.

mod experiment;
mod pipeline;
mod results;
mod suite;

pub use experiment::{
    parse_link_rate, rate_label, web_config, ClaimShape, ClientSection, Compare, DerivedPick,
    Experiment, ExperimentError, Matrix, MatrixOverride, Metric, Over, Paper, PaperCell,
    PaperClaim, PaperDerived, PointParams, RateValue, RatioValue, ServerSection, SizeValue,
    TopologySection, Vary, WebSection, ENGINES, WEB_CONFIGS,
};
pub use pipeline::{
    capacity, LinkSpec, MessageCounts, PipelineExperiment, PipelineMatrix, PipelinePaperValue,
    PipelineQuick, PipelineRunParams, PipelineRunRecord, PipelineSweep, PIPELINE_MODES,
    PIPELINE_SWEEP_SCHEMA,
};
pub use results::{
    PointResult, ResultsError, SweepDir, SweepInfo, TopologyInfo, POINT_SCHEMA, SWEEP_SCHEMA,
};
pub use suite::{experiment_kind, experiment_name, Suite, SuiteKind, SuitePaper, DEFAULT_SUITE};
