//! Reports of pipeline sweeps (`DIR/pipeline.json`): the paper's Tables 1-3
//! beside ours (per message size, layers across: the paper's figure, our
//! measured and projected medians with their spread, ours/paper), the
//! paper's line-alone figures beside ours, a verdict per claim of the paper,
//! plots of efficiency, relative capacity and throughput against layers with
//! the paper's series on the same axes, and the detail of every projection.

use crate::export::{self, Cell, Page, Report, Tone};
use crate::{iso, Format, ReportError};
use connlab_lab::{size_text, ClaimResult, LinkSpec, OursCell, PipelineSweep, Spread, Verdict};

mod page;
#[cfg(test)]
mod tests;

/// Renders the report of a pipeline sweep.
pub fn render_pipeline(sweep: &PipelineSweep, format: Format) -> Result<String, ReportError> {
    export::export(&Pipeline { sweep }, format)
}

/// The pipeline report kind.
struct Pipeline<'a> {
    sweep: &'a PipelineSweep,
}

impl Report for Pipeline<'_> {
    type Row = connlab_lab::PipelineRunRow;

    fn page(&self, format: Format) -> Result<Page, ReportError> {
        page::page(self.sweep, format)
    }

    fn rows(&self) -> Result<Vec<connlab_lab::PipelineRunRow>, ReportError> {
        Ok(self.sweep.rows())
    }
}

/// The runs as their gates left them.
fn validity(sweep: &PipelineSweep) -> crate::validity::Summary {
    crate::validity::Summary::of(
        sweep
            .runs
            .iter()
            .map(|r| (r.id.as_str(), r.checked.validity.as_ref())),
    )
    .of_unit("runs")
}

/// The three figures of the paper's tables: name, decimals.
const FIGURES: [(&str, usize); 3] = [("Mbit/s", 1), ("relative capacity", 2), ("efficiency", 2)];

/// One group of runs: a line and a message count.
#[derive(Clone, PartialEq)]
struct Group {
    link: String,
    messages: u64,
    /// The paper's conditions: its values stand beside these runs.
    paper: bool,
}

fn groups(sweep: &PipelineSweep) -> Vec<Group> {
    let cond = sweep.paper_conditions();
    let mut out: Vec<Group> = Vec::new();
    for r in &sweep.runs {
        let link = r.params.link.label();
        let messages = r.params.messages;
        let paper = cond.as_ref() == Some(&(link.clone(), messages));
        let g = Group {
            link,
            messages,
            paper,
        };
        if !out.contains(&g) {
            out.push(g);
        }
    }
    out.sort_by_key(|g| !g.paper);
    out
}

fn distinct<T: PartialEq + Ord + Clone>(it: impl Iterator<Item = T>) -> Vec<T> {
    let mut v: Vec<T> = Vec::new();
    for x in it {
        if !v.contains(&x) {
            v.push(x);
        }
    }
    v.sort();
    v
}

fn modes(sweep: &PipelineSweep) -> Vec<String> {
    let mut v: Vec<String> = Vec::new();
    for r in &sweep.runs {
        if !v.contains(&r.params.mode) {
            v.push(r.params.mode.clone());
        }
    }
    // The paper's design first.
    v.sort_by_key(|m| m != "layer-parallel");
    v
}

fn sizes(sweep: &PipelineSweep, g: &Group) -> Vec<u64> {
    distinct(
        sweep
            .runs
            .iter()
            .filter(|r| r.params.link.label() == g.link && r.params.messages == g.messages)
            .map(|r| r.params.message_size),
    )
}

/// Layer counts of the tables and plots (the line alone, 0, has a table of
/// its own).
fn layer_counts(sweep: &PipelineSweep, g: &Group, size: u64) -> Vec<u32> {
    let mut v = distinct(
        sweep
            .runs
            .iter()
            .filter(|r| {
                r.params.layers > 0
                    && r.params.link.label() == g.link
                    && r.params.messages == g.messages
                    && r.params.message_size == size
            })
            .map(|r| r.params.layers),
    );
    if g.paper {
        for l in 1..=16 {
            if sweep.experiment.paper_cell(size, l).is_some() && !v.contains(&l) {
                v.push(l);
            }
        }
        v.sort_unstable();
    }
    v
}

/// `1,234.5`: thousands grouped, `digits` decimals.
fn number(v: f64, digits: usize) -> String {
    let s = format!("{:.digits$}", v.abs());
    let (int, frac) = s.split_once('.').map_or((s.as_str(), ""), |(a, b)| (a, b));
    let mut grouped = String::new();
    for (i, c) in int.chars().enumerate() {
        if i > 0 && (int.len() - i) % 3 == 0 {
            grouped.push(',');
        }
        grouped.push(c);
    }
    let sign = if v < 0.0 { "-" } else { "" };
    if frac.is_empty() {
        format!("{sign}{grouped}")
    } else {
        format!("{sign}{grouped}.{frac}")
    }
}

/// The median and, when the smallest and largest differ, the range
/// `770.2–790.0`, each through `show`.
fn spread_of(values: &[f64], show: impl Fn(f64) -> String) -> Option<(String, Option<String>)> {
    let s = Spread::of(values)?;
    let (m, a, b) = (show(s.median), show(s.min), show(s.max));
    Some((m, (a != b).then(|| format!("{a}–{b}"))))
}

/// Median with the spread: `780.1 (770.2–790.0)`, or `—`.
fn spread_text(values: &[f64], digits: usize) -> String {
    match spread_of(values, |v| number(v, digits)) {
        None => "—".into(),
        Some((m, None)) => m,
        Some((m, Some(r))) => format!("{m} ({r})"),
    }
}

/// [`spread_text`] as a cell: the range as its spread.
fn spread_cell(values: &[f64], digits: usize) -> Cell {
    match spread_of(values, |v| number(v, digits)) {
        None => Cell::from("—"),
        Some((m, r)) => Cell::from(m).spread(r),
    }
}

/// `1,700×`, `17×`, `1.20×`, `0.45×`.
fn times(r: f64) -> String {
    if r >= 10.0 {
        format!("{}×", number(r, 0))
    } else {
        format!("{r:.2}×")
    }
}

/// Ours / the paper: median ratio with the spread.
fn ratio_cell(values: &[f64], paper: Option<f64>) -> Cell {
    match paper
        .filter(|p| *p > 0.0)
        .and_then(|p| spread_of(values, |v| times(v / p)))
    {
        Some((m, r)) => Cell::from(m).spread(r),
        None => Cell::from("—"),
    }
}

/// A table: a header row of layer counts, then labelled rows of cells.
struct Grid {
    title: String,
    layers: Vec<u32>,
    rows: Vec<GridRow>,
    /// Footnotes: why projections are missing, what bounds them.
    notes: Vec<String>,
}

struct GridRow {
    label: String,
    cells: Vec<Cell>,
}

/// Footnote index for `text`, added if new.
fn note(notes: &mut Vec<String>, text: String) -> usize {
    if let Some(i) = notes.iter().position(|n| *n == text) {
        return i + 1;
    }
    notes.push(text);
    notes.len()
}

fn grid(sweep: &PipelineSweep, g: &Group, size: u64) -> Grid {
    let exp = &sweep.experiment;
    let layers = layer_counts(sweep, g, size);
    let modes = modes(sweep);
    let cells: Vec<(String, Vec<OursCell>)> = modes
        .iter()
        .map(|m| {
            (
                m.clone(),
                layers
                    .iter()
                    .map(|&l| sweep.cell(m, &g.link, size, g.messages, l))
                    .collect(),
            )
        })
        .collect();
    let table = layers
        .iter()
        .find_map(|&l| exp.paper_cell(size, l))
        .filter(|_| g.paper)
        .map(|c| c.table.clone());
    let mut notes = Vec::new();
    let mut rows = figure_rows(sweep, g, size, &layers, &cells, &mut notes);
    rows.extend(run_rows(&cells));
    // The per-size line's rate at this size.
    let paced = sweep
        .runs
        .iter()
        .find(|r| r.params.link.label() == g.link && r.params.link == LinkSpec::MemoryPerSize)
        .and_then(|r| exp.line_rate(r.params.link, size))
        .map_or(String::new(), |bps| {
            format!(" ({} Mbit/s at this size)", number(bps as f64 / 1e6, 1))
        });
    Grid {
        title: format!(
            "{}{} messages over {}{paced}, {} per run",
            table.map_or(String::new(), |t| format!("{t}: ")),
            size_text(size),
            g.link,
            number(g.messages as f64, 0)
        ),
        layers,
        rows,
        notes,
    }
}

/// The grid's rows of each figure: the paper's, then per mode measured,
/// projected and (layer-parallel, where the paper gives values) each over
/// the paper's. Reasons without a projection go to `notes`.
fn figure_rows(
    sweep: &PipelineSweep,
    g: &Group,
    size: u64,
    layers: &[u32],
    cells: &[(String, Vec<OursCell>)],
    notes: &mut Vec<String>,
) -> Vec<GridRow> {
    let exp = &sweep.experiment;
    let mut rows = Vec::new();
    for (fi, (figure, digits)) in FIGURES.iter().enumerate() {
        let paper: Vec<Option<f64>> = layers
            .iter()
            .map(|&l| {
                exp.paper_cell(size, l)
                    .filter(|_| g.paper)
                    .map(|c| match fi {
                        0 => c.mbit_s,
                        1 => c.relative_capacity,
                        _ => c.efficiency,
                    })
            })
            .collect();
        let has_paper = paper.iter().any(Option::is_some);
        if has_paper {
            rows.push(GridRow {
                label: format!("{figure}: paper"),
                cells: paper
                    .iter()
                    .map(|p| {
                        Cell::from(p.map_or("—".into(), |v| number(v, *digits))).tone(Tone::Paper)
                    })
                    .collect(),
            });
        }
        for (mode, per_layer) in cells {
            rows.push(GridRow {
                label: format!("{figure}: {mode} measured"),
                cells: per_layer
                    .iter()
                    .map(|c| spread_cell(&c.measured[fi], *digits))
                    .collect(),
            });
            rows.push(GridRow {
                label: format!("{figure}: {mode} projected"),
                cells: per_layer
                    .iter()
                    .map(|c| projected_cell(c, fi, *digits, notes))
                    .collect(),
            });
            if has_paper && mode == "layer-parallel" {
                for (which, label) in [(0, "measured"), (1, "projected")] {
                    rows.push(GridRow {
                        label: format!("{figure}: {mode} {label} / paper"),
                        cells: per_layer
                            .iter()
                            .zip(&paper)
                            .map(|(c, p)| {
                                let v = if which == 0 {
                                    &c.measured[fi]
                                } else {
                                    &c.projected[fi]
                                };
                                ratio_cell(v, *p)
                            })
                            .collect(),
                    });
                }
            }
        }
    }
    rows
}

/// One cell of a projected row: the projection's spread, or why there is
/// none, with marks to the notes on what bounds or prevents it.
fn projected_cell(c: &OursCell, fi: usize, digits: usize, notes: &mut Vec<String>) -> Cell {
    let why = if fi == 0 {
        &c.no_projection
    } else {
        &c.no_projected_capacity
    };
    let cell = if c.projected[fi].is_empty() && c.runs > 0 {
        Cell::from("no projection")
    } else {
        spread_cell(&c.projected[fi], digits)
    };
    let marks = (c.runs > 0 && !why.is_empty()).then(|| {
        why.iter()
            .map(|w| format!("[{}]", note(notes, w.clone())))
            .collect::<String>()
    });
    cell.small(marks)
}

/// The grid's rows of what the runs saw: lock contention (where measured)
/// and each mode's projection bound.
fn run_rows(cells: &[(String, Vec<OursCell>)]) -> Vec<GridRow> {
    let mut rows = Vec::new();
    for (mode, per_layer) in cells
        .iter()
        .filter(|(_, c)| c.iter().any(|c| !c.lock_contention.is_empty()))
    {
        rows.push(GridRow {
            label: format!("{mode}: layer-lock acquisitions contended, %"),
            cells: per_layer
                .iter()
                .map(|c| {
                    let pct: Vec<f64> = c.lock_contention.iter().map(|v| v * 100.0).collect();
                    spread_cell(&pct, 1)
                })
                .collect(),
        });
    }
    for (mode, per_layer) in cells {
        rows.push(GridRow {
            label: format!("{mode}: projection bound"),
            cells: per_layer
                .iter()
                .map(|c| {
                    Cell::from(if c.bounds.is_empty() {
                        "—".into()
                    } else {
                        c.bounds.join(", ")
                    })
                })
                .collect(),
        });
    }
    rows
}

fn summary_lines(sweep: &PipelineSweep) -> Vec<(String, String)> {
    let e = &sweep.environment;
    let m = &sweep.experiment.pipeline;
    let verified = sweep.runs.iter().filter(|r| r.result.verified).count();
    let retx: u64 = sweep.runs.iter().map(|r| r.result.retransmissions).sum();
    let handoff: Vec<f64> = sweep.runs.iter().map(|r| r.result.handoff_ns).collect();
    let reps = distinct(sweep.runs.iter().map(|r| r.params.repetition)).len();
    let most_threads = sweep
        .runs
        .iter()
        .map(|r| r.result.projection.threads)
        .max()
        .unwrap_or(0);
    let mut v = vec![
        (
            "runs".into(),
            format!(
                "{} of {} finished{}; {verified} verified (every message once, in order, intact, stream checksums equal); {reps} repetition(s)",
                sweep.runs.len(),
                sweep.runs_total,
                if sweep.quick { " (quick matrix)" } else { "" }
            ),
        ),
        (
            "messages per run".into(),
            distinct(sweep.runs.iter().map(|r| r.params.messages))
                .iter()
                .map(|n| number(*n as f64, 0))
                .collect::<Vec<_>>()
                .join(", "),
        ),
        (
            "window, loss, run-to-completion workers per side (shared-state mode)".into(),
            format!(
                "{} PDUs per layer, {}, {} ({})",
                m.window.map_or("default (32)".into(), |w| w.to_string()),
                m.loss,
                m.rtc_threads,
                m.shared_workers
            ),
        ),
        ("retransmissions (all runs)".into(), retx.to_string()),
        (
            "SPSC hand-off (measured per run)".into(),
            format!("{} ns", spread_text(&handoff, 1)),
        ),
        (
            "machine".into(),
            format!(
                "{}, {} CPUs (affinity {}), clock {}; up to {} threads per run",
                e.kernel, e.cpu_count, e.cpu_affinity, e.clock_source, most_threads
            ),
        ),
        (
            "CPUs the claims hold thread counts to".into(),
            format!(
                "{}{}",
                sweep.judging_cpus(),
                if sweep.cpus.is_some() {
                    " (recorded by the sweep)"
                } else {
                    " (not recorded: the machine's CPU count)"
                }
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
    ];
    if let Some(p) = &sweep.experiment.paper {
        v.insert(0, ("paper".into(), p.citation.clone()));
    }
    v
}

const NOTE: &str = "Each of our figures is the median over the valid repetitions (runs that failed a validity gate are left out and listed under the validity of the runs), with the smallest and largest in brackets when they differ. Relative capacity = throughput × layers / the one-layer throughput of the same mode, line, size and repetition; efficiency = relative capacity / layers (the paper's definitions). Measured figures come from this machine, where every thread of a run shares its CPUs. Projected figures assume one core per thread: the slowest layer stage's busy time per message plus one SPSC hand-off, bounded by the stages the layers leave out (source, sink and both line threads at their own busy time per message), by the line's rate, and by the CPU share (at most threads / CPUs times the measured rate, the most extra CPU one core per thread can give), and never below the measured rate. A run gets no projection when the stage that sets the bound was timed in fewer than 20 rounds or mostly in rounds the scheduler interrupted, and no projected relative capacity when its one-layer run has no projection or the ratio would put efficiency above 1.1. Where a projection's bound reads \"line\", the projected throughput is the line's rate less the layer headers every frame carries, so its relative capacity and efficiency measure only the headers' share of the line. A claim holds only when every repetition's value meets it.";

/// The heading of the claims' measured column.
fn measured_heading(cpus: usize) -> String {
    format!("on ours, measured (where a run's threads fit {cpus} CPUs)")
}

/// The heading of the claims' projected column.
const PROJECTED_HEADING: &str = "ours, projected to one core per thread (not a verdict)";

/// What the claims' columns mean.
fn claims_note(cpus: usize) -> String {
    format!("A claim on relative capacity or efficiency compares a run with its one-layer run; where their threads outnumber the CPUs, the ratio measures how the threads share the CPUs rather than the design, so measured figures are judged only at layer counts whose runs and one-layer runs start at most {cpus} threads (the CPUs the runs could use). The other layer counts show their projected figures in the measured column, unjudged. The projected column gives our projected figures at every layer count and whether they fall within the claim's bounds: a projection, not a verdict.")
}

/// A projection cell: the values, without a verdict word.
fn projection_text(detail: &str) -> String {
    if detail.is_empty() {
        "—".into()
    } else {
        format!("projection: {detail}")
    }
}

fn claim_rows(sweep: &PipelineSweep) -> Vec<ClaimResult> {
    sweep.claims()
}

/// Our line alone and what stands in for it, per message size.
struct LineRow {
    size: u64,
    paper_line: Option<f64>,
    paper_one: Option<f64>,
    /// Our line alone: the zero-layer runs, or the configured rate.
    ours_line: Vec<f64>,
    ours_line_measured: bool,
    ours_one: Vec<f64>,
    ours_one_projected: Vec<f64>,
}

const LINE_NOTE: &str = "The paper's line-alone figures come from its HIPPI loop-back with no protocol layer. Ours come from zero-layer runs (the experiment's line_alone): the source hands messages straight to the sending line thread and the receiving line thread to the sink, so the figure holds the line's pacing and the threads' hand-offs but no protocol. Without such runs the line's configured rate stands in (marked). The one-layer runs beside it show how close one layer gets.";

fn line_rows(sweep: &PipelineSweep) -> Vec<LineRow> {
    let Some((link, messages)) = sweep.paper_conditions() else {
        return Vec::new();
    };
    let exp = &sweep.experiment;
    let mut sizes = exp.paper_sizes();
    for r in &sweep.runs {
        if !sizes.contains(&r.params.message_size) {
            sizes.push(r.params.message_size);
        }
    }
    sizes.sort_unstable();
    sizes
        .into_iter()
        .map(|size| {
            let one = sweep.cell("layer-parallel", &link, size, messages, 1);
            let alone: Vec<f64> = sweep
                .line_alone_runs(&link, size, messages)
                .into_iter()
                .map(|a| a.1)
                .collect();
            let ours_line_measured = !alone.is_empty();
            LineRow {
                size,
                paper_line: exp.paper_line(size).map(|l| l.mbit_s),
                paper_one: exp.paper_cell(size, 1).map(|c| c.mbit_s),
                ours_line: if ours_line_measured {
                    alone
                } else {
                    sweep.line_alone_mbit_s(size).into_iter().collect()
                },
                ours_line_measured,
                ours_one: one.measured[0].clone(),
                ours_one_projected: one.projected[0].clone(),
            }
        })
        .collect()
}

fn line_text(l: &LineRow) -> String {
    let t = spread_text(&l.ours_line, 1);
    if l.ours_line_measured || l.ours_line.is_empty() {
        t
    } else {
        format!("{t} (configured rate)")
    }
}

fn opt(v: Option<f64>, digits: usize) -> String {
    v.map_or("—".into(), |v| number(v, digits))
}
