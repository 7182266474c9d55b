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
        let c = &page.comparison;
        // In brief: a sentence per comparison, the recommendation, the
        // ranked table and the latency CDF; the detail after.
        let mut lead = Vec::new();
        if !c.lines.is_empty() {
            lead.push(Block::List(List {
                class: Some("verdict"),
                items: c.lines.iter().cloned().map(Item::from).collect(),
                ..List::default()
            }));
        }
        if let Some(r) = &c.recommendation {
            let why = if r.reasons.is_empty() {
                String::new()
            } else {
                format!(": {}", r.reasons.join("; "))
            };
            lead.push(Block::Note(format!(
                "Recommendation: {} (confidence {}{why}).",
                r.text,
                r.confidence.name()
            )));
        }
        let explain = if c.lines.is_empty() {
            &c.verdict
        } else {
            &c.explanations
        };
        if !explain.is_empty() {
            lead.push(Block::List(List {
                class: Some("verdict"),
                items: explain.iter().cloned().map(Item::from).collect(),
                ..List::default()
            }));
        }
        lead.push(comparison_table(c));
        let mut blocks = crate::brief::section(lead, &[], "comparison", latency(page)?);
        blocks.extend(comparison_notes(c));
        blocks.push(Block::Heading("Workload".into()));
        blocks.push(Block::Note(page.workload.clone()));
        blocks.push(Block::Commands {
            label: Some("Made by".into()),
            lines: vec![(None, crate::summary::user_command(&page.command, ""))],
        });
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

/// Row indices from best to worst: the comparison's ranking, or the
/// order given when it has none (a comparison saved before ranking).
fn ranked(c: &Comparison) -> Vec<usize> {
    if c.ranking.len() == c.rows.len() {
        c.ranking.clone()
    } else {
        (0..c.rows.len()).collect()
    }
}

/// The unit of the primary figure and its digits.
fn primary_unit(c: &Comparison) -> (&'static str, usize) {
    if c.better == Better::Higher {
        ("req/s", 0)
    } else {
        ("µs", 1)
    }
}

/// The comparison table: a row each, best first, with its ratio to the
/// best and its standing.
fn comparison_table(c: &Comparison) -> Block {
    let (unit, digits) = primary_unit(c);
    let rows = ranked(c)
        .into_iter()
        .filter_map(|i| c.rows.get(i).map(|r| (i, r)))
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
    })
}

/// How the comparison table reads.
fn comparison_notes(c: &Comparison) -> Vec<Block> {
    let (unit, _) = primary_unit(c);
    vec![
        Block::Heading("How the comparison reads".into()),
        Block::Note(format!(
            "Rows are ranked by {} ({unit}: {} is better), best first: the median over \
             repetitions with the lowest and highest in brackets. The ratio to the best is taken in each \
             round (this row over the best of the same round) and the median of those is shown, with the \
             distribution-free interval of that median ({:.0}% where there are six rounds or more, else \
             the range of the rounds with the coverage it has). A row ties the best when its interval \
             includes 1 and differs when it does not. Rounds that failed their validity gates twice are \
             left out. The best row is in bold.",
            c.metric,
            if c.better == Better::Higher {
                "higher"
            } else {
                "lower"
            },
            c.confidence * 100.0,
        )),
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

/// The latency CDF of every row, if any row has one (the page's key
/// plot): clipped to the bulk (at most the 99.5th percentile, which the
/// caption states with the tails left out).
fn latency(page: &RunPage) -> Result<Option<Block>, ReportError> {
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
        return Ok(None);
    }
    let (series, clipped) = plots::bulk(series, 0.0, 0.995);
    let svg = plots::cdf(
        "Service latency CDF per row",
        "service latency (µs)",
        "fraction of requests",
        &series,
        &clipped.legend_notes(),
    )?;
    Ok(Some(Block::Figure {
        id: None,
        svg,
        caption: format!(
            "For each row, the repetition whose primary figure is nearest the row's median, \
             from its lowest latency to at most its 99.5th percentile.{}",
            clipped.sentence("µs", "requests")
        ),
    }))
}

/// Every run of every row, with a link to its JSON.
fn runs(page: &RunPage) -> Vec<Block> {
    let rows = ranked(&page.comparison)
        .into_iter()
        .filter_map(|i| page.rows.get(i))
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
    // Each warning with the runs that raised it, for the tally.
    let mut warnings: Vec<(String, Vec<String>)> = Vec::new();
    for r in &page.rows {
        for run in &r.runs {
            for w in &run.warnings {
                let who = format!("{} round {}", r.label, run.round);
                match warnings.iter_mut().find(|(t, _)| t == w) {
                    Some((_, runs)) => runs.push(who),
                    None => warnings.push((w.clone(), vec![who])),
                }
            }
        }
    }
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
        blocks.extend(crate::tally::blocks(warnings, "runs"));
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
    fn rows_come_best_first_whatever_the_order_given() {
        let mut p = page();
        p.rows.reverse();
        let rows = [("select", [90.0, 95.0]), ("epoll", [50.0, 52.0])];
        let samples: Vec<RowSamples> = rows
            .iter()
            .map(|(l, v)| RowSamples {
                label: (*l).into(),
                primary: v.iter().map(|x| Some(*x)).collect(),
                cpu_us_per_request: vec![Some(10.0); 2],
                wakeups_per_request: vec![Some(0.5); 2],
                memory_per_connection_bytes: vec![None; 2],
            })
            .collect();
        p.comparison = compare(
            "median service latency",
            Better::Lower,
            &samples,
            CONFIDENCE,
        );
        let html = render_run(&p).expect("renders");
        let brief = &html[..html.find("How the comparison reads").unwrap_or(html.len())];
        let (epoll, select) = (
            brief
                .find("<td class=\"label\"><strong>epoll")
                .unwrap_or(usize::MAX),
            brief.find("<td class=\"label\">select").unwrap_or(0),
        );
        assert!(epoll < select, "{brief}");
        // No row measured memory: the column is left out.
        assert!(!brief.contains("memory per connection (KiB)"), "{brief}");
    }

    #[test]
    fn shows_table_verdict_plot_runs_and_placement() {
        let html = render_run(&page()).expect("renders");
        assert!(html.contains("<h2 id=\"in-brief\">In brief</h2>"));
        let p = page();
        let line = p.comparison.lines.first().expect("a line per comparison");
        assert!(html.contains(&*html_escape::encode_text(line)), "{html}");
        assert!(html.contains("<svg"), "a CDF plot");
        assert!(html.contains("href=\"runs/r1-select.json\""));
        assert!(html.contains("server on cpu 1, client on cpu 0"));
        assert!(html.contains("&lt;x&gt;"), "the command is escaped");
        assert!(html.trim_end().ends_with("</html>"));
    }
}
