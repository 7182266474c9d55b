//! The locality and web sweep page, built once for HTML and Markdown: the
//! brief table, the paper's table beside ours, the derived tables, the
//! claims, the validity, the projections, the plots, the environment, the
//! warnings and every point. Markdown leaves out the plots and the points.

pub(crate) mod rows;

use crate::brief::{brief_columns, brief_engines, brief_of, Headline};
use crate::claims::{ClaimResult, Verdict};
use crate::export::{Block, Cell, Claim, Group, Page, Table, Tone, Verdicts};
use crate::table::{metric_name, stat_names, stat_unit};
use crate::{
    claim_spread, distinct, environment, figures, in_unit, metric_heading, metric_units, num_sig,
    pick_text, point_row, projection, ratio, spread_text, warnings, web_point_cells, Format, Model,
    ReportError, POINT_COLUMNS, WEB_POINT_COLUMNS,
};
use connlab_lab::Metric;

pub(crate) const STYLE: &str = "
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

/// The page of the locality report in `format`: one list of blocks, the
/// plots where the format carries figures and the table of every point
/// where it carries the detail.
pub(crate) fn page(m: &Model, format: Format) -> Result<Page, ReportError> {
    let exp = &m.dir.experiment;
    let mut figures = if format.figures() {
        figure_blocks(m)?
    } else {
        Vec::new()
    };
    // The first plot is the key one: it goes up with the verdicts.
    let key = (!figures.is_empty()).then(|| figures.remove(0));
    let mut lead = Vec::new();
    if m.dir.points.is_empty() {
        lead.push(Block::Note(format!(
            "No points finished yet ({} planned).",
            m.dir.info.points_total
        )));
    }
    let headlines: Vec<Headline> = m.claims.iter().map(Headline::of_claim).collect();
    let mut blocks = crate::brief::section(lead, &headlines, "claim", key);
    blocks.extend(intro(m));
    blocks.extend(paper_table(m));
    blocks.extend(derived(m));
    blocks.extend(claims(m));
    blocks.extend(crate::validity::blocks(
        &m.validity,
        m.noise.as_ref(),
        &m.noise_of(),
    ));
    blocks.extend(projection::blocks(m.dir, &m.table));
    if format.figures() {
        blocks.push(Block::Heading("Plots".into()));
        if figures.is_empty() {
            blocks.push(Block::Note(
                "No further plot: each plot needs at least two values along its axis.".into(),
            ));
        }
        blocks.extend(figures);
    }
    blocks.extend(warnings_list(m));
    blocks.extend(crate::summary::rerun_blocks(&exp.name, m.dir.info.quick));
    blocks.push(Block::Heading("Environment".into()));
    blocks.push(Block::Facts {
        id: Some("environment"),
        facts: environment(m.dir)
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect(),
    });
    if format.detail() {
        blocks.extend(points(m));
    }
    Ok(Page {
        title: exp.title.clone(),
        description: exp.description.clone(),
        style: STYLE.into(),
        viewport: false,
        blocks,
    })
}

/// The column groups of a paper-beside-ours table: paper | ours |
/// ours/paper under each statistic of `metric`.
fn stat_groups(metric: Metric) -> Vec<Group> {
    stat_names(metric)
        .iter()
        .enumerate()
        .map(|(k, n)| Group {
            title: format!("{n} ({})", stat_unit(metric, k).0),
            small: None,
            columns: ["paper", "ours", "ours / paper"].map(String::from).to_vec(),
        })
        .collect()
}

/// The cells of one paper-beside-ours cell: per statistic, the paper's
/// value, ours (the median, the spread over repetitions with it) and ours
/// over the paper's.
fn stat_cells(cell: &crate::table::Cell, metric: Metric) -> Vec<Cell> {
    (0..3)
        .flat_map(|k| {
            let unit = stat_unit(metric, k);
            let ours = match &cell.ours[k] {
                None => Cell::from("—"),
                Some(s) => Cell::from(num_sig(s.median() / unit.1))
                    .spread((s.n() > 1).then(|| spread_text(s, unit))),
            };
            [
                Cell::from(in_unit(cell.paper[k], unit)).tone(Tone::Paper),
                ours,
                Cell::from(ratio(cell.ours_over_paper(k))).tone(Tone::Vs),
            ]
        })
        .collect()
}

/// The caption's sentence on repetitions.
fn repetitions_text(reps: usize) -> String {
    match reps {
        0 => "No repetition finished yet.".into(),
        1 => "Ours: one repetition per cell, so no spread is shown.".into(),
        n => format!("Each of our values is the median over up to {n} repetitions, shown with the range from the lowest to the highest repetition (n gives each cell's count)."),
    }
}

/// What our values of a metric are, for captions.
fn metric_whose(metric: Metric) -> &'static str {
    match metric {
        Metric::SendShares => "at the merged client shards, over every send of the measured window: the share deviating more than 10 µs either way from its ideal instant, the share within 1 µs of the median deviation, and the number of sends",
        Metric::Cycle => "at the server (--profile-poll): wall time of one cycle, a polling call and the I/O it reported",
        Metric::PollCall => "at the server (--profile-poll): thread CPU time per call, and wall time per call, which also holds waiting for work and preemption",
        Metric::BackendCpu => "of each backend (user and system time of its cgroup over the measured window, as a share of one CPU): the mean over the backends the configuration uses, the busiest one, and their total",
        Metric::Throughput => "at the merged client shards: completed responses per second, response payload in Mbit/s, and failed requests as a share of those tried",
        Metric::GatewayCpu => "over the measured window, from the experiment's own processes: the gateway's CPU (its process tree plus the interrupt time of its CPU, where the kernel forwards), the gateway process's own CPU (none for direct, near none for nat, which forwards in softirq), and the other CPUs' share used by the clients' and backends' process trees and interrupts (work of other processes does not count; older results read /proc/stat busy shares)",
        _ => "of the merged client shards",
    }
}

/// The brief table: one row per
/// engine, a column group per claim label (paper | ours | ours/paper,
/// ours judged by the engine's verdict), at most three claims side by side
/// so a table fits a laptop's width.
fn intro(m: &Model) -> Vec<Block> {
    let mut blocks = Vec::new();
    let columns = brief_columns(&m.claims);
    let engines = brief_engines(&columns, &m.table.engines);
    if columns.is_empty() || engines.is_empty() {
        return blocks;
    }
    blocks.push(Block::Heading(
        "The paper's numbers beside ours, per configuration".into(),
    ));
    for (i, chunk) in columns.chunks(3).enumerate() {
        let groups = chunk
            .iter()
            .map(|(label, group)| Group {
                title: label.to_string(),
                small: Some(distinct(group.iter().map(|c| c.source.clone())).join(", ")),
                columns: ["paper", "ours", "ours / paper"].map(String::from).to_vec(),
            })
            .collect();
        let rows = engines
            .iter()
            .map(|e| {
                let mut cells = vec![Cell::from(e.as_str())];
                for (_, group) in chunk {
                    cells.extend(brief_cells(group, e));
                }
                cells
            })
            .collect();
        blocks.push(Block::Table(Table {
            id: Some(if i == 0 {
                "brief".into()
            } else {
                format!("brief-{}", i + 1)
            }),
            class: Some("brief"),
            head: vec!["configuration".into()],
            groups,
            rows,
            labels: 1,
            ..Table::default()
        }));
    }
    blocks.push(Block::Note("Per configuration and claim: the paper's number (a range where its text gives one), ours (the median; over several rows, the median of the rows' values) with the whole spread over rows and repetitions, and ours over the paper's. Ours is judged by the verdict (in HTML by colour: green holds, red does not hold, amber cannot be measured or is not judged); the claims below give the bounds, the rows and the reasons.".into()));
    blocks
}

/// One engine's three cells of a claim label in the brief table.
fn brief_cells(group: &[&ClaimResult], engine: &str) -> [Cell; 3] {
    let Some(b) = brief_of(group, engine) else {
        return [
            Cell::from("—").tone(Tone::Paper),
            Cell::from("—"),
            Cell::from("—").tone(Tone::Vs),
        ];
    };
    [
        Cell::from(b.paper).tone(Tone::Paper).nowrap(),
        Cell::from(b.ours)
            .nowrap()
            .spread(b.spread)
            .judged(b.verdict.key(), b.verdict.text()),
        Cell::from(ratio(b.ours_over_paper)).tone(Tone::Vs),
    ]
}

/// The paper's table beside ours: one row per setting and engine.
fn paper_table(m: &Model) -> Vec<Block> {
    let t = &m.table;
    let exp = &m.dir.experiment;
    let rows = t
        .rows
        .iter()
        .flat_map(|row| {
            t.engines.iter().zip(&row.cells).map(|(e, cell)| {
                let mut cells = vec![
                    Cell::from(row.label.as_str()),
                    Cell::from(e.as_str()),
                    Cell::from(cell.n().to_string()),
                ];
                cells.extend(stat_cells(cell, t.metric));
                cells
            })
        })
        .collect();
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
        caption.push_str(&p.note.trim().replace('\n', " "));
        caption.push_str(&format!(" Source: {}", p.source));
    } else {
        caption.push_str("The experiment file names no paper table.");
    }
    vec![
        Block::Heading(format!(
            "{}: {}, paper beside ours",
            t.table,
            metric_heading(t.metric)
        )),
        Block::Table(Table {
            id: Some("paper-table".into()),
            head: ["setting", "engine", "n"].map(String::from).to_vec(),
            groups: stat_groups(t.metric),
            rows,
            labels: 2,
            merge_first: true,
            ..Table::default()
        }),
        Block::Note(caption),
    ]
}

/// The derived tables, each engine at the setting picked for it.
fn derived(m: &Model) -> Vec<Block> {
    let mut blocks = Vec::new();
    for d in &m.derived {
        let rows = d
            .rows
            .iter()
            .map(|r| {
                let mut cells = vec![
                    Cell::from(r.engine.as_str()),
                    Cell::from(r.picked.as_deref().unwrap_or("nothing measured")),
                    Cell::from(r.cell.n().to_string()),
                ];
                cells.extend(stat_cells(&r.cell, d.metric));
                cells
            })
            .collect();
        blocks.push(Block::Heading(format!(
            "{}: {}, from this sweep's points",
            d.table,
            metric_heading(d.metric)
        )));
        blocks.push(Block::Table(Table {
            id: Some(format!(
                "derived-{}",
                d.table.to_lowercase().replace(' ', "-")
            )),
            class: Some("derived"),
            head: ["engine", "our point", "n"].map(String::from).to_vec(),
            groups: stat_groups(d.metric),
            rows,
            labels: 2,
            ..Table::default()
        }));
        blocks.push(Block::Note(format!(
            "{} Ours are the {} {}. {} {}",
            pick_text(d.pick, stat_names(d.metric)[0]),
            metric_name(d.metric),
            metric_whose(d.metric),
            repetitions_text(d.rows.iter().map(|r| r.cell.n()).max().unwrap_or(0)),
            d.note.trim().replace('\n', " ")
        )));
    }
    blocks
}

/// How the claims are compared and judged.
const CLAIMS_CAPTION: &str = "Only valid points are compared (see the validity section). Ratios compare the named statistic between the two rows (to ÷ from) or between two engines at one row, paired by round: the ratio in each repetition, then their median (ours) and its distribution-free interval (95 %, or the range of the rounds when there are too few for 95 %, with its lower coverage; every pairing's range when no round has both). Differences (−) pair the same way. A peak is each repetition's highest value over the rows named (only rows within the response-time bound, where one is given), compared round by round. A value claim judges every setting's repetitions and names the one that decides. A comparison holds when its interval and its median moved by the A/A noise floor either way lie within the bounds, does not hold when both lie outside, and cannot be judged here otherwise; a claim holds when every comparison holds. Paper: computed from the paper's cells where the experiment file gives them for the rows compared; † marks the number the paper's text states instead. Rows not in this run are never replaced by others for the verdict; the widest span measured is shown beside them as context.";

/// Each claim of the paper with its comparisons and verdicts.
fn claims(m: &Model) -> Vec<Block> {
    if m.claims.is_empty() {
        return Vec::new();
    }
    let claims = m
        .claims
        .iter()
        .map(|c| Claim {
            source: c.source.clone(),
            text: c.text.clone(),
            detail: format!(
                "{} of the {} {}{}",
                c.quantity.word(),
                c.statistic,
                metric_name(c.metric),
                if c.expect.is_empty() {
                    String::new()
                } else {
                    format!(
                        "; holds if the interval and the A/A noise around the median are {}",
                        c.expect
                    )
                }
            ),
            verdict: (c.verdict.key(), c.verdict.text()),
            rows: c.checks.iter().map(|k| check_cells(c, k)).collect(),
        })
        .collect();
    vec![
        Block::Heading("The paper's claims against ours".into()),
        Block::Verdicts(Verdicts {
            id: Some("claims"),
            head: [
                "engine",
                "rows compared",
                "paper",
                "ours",
                "interval",
                "rounds",
                "verdict",
            ]
            .map(String::from)
            .to_vec(),
            labels: 2,
            claims,
            caption: CLAIMS_CAPTION.into(),
        }),
    ]
}

/// One comparison of a claim: engine, rows (with context), paper, ours,
/// interval, rounds and verdict.
fn check_cells(c: &ClaimResult, k: &crate::claims::ClaimCheck) -> Vec<Cell> {
    let paper = c.paper_text(k).map_or("—".into(), |p| {
        format!("{p}{}", if k.paper_from_cells { "" } else { "†" })
    });
    // The claim's own reason, stated once in its header row.
    let verdict = if matches!(c.verdict, Verdict::CannotMeasure(_)) && k.verdict == c.verdict {
        "cannot be measured here (the reason above)".to_string()
    } else {
        k.verdict.text()
    };
    vec![
        Cell::from(k.engine.as_str()),
        Cell::from(k.rows.as_str()).small(k.context.clone()),
        Cell::from(paper).tone(Tone::Paper).nowrap(),
        Cell::from(k.ours.map_or("—".into(), |v| c.format(v))).nowrap(),
        Cell::from(
            k.spread
                .map_or("—".into(), |(lo, hi)| claim_spread(c, lo, hi)),
        )
        .nowrap(),
        Cell::from(if k.n == 0 {
            "—".into()
        } else {
            k.n.to_string()
        }),
        Cell::from(verdict).tone(Tone::Verdict(k.verdict.key())),
    ]
}

/// The plots, each a figure.
fn figure_blocks(m: &Model) -> Result<Vec<Block>, ReportError> {
    Ok(figures::plots(m.dir, &m.table)?
        .into_iter()
        .map(|(id, caption, svg)| Block::Figure {
            id: Some(format!("plot-{id}")),
            svg,
            caption,
        })
        .collect())
}

/// Every warning with the points that raised it, grouped by kind.
fn warnings_list(m: &Model) -> Vec<Block> {
    crate::tally::blocks(warnings(m.dir), "points")
}

/// Every point, folded.
fn points(m: &Model) -> Vec<Block> {
    let dir = m.dir;
    let exp = &dir.experiment;
    let web = exp.web.is_some();
    let rows = dir
        .points
        .iter()
        .chain(&dir.controls)
        .map(|p| {
            let mut cells = point_row(p);
            if web {
                cells.extend(web_point_cells(exp, p));
            }
            cells.into_iter().map(Cell::from).collect()
        })
        .collect();
    vec![
        Block::Heading("All points".into()),
        Block::Table(Table {
            id: Some("points".into()),
            head: POINT_COLUMNS
                .iter()
                .chain(if web { &WEB_POINT_COLUMNS[..] } else { &[] })
                .map(|c| c.to_string())
                .collect(),
            rows,
            labels: 1,
            folded: Some(format!("{} points", dir.points.len() + dir.controls.len())),
            ..Table::default()
        }),
    ]
}
