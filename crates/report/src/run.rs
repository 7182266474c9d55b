//! The page of a `connlab run` comparison (`DIR/index.html`): the table of
//! rows with median, spread, ratio to the best and its interval, the
//! verdict, latency CDFs per row, server CPU per request, wake-ups and
//! memory per connection, every run with a link to its JSON, and the
//! placement and environment. The CLI measures and fills a [`RunPage`];
//! this module only lays it out.

use crate::export::{self, Block, Cell, Item, List, Page, Report, Table};
use crate::plots::{self, Series};
use crate::{Format, ReportError};
use connlab_lab::compare::{coverage_text, ratio_text, Better, Comparison, Figure, Standing};

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
th,td{border:1px solid #ccc;padding:.25rem .45rem;text-align:right}
th{background:#f3f3f3;vertical-align:bottom}td.label,th.label{text-align:left}
td.nowrap{white-space:nowrap}
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

/// The page as a report of blocks (HTML only: `connlab run` writes its
/// JSON beside it, so there are no CSV rows).
struct Run<'a>(&'a RunPage);

impl Report for Run<'_> {
    type Row = ();

    fn page(&self, _: Format) -> Result<Page, ReportError> {
        let page = self.0;
        let mut blocks = vec![
            Block::Commands {
                label: None,
                lines: vec![(None, page.command.clone())],
            },
            Block::Note(page.workload.clone()),
            Block::Note(format!("Placement: {}", page.placement)),
            Block::Heading("Verdict".into()),
            Block::List(List {
                class: Some("verdict"),
                items: page
                    .comparison
                    .verdict
                    .iter()
                    .cloned()
                    .map(Item::from)
                    .collect(),
                ..List::default()
            }),
        ];
        blocks.extend(comparison(&page.comparison));
        blocks.extend(latency(page)?);
        blocks.extend(runs(page));
        blocks.extend(validity(page));
        let mut facts = vec![("placement".to_string(), page.placement.clone())];
        facts.extend(page.environment.iter().cloned());
        blocks.push(Block::Heading("Placement and environment".into()));
        blocks.push(Block::Facts { id: None, facts });
        Ok(Page {
            title: page.title.clone(),
            description: String::new(),
            style: STYLE.into(),
            viewport: true,
            blocks,
        })
    }

    fn rows(&self) -> Result<Vec<()>, ReportError> {
        Ok(Vec::new())
    }
}

/// The comparison: how rows are ranked, a row each with its ratio to the
/// best and its standing, and what the server's figures are.
fn comparison(c: &Comparison) -> Vec<Block> {
    let closed = c.better == Better::Higher;
    let unit = if closed { "req/s" } else { "µs" };
    let digits = if closed { 0 } else { 1 };
    let rows = c
        .rows
        .iter()
        .enumerate()
        .map(|(i, r)| {
            [
                r.label.clone(),
                fig(&r.primary, 1.0, digits),
                r.ratio_to_best.map_or("—".into(), ratio_text),
                r.ratio_ci.map_or("—".into(), |(lo, hi)| {
                    format!(
                        "{}–{} ({})",
                        ratio_text(lo),
                        ratio_text(hi),
                        coverage_text(r.ratio_ci_coverage.unwrap_or(c.confidence))
                    )
                }),
                standing_text(r.standing).into(),
                fig(&r.cpu_us_per_request, 1.0, 1),
                fig(&r.wakeups_per_request, 1.0, 2),
                fig(&r.memory_per_connection_bytes, 1024.0, 2),
            ]
            .map(|t| Cell::from(t).strong(Some(i) == c.best))
            .to_vec()
        })
        .collect();
    vec![
        Block::Heading("Comparison".into()),
        Block::Note(format!(
            "Rows are ranked by {} ({unit}: {} is better): the median over \
             repetitions with the lowest and highest in brackets. The ratio to the best is taken in each \
             round (this row over the best of the same round) and the median of those is shown, with the \
             distribution-free interval of that median ({:.0}% where there are six rounds or more, else \
             the range of the rounds with the coverage it has). A row ties the best when its interval \
             includes 1 and differs when it does not. Rounds that failed their validity gates twice are \
             left out. The best row is in bold.",
            c.metric,
            if closed { "higher" } else { "lower" },
            c.confidence * 100.0,
        )),
        Block::Table(Table {
            head: vec![
                "row".into(),
                format!("{} ({unit})", c.metric),
                "ratio to best".into(),
                "interval (coverage)".into(),
                "standing".into(),
                "server CPU per request (µs)".into(),
                "wake-ups per request".into(),
                "memory per connection (KiB)".into(),
            ],
            rows,
            labels: 1,
            text_columns: vec![4],
            ..Table::default()
        }),
        Block::Note(
            "Server CPU per request: the server's CPU time over the run (its own \
             --stats for the engines, /proc/PID/stat of the process tree for a \
             server under test) divided by the responses completed, warm-up included. Wake-ups per \
             request: voluntary context switches (times the server slept and was woken) per response. \
             Memory per connection: the process tree's proportional set size with every connection open, \
             less the same before connecting, per connection (user-space memory only: socket buffers \
             and kernel stacks are not in it)."
                .into(),
        ),
    ]
}

/// The latency CDF of every row, if any row has one: clipped to the bulk
/// (at most the 99.5th percentile, which the caption states with the
/// tails left out).
fn latency(page: &RunPage) -> Result<Vec<Block>, ReportError> {
    let series: Vec<Series> = page
        .rows
        .iter()
        .filter(|r| r.cdf.len() >= 2)
        .map(|r| Series {
            name: r.label.clone(),
            points: r.cdf.clone(),
        })
        .collect();
    if series.is_empty() {
        return Ok(Vec::new());
    }
    let (series, clipped) = plots::bulk(series, 0.0, 0.995);
    let svg = plots::cdf(
        "Service latency CDF per row",
        "service latency (µs)",
        "fraction of requests",
        &series,
        &clipped.legend_notes(),
    )?;
    Ok(vec![
        Block::Heading("Latency".into()),
        Block::Figure {
            id: None,
            svg,
            caption: format!(
                "For each row, the repetition whose primary figure is nearest the row's median, \
                 from its lowest latency to at most its 99.5th percentile.{}",
                clipped.sentence("µs", "requests")
            ),
        },
    ])
}

/// Every run of every row, with a link to its JSON.
fn runs(page: &RunPage) -> Vec<Block> {
    let rows = page
        .rows
        .iter()
        .flat_map(|row| {
            row.runs.iter().map(move |run| {
                let mut cells: Vec<Cell> = [
                    row.label.clone(),
                    row.kind.clone(),
                    run.round.to_string(),
                    format!("{:.1}", run.p50_us),
                    format!("{:.1}", run.p99_us),
                    format!("{:.1}", run.achieved_per_s),
                    run.errors.to_string(),
                    num(run.cpu_us_per_request, 1),
                    num(run.wakeups_per_request, 2),
                    num(run.memory_per_connection_bytes.map(|b| b / 1024.0), 2),
                ]
                .map(Cell::from)
                .to_vec();
                cells.push(
                    Cell::from(run.file.clone().unwrap_or_else(|| "—".into()))
                        .link(run.file.clone()),
                );
                cells
            })
        })
        .collect();
    vec![
        Block::Heading("Runs".into()),
        Block::Table(Table {
            head: [
                "row",
                "what",
                "round",
                "p50 µs",
                "p99 µs",
                "achieved/s",
                "errors",
                "CPU µs/request",
                "wake-ups/request",
                "KiB/connection",
                "JSON",
            ]
            .map(String::from)
            .to_vec(),
            rows,
            labels: 2,
            text_columns: vec![10],
            ..Table::default()
        }),
    ]
}

/// The runs left out for failing their gates, and every run's warnings.
fn validity(page: &RunPage) -> Vec<Block> {
    let each = |f: &dyn Fn(&RunPageRun) -> Vec<String>| -> Vec<Item> {
        page.rows
            .iter()
            .flat_map(|r| {
                r.runs.iter().flat_map(move |run| {
                    f(run)
                        .into_iter()
                        .map(move |w| Item::from(format!("{} round {}: {w}", r.label, run.round)))
                })
            })
            .collect()
    };
    let invalid = each(&|run| run.invalid.iter().cloned().collect());
    let warnings = each(&|run| run.warnings.clone());
    let mut blocks = vec![Block::Heading("Validity".into())];
    if invalid.is_empty() {
        blocks.push(Block::Note("Every run kept passed its gates (completion, schedule, steal, foreign_cpu, arrivals, stationary).".into()));
    } else {
        blocks.push(Block::Note(
            "These runs failed their gates twice and are left out of the comparison:".into(),
        ));
        blocks.push(Block::List(List {
            items: invalid,
            ..List::default()
        }));
    }
    if !warnings.is_empty() {
        blocks.push(Block::Heading("Warnings".into()));
        blocks.push(Block::List(List {
            items: warnings,
            ..List::default()
        }));
    }
    blocks
}

/// Renders the page.
pub fn render_run(page: &RunPage) -> Result<String, ReportError> {
    export::export(&Run(page), Format::HTML)
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
