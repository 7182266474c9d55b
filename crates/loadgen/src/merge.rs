//! `connlab merge`: one result from the results of the shards of one run.
//! Counts add; histograms add (HdrHistogram, exact); the send deviation pools
//! (see [`DeviationHistogram`]); CPU time and memory add up over the client
//! processes; the merged summaries are recomputed from the merged histograms,
//! so a merged result has the same schema and meaning as a single run's. The
//! run checks merge as [`crate::checks::merge_checks`] says (none when a shard
//! has none).

use crate::result::{
    ConnectionCounts, CpuSeconds, Histograms, LoadResult, MergeInfo, RequestCounts,
    HISTOGRAM_ENCODING, LOAD_SCHEMA,
};
use connlab_measure::{DeviationHistogram, LatencyHistogram};

/// Points of the merged CDFs.
const CDF_POINTS: usize = 21;

/// Why shard results cannot be merged.
#[derive(Debug, thiserror::Error)]
pub enum MergeError {
    /// Nothing to merge.
    #[error("no result files to merge")]
    Empty,
    /// A file is not a load result of this version.
    #[error("{file}: schema is {found:?}, expected {LOAD_SCHEMA:?}")]
    Schema {
        /// The file.
        file: String,
        /// Its schema field.
        found: String,
    },
    /// The shards do not belong to one run.
    #[error("{file}: {what}")]
    Mismatch {
        /// The file.
        file: String,
        /// What differs.
        what: String,
    },
    /// A stored histogram is unreadable.
    #[error("{file}: histograms.{field}: {source}")]
    Histogram {
        /// The file.
        file: String,
        /// Which histogram.
        field: &'static str,
        /// The decoding error.
        source: connlab_measure::DecodeError,
    },
}

/// Merges the results of every shard of one run (`(file name, result)`, in
/// any order) into one result of the same schema.
///
/// # Errors
///
/// When the results are not the N shards 1/N..N/N of one configuration, or
/// a histogram does not decode.
pub fn merge(parts: &[(String, LoadResult)]) -> Result<LoadResult, MergeError> {
    let mut parts: Vec<&(String, LoadResult)> = parts.iter().collect();
    if parts.is_empty() {
        return Err(MergeError::Empty);
    }
    for (file, r) in &parts {
        if r.schema != LOAD_SCHEMA {
            return Err(MergeError::Schema {
                file: file.clone(),
                found: r.schema.clone(),
            });
        }
    }
    check_shards(&mut parts)?;
    check_configs(&parts)?;
    let mut totals = Totals::default();
    for (file, r) in &parts {
        totals.add(file, r)?;
    }
    let mut merged = merged_result(&parts, &mut totals);
    merged.size_classes = merge_size_classes(&parts)?;
    merged.run_checks = merge_run_checks(&parts, &totals.service)?;
    merged.histograms = Histograms {
        encoding: HISTOGRAM_ENCODING.into(),
        service_latency: totals.service.to_base64(),
        corrected_latency: totals.corrected.to_base64(),
        send_lag: totals.send_lag.to_base64(),
        send_deviation: totals.deviation.as_ref().map(DeviationHistogram::to_parts),
    };
    Ok(merged)
}

/// The error of a part that does not belong with the first.
fn mismatch(file: &str, what: String) -> MergeError {
    MergeError::Mismatch {
        file: file.to_string(),
        what,
    }
}

/// How warnings and checks name a part: its shard, else its file.
fn part_label(file: &str, r: &LoadResult) -> String {
    r.shard.as_ref().map_or_else(
        || file.to_string(),
        |s| format!("shard {}/{}", s.index, s.count),
    )
}

/// A stored latency histogram, decoded.
fn decode_latency(
    file: &str,
    field: &'static str,
    text: &str,
) -> Result<LatencyHistogram, MergeError> {
    LatencyHistogram::from_base64(text).map_err(|source| MergeError::Histogram {
        file: file.to_string(),
        field,
        source,
    })
}

/// Every part (sorted by shard) has the first's configuration.
fn check_configs(parts: &[&(String, LoadResult)]) -> Result<(), MergeError> {
    let first = parts[0];
    let base = &first.1;
    for (file, r) in parts {
        let (a, b) = (&r.config, &base.config);
        let same = a.target == b.target
            && a.protocol == b.protocol
            && a.path == b.path
            && a.connections == b.connections
            && a.active_ratio == b.active_ratio
            && a.active_policy == b.active_policy
            && a.request_size_bytes == b.request_size_bytes
            && a.response_size_bytes == b.response_size_bytes
            && a.rate_per_s == b.rate_per_s
            && a.depth == b.depth
            && a.arrival == b.arrival
            && a.duration_s == b.duration_s
            && a.warmup_s == b.warmup_s
            && a.seed == b.seed;
        if !same {
            return Err(mismatch(
                file,
                format!(
                    "its config differs from {}'s (target, protocol, connections, active ratio, \
                     sizes, rate, duration, warm-up and seed must be equal)",
                    first.0
                ),
            ));
        }
    }
    Ok(())
}

/// The parts' histograms and counts, added up.
#[derive(Default)]
struct Totals {
    service: LatencyHistogram,
    corrected: LatencyHistogram,
    send_lag: LatencyHistogram,
    deviation: Option<DeviationHistogram>,
    connections: ConnectionCounts,
    requests: RequestCounts,
    cpu: CpuSeconds,
    writer_cpu: f64,
    reader_cpu: f64,
    rss: u64,
    bytes_sent: u64,
    bytes_received: u64,
    /// The longest part's wall time.
    wall: f64,
    /// Each part's warnings, labelled with its shard.
    warnings: Vec<String>,
    interrupted: bool,
    peer_failed: bool,
}

impl Totals {
    /// Adds one part: its histograms, then its counts.
    fn add(&mut self, file: &str, r: &LoadResult) -> Result<(), MergeError> {
        self.add_histograms(file, &r.histograms)?;
        self.add_counts(r);
        let label = part_label(file, r);
        self.warnings
            .extend(r.warnings.iter().map(|w| format!("{label}: {w}")));
        Ok(())
    }

    /// Adds a part's histograms (HdrHistogram adds exactly; the send
    /// deviation pools).
    fn add_histograms(&mut self, file: &str, h: &Histograms) -> Result<(), MergeError> {
        if h.encoding != HISTOGRAM_ENCODING {
            return Err(mismatch(
                file,
                format!(
                    "histograms.encoding is {:?}, expected {HISTOGRAM_ENCODING:?}",
                    h.encoding
                ),
            ));
        }
        self.service.merge(&decode_latency(
            file,
            "service_latency",
            &h.service_latency,
        )?);
        self.corrected.merge(&decode_latency(
            file,
            "corrected_latency",
            &h.corrected_latency,
        )?);
        self.send_lag
            .merge(&decode_latency(file, "send_lag", &h.send_lag)?);
        if let Some(p) = &h.send_deviation {
            let d = DeviationHistogram::from_parts(p).map_err(|source| MergeError::Histogram {
                file: file.to_string(),
                field: "send_deviation",
                source,
            })?;
            self.deviation
                .get_or_insert_with(DeviationHistogram::new)
                .merge(&d);
        }
        Ok(())
    }

    /// Adds a part's counts, CPU, memory and bytes.
    fn add_counts(&mut self, r: &LoadResult) {
        let connections = &mut self.connections;
        let c = &r.connections;
        connections.requested += c.requested;
        connections.established += c.established;
        connections.failed += c.failed;
        connections.active += c.active;
        connections.idle_closed_by_peer += c.idle_closed_by_peer;
        connections.setup_s = connections.setup_s.max(c.setup_s);
        if connections.first_error.is_none() {
            connections.first_error.clone_from(&c.first_error);
        }
        let requests = &mut self.requests;
        let q = &r.requests;
        requests.sent += q.sent;
        requests.completed += q.completed;
        requests.warmup_sent += q.warmup_sent;
        requests.warmup_completed += q.warmup_completed;
        for (kind, n) in &q.errors {
            *requests.errors.entry(kind.clone()).or_default() += n;
        }
        for (kind, n) in &q.warmup_errors {
            *requests.warmup_errors.entry(kind.clone()).or_default() += n;
        }
        self.cpu.user += r.client_cpu_s.user;
        self.cpu.sys += r.client_cpu_s.sys;
        self.writer_cpu += r.writer_cpu_s;
        self.reader_cpu += r.reader_cpu_s;
        self.rss += r.client_max_rss_kib;
        self.bytes_sent += r.bytes_sent;
        self.bytes_received += r.bytes_received;
        self.wall = self.wall.max(r.wall_s);
        self.interrupted |= r.interrupted;
        self.peer_failed |= r.peer_failed;
    }
}

/// The first part's result with the totals in place and the summaries
/// recomputed from the merged histograms (the size classes, the run checks
/// and the stored histograms are the caller's). Takes the totals'
/// warnings.
fn merged_result(parts: &[&(String, LoadResult)], t: &mut Totals) -> LoadResult {
    let base = &parts[0].1;
    let starts: Vec<f64> = parts.iter().map(|(_, r)| r.started_unix_s).collect();
    let mut connections = std::mem::take(&mut t.connections);
    connections.setup_rate_per_s = connections.established as f64 / connections.setup_s.max(1e-9);
    let measured_s = if t.interrupted {
        parts
            .iter()
            .map(|(_, r)| (r.wall_s - r.config.warmup_s).max(1e-9))
            .fold(f64::INFINITY, f64::min)
    } else {
        // As above: a result file may say 0 s, and a rate over 0 s is not
        // finite (JSON writes null, which no reader takes back).
        base.config.duration_s.max(1e-9)
    };
    let open_loop = base.config.rate_per_s.is_some();
    let skew_s = starts.iter().copied().fold(f64::NEG_INFINITY, f64::max)
        - starts.iter().copied().fold(f64::INFINITY, f64::min);
    let cpu = t.cpu;
    let mut merged = base.clone();
    merged.schema = LOAD_SCHEMA.into();
    merged.placement.writer_cpu = None;
    merged.placement.reader_cpu = None;
    merged.connections = connections;
    merged.requests = std::mem::take(&mut t.requests);
    merged.achieved_rate_per_s = merged.requests.completed as f64 / measured_s;
    merged.service_latency_us = t.service.summary();
    merged.corrected_latency_us = t.corrected.summary();
    merged.send_lag_us = if open_loop {
        t.send_lag.summary()
    } else {
        Default::default()
    };
    merged.send_deviation_us = t
        .deviation
        .as_ref()
        .map(|d| d.summary())
        .unwrap_or_default();
    merged.send_deviation_cdf = t
        .deviation
        .as_ref()
        .map(|d| d.cdf(CDF_POINTS))
        .unwrap_or_default();
    merged.service_latency_cdf = t.service.cdf(CDF_POINTS);
    merged.client_cpu_s = cpu;
    merged.writer_cpu_s = t.writer_cpu;
    merged.reader_cpu_s = t.reader_cpu;
    merged.requests_per_client_cpu_s =
        merged.requests.total_completed() as f64 / (cpu.user + cpu.sys).max(1e-9);
    merged.client_max_rss_kib = t.rss;
    merged.bytes_sent = t.bytes_sent;
    merged.bytes_received = t.bytes_received;
    merged.throughput_mbit_s = t.bytes_received as f64 * 8.0 / 1e6 / t.wall.max(1e-9);
    merged.wall_s = t.wall;
    merged.interrupted = t.interrupted;
    merged.peer_failed = t.peer_failed;
    let mut warnings = std::mem::take(&mut t.warnings);
    if skew_s > 0.01 {
        warnings.push(format!(
            "the shards started {:.1} ms apart: their schedules were not aligned (use --start-at)",
            skew_s * 1e3
        ));
    }
    merged.warnings = warnings;
    merged.started_unix_s = starts.iter().copied().fold(f64::INFINITY, f64::min);
    merged.shard = None;
    merged.merged = Some(MergeInfo {
        shards: parts.len() as u32,
        files: parts.iter().map(|(f, _)| f.clone()).collect(),
        start_skew_ms: skew_s.max(0.0) * 1e3,
    });
    merged
}

/// Size classes (`--manifest` runs): histograms add per class label.
fn merge_size_classes(
    parts: &[&(String, LoadResult)],
) -> Result<Vec<crate::result::SizeClassResult>, MergeError> {
    let mut classes: Vec<LatencyHistogram> = crate::request::class_histograms();
    for (file, r) in parts {
        for c in &r.size_classes {
            let Some(k) = crate::request::SIZE_CLASSES
                .iter()
                .position(|(label, ..)| *label == c.class)
            else {
                continue;
            };
            classes[k].merge(&decode_latency(file, "size_classes", &c.histogram)?);
        }
    }
    Ok(crate::driver::size_classes(&classes))
}

/// The run checks, merged when every part has them (none otherwise).
fn merge_run_checks(
    parts: &[&(String, LoadResult)],
    service: &LatencyHistogram,
) -> Result<Option<crate::result::RunChecks>, MergeError> {
    let checks: Option<Vec<(String, &crate::result::RunChecks)>> = parts
        .iter()
        .map(|(file, r)| r.run_checks.as_ref().map(|c| (part_label(file, r), c)))
        .collect();
    match checks {
        Some(checks) => crate::checks::merge_checks(&checks, service)
            .map_err(|what| mismatch(&parts[0].0, what)),
        None => Ok(None),
    }
}

/// Sorts `parts` by shard and checks that they are shards 1..=N of N (a
/// single unsharded result merges with itself alone).
fn check_shards(parts: &mut [&(String, LoadResult)]) -> Result<(), MergeError> {
    let n = parts.len();
    if n == 1 && parts[0].1.shard.is_none() {
        return Ok(());
    }
    for (file, r) in parts.iter() {
        let Some(s) = &r.shard else {
            return Err(MergeError::Mismatch {
                file: file.clone(),
                what: "is not a shard result (no `shard` field); merge takes the results of \
                       `connlab load --shard i/N`"
                    .into(),
            });
        };
        if s.count as usize != n {
            return Err(MergeError::Mismatch {
                file: file.clone(),
                what: format!(
                    "is shard {}/{} but {n} files were given: give all {} shards",
                    s.index, s.count, s.count
                ),
            });
        }
    }
    parts.sort_by_key(|(_, r)| r.shard.as_ref().map_or(0, |s| s.index));
    for (i, (file, r)) in parts.iter().enumerate() {
        let index = r.shard.as_ref().map_or(0, |s| s.index);
        if index as usize != i + 1 {
            return Err(MergeError::Mismatch {
                file: file.clone(),
                what: format!(
                    "shard {index}/{n} appears where shard {}/{n} was expected: each shard must be \
                     given exactly once",
                    i + 1
                ),
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Shard 1/2 of a real `connlab load --shard 1/2 --json` run.
    const SHARD: &str = include_str!("../tests/data/shard-1-of-2.json");

    #[test]
    fn a_zero_duration_gives_a_result_that_reads_back() {
        // Found by the merge_inputs fuzz target: 300 requests over a
        // duration of 0 s made the rate infinite, which JSON writes as
        // null, so `connlab merge --json` wrote a file nothing can read.
        let mut result: LoadResult = serde_json::from_str(SHARD).unwrap();
        result.shard = None;
        result.config.duration_s = 0.0;
        let merged = merge(&[("zero.json".into(), result)]).unwrap();
        assert!(merged.achieved_rate_per_s.is_finite());
        let text = serde_json::to_string(&merged).unwrap();
        let again: LoadResult = serde_json::from_str(&text).unwrap();
        assert_eq!(again.requests.completed, 300);
    }
}
