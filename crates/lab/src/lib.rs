//! The lab: what an experiment asks for and what a sweep leaves behind.
//!
//! An experiment is a TOML file (see `experiments/` and [`Experiment`]): a
//! topology of network-namespace hosts, the server engines, and a parameter
//! matrix. [`Experiment::plan`] expands the matrix into [`PointParams`], one per
//! measurement, each with a stable id so an interrupted sweep resumes where it
//! stopped. A sweep writes one directory ([`SweepDir`]): the experiment file, a
//! [`SweepInfo`] and one [`PointResult`] per finished point; `connlab report`
//! reads nothing else. Every file names its kind ([`ExperimentKind`]) and
//! holds typed values ([`values`]). [`run`] holds each kind's runner
//! (network namespaces, child processes, or the pipeline in this process),
//! reporting through a [`run::Progress`]; the registry of kinds
//! (`connlab-kinds`) picks them, and the CLI keeps flags, display and exit
//! codes.

pub mod compare;
pub mod doctor;
mod experiment;
mod kind;
pub mod load_files;
mod loadgen;
mod peers;
mod pipeline;
pub mod pipeline_one;
pub mod probe;
mod results;
mod results_dir;
pub mod run;
mod singleip;
pub mod soak;
mod suite;
mod sweep_file;
pub mod tally;
pub mod validity;
pub mod values;
mod verdict;
pub mod warning_text;

pub use experiment::{
    parse_link_rate, rate_label, web_config, ClaimShape, ClientSection, Compare, DerivedPick,
    Experiment, ExperimentError, Matrix, MatrixOverride, Metric, Over, Paper, PaperCell,
    PaperClaim, PaperDerived, PaperProjection, PointParams, RateValue, RatioValue, ServerSection,
    SizeValue, TopologySection, Vary, WebSection, ENGINES, WEB_CONFIGS,
};
pub use kind::{same_measurement, shape_of, ExperimentKind, KINDS};
pub use loadgen::{
    ClientFigures, ClientIo, LoadgenDir, LoadgenError, LoadgenExperiment, LoadgenInfo,
    LoadgenParams, LoadgenPlacement, LoadgenPoint, LoadgenQuick, LoadgenServer, LoadgenTable,
    LoadgenTag, LoadgenWorkload, Rate, Ratio, ServerFigures, WireProtocol, LOADGEN_POINT_SCHEMA,
    LOADGEN_SWEEP_SCHEMA,
};
pub use peers::{
    Baseline, Bytes, Contender, LatencyRun, PeerParams, PeerPoint, PeersDir, PeersError,
    PeersExperiment, PeersInfo, PeersQuick, PeersTag, Placement, PointSetup, Process, ProcessKind,
    Role, RoleCpu, Scaling, Span, Workload, PEERS_SWEEP_SCHEMA, PEER_POINT_SCHEMA,
};
pub use pipeline::{
    capacity, projected_capacity, size_text, ClaimResult, ClaimStatistic, LinkSpec, MessageCounts,
    OursCell, PipelineClaim, PipelineExperiment, PipelineMatrix, PipelinePaper, PipelinePaperCell,
    PipelinePaperLine, PipelineQuick, PipelineRunParams, PipelineRunRecord, PipelineRunRow,
    PipelineSweep, Spread, MAX_PROJECTED_EFFICIENCY, PIPELINE_MODES, PIPELINE_SWEEP_SCHEMA,
};
pub use results::{
    PointResult, ResultsError, SweepDir, SweepInfo, TopologyInfo, POINT_SCHEMA, SWEEP_SCHEMA,
};
pub use results_dir::{check_schema, ResultsDir};
pub use singleip::{
    analyse_contention, apply_host_queue, bytes_label, fmt_num, jain, judge, median, parse_bytes,
    percentile, summarise_host_queue, summarise_rtt, transfer_result, BandwidthSection, BitRate,
    Bottleneck, Check, ContentionResult, ContentionSection, ContentionSetup, CpuUse, Dur, ExpKind,
    HostQueue, Kind, LinkInfo, PaperValue, PlacementInfo, ProbeRtt, ProbeTransfer, QueueSample,
    QueueStats, QuickSection, RttResult, RttSection, SingleIpClaim, SingleIpError,
    SingleIpExperiment, SingleIpMetric, SingleIpPaper, SingleIpPoint, SingleIpRecord,
    SingleIpSweep, SingleIpSweepInfo, StreamResult, System, TimelinePacket, TransferResult,
    FAIR_JAIN, FAIR_WINDOW_S, FULL_PACKET_BYTES, LINK_QUEUE, RTT_BYTES, SINGLEIP_POINT_SCHEMA,
    SINGLEIP_SWEEP_SCHEMA,
};
pub use singleip::{Bytes as SingleIpBytes, Placement as SingleIpPlacement};
pub use suite::{experiment_name, find_default_suite, Suite, SuiteKind, SuitePaper, DEFAULT_SUITE};
pub use sweep_file::SweepFileError;
pub use verdict::{Judgement, Verdict};
