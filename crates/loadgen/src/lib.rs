//! The connlab load generator. It expresses the workload that decides between
//! I/O architectures: N open connections of which only an *active ratio* carry
//! traffic, fixed request and response sizes, and a fixed (or Poisson) send
//! rate held by a writer thread that records how late every send was against
//! its schedule, while a reader thread times every response. Closed-loop runs
//! (`--rate max --depth K`) keep K requests outstanding per active connection.
//!
//! Protocol bytes come from [`connlab_proto`]; statistics from
//! [`connlab_measure`]. This crate never prints: progress is exposed through
//! [`Progress`] and the outcome is a [`LoadResult`].

#![warn(clippy::unwrap_used)]

mod checks;
mod connect;
mod driver;
mod error_ratio;
mod file_set;
mod merge;
mod per_request;
mod preflight;
mod reader;
mod request;
mod result;
mod sender;
mod uring_reader;
mod workload;
mod writer;

pub use driver::{run, LoadError, LoadOutcome};
pub use file_set::manifest_file;
pub use merge::{merge, MergeError};
pub use preflight::{check_capacity, per_request_port_warning, Capacity};
pub use request::{FileMix, SIZE_CLASSES};
pub use result::{
    ArrivalCheck, ConnectionCounts, CpuSeconds, Histograms, IndependenceCheck, LatencyWindow,
    LoadResult, MergeInfo, Placement, RequestCounts, RequestRecord, RunChecks, RunConfig,
    ShardInfo, StationarityCheck, HISTOGRAM_ENCODING, LOAD_SCHEMA, LOAD_SCHEMA_V1,
};
pub use workload::{ActivePolicy, FileSet, IoPath, Progress, Rate, RecordSink, Workload};
