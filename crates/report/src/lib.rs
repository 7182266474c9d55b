//! Reports of `connlab sweep` results directories: the paper's table beside
//! ours (one row per setting and engine; paper | ours | ours/paper for each
//! statistic, ours as the median over repetitions with their spread), the
//! paper's derived tables, the paper's claims checked across our spread with
//! a verdict each, plots (with the paper's values on the same axes where it
//! gives them), the run environment and every warning.
//!
//! Formats: one self-contained HTML file (inline CSS and SVG, nothing fetched
//! when viewed), Markdown, and CSV (long form, for pandas).

mod claims;
mod figures;
mod index;
mod loadgen;
mod peers;
mod pipeline;
mod plots;
mod projection;
pub mod run;
mod singleip;
mod table;
mod text;
mod verdicts;
pub use claims::{
    check_claims, derived_tables, setting_text, ClaimCheck, ClaimResult, DerivedRow, DerivedTable,
    Quantity, Verdict,
};
pub use index::{ClaimRow, Index, IndexExperiment, IndexPaper};
pub use loadgen::render_loadgen;
pub use peers::{render_peers, summarize as summarize_peers, PeerRow, Spread as PeersSpread};
pub use pipeline::render_pipeline;
pub use projection::{project, projections, Projection};
pub use singleip::render_singleip;
pub use table::{
    backends_used, grouped, metric_name, our_stats, param_text, rate_text, ratio_text, stat_names,
    stat_unit, unit, Cell, PaperTable, Row, Spread,
};
pub use verdicts::{claim_rows, ExperimentClaims};

use connlab_lab::{PointResult, SweepDir};
use html_escape::encode_text as esc;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use table::server_stat;

/// Output formats.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// One self-contained HTML page.
    Html,
    /// GitHub-flavoured Markdown tables.
    Markdown,
    /// The tables and claims in long form.
    Csv,
}

impl std::str::FromStr for Format {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "html" => Ok(Format::Html),
            "markdown" | "md" => Ok(Format::Markdown),
            "csv" => Ok(Format::Csv),
            _ => Err(format!(
                "unknown format {s:?}; expected html, markdown or csv"
            )),
        }
    }
}

/// Why a report could not be made.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// Drawing a plot failed.
    #[error("drawing a plot: {0}")]
    Plot(String),
    /// Writing the CSV failed.
    #[error("writing CSV: {0}")]
    Csv(String),
}

/// Everything a report shows, computed once for every format.
pub(crate) struct Model<'a> {
    pub(crate) dir: &'a SweepDir,
    pub(crate) table: PaperTable,
    pub(crate) derived: Vec<DerivedTable>,
    pub(crate) claims: Vec<ClaimResult>,
}

impl<'a> Model<'a> {
    fn of(dir: &'a SweepDir) -> Model<'a> {
        let table = PaperTable::of(dir);
        let derived = derived_tables(dir, &table);
        let claims = check_claims(dir, &table);
        Model {
            dir,
            table,
            derived,
            claims,
        }
    }
}

/// Renders the report of a results directory.
pub fn render(dir: &SweepDir, format: Format) -> Result<String, ReportError> {
    let m = Model::of(dir);
    match format {
        Format::Html => html(&m),
        Format::Markdown => Ok(text::markdown(&m)),
        Format::Csv => text::csv(&m),
    }
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

/// UTC date and time of Unix seconds (ISO 8601, to the second).
fn iso(unix_s: f64) -> String {
    let secs = unix_s as i64;
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Civil from days (H. Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// Distinct values, in order of first appearance.
fn distinct(values: impl Iterator<Item = String>) -> Vec<String> {
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
fn environment(dir: &SweepDir) -> Vec<(&'static str, String)> {
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
            format!("{} of {} done", dir.points.len(), i.points_total),
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
fn warnings(dir: &SweepDir) -> BTreeMap<String, Vec<String>> {
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

fn point_row(p: &PointResult) -> Vec<String> {
    let l = &p.load;
    let errors: u64 = l.requests.errors.values().sum();
    vec![
        p.id.clone(),
        p.params.engine.clone(),
        grouped(p.params.connections as f64),
        p.params.active_ratio_label.clone(),
        p.params.rate_label(),
        format!("{:.1}", l.achieved_rate_per_s),
        l.requests.measured_completed.to_string(),
        errors.to_string(),
        num_sig(l.service_latency_us.mean),
        num_sig(l.service_latency_us.p50),
        num_sig(l.service_latency_us.p99),
        num_sig(l.send_deviation_us.stddev),
        p.server_cpu_s().map_or("—".into(), |c| format!("{c:.2}")),
        format!("{:.2}", l.client_cpu_s.user + l.client_cpu_s.sys),
        server_stat(p, "poll_call_us", "mean").map_or("—".into(), num_sig),
        server_stat(p, "cycle_us", "mean").map_or("—".into(), num_sig),
    ]
}

/// Further columns of a web experiment's points.
const WEB_POINT_COLUMNS: [&str; 4] = [
    "backend CPU (mean, CPUs)",
    "Mbit/s",
    "gateway process CPU",
    "gateway CPU busy",
];

fn web_point_cells(exp: &connlab_lab::Experiment, p: &PointResult) -> Vec<String> {
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

const POINT_COLUMNS: [&str; 16] = [
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
    "p99 µs",
    "send dev σ µs",
    "server CPU s",
    "client CPU s",
    "poll call µs",
    "cycle µs",
];

const STYLE: &str = "
body{font-family:system-ui,-apple-system,'Segoe UI',Roboto,sans-serif;margin:2rem auto;max-width:980px;color:#222;padding:0 1rem}
h1{font-size:1.5rem}h2{font-size:1.2rem;margin-top:2rem;border-bottom:1px solid #ddd}
table{border-collapse:collapse;margin:.5rem 0;font-size:.85rem}
th,td{border:1px solid #ccc;padding:.2rem .4rem;text-align:right;vertical-align:top}
th{background:#f3f3f3}td.label,th.label{text-align:left}
td.paper{color:#666;font-style:italic}
td.vs{color:#444}
td.nowrap{white-space:nowrap}
span.spread{display:block;font-size:.75rem;color:#777;white-space:nowrap}
tr.first td{border-top:2px solid #999}
tr.claim td{background:#fafafa;text-align:left}
td.holds{color:#17652a;font-weight:600;text-align:left}
td.fails{color:#a31515;font-weight:600;text-align:left}
td.unmeasurable,td.unjudged{color:#6b5900;text-align:left}
table.brief td.holds,table.brief td.fails,table.brief td.unmeasurable,table.brief td.unjudged{text-align:right}
caption{caption-side:bottom;text-align:left;font-size:.8rem;color:#555;padding-top:.3rem}
div.scroll{overflow-x:auto;max-width:100%}
figure.plot{display:inline-block;margin:.5rem 0;vertical-align:top;max-width:100%}
figure.plot svg{max-width:100%;height:auto}
figcaption{font-size:.8rem;color:#555;max-width:720px}
.note{font-size:.85rem;color:#444;max-width:900px}
ul.warnings li{margin:.2rem 0}
";

/// The start of a report page: head with the inline style, the title and
/// the experiment's description.
fn page_start(title: &str, description: &str) -> String {
    let mut h = String::new();
    let _ = write!(
        h,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>{}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n<h1>{}</h1>\n",
        esc(title),
        esc(title)
    );
    if !description.trim().is_empty() {
        let _ = writeln!(h, "<p class=\"note\">{}</p>", esc(description.trim()));
    }
    h
}

/// The three `<td>` of one statistic: paper | ours (median, spread below) |
/// ours/paper.
fn stat_tds(cell: &Cell, k: usize, unit: (&str, f64)) -> String {
    let ours = match &cell.ours[k] {
        None => "—".to_string(),
        Some(s) if s.n() > 1 => format!(
            "{}<span class=\"spread\">{}</span>",
            num_sig(s.median() / unit.1),
            spread_text(s, unit)
        ),
        Some(s) => num_sig(s.median() / unit.1),
    };
    format!(
        "<td class=\"paper\">{}</td><td>{ours}</td><td class=\"vs\">{}</td>",
        in_unit(cell.paper[k], unit),
        ratio(cell.ours_over_paper(k))
    )
}

/// The header of a paper-beside-ours table: `lead` label columns, then
/// paper | ours | ours/paper under each statistic of `metric`.
fn stat_header(lead: &[&str], metric: connlab_lab::Metric) -> String {
    let names = stat_names(metric);
    let mut h = String::from("<thead>\n<tr>");
    for l in lead {
        let _ = write!(h, "<th class=\"label\" rowspan=\"2\">{}</th>", esc(l));
    }
    for (k, n) in names.iter().enumerate() {
        let _ = write!(
            h,
            "<th colspan=\"3\">{} ({})</th>",
            esc(n),
            esc(stat_unit(metric, k).0)
        );
    }
    h.push_str("</tr>\n<tr>");
    for _ in names {
        h.push_str("<th>paper</th><th>ours</th><th>ours / paper</th>");
    }
    h.push_str("</tr>\n</thead>\n");
    h
}

/// The caption's sentence on repetitions.
fn repetitions_text(reps: usize) -> String {
    match reps {
        0 => "No repetition finished yet.".into(),
        1 => "Ours: one repetition per cell, so no spread is shown.".into(),
        n => format!("Each of our values is the median over up to {n} repetitions, with the lowest and highest repetition below it (n gives each cell's count)."),
    }
}

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

/// What our values of a metric are, for captions.
fn metric_whose(metric: connlab_lab::Metric) -> &'static str {
    use connlab_lab::Metric;
    match metric {
        Metric::PollCall => "at the server (--profile-poll): thread CPU time per call, and wall time per call, which also holds waiting for work and preemption",
        Metric::BackendCpu => "of each backend (user and system time of its cgroup over the measured window, as a share of one CPU): the mean over the backends the configuration uses, the busiest one, and their total",
        Metric::Throughput => "at the merged client shards: completed responses per second, response payload in Mbit/s, and failed requests as a share of those tried",
        Metric::GatewayCpu => "from /proc/stat over the measured window: the busy share of the gateway's CPU (the kernel's forwarding included), the gateway process's own CPU (none for direct, near none for nat, which forwards in softirq), and the busiest other CPU, which the clients and the backends share here",
        _ => "of the merged client shards",
    }
}

/// How a derived table picked each engine's row, in words.
pub(crate) fn pick_text(pick: connlab_lab::DerivedPick, first: &str) -> String {
    match pick {
        connlab_lab::DerivedPick::LargestFirstStat => format!("Per engine, our setting with the largest {first} (median over repetitions) in this sweep, as the paper reports each engine's worst case."),
        connlab_lab::DerivedPick::HighestRate => "Per configuration, our setting with the highest achieved request rate (median over repetitions), as the paper reports the gateway at its limit.".into(),
    }
}

/// The brief table's columns: the labelled claims grouped by label (claims
/// sharing a label split its engines between them), in order of first
/// appearance.
pub(crate) fn brief_columns(claims: &[ClaimResult]) -> Vec<(String, Vec<&ClaimResult>)> {
    let mut out: Vec<(String, Vec<&ClaimResult>)> = Vec::new();
    for c in claims {
        let Some(l) = &c.label else { continue };
        match out.iter_mut().find(|(x, _)| x == l) {
            Some((_, group)) => group.push(c),
            None => out.push((l.clone(), vec![c])),
        }
    }
    out
}

/// The engines of the brief table's rows, in the experiment's order.
pub(crate) fn brief_engines<'e>(
    columns: &[(String, Vec<&ClaimResult>)],
    engines: &'e [String],
) -> Vec<&'e String> {
    engines
        .iter()
        .filter(|e| {
            columns
                .iter()
                .flat_map(|c| &c.1)
                .any(|c| c.checks.iter().any(|k| k.subject == **e))
        })
        .collect()
}

/// A column's cell for an engine: from the first claim of the group that
/// compares it.
pub(crate) fn brief_of(group: &[&ClaimResult], engine: &str) -> Option<BriefCell> {
    group
        .iter()
        .find(|c| c.checks.iter().any(|k| k.subject == engine))
        .map(|c| brief_cell(c, engine))
}

/// The brief table: one row per engine, a column group per claim label
/// (paper | ours | ours/paper, ours coloured by the engine's verdict).
fn brief_html(claims: &[ClaimResult], engines: &[String]) -> String {
    let columns = brief_columns(claims);
    let rows = brief_engines(&columns, engines);
    if columns.is_empty() || rows.is_empty() {
        return String::new();
    }
    let mut h = String::from("<h2>The paper's numbers beside ours, in brief</h2>\n");
    // At most three claims side by side, so the table fits a laptop's
    // width; further claims wrap into another table with the same rows.
    for (i, chunk) in columns.chunks(3).enumerate() {
        if i > 0 {
            h.push_str("</tbody>\n</table>\n</div>\n");
        }
        let _ = write!(
            h,
            "<div class=\"scroll\">\n<table class=\"brief\" id=\"brief{}\">\n<thead>\n<tr><th class=\"label\" rowspan=\"2\">configuration</th>",
            if i == 0 { String::new() } else { format!("-{}", i + 1) }
        );
        for (label, group) in chunk {
            let sources = distinct(group.iter().map(|c| c.source.clone()));
            let _ = write!(
                h,
                "<th colspan=\"3\">{}<br><small>{}</small></th>",
                esc(label),
                esc(&sources.join(", "))
            );
        }
        h.push_str("</tr>\n<tr>");
        for _ in chunk {
            h.push_str("<th>paper</th><th>ours</th><th>ours / paper</th>");
        }
        h.push_str("</tr>\n</thead>\n<tbody>\n");
        for e in &rows {
            let _ = write!(h, "<tr><td class=\"label\">{}</td>", esc(e));
            for (_, group) in chunk {
                let Some(b) = brief_of(group, e) else {
                    h.push_str("<td class=\"paper\">—</td><td>—</td><td class=\"vs\">—</td>");
                    continue;
                };
                let _ = write!(
                    h,
                    "<td class=\"paper nowrap\">{}</td><td class=\"nowrap {}\">{}{}</td><td class=\"vs\">{}</td>",
                    esc(&b.paper),
                    b.verdict.key(),
                    esc(&b.ours),
                    b.spread
                        .map(|s| format!("<span class=\"spread\">{}</span>", esc(&s)))
                        .unwrap_or_default(),
                    ratio(b.ours_over_paper)
                );
            }
            h.push_str("</tr>\n");
        }
    }
    h.push_str("</tbody>\n</table>\n</div>\n<p class=\"note\">Per configuration and claim: the paper's number (a range where its text gives one), ours (the median; over several rows, the median of the rows' values) with the whole spread over rows and repetitions below it, and ours over the paper's. Ours is coloured by the verdict: green holds, red does not hold, amber cannot be measured or is not judged; the claims below give the bounds, the rows and the reasons.</p>\n");
    h
}

/// One cell of the brief table.
pub(crate) struct BriefCell {
    pub(crate) paper: String,
    pub(crate) ours: String,
    pub(crate) spread: Option<String>,
    pub(crate) ours_over_paper: Option<f64>,
    pub(crate) verdict: Verdict,
}

/// A claim's checks of one engine, summarised.
pub(crate) fn brief_cell(c: &ClaimResult, engine: &str) -> BriefCell {
    let checks: Vec<&ClaimCheck> = c.checks.iter().filter(|k| k.subject == engine).collect();
    let paper: Vec<String> = distinct(checks.iter().filter_map(|k| c.paper_text(k)));
    let paper_num = checks.iter().find_map(|k| k.paper);
    let ours = Spread::of(checks.iter().filter_map(|k| k.ours));
    let lo = checks
        .iter()
        .filter_map(|k| k.spread.map(|s| s.0))
        .reduce(f64::min);
    let hi = checks
        .iter()
        .filter_map(|k| k.spread.map(|s| s.1))
        .reduce(f64::max);
    let verdict = if checks.is_empty() {
        Verdict::NotJudged
    } else if let Verdict::CannotMeasure(why) = &c.verdict {
        if checks
            .iter()
            .all(|k| k.verdict == Verdict::CannotMeasure(why.clone()))
        {
            c.verdict.clone()
        } else {
            claims::overall_of(&checks)
        }
    } else {
        claims::overall_of(&checks)
    };
    let median = ours.as_ref().map(Spread::median);
    BriefCell {
        paper: match paper.len() {
            0 => "—".into(),
            1 => paper[0].clone(),
            _ => paper.join(" / "),
        },
        ours: median.map_or("—".into(), |m| c.format(m)),
        spread: lo.zip(hi).and_then(|(lo, hi)| {
            let s = claim_spread(c, lo, hi);
            (Some(&s) != median.map(|m| c.format(m)).as_ref()).then_some(s)
        }),
        ours_over_paper: median
            .zip(paper_num)
            .filter(|(o, p)| *p != 0.0 && o.signum() == p.signum())
            .map(|(o, p)| o / p),
        verdict,
    }
}

fn html(m: &Model) -> Result<String, ReportError> {
    let (dir, t) = (m.dir, &m.table);
    let exp = &dir.experiment;
    let mut h = page_start(&exp.title, &exp.description);
    if dir.points.is_empty() {
        let _ = writeln!(
            h,
            "<p class=\"note\"><strong>No points finished yet</strong> ({} planned).</p>",
            dir.info.points_total
        );
    }
    h.push_str(&brief_html(&m.claims, &t.engines));

    // The paper table: one row per setting and engine.
    let _ = writeln!(
        h,
        "<h2>{}: {}, paper beside ours</h2>",
        esc(&t.table),
        esc(&metric_heading(t.metric)),
    );
    h.push_str("<div class=\"scroll\">\n<table id=\"paper-table\">\n");
    h.push_str(&stat_header(&["setting", "engine", "n"], t.metric));
    h.push_str("<tbody>\n");
    for row in &t.rows {
        for (i, (e, cell)) in t.engines.iter().zip(&row.cells).enumerate() {
            if i == 0 {
                let _ = write!(
                    h,
                    "<tr class=\"first\"><td class=\"label\" rowspan=\"{}\">{}</td>",
                    t.engines.len(),
                    esc(&row.label)
                );
            } else {
                h.push_str("<tr>");
            }
            let _ = write!(
                h,
                "<td class=\"label\">{}</td><td>{}</td>",
                esc(e),
                cell.n()
            );
            for k in 0..3 {
                h.push_str(&stat_tds(cell, k, stat_unit(t.metric, k)));
            }
            h.push_str("</tr>\n");
        }
    }
    let mut caption = format!(
        "Values in {}; ours are the {} {}. {} ",
        metric_units(t.metric).join(", "),
        metric_name(t.metric),
        metric_whose(t.metric),
        repetitions_text(t.max_repetitions())
    );
    if let Some(p) = &exp.paper {
        if !t.has_paper_values {
            caption.push_str("Paper: the experiment file gives no values for this table (—). ");
        } else {
            caption.push_str("The paper's machine and kernel differ from ours, so absolute values differ; what should carry over is the shape (ratios and orderings), judged under the claims below. ");
        }
        caption.push_str(p.note.trim());
        caption.push_str(&format!(" Source: {}", p.source));
    } else {
        caption.push_str("The experiment file names no paper table.");
    }
    let _ = writeln!(
        h,
        "</tbody>\n</table>\n</div>\n<p class=\"note\">{}</p>",
        esc(&caption)
    );

    // Derived tables.
    for d in &m.derived {
        let dn = stat_names(d.metric);
        let _ = writeln!(
            h,
            "<h2>{}: {}, from this sweep's points</h2>",
            esc(&d.table),
            esc(&metric_heading(d.metric)),
        );
        let _ = writeln!(
            h,
            "<div class=\"scroll\">\n<table class=\"derived\" id=\"derived-{}\">",
            esc(&d.table.to_lowercase().replace(' ', "-"))
        );
        h.push_str(&stat_header(&["engine", "our point", "n"], d.metric));
        h.push_str("<tbody>\n");
        for r in &d.rows {
            let _ = write!(
                h,
                "<tr><td class=\"label\">{}</td><td class=\"label\">{}</td><td>{}</td>",
                esc(&r.engine),
                esc(r.picked.as_deref().unwrap_or("nothing measured")),
                r.cell.n()
            );
            for k in 0..3 {
                h.push_str(&stat_tds(&r.cell, k, stat_unit(d.metric, k)));
            }
            h.push_str("</tr>\n");
        }
        let _ = writeln!(
            h,
            "</tbody>\n</table>\n</div>\n<p class=\"note\">{}</p>",
            esc(&format!(
                "{} Ours are the {} {}. {} {}",
                pick_text(d.pick, dn[0]),
                metric_name(d.metric),
                metric_whose(d.metric),
                repetitions_text(d.rows.iter().map(|r| r.cell.n()).max().unwrap_or(0)),
                d.note.trim()
            ))
        );
    }

    // Claims.
    if !m.claims.is_empty() {
        h.push_str("<h2>The paper's claims against ours</h2>\n<div class=\"scroll\">\n<table id=\"claims\">\n<thead><tr><th class=\"label\">engine</th><th class=\"label\">rows compared</th><th>paper</th><th>ours</th><th>spread</th><th>n</th><th class=\"label\">verdict</th></tr></thead>\n<tbody>\n");
        for c in &m.claims {
            let _ = writeln!(
                h,
                "<tr class=\"claim first\"><td colspan=\"6\"><strong>{}</strong> · {}<br><small>{} of the {}{}</small></td><td class=\"{}\">{}</td></tr>",
                esc(&c.source),
                esc(&c.text),
                c.quantity.word(),
                esc(c.statistic),
                esc(&format!(
                    " {}{}",
                    metric_name(c.metric),
                    if c.expect.is_empty() {
                        String::new()
                    } else {
                        format!("; holds if our whole spread is {}", c.expect)
                    }
                )),
                c.verdict.key(),
                esc(&c.verdict.text())
            );
            for k in &c.checks {
                let fmt = |v: f64| c.format(v);
                let paper = c.paper_text(k).map_or("—".into(), |p| {
                    format!("{p}{}", if k.paper_from_cells { "" } else { "†" })
                });
                let mut rows = esc(&k.rows).to_string();
                if let Some(ctx) = &k.context {
                    let _ = write!(rows, "<br><small>{}</small>", esc(ctx));
                }
                let _ = writeln!(
                    h,
                    "<tr><td class=\"label\">{}</td><td class=\"label\">{rows}</td><td class=\"paper nowrap\">{paper}</td><td class=\"nowrap\">{}</td><td class=\"nowrap\">{}</td><td>{}</td><td class=\"{}\">{}</td></tr>",
                    esc(&k.engine),
                    k.ours.map_or("—".into(), fmt),
                    k.spread.map_or("—".into(), |(lo, hi)| claim_spread(c, lo, hi)),
                    if k.n == 0 { "—".into() } else { k.n.to_string() },
                    k.verdict.key(),
                    // The claim's own reason, stated once in its header row.
                    if matches!(c.verdict, Verdict::CannotMeasure(_)) && k.verdict == c.verdict {
                        "cannot be measured here (the reason above)".to_string()
                    } else {
                        esc(&k.verdict.text()).to_string()
                    }
                );
            }
        }
        h.push_str("</tbody>\n<caption>A claim holds only if every comparison holds across our spread. Ratios compare the named statistic between the two rows (to ÷ from) or between two engines at one row; ours is the ratio of the medians, and the spread is the conservative interval: the lowest and highest ratio any pairing of the two cells' repetitions gives (smallest over largest, largest over smallest), with no assumption that repetitions of different cells correspond. Differences (−) pair them the same way (lowest minus highest, highest minus lowest). A peak is each repetition's highest value over the rows named (only rows within the response-time bound, where one is given); the peaks' spread over repetitions is compared as a cell's. A value claim's spread runs from the lowest to the highest repetition over every setting. Paper: computed from the paper's cells where the experiment file gives them for the rows compared; † marks the number the paper's text states instead. Rows not in this run are never replaced by others for the verdict; the widest span measured is shown beside them as context.</caption>\n</table>\n</div>\n");
    }

    h.push_str(&projection::html(dir, t));

    // Plots.
    h.push_str("<h2>Plots</h2>\n");
    let mut plotted = 0;
    for (id, caption, svg) in figures::plots(dir, t)? {
        let _ = writeln!(
            h,
            "<figure class=\"plot\" id=\"plot-{id}\">\n{svg}\n<figcaption>{}</figcaption>\n</figure>",
            esc(&caption)
        );
        plotted += 1;
    }
    if plotted == 0 {
        h.push_str("<p class=\"note\">Nothing to plot: each plot needs at least two values along its axis.</p>\n");
    }

    // Environment.
    h.push_str("<h2>Environment</h2>\n<table id=\"environment\">\n<tbody>\n");
    for (k, v) in environment(dir) {
        let _ = writeln!(
            h,
            "<tr><th class=\"label\">{}</th><td class=\"label\">{}</td></tr>",
            esc(k),
            esc(&v)
        );
    }
    h.push_str("</tbody>\n</table>\n");

    // Warnings.
    h.push_str("<h2>Warnings</h2>\n<ul id=\"warnings\" class=\"warnings\">\n");
    let ws = warnings(dir);
    if ws.is_empty() {
        h.push_str("<li>none</li>\n");
    }
    for (w, ids) in &ws {
        let _ = writeln!(
            h,
            "<li>{} <small>({}: {})</small></li>",
            esc(w),
            ids.len(),
            esc(&ids.join(", "))
        );
    }
    h.push_str("</ul>\n");

    // Every point.
    let web = exp.web.is_some();
    let _ = writeln!(
        h,
        "<h2>All points</h2>\n<details>\n<summary>{} points</summary>\n<div class=\"scroll\">\n<table id=\"points\">\n<thead><tr>{}</tr></thead>\n<tbody>",
        dir.points.len(),
        POINT_COLUMNS
            .iter()
            .chain(if web { &WEB_POINT_COLUMNS[..] } else { &[] })
            .map(|c| format!("<th>{}</th>", esc(c)))
            .collect::<String>()
    );
    for p in &dir.points {
        let mut cells = point_row(p);
        if web {
            cells.extend(web_point_cells(exp, p));
        }
        let _ = write!(h, "<tr><td class=\"label\">{}</td>", esc(&cells[0]));
        for c in &cells[1..] {
            let _ = write!(h, "<td>{}</td>", esc(c));
        }
        h.push_str("</tr>\n");
    }
    h.push_str("</tbody>\n</table>\n</div>\n</details>\n</body>\n</html>\n");
    Ok(h)
}

#[cfg(test)]
mod tests {
    use super::iso;

    #[test]
    fn iso_dates() {
        assert_eq!(iso(0.0), "1970-01-01T00:00:00Z");
        assert_eq!(iso(1_795_000_000.0), "2026-11-18T11:06:40Z");
        assert_eq!(iso(951_782_400.0), "2000-02-29T00:00:00Z");
    }
}
