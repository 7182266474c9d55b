//! The results directory of a sweep:
//!
//! ```text
//! DIR/experiment.toml      the experiment file as run
//! DIR/sweep.json           SweepInfo: name, environment, topology, points_total
//! DIR/points/<id>.json     PointResult: parameters, merged load result, server stats
//! DIR/logs/<id>/...        stderr of the server and of every shard
//! ```
//!
//! Point files are written whole (to a temporary name, then renamed), so a
//! point file that exists is a finished point.

use crate::experiment::{Experiment, ExperimentError, PointParams};
pub(crate) use crate::results_dir::read_json;
use crate::results_dir::{check_schema, ResultsDir};
use connlab_loadgen::LoadResult;
use connlab_os::Environment;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// Schema tag of `sweep.json`.
pub const SWEEP_SCHEMA: &str = "connlab.sweep/1";
/// Schema tag of a point file.
pub const POINT_SCHEMA: &str = "connlab.point/1";

/// Why a results directory could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum ResultsError {
    /// A file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The I/O error.
        source: std::io::Error,
    },
    /// A JSON file is malformed or of another schema.
    #[error("{path}: {message}")]
    Format {
        /// The file.
        path: String,
        /// What is wrong.
        message: String,
    },
    /// The experiment file in the directory is invalid.
    #[error(transparent)]
    Experiment(#[from] ExperimentError),
}

/// `sweep.json`: what was run, where, and when.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SweepInfo {
    /// [`SWEEP_SCHEMA`].
    pub schema: String,
    /// The experiment's name.
    pub name: String,
    /// The experiment's title.
    pub title: String,
    /// The paper table it reproduces, if any.
    pub reproduces: Option<String>,
    /// Whether the reduced `--quick` matrix ran.
    pub quick: bool,
    /// Unix seconds at the start of the sweep (of its first session).
    pub started_unix_s: f64,
    /// Points in the plan.
    pub points_total: usize,
    /// Rounds run: the file's repetitions, or more with `--max-repetitions`
    /// (absent in directories written before).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repetitions: Option<u32>,
    /// The connlab version that ran it.
    pub connlab_version: String,
    /// The machine.
    pub environment: Environment,
    /// The hosts.
    pub topology: TopologyInfo,
    /// The machines the sweep ran on, one block each; the points in
    /// `points/` are the last block's (earlier blocks' are in
    /// `points/block-N/`, never pooled). Empty in directories written
    /// before blocks: one block, on `environment`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub blocks: Vec<crate::validity::MachineBlock>,
}

/// The topology as built.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct TopologyInfo {
    /// The server's host name.
    pub server_host: String,
    /// The server's address.
    pub server_addr: String,
    /// Client host names, shard i on the i-th.
    pub client_hosts: Vec<String>,
    /// Link rate as written (`1gbit`), if limited.
    pub link_rate: Option<String>,
    /// Link rate in bits per second, if limited.
    pub link_rate_bps: Option<u64>,
}

/// One finished point.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct PointResult {
    /// [`POINT_SCHEMA`].
    pub schema: String,
    /// [`PointParams::id`].
    pub id: String,
    /// The parameters.
    pub params: PointParams,
    /// Client shards merged into `load`.
    pub shards: u32,
    /// The merged load result (schema `connlab.load/2`; `/1` files convert).
    pub load: LoadResult,
    /// The server's statistics (`connlab serve --stats`), if it wrote them.
    pub server: Option<serde_json::Value>,
    /// Warnings of the sweep about this point (the load's own are in `load`).
    #[serde(default)]
    pub warnings: Vec<String>,
    /// Web experiments: each backend's CPU over the measured window, as a
    /// share of one CPU (user + system time of the processes of its cgroup).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub backend_cpu_share: Vec<f64>,
    /// Web experiments: the gateway process's CPU over the measured window,
    /// as a share of one CPU (`nat`: the kernel forwards in softirq, so this
    /// stays near zero; `direct`: none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gateway_cpu_share: Option<f64>,
    /// Web experiments: each CPU's busy share over the measured window, from
    /// `/proc/stat` (index = CPU): sees the kernel's forwarding, which no
    /// process is charged with.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cpu_busy_share: Vec<f64>,
    /// Unix seconds when the point finished.
    pub finished_unix_s: f64,
    /// Its gates (`validity`), its machine (`machine`) and who used the CPUs
    /// meanwhile (`window_cpu`), over the measured window, per role (`server`,
    /// `clients`, `gateway`, `backends`).
    #[serde(flatten)]
    pub checked: crate::validity::Checked,
    /// Where the server and each shard ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placement: Option<crate::validity::PointPlacement>,
}

impl PointResult {
    /// Server CPU seconds (user + system), if known.
    pub fn server_cpu_s(&self) -> Option<f64> {
        let s = self.server.as_ref()?;
        Some(s["cpu_user_s"].as_f64()? + s["cpu_sys_s"].as_f64()?)
    }

    /// Every warning: the sweep's, then the load's.
    pub fn all_warnings(&self) -> impl Iterator<Item = &String> {
        self.warnings.iter().chain(self.load.warnings.iter())
    }
}

/// A results directory, read whole.
#[derive(Clone, Debug)]
pub struct SweepDir {
    /// The directory.
    pub path: PathBuf,
    /// `sweep.json`.
    pub info: SweepInfo,
    /// `experiment.toml`.
    pub experiment: Experiment,
    /// Finished points in plan order (points not in the plan last, by id),
    /// the A/A control's aside.
    pub points: Vec<PointResult>,
    /// The A/A control's finished points (see
    /// [`Experiment::control_engine`]).
    pub controls: Vec<PointResult>,
}

impl SweepDir {
    /// The directory's layout (see [`ResultsDir`]).
    pub fn layout(dir: &Path) -> ResultsDir {
        ResultsDir::new(dir, "sweep.json")
    }

    /// Reads a results directory written by `connlab sweep`.
    pub fn open(dir: &Path) -> Result<SweepDir, ResultsError> {
        let layout = Self::layout(dir);
        let info: SweepInfo = layout.read_info()?;
        check_schema(&layout.info_path(), &info.schema, SWEEP_SCHEMA)?;
        let experiment = Experiment::from_file(&layout.experiment_path())?;
        let order: Vec<String> = experiment
            .plan_with(info.quick, info.repetitions)
            .iter()
            .map(PointParams::id)
            .collect();
        let mut points: Vec<PointResult> = layout.read_all_points()?;
        for p in &points {
            check_schema(&layout.point_path(&p.id), &p.schema, POINT_SCHEMA)?;
        }
        points.sort_by_key(|p| {
            (
                order
                    .iter()
                    .position(|id| *id == p.id)
                    .unwrap_or(usize::MAX),
                p.id.clone(),
            )
        });
        let (controls, points) = points.into_iter().partition(|p| p.params.control);
        Ok(SweepDir {
            path: dir.to_path_buf(),
            info,
            experiment,
            points,
            controls,
        })
    }

    /// Reads one point file, checking its schema.
    pub fn read_point(path: &Path) -> Result<PointResult, ResultsError> {
        let point: PointResult = read_json(path)?;
        check_schema(path, &point.schema, POINT_SCHEMA)?;
        Ok(point)
    }

    /// Writes a point file whole: to `<id>.json.tmp`, then renamed.
    pub fn write_point(dir: &Path, point: &PointResult) -> Result<(), ResultsError> {
        Self::layout(dir).write_point(&point.id, point, true)
    }

    /// Writes `sweep.json` whole.
    pub fn write_info(dir: &Path, info: &SweepInfo) -> Result<(), ResultsError> {
        Self::layout(dir).write_info(info)
    }
}

/// Writes `value` as JSON to `path` whole (a temporary file, then a rename),
/// creating the parent directory; `pretty` indents it. Every results
/// directory writes its files this way, so a file that exists is finished.
pub(crate) fn write_json_whole<T: Serialize>(
    path: &Path,
    value: &T,
    pretty: bool,
) -> Result<(), ResultsError> {
    let io = |source| ResultsError::Io {
        path: path.display().to_string(),
        source,
    };
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(io)?;
    }
    let text = if pretty {
        serde_json::to_string_pretty(value)
    } else {
        serde_json::to_string(value)
    }
    .map_err(|e| ResultsError::Format {
        path: path.display().to_string(),
        message: e.to_string(),
    })?;
    connlab_os::files::write_atomic(path, text + "\n").map_err(io)
}
