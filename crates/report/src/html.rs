//! The locality report's HTML page: the brief table, the paper's table
//! beside ours, the derived tables, the claims, the projections, the plots,
//! the environment, the warnings and every point.

use crate::brief::{brief_columns, brief_engines, brief_of};
use crate::claims::{ClaimResult, Verdict};
use crate::export::{Block, Page};
use crate::table::{metric_name, stat_names, stat_unit, Cell};
use crate::{
    claim_spread, distinct, environment, figures, in_unit, metric_heading, metric_units, num_sig,
    pick_text, point_row, projection, ratio, spread_text, warnings, web_point_cells, Model,
    ReportError, POINT_COLUMNS, WEB_POINT_COLUMNS,
};
use html_escape::encode_text as esc;
use std::fmt::Write as _;

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

/// What our values of a metric are, for captions.
fn metric_whose(metric: connlab_lab::Metric) -> &'static str {
    use connlab_lab::Metric;
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

/// The page of the locality report, in HTML.
/// The page of the locality report, in HTML: one block per section.
pub(crate) fn page(m: &Model) -> Result<Page, ReportError> {
    let exp = &m.dir.experiment;
    Ok(Page {
        title: exp.title.clone(),
        description: exp.description.clone(),
        style: STYLE,
        viewport: false,
        blocks: vec![
            Block::Html(intro(m)),
            Block::Html(paper_table(m)),
            Block::Html(derived(m)),
            Block::Html(claims(m)),
            Block::Html(crate::validity::html(
                &m.validity,
                m.noise.as_ref(),
                &m.noise_of(),
            )),
            Block::Html(projection::html(m.dir, &m.table)),
            Block::Html(plots(m)?),
            Block::Html(environment_table(m)),
            Block::Html(warnings_list(m)),
            Block::Html(points(m)),
        ],
    })
}

/// The note when nothing finished, and the brief table.
fn intro(m: &Model) -> String {
    let (dir, t) = (m.dir, &m.table);
    let mut h = String::new();
    if dir.points.is_empty() {
        let _ = writeln!(
            h,
            "<p class=\"note\"><strong>No points finished yet</strong> ({} planned).</p>",
            dir.info.points_total
        );
    }
    h.push_str(&brief_html(&m.claims, &t.engines));

    h
}

/// The paper's table beside ours: one row per setting and engine.
fn paper_table(m: &Model) -> String {
    let (dir, t) = (m.dir, &m.table);
    let exp = &dir.experiment;
    let mut h = String::new();
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

    h
}

/// The derived tables, each engine at the setting picked for it.
fn derived(m: &Model) -> String {
    let mut h = String::new();
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

    h
}

/// Each claim of the paper with its comparisons and verdicts.
fn claims(m: &Model) -> String {
    let mut h = String::new();
    if !m.claims.is_empty() {
        h.push_str("<h2>The paper's claims against ours</h2>\n<div class=\"scroll\">\n<table id=\"claims\">\n<thead><tr><th class=\"label\">engine</th><th class=\"label\">rows compared</th><th>paper</th><th>ours</th><th>interval</th><th>rounds</th><th class=\"label\">verdict</th></tr></thead>\n<tbody>\n");
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
                        format!(
                            "; holds if the interval and the A/A noise around the median are {}",
                            c.expect
                        )
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
        h.push_str("</tbody>\n<caption>Only valid points are compared (see the validity section). Ratios compare the named statistic between the two rows (to ÷ from) or between two engines at one row, paired by round: the ratio in each repetition, then their median (ours) and its distribution-free interval (95 %, or the range of the rounds when there are too few for 95 %, with its lower coverage; every pairing's range when no round has both). Differences (−) pair the same way. A peak is each repetition's highest value over the rows named (only rows within the response-time bound, where one is given), compared round by round. A value claim judges every setting's repetitions and names the one that decides. A comparison holds when its interval and its median moved by the A/A noise floor either way lie within the bounds, does not hold when both lie outside, and cannot be judged here otherwise; a claim holds when every comparison holds. Paper: computed from the paper's cells where the experiment file gives them for the rows compared; † marks the number the paper's text states instead. Rows not in this run are never replaced by others for the verdict; the widest span measured is shown beside them as context.</caption>\n</table>\n</div>\n");
    }

    h
}

/// The plots, or why there are none.
fn plots(m: &Model) -> Result<String, ReportError> {
    let (dir, t) = (m.dir, &m.table);
    let mut h = String::new();
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

    Ok(h)
}

/// The run's environment.
fn environment_table(m: &Model) -> String {
    let dir = m.dir;
    let mut h = String::new();
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

    h
}

/// Every warning with the points that raised it.
fn warnings_list(m: &Model) -> String {
    let dir = m.dir;
    let mut h = String::new();
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

    h
}

/// Every point, folded.
fn points(m: &Model) -> String {
    let dir = m.dir;
    let exp = &dir.experiment;
    let mut h = String::new();
    let web = exp.web.is_some();
    let _ = writeln!(
        h,
        "<h2>All points</h2>\n<details>\n<summary>{} points</summary>\n<div class=\"scroll\">\n<table id=\"points\">\n<thead><tr>{}</tr></thead>\n<tbody>",
        dir.points.len() + dir.controls.len(),
        POINT_COLUMNS
            .iter()
            .chain(if web { &WEB_POINT_COLUMNS[..] } else { &[] })
            .map(|c| format!("<th>{}</th>", esc(c)))
            .collect::<String>()
    );
    for p in dir.points.iter().chain(&dir.controls) {
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
    h.push_str("</tbody>\n</table>\n</div>\n</details>\n");
    h
}
