//! Reports of pipeline sweeps (`DIR/pipeline.json`): the fifth paper's
//! tables, one per line and message size, layers down, each mode across with
//! measured and projected throughput, relative capacity and efficiency, the
//! paper's values beside them; plots of efficiency and throughput against
//! layers; the per-layer costs of the largest runs.

use crate::plots::{self, Series};
use crate::{iso, page_start, Format, ReportError};
use connlab_lab::{PipelineRunRecord, PipelineSweep};
use html_escape::encode_text as esc;
use std::fmt::Write as _;

/// Renders the report of a pipeline sweep.
pub fn render_pipeline(sweep: &PipelineSweep, format: Format) -> Result<String, ReportError> {
    Ok(match format {
        Format::Csv => sweep.csv(),
        Format::Markdown => markdown(sweep),
        Format::Html => html(sweep)?,
    })
}

/// Median of a value over a group's repetitions (robust to the odd run a
/// busy machine disturbed; the mean of the middle two for an even count).
fn median(
    runs: &[&PipelineRunRecord],
    of: impl Fn(&PipelineRunRecord) -> Option<f64>,
) -> Option<f64> {
    let mut v: Vec<f64> = runs.iter().filter_map(|r| of(r)).collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    Some(if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    })
}

fn f(v: Option<f64>, digits: usize) -> String {
    v.map_or("—".into(), |v| format!("{v:.digits$}"))
}

/// A table row: layers; per mode, the six [`FIGURES`]; the paper's
/// relative capacity and efficiency.
type TableRow = (u32, Vec<[Option<f64>; 6]>, [Option<f64>; 2]);

/// One table: a line, a message size and a message count.
struct Table {
    link: String,
    size: u64,
    messages: u64,
    modes: Vec<String>,
    /// Per layer count: per mode, the six figures; then the paper's.
    rows: Vec<TableRow>,
}

const FIGURES: [&str; 6] = [
    "Mbit/s",
    "rel. cap.",
    "eff.",
    "proj. Mbit/s",
    "proj. rel. cap.",
    "proj. eff.",
];

fn tables(sweep: &PipelineSweep) -> Vec<Table> {
    let exp = &sweep.experiment;
    let mut keys: Vec<(String, u64, u64)> = Vec::new();
    let mut modes: Vec<String> = Vec::new();
    let mut layers: Vec<u32> = Vec::new();
    for r in &sweep.runs {
        let k = (
            r.params.link.label(),
            r.params.message_size,
            r.params.messages,
        );
        if !keys.contains(&k) {
            keys.push(k);
        }
        if !modes.contains(&r.params.mode) {
            modes.push(r.params.mode.clone());
        }
        if !layers.contains(&r.params.layers) {
            layers.push(r.params.layers);
        }
    }
    layers.sort_unstable();
    keys.into_iter()
        .map(|(link, size, messages)| {
            let rows = layers
                .iter()
                .map(|&l| {
                    let cells = modes
                        .iter()
                        .map(|m| {
                            let runs: Vec<&PipelineRunRecord> = sweep
                                .runs
                                .iter()
                                .filter(|r| {
                                    r.params.link.label() == link
                                        && r.params.message_size == size
                                        && r.params.messages == messages
                                        && r.params.layers == l
                                        && r.params.mode == *m
                                })
                                .collect();
                            [
                                median(&runs, |r| Some(r.result.throughput_mbit_s)),
                                median(&runs, |r| r.relative_capacity),
                                median(&runs, |r| r.efficiency),
                                median(&runs, |r| Some(r.result.projected_throughput_mbit_s)),
                                median(&runs, |r| r.projected_relative_capacity),
                                median(&runs, |r| r.projected_efficiency),
                            ]
                        })
                        .collect();
                    let paper = exp.paper_value(size, l);
                    (
                        l,
                        cells,
                        [
                            paper.and_then(|p| p.relative_capacity),
                            paper.and_then(|p| p.efficiency),
                        ],
                    )
                })
                .collect();
            Table {
                link,
                size,
                messages,
                modes: modes.clone(),
                rows,
            }
        })
        .collect()
}

fn size_text(bytes: u64) -> String {
    if bytes.is_multiple_of(1024) {
        format!("{} KiB", bytes / 1024)
    } else {
        format!("{bytes} B")
    }
}

fn summary_lines(sweep: &PipelineSweep) -> Vec<(String, String)> {
    let e = &sweep.environment;
    let m = &sweep.experiment.pipeline;
    let verified = sweep.runs.iter().filter(|r| r.result.verified).count();
    let retx: u64 = sweep.runs.iter().map(|r| r.result.retransmissions).sum();
    let handoff = median(&sweep.runs.iter().collect::<Vec<_>>(), |r| {
        Some(r.result.handoff_ns)
    });
    vec![
        (
            "runs".into(),
            format!(
                "{} of {} finished{}; {verified} verified (every message once, in order, intact, stream checksums equal)",
                sweep.runs.len(),
                sweep.runs_total,
                if sweep.quick { " (quick matrix)" } else { "" }
            ),
        ),
        (
            "messages per run".into(),
            {
                let mut counts: Vec<u64> = sweep.runs.iter().map(|r| r.params.messages).collect();
                counts.sort_unstable();
                counts.dedup();
                let counts: Vec<String> = counts.iter().map(u64::to_string).collect();
                counts.join(", ")
            },
        ),
        (
            "window, loss, run-to-completion threads".into(),
            format!(
                "{} PDUs per layer, {}, {}",
                m.window.map_or("default (32)".into(), |w| w.to_string()),
                m.loss,
                m.rtc_threads
            ),
        ),
        ("retransmissions (all runs)".into(), retx.to_string()),
        (
            "SPSC hand-off (measured per run, median)".into(),
            format!("{} ns", f(handoff, 1)),
        ),
        (
            "machine".into(),
            format!(
                "{}, {} CPUs (affinity {}), clock {}",
                e.kernel, e.cpu_count, e.cpu_affinity, e.clock_source
            ),
        ),
        (
            "CPU placement".into(),
            m.cpu_map
                .clone()
                .map_or("threads not pinned (the scheduler places them)".into(), |c| {
                    format!("threads pinned round robin to CPUs {c}")
                }),
        ),
        ("started".into(), iso(sweep.started_unix_s)),
    ]
}

const NOTE: &str = "Every figure is the median over the repetitions. Relative capacity = throughput × layers / the one-layer throughput of the same mode, line, size and repetition; efficiency = relative capacity / layers (the paper's definitions). Measured figures come from this machine, where all layer threads share its CPUs; projected figures assume one core per thread: the slowest stage's busy time per message plus one SPSC hand-off bounds the rate (and the line rate, when limited). The paper's values are given where known.";

fn markdown(sweep: &PipelineSweep) -> String {
    let exp = &sweep.experiment;
    let mut s = format!("# {}\n\n", exp.title);
    if !exp.description.trim().is_empty() {
        s += &format!("{}\n\n", exp.description.trim());
    }
    for (k, v) in summary_lines(sweep) {
        s += &format!("- {k}: {v}\n");
    }
    s += &format!("\n{NOTE}\n");
    for t in tables(sweep) {
        s += &format!(
            "\n## {}, {} messages × {}\n\n| layers |",
            t.link,
            size_text(t.size),
            t.messages
        );
        for m in &t.modes {
            for fig in FIGURES {
                s += &format!(" {m} {fig} |");
            }
        }
        s += " paper rel. cap. | paper eff. |\n|---|";
        for _ in 0..t.modes.len() * FIGURES.len() + 2 {
            s += "---|";
        }
        s += "\n";
        for (l, cells, paper) in &t.rows {
            s += &format!("| {l} |");
            for c in cells {
                for (i, v) in c.iter().enumerate() {
                    s += &format!(" {} |", f(*v, if i % 3 == 0 { 1 } else { 2 }));
                }
            }
            s += &format!(" {} | {} |\n", f(paper[0], 2), f(paper[1], 2));
        }
    }
    s
}

fn plots_of(sweep: &PipelineSweep) -> Result<Vec<(String, String)>, ReportError> {
    let mut out = Vec::new();
    let mut links: Vec<String> = sweep.runs.iter().map(|r| r.params.link.label()).collect();
    links.dedup();
    links.sort();
    links.dedup();
    type Of = fn(&PipelineRunRecord) -> Option<f64>;
    let figures: [(&str, &str, Of); 3] = [
        (
            "efficiency",
            "efficiency (relative capacity / layers)",
            |r| r.efficiency,
        ),
        (
            "projected efficiency",
            "projected efficiency, one core per thread",
            |r| r.projected_efficiency,
        ),
        ("throughput", "measured throughput (Mbit/s)", |r| {
            Some(r.result.throughput_mbit_s)
        }),
    ];
    // The plots use the longest runs (the most messages): the stable numbers.
    let messages = sweep
        .runs
        .iter()
        .map(|r| r.params.messages)
        .max()
        .unwrap_or(0);
    for link in &links {
        for (name, axis, of) in &figures {
            let mut series_keys: Vec<(String, u64)> = Vec::new();
            for r in sweep.runs.iter().filter(|r| r.params.link.label() == *link) {
                let k = (r.params.mode.clone(), r.params.message_size);
                if !series_keys.contains(&k) {
                    series_keys.push(k);
                }
            }
            let series: Vec<Series> = series_keys
                .iter()
                .filter_map(|(mode, size)| {
                    let mut layers: Vec<u32> = sweep
                        .runs
                        .iter()
                        .filter(|r| r.params.mode == *mode && r.params.message_size == *size)
                        .map(|r| r.params.layers)
                        .collect();
                    layers.sort_unstable();
                    layers.dedup();
                    let points: Vec<(f64, f64)> = layers
                        .iter()
                        .filter_map(|&l| {
                            let runs: Vec<&PipelineRunRecord> = sweep
                                .runs
                                .iter()
                                .filter(|r| {
                                    r.params.link.label() == *link
                                        && r.params.mode == *mode
                                        && r.params.message_size == *size
                                        && r.params.messages == messages
                                        && r.params.layers == l
                                })
                                .collect();
                            median(&runs, of).map(|v| (f64::from(l), v))
                        })
                        .collect();
                    (points.len() >= 2).then(|| Series {
                        name: format!("{mode} {}", size_text(*size)),
                        points,
                    })
                })
                .collect();
            if series.is_empty() {
                continue;
            }
            let title = format!("{name} against layers ({link})");
            let svg = plots::linear(&title, "layers per side", axis, &series, None)?;
            out.push((
                format!("{name} against the number of layers over the {link} line, {messages} messages per run, one line per mode and message size."),
                svg,
            ));
        }
    }
    Ok(out)
}

fn html(sweep: &PipelineSweep) -> Result<String, ReportError> {
    let exp = &sweep.experiment;
    let mut h = page_start(&exp.title, &exp.description);
    h.push_str("<table>\n");
    for (k, v) in summary_lines(sweep) {
        let _ = writeln!(
            h,
            "<tr><th class=\"label\">{}</th><td class=\"label\">{}</td></tr>",
            esc(&k),
            esc(&v)
        );
    }
    h.push_str("</table>\n");
    let _ = writeln!(h, "<p class=\"note\">{}</p>", esc(NOTE));
    for t in tables(sweep) {
        let _ = writeln!(
            h,
            "<h2>{}, {} messages × {}</h2>\n<div class=\"scroll\"><table>\n<thead><tr><th class=\"label\" rowspan=\"2\">layers</th>",
            esc(&t.link),
            size_text(t.size),
            t.messages
        );
        for m in &t.modes {
            let _ = write!(h, "<th colspan=\"6\">{}</th>", esc(m));
        }
        h.push_str("<th colspan=\"2\">paper</th></tr>\n<tr>");
        for _ in &t.modes {
            for fig in FIGURES {
                let _ = write!(h, "<th>{fig}</th>");
            }
        }
        h.push_str("<th>rel. cap.</th><th>eff.</th></tr></thead>\n<tbody>\n");
        for (l, cells, paper) in &t.rows {
            let _ = write!(h, "<tr><td class=\"label\">{l}</td>");
            for c in cells {
                for (i, v) in c.iter().enumerate() {
                    let _ = write!(h, "<td>{}</td>", f(*v, if i % 3 == 0 { 1 } else { 2 }));
                }
            }
            let _ = writeln!(
                h,
                "<td class=\"paper\">{}</td><td class=\"paper\">{}</td></tr>",
                f(paper[0], 2),
                f(paper[1], 2)
            );
        }
        h.push_str("</tbody></table></div>\n");
    }
    let plots = plots_of(sweep)?;
    if !plots.is_empty() {
        h.push_str("<h2>Plots</h2>\n");
        for (caption, svg) in plots {
            let _ = writeln!(
                h,
                "<figure class=\"plot\">{svg}<figcaption>{}</figcaption></figure>",
                esc(&caption)
            );
        }
    }
    // Per-layer costs of the run with the most layers per table key.
    h.push_str("<h2>Per-layer costs (runs with the most layers)</h2>\n<div class=\"scroll\"><table>\n<thead><tr><th class=\"label\">run</th><th>side</th><th>layer</th><th>CPU ns/msg</th><th>busy ns/msg (capped)</th><th>busy ns/msg (raw)</th><th>queue mean</th><th>queue max</th><th>retransmissions</th><th>CPU</th></tr></thead>\n<tbody>\n");
    let most = sweep
        .runs
        .iter()
        .map(|r| r.params.layers)
        .max()
        .unwrap_or(0);
    for r in sweep
        .runs
        .iter()
        .filter(|r| r.params.layers == most && r.params.repetition == 1)
    {
        for l in &r.result.per_layer {
            let _ = writeln!(
                h,
                "<tr><td class=\"label\">{}</td><td>{}</td><td>{}</td><td>{:.0}</td><td>{:.0}</td><td>{:.0}</td><td>{:.1}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                esc(&r.id),
                esc(&l.side),
                l.layer,
                l.cpu_ns_per_message,
                l.busy_ns_per_message,
                l.busy_raw_ns_per_message,
                l.queue_occupancy_mean,
                l.queue_occupancy_max,
                l.retransmissions,
                l.cpu.map_or("—".into(), |c| c.to_string())
            );
        }
    }
    h.push_str("</tbody></table></div>\n</body>\n</html>\n");
    Ok(h)
}
