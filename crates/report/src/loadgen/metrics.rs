//! The figures of a loadgen point each table shows: CSV name, heading,
//! unit and how to read it.

use connlab_lab::LoadgenPoint;

/// A figure of a point: its CSV name, heading, unit and how to read it.
pub(super) struct Metric {
    /// The CSV name.
    pub(super) key: &'static str,
    /// The column heading.
    pub(super) heading: &'static str,
    /// The unit, or empty.
    pub(super) unit: &'static str,
    /// Its value in a point, if the point has it.
    pub(super) get: fn(&LoadgenPoint) -> Option<f64>,
}

const fn metric(
    key: &'static str,
    heading: &'static str,
    unit: &'static str,
    get: fn(&LoadgenPoint) -> Option<f64>,
) -> Metric {
    Metric {
        key,
        heading,
        unit,
        get,
    }
}

pub(super) const PACING: &[Metric] = &[
    metric("send_lag_p50_us", "send lag p50", "µs", |p| {
        Some(p.client.send_lag_us.p50)
    }),
    metric("send_lag_p99_us", "send lag p99", "µs", |p| {
        Some(p.client.send_lag_us.p99)
    }),
    metric("send_lag_p999_us", "send lag p99.9", "µs", |p| {
        Some(p.client.send_lag_us.p999)
    }),
    metric("send_lag_max_us", "send lag max", "µs", |p| {
        Some(p.client.send_lag_us.max)
    }),
    metric(
        "send_deviation_stddev_us",
        "send deviation stddev",
        "µs",
        |p| Some(p.client.send_deviation_us.stddev),
    ),
    metric("send_deviation_max_us", "send deviation max", "µs", |p| {
        Some(p.client.send_deviation_us.max)
    }),
];

pub(super) const LATENCY: &[Metric] = &[
    metric("service_mean_us", "service mean", "µs", |p| {
        Some(p.client.service_latency_us.mean)
    }),
    metric("service_median_us", "service median", "µs", |p| {
        Some(p.client.service_latency_us.p50)
    }),
    metric("service_stddev_us", "service stddev", "µs", |p| {
        Some(p.client.service_latency_us.stddev)
    }),
    metric("service_p99_us", "service p99", "µs", |p| {
        Some(p.client.service_latency_us.p99)
    }),
    metric("service_max_us", "service max", "µs", |p| {
        Some(p.client.service_latency_us.max)
    }),
    metric("completed_per_s", "completed", "req/s", |p| {
        Some(p.client.achieved_rate_per_s)
    }),
    metric("errors", "errors", "", |p| Some(p.client.errors as f64)),
];

pub(super) const SETUP: &[Metric] = &[
    metric("established", "established", "connections", |p| {
        Some(p.client.established as f64)
    }),
    metric("failed", "failed", "connections", |p| {
        Some(p.client.failed_connections as f64)
    }),
    metric("setup_ms", "set-up time", "ms", |p| {
        Some(p.client.setup_s * 1000.0)
    }),
    metric("setup_rate_per_s", "set-up rate", "connections/s", |p| {
        Some(p.client.setup_rate_per_s)
    }),
];

pub(super) const MEMORY: &[Metric] = &[
    metric("client_max_rss_kib", "client peak RSS", "KiB", |p| {
        Some(p.client.max_rss_kib as f64)
    }),
    metric("server_max_rss_kib", "server peak RSS", "KiB", |p| {
        p.server.max_rss_kib.map(|k| k as f64)
    }),
];

pub(super) const CPU: &[Metric] = &[
    metric("client_cpu_s", "client CPU", "s", |p| Some(p.client.cpu_s)),
    metric("server_cpu_s", "server CPU", "s", |p| p.server.cpu_s),
];

pub(super) const SHARDS: &[Metric] = &[
    metric("measured_sent", "sent", "requests", |p| {
        Some(p.client.measured_sent as f64)
    }),
    metric("measured_completed", "completed", "requests", |p| {
        Some(p.client.measured_completed as f64)
    }),
    metric("service_mean_us", "service mean", "µs", |p| {
        Some(p.client.service_latency_us.mean)
    }),
    metric("service_p50_us", "service p50", "µs", |p| {
        Some(p.client.service_latency_us.p50)
    }),
    metric("service_p90_us", "service p90", "µs", |p| {
        Some(p.client.service_latency_us.p90)
    }),
    metric("service_p99_us", "service p99", "µs", |p| {
        Some(p.client.service_latency_us.p99)
    }),
    metric("service_p999_us", "service p99.9", "µs", |p| {
        Some(p.client.service_latency_us.p999)
    }),
    metric(
        "send_deviation_stddev_us",
        "send deviation stddev",
        "µs",
        |p| Some(p.client.send_deviation_us.stddev),
    ),
    metric("start_skew_ms", "shard start skew", "ms", |p| {
        p.client.start_skew_ms
    }),
];

/// Figures compared between N shards and one process.
pub(super) const SHARD_RATIOS: &[Metric] = &[
    metric("measured_completed", "completed", "", |p| {
        Some(p.client.measured_completed as f64)
    }),
    metric("service_p50_us", "service p50", "", |p| {
        Some(p.client.service_latency_us.p50)
    }),
    metric("service_p99_us", "service p99", "", |p| {
        Some(p.client.service_latency_us.p99)
    }),
];
