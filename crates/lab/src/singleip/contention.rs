//! The contention experiment's analysis: linkem's per-packet log read back
//! into per-stream rates and fairness.

use super::records::{
    jain, median, percentile, ContentionResult, HostQueue, ProbeTransfer, QueueSample, QueueStats,
    StreamResult, TimelinePacket, FULL_PACKET_BYTES,
};
use serde::Deserialize;
use std::io::BufRead;

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
    /// Length of the windows judged for `fair_after_s`, s.
    pub fair_window_s: f64,
    /// Jain's index a window must reach to count as fair.
    pub fair_jain: f64,
}

/// The windows judged for [`ContentionResult::fair_after_s`], s: long
/// enough to average out a round of Reno's sawtooth at the contention
/// link's rates, short next to the paper's 1.6 s.
pub const FAIR_WINDOW_S: f64 = 0.5;
/// Jain's index from which a window counts as fair (the threshold of the
/// Figure 10 claim).
pub const FAIR_JAIN: f64 = 0.95;

/// The first bin `k` in `k0..k1` from which a window of `w` bins has
/// `totals(k, k + w)` with Jain's index of at least `threshold`; `None`
/// when no window does (or the overlap is shorter than one window).
fn first_fair_bin(
    k0: i64,
    k1: i64,
    w: i64,
    threshold: f64,
    totals: impl Fn(i64, i64) -> Vec<f64>,
) -> Option<i64> {
    (k0..=k1 - w).find(|&k| jain(&totals(k, k + w)).is_some_and(|j| j >= threshold))
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
    let (mut overlap_s, mut link_utilisation, mut fair_after_s) = (None, None, None);
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
            let w = ((setup.fair_window_s / bin).round() as i64).max(1);
            let fair = first_fair_bin(k0, k1, w, setup.fair_jain, |a, b| {
                big.iter().map(|t| sum(t, a, b)).collect()
            });
            // Never fair: the end of the overlap's last whole bin.
            fair_after_s = Some(fair.unwrap_or(k1) as f64 * bin - lo);
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
        fair_after_s,
        host_queue: None,
    };
    if let Some(log) = log {
        let bg1_t0 = streams.get(1).map_or(fg.t0, |s| s.1.t0);
        read_packet_log(setup, epoch, fg.size, bg1_t0, log, &mut out)?;
    }
    Ok(out)
}

/// The columns of linkem's log (`connlab_linkem::log::LogRow`) this
/// analysis reads; the others are skipped.
#[derive(Deserialize)]
struct LogLine {
    direction: String,
    arrival_ns: u64,
    departure_ns: Option<u64>,
    fate: String,
    src: Option<String>,
    dst: Option<String>,
    protocol: Option<u8>,
    seq: Option<u64>,
    flags: Option<String>,
    payload_len: u64,
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
    let mut reader = csv::ReaderBuilder::new().flexible(true).from_reader(log);
    let headers = reader.headers().map_err(|e| e.to_string())?.clone();
    let mut syn_ns: Option<u64> = None;
    let mut first_seq: [Option<u64>; 3] = [None; 3];
    let mut counts = [0u64; 3];
    let (mut q_all, mut q_fg) = (Vec::new(), Vec::new());
    let mut raw: Vec<(u64, u8, u64, bool)> = Vec::new();
    let small_fg = fg_size < setup.background;
    let every = u64::from(setup.timeline_every.max(1));
    let mut record = csv::StringRecord::new();
    while reader.read_record(&mut record).map_err(|e| e.to_string())? {
        // A short line is one the emulator did not finish writing.
        if record.len() < headers.len() {
            continue;
        }
        let p: LogLine = record
            .deserialize(Some(&headers))
            .map_err(|e| e.to_string())?;
        if p.protocol != Some(6) {
            continue;
        }
        let arrival = p.arrival_ns;
        let flags = p.flags.as_deref().unwrap_or("");
        if p.direction != "rl" {
            if syn_ns.is_none()
                && p.src.as_deref() == Some(&setup.client_addrs[1])
                && flags.contains('S')
            {
                syn_ns = Some(arrival);
            }
            continue;
        }
        let Some(s) = setup
            .client_addrs
            .iter()
            .position(|a| Some(a.as_str()) == p.dst.as_deref())
        else {
            continue;
        };
        let plen = p.payload_len;
        let seq = p.seq.unwrap_or(0);
        // The stream starts at its SYN-ACK: earlier packets to the same
        // client belong to other connections (a readiness probe's FIN).
        if first_seq[s].is_none() {
            if !flags.contains('S') {
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
        let dropped = p.fate != "sent";
        if dropped {
            out.drops += 1;
        } else if plen > 0 {
            if let Some(dep) = p.departure_ns {
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

// ------------------------------------------------------------------ host queues

/// The host queues' figures from their samples (`names` in the order a
/// packet crosses them, each sample with one entry per name), at the link
/// rate `rate_bps`; `fg` is the foreground's run (unix s, connect to last
/// byte). `None` without samples.
pub fn summarise_host_queue(
    names: &[String],
    samples: &[QueueSample],
    rate_bps: u64,
    fg: Option<(f64, f64)>,
) -> Option<HostQueue> {
    let ok: Vec<&QueueSample> = samples
        .iter()
        .filter(|s| s.bytes.len() == names.len() && s.packets.len() == names.len())
        .collect();
    if ok.is_empty() || names.is_empty() || rate_bps == 0 {
        return None;
    }
    let ms = |bytes: u64| bytes as f64 * 8.0 / rate_bps as f64 * 1e3;
    let queues = names
        .iter()
        .enumerate()
        .map(|(i, name)| {
            let peak_bytes = ok.iter().map(|s| s.bytes[i]).max().unwrap_or(0);
            let drops = |s: &QueueSample| s.drops.get(i).copied().unwrap_or(0);
            QueueStats {
                name: name.clone(),
                peak_bytes,
                peak_packets: ok.iter().map(|s| s.packets[i]).max().unwrap_or(0),
                peak_ms: ms(peak_bytes),
                median_ms: median(ok.iter().map(|s| ms(s.bytes[i]))).unwrap_or(0.0),
                drops: drops(ok[ok.len() - 1]).saturating_sub(drops(ok[0])),
            }
        })
        .collect();
    let total = |s: &QueueSample| s.bytes.iter().sum::<u64>();
    let mut delays: Vec<f64> = ok.iter().map(|s| ms(total(s))).collect();
    delays.sort_by(f64::total_cmp);
    let peak_bytes = ok.iter().map(|s| total(s)).max().unwrap_or(0);
    let fg_median_ms = fg.and_then(|(a, b)| {
        median(
            ok.iter()
                .filter(|s| (a..=b).contains(&s.t_s))
                .map(|s| ms(total(s))),
        )
    });
    Some(HostQueue {
        queues,
        samples: ok.len(),
        period_ms: median(ok.windows(2).map(|w| (w[1].t_s - w[0].t_s) * 1e3)).unwrap_or(0.0),
        peak_bytes,
        peak_full_packets: peak_bytes as f64 / FULL_PACKET_BYTES as f64,
        peak_ms: ms(peak_bytes),
        median_ms: median(delays.iter().copied()).unwrap_or(0.0),
        p95_ms: percentile(&delays, 95.0).unwrap_or(0.0),
        fg_median_ms,
    })
}

/// Puts the host queues into a result: with the bottleneck on a host the
/// emulator only delays, so the queueing delays come from the host queues
/// (`replace_delays`), and their drops add to the emulator's.
pub fn apply_host_queue(out: &mut ContentionResult, q: HostQueue, replace_delays: bool) {
    if replace_delays {
        out.queue_ms_median = Some(q.median_ms);
        out.queue_ms_p95 = Some(q.p95_ms);
        out.queue_ms_fg_median = q.fg_median_ms;
    }
    out.drops += q.queues.iter().map(|s| s.drops).sum::<u64>();
    out.host_queue = Some(q);
}
