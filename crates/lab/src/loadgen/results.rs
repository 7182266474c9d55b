//! A loadgen results directory: what the client and server measured per
//! point, `loadgen.json`, read back.

use super::experiment::{LoadgenExperiment, LoadgenParams};
use super::LoadgenError;

use connlab_loadgen::LoadResult;
use connlab_measure::{DeviationSummary, Summary};
use connlab_os::Environment;
use serde::{Deserialize, Serialize};
use std::path::Path;

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
    /// [`LOADGEN_POINT_SCHEMA`](super::LOADGEN_POINT_SCHEMA).
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
    /// Its gates (`validity`), its machine (`machine`) and who used the CPUs
    /// meanwhile (`window_cpu`), of the server and the client (all CPUs when one is
    /// not pinned) over the measured window: steal, foreign work, and the
    /// process trees of `server` and `clients`.
    #[serde(flatten)]
    pub checked: crate::validity::Checked,
}

/// `DIR/loadgen.json`: the sweep as a whole.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct LoadgenInfo {
    /// [`LOADGEN_SWEEP_SCHEMA`](super::LOADGEN_SWEEP_SCHEMA).
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
    /// The directory's layout (see [`ResultsDir`](crate::ResultsDir)).
    pub fn layout(dir: &Path) -> crate::ResultsDir {
        crate::ResultsDir::new(dir, "loadgen.json")
    }

    /// Reads a results directory; points not in the plan, or measured with
    /// other parameters, are left out.
    pub fn open(dir: &Path) -> Result<LoadgenDir, LoadgenError> {
        let info: LoadgenInfo = Self::layout(dir).read_info()?;
        let plan = info.experiment.plan(info.quick);
        let points: Vec<LoadgenPoint> =
            Self::layout(dir).read_points(plan.iter().map(|p| p.id()))?;
        let points = points
            .into_iter()
            .filter(|point| plan.contains(&point.params))
            .collect();
        Ok(LoadgenDir { info, points })
    }
}
