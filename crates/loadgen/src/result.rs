//! The result of a load run: one versioned, self-describing JSON document
//! (`--json`), and the per-request record (`--records`). Field names carry
//! their units.

use connlab_measure::stats::PercentileInterval;
use connlab_measure::{CdfPoint, DeviationHistogramParts, DeviationSummary, Summary};
use connlab_os::Environment;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Version tag of [`LoadResult`]. Version 2: the top-level request counts
/// are those of the measured window (what `connlab load` prints), the
/// warm-up's are `warmup_*`.
pub const LOAD_SCHEMA: &str = "connlab.load/2";

/// Version tag of results written before [`LOAD_SCHEMA`]: their `sent` and
/// `completed` counted the warm-up, `measured_sent` and `measured_completed`
/// did not. They still read: see [`RequestCounts`].
pub const LOAD_SCHEMA_V1: &str = "connlab.load/1";

/// Reads the schema tag; a version-1 result is converted as it is read (see
/// [`RequestCounts`]), so in memory it is a [`LOAD_SCHEMA`] result and says so.
fn read_schema<'de, D: serde::Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    let tag = String::deserialize(d)?;
    Ok(if tag == LOAD_SCHEMA_V1 {
        LOAD_SCHEMA.to_string()
    } else {
        tag
    })
}

/// Connection counts of a run.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct ConnectionCounts {
    /// Connections asked for.
    pub requested: u64,
    /// Connections established before measuring.
    pub established: u64,
    /// Connections that could not be established.
    pub failed: u64,
    /// Connections that carried traffic.
    pub active: u64,
    /// Idle connections the server closed during the run.
    pub idle_closed_by_peer: u64,
    /// Seconds to open the whole set.
    pub setup_s: f64,
    /// Connections established per second of set-up.
    pub setup_rate_per_s: f64,
    /// The first connect error, if any.
    pub first_error: Option<String>,
}

/// Request counts of a run: the top-level ones are of the measured window,
/// the warm-up's are apart under `warmup_*`.
///
/// Reading accepts version 1 ([`LOAD_SCHEMA_V1`]), recognised by its
/// `measured_sent` field: its `sent` and `completed` included the warm-up,
/// so they become the measured counts and the differences the warm-up's.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(from = "RequestCountsWire")]
pub struct RequestCounts {
    /// Requests sent in the measured window.
    pub sent: u64,
    /// Responses completed for requests of the measured window.
    pub completed: u64,
    /// Errors of the measured window by kind (`reset`, `closed_by_peer`,
    /// `unanswered`, `protocol`, `http_status`, ...): requests scheduled in
    /// it, connections lost from its start on. Connections that failed to
    /// open are [`ConnectionCounts::failed`], except with
    /// connection-per-request, where each connect is a request's.
    pub errors: BTreeMap<String, u64>,
    /// Requests sent in the warm-up (closed loop: every request sent that
    /// was not completed in the measured window).
    pub warmup_sent: u64,
    /// Responses completed in the warm-up.
    pub warmup_completed: u64,
    /// Errors of the warm-up by kind.
    pub warmup_errors: BTreeMap<String, u64>,
}

/// [`RequestCounts`] as either version writes it.
#[derive(Deserialize)]
struct RequestCountsWire {
    sent: u64,
    completed: u64,
    /// Version 1 only.
    measured_sent: Option<u64>,
    /// Version 1 only.
    measured_completed: Option<u64>,
    errors: BTreeMap<String, u64>,
    #[serde(default)]
    warmup_sent: u64,
    #[serde(default)]
    warmup_completed: u64,
    #[serde(default)]
    warmup_errors: BTreeMap<String, u64>,
}

impl From<RequestCountsWire> for RequestCounts {
    fn from(w: RequestCountsWire) -> Self {
        match w.measured_sent {
            // Version 1: `sent` and `completed` are of the whole run.
            Some(measured_sent) => {
                let measured_completed = w.measured_completed.unwrap_or(w.completed);
                RequestCounts {
                    sent: measured_sent,
                    completed: measured_completed,
                    errors: w.errors,
                    warmup_sent: w.sent.saturating_sub(measured_sent),
                    warmup_completed: w.completed.saturating_sub(measured_completed),
                    warmup_errors: w.warmup_errors,
                }
            }
            None => RequestCounts {
                sent: w.sent,
                completed: w.completed,
                errors: w.errors,
                warmup_sent: w.warmup_sent,
                warmup_completed: w.warmup_completed,
                warmup_errors: w.warmup_errors,
            },
        }
    }
}

impl RequestCounts {
    /// Errors of the measured window.
    pub fn measured_errors(&self) -> u64 {
        self.errors.values().sum()
    }

    /// Requests sent over the whole run, warm-up included.
    pub fn total_sent(&self) -> u64 {
        self.sent + self.warmup_sent
    }

    /// Responses completed over the whole run, warm-up included.
    pub fn total_completed(&self) -> u64 {
        self.completed + self.warmup_completed
    }

    /// Share of the measured window's requests that ended in an error: its
    /// errors over its requests sent (1 when errors came without a request
    /// sent, 0 for an empty window).
    pub fn error_ratio(&self) -> f64 {
        let errors = self.measured_errors();
        match self.sent {
            0 if errors > 0 => 1.0,
            0 => 0.0,
            sent => (errors as f64 / sent as f64).min(1.0),
        }
    }
}

/// CPU seconds.
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize)]
pub struct CpuSeconds {
    /// User mode.
    pub user: f64,
    /// Kernel mode.
    pub sys: f64,
}

/// Where the client's threads ran.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Placement {
    /// CPU the writer thread was on at the end (open loop).
    pub writer_cpu: Option<usize>,
    /// CPU the reader thread was on at the end.
    pub reader_cpu: Option<usize>,
    /// CPUs the run was pinned to, if any.
    pub pinned: Option<String>,
    /// The writer's scheduling policy (`SCHED_OTHER`, `SCHED_FIFO 10`).
    #[serde(default)]
    pub writer_policy: Option<String>,
}

/// The configuration as run, in the units of the result.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RunConfig {
    /// Server address.
    pub target: String,
    /// Wire format.
    pub protocol: String,
    /// HTTP request target (HTTP only).
    pub path: Option<String>,
    /// Connections asked for.
    pub connections: u64,
    /// Share of connections carrying traffic.
    pub active_ratio: f64,
    /// `fixed` (the locality paper) or `rotating` (the polling paper).
    #[serde(default = "fixed_policy")]
    pub active_policy: String,
    /// HTTP without keep-alive: a new connection per request.
    #[serde(default)]
    pub connection_per_request: bool,
    /// How the reader waited for responses: `epoll` or `uring` (`--io`).
    #[serde(default = "epoll_io")]
    pub io: String,
    /// `--manifest`: the file set requests were drawn from (its path).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub manifest: Option<String>,
    /// `--manifest`: files in the set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub manifest_files: Option<u64>,
    /// `--manifest`: how files were chosen (`manifest`, `uniform`, `zipf:S`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub popularity: Option<String>,
    /// Request bytes.
    pub request_size_bytes: u64,
    /// Response bytes asked for (CLB1; over HTTP only through the default
    /// path `/bytes/N`: with `--path` or `--manifest` the server decides).
    pub response_size_bytes: u64,
    /// Requests per second (open loop), `null` for `--rate max`.
    pub rate_per_s: Option<f64>,
    /// Outstanding requests per active connection (closed loop).
    pub depth: Option<u32>,
    /// `fixed` or `poisson` (open loop), `closed` for `--rate max`.
    pub arrival: String,
    /// Measured seconds.
    pub duration_s: f64,
    /// Warm-up seconds.
    pub warmup_s: f64,
    /// Writer spin before each send, microseconds.
    pub spin_us: f64,
    /// Local addresses used.
    pub source_addrs: Vec<String>,
    /// Seed of the active set and Poisson arrivals.
    pub seed: u64,
}

/// Results written before `--io` existed read as epoll runs.
fn epoll_io() -> String {
    "epoll".into()
}

/// Everything a load run measured.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct LoadResult {
    /// [`LOAD_SCHEMA`].
    #[serde(deserialize_with = "read_schema")]
    pub schema: String,
    /// What was asked for.
    pub config: RunConfig,
    /// Where it ran.
    pub environment: Environment,
    /// Where the client threads ran.
    pub placement: Placement,
    /// Connection counts.
    pub connections: ConnectionCounts,
    /// Request counts.
    pub requests: RequestCounts,
    /// Completed responses per second of measured time.
    pub achieved_rate_per_s: f64,
    /// Response complete minus send start.
    pub service_latency_us: Summary,
    /// Response complete minus scheduled instant (coordinated-omission free).
    pub corrected_latency_us: Summary,
    /// Send start minus scheduled instant.
    pub send_lag_us: Summary,
    /// Send-timing deviation of the locality paper (fixed-interval open loop).
    pub send_deviation_us: DeviationSummary,
    /// CDF of the send deviation (21 points).
    pub send_deviation_cdf: Vec<CdfPoint>,
    /// CDF of the service latency (21 points).
    pub service_latency_cdf: Vec<CdfPoint>,
    /// Client CPU of the measured run (writer and reader).
    pub client_cpu_s: CpuSeconds,
    /// Writer thread CPU seconds.
    pub writer_cpu_s: f64,
    /// Reader thread CPU seconds.
    pub reader_cpu_s: f64,
    /// Completed requests per client CPU second.
    pub requests_per_client_cpu_s: f64,
    /// Peak resident memory of the client process (user space), KiB.
    pub client_max_rss_kib: u64,
    /// Bytes sent to the server.
    pub bytes_sent: u64,
    /// Bytes received from the server.
    pub bytes_received: u64,
    /// Received payload throughput over the measured time.
    pub throughput_mbit_s: f64,
    /// Wall seconds from the first scheduled send to the end of draining.
    pub wall_s: f64,
    /// The run was stopped by Ctrl-C/SIGTERM before its end.
    pub interrupted: bool,
    /// Active connections failed during the run (server died or reset).
    pub peer_failed: bool,
    /// Reasons these numbers may be wrong.
    pub warnings: Vec<String>,
    /// Wall-clock instant (Unix seconds) at which the schedule started
    /// (warm-up first).
    pub started_unix_s: f64,
    /// The slice this process ran, when it was one shard of several.
    pub shard: Option<ShardInfo>,
    /// Set on a result made by `connlab merge` from shard results.
    pub merged: Option<MergeInfo>,
    /// The full histograms behind the summaries, so results merge exactly.
    pub histograms: Histograms,
    /// `--manifest` runs: service latency per response-size class (classes
    /// with no request are left out).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub size_classes: Vec<SizeClassResult>,
    /// The run's checks of its own statistics (absent in results written
    /// before them, and in merges of such results).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_checks: Option<RunChecks>,
}

/// Lancet-style checks of a run's own statistics (Kogias et al., USENIX
/// ATC 2019): did the client send on the schedule it claims, was the
/// service latency stationary over the measured window, are its samples
/// independent, and how sure are its median and p99. The material the
/// checks were computed from travels with them, so shard results merge.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RunChecks {
    /// Were the sends spaced as configured?
    pub arrivals: ArrivalCheck,
    /// Was the latency stationary over the measured window?
    pub stationarity: StationarityCheck,
    /// Are the latency samples independent, and how often must they be thinned?
    pub independence: IndependenceCheck,
    /// Median service latency with its 95 % distribution-free interval
    /// (`null`: too few effective samples). Completions count as
    /// independent only as far apart as the independence check showed:
    /// `n_effective` is the completions over (completions per latency
    /// sample, rounded up, x the independence thinning).
    pub service_latency_p50: Option<PercentileInterval>,
    /// 99th-percentile service latency with its 95 % interval (`null`: too
    /// few effective samples, fewer than about 300).
    pub service_latency_p99: Option<PercentileInterval>,
    /// The measured window cut into equal windows by each request's
    /// scheduled instant: the requests of each completed, and the sum of
    /// their service latency.
    pub latency_windows: Vec<LatencyWindow>,
    /// A systematic sample of the measured window's inter-send gaps, us
    /// (open loop; at most 2,000).
    pub arrival_gap_samples_us: Vec<f64>,
    /// A systematic sample of the measured service latencies in completion
    /// order, us (at most 4,000).
    pub latency_samples_us: Vec<f64>,
}

/// The check of the send schedule's distribution.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ArrivalCheck {
    /// `fixed`, `poisson` or `closed` (closed loop: no schedule).
    pub distribution: String,
    /// Gaps the check used.
    pub samples: u64,
    /// Fixed: the share of gaps more than a tenth of the interval away from
    /// it. Poisson: the Anderson-Darling A^2 against the configured rate.
    /// 0 when nothing was tested.
    pub statistic: f64,
    /// Poisson: the Anderson-Darling p-value (`null` otherwise).
    pub p_value: Option<f64>,
    /// Fixed: `statistic <= 0.05`; Poisson: `p_value >= 0.01`; `null` when
    /// nothing was tested (closed loop, too few gaps).
    pub passed: Option<bool>,
    /// How the check was made, in words.
    pub method: String,
}

/// The check that the run was stationary.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct StationarityCheck {
    /// Windows of the measured time that had completions.
    pub windows: u64,
    /// Latency samples the test ran on (in completion order; 0 in results
    /// that tested the windows' means instead).
    #[serde(default)]
    pub samples: u64,
    /// The augmented Dickey-Fuller statistic (`null`: not computed).
    pub tau: Option<f64>,
    /// Its 5 % critical value (MacKinnon 2010).
    pub critical_5pc: Option<f64>,
    /// `tau < critical_5pc` (`null`: too few samples or a degenerate series).
    pub stationary: Option<bool>,
    /// How the check was made, in words.
    pub method: String,
}

/// The check that latency samples are independent.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct IndependenceCheck {
    /// Latency samples examined.
    pub samples: u64,
    /// Lag-1 autocorrelation of the samples thinned by `thinning` (`null`:
    /// too few or all equal).
    pub lag1_autocorrelation: Option<f64>,
    /// Keep one sample in this many to make them independent (power of
    /// two, at most 64).
    pub thinning: u64,
    /// `|lag1_autocorrelation| <= 1.96 / sqrt(samples / thinning)`.
    pub independent: bool,
}

/// One window of the measured time.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LatencyWindow {
    /// Requests scheduled in the window and completed.
    pub count: u64,
    /// Sum of their service latency, us.
    pub sum_us: f64,
}

/// Service latency of the requests whose file falls in one size class.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SizeClassResult {
    /// Label, e.g. `1-10KB` (SI: 1 KB = 1,000 bytes).
    pub class: String,
    /// Smallest size of the class, bytes.
    pub min_bytes: u64,
    /// Largest size of the class, bytes (None: unbounded).
    pub max_bytes: Option<u64>,
    /// Measured requests.
    pub requests: u64,
    /// Service latency.
    pub service_latency_us: Summary,
    /// The histogram behind it ([`HISTOGRAM_ENCODING`]), so shards merge exactly.
    pub histogram: String,
}

/// The slice of a sharded run that one process ran.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ShardInfo {
    /// Which shard, 1..=count.
    pub index: u32,
    /// Shards in all.
    pub count: u32,
    /// Connections of this shard.
    pub connections: u64,
    /// Active connections of this shard.
    pub active: u64,
    /// Requests per second of this shard (open loop).
    pub rate_per_s: Option<f64>,
}

/// How a merged result was made.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct MergeInfo {
    /// Number of shard results merged.
    pub shards: u32,
    /// The files merged, in shard order.
    pub files: Vec<String>,
    /// Latest minus earliest shard start, milliseconds (0 when aligned).
    pub start_skew_ms: f64,
}

/// Encoding of [`Histograms`].
pub const HISTOGRAM_ENCODING: &str = "hdrhistogram-v2-deflate-base64-ns";

/// Full histograms in HdrHistogram's V2 compressed encoding, base64, values
/// in nanoseconds (the encoding of HdrHistogram interval logs).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Histograms {
    /// [`HISTOGRAM_ENCODING`].
    pub encoding: String,
    /// `service_latency` of measured requests.
    pub service_latency: String,
    /// `corrected_latency` of measured requests.
    pub corrected_latency: String,
    /// `send_lag` of measured sends (open loop; empty histogram otherwise).
    pub send_lag: String,
    /// `send_deviation` (fixed-interval open loop).
    pub send_deviation: Option<DeviationHistogramParts>,
}

/// One completed request, times in microseconds from the start of measurement.
#[derive(Clone, Copy, Debug, Serialize, Deserialize)]
pub struct RequestRecord {
    /// Connection index.
    pub conn: u32,
    /// Request number.
    pub seq: u32,
    /// Scheduled send instant.
    pub scheduled_us: f64,
    /// Send start.
    pub send_us: f64,
    /// Response complete.
    pub complete_us: f64,
    /// complete - send.
    pub service_us: f64,
    /// complete - scheduled.
    pub corrected_us: f64,
    /// send - scheduled.
    pub send_lag_us: f64,
}

impl RequestRecord {
    /// The CSV columns (`--records`), the field names in order.
    pub const CSV_COLUMNS: [&'static str; 8] = [
        "conn",
        "seq",
        "scheduled_us",
        "send_us",
        "complete_us",
        "service_us",
        "corrected_us",
        "send_lag_us",
    ];

    /// The record with its times rounded to the nanosecond (three decimals
    /// of a microsecond), the precision of the clock, as the CSV carries it.
    pub fn to_ns(&self) -> RequestRecord {
        let ns = |us: f64| (us * 1e3).round() / 1e3;
        RequestRecord {
            scheduled_us: ns(self.scheduled_us),
            send_us: ns(self.send_us),
            complete_us: ns(self.complete_us),
            service_us: ns(self.service_us),
            corrected_us: ns(self.corrected_us),
            send_lag_us: ns(self.send_lag_us),
            ..*self
        }
    }
}

fn fixed_policy() -> String {
    "fixed".into()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counts(sent: u64, warmup_sent: u64, errors: &[(&str, u64)]) -> RequestCounts {
        RequestCounts {
            sent,
            completed: sent,
            errors: errors.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
            warmup_sent,
            warmup_completed: warmup_sent,
            warmup_errors: [("http_status".to_string(), warmup_sent)].into(),
        }
    }

    #[test]
    fn error_ratio_is_of_the_measured_window_only() {
        let q = counts(5000, 1000, &[("http_status", 5000)]);
        assert_eq!(q.error_ratio(), 1.0);
        assert_eq!(q.measured_errors(), 5000);
        assert_eq!(q.total_sent(), 6000);
        let q = counts(5000, 1000, &[("reset", 1), ("unanswered", 49)]);
        assert_eq!(q.error_ratio(), 0.01);
        assert_eq!(counts(0, 0, &[]).error_ratio(), 0.0);
        assert_eq!(counts(0, 0, &[("reset", 1)]).error_ratio(), 1.0);
    }

    #[test]
    fn version_1_counts_read_as_measured_and_warmup() {
        let q: RequestCounts = serde_json::from_str(
            r#"{"sent":390,"completed":389,"measured_sent":300,"measured_completed":298,
                "errors":{"reset":2},"warmup_errors":{"reset":1}}"#,
        )
        .unwrap();
        assert_eq!((q.sent, q.completed), (300, 298));
        assert_eq!((q.warmup_sent, q.warmup_completed), (90, 91));
        assert_eq!(q.errors["reset"], 2);
        assert_eq!(q.warmup_errors["reset"], 1);
        // Without `warmup_errors` (older still) it reads too.
        let q: RequestCounts = serde_json::from_str(
            r#"{"sent":1,"completed":1,"measured_sent":1,"measured_completed":1,"errors":{}}"#,
        )
        .unwrap();
        assert!(q.warmup_errors.is_empty());
        assert_eq!(q.warmup_sent, 0);
    }

    #[test]
    fn version_2_counts_round_trip() {
        let q = counts(5000, 1000, &[("reset", 3)]);
        let text = serde_json::to_string(&q).unwrap();
        assert!(!text.contains("measured"), "{text}");
        let back: RequestCounts = serde_json::from_str(&text).unwrap();
        assert_eq!(back, q);
    }

    #[test]
    fn a_version_1_result_reads_as_version_2() {
        let text = include_str!("../tests/data/shard-1-of-2.json");
        assert!(text.contains(LOAD_SCHEMA_V1));
        let r: LoadResult = serde_json::from_str(text).unwrap();
        assert_eq!(r.schema, LOAD_SCHEMA);
        assert_eq!((r.requests.sent, r.requests.completed), (300, 300));
        assert_eq!(r.requests.warmup_sent, 90);
        assert_eq!(r.requests.warmup_completed, 90);
        // Written before `--io`: the reader was epoll.
        assert!(!text.contains("\"io\""));
        assert_eq!(r.config.io, "epoll");
    }

    #[test]
    fn csv_columns_are_the_record_fields() {
        let r = RequestRecord {
            conn: 3,
            seq: 7,
            scheduled_us: 1.000_4,
            send_us: 2.5,
            complete_us: 10.123_456,
            service_us: 7.623_456,
            corrected_us: 9.123_456,
            send_lag_us: 1.499_6,
        };
        let mut w = csv::Writer::from_writer(Vec::new());
        w.serialize(r.to_ns()).unwrap();
        let text = String::from_utf8(w.into_inner().unwrap()).unwrap();
        let mut lines = text.lines();
        assert_eq!(
            lines.next(),
            Some(RequestRecord::CSV_COLUMNS.join(",").as_str())
        );
        assert_eq!(lines.next(), Some("3,7,1.0,2.5,10.123,7.623,9.123,1.5"));
    }
}
