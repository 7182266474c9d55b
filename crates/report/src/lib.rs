//! Reports of `connlab sweep` results directories: the paper's table beside
//! ours (one row per setting and engine; paper | ours | ours/paper for each
//! statistic, ours as the median over repetitions with their spread), the
//! paper's derived tables, the paper's claims checked across our spread with
//! a verdict each, plots (with the paper's values on the same axes where it
//! gives them), the run environment and every warning.
//!
//! Formats: one self-contained HTML file (inline CSS and SVG, nothing fetched
//! when viewed), Markdown, and CSV (long form, for pandas).

mod brief;
mod claims;
pub mod compare_run;
mod export;
mod figure_files;
mod figures;
mod index;
mod loadgen;
mod locality;
mod peers;
mod pipeline;
mod plots;
mod projection;
pub mod run;
pub mod run_result;
mod scaling;
mod singleip;
mod soak;
mod summary;
mod table;
mod tally;
mod validity;
mod verdicts;
pub use claims::{
    check_claims, derived_tables, noise, setting_text, ClaimCheck, ClaimResult, DerivedRow,
    DerivedTable, Noise, Quantity, Verdict,
};
pub use figure_files::{figures_of, write_figures, PageFigure};
pub use index::{ClaimRow, Index, IndexExperiment, IndexPaper};
pub use loadgen::render_loadgen;
pub use peers::{render_peers, summarize as summarize_peers, PeerRow, Spread as PeersSpread};
pub use pipeline::render_pipeline;
pub use projection::{project, projections, Projection};
pub use singleip::render_singleip;
pub use soak::render_soak;
pub use table::{
    backends_used, grouped, metric_name, our_stats, param_text, rate_text, ratio_text, stat_names,
    stat_unit, unit, Cell, PaperTable, Row, Spread,
};
pub use verdicts::{pipeline_claims, singleip_claims, sweep_claims, ExperimentClaims};

use connlab_lab::{PointResult, SweepDir};
pub use export::Format;
use export::{Page, Report};
use std::collections::BTreeMap;
use table::server_stat;

/// Why a report could not be made.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// Drawing a plot failed.
    #[error("drawing a plot: {0}")]
    Plot(String),
    /// Writing the CSV failed.
    #[error("writing CSV: {0}")]
    Csv(String),
    /// Writing JSON failed.
    #[error("writing JSON: {0}")]
    Json(String),
}

/// Everything a report shows, computed once for every format.
pub(crate) struct Model<'a> {
    pub(crate) dir: &'a SweepDir,
    pub(crate) table: PaperTable,
    pub(crate) derived: Vec<DerivedTable>,
    pub(crate) claims: Vec<ClaimResult>,
    /// The points' validity, the A/A control's included.
    pub(crate) validity: validity::Summary,
    /// The A/A noise floor of the table's first statistic.
    pub(crate) noise: Option<Noise>,
}

impl<'a> Model<'a> {
    fn of(dir: &'a SweepDir) -> Model<'a> {
        let table = PaperTable::of(dir);
        let derived = derived_tables(dir, &table);
        let claims = check_claims(dir, &table);
        let validity = validity::Summary::of(
            dir.points
                .iter()
                .chain(dir.controls.iter())
                .map(|p| (p.id.as_str(), p.checked.validity.as_ref())),
        );
        let noise = noise(dir, table.metric, 0);
        Model {
            dir,
            table,
            derived,
            claims,
            validity,
            noise,
        }
    }

    /// What the noise floor is of: `mean of service latency`.
    pub(crate) fn noise_of(&self) -> String {
        format!(
            "{} of {}",
            stat_names(self.table.metric)[0],
            metric_name(self.table.metric)
        )
    }
}

impl Report for Model<'_> {
    type Row = locality::rows::CsvRow;

    fn page(&self, format: Format) -> Result<Page, ReportError> {
        locality::page(self, format)
    }

    fn rows(&self) -> Result<Vec<locality::rows::CsvRow>, ReportError> {
        Ok(locality::rows::rows(self))
    }
}

/// Renders the report of a results directory.
pub fn render(dir: &SweepDir, format: Format) -> Result<String, ReportError> {
    export::export(&Model::of(dir), format)
}

/// Three significant figures, thousands grouped: 1,130 · 146 · 1.13 · 0.284.
pub(crate) fn num_sig(v: f64) -> String {
    if !v.is_finite() {
        return "—".into();
    }
    if v.abs() >= 100.0 {
        return grouped(v.round());
    }
    if v == 0.0 {
        return "0".into();
    }
    let digits = (2 - v.abs().log10().floor() as i32).clamp(0, 9) as usize;
    format!("{v:.digits$}")
}

/// A value in µs printed in `unit` (size in µs).
pub(crate) fn in_unit(v: Option<f64>, unit: (&str, f64)) -> String {
    v.map_or("—".into(), |v| num_sig(v / unit.1))
}

/// A spread `lo–hi` in `unit` (`lo to hi` when negative, one value when
/// all repetitions agree).
pub(crate) fn spread_text(s: &Spread, unit: (&str, f64)) -> String {
    let (lo, hi) = (num_sig(s.min() / unit.1), num_sig(s.max() / unit.1));
    if lo == hi {
        lo
    } else if s.min() < 0.0 {
        format!("{lo} to {hi}")
    } else {
        format!("{lo}–{hi}")
    }
}

/// A claim's spread: `4.5–5.5×`, `300–330 µs`, `-0.05 to +0.31 ms`.
pub(crate) fn claim_spread(c: &ClaimResult, lo: f64, hi: f64) -> String {
    if c.is_ratio && c.percent {
        let (l, h) = (claims::percent_number(lo), claims::percent_number(hi));
        return if l == h {
            format!("{h} %")
        } else {
            format!("{l}–{h} %")
        };
    }
    if c.is_ratio {
        let (l, h) = (claims::ratio_text_x(lo), claims::ratio_text_x(hi));
        if l == h {
            h
        } else {
            format!("{}–{h}", l.trim_end_matches('×'))
        }
    } else {
        let u = c.unit;
        let sign = |v: f64| {
            if c.quantity == Quantity::Difference && v > 0.0 {
                "+"
            } else {
                ""
            }
        };
        let (l, h) = (
            format!("{}{}", sign(lo), claims::trimmed(lo / u.1)),
            format!("{}{}", sign(hi), claims::trimmed(hi / u.1)),
        );
        if l == h {
            format!("{h} {}", u.0)
        } else if lo < 0.0 || c.quantity == Quantity::Difference {
            format!("{l} to {h} {}", u.0)
        } else {
            format!("{l}–{h} {}", u.0)
        }
    }
}

/// A ratio to two significant figures below 10 (0.025×, 0.62×, 19×).
pub(crate) fn ratio(v: Option<f64>) -> String {
    v.map_or("—".into(), claims::ratio_text_x)
}

/// UTC date and time of Unix seconds (RFC 3339, a profile of ISO 8601, to
/// the second); the bare number of seconds when it is outside the years the
/// `time` crate can represent.
fn iso(unix_s: f64) -> String {
    use time::format_description::well_known::Rfc3339;
    time::OffsetDateTime::from_unix_timestamp(unix_s.floor() as i64)
        .ok()
        .and_then(|t| t.format(&Rfc3339).ok())
        .unwrap_or_else(|| format!("{unix_s} s after 1970-01-01T00:00:00Z"))
}

/// Distinct values, in order of first appearance.
pub(crate) fn distinct(values: impl Iterator<Item = String>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for v in values {
        if !out.contains(&v) {
            out.push(v);
        }
    }
    out
}

/// Where the points ran, as the points recorded it: the server's CPU set,
/// and the client threads' pinning, CPUs and writer policy. Unknown parts
/// are left out; nothing recorded reads "not recorded".
fn placement(dir: &SweepDir) -> (String, String) {
    let server = distinct(dir.points.iter().filter_map(|p| {
        let env = &p.server.as_ref()?["environment"];
        let set = env["cpu_affinity"].as_str()?.to_string();
        Some(match env["cpu_now"].as_u64() {
            Some(now) => format!("CPU set {set} (last on CPU {now})"),
            None => format!("CPU set {set}"),
        })
    }));
    let server = if server.is_empty() {
        match &dir.experiment.server.cpu {
            Some(c) => format!("CPU {c} (asked; the points recorded none)"),
            None => "not recorded".into(),
        }
    } else if server.len() > 3 {
        format!("{}; … ({} variants)", server[..3].join("; "), server.len())
    } else {
        server.join("; ")
    };
    let client = distinct(dir.points.iter().map(|p| {
        let pl = &p.load.placement;
        let mut parts = Vec::new();
        match &pl.pinned {
            Some(c) => parts.push(format!("pinned to CPU {c}")),
            None => parts.push("not pinned".into()),
        }
        if let Some(c) = pl.writer_cpu {
            parts.push(format!("writer on CPU {c}"));
        }
        if let Some(c) = pl.reader_cpu {
            parts.push(format!("reader on CPU {c}"));
        }
        if let Some(policy) = &pl.writer_policy {
            parts.push(format!("writer {policy}"));
        }
        parts.join(", ")
    }));
    let client = if client.is_empty() {
        "not recorded (no finished point)".into()
    } else if client.len() > 3 {
        format!("{}; … ({} variants)", client[..3].join("; "), client.len())
    } else {
        client.join("; ")
    };
    (server, client)
}

/// Key facts about the run, as (name, value) pairs.
pub(crate) fn environment(dir: &SweepDir) -> Vec<(&'static str, String)> {
    let i = &dir.info;
    let e = &i.environment;
    let exp = &dir.experiment;
    let (server_cpu, client_cpu) = placement(dir);
    vec![
        ("experiment", format!("{} ({})", exp.name, i.title)),
        (
            "matrix",
            if i.quick {
                "quick (reduced)".into()
            } else {
                "full".into()
            },
        ),
        (
            "points",
            format!(
                "{} of {} done ({} of them the A/A control)",
                dir.points.len() + dir.controls.len(),
                i.points_total,
                dir.controls.len()
            ),
        ),
        ("started", iso(i.started_unix_s)),
        ("connlab", i.connlab_version.clone()),
        ("kernel", e.kernel.clone()),
        ("CPUs", e.cpu_count.to_string()),
        ("clock source", e.clock_source.clone()),
        (
            "open files (soft / hard)",
            format!("{} / {}", e.nofile_soft, e.nofile_hard),
        ),
        (
            "server host",
            format!("{} ({})", i.topology.server_host, i.topology.server_addr),
        ),
        (
            "client hosts",
            format!(
                "{} ({}), one load shard each",
                i.topology.client_hosts.len(),
                i.topology.client_hosts.join(", ")
            ),
        ),
        (
            "links",
            i.topology
                .link_rate
                .clone()
                .map_or("unlimited veth on one bridge".into(), |r| {
                    format!("{r} (tbf) veth on one bridge")
                }),
        ),
        ("server placement (recorded)", server_cpu),
        ("client placement (recorded)", client_cpu),
        ("protocol", exp.server.protocol.clone()),
    ]
}

/// Warnings, deduplicated, with the points that raised them.
pub(crate) fn warnings(dir: &SweepDir) -> BTreeMap<String, Vec<String>> {
    let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for p in &dir.points {
        let mut add = |w: String| out.entry(w).or_default().push(p.id.clone());
        for w in p.all_warnings() {
            add(w.clone());
        }
        let errors: u64 = p.load.requests.errors.values().sum();
        if errors > 0 {
            add(format!("{errors} request errors"));
        }
        if p.load.interrupted {
            add("the load was interrupted".into());
        }
        if p.load.peer_failed {
            add("the server failed during the load".into());
        }
    }
    out
}

pub(crate) fn point_row(p: &PointResult) -> Vec<String> {
    let l = &p.load;
    let errors: u64 = l.requests.errors.values().sum();
    vec![
        p.id.clone(),
        p.params.engine.clone(),
        grouped(p.params.connections as f64),
        p.params.active_ratio_label.clone(),
        p.params.rate_label(),
        format!("{:.1}", l.achieved_rate_per_s),
        l.requests.completed.to_string(),
        errors.to_string(),
        num_sig(l.service_latency_us.mean),
        num_sig(l.service_latency_us.p50),
        interval_of(
            l.run_checks
                .as_ref()
                .and_then(|c| c.service_latency_p50.as_ref()),
        ),
        num_sig(l.service_latency_us.p99),
        interval_of(
            l.run_checks
                .as_ref()
                .and_then(|c| c.service_latency_p99.as_ref()),
        ),
        num_sig(l.send_deviation_us.stddev),
        p.server_cpu_s().map_or("—".into(), |c| format!("{c:.2}")),
        format!("{:.2}", l.client_cpu_s.user + l.client_cpu_s.sys),
        server_stat(p, "poll_call_us", "mean").map_or("—".into(), num_sig),
        server_stat(p, "cycle_us", "mean").map_or("—".into(), num_sig),
        match &p.checked.validity {
            None => "not checked".into(),
            Some(v) if v.valid => format!(
                "valid ({} attempt{})",
                v.attempts,
                if v.attempts == 1 { "" } else { "s" }
            ),
            Some(v) => format!("INVALID: {}", v.failure_text()),
        },
    ]
}

/// A percentile's 95 % order-statistic interval, `lo–hi`, or `—`.
fn interval_of(i: Option<&connlab_measure::stats::PercentileInterval>) -> String {
    i.map_or("—".into(), |i| {
        format!("{}–{}", num_sig(i.lo), num_sig(i.hi))
    })
}

/// Further columns of a web experiment's points.
pub(crate) const WEB_POINT_COLUMNS: [&str; 4] = [
    "backend CPU (mean, CPUs)",
    "Mbit/s",
    "gateway process CPU",
    "gateway CPU busy",
];

pub(crate) fn web_point_cells(exp: &connlab_lab::Experiment, p: &PointResult) -> Vec<String> {
    use connlab_lab::Metric;
    let backend = our_stats(exp, Metric::BackendCpu, p);
    let gateway = our_stats(exp, Metric::GatewayCpu, p);
    let f = |v: Option<f64>| v.map_or("—".into(), num_sig);
    vec![
        f(backend[0]),
        num_sig(p.load.throughput_mbit_s),
        f(gateway[1]),
        f(gateway[0]),
    ]
}

pub(crate) const POINT_COLUMNS: [&str; 19] = [
    "point",
    "engine",
    "connections",
    "active ratio",
    "rate /s",
    "achieved /s",
    "completed",
    "errors",
    "mean µs",
    "median µs",
    "median 95 % interval",
    "p99 µs",
    "p99 95 % interval",
    "send dev σ µs",
    "server CPU s",
    "client CPU s",
    "poll call µs",
    "cycle µs",
    "validity",
];

/// A metric with its unit for headings: `service latency (ms)`, or the
/// name alone when its statistics have different units (`throughput`).
pub(crate) fn metric_heading(metric: connlab_lab::Metric) -> String {
    match metric_units(metric).as_slice() {
        [one] => format!("{} ({one})", metric_name(metric)),
        _ => metric_name(metric).to_string(),
    }
}

/// The distinct units of a metric's statistics.
pub(crate) fn metric_units(metric: connlab_lab::Metric) -> Vec<&'static str> {
    distinct((0..3).map(|k| stat_unit(metric, k).0.to_string()))
        .into_iter()
        .map(|u| {
            (0..3)
                .map(|k| stat_unit(metric, k).0)
                .find(|x| *x == u)
                .unwrap_or("")
        })
        .collect()
}

/// How a derived table picked each engine's row, in words.
pub(crate) fn pick_text(pick: connlab_lab::DerivedPick, first: &str) -> String {
    match pick {
        connlab_lab::DerivedPick::LargestFirstStat => format!("Per engine, our setting with the largest {first} (median over repetitions) in this sweep, as the paper reports each engine's worst case."),
        connlab_lab::DerivedPick::HighestRate => "Per configuration, our setting with the highest achieved request rate (median over repetitions), as the paper reports the gateway at its limit.".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::iso;

    #[test]
    fn iso_dates() {
        assert_eq!(iso(0.0), "1970-01-01T00:00:00Z");
        assert_eq!(iso(1_795_000_000.0), "2026-11-18T11:06:40Z");
        assert_eq!(iso(951_782_400.0), "2000-02-29T00:00:00Z");
        // Fractions of a second are cut, not rounded; before 1970 too.
        assert_eq!(iso(59.9), "1970-01-01T00:00:59Z");
        assert_eq!(iso(-0.5), "1969-12-31T23:59:59Z");
        assert!(iso(f64::NAN).contains("1970"));
        assert!(iso(1e300).contains("s after"));
    }
}
