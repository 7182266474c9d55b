//! The HTML page of a pipeline sweep: the paper's tables beside ours, the
//! line alone, the claims, the plots, every projection's detail and the
//! per-layer costs.

use super::*;
use crate::export::{Block, Page};
use crate::plots::{self, Series};
use html_escape::encode_text as esc;

/// The median per layer count of one figure (0, 1, 2) of our runs.
fn ours_series(
    sweep: &PipelineSweep,
    g: &Group,
    size: u64,
    mode: &str,
    figure: usize,
    projected: bool,
) -> Vec<(f64, f64)> {
    layer_counts(sweep, g, size)
        .into_iter()
        .filter_map(|l| {
            let c = sweep.cell(mode, &g.link, size, g.messages, l);
            let v = if projected {
                &c.projected[figure]
            } else {
                &c.measured[figure]
            };
            Spread::of(v).map(|s| (f64::from(l), s.median))
        })
        .collect()
}

fn plots_of(sweep: &PipelineSweep) -> Result<Vec<(String, String)>, ReportError> {
    let mut out = Vec::new();
    let modes = modes(sweep);
    let exp = &sweep.experiment;
    for g in groups(sweep) {
        for size in sizes(sweep, &g) {
            for (fi, (figure, _)) in FIGURES.iter().enumerate() {
                let mut series = Vec::new();
                // The paper's series first, so every plot keys its colours
                // the same way (its Mbit/s lie near zero on our axis: that
                // gap is the absolute difference).
                if g.paper {
                    let points: Vec<(f64, f64)> = layer_counts(sweep, &g, size)
                        .into_iter()
                        .filter_map(|l| {
                            exp.paper_cell(size, l).map(|c| {
                                (
                                    f64::from(l),
                                    match fi {
                                        0 => c.mbit_s,
                                        1 => c.relative_capacity,
                                        _ => c.efficiency,
                                    },
                                )
                            })
                        })
                        .collect();
                    if points.len() >= 2 {
                        series.push(Series {
                            name: "paper".into(),
                            points,
                        });
                    }
                }
                for m in &modes {
                    for (projected, label) in [(false, "measured"), (true, "projected")] {
                        let points = ours_series(sweep, &g, size, m, fi, projected);
                        if points.len() >= 2 {
                            series.push(Series {
                                name: format!("{m} {label}"),
                                points,
                            });
                        }
                    }
                }
                if series.iter().filter(|s| s.name != "paper").count() == 0 {
                    continue;
                }
                let title = format!("{figure} against layers, {} ({})", size_text(size), g.link);
                // From zero, with headroom above the data for the legend
                // (drawn in the upper left).
                let top = series
                    .iter()
                    .flat_map(|s| s.points.iter().map(|p| p.1))
                    .fold(0.0_f64, f64::max);
                let svg = plots::linear(
                    &title,
                    "layers per side",
                    figure,
                    &series,
                    Some((0.0, top * 1.45)),
                )?;
                out.push((
                    format!(
                        "{figure} against the number of layers, {} messages over the {} line, {} per run: the median of our repetitions per mode, measured and projected{}.",
                        size_text(size),
                        g.link,
                        number(g.messages as f64, 0),
                        if g.paper { ", and the paper's values" } else { "" }
                    ),
                    svg,
                ));
            }
        }
    }
    Ok(out)
}

fn verdict_cell(v: &Verdict, detail: &str) -> String {
    format!(
        "<td class=\"label\"><strong>{}</strong>{}</td>",
        v.word(),
        if detail.is_empty() {
            String::new()
        } else {
            format!("<br><small>{}</small>", esc(detail))
        }
    )
}

/// The page: the summary as facts, then the rest as written here.
pub(super) fn page(sweep: &PipelineSweep) -> Result<Page, ReportError> {
    let exp = &sweep.experiment;
    let mut h = String::new();
    if let Some(p) = exp
        .paper
        .as_ref()
        .filter(|p| !p.carries_over.trim().is_empty())
    {
        let _ = writeln!(
            h,
            "<p class=\"note\"><strong>What carries over.</strong> {}</p>",
            esc(p.carries_over.trim())
        );
    }
    let _ = writeln!(h, "<p class=\"note\">{}</p>", esc(NOTE));
    let claims = claim_rows(sweep);
    if !claims.is_empty() {
        let cpus = claims.first().map_or(0, |c| c.cpus);
        let _ = writeln!(
            h,
            "<h2>The paper's claims</h2>\n<p class=\"note\">{}</p>\n<div class=\"scroll\"><table id=\"claims\">\n<thead><tr><th class=\"label\">claim</th><th class=\"label\">where</th><th class=\"label\">on the paper's values</th><th class=\"label\">{}</th><th class=\"label\">{}</th></tr></thead>\n<tbody>",
            esc(&claims_note(cpus)),
            esc(&measured_heading(cpus)),
            esc(PROJECTED_HEADING)
        );
        for c in &claims {
            let _ = writeln!(
                h,
                "<tr><td class=\"label\">{} <small>({})</small></td><td class=\"label\">{}</td>{}{}{}</tr>",
                esc(&c.claim.text),
                esc(&c.claim.id),
                esc(&c.claim.source),
                verdict_cell(&c.paper.verdict, &c.paper.detail),
                verdict_cell(&c.measured.verdict, &c.measured.detail),
                format_args!(
                    "<td class=\"label\"><small>{}</small></td>",
                    esc(&projection_text(&c.projection))
                ),
            );
        }
        h.push_str("</tbody></table></div>\n");
    }
    let lines = line_rows(sweep);
    if !lines.is_empty() {
        let _ = writeln!(
            h,
            "<h2>The line alone</h2>\n<p class=\"note\">{}</p>\n<div class=\"scroll\"><table id=\"line\">\n<thead><tr><th class=\"label\">message size</th><th>paper: line alone</th><th>paper: 1 layer</th><th>ours: line alone</th><th>ours: 1 layer measured</th><th>ours: 1 layer projected</th></tr></thead>\n<tbody>",
            esc(LINE_NOTE)
        );
        for l in &lines {
            let _ = writeln!(
                h,
                "<tr><td class=\"label\">{}</td><td class=\"paper\">{}</td><td class=\"paper\">{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                size_text(l.size),
                opt(l.paper_line, 1),
                opt(l.paper_one, 1),
                line_text(l),
                spread_text(&l.ours_one, 1),
                spread_text(&l.ours_one_projected, 1)
            );
        }
        h.push_str("</tbody></table></div>\n");
    }
    for g in groups(sweep) {
        for size in sizes(sweep, &g) {
            let t = grid(sweep, &g, size);
            let _ = write!(
                h,
                "<h2>{}</h2>\n<div class=\"scroll\"><table>\n<thead><tr><th class=\"label\">layers</th>",
                esc(&t.title)
            );
            for l in &t.layers {
                let _ = write!(h, "<th>{l}</th>");
            }
            h.push_str("</tr></thead>\n<tbody>\n");
            for r in &t.rows {
                let class = if r.paper { " class=\"paper\"" } else { "" };
                let _ = write!(h, "<tr><td class=\"label\">{}</td>", esc(&r.label));
                for c in &r.cells {
                    // The spread on a second, smaller line.
                    let cell = match c.split_once(" (") {
                        Some((m, rest)) => format!("{}<br><small>({}</small>", esc(m), esc(rest)),
                        None => esc(c).to_string(),
                    };
                    let _ = write!(h, "<td{class}>{cell}</td>");
                }
                h.push_str("</tr>\n");
            }
            h.push_str("</tbody></table></div>\n");
            if !t.notes.is_empty() {
                h.push_str("<ol class=\"note\">\n");
                for n in &t.notes {
                    let _ = writeln!(h, "<li>{}</li>", esc(n));
                }
                h.push_str("</ol>\n");
            }
        }
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
    let (mut projections, mut costs) = (String::new(), String::new());
    projection_detail(&mut projections, sweep);
    layer_costs(&mut costs, sweep);
    Ok(Page {
        title: exp.title.clone(),
        description: exp.description.clone(),
        style: crate::locality::STYLE,
        viewport: false,
        blocks: [
            Block::Facts {
                id: None,
                facts: summary_lines(sweep),
            },
            Block::Html(h),
        ]
        .into_iter()
        .chain(crate::validity::blocks_with(
            &validity(sweep),
            crate::validity::NO_CONTROL,
        ))
        .chain([Block::Html(projections), Block::Html(costs)])
        .collect(),
    })
}

/// Every run of the first repetition: measured, the layer stages alone,
/// the bounded projection and what bounds it, or why there is none.
fn projection_detail(h: &mut String, sweep: &PipelineSweep) {
    h.push_str("<h2>Projections (first repetition)</h2>\n<p class=\"note\">The layer stages alone are what an unbounded projection would claim; the projection is that figure bounded by the source, sink and line threads, the line's rate and the CPU share (threads / CPUs times the measured rate).</p>\n<div class=\"scroll\"><table id=\"projections\">\n<thead><tr><th class=\"label\">run</th><th>threads / CPUs</th><th>measured Mbit/s</th><th>layer stages alone Mbit/s</th><th>projected Mbit/s</th><th class=\"label\">bound, or why none</th></tr></thead>\n<tbody>\n");
    for r in sweep.runs.iter().filter(|r| r.params.repetition == 1) {
        let p = &r.result.projection;
        let _ = writeln!(
            h,
            "<tr><td class=\"label\">{}</td><td>{} / {}</td><td>{}</td><td>{}</td><td>{}</td><td class=\"label\">{}</td></tr>",
            esc(&r.id),
            p.threads,
            p.cpus,
            number(r.result.throughput_mbit_s, 1),
            opt(p.layers_only_mbit_s, 1),
            p.mbit_s.map_or("no projection".into(), |v| number(v, 1)),
            esc(&match p.value() {
                Ok(_) => p.bound.clone(),
                Err(why) => why.to_string(),
            })
        );
    }
    h.push_str("</tbody></table></div>\n");
}

/// Per-layer costs of the runs with the most layers (first repetition).
fn layer_costs(h: &mut String, sweep: &PipelineSweep) {
    h.push_str("<h2>Per-layer costs (runs with the most layers, first repetition)</h2>\n<div class=\"scroll\"><table>\n<thead><tr><th class=\"label\">run</th><th>side</th><th>layer</th><th>CPU ns/msg</th><th>busy ns/msg (capped)</th><th>busy ns/msg (raw)</th><th>queue mean</th><th>queue max</th><th>retransmissions</th><th>CPU</th></tr></thead>\n<tbody>\n");
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
    h.push_str("</tbody></table></div>\n");
}
