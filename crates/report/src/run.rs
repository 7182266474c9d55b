//! The page of a `connlab run` comparison (`DIR/index.html`): the table of
//! rows with median, spread, ratio to the best and its interval, the
//! verdict, latency CDFs per row, server CPU per request, wake-ups and
//! memory per connection, every run with a link to its JSON, and the
//! placement and environment. The CLI measures and fills a [`RunPage`];
//! this module only lays it out.

use crate::plots::{self, Series};
use crate::ReportError;
use connlab_lab::compare::{coverage_text, ratio_text, Better, Comparison, Figure, Standing};
use html_escape::{encode_double_quoted_attribute as attr, encode_text as esc};
use std::fmt::Write as _;

/// Everything the page shows.
#[derive(Clone, Debug)]
pub struct RunPage {
    /// Page title.
    pub title: String,
    /// The command line that made it.
    pub command: String,
    /// The workload in one line.
    pub workload: String,
    /// Where server and client ran.
    pub placement: String,
    /// Machine facts, name and value.
    pub environment: Vec<(String, String)>,
    /// The comparison, rows in the order of [`RunPage::rows`].
    pub comparison: Comparison,
    /// Per row: what it is, its CDF and its runs.
    pub rows: Vec<RunPageRow>,
}

/// One row of the page.
#[derive(Clone, Debug)]
pub struct RunPageRow {
    /// The row's name (as in the comparison).
    pub label: String,
    /// What it is (an engine, a server under test at ADDR).
    pub kind: String,
    /// The round whose CDF is shown (the one nearest the row's median).
    pub cdf_round: Option<u32>,
    /// Service latency CDF of that round: (microseconds, fraction).
    pub cdf: Vec<(f64, f64)>,
    /// Every run of the row.
    pub runs: Vec<RunPageRun>,
}

/// One run of a row.
#[derive(Clone, Debug)]
pub struct RunPageRun {
    /// Round, from 1.
    pub round: u32,
    /// Its JSON, relative to the page.
    pub file: Option<String>,
    /// Median service latency, microseconds.
    pub p50_us: f64,
    /// 99th percentile, microseconds.
    pub p99_us: f64,
    /// Achieved requests per second.
    pub achieved_per_s: f64,
    /// Errors in the measured window.
    pub errors: u64,
    /// Server CPU microseconds per request.
    pub cpu_us_per_request: Option<f64>,
    /// Server wake-ups per request.
    pub wakeups_per_request: Option<f64>,
    /// Server memory per connection, bytes.
    pub memory_per_connection_bytes: Option<f64>,
    /// The run's warnings.
    pub warnings: Vec<String>,
    /// The gates it failed, when it is invalid (then it is no sample of
    /// the comparison).
    pub invalid: Option<String>,
}

const STYLE: &str = "
body{font-family:system-ui,-apple-system,'Segoe UI',Roboto,sans-serif;margin:2rem auto;max-width:1100px;color:#222;padding:0 1rem}
h1{font-size:1.5rem}h2{font-size:1.2rem;margin-top:2rem;border-bottom:1px solid #ddd}
table{border-collapse:collapse;margin:.5rem 0;font-size:.85rem}
th,td{border:1px solid #ccc;padding:.25rem .45rem;text-align:right;white-space:nowrap}
th{background:#f3f3f3}td.label,th.label{text-align:left;white-space:normal}
tr.best td{font-weight:600}
figure.plot{margin:.5rem 0}
figure.plot svg{max-width:100%;height:auto}
figcaption{font-size:.8rem;color:#555;max-width:720px}
.note{font-size:.85rem;color:#444;max-width:900px}
ul.verdict li{margin:.2rem 0}
code{font-size:.8rem;word-break:break-all}
";

fn num(v: Option<f64>, digits: usize) -> String {
    v.filter(|v| v.is_finite())
        .map_or("—".into(), |v| format!("{v:.digits$}"))
}

fn fig(f: &Option<Figure>, scale: f64, digits: usize) -> String {
    match f {
        None => "—".into(),
        Some(f) if f.n < 2 => format!("{:.digits$}", f.median / scale),
        Some(f) => format!(
            "{:.digits$} ({:.digits$}–{:.digits$})",
            f.median / scale,
            f.min / scale,
            f.max / scale
        ),
    }
}

fn standing_text(s: Standing) -> &'static str {
    match s {
        Standing::Best => "best",
        Standing::TiesBest => "ties the best",
        Standing::Differs => "differs",
        Standing::Unjudged => "not judged (one repetition)",
        Standing::NotMeasured => "no result",
    }
}

/// Renders the page.
pub fn render_run(page: &RunPage) -> Result<String, ReportError> {
    let c = &page.comparison;
    let mut h = format!(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<meta name=\"viewport\" content=\"width=device-width\">\n<title>{t}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n<h1>{t}</h1>\n",
        t = esc(&page.title)
    );
    let _ = writeln!(
        h,
        "<p class=\"note\"><code>{}</code></p>\n<p class=\"note\">{}</p>\n<p class=\"note\">Placement: {}</p>",
        esc(&page.command),
        esc(&page.workload),
        esc(&page.placement)
    );

    h.push_str("<h2>Verdict</h2>\n<ul class=\"verdict\">\n");
    for line in &c.verdict {
        let _ = writeln!(h, "<li>{}</li>", esc(line));
    }
    h.push_str("</ul>\n");

    let closed = c.better == Better::Higher;
    let unit = if closed { "req/s" } else { "µs" };
    let _ = writeln!(
        h,
        "<h2>Comparison</h2>\n<p class=\"note\">Rows are ranked by {} ({}: {} is better): the median over \
         repetitions with the lowest and highest in brackets. The ratio to the best is taken in each \
         round (this row over the best of the same round) and the median of those is shown, with the \
         distribution-free interval of that median ({:.0}% where there are six rounds or more, else \
         the range of the rounds with the coverage it has). A row ties the best when its interval \
         includes 1 and differs when it does not. Rounds that failed their validity gates twice are \
         left out.</p>",
        esc(&c.metric),
        unit,
        if closed { "higher" } else { "lower" },
        c.confidence * 100.0,
    );
    let _ = writeln!(
        h,
        "<table>\n<tr><th class=\"label\">row</th><th>{} ({unit})</th><th>ratio to best</th><th>interval (coverage)</th><th class=\"label\">standing</th><th>server CPU per request (µs)</th><th>wake-ups per request</th><th>memory per connection (KiB)</th></tr>",
        esc(&c.metric),
    );
    for (i, r) in c.rows.iter().enumerate() {
        let class = if Some(i) == c.best {
            " class=\"best\""
        } else {
            ""
        };
        let digits = if closed { 0 } else { 1 };
        let _ = writeln!(
            h,
            "<tr{class}><td class=\"label\">{}</td><td>{}</td><td>{}</td><td>{}</td><td class=\"label\">{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(&r.label),
            fig(&r.primary, 1.0, digits),
            r.ratio_to_best.map_or("—".into(), ratio_text),
            r.ratio_ci.map_or("—".into(), |(lo, hi)| format!(
                "{}–{} ({})",
                ratio_text(lo),
                ratio_text(hi),
                coverage_text(r.ratio_ci_coverage.unwrap_or(c.confidence))
            )),
            standing_text(r.standing),
            fig(&r.cpu_us_per_request, 1.0, 1),
            fig(&r.wakeups_per_request, 1.0, 2),
            fig(&r.memory_per_connection_bytes, 1024.0, 2),
        );
    }
    h.push_str("</table>\n");
    h.push_str(
        "<p class=\"note\">Server CPU per request: the server's CPU time over the run (its own \
         <code>--stats</code> for the engines, <code>/proc/PID/stat</code> of the process tree for a \
         server under test) divided by the responses completed, warm-up included. Wake-ups per \
         request: voluntary context switches (times the server slept and was woken) per response. \
         Memory per connection: the process tree's proportional set size with every connection open, \
         less the same before connecting, per connection (user-space memory only: socket buffers \
         and kernel stacks are not in it).</p>\n",
    );

    let series: Vec<Series> = page
        .rows
        .iter()
        .filter(|r| !r.cdf.is_empty())
        .map(|r| Series {
            name: r.label.clone(),
            // The top 0.5% would stretch the axis over the tail.
            points: r.cdf.iter().copied().filter(|(_, f)| *f <= 0.995).collect(),
        })
        .filter(|s| !s.points.is_empty())
        .collect();
    if !series.is_empty() {
        let svg = plots::cdf(
            "Service latency CDF per row",
            "service latency (µs)",
            "fraction of requests",
            &series,
        )?;
        let _ = writeln!(
            h,
            "<h2>Latency</h2>\n<figure class=\"plot\">{svg}<figcaption>For each row, the repetition whose \
             primary figure is nearest the row's median, up to the 99.5th percentile.</figcaption></figure>"
        );
    }

    h.push_str("<h2>Runs</h2>\n<table>\n<tr><th class=\"label\">row</th><th class=\"label\">what</th><th>round</th><th>p50 µs</th><th>p99 µs</th><th>achieved/s</th><th>errors</th><th>CPU µs/request</th><th>wake-ups/request</th><th>KiB/connection</th><th class=\"label\">JSON</th></tr>\n");
    for row in &page.rows {
        for run in &row.runs {
            let link = run.file.as_deref().map_or("—".into(), |f| {
                format!("<a href=\"{}\">{}</a>", attr(f), esc(f))
            });
            let _ = writeln!(
                h,
                "<tr><td class=\"label\">{}</td><td class=\"label\">{}</td><td>{}</td><td>{:.1}</td><td>{:.1}</td><td>{:.1}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td class=\"label\">{link}</td></tr>",
                esc(&row.label),
                esc(&row.kind),
                run.round,
                run.p50_us,
                run.p99_us,
                run.achieved_per_s,
                run.errors,
                num(run.cpu_us_per_request, 1),
                num(run.wakeups_per_request, 2),
                num(run.memory_per_connection_bytes.map(|b| b / 1024.0), 2),
            );
        }
    }
    h.push_str("</table>\n");
    let warnings: Vec<String> = page
        .rows
        .iter()
        .flat_map(|r| {
            r.runs.iter().flat_map(move |run| {
                run.warnings
                    .iter()
                    .map(move |w| format!("{} round {}: {w}", r.label, run.round))
            })
        })
        .collect();
    let invalid: Vec<String> = page
        .rows
        .iter()
        .flat_map(|r| {
            r.runs.iter().filter_map(move |run| {
                run.invalid
                    .as_ref()
                    .map(|w| format!("{} round {}: {w}", r.label, run.round))
            })
        })
        .collect();
    h.push_str("<h2>Validity</h2>\n");
    if invalid.is_empty() {
        h.push_str("<p class=\"note\">Every run kept passed its gates (completion, schedule, steal, foreign_cpu, arrivals, stationary).</p>\n");
    } else {
        h.push_str("<p class=\"note\">These runs failed their gates twice and are left out of the comparison:</p>\n<ul>\n");
        for w in &invalid {
            let _ = writeln!(h, "<li>{}</li>", esc(w));
        }
        h.push_str("</ul>\n");
    }
    if !warnings.is_empty() {
        h.push_str("<h2>Warnings</h2>\n<ul>\n");
        for w in &warnings {
            let _ = writeln!(h, "<li>{}</li>", esc(w));
        }
        h.push_str("</ul>\n");
    }

    h.push_str("<h2>Placement and environment</h2>\n<table>\n");
    let _ = writeln!(
        h,
        "<tr><th class=\"label\">placement</th><td class=\"label\">{}</td></tr>",
        esc(&page.placement)
    );
    for (k, v) in &page.environment {
        let _ = writeln!(
            h,
            "<tr><th class=\"label\">{}</th><td class=\"label\">{}</td></tr>",
            esc(k),
            esc(v)
        );
    }
    h.push_str("</table>\n</body>\n</html>\n");
    Ok(h)
}

#[cfg(test)]
mod tests {
    use super::*;
    use connlab_lab::compare::{compare, RowSamples, CONFIDENCE};

    fn page() -> RunPage {
        let rows = [("epoll", [50.0, 52.0]), ("select", [90.0, 95.0])];
        let samples: Vec<RowSamples> = rows
            .iter()
            .map(|(l, v)| RowSamples {
                label: (*l).into(),
                primary: v.iter().map(|x| Some(*x)).collect(),
                cpu_us_per_request: vec![Some(10.0); 2],
                wakeups_per_request: vec![Some(0.5); 2],
                memory_per_connection_bytes: vec![Some(512.0); 2],
            })
            .collect();
        RunPage {
            title: "connlab run".into(),
            command: "connlab run --engines epoll,select <x>".into(),
            workload: "100 connections".into(),
            placement: "server on cpu 1, client on cpu 0".into(),
            environment: vec![("kernel".into(), "Linux 6".into())],
            comparison: compare(
                "median service latency",
                Better::Lower,
                &samples,
                CONFIDENCE,
            ),
            rows: rows
                .iter()
                .map(|(l, v)| RunPageRow {
                    label: (*l).into(),
                    kind: "connlab serve engine".into(),
                    cdf_round: Some(1),
                    cdf: vec![(v[0] * 0.5, 0.1), (v[0], 0.5), (v[1] * 2.0, 1.0)],
                    runs: vec![RunPageRun {
                        round: 1,
                        file: Some(format!("runs/r1-{l}.json")),
                        p50_us: v[0],
                        p99_us: v[1],
                        achieved_per_s: 1000.0,
                        errors: 0,
                        cpu_us_per_request: Some(10.0),
                        wakeups_per_request: Some(0.5),
                        memory_per_connection_bytes: None,
                        warnings: vec![],
                        invalid: None,
                    }],
                })
                .collect(),
        }
    }

    #[test]
    fn shows_table_verdict_plot_runs_and_placement() {
        let html = render_run(&page()).expect("renders");
        assert!(html.contains("<h2>Verdict</h2>"));
        assert!(html.contains("select at"), "verdict names the slower row");
        assert!(html.contains("<svg"), "a CDF plot");
        assert!(html.contains("href=\"runs/r1-select.json\""));
        assert!(html.contains("server on cpu 1, client on cpu 0"));
        assert!(html.contains("&lt;x&gt;"), "the command is escaped");
        assert!(html.trim_end().ends_with("</html>"));
    }
}
