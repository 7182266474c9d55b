//! Reports of `connlab sweep` results directories: the paper's table layout
//! (engine columns, three statistics per cell, the paper's values beside ours),
//! the paper's claims checked against our ratios, plots (latency against
//! connections and against the active ratio, the CDF of send deviation), the
//! run environment and every warning.
//!
//! Formats: one self-contained HTML file (inline CSS and SVG, nothing fetched
//! when viewed), Markdown, and CSV (the table in long form, for pandas).

mod peers;
mod pipeline;
mod plots;
mod table;
pub use peers::{render_peers, summarize as summarize_peers, PeerRow, Spread};
pub use pipeline::render_pipeline;
use table::server_stat;

pub use table::{
    grouped, metric_name, rate_text, stat_names, Cell, ClaimCheck, PaperTable, Row, Stats,
};

use connlab_lab::{PointResult, SweepDir, Vary};
use html_escape::encode_text as esc;
use plots::Series;
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// Output formats.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// One self-contained HTML page.
    Html,
    /// GitHub-flavoured Markdown tables.
    Markdown,
    /// The paper table in long form.
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
}

/// Renders the report of a results directory.
pub fn render(dir: &SweepDir, format: Format) -> Result<String, ReportError> {
    let table = PaperTable::of(dir);
    Ok(match format {
        Format::Html => html(dir, &table)?,
        Format::Markdown => markdown(dir, &table),
        Format::Csv => csv(&table),
    })
}

fn num(v: Option<f64>) -> String {
    match v {
        None => "—".into(),
        Some(v) if v.abs() >= 100.0 => grouped(v.round()),
        Some(v) => format!("{v:.1}"),
    }
}

/// A ratio to two significant figures below 10 (0.025×, 0.62×, 19×).
fn ratio(v: Option<f64>) -> String {
    v.map_or("—".into(), |r| {
        if r >= 10.0 {
            format!("{r:.0}×")
        } else if r >= 1.0 {
            format!("{r:.1}×")
        } else if r >= 0.1 {
            format!("{r:.2}×")
        } else {
            format!("{r:.3}×")
        }
    })
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

/// Key facts about the run, as (name, value) pairs.
fn environment(dir: &SweepDir) -> Vec<(&'static str, String)> {
    let i = &dir.info;
    let e = &i.environment;
    let exp = &dir.experiment;
    let placement = dir
        .points
        .first()
        .map(|p| {
            let pl = &p.load.placement;
            format!(
                "client writer CPU {}, reader CPU {} (pinned {})",
                pl.writer_cpu.map_or("?".into(), |c| c.to_string()),
                pl.reader_cpu.map_or("?".into(), |c| c.to_string()),
                pl.pinned.clone().unwrap_or_else(|| "no".into())
            )
        })
        .unwrap_or_else(|| "—".into());
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
        (
            "server CPUs",
            exp.server.cpu.clone().unwrap_or_else(|| "any".into()),
        ),
        ("client placement", placement),
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
        num(Some(l.service_latency_us.mean)),
        num(Some(l.service_latency_us.p50)),
        num(Some(l.service_latency_us.p99)),
        num(Some(l.send_deviation_us.stddev)),
        p.server_cpu_s().map_or("—".into(), |c| format!("{c:.2}")),
        format!("{:.2}", l.client_cpu_s.user + l.client_cpu_s.sys),
        num(server_stat(p, "poll_call_us", "mean")),
        num(server_stat(p, "cycle_us", "mean")),
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
body{font-family:system-ui,-apple-system,'Segoe UI',Roboto,sans-serif;margin:2rem auto;max-width:1200px;color:#222;padding:0 1rem}
h1{font-size:1.5rem}h2{font-size:1.2rem;margin-top:2rem;border-bottom:1px solid #ddd}
table{border-collapse:collapse;margin:.5rem 0;font-size:.85rem}
th,td{border:1px solid #ccc;padding:.25rem .45rem;text-align:right}
th{background:#f3f3f3}td.label,th.label{text-align:left}
td.paper{color:#777;font-style:italic}
caption{caption-side:bottom;text-align:left;font-size:.8rem;color:#555;padding-top:.3rem}
div.scroll{overflow-x:auto;max-width:100%}
figure.plot{display:inline-block;margin:.5rem;vertical-align:top}
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

fn html(dir: &SweepDir, t: &PaperTable) -> Result<String, ReportError> {
    let exp = &dir.experiment;
    let names = stat_names(t.metric);
    let mut h = page_start(&exp.title, &exp.description);
    if dir.points.is_empty() {
        let _ = writeln!(
            h,
            "<p class=\"note\"><strong>No points finished yet</strong> ({} planned).</p>",
            dir.info.points_total
        );
    }

    // The paper table.
    let _ = writeln!(
        h,
        "<h2>{}: {} (µs)</h2>",
        esc(&t.table),
        metric_name(t.metric)
    );
    h.push_str("<div class=\"scroll\">\n<table id=\"paper-table\">\n<thead>\n<tr><th class=\"label\" rowspan=\"2\">setting</th>");
    for e in &t.engines {
        let _ = write!(h, "<th colspan=\"6\" class=\"engine\">{}</th>", esc(e));
    }
    h.push_str("</tr>\n<tr>");
    for _ in &t.engines {
        for n in names {
            let _ = write!(h, "<th>{n}</th><th>paper</th>");
        }
    }
    h.push_str("</tr>\n</thead>\n<tbody>\n");
    for row in &t.rows {
        let _ = write!(h, "<tr><td class=\"label\">{}</td>", esc(&row.label));
        for cell in &row.cells {
            for k in 0..3 {
                let ours = cell.ours.and_then(|s| s.0[k]);
                let paper = cell.paper.and_then(|s| s.0[k]);
                let _ = write!(
                    h,
                    "<td>{}</td><td class=\"paper\">{}</td>",
                    num(ours),
                    num(paper)
                );
            }
        }
        h.push_str("</tr>\n");
    }
    let reps = t
        .rows
        .iter()
        .flat_map(|r| r.cells.iter().map(|c| c.n))
        .max()
        .unwrap_or(0);
    let whose = if t.metric == connlab_lab::Metric::PollCall {
        "at the server (--profile-poll): thread CPU time per call, and wall time per call, which also holds waiting for work and preemption"
    } else {
        "of the merged client shards"
    };
    let mut caption = format!(
        "Ours: {} {whose}, in µs{}. ",
        metric_name(t.metric),
        if reps > 1 {
            format!(", averaged over {reps} repetitions")
        } else {
            String::new()
        }
    );
    if let Some(p) = &exp.paper {
        if !t.has_paper_values {
            caption.push_str("Paper: no values are given in the experiment file (—). ");
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

    // Claims.
    let claims = t.claims(dir);
    if !claims.is_empty() {
        h.push_str("<h2>The paper's claims against ours</h2>\n<table id=\"claims\">\n<thead><tr><th class=\"label\">claim</th><th class=\"label\">engine</th><th class=\"label\">rows of</th><th>from</th><th>to</th><th>ours</th><th>paper</th></tr></thead>\n<tbody>\n");
        for c in &claims {
            let _ = writeln!(
                h,
                "<tr><td class=\"label\">{}</td><td class=\"label\">{}</td><td class=\"label\">{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                esc(&c.text),
                esc(&c.engine),
                esc(&c.group),
                grouped_or_ratio(t.vary, c.from),
                grouped_or_ratio(t.vary, c.to) + if c.exact { "" } else { "*" },
                ratio(c.ours),
                ratio(c.paper)
            );
        }
        let _ = writeln!(
            h,
            "<caption>Ratio of the {} {} at the two rows (to / from); rows marked * are the widest span measured where the claim's own rows were not.</caption>\n</tbody>\n</table>",
            names[0],
            metric_name(t.metric)
        );
    }

    // Plots.
    h.push_str("<h2>Plots</h2>\n");
    let mut plotted = 0;
    for (id, caption, svg) in plots(dir, t)? {
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
    let _ = writeln!(
        h,
        "<h2>All points</h2>\n<details open>\n<summary>{} points</summary>\n<table id=\"points\">\n<thead><tr>{}</tr></thead>\n<tbody>",
        dir.points.len(),
        POINT_COLUMNS
            .iter()
            .map(|c| format!("<th>{}</th>", esc(c)))
            .collect::<String>()
    );
    for p in &dir.points {
        let cells = point_row(p);
        let _ = write!(h, "<tr><td class=\"label\">{}</td>", esc(&cells[0]));
        for c in &cells[1..] {
            let _ = write!(h, "<td>{}</td>", esc(c));
        }
        h.push_str("</tr>\n");
    }
    h.push_str("</tbody>\n</table>\n</details>\n</body>\n</html>\n");
    Ok(h)
}

fn grouped_or_ratio(vary: Vary, v: f64) -> String {
    match vary {
        Vary::ActiveRatio if v < 1.0 => format!("1/{}", grouped(1.0 / v)),
        _ => grouped(v),
    }
}

/// One plotted quantity of a point.
struct Value {
    name: &'static str,
    axis: &'static str,
    of: fn(&PointResult) -> Option<f64>,
}

const LATENCY_VALUES: [Value; 1] = [Value {
    name: "mean service latency",
    axis: "mean service latency (µs)",
    of: |p| Some(p.load.service_latency_us.mean),
}];

/// The polling paper's figures: time per polling call and per server cycle,
/// throughput, and the client's response time.
const POLL_VALUES: [Value; 5] = [
    Value {
        name: "CPU time per polling call (mean)",
        axis: "server thread CPU time per polling call (µs)",
        of: |p| server_stat(p, "poll_call_cpu_us", "mean"),
    },
    Value {
        name: "wall time per polling call (median)",
        axis: "wall time per polling call, median (µs)",
        of: |p| server_stat(p, "poll_call_us", "p50"),
    },
    Value {
        name: "mean time per server cycle",
        axis: "time per cycle: polling call + the I/O it reported (µs)",
        of: |p| server_stat(p, "cycle_us", "mean"),
    },
    Value {
        name: "throughput",
        axis: "responses per second",
        of: |p| Some(p.load.achieved_rate_per_s),
    },
    Value {
        name: "mean response time",
        axis: "mean response time at the client (µs)",
        of: |p| Some(p.load.service_latency_us.mean),
    },
];

/// The load-balancing experiments: backend CPU, response time and
/// throughput against the request rate, a line per gateway configuration.
const WEB_VALUES: [Value; 3] = [
    Value {
        name: "CPU per backend (mean over backends)",
        axis: "CPU per backend (share of one CPU)",
        of: |p| {
            let s = &p.backend_cpu_share;
            let used: Vec<f64> = s.iter().copied().filter(|c| *c > 0.0).collect();
            (!used.is_empty()).then(|| used.iter().sum::<f64>() / used.len() as f64)
        },
    },
    Value {
        name: "mean response time",
        axis: "mean response time at the client (µs)",
        of: |p| Some(p.load.service_latency_us.mean),
    },
    Value {
        name: "throughput",
        axis: "responses per second",
        of: |p| Some(p.load.achieved_rate_per_s),
    },
];

/// The plots: (id, caption, svg).
fn plots(dir: &SweepDir, t: &PaperTable) -> Result<Vec<(String, String, String)>, ReportError> {
    const MAX_PER_KIND: usize = 6;
    let mut out = Vec::new();
    // Latency against connections, and against the active ratio: a plot per
    // group of the other parameters, a line per engine.
    for (kind, x_desc, x_of, group_of) in [
        (
            "connections",
            "total connections",
            (|p: &PointResult| p.params.connections as f64) as fn(&PointResult) -> f64,
            (|p: &PointResult| {
                format!(
                    "ratio {} · {}",
                    p.params.active_ratio_label,
                    rate_text(p.params.rate_per_s)
                )
            }) as fn(&PointResult) -> String,
        ),
        (
            "ratio",
            "active ratio",
            |p: &PointResult| p.params.active_ratio,
            |p: &PointResult| {
                format!(
                    "{} conns · {}",
                    grouped(p.params.connections as f64),
                    rate_text(p.params.rate_per_s)
                )
            },
        ),
        (
            "rate",
            "offered request rate (req/s)",
            |p: &PointResult| p.params.rate_per_s,
            |p: &PointResult| {
                format!(
                    "{} conns · ratio {}",
                    grouped(p.params.connections as f64),
                    p.params.active_ratio_label
                )
            },
        ),
    ] {
        // Plots against the rate are the web experiments' (the paper's
        // CPU and response time against request rate).
        let web = dir.experiment.web.is_some();
        if (kind == "rate") != web {
            continue;
        }
        let mut groups: Vec<String> = dir.points.iter().map(group_of).collect();
        groups.sort();
        groups.dedup();
        // The polling-cost experiment plots the server's timings, the
        // throughput and the response time; the others plot latency.
        let values: &[Value] = if web {
            &WEB_VALUES
        } else if t.metric == connlab_lab::Metric::PollCall {
            if kind == "connections" {
                &POLL_VALUES
            } else {
                &POLL_VALUES[..1]
            }
        } else {
            &LATENCY_VALUES
        };
        for value in values {
            for group in groups.iter().take(MAX_PER_KIND) {
                let series: Vec<Series> = t
                    .engines
                    .iter()
                    .filter_map(|e| {
                        let mut by_x: BTreeMap<u64, (f64, f64, usize)> = BTreeMap::new();
                        for p in dir
                            .points
                            .iter()
                            .filter(|p| p.params.engine == *e && group_of(p) == *group)
                        {
                            let Some(y) = (value.of)(p) else { continue };
                            let x = x_of(p);
                            let slot = by_x.entry(x.to_bits()).or_insert((x, 0.0, 0));
                            slot.1 += y;
                            slot.2 += 1;
                        }
                        let mut points: Vec<(f64, f64)> = by_x
                            .values()
                            .map(|(x, s, n)| (*x, s / *n as f64))
                            .filter(|(_, y)| *y > 0.0)
                            .collect();
                        points.sort_by(|a, b| a.0.total_cmp(&b.0));
                        (points.len() >= 2).then(|| Series {
                            name: e.clone(),
                            points,
                        })
                    })
                    .collect();
                if series.is_empty() {
                    continue;
                }
                let title = format!("{} against {x_desc} ({group})", value.name);
                let svg = plots::log_log(&title, x_desc, value.axis, &series)?;
                let id = format!("{kind}-{}", out.len());
                let mut name = value.name.to_string();
                name[..1].make_ascii_uppercase();
                out.push((
                    id,
                    format!("{name} against {x_desc}, one line per engine, {group}; both axes logarithmic."),
                    svg,
                ));
            }
        }
    }
    if dir.experiment.web.is_some() {
        out.extend(backend_count_plots(dir)?);
    }
    // Closed loop has no send schedule: no deviation to plot.
    if dir.points.iter().all(|p| p.params.closed_loop()) {
        return Ok(out);
    }
    // CDF of send deviation: a plot per setting, a line per engine.
    for row in t.rows.iter().take(MAX_PER_KIND) {
        let series: Vec<Series> = t
            .engines
            .iter()
            .filter_map(|e| {
                let p = dir.points.iter().find(|p| {
                    p.params.engine == *e
                        && p.params.connections == row.connections
                        && p.params.active_ratio_label == row.active_ratio_label
                        && p.params.rate_per_s.to_bits() == row.rate_per_s.to_bits()
                })?;
                let points: Vec<(f64, f64)> = fine_deviation_cdf(p)
                    .iter()
                    .map(|c| (c.value_us, c.fraction))
                    .collect();
                (points.len() >= 2).then(|| Series {
                    name: e.clone(),
                    points,
                })
            })
            .collect();
        if series.is_empty() {
            continue;
        }
        // The central 98% of sends: a few outliers would squeeze the rest
        // into one pixel column (the table gives the maximum).
        let lo = series
            .iter()
            .filter_map(|s| s.points.iter().find(|p| p.1 >= 0.01).map(|p| p.0))
            .fold(f64::INFINITY, f64::min);
        let hi = series
            .iter()
            .filter_map(|s| s.points.iter().find(|p| p.1 >= 0.99).map(|p| p.0))
            .fold(f64::NEG_INFINITY, f64::max);
        let series: Vec<Series> = series
            .into_iter()
            .map(|s| Series {
                name: s.name,
                points: s
                    .points
                    .into_iter()
                    .map(|(x, y)| (x.clamp(lo, hi), y))
                    .collect(),
            })
            .collect();
        let title = format!("CDF of send deviation ({})", row.label);
        let svg = plots::linear(
            &title,
            "send deviation from the ideal schedule (µs), 1st to 99th percentile",
            "fraction of sends",
            &series,
            Some((0.0, 1.0)),
        )?;
        let id = format!("cdf-{}", out.len());
        out.push((
            id,
            format!("Cumulative distribution of each send's deviation from the evenly spaced schedule with the same mean (section 5.2), {}, one line per engine.", row.label),
            svg,
        ));
    }
    Ok(out)
}

/// The gateway's limit (web engines named `config:N`): throughput, traffic
/// and gateway CPU against the number of backends, a plot per rate, a line
/// per gateway configuration.
fn backend_count_plots(dir: &SweepDir) -> Result<Vec<(String, String, String)>, ReportError> {
    type Of = Box<dyn Fn(&PointResult) -> Option<f64>>;
    // The gateway's CPU as /proc/stat sees it: with nat, the kernel forwards
    // in softirq and the gateway process itself stays idle.
    let gateway_cpu: Option<usize> = dir
        .experiment
        .server
        .cpu
        .as_deref()
        .and_then(|c| c.split([',', '-']).next())
        .and_then(|c| c.trim().parse().ok());
    let mut values: Vec<(&str, String, Of)> = vec![
        (
            "throughput",
            "responses per second".into(),
            Box::new(|p: &PointResult| Some(p.load.achieved_rate_per_s)),
        ),
        (
            "traffic",
            "response traffic (Mbit/s)".into(),
            Box::new(|p: &PointResult| Some(p.load.throughput_mbit_s)),
        ),
        (
            "gateway process CPU",
            "gateway process CPU (share of one CPU)".into(),
            Box::new(|p: &PointResult| p.gateway_cpu_share),
        ),
    ];
    if let Some(cpu) = gateway_cpu {
        values.push((
            "busy share of the gateway's CPU",
            format!("CPU {cpu} busy (share, /proc/stat)"),
            Box::new(move |p: &PointResult| p.cpu_busy_share.get(cpu).copied()),
        ));
    }
    let counted: Vec<(&PointResult, &str, f64)> = dir
        .points
        .iter()
        .filter_map(|p| match connlab_lab::web_config(&p.params.engine) {
            Ok((config, Some(n))) => Some((p, config, f64::from(n))),
            _ => None,
        })
        .collect();
    let mut configs: Vec<&str> = counted.iter().map(|c| c.1).collect();
    configs.sort();
    configs.dedup();
    let mut rates: Vec<f64> = counted.iter().map(|c| c.0.params.rate_per_s).collect();
    rates.sort_by(f64::total_cmp);
    rates.dedup();
    let mut out = Vec::new();
    for rate in rates {
        for (value_name, axis, value_of) in &values {
            let series: Vec<Series> = configs
                .iter()
                .filter_map(|config| {
                    let mut by_x: BTreeMap<u64, (f64, f64, usize)> = BTreeMap::new();
                    for (p, _, n) in counted.iter().filter(|c| {
                        c.1 == *config && c.0.params.rate_per_s.to_bits() == rate.to_bits()
                    }) {
                        let Some(y) = value_of(p) else { continue };
                        let slot = by_x.entry(n.to_bits()).or_insert((*n, 0.0, 0));
                        slot.1 += y;
                        slot.2 += 1;
                    }
                    let points: Vec<(f64, f64)> =
                        by_x.values().map(|(x, s, n)| (*x, s / *n as f64)).collect();
                    (points.len() >= 2).then(|| Series {
                        name: config.to_string(),
                        points,
                    })
                })
                .collect();
            if series.is_empty() {
                continue;
            }
            let title = format!("{value_name} against backends ({})", rate_text(rate));
            let svg = plots::linear(&title, "backends", axis, &series, None)?;
            let mut name = value_name.to_string();
            name[..1].make_ascii_uppercase();
            out.push((
                format!("backends-{}", out.len()),
                format!(
                    "{name} against the number of backends, one line per gateway configuration, {}: where a line stops rising, the gateway (or the clients' CPU) is the limit.",
                    rate_text(rate)
                ),
                svg,
            ));
        }
    }
    Ok(out)
}

/// The send-deviation CDF at 0.5% steps from the point's histogram, or the
/// summary's coarse CDF when the histogram is missing or unreadable.
fn fine_deviation_cdf(p: &PointResult) -> Vec<connlab_measure::CdfPoint> {
    p.load
        .histograms
        .send_deviation
        .as_ref()
        .and_then(|parts| connlab_measure::DeviationHistogram::from_parts(parts).ok())
        .filter(|h| !h.is_empty())
        .map(|h| h.cdf(201))
        .unwrap_or_else(|| p.load.send_deviation_cdf.clone())
}

fn md_row(cells: &[String]) -> String {
    format!(
        "| {} |\n",
        cells
            .iter()
            .map(|c| c.replace('|', "\\|"))
            .collect::<Vec<_>>()
            .join(" | ")
    )
}

fn markdown(dir: &SweepDir, t: &PaperTable) -> String {
    let names = stat_names(t.metric);
    let mut m = format!("# {}\n\n", dir.experiment.title);
    if dir.points.is_empty() {
        m.push_str("No points finished yet.\n\n");
    }
    let _ = writeln!(m, "## {}: {} (µs)\n", t.table, metric_name(t.metric));
    let mut header = vec!["setting".to_string()];
    for e in &t.engines {
        for n in names {
            header.push(format!("{e} {n}"));
        }
    }
    m.push_str(&md_row(&header));
    m.push_str(&md_row(&vec!["---".to_string(); header.len()]));
    for row in &t.rows {
        let mut cells = vec![row.label.clone()];
        for c in &row.cells {
            for k in 0..3 {
                let ours = num(c.ours.and_then(|s| s.0[k]));
                cells.push(match c.paper.and_then(|s| s.0[k]) {
                    Some(p) => format!("{ours} ({})", num(Some(p))),
                    None => ours,
                });
            }
        }
        m.push_str(&md_row(&cells));
    }
    if let Some(p) = &dir.experiment.paper {
        let _ = writeln!(
            m,
            "\nPaper values in parentheses where the experiment file gives them. {}\n",
            p.note.trim().replace('\n', " ")
        );
    }
    let claims = t.claims(dir);
    if !claims.is_empty() {
        m.push_str("## The paper's claims against ours\n\n");
        m.push_str(&md_row(&[
            "claim".into(),
            "engine".into(),
            "rows of".into(),
            "from".into(),
            "to".into(),
            "ours".into(),
            "paper".into(),
        ]));
        m.push_str(&md_row(&vec!["---".to_string(); 7]));
        for c in &claims {
            m.push_str(&md_row(&[
                c.text.clone(),
                c.engine.clone(),
                c.group.clone(),
                grouped_or_ratio(t.vary, c.from),
                grouped_or_ratio(t.vary, c.to) + if c.exact { "" } else { "*" },
                ratio(c.ours),
                ratio(c.paper),
            ]));
        }
        m.push('\n');
    }
    m.push_str("## Environment\n\n| | |\n|---|---|\n");
    for (k, v) in environment(dir) {
        m.push_str(&md_row(&[k.to_string(), v]));
    }
    m.push_str("\n## Warnings\n\n");
    let ws = warnings(dir);
    if ws.is_empty() {
        m.push_str("none\n");
    }
    for (w, ids) in ws {
        let _ = writeln!(m, "- {w} ({}: {})", ids.len(), ids.join(", "));
    }
    m
}

/// Quotes a CSV field when it needs it.
fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

fn csv(t: &PaperTable) -> String {
    let metric = metric_name(t.metric).replace(' ', "_");
    let mut c = String::from("table,metric,row_label,connections,active_ratio,rate_per_s,engine,n,mean_us,median_us,stddev_us,max_us,paper_mean_us,paper_median_us,paper_stddev_us,paper_max_us\n");
    let f = |v: Option<f64>| v.map_or(String::new(), |v| format!("{v:.3}"));
    for row in &t.rows {
        for (e, cell) in t.engines.iter().zip(&row.cells) {
            // Map the three statistics onto mean/median/stddev/max columns.
            let pick = |s: Option<Stats>| -> [Option<f64>; 4] {
                let s = s.map(|s| s.0).unwrap_or([None; 3]);
                match t.metric {
                    connlab_lab::Metric::ServiceLatency => [s[0], s[1], s[2], None],
                    connlab_lab::Metric::SendDeviation => [None, s[1], s[0], s[2]],
                    connlab_lab::Metric::PollCall => [s[0], s[1], None, None],
                }
            };
            let ours = pick(cell.ours);
            let paper = pick(cell.paper);
            let fields: Vec<String> = [
                csv_field(&t.table),
                metric.clone(),
                csv_field(&row.label),
                row.connections.to_string(),
                format!("{}", row.active_ratio),
                format!("{}", row.rate_per_s),
                csv_field(e),
                cell.n.to_string(),
            ]
            .into_iter()
            .chain(ours.iter().map(|v| f(*v)))
            .chain(paper.iter().map(|v| f(*v)))
            .collect();
            c.push_str(&fields.join(","));
            c.push('\n');
        }
    }
    c
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
