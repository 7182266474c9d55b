//! What a point records (probe output and its summaries) and the results
//! directory of a sweep, read back.

use super::claims::SingleIpMetric;
use super::experiment::{
    Bottleneck, ExpKind, SingleIpExperiment, SingleIpPoint, System, RTT_BYTES,
};
use super::values::bytes_label;
use super::{SINGLEIP_POINT_SCHEMA, SINGLEIP_SWEEP_SCHEMA};
use crate::results_dir::check_schema;
use crate::validity::Validity;
use connlab_os::Environment;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// The median of some values (mean of the middle two for an even count).
pub fn median(values: impl IntoIterator<Item = f64>) -> Option<f64> {
    let mut v: Vec<f64> = values.into_iter().filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    Some(if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    })
}

/// The `p`-th percentile (nearest rank on sorted values).
pub fn percentile(sorted: &[f64], p: f64) -> Option<f64> {
    if sorted.is_empty() {
        return None;
    }
    let k = ((p / 100.0) * (sorted.len() - 1) as f64).round() as usize;
    Some(sorted[k.min(sorted.len() - 1)])
}

/// Jain's fairness index: (Σx)² / (n Σx²); `None` when every value is 0.
pub fn jain(xs: &[f64]) -> Option<f64> {
    let s2: f64 = xs.iter().map(|x| x * x).sum();
    if xs.is_empty() || s2 <= 0.0 {
        return None;
    }
    let s: f64 = xs.iter().sum();
    Some(s * s / (xs.len() as f64 * s2))
}

// ------------------------------------------------------------------ probe output

/// What `connlab singleip probe rtt` writes.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ProbeRtt {
    /// Each measured round trip, µs.
    pub samples_us: Vec<f64>,
}

/// One transfer as `connlab singleip probe get` writes it (times in Unix seconds).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ProbeTransfer {
    /// Bytes asked for.
    pub size: u64,
    /// Bytes received.
    pub got: u64,
    /// Before connecting.
    pub t0: f64,
    /// Connected.
    pub t_conn: f64,
    /// First byte, if any.
    pub t_first: Option<f64>,
    /// Last byte, if any.
    pub t_last: Option<f64>,
    /// Bytes per bin since the epoch (empty without `--epoch`).
    #[serde(default)]
    pub bins: Vec<u64>,
}

// ------------------------------------------------------------------ results

/// The CPUs things ran on.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlacementInfo {
    /// Clients.
    pub clients: u32,
    /// linkem.
    pub linkem: u32,
    /// The front process (io-server, gateway, HAProxy).
    pub front: u32,
    /// App-nodes and node servers.
    pub nodes: u32,
    /// The front host's receive processing (RPS mask's CPU).
    pub front_rps: u32,
}

/// The emulated link of a point.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LinkInfo {
    /// One-way delay, µs.
    pub delay_us: u64,
    /// Rate limit, bit/s.
    pub rate_bps: Option<u64>,
    /// Queue in packets (with a rate).
    pub queue_packets: Option<u32>,
    /// Where the rate limit sits (contention points).
    #[serde(default)]
    pub bottleneck: Option<Bottleneck>,
    /// The NAT switch's output queue, packets (contention points of `nat`
    /// with `nat_switch_queue`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub switch_queue_packets: Option<u32>,
}

/// CPU time of the front process and of the app-nodes during a point.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CpuUse {
    /// The front process (io-server, HAProxy; the NAT gateway only
    /// watches: the kernel's forwarding is charged to no process).
    pub front_cpu_s: Option<f64>,
    /// The app-nodes together (I/O server systems).
    pub nodes_cpu_s: Option<f64>,
    /// Bytes the point's transfers received.
    pub bytes: u64,
    /// Wall time of the point, s.
    pub elapsed_s: f64,
}

impl CpuUse {
    /// Front CPU seconds per GB (10^9 bytes).
    pub fn front_s_per_gb(&self) -> Option<f64> {
        self.front_cpu_s
            .filter(|_| self.bytes > 0)
            .map(|c| c / (self.bytes as f64 / 1e9))
    }

    /// App-node CPU seconds per GB.
    pub fn nodes_s_per_gb(&self) -> Option<f64> {
        self.nodes_cpu_s
            .filter(|_| self.bytes > 0)
            .map(|c| c / (self.bytes as f64 / 1e9))
    }
}

/// Round trips of one point.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RttResult {
    /// Measured round trips.
    pub count: usize,
    /// Smallest, µs.
    pub min_us: f64,
    /// Median, µs.
    pub p50_us: f64,
    /// Mean, µs.
    pub mean_us: f64,
    /// 99th percentile, µs.
    pub p99_us: f64,
    /// Largest, µs.
    pub max_us: f64,
    /// Every sample, µs (0.1 µs resolution).
    pub samples_us: Vec<f64>,
}

/// Summarises round-trip samples (`None` for none).
pub fn summarise_rtt(samples: &[f64]) -> Option<RttResult> {
    let mut s: Vec<f64> = samples.iter().copied().filter(|x| x.is_finite()).collect();
    if s.is_empty() {
        return None;
    }
    let rounded = s.iter().map(|x| (x * 10.0).round() / 10.0).collect();
    s.sort_by(f64::total_cmp);
    Some(RttResult {
        count: s.len(),
        min_us: s[0],
        p50_us: median(s.iter().copied())?,
        mean_us: s.iter().sum::<f64>() / s.len() as f64,
        p99_us: percentile(&s, 99.0)?,
        max_us: s[s.len() - 1],
        samples_us: rounded,
    })
}

/// One transfer of a bandwidth point.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TransferResult {
    /// Bytes asked for.
    pub size: u64,
    /// Bytes received.
    pub got: u64,
    /// Connect time, ms.
    pub connect_ms: f64,
    /// Connect start to last byte, ms (complete transfers only).
    pub completion_ms: Option<f64>,
    /// size / completion, Mbit/s.
    pub mbit_s: Option<f64>,
}

/// A bandwidth transfer from the probe's record.
pub fn transfer_result(t: &ProbeTransfer) -> TransferResult {
    let completion = t
        .t_last
        .filter(|_| t.got == t.size)
        .map(|l| (l - t.t0).max(1e-9));
    TransferResult {
        size: t.size,
        got: t.got,
        connect_ms: (t.t_conn - t.t0) * 1e3,
        completion_ms: completion.map(|c| c * 1e3),
        mbit_s: completion.map(|c| t.size as f64 * 8.0 / c / 1e6),
    }
}

/// One stream of a contention point.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StreamResult {
    /// `fg`, `bg1`, `bg2`.
    pub name: String,
    /// Bytes asked for.
    pub size: u64,
    /// Bytes received.
    pub got: u64,
    /// Connect start, s since the epoch.
    pub start_s: f64,
    /// Completion (connect start to last byte), s, if complete.
    pub completion_s: Option<f64>,
    /// Mbit/s per bin since the epoch.
    pub bins_mbit_s: Vec<f64>,
}

/// One packet on the timeline (right to left: data toward the clients).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TimelinePacket {
    /// Arrival at the emulator, s since the epoch.
    pub t_s: f64,
    /// Index into the streams (0 = fg, 1 = bg1, 2 = bg2).
    pub stream: u8,
    /// Sequence number relative to the stream's first, bytes.
    pub seq: u64,
    /// Dropped by the emulator's queue (or lost).
    pub dropped: bool,
}

/// A contention point's results.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ContentionResult {
    /// Bin width, s.
    pub bin_s: f64,
    /// Foreground first, then the backgrounds.
    pub streams: Vec<StreamResult>,
    /// Foreground connect start to last byte, ms, if complete.
    pub fg_completion_ms: Option<f64>,
    /// Foreground connect time, ms.
    pub fg_connect_ms: f64,
    /// Jain's index of the streams as large as the background over the
    /// whole bins in which all of them ran.
    pub jain_overlap: Option<f64>,
    /// The same over the first `early_window` of that overlap.
    pub jain_early: Option<f64>,
    /// Median of Jain's index per bin over the overlap.
    pub jain_bin_median: Option<f64>,
    /// Length of the overlap, s.
    pub overlap_s: Option<f64>,
    /// Sum of those streams' rates in the overlap / the link rate.
    pub link_utilisation: Option<f64>,
    /// Median queueing delay at the emulator of data packets toward the
    /// clients, ms (delay beyond the link's own).
    pub queue_ms_median: Option<f64>,
    /// 95th percentile of the same, ms.
    pub queue_ms_p95: Option<f64>,
    /// Median queueing delay of the foreground's data packets, ms.
    pub queue_ms_fg_median: Option<f64>,
    /// Packets dropped by the emulator toward the clients.
    pub drops: u64,
    /// Time against sequence: every foreground packet for a foreground
    /// smaller than the background, every `timeline_every`-th packet of
    /// the rest, every drop.
    pub timeline: Vec<TimelinePacket>,
    /// Sampling of the non-foreground packets on the timeline.
    pub timeline_every: u32,
    /// Time from the start of the overlap of the streams as large as the
    /// background (all three with a 100 MB foreground) to the start of the
    /// first window in which they share fairly (see
    /// [`ContentionSetup::fair_window_s`](super::ContentionSetup)), s; the
    /// end of the overlap's last whole bin when no window is fair, so never
    /// more than the overlap lasted (the paper's Figure 12:
    /// NAT's unequal first ~1.6 s).
    #[serde(default)]
    pub fair_after_s: Option<f64>,
    /// The host queues in front of the bottleneck (`bottleneck = "front"`,
    /// the NAT switch), sampled while the streams ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_queue: Option<HostQueue>,
}

/// Bytes of one full-size Ethernet frame: the unit of the queue limits and
/// of [`HostQueue::peak_full_packets`].
pub const FULL_PACKET_BYTES: u64 = 1514;

/// One reading of the sampled queues (`tc -s qdisc`), in the order of
/// [`HostQueue::queues`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct QueueSample {
    /// Unix seconds.
    pub t_s: f64,
    /// Each queue's backlog, bytes.
    pub bytes: Vec<u64>,
    /// Each queue's length as the qdisc counts it (a GSO packet counts once).
    pub packets: Vec<u64>,
    /// Each queue's drops so far.
    pub drops: Vec<u64>,
}

/// One queue's figures over the samples.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct QueueStats {
    /// Where it is (`front eth0`, `switch port`).
    pub name: String,
    /// Largest backlog, bytes.
    pub peak_bytes: u64,
    /// Largest length as the qdisc counts it.
    pub peak_packets: u64,
    /// Largest backlog's time to send at the link rate, ms.
    pub peak_ms: f64,
    /// Median of the same, ms.
    pub median_ms: f64,
    /// Packets it dropped while sampled.
    pub drops: u64,
}

/// The host queues in front of the bottleneck, from periodic samples of
/// their backlog: a packet entering when a sample is taken waits the
/// backlog's time to send at the link rate (the paper's pseudo-delay,
/// section 2.2.1). Delays add up over the queues a packet crosses.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct HostQueue {
    /// Each queue, in the order a packet crosses them.
    pub queues: Vec<QueueStats>,
    /// Samples taken.
    pub samples: usize,
    /// Time between samples, ms (median).
    pub period_ms: f64,
    /// Largest total backlog, bytes.
    pub peak_bytes: u64,
    /// The same in full-size frames ([`FULL_PACKET_BYTES`]).
    pub peak_full_packets: f64,
    /// The same's time to send at the link rate, ms.
    pub peak_ms: f64,
    /// Median total delay, ms.
    pub median_ms: f64,
    /// 95th percentile of the total delay, ms.
    pub p95_ms: f64,
    /// Median total delay over the samples taken while the foreground
    /// ran (connect to last byte), ms.
    pub fg_median_ms: Option<f64>,
}

/// One finished point.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SingleIpRecord {
    /// [`SINGLEIP_POINT_SCHEMA`].
    pub schema: String,
    /// [`SingleIpPoint::id`].
    pub id: String,
    /// The point.
    pub point: SingleIpPoint,
    /// Where everything ran.
    pub placement: PlacementInfo,
    /// The link.
    pub link: LinkInfo,
    /// TCP congestion control in the namespaces.
    pub congestion_control: String,
    /// RTT points.
    #[serde(default)]
    pub rtt: Option<RttResult>,
    /// Bandwidth points: each transfer.
    #[serde(default)]
    pub transfers: Vec<TransferResult>,
    /// Contention points.
    #[serde(default)]
    pub contention: Option<ContentionResult>,
    /// Bandwidth points: CPU of the front process and the app-nodes.
    #[serde(default)]
    pub cpu: Option<CpuUse>,
    /// What went wrong without spoiling the point.
    #[serde(default)]
    pub warnings: Vec<String>,
    /// Unix seconds.
    pub finished_unix_s: f64,
    /// Its gates (`validity`), its machine (`machine`) and who used the CPUs
    /// meanwhile (`window_cpu`), while the point's probes ran, per role (`front`,
    /// `nodes`, `servers`, `linkem`, and `runner`: the sweep with the
    /// probes it reaped).
    #[serde(flatten)]
    pub checked: crate::validity::Checked,
}

impl SingleIpRecord {
    /// The sampled host queues of a contention point, if any.
    pub fn host_queue(&self) -> Option<&HostQueue> {
        self.contention.as_ref()?.host_queue.as_ref()
    }
}

/// `sweep.json` of a single-IP sweep.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SingleIpSweepInfo {
    /// [`SINGLEIP_SWEEP_SCHEMA`].
    pub schema: String,
    /// The experiment's name.
    pub name: String,
    /// Whether `--quick` ran.
    pub quick: bool,
    /// Unix seconds at the first session's start.
    pub started_unix_s: f64,
    /// Points in the plan.
    pub points_total: usize,
    /// connlab's version.
    pub connlab_version: String,
    /// The machine.
    pub environment: Environment,
    /// Where everything runs.
    pub placement: PlacementInfo,
}

/// A single-IP results directory, read whole.
#[derive(Clone, Debug)]
pub struct SingleIpSweep {
    /// The directory.
    pub path: PathBuf,
    /// `sweep.json`.
    pub info: SingleIpSweepInfo,
    /// `experiment.toml`.
    pub experiment: SingleIpExperiment,
    /// Finished points in plan order.
    pub points: Vec<SingleIpRecord>,
}

/// Why a single-IP results directory could not be read or written: the
/// error of every [`ResultsDir`](crate::ResultsDir).
pub type SingleIpError = crate::ResultsError;

impl SingleIpSweep {
    /// The directory's layout (see [`ResultsDir`](crate::ResultsDir)).
    pub fn layout(dir: &Path) -> crate::ResultsDir {
        crate::ResultsDir::new(dir, "sweep.json")
    }

    /// True when `DIR` holds a single-IP sweep (its experiment file says so).
    pub fn is_singleip_dir(dir: &Path) -> bool {
        crate::ExperimentKind::of_dir(dir).is_ok_and(|k| k == crate::ExperimentKind::Singleip)
    }

    /// Reads a directory.
    pub fn open(dir: &Path) -> Result<SingleIpSweep, SingleIpError> {
        let layout = Self::layout(dir);
        let info: SingleIpSweepInfo = layout.read_info()?;
        check_schema(&layout.info_path(), &info.schema, SINGLEIP_SWEEP_SCHEMA)?;
        let experiment = SingleIpExperiment::from_file(&layout.experiment_path())?;
        let points: Vec<SingleIpRecord> =
            layout.read_points(experiment.plan(info.quick).iter().map(|p| p.id()))?;
        for r in &points {
            check_schema(&layout.point_path(&r.id), &r.schema, SINGLEIP_POINT_SCHEMA)?;
        }
        Ok(SingleIpSweep {
            path: dir.to_path_buf(),
            info,
            experiment,
            points,
        })
    }

    /// Reads one point file, checking its schema.
    pub fn read_point(path: &Path) -> Result<SingleIpRecord, SingleIpError> {
        let r: SingleIpRecord = crate::results::read_json(path)?;
        check_schema(path, &r.schema, SINGLEIP_POINT_SCHEMA)?;
        Ok(r)
    }

    /// Writes a point file whole (temporary name, then rename).
    pub fn write_point(dir: &Path, r: &SingleIpRecord) -> Result<(), SingleIpError> {
        Self::layout(dir).write_point(&r.id, r, false)
    }

    /// Writes `sweep.json` whole.
    pub fn write_info(dir: &Path, info: &SingleIpSweepInfo) -> Result<(), SingleIpError> {
        Self::layout(dir).write_info(info)
    }

    /// The points of one experiment, system and parameter (every repetition).
    pub fn select(&self, exp: ExpKind, system: System, param: u64) -> Vec<&SingleIpRecord> {
        self.points
            .iter()
            .filter(|r| {
                r.point.experiment == exp && r.point.system == system && r.point.param == param
            })
            .collect()
    }

    /// The parameter a claim about `param` is judged at: `param` itself when
    /// measured, else the largest measured one when `param` is larger than
    /// all of them (a `--quick` run's smaller sizes), with a note.
    pub fn resolve(&self, exp: ExpKind, param: u64) -> Option<(u64, Option<String>)> {
        let present: Vec<u64> = self
            .points
            .iter()
            .filter(|r| r.point.experiment == exp)
            .map(|r| r.point.param)
            .collect();
        if present.contains(&param) {
            return Some((param, None));
        }
        let max = present.iter().copied().max()?;
        (max < param).then(|| {
            (
                max,
                Some(format!(
                    "{} not measured in this run; judged at {}",
                    bytes_label(param),
                    bytes_label(max)
                )),
            )
        })
    }

    /// The points a metric of one system reads (`param`: the point's
    /// parameter; `None` for the RTT's 4 bytes), every repetition, valid or
    /// not.
    pub fn points_of(
        &self,
        metric: SingleIpMetric,
        system: System,
        param: Option<u64>,
    ) -> Vec<&SingleIpRecord> {
        let exp = metric.experiment();
        let param = match exp {
            ExpKind::Rtt => RTT_BYTES,
            _ => match param {
                Some(p) => p,
                None => return Vec::new(),
            },
        };
        self.select(exp, system, param)
    }

    /// A metric of one system across its valid repetitions (points that
    /// failed a gate are left out; points from before gates count as
    /// valid).
    pub fn values(&self, metric: SingleIpMetric, system: System, param: Option<u64>) -> Vec<f64> {
        self.points_of(metric, system, param)
            .iter()
            .filter(|r| r.checked.is_valid())
            .filter_map(|r| metric.of(r))
            .collect()
    }

    /// The validity records of the points [`values`](Self::values) leaves
    /// out: those that failed a gate.
    pub fn invalid(
        &self,
        metric: SingleIpMetric,
        system: System,
        param: Option<u64>,
    ) -> Vec<&Validity> {
        self.points_of(metric, system, param)
            .into_iter()
            .filter_map(|r| r.checked.validity.as_ref())
            .filter(|v| !v.valid)
            .collect()
    }

    /// A metric of two systems paired by repetition: `(repetition, a, b)`
    /// for each repetition where both points are valid and have it.
    pub fn paired(
        &self,
        metric: SingleIpMetric,
        a: System,
        b: System,
        param: Option<u64>,
    ) -> Vec<(u32, f64, f64)> {
        let of = |s: System| -> Vec<(u32, f64)> {
            self.points_of(metric, s, param)
                .iter()
                .filter(|r| r.checked.is_valid())
                .filter_map(|r| metric.of(r).map(|v| (r.point.repetition, v)))
                .collect()
        };
        let theirs = of(b);
        of(a)
            .into_iter()
            .filter_map(|(rep, x)| {
                theirs
                    .iter()
                    .find(|(r, _)| *r == rep)
                    .map(|(_, y)| (rep, x, *y))
            })
            .collect()
    }
}
