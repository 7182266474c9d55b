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

mod claims;
mod contention;
mod experiment;
mod records;
#[cfg(test)]
mod tests;
mod values;

pub use claims::{fmt_num, judge, Check, PaperValue, SingleIpClaim, SingleIpMetric, SingleIpPaper};
pub use contention::{
    analyse_contention, apply_host_queue, summarise_host_queue, ContentionSetup, FAIR_JAIN,
    FAIR_WINDOW_S,
};
pub(crate) use experiment::check_validity;
pub use experiment::{
    BandwidthSection, Bottleneck, ContentionSection, ExpKind, Kind, Placement, QuickSection,
    RttSection, SingleIpExperiment, SingleIpPoint, System, LINK_QUEUE, RTT_BYTES,
};

pub use records::{
    jain, median, percentile, summarise_rtt, transfer_result, ContentionResult, CpuUse, HostQueue,
    LinkInfo, PlacementInfo, ProbeRtt, ProbeTransfer, QueueSample, QueueStats, RttResult,
    SingleIpError, SingleIpRecord, SingleIpSweep, SingleIpSweepInfo, StreamResult, TimelinePacket,
    TransferResult, FULL_PACKET_BYTES,
};
pub use values::{bytes_label, parse_bytes, BitRate, Bytes, Dur};

/// Schema tag of a single-IP `sweep.json`.
pub const SINGLEIP_SWEEP_SCHEMA: &str = "connlab.singleip.sweep/1";
/// Schema tag of a single-IP point file.
pub const SINGLEIP_POINT_SCHEMA: &str = "connlab.singleip.point/1";
