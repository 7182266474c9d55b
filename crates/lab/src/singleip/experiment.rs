//! The experiment file: kinds, systems, the rtt, bandwidth and contention
//! sections, quick settings, and the plan of points it gives.

use super::claims::{Check, SingleIpPaper};
use super::values::{bytes_label, BitRate, Bytes, Dur};
use crate::experiment::ExperimentError;
use crate::values::LinkRate;
use serde::{Deserialize, Serialize};
use std::path::Path;
use std::time::Duration;

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
    /// `[validity]`: the gates every point must pass (`completion`,
    /// `steal`, `foreign_cpu`, `machine`) and the attempts per point.
    #[serde(default)]
    pub validity: crate::validity::ValidityLimits,
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
    /// Rate of the emulated link (`"1gbit"`, or `"none"`, the default: as
    /// fast as the emulator forwards), with a queue of [`LINK_QUEUE`] packets.
    #[serde(default)]
    pub link_rate: Option<LinkRate>,
}

/// The emulator's queue, in packets, behind a `link_rate` of `[rtt]` or
/// `[bandwidth]`: Linux's default interface queue length (the paper's
/// section 2.2.1).
pub const LINK_QUEUE: u32 = 1000;

fn link_rate_bps(rate: Option<&LinkRate>) -> Option<u64> {
    rate.and_then(LinkRate::bps)
}

impl RttSection {
    /// The link's rate, bit/s, if limited.
    pub fn link_rate_bps(&self) -> Option<u64> {
        link_rate_bps(self.link_rate.as_ref())
    }
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
    /// Rate of the emulated link, as in `[rtt]`.
    #[serde(default)]
    pub link_rate: Option<LinkRate>,
}

impl BandwidthSection {
    /// The link's rate, bit/s, if limited.
    pub fn link_rate_bps(&self) -> Option<u64> {
        link_rate_bps(self.link_rate.as_ref())
    }

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
    /// The NAT system only: an output queue of this many packets at `rate`
    /// on the switch port toward the front host (the paper's Ethernet
    /// switch between the nodes and the NAT router). None: no queue there.
    #[serde(default)]
    pub nat_switch_queue: Option<u32>,
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

/// Checks `[validity]` of a kind without an A/A control (single-IP,
/// pipeline): the limits' own checks, and no `control` other than `"none"`.
pub(crate) fn check_validity(
    v: &crate::validity::ValidityLimits,
    bad: &dyn Fn(&str, String) -> ExperimentError,
) -> Result<(), ExperimentError> {
    v.check().map_err(|(field, message)| bad(&field, message))?;
    if let Some(Some(c)) = v.control_choice() {
        return Err(bad(
            "validity.control",
            format!("{c:?}: this kind measures no A/A control; leave it out or say \"none\""),
        ));
    }
    Ok(())
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
        let link_rate = |field: &str, rate: Option<&LinkRate>| -> Result<(), ExperimentError> {
            match link_rate_bps(rate) {
                Some(bps) if !(1_000_000..=10_000_000_000).contains(&bps) => Err(bad(
                    field,
                    format!(
                        "{:?}: between 1mbit and 10gbit, or \"none\"",
                        rate.map_or("", LinkRate::as_str)
                    ),
                )),
                _ => Ok(()),
            }
        };
        if let Some(r) = &exp.rtt {
            systems("rtt.systems", &r.systems)?;
            link_rate("rtt.link_rate", r.link_rate.as_ref())?;
            if !(1..=10_000_000).contains(&r.round_trips) {
                return Err(bad(
                    "rtt.round_trips",
                    format!("{}: 1 to 10^7", r.round_trips),
                ));
            }
        }
        if let Some(b) = &exp.bandwidth {
            systems("bandwidth.systems", &b.systems)?;
            link_rate("bandwidth.link_rate", b.link_rate.as_ref())?;
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
            if c.nat_switch_queue == Some(0) {
                return Err(bad(
                    "contention.nat_switch_queue",
                    "0: at least 1 packet, or leave it out for no switch queue".into(),
                ));
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
        check_validity(&exp.validity, &bad)?;
        for (i, c) in exp.paper.claims.iter().enumerate() {
            if let Check::Within { min, max, .. } | Check::Ratio { min, max, .. } = c.check {
                if !(min.is_finite() && max.is_finite() && min <= max) {
                    return Err(bad(
                        &format!("paper.claims[{i}].check.min"),
                        format!("{min}..{max}: finite bounds, min at most max"),
                    ));
                }
            }
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
