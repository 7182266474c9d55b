//! What a run reports: per layer, per thread and overall, and how the
//! collected thread reports become a [`PipelineResult`].

use std::fmt;

use crate::config::Mode;
use crate::layer;
use crate::projection::{project, Projection};
use crate::run_projection::{project_layers, projection_input};
use crate::runtime::{Collected, Ctx, ThreadRole};

/// The sending or the receiving side of the pipeline. Serialized as
/// `"sender"` and `"receiver"`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Side {
    /// The side with the source: sends CR and DR, generates the messages.
    Sender,
    /// The side with the sink: answers the connection, checks the messages.
    Receiver,
}

impl Side {
    /// Both sides, sender first (the order of `per_layer` and of the
    /// run-to-completion side arrays).
    pub const BOTH: [Side; 2] = [Side::Sender, Side::Receiver];

    /// `"sender"` or `"receiver"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Side::Sender => "sender",
            Side::Receiver => "receiver",
        }
    }
}

impl fmt::Display for Side {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.as_str())
    }
}

impl AsRef<str> for Side {
    fn as_ref(&self) -> &str {
        self.as_str()
    }
}

/// One layer of one side.
#[derive(serde::Serialize, serde::Deserialize, Clone, Debug, PartialEq)]
pub struct LayerStats {
    /// Which side.
    pub side: Side,
    /// Layer number, 1 = bottom.
    pub layer: usize,
    /// Layer-parallel: CPU seconds of the layer's thread (includes idle
    /// polling: spins and yields). Run-to-completion: seconds the workers
    /// spent inside this layer, lock waits included (wall clock).
    pub cpu_s: f64,
    /// DT PDUs this layer sent (sender) or delivered up (receiver).
    pub messages: u64,
    /// `cpu_s` per message, ns.
    pub cpu_ns_per_message: f64,
    /// DT retransmissions.
    pub retransmissions: u64,
    /// Mean occupancy of the queue into this layer (from above on the sending
    /// side, from below on the receiving side), sampled every 20 us while the
    /// thread runs. 0 in run-to-completion mode.
    pub queue_occupancy_mean: f64,
    /// Largest sampled occupancy.
    pub queue_occupancy_max: u64,
    /// CPU the thread was pinned to.
    pub cpu: Option<usize>,
    /// Seconds of rounds that did work (wall clock, each round capped at 4x
    /// the median per-item cost so a round the scheduler interrupted does not
    /// count other threads' work); layer-parallel only, otherwise the time
    /// inside the entity.
    pub busy_s: f64,
    /// `busy_s` per message, ns: the stage cost the projection uses.
    pub busy_ns_per_message: f64,
    /// The same without the cap, ns per message (for comparison).
    #[serde(default)]
    pub busy_raw_ns_per_message: f64,
    /// Retransmission timer expiries.
    pub timeouts: u64,
    /// Duplicate DT dropped.
    pub duplicates: u64,
    /// DT buffered out of order.
    pub out_of_order: u64,
    /// PDUs rejected by header or checksum checks.
    pub rejected: u64,
    /// Most DT unacknowledged at once (never above the window).
    pub max_outstanding: u64,
    /// Retransmissions that had to copy the PDU.
    pub retransmit_copies: u64,
    /// Run-to-completion: acquisitions of this layer's lock to carry work
    /// (a PDU, an SDU, a release, the connection; not idle polls of its
    /// timers), summed over the side's workers (0 in layer-parallel mode,
    /// which has no layer lock).
    #[serde(default)]
    pub lock_acquisitions: u64,
    /// Run-to-completion: acquisitions that found the lock held by another
    /// worker and had to wait.
    #[serde(default)]
    pub lock_contended: u64,
    /// Run-to-completion: seconds those acquisitions waited, summed over
    /// workers (wall clock).
    #[serde(default)]
    pub lock_wait_s: f64,
}

/// Any thread of the run (layers, source, sink, lines, workers).
#[derive(serde::Serialize, serde::Deserialize, Clone, Debug, PartialEq)]
pub struct StageStats {
    /// E.g. `"sender layer 3"`, `"receiver line"`, `"sender worker 0"`.
    pub name: String,
    /// Which side.
    pub side: Side,
    /// Thread CPU seconds.
    pub cpu_s: f64,
    /// Seconds of rounds that did work (capped like [`LayerStats::busy_s`]).
    pub busy_s: f64,
    /// Messages (layers, source, sink) or frames (lines) handled.
    pub messages: u64,
    /// `busy_s` per message, ns.
    pub busy_ns_per_message: f64,
    /// The same without the cap, ns per message.
    #[serde(default)]
    pub busy_raw_ns_per_message: f64,
    /// Timed working rounds behind `busy_s`.
    #[serde(default)]
    pub busy_rounds: u64,
    /// `sched_yield` calls while idle.
    pub yields: u64,
    /// Parks while idle.
    pub parks: u64,
    /// Lines: frames dropped (loss).
    pub dropped: u64,
    /// Lines: frames duplicated.
    pub duplicated: u64,
    /// Lines: frames reordered.
    pub reordered: u64,
    /// CPU the thread was pinned to.
    pub cpu: Option<usize>,
}

/// The result of one run.
#[derive(serde::Serialize, serde::Deserialize, Clone, Debug, PartialEq)]
pub struct PipelineResult {
    /// Layers per side.
    pub layers: usize,
    /// User bytes per message.
    pub message_size: usize,
    /// [`Mode::name`].
    pub mode: String,
    /// [`LinkConfig::describe`](crate::LinkConfig::describe).
    pub link: String,
    /// Messages generated by the source.
    pub messages_sent: u64,
    /// Messages delivered to the sink.
    pub messages_delivered: u64,
    /// User bytes delivered.
    pub bytes_delivered: u64,
    /// Every message arrived exactly once, in order, intact, and the stream
    /// checksums agree.
    pub verified: bool,
    /// The receiver's stream checksum (16 hex digits).
    pub stream_checksum: String,
    /// Seconds from the first message sent to the last delivered.
    pub elapsed_s: f64,
    /// User data delivered per second, Mbit/s.
    pub throughput_mbit_s: f64,
    /// Messages delivered per second.
    pub messages_per_s: f64,
    /// DT retransmissions, all layers and sides.
    pub retransmissions: u64,
    /// Sender layers 1..n, then receiver layers 1..n.
    pub per_layer: Vec<LayerStats>,
    /// Measured SPSC hop cost used for the projection, ns.
    pub handoff_ns: f64,
    /// Throughput with one core per layer thread (layer-parallel) or per
    /// worker (run-to-completion), Mbit/s, bounded by the line rate only:
    /// the layer stages alone. [`PipelineResult::projection`] is the
    /// figure bounded by every stage, the line and the CPU share.
    pub projected_throughput_mbit_s: f64,
    /// What bounds the projection, e.g. `"receiver layer 1"` or `"line"`.
    pub projected_bottleneck: String,
    /// Stopped by `stop` or the time limit before the end.
    pub interrupted: bool,
    /// The sender's stream checksum.
    pub sender_checksum: String,
    /// Stopped by the time limit.
    pub timed_out: bool,
    /// The projection counting the source, sink and line threads too.
    pub projected_with_endpoints_mbit_s: f64,
    /// What bounds that projection.
    pub projected_with_endpoints_bottleneck: String,
    /// Every thread.
    pub stages: Vec<StageStats>,
    /// Up to 8 verification failures.
    pub errors: Vec<String>,
    /// Pool algorithm and size.
    pub pool: String,
    /// The projection to one core per thread bounded by the stages the
    /// layers leave out (source, sink, lines), the line rate and the CPU
    /// share, or the reason there is none ([`projection`](crate::projection)).
    #[serde(default = "unrecorded_projection")]
    pub projection: Projection,
}

fn unrecorded_projection() -> Projection {
    Projection::none("recorded before bounded projections existed")
}

impl PipelineResult {
    /// The share of work-carrying layer-lock acquisitions
    /// ([`LayerStats::lock_acquisitions`]), over every layer of both sides,
    /// that found the lock held by another worker; `None` when no layer
    /// lock was taken (layer-parallel mode).
    pub fn lock_contention(&self) -> Option<f64> {
        let acquired: u64 = self.per_layer.iter().map(|l| l.lock_acquisitions).sum();
        let contended: u64 = self.per_layer.iter().map(|l| l.lock_contended).sum();
        (acquired > 0).then(|| contended as f64 / acquired as f64)
    }

    /// Seconds every worker waited for layer locks, summed over layers and
    /// sides (0 in layer-parallel mode).
    pub fn lock_wait_s(&self) -> f64 {
        self.per_layer.iter().map(|l| l.lock_wait_s).sum()
    }

    /// A verified result with the given throughput and projection and no
    /// per-thread detail, for report fixtures and tests (no run needed).
    pub fn synthetic(
        layers: usize,
        message_size: usize,
        mode: Mode,
        throughput_mbit_s: f64,
        projection: Projection,
    ) -> PipelineResult {
        PipelineResult {
            layers,
            message_size,
            mode: mode.name().to_string(),
            link: "synthetic".into(),
            messages_sent: 500,
            messages_delivered: 500,
            bytes_delivered: 500 * message_size as u64,
            verified: true,
            stream_checksum: String::new(),
            elapsed_s: 1.0,
            throughput_mbit_s,
            messages_per_s: throughput_mbit_s * 1e6 / 8.0 / message_size.max(1) as f64,
            retransmissions: 0,
            per_layer: Vec::new(),
            handoff_ns: 0.0,
            projected_throughput_mbit_s: projection.layers_only_mbit_s.unwrap_or(0.0),
            projected_bottleneck: String::new(),
            interrupted: false,
            sender_checksum: String::new(),
            timed_out: false,
            projected_with_endpoints_mbit_s: projection.mbit_s.unwrap_or(0.0),
            projected_with_endpoints_bottleneck: projection.bound.clone(),
            stages: Vec::new(),
            errors: Vec::new(),
            pool: String::new(),
            projection,
        }
    }
}

/// Relative capacity as the paper defines it: protocol work done per unit
/// time with `layers` layers, relative to one layer: `throughput * layers /
/// base_throughput` (`base_throughput` = the 1-layer throughput). Efficiency
/// is this divided by `layers`. 0 if `base_throughput` is not positive.
pub fn relative_capacity(throughput: f64, layers: usize, base_throughput: f64) -> f64 {
    if base_throughput > 0.0 {
        throughput * layers as f64 / base_throughput
    } else {
        0.0
    }
}

pub(crate) fn per_message_ns(seconds: f64, messages: u64) -> f64 {
    if messages == 0 {
        0.0
    } else {
        seconds * 1e9 / messages as f64
    }
}

fn layer_stats(
    side: Side,
    layer: usize,
    cpu_s: f64,
    busy: (f64, f64),
    c: &layer::LayerCounters,
    occupancy: (f64, u64),
    cpu: Option<usize>,
) -> LayerStats {
    let messages = if side == Side::Sender {
        c.data_sent
    } else {
        c.data_delivered
    };
    LayerStats {
        side,
        layer,
        cpu_s,
        messages,
        cpu_ns_per_message: per_message_ns(cpu_s, messages),
        retransmissions: c.retransmissions,
        queue_occupancy_mean: occupancy.0,
        queue_occupancy_max: occupancy.1,
        cpu,
        busy_s: busy.0,
        busy_ns_per_message: per_message_ns(busy.0, messages),
        busy_raw_ns_per_message: per_message_ns(busy.1, messages),
        timeouts: c.timeouts,
        duplicates: c.duplicates,
        out_of_order: c.out_of_order,
        rejected: c.rejected,
        max_outstanding: c.max_outstanding,
        retransmit_copies: c.retransmit_copies,
        lock_acquisitions: 0,
        lock_contended: 0,
        lock_wait_s: 0.0,
    }
}

pub(crate) fn assemble(
    ctx: &Ctx<'_>,
    collected: &Collected,
    handoff_ns: f64,
    timed_out: bool,
    interrupted: bool,
) -> PipelineResult {
    let cfg = ctx.cfg;
    let n = cfg.layers;
    let sink = ctx.sink.lock().unwrap_or_else(|e| e.into_inner());
    let source = *ctx.source.lock().unwrap_or_else(|e| e.into_inner());
    let (sent, sender_ck) = source.map_or((0, String::new()), |s| (s.sent, s.checksum.hex()));
    let elapsed_s = match (ctx.first_send.get(), sink.last) {
        (Some(a), Some(b)) if b > *a => (b - *a).as_secs_f64(),
        _ => 0.0,
    };
    let mut per_layer = Vec::with_capacity(2 * n);
    match (&collected.rtc_counters, &collected.rtc_layer_time) {
        (Some(counters), Some(times)) => {
            for (si, side) in Side::BOTH.into_iter().enumerate() {
                for l in 0..n {
                    let t = times[si][l].as_secs_f64();
                    let mut stats =
                        layer_stats(side, l + 1, t, (t, t), &counters[si][l], (0.0, 0), None);
                    if let Some(locks) = &collected.rtc_locks {
                        let k = &locks[si];
                        stats.lock_acquisitions = k.acquired.get(l).copied().unwrap_or(0);
                        stats.lock_contended = k.contended.get(l).copied().unwrap_or(0);
                        stats.lock_wait_s = k.wait.get(l).map_or(0.0, |d| d.as_secs_f64());
                    }
                    per_layer.push(stats);
                }
            }
        }
        _ => {
            for side in Side::BOTH {
                for l in 1..=n {
                    if let Some(r) = collected
                        .threads
                        .iter()
                        .find(|r| r.side == side && r.role == ThreadRole::Layer(l))
                    {
                        let c = r.counters.unwrap_or_default();
                        per_layer.push(layer_stats(
                            side,
                            l,
                            r.cpu_s,
                            (r.busy_s, r.busy_raw_s),
                            &c,
                            (r.occupancy_mean, r.occupancy_max),
                            r.cpu,
                        ));
                    }
                }
            }
        }
    }
    let stages: Vec<StageStats> = collected
        .threads
        .iter()
        .map(|r| StageStats {
            name: r.name.clone(),
            side: r.side,
            cpu_s: r.cpu_s,
            busy_s: r.busy_s,
            messages: r.messages,
            busy_ns_per_message: per_message_ns(r.busy_s, r.messages),
            busy_raw_ns_per_message: per_message_ns(r.busy_raw_s, r.messages),
            busy_rounds: r.busy_rounds,
            yields: r.yields,
            parks: r.parks,
            dropped: r.dropped,
            duplicated: r.duplicated,
            reordered: r.reordered,
            cpu: r.cpu,
        })
        .collect();
    let delivered = sink.delivered;
    let (proj, bottleneck, proj_all, bottleneck_all) =
        project_layers(cfg, &per_layer, collected, delivered, handoff_ns);
    let verified = !interrupted
        && delivered == cfg.messages
        && sent == cfg.messages
        && sink.bad == 0
        && sink.checksum.hex() == sender_ck;
    let retransmissions = per_layer.iter().map(|l| l.retransmissions).sum();
    let rate = |x: f64| if elapsed_s > 0.0 { x / elapsed_s } else { 0.0 };
    let throughput_mbit_s = rate(sink.bytes as f64 * 8.0 / 1e6);
    let projection = project(&projection_input(
        cfg,
        collected,
        delivered,
        handoff_ns,
        throughput_mbit_s,
        verified,
    ));
    PipelineResult {
        layers: n,
        message_size: cfg.message_size,
        mode: cfg.mode.name().to_string(),
        link: cfg.link.describe(),
        messages_sent: sent,
        messages_delivered: delivered,
        bytes_delivered: sink.bytes,
        verified,
        stream_checksum: sink.checksum.hex(),
        elapsed_s,
        throughput_mbit_s,
        messages_per_s: rate(delivered as f64),
        retransmissions,
        per_layer,
        handoff_ns,
        projected_throughput_mbit_s: proj,
        projected_bottleneck: bottleneck,
        interrupted,
        sender_checksum: sender_ck,
        timed_out,
        projected_with_endpoints_mbit_s: proj_all,
        projected_with_endpoints_bottleneck: bottleneck_all,
        stages,
        errors: sink.errors.clone(),
        pool: format!(
            "{:?} {} x {} B",
            ctx.pool.kind(),
            ctx.pool.capacity(),
            ctx.pool.buffer_size()
        ),
        projection,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sides_serialize_as_the_strings_they_replaced() {
        assert_eq!(
            serde_json::to_string(&Side::BOTH).expect("serialize"),
            r#"["sender","receiver"]"#
        );
        let back: Side = serde_json::from_str(r#""receiver""#).expect("deserialize");
        assert_eq!(back, Side::Receiver);
        assert_eq!(format!("{:<9}|", Side::Sender), "sender   |");
    }
}
