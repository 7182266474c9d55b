//! The page of a pipeline sweep: in brief (the verdicts and the key plot),
//! the summary, the claims, the line alone,
//! the paper's tables beside ours, the plots (where the format carries
//! figures), the validity, and with the detail every projection and the
//! per-layer costs.

use super::*;
use crate::brief::Headline;
use crate::export::{Block, Item, List, Page, Table};
use crate::plots::{self, Kind, Line};

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
                        series.push(Line {
                            name: "paper".into(),
                            colour_key: "paper".into(),
                            points,
                            kind: Kind::Paper,
                            ..Line::default()
                        });
                    }
                }
                for m in &modes {
                    for (projected, label) in [(false, "measured"), (true, "projected")] {
                        let points = ours_series(sweep, &g, size, m, fi, projected);
                        if points.len() >= 2 {
                            series.push(Line {
                                name: format!("{m} {label}"),
                                colour_key: m.clone(),
                                points,
                                kind: if projected {
                                    Kind::Projected
                                } else {
                                    Kind::Ours
                                },
                                ..Line::default()
                            });
                        }
                    }
                }
                if series.iter().all(|s| s.kind == Kind::Paper) {
                    continue;
                }
                let title = format!("{figure} against layers, {} ({})", size_text(size), g.link);
                // From zero (a logarithmic axis instead where the paper's
                // values and ours lie more than ten times apart).
                let top = series
                    .iter()
                    .flat_map(|s| s.points.iter().map(|p| p.1))
                    .fold(0.0_f64, f64::max);
                let log = plots::paper_far_apart(&series);
                let svg = plots::linear_lines(
                    &title,
                    "layers per side",
                    figure,
                    &series,
                    Some((0.0, top * 1.08)),
                    true,
                )?;
                out.push((
                    format!(
                        "{figure} against the number of layers, {} messages over the {} line, {} per run: the median of our repetitions per mode, measured (solid, filled circles) and projected (dashed, hollow circles){}{}.",
                        size_text(size),
                        g.link,
                        number(g.messages as f64, 0),
                        if g.paper {
                            ", and the paper's values (dotted, black diamonds)"
                        } else {
                            ""
                        },
                        if log {
                            "; the y axis is logarithmic, as the paper's values and ours lie more than ten times apart"
                        } else {
                            ""
                        }
                    ),
                    svg,
                ));
            }
        }
    }
    Ok(out)
}

/// A verdict in bold with what it rests on under it.
fn verdict_cell(v: &Verdict, detail: &str) -> Cell {
    Cell::from(v.word())
        .strong(true)
        .small((!detail.is_empty()).then(|| detail.to_string()))
}

/// The page in `format`.
pub(super) fn page(sweep: &PipelineSweep, format: Format) -> Result<Page, ReportError> {
    let exp = &sweep.experiment;
    let mut plots: Vec<Block> = if format.figures() {
        plots_of(sweep)?
            .into_iter()
            .map(|(caption, svg)| Block::Figure {
                id: None,
                svg,
                caption,
            })
            .collect()
    } else {
        Vec::new()
    };
    // The first plot is the key one: it goes up with the verdicts.
    let key = (!plots.is_empty()).then(|| plots.remove(0));
    let headlines: Vec<Headline> = claim_rows(sweep)
        .iter()
        .map(|c| {
            Headline::judged(
                c.claim.source.clone(),
                c.claim.text.clone(),
                c.paper.detail.clone(),
                c.measured.detail.clone(),
                "—".into(),
                &c.measured.verdict,
            )
        })
        .collect();
    let mut blocks = crate::brief::section(Vec::new(), &headlines, "claim", key);
    blocks.push(Block::Heading("The sweep".into()));
    blocks.push(Block::Facts {
        id: None,
        facts: summary_lines(sweep),
    });
    if let Some(p) = exp
        .paper
        .as_ref()
        .filter(|p| !p.carries_over.trim().is_empty())
    {
        blocks.push(Block::Note(format!(
            "What carries over. {}",
            p.carries_over.trim()
        )));
    }
    blocks.push(Block::Note(NOTE.into()));
    blocks.extend(claims(sweep));
    blocks.extend(line_alone(sweep));
    for g in groups(sweep) {
        for size in sizes(sweep, &g) {
            blocks.extend(grid_blocks(grid(sweep, &g, size)));
        }
    }
    if !plots.is_empty() {
        blocks.push(Block::Heading("Plots".into()));
        blocks.extend(plots);
    }
    blocks.extend(crate::validity::blocks_with(
        &validity(sweep),
        crate::validity::NO_CONTROL,
    ));
    if format.detail() {
        blocks.extend(projection_detail(sweep));
        blocks.extend(layer_costs(sweep));
        blocks.extend(crate::summary::rerun_blocks(&exp.name, sweep.quick));
    }
    Ok(Page {
        title: exp.title.clone(),
        description: exp.description.clone(),
        style: crate::locality::STYLE.into(),
        viewport: false,
        blocks,
    })
}

/// The paper's claims: each judged on the paper's values and on ours,
/// with our projection beside them.
fn claims(sweep: &PipelineSweep) -> Vec<Block> {
    let claims = claim_rows(sweep);
    let Some(cpus) = claims.first().map(|c| c.cpus) else {
        return Vec::new();
    };
    let rows = claims
        .iter()
        .map(|c| {
            vec![
                Cell::from(c.claim.text.as_str()).small(Some(c.claim.id.clone())),
                Cell::from(c.claim.source.as_str()),
                verdict_cell(&c.paper.verdict, &c.paper.detail),
                verdict_cell(&c.measured.verdict, &c.measured.detail),
                Cell::from(projection_text(&c.projection)),
            ]
        })
        .collect();
    vec![
        Block::Heading("The paper's claims".into()),
        Block::Note(claims_note(cpus)),
        Block::Table(Table {
            id: Some("claims".into()),
            head: vec![
                "claim".into(),
                "where".into(),
                "on the paper's values".into(),
                measured_heading(cpus),
                PROJECTED_HEADING.into(),
            ],
            rows,
            labels: 5,
            ..Table::default()
        }),
    ]
}

/// The paper's line-alone figures beside ours and the one-layer runs.
fn line_alone(sweep: &PipelineSweep) -> Vec<Block> {
    let lines = line_rows(sweep);
    if lines.is_empty() {
        return Vec::new();
    }
    let paper = |v: Option<f64>| Cell::from(opt(v, 1)).tone(Tone::Paper);
    vec![
        Block::Heading("The line alone".into()),
        Block::Note(LINE_NOTE.into()),
        Block::Table(Table {
            id: Some("line".into()),
            head: [
                "message size",
                "paper: line alone",
                "paper: 1 layer",
                "ours: line alone",
                "ours: 1 layer measured",
                "ours: 1 layer projected",
            ]
            .map(String::from)
            .to_vec(),
            rows: lines
                .iter()
                .map(|l| {
                    vec![
                        Cell::from(size_text(l.size)),
                        paper(l.paper_line),
                        paper(l.paper_one),
                        Cell::from(line_text(l)),
                        Cell::from(spread_text(&l.ours_one, 1)),
                        Cell::from(spread_text(&l.ours_one_projected, 1)),
                    ]
                })
                .collect(),
            labels: 1,
            ..Table::default()
        }),
    ]
}

/// A grid under its title: layer counts across, its footnotes under it.
fn grid_blocks(t: Grid) -> Vec<Block> {
    let mut head = vec!["layers".to_string()];
    head.extend(t.layers.iter().map(u32::to_string));
    let mut blocks = vec![
        Block::Heading(t.title),
        Block::Table(Table {
            head,
            rows: t
                .rows
                .into_iter()
                .map(|r| {
                    let mut row = vec![Cell::from(r.label)];
                    row.extend(r.cells);
                    row
                })
                .collect(),
            labels: 1,
            ..Table::default()
        }),
    ];
    if !t.notes.is_empty() {
        blocks.push(Block::List(List {
            class: Some("note"),
            items: t
                .notes
                .iter()
                .enumerate()
                .map(|(i, n)| Item::from(format!("[{}] {n}", i + 1)))
                .collect(),
            ..List::default()
        }));
    }
    blocks
}

/// Every run of the first repetition: measured, the layer stages alone,
/// the bounded projection and what bounds it, or why there is none.
fn projection_detail(sweep: &PipelineSweep) -> Vec<Block> {
    let rows = sweep
        .runs
        .iter()
        .filter(|r| r.params.repetition == 1)
        .map(|r| {
            let p = &r.result.projection;
            vec![
                Cell::from(r.id.as_str()),
                Cell::from(format!("{} / {}", p.threads, p.cpus)),
                Cell::from(number(r.result.throughput_mbit_s, 1)),
                Cell::from(opt(p.layers_only_mbit_s, 1)),
                Cell::from(p.mbit_s.map_or("no projection".into(), |v| number(v, 1))),
                Cell::from(match p.value() {
                    Ok(_) => p.bound.clone(),
                    Err(why) => why.to_string(),
                }),
            ]
        })
        .collect();
    vec![
        Block::Heading("Projections (first repetition)".into()),
        Block::Note("The layer stages alone are what an unbounded projection would claim; the projection is that figure bounded by the source, sink and line threads, the line's rate and the CPU share (threads / CPUs times the measured rate).".into()),
        Block::Table(Table {
            id: Some("projections".into()),
            head: [
                "run",
                "threads / CPUs",
                "measured Mbit/s",
                "layer stages alone Mbit/s",
                "projected Mbit/s",
                "bound, or why none",
            ]
            .map(String::from)
            .to_vec(),
            rows,
            labels: 1,
            text_columns: vec![5],
            ..Table::default()
        }),
    ]
}

/// Per-layer costs of the runs with the most layers (first repetition).
fn layer_costs(sweep: &PipelineSweep) -> Vec<Block> {
    let most = sweep
        .runs
        .iter()
        .map(|r| r.params.layers)
        .max()
        .unwrap_or(0);
    let rows = sweep
        .runs
        .iter()
        .filter(|r| r.params.layers == most && r.params.repetition == 1)
        .flat_map(|r| {
            r.result.per_layer.iter().map(|l| {
                [
                    r.id.clone(),
                    l.side.to_string(),
                    l.layer.to_string(),
                    format!("{:.0}", l.cpu_ns_per_message),
                    format!("{:.0}", l.busy_ns_per_message),
                    format!("{:.0}", l.busy_raw_ns_per_message),
                    format!("{:.1}", l.queue_occupancy_mean),
                    l.queue_occupancy_max.to_string(),
                    l.retransmissions.to_string(),
                    l.cpu.map_or("—".into(), |c| c.to_string()),
                ]
                .map(Cell::from)
                .to_vec()
            })
        })
        .collect();
    vec![
        Block::Heading("Per-layer costs (runs with the most layers, first repetition)".into()),
        Block::Table(Table {
            head: [
                "run",
                "side",
                "layer",
                "CPU ns/msg",
                "busy ns/msg (capped)",
                "busy ns/msg (raw)",
                "queue mean",
                "queue max",
                "retransmissions",
                "CPU",
            ]
            .map(String::from)
            .to_vec(),
            rows,
            labels: 1,
            ..Table::default()
        }),
    ]
}
