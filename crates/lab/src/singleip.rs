//! Single-IP cluster experiments (`kind = "singleip"`): the SAPS paper's
//! evaluation run by `connlab sweep` against the front ends on one machine
//! (`io16k`: the I/O server with its send limit, `iooff`: without it, `nat`:
//! nftables DNAT, `haproxy`: HAProxy in `mode tcp`).
//!
//! Three experiments, each optional in the file:
//!
//! * `[rtt]`: 4-byte round trips on one connection (the paper's Table 3);
//! * `[bandwidth]`: one transfer at a time of each size (Figure 7);
//! * `[contention]`: a foreground transfer started while two background
//!   streams share a rate-limited link (Figures 8-12).
//!
//! The plan ([`SingleIpExperiment::plan`]) has one point per experiment,
//! system, parameter and repetition, each with a stable id; systems
//! alternate within a repetition. A sweep writes:
//!
//! ```text
//! DIR/experiment.toml     the file as run
//! DIR/sweep.json          SingleIpSweepInfo: machine, placement, plan size
//! DIR/points/<id>.json    SingleIpRecord, one per finished point, written whole
//! DIR/logs/<id>/          process output of the point's group
//! ```
//!
//! The analysis of the probes' output and of linkem's per-packet log is
//! here too ([`summarise_rtt`], [`transfer_result`], [`analyse_contention`]),
//! so it is tested without namespaces.

use crate::experiment::ExperimentError;
use crate::verdict::{Judgement, Verdict};
use connlab_os::Environment;
use serde::{Deserialize, Deserializer, Serialize};
use std::collections::BTreeMap;
use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Schema tag of a single-IP `sweep.json`.
pub const SINGLEIP_SWEEP_SCHEMA: &str = "connlab.singleip.sweep/1";
/// Schema tag of a single-IP point file.
pub const SINGLEIP_POINT_SCHEMA: &str = "connlab.singleip.point/1";

// ------------------------------------------------------------------ typed values

/// A byte count: a number, or text with a decimal (`100KB`, `1MB`: powers
/// of 1000, as the paper counts) or binary (`16KiB`) unit.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(transparent)]
pub struct Bytes(pub u64);

/// Parses `100KB`, `1MB`, `16KiB`, `4`, `4B`.
pub fn parse_bytes(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (digits, unit) = t.split_at(split);
    let n: u64 = digits
        .parse()
        .map_err(|_| format!("{text:?} is not a size: write 4, 100KB, 1MB or 16KiB"))?;
    let scale: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "kb" => 1_000,
        "mb" => 1_000_000,
        "gb" => 1_000_000_000,
        "kib" => 1 << 10,
        "mib" => 1 << 20,
        "gib" => 1 << 30,
        other => {
            return Err(format!(
            "unknown unit {other:?} in {text:?}: B, KB, MB, GB (powers of 1000) or KiB, MiB, GiB"
        ))
        }
    };
    n.checked_mul(scale)
        .ok_or_else(|| format!("{text:?} overflows 64 bits"))
}

impl<'de> Deserialize<'de> for Bytes {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            N(u64),
            T(String),
        }
        match Raw::deserialize(d)? {
            Raw::N(n) => Ok(Bytes(n)),
            Raw::T(t) => parse_bytes(&t).map(Bytes).map_err(serde::de::Error::custom),
        }
    }
}

/// A label for a byte count as the paper writes sizes: `4B`, `100KB`, `1MB`.
pub fn bytes_label(n: u64) -> String {
    if n >= 1_000_000 && n.is_multiple_of(1_000_000) {
        format!("{}MB", n / 1_000_000)
    } else if n >= 1_000 && n.is_multiple_of(1_000) {
        format!("{}KB", n / 1_000)
    } else {
        format!("{n}B")
    }
}

/// A duration written as text: `1ms`, `3s`, `0`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Dur(pub Duration);

impl Serialize for Dur {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&format!("{}us", self.0.as_micros()))
    }
}

impl<'de> Deserialize<'de> for Dur {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let t = String::deserialize(d)?;
        connlab_measure::units::parse_duration(&t)
            .map(Dur)
            .map_err(serde::de::Error::custom)
    }
}

/// A link rate written as text: `100mbit`, `1gbit`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BitRate(pub u64);

impl Serialize for BitRate {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&format!("{}bit", self.0))
    }
}

impl<'de> Deserialize<'de> for BitRate {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let t = String::deserialize(d)?;
        connlab_measure::units::parse_rate(&t)
            .map(BitRate)
            .map_err(serde::de::Error::custom)
    }
}

/// The only kind this module reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    /// `kind = "singleip"`.
    Singleip,
}

/// A front end on the cluster address.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum System {
    /// The I/O server with its send limit (16 KiB unsent per socket, send
    /// buffers sized by rate share): the paper's SAPS with the IFQ limit.
    #[serde(rename = "io16k")]
    Io16k,
    /// The I/O server with `--send-limit off`: SAPS without the limit.
    #[serde(rename = "iooff")]
    IoOff,
    /// nftables DNAT on the front host (`connlab gateway --mode nat`).
    #[serde(rename = "nat")]
    Nat,
    /// HAProxy `mode tcp`, one thread, round robin.
    #[serde(rename = "haproxy")]
    Haproxy,
    /// `io16k` with a fixed send buffer of four times the limit (64 KiB,
    /// the default before rate-share sizing).
    #[serde(rename = "io16k-4x")]
    Io16k4x,
    /// `io16k` with kernel-sized send buffers (`--send-buffer auto`).
    #[serde(rename = "io16k-auto")]
    Io16kAuto,
    /// `io16k` with rate-share headroom 1.5 instead of 2 (`--send-buffer share:1.5`).
    #[serde(rename = "io16k-h1.5")]
    Io16kH15,
}

impl System {
    /// Every system, in report order.
    pub const ALL: [System; 7] = [
        System::Io16k,
        System::IoOff,
        System::Nat,
        System::Haproxy,
        System::Io16k4x,
        System::Io16kAuto,
        System::Io16kH15,
    ];

    /// The I/O server's `--send-limit` and `--send-buffer`, if this system is
    /// the I/O server.
    pub fn io_server_flags(self) -> Option<(&'static str, Option<&'static str>)> {
        match self {
            System::Io16k => Some(("16KiB", None)),
            System::IoOff => Some(("off", None)),
            System::Io16k4x => Some(("16KiB", Some("4x"))),
            System::Io16kAuto => Some(("16KiB", Some("auto"))),
            System::Io16kH15 => Some(("16KiB", Some("share:1.5"))),
            System::Nat | System::Haproxy => None,
        }
    }

    /// The name in files and ids.
    pub fn name(self) -> &'static str {
        match self {
            System::Io16k => "io16k",
            System::IoOff => "iooff",
            System::Nat => "nat",
            System::Haproxy => "haproxy",
            System::Io16k4x => "io16k-4x",
            System::Io16kAuto => "io16k-auto",
            System::Io16kH15 => "io16k-h1.5",
        }
    }

    /// What the paper calls it, if it has it.
    pub fn paper_name(self) -> Option<&'static str> {
        match self {
            System::Io16k => Some("SAPS"),
            System::IoOff => Some("SAPS, no IFQ limit"),
            System::Nat => Some("NAT"),
            System::Haproxy | System::Io16k4x | System::Io16kAuto | System::Io16kH15 => None,
        }
    }
}

/// One of the three experiments.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ExpKind {
    /// 4-byte round trips.
    Rtt,
    /// One transfer at a time, by size.
    Bandwidth,
    /// A foreground transfer under two background streams.
    Contention,
}

impl ExpKind {
    /// The name in ids.
    pub fn name(self) -> &'static str {
        match self {
            ExpKind::Rtt => "rtt",
            ExpKind::Bandwidth => "bandwidth",
            ExpKind::Contention => "contention",
        }
    }
}

// ------------------------------------------------------------------ the file

/// A single-IP experiment file.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SingleIpExperiment {
    /// Always `singleip`.
    pub kind: Kind,
    /// Short name (results directory).
    pub name: String,
    /// One-line title.
    pub title: String,
    /// Longer description for the report.
    #[serde(default)]
    pub description: String,
    /// Repetitions of every point (systems alternate within one).
    #[serde(default = "three")]
    pub repetitions: u32,
    /// Application nodes behind the front host (1-8).
    #[serde(default = "two")]
    pub nodes: u32,
    /// TCP congestion control set in every namespace.
    #[serde(default = "reno")]
    pub congestion_control: String,
    /// Which CPU runs what.
    #[serde(default)]
    pub placement: Placement,
    /// The round-trip experiment.
    #[serde(default)]
    pub rtt: Option<RttSection>,
    /// The bandwidth-against-size experiment.
    #[serde(default)]
    pub bandwidth: Option<BandwidthSection>,
    /// The foreground-under-background experiment.
    #[serde(default)]
    pub contention: Option<ContentionSection>,
    /// Replacements for `--quick`.
    #[serde(default)]
    pub quick: Option<QuickSection>,
    /// The paper's values and claims.
    #[serde(default)]
    pub paper: SingleIpPaper,
}

fn three() -> u32 {
    3
}
fn two() -> u32 {
    2
}
fn reno() -> String {
    "reno".into()
}

/// `[placement]`: CPUs (0-based) of the two sides.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Placement {
    /// The clients and linkem.
    #[serde(default)]
    pub client_cpu: u32,
    /// The front process (io-server, gateway, HAProxy), the app-nodes and
    /// the node servers; the front host's receive processing (RPS) too.
    #[serde(default = "one_u32")]
    pub front_cpu: u32,
}

fn one_u32() -> u32 {
    1
}

impl Default for Placement {
    fn default() -> Self {
        Placement {
            client_cpu: 0,
            front_cpu: 1,
        }
    }
}

/// `[rtt]`.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RttSection {
    /// Systems, in the order they alternate.
    pub systems: Vec<System>,
    /// Measured round trips per point.
    pub round_trips: u32,
    /// Round trips before measuring.
    #[serde(default = "fifty")]
    pub warmup: u32,
    /// One-way delay of the emulated link (the paper: none for this test).
    #[serde(default)]
    pub delay: Dur,
}

fn fifty() -> u32 {
    50
}

/// `[bandwidth]`.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BandwidthSection {
    /// Systems.
    pub systems: Vec<System>,
    /// Transfer sizes.
    pub sizes: Vec<Bytes>,
    /// Transfers per size and point (fewer for large sizes, see `bytes_per_point`).
    pub transfers: u32,
    /// At most this many bytes per point (at least one transfer).
    pub bytes_per_point: Bytes,
    /// One-way delay of the emulated link (the paper: none for this test).
    #[serde(default)]
    pub delay: Dur,
}

impl BandwidthSection {
    /// Transfers of `size` in one point.
    pub fn transfers_of(&self, size: u64) -> u32 {
        let by_bytes = self.bytes_per_point.0 / size.max(1);
        (by_bytes.min(u64::from(self.transfers)) as u32).max(1)
    }
}

/// `[contention]`.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ContentionSection {
    /// Systems.
    pub systems: Vec<System>,
    /// Rate of the emulated bottleneck (both directions).
    pub rate: BitRate,
    /// The emulator's queue in front of the rate limit, in packets.
    pub queue: u32,
    /// One-way delay of the emulated link.
    pub delay: Dur,
    /// Size of each of the two background transfers.
    pub background: Bytes,
    /// Foreground sizes, one point each.
    pub foreground: Vec<Bytes>,
    /// Time from the background's start to the foreground's.
    pub foreground_delay: Dur,
    /// With a foreground smaller than the background, the background stops
    /// this long after the foreground started.
    pub background_after_small: Dur,
    /// Width of the throughput bins.
    #[serde(default = "bin_default")]
    pub bin: Dur,
    /// Window at the start of the three-stream overlap whose fairness is
    /// reported separately (the paper's NAT: unequal for about 1.6 s).
    #[serde(default = "early_default")]
    pub early_window: Dur,
    /// Where the rate limit and its queue sit.
    #[serde(default)]
    pub bottleneck: Bottleneck,
}

/// Where the contention experiment's rate limit and queue sit.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Bottleneck {
    /// In the emulator (a router's queue); linkem logs the drops.
    #[default]
    Emulator,
    /// On the front host's own egress (`tbf` with `queue` full-size packets
    /// of backlog): the paper's interface queue, where TCP small queues act on
    /// the front's sockets; the emulator only delays.
    Front,
}

fn bin_default() -> Dur {
    Dur(Duration::from_millis(100))
}
fn early_default() -> Dur {
    Dur(Duration::from_millis(1600))
}

/// `[quick]`: what `--quick` replaces.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QuickSection {
    /// Repetitions.
    #[serde(default)]
    pub repetitions: Option<u32>,
    /// `rtt.round_trips`.
    #[serde(default)]
    pub round_trips: Option<u32>,
    /// `bandwidth.sizes`.
    #[serde(default)]
    pub sizes: Option<Vec<Bytes>>,
    /// `bandwidth.transfers`.
    #[serde(default)]
    pub transfers: Option<u32>,
    /// `bandwidth.bytes_per_point`.
    #[serde(default)]
    pub bytes_per_point: Option<Bytes>,
    /// `contention.background`.
    #[serde(default)]
    pub background: Option<Bytes>,
    /// `contention.foreground`.
    #[serde(default)]
    pub foreground: Option<Vec<Bytes>>,
    /// `contention.foreground_delay`.
    #[serde(default)]
    pub foreground_delay: Option<Dur>,
}

/// `[paper]`: what the paper reports.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SingleIpPaper {
    /// Which paper (a file in `../shared/seeds/`).
    #[serde(default)]
    pub reference: String,
    /// Every number the paper gives.
    #[serde(default)]
    pub values: Vec<PaperValue>,
    /// Every claim its evaluation makes.
    #[serde(default)]
    pub claims: Vec<SingleIpClaim>,
}

/// A number the paper gives.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PaperValue {
    /// Table or figure (`Table 3`, `Figure 8`, `Section 4.1`).
    pub source: String,
    /// What it is, in our words.
    pub quantity: String,
    /// The value.
    pub value: f64,
    /// Its unit.
    pub unit: String,
    /// The system it is about.
    #[serde(default)]
    pub system: Option<System>,
    /// Our figure to set beside it, if we measure one.
    #[serde(default)]
    pub metric: Option<SingleIpMetric>,
    /// The parameter of our figure (transfer or foreground size).
    #[serde(default)]
    pub param: Option<Bytes>,
    /// The value is `system`'s figure over this system's (a ratio).
    #[serde(default)]
    pub relative_to: Option<System>,
}

/// A claim and how we check it.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SingleIpClaim {
    /// Short id.
    pub id: String,
    /// Table or figure.
    pub source: String,
    /// The claim, in our words.
    pub claim: String,
    /// The paper's figure for it, as text (`SAPS 2.5 ms, NAT 6 ms`), if any.
    #[serde(default)]
    pub paper: Option<String>,
    /// How it is judged.
    pub check: Check,
}

/// How a claim is judged from our points, across the repetitions' spread.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum Check {
    /// `lower` has the smaller value: holds when every repetition of
    /// `lower` is below every repetition of `higher`; does not hold when
    /// the opposite is true or the ranges overlap.
    Order {
        /// The figure.
        metric: SingleIpMetric,
        /// Its parameter (size), if it has one.
        #[serde(default)]
        param: Option<Bytes>,
        /// The system expected lower.
        lower: System,
        /// The system expected higher.
        higher: System,
    },
    /// Like `order` for every size up to `max_param` of a sized metric.
    OrderUpTo {
        /// The figure.
        metric: SingleIpMetric,
        /// The largest size included.
        max_param: Bytes,
        /// The system expected lower.
        lower: System,
        /// The system expected higher.
        higher: System,
    },
    /// The medians of the systems lie within `tolerance` (relative) of
    /// each other.
    Similar {
        /// The figure.
        metric: SingleIpMetric,
        /// Its parameter, if any.
        #[serde(default)]
        param: Option<Bytes>,
        /// The systems.
        systems: Vec<System>,
        /// Largest relative difference from the largest median.
        tolerance: f64,
    },
    /// Every repetition of every system is at least `value`.
    AtLeast {
        /// The figure.
        metric: SingleIpMetric,
        /// Its parameter, if any.
        #[serde(default)]
        param: Option<Bytes>,
        /// The systems.
        systems: Vec<System>,
        /// The bound.
        value: f64,
    },
    /// Not measurable here.
    Unmeasurable {
        /// Why.
        reason: String,
    },
}

/// A figure read from a point.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SingleIpMetric {
    /// Smallest round trip, µs.
    RttMinUs,
    /// Largest round trip, µs.
    RttMaxUs,
    /// Mean round trip, µs.
    RttMeanUs,
    /// Median round trip, µs.
    RttMedianUs,
    /// Transfer time (connect to last byte), ms, median over a point's transfers.
    TransferMs,
    /// Transfer bandwidth, Mbit/s (size / transfer time).
    TransferMbitS,
    /// Foreground completion time (connect to last byte), ms.
    FgCompletionMs,
    /// Median queueing delay of the foreground's packets at the emulator, ms.
    FgQueueMs,
    /// Jain's index of the 100 MB streams over their whole overlap.
    Jain,
    /// Jain's index over the first `early_window` of the overlap.
    JainEarly,
    /// Sum of the streams' rates during the overlap over the link rate.
    LinkUtilisation,
    /// Front process CPU seconds per GB relayed (bandwidth points).
    FrontCpuSPerGb,
    /// App-node CPU seconds per GB relayed (bandwidth points).
    NodesCpuSPerGb,
}

impl SingleIpMetric {
    /// The experiment that measures it.
    pub fn experiment(self) -> ExpKind {
        match self {
            SingleIpMetric::RttMinUs
            | SingleIpMetric::RttMaxUs
            | SingleIpMetric::RttMeanUs
            | SingleIpMetric::RttMedianUs => ExpKind::Rtt,
            SingleIpMetric::TransferMs
            | SingleIpMetric::TransferMbitS
            | SingleIpMetric::FrontCpuSPerGb
            | SingleIpMetric::NodesCpuSPerGb => ExpKind::Bandwidth,
            _ => ExpKind::Contention,
        }
    }

    /// A label with its unit.
    pub fn label(self) -> &'static str {
        match self {
            SingleIpMetric::RttMinUs => "RTT min (µs)",
            SingleIpMetric::RttMaxUs => "RTT max (µs)",
            SingleIpMetric::RttMeanUs => "RTT mean (µs)",
            SingleIpMetric::RttMedianUs => "RTT median (µs)",
            SingleIpMetric::TransferMs => "transfer time (ms)",
            SingleIpMetric::TransferMbitS => "bandwidth (Mbit/s)",
            SingleIpMetric::FgCompletionMs => "foreground completion (ms)",
            SingleIpMetric::FgQueueMs => "foreground queueing delay (ms)",
            SingleIpMetric::Jain => "Jain's index, overlap",
            SingleIpMetric::JainEarly => "Jain's index, early window",
            SingleIpMetric::LinkUtilisation => "link utilisation",
            SingleIpMetric::FrontCpuSPerGb => "front CPU s per GB",
            SingleIpMetric::NodesCpuSPerGb => "app-node CPU s per GB",
        }
    }

    /// The figure of one point, if it has it.
    pub fn of(self, r: &SingleIpRecord) -> Option<f64> {
        match self {
            SingleIpMetric::RttMinUs => r.rtt.as_ref().map(|x| x.min_us),
            SingleIpMetric::RttMaxUs => r.rtt.as_ref().map(|x| x.max_us),
            SingleIpMetric::RttMeanUs => r.rtt.as_ref().map(|x| x.mean_us),
            SingleIpMetric::RttMedianUs => r.rtt.as_ref().map(|x| x.p50_us),
            SingleIpMetric::TransferMs => {
                median(r.transfers.iter().filter_map(|t| t.completion_ms))
            }
            SingleIpMetric::TransferMbitS => median(r.transfers.iter().filter_map(|t| t.mbit_s)),
            SingleIpMetric::FgCompletionMs => {
                r.contention.as_ref().and_then(|c| c.fg_completion_ms)
            }
            SingleIpMetric::FgQueueMs => r.contention.as_ref().and_then(|c| c.queue_ms_fg_median),
            SingleIpMetric::Jain => r.contention.as_ref().and_then(|c| c.jain_overlap),
            SingleIpMetric::JainEarly => r.contention.as_ref().and_then(|c| c.jain_early),
            SingleIpMetric::LinkUtilisation => {
                r.contention.as_ref().and_then(|c| c.link_utilisation)
            }
            SingleIpMetric::FrontCpuSPerGb => r.cpu.as_ref().and_then(CpuUse::front_s_per_gb),
            SingleIpMetric::NodesCpuSPerGb => r.cpu.as_ref().and_then(CpuUse::nodes_s_per_gb),
        }
    }
}

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

// ------------------------------------------------------------------ plan

/// One point of the plan.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SingleIpPoint {
    /// The experiment.
    pub experiment: ExpKind,
    /// The system.
    pub system: System,
    /// Bytes: 4 (rtt), the transfer size (bandwidth), the foreground size (contention).
    pub param: u64,
    /// Repetition, from 1.
    pub repetition: u32,
}

impl SingleIpPoint {
    /// A stable id: `rtt-io16k-4B-rep1`, `contention-nat-100KB-rep2`.
    pub fn id(&self) -> String {
        format!(
            "{}-{}-{}-rep{}",
            self.experiment.name(),
            self.system.name(),
            bytes_label(self.param),
            self.repetition
        )
    }

    /// The key of the group that shares one setup (system, link).
    pub fn group(&self) -> (u32, ExpKind, System) {
        (self.repetition, self.experiment, self.system)
    }
}

/// The RTT message size.
pub const RTT_BYTES: u64 = 4;

impl SingleIpExperiment {
    /// Reads and validates a file.
    pub fn from_file(path: &Path) -> Result<SingleIpExperiment, ExperimentError> {
        let text = std::fs::read_to_string(path).map_err(|source| ExperimentError::Read {
            path: path.display().to_string(),
            source,
        })?;
        Self::from_toml(&text, &path.display().to_string())
    }

    /// Parses and validates; `origin` names the text in errors.
    pub fn from_toml(text: &str, origin: &str) -> Result<SingleIpExperiment, ExperimentError> {
        crate::kind::expect(text, origin, &[crate::ExperimentKind::Singleip])?;
        let exp: SingleIpExperiment = crate::values::parse_toml(text, origin)?;
        let bad = |field: &str, message: String| ExperimentError::Invalid {
            origin: origin.to_string(),
            field: field.to_string(),
            message,
        };
        if !(1..=20).contains(&exp.repetitions) {
            return Err(bad("repetitions", format!("{}: 1 to 20", exp.repetitions)));
        }
        if !(1..=8).contains(&exp.nodes) {
            return Err(bad("nodes", format!("{}: 1 to 8", exp.nodes)));
        }
        if exp.placement.client_cpu > 1023 || exp.placement.front_cpu > 1023 {
            return Err(bad("placement", "a CPU number below 1024".into()));
        }
        if exp.rtt.is_none() && exp.bandwidth.is_none() && exp.contention.is_none() {
            return Err(bad(
                "rtt",
                "name at least one experiment: [rtt], [bandwidth] or [contention]".into(),
            ));
        }
        let systems = |field: &str, s: &[System]| -> Result<(), ExperimentError> {
            if s.is_empty() {
                return Err(bad(field, "name at least one system".into()));
            }
            for (i, x) in s.iter().enumerate() {
                if s[..i].contains(x) {
                    return Err(bad(field, format!("{} twice", x.name())));
                }
            }
            Ok(())
        };
        if let Some(r) = &exp.rtt {
            systems("rtt.systems", &r.systems)?;
            if !(1..=10_000_000).contains(&r.round_trips) {
                return Err(bad(
                    "rtt.round_trips",
                    format!("{}: 1 to 10^7", r.round_trips),
                ));
            }
        }
        if let Some(b) = &exp.bandwidth {
            systems("bandwidth.systems", &b.systems)?;
            if b.sizes.is_empty() {
                return Err(bad("bandwidth.sizes", "name at least one size".into()));
            }
            if let Some(i) = b.sizes.iter().position(|s| s.0 == 0) {
                return Err(bad(
                    &format!("bandwidth.sizes[{i}]"),
                    "0: at least 1 byte".into(),
                ));
            }
            if b.transfers == 0 {
                return Err(bad("bandwidth.transfers", "0: at least 1".into()));
            }
        }
        if let Some(c) = &exp.contention {
            systems("contention.systems", &c.systems)?;
            if c.systems.contains(&System::Haproxy) {
                return Err(bad(
                    "contention.systems",
                    "haproxy is not part of the contention experiment (the paper compares SAPS and NAT)"
                        .into(),
                ));
            }
            if c.foreground.is_empty() {
                return Err(bad(
                    "contention.foreground",
                    "name at least one size".into(),
                ));
            }
            if c.rate.0 < 1_000_000 {
                return Err(bad("contention.rate", "at least 1mbit".into()));
            }
            if c.queue == 0 {
                return Err(bad("contention.queue", "0: at least 1 packet".into()));
            }
            if c.bin.0 < Duration::from_millis(10) {
                return Err(bad("contention.bin", "at least 10ms".into()));
            }
            if c.background.0 == 0 {
                return Err(bad("contention.background", "0: at least 1 byte".into()));
            }
        }
        if let Some(q) = &exp.quick {
            if q.repetitions == Some(0) {
                return Err(bad("quick.repetitions", "0: at least 1".into()));
            }
        }
        for (i, c) in exp.paper.claims.iter().enumerate() {
            if let Check::Similar { tolerance, .. } = c.check {
                if !(0.0..1.0).contains(&tolerance) {
                    return Err(bad(
                        &format!("paper.claims[{i}].check.tolerance"),
                        format!("{tolerance}: between 0 and 1"),
                    ));
                }
            }
        }
        Ok(exp)
    }

    /// The experiment as `--quick` runs it (or as is).
    pub fn effective(&self, quick: bool) -> SingleIpExperiment {
        let mut e = self.clone();
        if !quick {
            return e;
        }
        let Some(q) = &self.quick else {
            e.repetitions = 1;
            return e;
        };
        e.repetitions = q.repetitions.unwrap_or(1);
        if let Some(r) = e.rtt.as_mut() {
            r.round_trips = q.round_trips.unwrap_or(r.round_trips);
        }
        if let Some(b) = e.bandwidth.as_mut() {
            if let Some(s) = &q.sizes {
                b.sizes = s.clone();
            }
            b.transfers = q.transfers.unwrap_or(b.transfers);
            b.bytes_per_point = q.bytes_per_point.unwrap_or(b.bytes_per_point);
        }
        if let Some(c) = e.contention.as_mut() {
            c.background = q.background.unwrap_or(c.background);
            if let Some(f) = &q.foreground {
                c.foreground = f.clone();
            }
            c.foreground_delay = q.foreground_delay.unwrap_or(c.foreground_delay);
        }
        e
    }

    /// Every point: per repetition, per experiment, per system, per parameter.
    pub fn plan(&self, quick: bool) -> Vec<SingleIpPoint> {
        let e = self.effective(quick);
        let mut out = Vec::new();
        for repetition in 1..=e.repetitions {
            let mut push = |experiment, systems: &[System], params: &[u64]| {
                for &system in systems {
                    for &param in params {
                        out.push(SingleIpPoint {
                            experiment,
                            system,
                            param,
                            repetition,
                        });
                    }
                }
            };
            if let Some(r) = &e.rtt {
                push(ExpKind::Rtt, &r.systems, &[RTT_BYTES]);
            }
            if let Some(b) = &e.bandwidth {
                let sizes: Vec<u64> = b.sizes.iter().map(|s| s.0).collect();
                push(ExpKind::Bandwidth, &b.systems, &sizes);
            }
            if let Some(c) = &e.contention {
                let sizes: Vec<u64> = c.foreground.iter().map(|s| s.0).collect();
                push(ExpKind::Contention, &c.systems, &sizes);
            }
        }
        out
    }

    /// Every system any experiment names, in [`System::ALL`] order.
    pub fn systems(&self) -> Vec<System> {
        System::ALL
            .into_iter()
            .filter(|s| {
                self.rtt.as_ref().is_some_and(|r| r.systems.contains(s))
                    || self
                        .bandwidth
                        .as_ref()
                        .is_some_and(|r| r.systems.contains(s))
                    || self
                        .contention
                        .as_ref()
                        .is_some_and(|r| r.systems.contains(s))
            })
            .collect()
    }
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

/// Why a single-IP results directory could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum SingleIpError {
    /// A file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The error.
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
    /// The experiment file is invalid.
    #[error(transparent)]
    Experiment(#[from] ExperimentError),
}

impl SingleIpSweep {
    /// `DIR/points/<id>.json`.
    pub fn point_path(dir: &Path, id: &str) -> PathBuf {
        dir.join("points").join(format!("{id}.json"))
    }

    /// `DIR/logs/<id>/`.
    pub fn log_dir(dir: &Path, id: &str) -> PathBuf {
        dir.join("logs").join(id)
    }

    /// True when `DIR` holds a single-IP sweep (its experiment file says so).
    pub fn is_singleip_dir(dir: &Path) -> bool {
        crate::ExperimentKind::of_dir(dir).is_ok_and(|k| k == crate::ExperimentKind::Singleip)
    }

    /// Reads a directory.
    pub fn open(dir: &Path) -> Result<SingleIpSweep, SingleIpError> {
        let info: SingleIpSweepInfo = read_json(&dir.join("sweep.json"))?;
        if info.schema != SINGLEIP_SWEEP_SCHEMA {
            return Err(SingleIpError::Format {
                path: dir.join("sweep.json").display().to_string(),
                message: format!(
                    "schema {:?}, expected {SINGLEIP_SWEEP_SCHEMA:?}",
                    info.schema
                ),
            });
        }
        let experiment = SingleIpExperiment::from_file(&dir.join("experiment.toml"))?;
        let plan = experiment.plan(info.quick);
        let mut points = Vec::new();
        for p in &plan {
            let path = Self::point_path(dir, &p.id());
            if path.exists() {
                points.push(Self::read_point(&path)?);
            }
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
        let r: SingleIpRecord = read_json(path)?;
        if r.schema != SINGLEIP_POINT_SCHEMA {
            return Err(SingleIpError::Format {
                path: path.display().to_string(),
                message: format!("schema {:?}, expected {SINGLEIP_POINT_SCHEMA:?}", r.schema),
            });
        }
        Ok(r)
    }

    /// Writes a point file whole (temporary name, then rename).
    pub fn write_point(dir: &Path, r: &SingleIpRecord) -> Result<(), SingleIpError> {
        write_json_atomic(&Self::point_path(dir, &r.id), r)
    }

    /// Writes `sweep.json` whole.
    pub fn write_info(dir: &Path, info: &SingleIpSweepInfo) -> Result<(), SingleIpError> {
        write_json_atomic(&dir.join("sweep.json"), info)
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

    /// A metric of one system across its repetitions (`param`: the point's
    /// parameter; `None` for the RTT's 4 bytes).
    pub fn values(&self, metric: SingleIpMetric, system: System, param: Option<u64>) -> Vec<f64> {
        let exp = metric.experiment();
        let param = match exp {
            ExpKind::Rtt => RTT_BYTES,
            _ => match param {
                Some(p) => p,
                None => return Vec::new(),
            },
        };
        self.select(exp, system, param)
            .iter()
            .filter_map(|r| metric.of(r))
            .collect()
    }
}

fn read_json<T: for<'de> Deserialize<'de>>(path: &Path) -> Result<T, SingleIpError> {
    Ok(crate::results::read_json(path)?)
}

fn write_json_atomic<T: Serialize>(path: &Path, value: &T) -> Result<(), SingleIpError> {
    Ok(crate::results::write_json_whole(path, value, false)?)
}

impl From<crate::ResultsError> for SingleIpError {
    fn from(e: crate::ResultsError) -> SingleIpError {
        match e {
            crate::ResultsError::Io { path, source } => SingleIpError::Io { path, source },
            crate::ResultsError::Format { path, message } => {
                SingleIpError::Format { path, message }
            }
            other => SingleIpError::Format {
                path: String::new(),
                message: other.to_string(),
            },
        }
    }
}

// ------------------------------------------------------------------ verdicts

fn range_text(v: &[f64]) -> String {
    let lo = v.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let m = median(v.iter().copied()).unwrap_or(f64::NAN);
    if v.len() > 1 {
        format!("{} [{}–{}]", fmt_num(m), fmt_num(lo), fmt_num(hi))
    } else {
        fmt_num(m)
    }
}

/// A number with about three significant digits, no trailing `.0`.
pub fn fmt_num(v: f64) -> String {
    if !v.is_finite() {
        return "—".into();
    }
    let a = v.abs();
    let s = if a >= 100.0 {
        format!("{v:.0}")
    } else if a >= 10.0 {
        format!("{v:.1}")
    } else if a >= 1.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.3}")
    };
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

fn order(
    sweep: &SingleIpSweep,
    m: SingleIpMetric,
    p: Option<u64>,
    lo: System,
    hi: System,
) -> Judgement {
    let a = sweep.values(m, lo, p);
    let b = sweep.values(m, hi, p);
    if a.is_empty() || b.is_empty() {
        return Judgement::cannot_measure(format!(
            "no points of {} and {} for {}",
            lo.name(),
            hi.name(),
            m.label()
        ));
    }
    let a_max = a.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let a_min = a.iter().copied().fold(f64::INFINITY, f64::min);
    let b_max = b.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let b_min = b.iter().copied().fold(f64::INFINITY, f64::min);
    let what = format!(
        "{}: {} {} vs {} {}",
        m.label(),
        lo.name(),
        range_text(&a),
        hi.name(),
        range_text(&b)
    );
    if a_max < b_min {
        Judgement::holds(format!("{what}: {} lower in every repetition", lo.name()))
    } else if b_max < a_min {
        Judgement::does_not_hold(format!("{what}: the opposite order in every repetition"))
    } else {
        Judgement::does_not_hold(format!("{what}: the repetitions overlap, no clear order"))
    }
}

/// Judges a claim from a sweep's points: the verdict and the values
/// compared (or why there are none).
pub fn judge(sweep: &SingleIpSweep, check: &Check) -> Judgement {
    let (metric, param) = match check {
        Check::Order { metric, param, .. }
        | Check::Similar { metric, param, .. }
        | Check::AtLeast { metric, param, .. } => (*metric, *param),
        _ => return judge_at(sweep, check),
    };
    let Some(Bytes(want)) = param else {
        return judge_at(sweep, check);
    };
    let Some((at, note)) = sweep.resolve(metric.experiment(), want) else {
        return judge_at(sweep, check);
    };
    let mut c = check.clone();
    match &mut c {
        Check::Order { param, .. }
        | Check::Similar { param, .. }
        | Check::AtLeast { param, .. } => *param = Some(Bytes(at)),
        _ => {}
    }
    let v = judge_at(sweep, &c);
    match note {
        None => v,
        Some(n) => v.noted(&n),
    }
}

fn judge_at(sweep: &SingleIpSweep, check: &Check) -> Judgement {
    match check {
        Check::Unmeasurable { reason } => Judgement::cannot_measure(reason.clone()),
        Check::Order {
            metric,
            param,
            lower,
            higher,
        } => order(sweep, *metric, param.map(|b| b.0), *lower, *higher),
        Check::OrderUpTo {
            metric,
            max_param,
            lower,
            higher,
        } => {
            let sizes: Vec<u64> = sweep
                .points
                .iter()
                .filter(|r| {
                    r.point.experiment == metric.experiment() && r.point.param <= max_param.0
                })
                .map(|r| r.point.param)
                .collect::<std::collections::BTreeSet<u64>>()
                .into_iter()
                .collect();
            if sizes.is_empty() {
                return Judgement::cannot_measure(format!(
                    "no sizes up to {} measured",
                    bytes_label(max_param.0)
                ));
            }
            let verdicts: Vec<(u64, Judgement)> = sizes
                .iter()
                .map(|&s| (s, order(sweep, *metric, Some(s), *lower, *higher)))
                .collect();
            if let Some((_, v)) = verdicts
                .iter()
                .find(|(_, v)| matches!(v.verdict, Verdict::CannotMeasure(_)))
            {
                return v.clone();
            }
            let failed: Vec<String> = verdicts
                .iter()
                .filter(|(_, v)| v.verdict != Verdict::Holds)
                .map(|(s, v)| format!("{}: {}", bytes_label(*s), v.detail))
                .collect();
            if failed.is_empty() {
                Judgement::holds(format!(
                    "{} below {} at every size up to {}",
                    lower.name(),
                    higher.name(),
                    bytes_label(max_param.0)
                ))
            } else {
                Judgement::does_not_hold(failed.join("; "))
            }
        }
        Check::Similar {
            metric,
            param,
            systems,
            tolerance,
        } => {
            let meds: Vec<(System, Option<f64>)> = systems
                .iter()
                .map(|s| (*s, median(sweep.values(*metric, *s, param.map(|b| b.0)))))
                .collect();
            if meds.iter().any(|(_, m)| m.is_none()) {
                return Judgement::cannot_measure(format!(
                    "not every system has {}",
                    metric.label()
                ));
            }
            let vals: Vec<f64> = meds.iter().filter_map(|(_, m)| *m).collect();
            let hi = vals.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            let lo = vals.iter().copied().fold(f64::INFINITY, f64::min);
            let spread = if hi > 0.0 { (hi - lo) / hi } else { 0.0 };
            let text = meds
                .iter()
                .map(|(s, m)| format!("{} {}", s.name(), fmt_num(m.unwrap_or(f64::NAN))))
                .collect::<Vec<_>>()
                .join(", ");
            let what = format!(
                "{}: {text}; spread {:.0}% (tolerance {:.0}%)",
                metric.label(),
                spread * 100.0,
                tolerance * 100.0
            );
            if spread <= *tolerance {
                Judgement::holds(what)
            } else {
                Judgement::does_not_hold(what)
            }
        }
        Check::AtLeast {
            metric,
            param,
            systems,
            value,
        } => {
            let mut parts = Vec::new();
            let mut ok = true;
            for s in systems {
                let v = sweep.values(*metric, *s, param.map(|b| b.0));
                if v.is_empty() {
                    return Judgement::cannot_measure(format!(
                        "no points of {} for {}",
                        s.name(),
                        metric.label()
                    ));
                }
                ok &= v.iter().all(|x| *x >= *value);
                parts.push(format!("{} {}", s.name(), range_text(&v)));
            }
            let what = format!(
                "{} ≥ {}: {}",
                metric.label(),
                fmt_num(*value),
                parts.join(", ")
            );
            if ok {
                Judgement::holds(what)
            } else {
                Judgement::does_not_hold(what)
            }
        }
    }
}

// ------------------------------------------------------------------ contention analysis

/// Inputs of [`analyse_contention`] besides the streams.
#[derive(Clone, Debug)]
pub struct ContentionSetup {
    /// Size of the background streams.
    pub background: u64,
    /// Bin width, s.
    pub bin_s: f64,
    /// Early window, s.
    pub early_window_s: f64,
    /// Link rate, bit/s.
    pub rate_bps: u64,
    /// One-way delay of the link, ms (subtracted from the emulator's holding time).
    pub delay_ms: f64,
    /// The clients' addresses: foreground, background 1, background 2.
    pub client_addrs: [String; 3],
    /// Every n-th non-foreground packet goes on the timeline.
    pub timeline_every: u32,
}

/// The streams' results and the fairness over their overlap.
pub fn analyse_contention(
    setup: &ContentionSetup,
    epoch: f64,
    streams: &[(String, ProbeTransfer)],
    log: Option<&mut dyn BufRead>,
) -> Result<ContentionResult, String> {
    let bin = setup.bin_s;
    let results: Vec<StreamResult> = streams
        .iter()
        .map(|(name, t)| StreamResult {
            name: name.clone(),
            size: t.size,
            got: t.got,
            start_s: t.t0 - epoch,
            completion_s: t.t_last.filter(|_| t.got == t.size).map(|l| l - t.t0),
            bins_mbit_s: t.bins.iter().map(|b| *b as f64 * 8.0 / bin / 1e6).collect(),
        })
        .collect();
    let fg = &streams.first().ok_or("no foreground stream")?.1;
    let fg_completion_ms = fg
        .t_last
        .filter(|_| fg.got == fg.size)
        .map(|l| (l - fg.t0) * 1e3);
    // Fairness among the streams as large as the background, over the whole
    // bins in which every one of them ran.
    let big: Vec<&ProbeTransfer> = streams
        .iter()
        .map(|(_, t)| t)
        .filter(|t| t.size >= setup.background)
        .collect();
    let (mut jain_overlap, mut jain_early, mut jain_bin_median) = (None, None, None);
    let (mut overlap_s, mut link_utilisation) = (None, None);
    if big.len() >= 2 && big.iter().all(|t| t.t_last.is_some()) {
        let lo = big.iter().map(|t| t.t0).fold(f64::NEG_INFINITY, f64::max) - epoch;
        let hi = big
            .iter()
            .filter_map(|t| t.t_last)
            .fold(f64::INFINITY, f64::min)
            - epoch;
        let k0 = (lo / bin).floor() as i64 + 1;
        let k1 = (hi / bin).floor() as i64;
        if k1 > k0 {
            let sum = |t: &ProbeTransfer, a: i64, b: i64| -> f64 {
                (a..b)
                    .map(|k| t.bins.get(k as usize).copied().unwrap_or(0) as f64)
                    .sum()
            };
            let totals: Vec<f64> = big.iter().map(|t| sum(t, k0, k1)).collect();
            jain_overlap = jain(&totals);
            let early_bins = ((setup.early_window_s / bin).round() as i64).max(1);
            let ke = (k0 + early_bins).min(k1);
            jain_early = jain(&big.iter().map(|t| sum(t, k0, ke)).collect::<Vec<_>>());
            let per_bin: Vec<f64> = (k0..k1)
                .filter_map(|k| jain(&big.iter().map(|t| sum(t, k, k + 1)).collect::<Vec<_>>()))
                .collect();
            jain_bin_median = median(per_bin);
            let secs = (k1 - k0) as f64 * bin;
            overlap_s = Some(secs);
            link_utilisation =
                Some(totals.iter().sum::<f64>() * 8.0 / secs / setup.rate_bps as f64);
        }
    }
    let mut out = ContentionResult {
        bin_s: bin,
        streams: results,
        fg_completion_ms,
        fg_connect_ms: (fg.t_conn - fg.t0) * 1e3,
        jain_overlap,
        jain_early,
        jain_bin_median,
        overlap_s,
        link_utilisation,
        queue_ms_median: None,
        queue_ms_p95: None,
        queue_ms_fg_median: None,
        drops: 0,
        timeline: Vec::new(),
        timeline_every: setup.timeline_every,
    };
    if let Some(log) = log {
        let bg1_t0 = streams.get(1).map_or(fg.t0, |s| s.1.t0);
        read_packet_log(setup, epoch, fg.size, bg1_t0, log, &mut out)?;
    }
    Ok(out)
}

/// Reads linkem's log: queueing delay toward the clients, drops, and the
/// time/sequence timeline. linkem's clock (ns since it started) is put on
/// the clients' by matching background 1's first SYN to its connect start.
fn read_packet_log(
    setup: &ContentionSetup,
    epoch: f64,
    fg_size: u64,
    bg1_t0: f64,
    log: &mut dyn BufRead,
    out: &mut ContentionResult,
) -> Result<(), String> {
    let mut header = String::new();
    log.read_line(&mut header).map_err(|e| e.to_string())?;
    let cols: BTreeMap<&str, usize> = header
        .trim_end()
        .split(',')
        .enumerate()
        .map(|(i, h)| (h, i))
        .collect();
    let col = |name: &str| {
        cols.get(name)
            .copied()
            .ok_or_else(|| format!("the packet log has no column {name:?}"))
    };
    let (c_dir, c_arr, c_dep, c_fate) = (
        col("direction")?,
        col("arrival_ns")?,
        col("departure_ns")?,
        col("fate")?,
    );
    let (c_src, c_dst, c_proto, c_seq, c_flags, c_len) = (
        col("src")?,
        col("dst")?,
        col("protocol")?,
        col("seq")?,
        col("flags")?,
        col("payload_len")?,
    );
    let mut syn_ns: Option<u64> = None;
    let mut first_seq: [Option<u64>; 3] = [None; 3];
    let mut counts = [0u64; 3];
    let (mut q_all, mut q_fg) = (Vec::new(), Vec::new());
    let mut raw: Vec<(u64, u8, u64, bool)> = Vec::new();
    let small_fg = fg_size < setup.background;
    let every = u64::from(setup.timeline_every.max(1));
    for line in log.lines() {
        let line = line.map_err(|e| e.to_string())?;
        let c: Vec<&str> = line.split(',').collect();
        if c.len() < cols.len() || c[c_proto] != "6" {
            continue;
        }
        let arrival: u64 = c[c_arr].parse().unwrap_or(0);
        if c[c_dir] != "rl" {
            if syn_ns.is_none() && c[c_src] == setup.client_addrs[1] && c[c_flags].contains('S') {
                syn_ns = Some(arrival);
            }
            continue;
        }
        let Some(s) = setup.client_addrs.iter().position(|a| a == c[c_dst]) else {
            continue;
        };
        let plen: u64 = c[c_len].parse().unwrap_or(0);
        let seq: u64 = c[c_seq].parse().unwrap_or(0);
        // The stream starts at its SYN-ACK: earlier packets to the same
        // client belong to other connections (a readiness probe's FIN).
        if first_seq[s].is_none() {
            if !c[c_flags].contains('S') {
                continue;
            }
            first_seq[s] = Some(seq);
        }
        let first = first_seq[s].unwrap_or(seq);
        let rel = seq.wrapping_sub(first) & 0xffff_ffff;
        if rel >= 1 << 31 {
            // Before the stream's start: another connection.
            continue;
        }
        let dropped = c[c_fate] != "sent";
        if dropped {
            out.drops += 1;
        } else if plen > 0 {
            if let Ok(dep) = c[c_dep].parse::<u64>() {
                let q = dep.saturating_sub(arrival) as f64 / 1e6 - setup.delay_ms;
                q_all.push(q);
                if s == 0 {
                    q_fg.push(q);
                }
            }
        }
        counts[s] += 1;
        if plen > 0 && ((s == 0 && small_fg) || (counts[s] - 1) % every == 0 || dropped) {
            raw.push((arrival, s as u8, rel, dropped));
        }
    }
    let offset = syn_ns.map_or(0.0, |n| n as f64 / 1e9 - (bg1_t0 - epoch));
    out.timeline = raw
        .into_iter()
        .map(|(a, s, seq, dropped)| TimelinePacket {
            t_s: ((a as f64 / 1e9 - offset) * 1e6).round() / 1e6,
            stream: s,
            seq,
            dropped,
        })
        .collect();
    q_all.sort_by(f64::total_cmp);
    out.queue_ms_median = median(q_all.iter().copied());
    out.queue_ms_p95 = percentile(&q_all, 95.0);
    out.queue_ms_fg_median = median(q_fg);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = r#"
kind = "singleip"
name = "t"
title = "t"
repetitions = 2
[rtt]
systems = ["io16k", "nat"]
round_trips = 100
[bandwidth]
systems = ["io16k"]
sizes = ["1KB", 100000]
transfers = 5
bytes_per_point = "1MB"
[contention]
systems = ["io16k", "iooff"]
rate = "100mbit"
queue = 1000
delay = "1ms"
background = "100MB"
foreground = ["100KB"]
foreground_delay = "3s"
background_after_small = "4s"
[quick]
repetitions = 1
round_trips = 10
[[paper.claims]]
id = "c"
source = "Table 3"
claim = "x"
check = { kind = "order", metric = "rtt_mean_us", lower = "io16k", higher = "nat" }
"#;

    #[test]
    fn parses_and_plans_with_stable_ids() {
        assert_eq!(
            crate::ExperimentKind::of_text(FILE, "t.toml").unwrap(),
            crate::ExperimentKind::Singleip
        );
        let e = SingleIpExperiment::from_toml(FILE, "t.toml").unwrap();
        let plan = e.plan(false);
        assert_eq!(plan.len(), 2 * (2 + 2 + 2));
        assert_eq!(plan[0].id(), "rtt-io16k-4B-rep1");
        assert_eq!(plan[2].id(), "bandwidth-io16k-1KB-rep1");
        assert_eq!(plan[4].id(), "contention-io16k-100KB-rep1");
        assert_eq!(e.plan(true).len(), 6);
        assert_eq!(e.effective(true).rtt.unwrap().round_trips, 10);
        let b = e.bandwidth.unwrap();
        assert_eq!(b.transfers_of(1000), 5);
        assert_eq!(b.transfers_of(1_000_000), 1);
        assert_eq!(e.contention.unwrap().rate.0, 100_000_000);
    }

    #[test]
    fn the_shipped_file_parses() {
        let path =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../experiments/singleip-saps.toml");
        let e = SingleIpExperiment::from_file(&path).unwrap_or_else(|e| panic!("{e}"));
        let (quick, full) = (e.plan(true), e.plan(false));
        assert!(!quick.is_empty() && quick.len() < full.len());
        assert_eq!(
            e.paper
                .values
                .iter()
                .filter(|v| v.source == "Table 3")
                .count(),
            7
        );
        assert!(e.paper.claims.len() >= 10);
    }

    #[test]
    fn errors_name_the_field() {
        let bad = FILE.replace("round_trips = 100", "round_trip = 100");
        let err = SingleIpExperiment::from_toml(&bad, "t.toml")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("round_trip") && err.contains("t.toml"),
            "{err}"
        );
        let bad = FILE.replace("\"io16k\", \"nat\"", "\"io16k\", \"lvs\"");
        let err = SingleIpExperiment::from_toml(&bad, "t.toml")
            .unwrap_err()
            .to_string();
        assert!(err.contains("lvs"), "{err}");
        let bad = FILE.replace("\"100mbit\"", "\"fast\"");
        let err = SingleIpExperiment::from_toml(&bad, "t.toml")
            .unwrap_err()
            .to_string();
        assert!(err.contains("rate"), "{err}");
        let bad = FILE.replace("repetitions = 2", "repetitions = 0");
        let err = SingleIpExperiment::from_toml(&bad, "t.toml")
            .unwrap_err()
            .to_string();
        assert!(err.contains("repetitions"), "{err}");
    }

    #[test]
    fn sizes_and_labels() {
        assert_eq!(parse_bytes("100KB").unwrap(), 100_000);
        assert_eq!(parse_bytes("16KiB").unwrap(), 16_384);
        assert!(parse_bytes("3 apples").is_err());
        assert_eq!(bytes_label(100_000_000), "100MB");
        assert_eq!(bytes_label(4), "4B");
        assert_eq!(fmt_num(217.6), "218");
        assert_eq!(fmt_num(2.5), "2.5");
        assert_eq!(fmt_num(10.0), "10");
    }

    #[test]
    fn jain_and_rtt_summary() {
        assert_eq!(jain(&[1.0, 1.0, 1.0]), Some(1.0));
        assert!((jain(&[1.0, 0.0]).unwrap() - 0.5).abs() < 1e-12);
        let r = summarise_rtt(&[100.0, 300.0, 200.0]).unwrap();
        assert_eq!(
            (r.min_us, r.p50_us, r.max_us, r.mean_us),
            (100.0, 200.0, 300.0, 200.0)
        );
    }

    #[test]
    fn contention_from_streams_and_a_log() {
        let t = |size, t0, bins: Vec<u64>| ProbeTransfer {
            size,
            got: size,
            t0,
            t_conn: t0 + 0.001,
            t_first: Some(t0 + 0.002),
            t_last: Some(t0 + bins.len() as f64 * 0.1),
            bins,
        };
        let setup = ContentionSetup {
            background: 1000,
            bin_s: 0.1,
            early_window_s: 0.2,
            rate_bps: 240,
            delay_ms: 1.0,
            client_addrs: ["1.0.0.1".into(), "1.0.0.2".into(), "1.0.0.3".into()],
            timeline_every: 1,
        };
        let streams = vec![
            ("fg".to_string(), t(1000, 100.0, vec![10; 10])),
            ("bg1".to_string(), t(1000, 100.0, vec![10; 10])),
            ("bg2".to_string(), t(1000, 100.0, vec![10; 10])),
        ];
        let log = format!(
            "{}\nlr,1,0,,,sent,60,1,1.0.0.2,2.0.0.1,6,1,80,0,0,S,0\n\
             rl,1,500000,500000,1500000,sent,60,1,2.0.0.1,1.0.0.1,6,80,9,5,0,F.,0\n\
             rl,1,600000,600000,1600000,sent,60,1,2.0.0.1,1.0.0.1,6,80,1,499,0,S.,0\n\
             rl,1,700000,700000,1700000,sent,60,1,2.0.0.1,1.0.0.2,6,80,1,899,0,S.,0\n\
             rl,1,1000000,2000000,3500000,sent,1500,1,2.0.0.1,1.0.0.1,6,80,1,500,0,.,1448\n\
             rl,2,2000000,,,queue,1500,1,2.0.0.1,1.0.0.2,6,80,1,900,0,.,1448\n",
            "direction,index,arrival_ns,scheduled_ns,departure_ns,fate,bytes,segments,src,dst,protocol,sport,dport,seq,ack,flags,payload_len"
        );
        let mut reader = std::io::Cursor::new(log.into_bytes());
        let c = analyse_contention(&setup, 100.0, &streams, Some(&mut reader)).unwrap();
        assert_eq!(c.jain_overlap, Some(1.0));
        assert_eq!(c.drops, 1);
        assert_eq!(c.timeline.len(), 2);
        assert_eq!((c.timeline[0].seq, c.timeline[1].seq), (1, 1));
        assert!((c.queue_ms_fg_median.unwrap() - 1.5).abs() < 1e-9);
        assert!(c.link_utilisation.unwrap() > 0.9);
    }
}
