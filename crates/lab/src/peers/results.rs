//! A peers results directory: the point files and `peers.json`, read back.

use super::experiment::{PeerParams, PeersExperiment, Role};
use super::PeersError;

use connlab_os::Environment;
use serde::{Deserialize, Serialize};
use std::path::Path;

/// CPU seconds (user + system, from `/proc`) one role used during the client's run.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RoleCpu {
    /// The server's process tree (nginx: master and worker).
    pub server_s: Option<f64>,
    /// The gateway's process tree.
    pub gateway_s: Option<f64>,
    /// The client process (its rusage when it was reaped).
    pub client_s: Option<f64>,
}

/// One finished point of a peers sweep (`DIR/points/<id>.json`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PeerPoint {
    /// [`PEER_POINT_SCHEMA`](super::PEER_POINT_SCHEMA).
    pub schema: String,
    /// [`PeerParams::id`].
    pub id: String,
    /// What was measured.
    pub params: PeerParams,
    /// The role whose CPU divides ([`PeersExperiment::measure`]).
    pub measure: Role,
    /// Responses completed by the client.
    pub requests: u64,
    /// Completed responses per second, as the client reports it.
    pub requests_per_s: f64,
    /// Errors the client reports (non-2xx responses, socket errors).
    pub errors: u64,
    /// CPU seconds of each role over the client's run.
    pub cpu: RoleCpu,
    /// CPU seconds of the measured role.
    pub measured_cpu_s: f64,
    /// `requests / measured_cpu_s`.
    pub requests_per_cpu_s: f64,
    /// Wall-clock seconds of the client's run.
    pub wall_s: f64,
    /// The command line of each process, role by role.
    pub commands: Vec<(Role, Vec<String>)>,
    /// When the point finished (Unix seconds).
    pub finished_unix_s: f64,
    /// The CPUs the server was pinned to (empty: not pinned).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub server_cpus: Vec<usize>,
    /// The CPUs the client was pinned to (empty: not pinned).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub client_cpus: Vec<usize>,
    /// The client's CPU seconds over the run divided by the run's seconds
    /// times its CPUs (all CPUs when not pinned).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_busy: Option<f64>,
    /// Why the client, not the server, may have set this point's rate:
    /// it shared CPUs with the server, or kept its own CPUs busy past
    /// `scaling.client_busy`. `None`: the client had room to spare.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_limited: Option<String>,
    /// connlab serve's connections per worker (its `--stats`), in worker
    /// order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub worker_connections: Vec<u64>,
    /// connlab serve's imbalance: the most connections on one worker over
    /// the mean.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub imbalance: Option<f64>,
    /// The open-loop run at `scaling.latency_rate`, if the file asks for it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency: Option<LatencyRun>,
    /// Its gates (`validity`), its machine (`machine`) and who used the CPUs
    /// meanwhile (`window_cpu`), the roles are pinned to (all CPUs when a role is
    /// not pinned) over the client's run: steal, foreign work, and each
    /// role's process trees (`server`, `gateway`, `client`).
    #[serde(flatten)]
    pub checked: crate::validity::Checked,
}

/// The open-loop client run at a fixed offered load after a scaling
/// point's closed-loop run (connlab load `--rate`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LatencyRun {
    /// Offered requests per second.
    pub rate: f64,
    /// Completed requests per second.
    pub achieved_rate_per_s: f64,
    /// Service latency, median (µs).
    pub p50_us: f64,
    /// Service latency, 99th percentile (µs).
    pub p99_us: f64,
    /// How late the client sent, 99th percentile (µs): a large value means
    /// the client, not the server, set the latency.
    pub send_lag_p99_us: f64,
    /// Requests that ended in an error.
    pub errors: u64,
}

/// `DIR/peers.json`: the sweep as a whole.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct PeersInfo {
    /// [`PEERS_SWEEP_SCHEMA`](super::PEERS_SWEEP_SCHEMA).
    pub schema: String,
    /// The experiment as run.
    pub experiment: PeersExperiment,
    /// Whether this is a `--quick` sweep.
    pub quick: bool,
    /// Machine, kernel and tool versions.
    pub environment: Environment,
    /// Peer program versions (`nginx -v` and the like), by program.
    #[serde(default)]
    pub peer_versions: Vec<(String, String)>,
    /// When the sweep first started (Unix seconds).
    pub started_unix_s: f64,
    /// Points in the plan.
    pub points_total: usize,
}

/// A peers results directory, read back.
#[derive(Clone, Debug)]
pub struct PeersDir {
    /// `peers.json`.
    pub info: PeersInfo,
    /// Finished points in plan order, the A/A control's among them
    /// (`params.control`).
    pub points: Vec<PeerPoint>,
}

impl PeersDir {
    /// The points of the contenders, the A/A control's left out.
    pub fn measured(&self) -> impl Iterator<Item = &PeerPoint> {
        self.points.iter().filter(|p| !p.params.control)
    }

    /// The A/A control's points.
    pub fn controls(&self) -> impl Iterator<Item = &PeerPoint> {
        self.points.iter().filter(|p| p.params.control)
    }

    /// The directory's layout (see [`ResultsDir`](crate::ResultsDir)).
    pub fn layout(dir: &Path) -> crate::ResultsDir {
        crate::ResultsDir::new(dir, "peers.json")
    }

    /// Reads a results directory; points not in the plan are left out.
    pub fn open(dir: &Path) -> Result<PeersDir, PeersError> {
        let layout = Self::layout(dir);
        let info: PeersInfo = layout.read_info()?;
        let points = layout.read_points(info.experiment.plan(info.quick).iter().map(|p| p.id()))?;
        Ok(PeersDir { info, points })
    }
}
