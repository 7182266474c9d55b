//! Reports of single-IP sweeps (`kind = "singleip"`): the paper's Table 3
//! beside our round trips (with ours/paper and the SAPS/NAT ratio of both),
//! a verdict per claim of the paper, every number the paper gives beside
//! ours, bandwidth against transfer size, the contention experiment's
//! figures, per-stream throughput over time, packet timelines (time against
//! sequence, from linkem's log) and the foreground close-up.
//!
//! Every figure of ours is the median over the valid repetitions (points
//! that failed a validity gate are left out and listed in the validity
//! section), with the range (min–max) beside it when there is more than
//! one.

use crate::{Format, ReportError};
use connlab_lab::{
    bytes_label, fmt_num, judge, median, ExpKind, SingleIpMetric, SingleIpRecord, SingleIpSweep,
    System, Verdict,
};
use html_escape::encode_text as esc;
use plotters::prelude::*;
use std::fmt::Write as _;

mod plots;
#[cfg(test)]
mod tests;
mod text;

use crate::export::{self, Block, Page, Report};
use plots::*;

/// Renders the report of a single-IP sweep.
pub fn render_singleip(sweep: &SingleIpSweep, format: Format) -> Result<String, ReportError> {
    export::export(&SingleIp { sweep }, format)
}

/// The single-IP report kind.
struct SingleIp<'a> {
    sweep: &'a SingleIpSweep,
}

impl Report for SingleIp<'_> {
    type Row = text::CsvRow;

    fn page(&self, format: Format) -> Result<Page, ReportError> {
        let exp = &self.sweep.experiment;
        Ok(Page {
            title: exp.title.clone(),
            description: match format {
                Format::Html => exp.description.clone(),
                _ => String::new(),
            },
            style: STYLE,
            viewport: false,
            blocks: match format {
                Format::Html => {
                    let (mut bandwidth, mut contention, mut environment) =
                        (String::new(), String::new(), String::new());
                    bandwidth_section(&mut bandwidth, self.sweep)?;
                    contention_section(&mut contention, self.sweep)?;
                    environment_section(&mut environment, self.sweep);
                    let mut blocks = vec![Block::Html(html(self.sweep)?)];
                    blocks.extend(crate::validity::blocks_with(
                        &validity(self.sweep),
                        crate::validity::NO_CONTROL,
                    ));
                    blocks.extend([
                        Block::Html(bandwidth),
                        Block::Html(contention),
                        Block::Html(environment),
                    ]);
                    blocks
                }
                _ => {
                    let mut blocks = vec![Block::Markdown(text::markdown(self.sweep))];
                    blocks.extend(crate::validity::blocks_with(
                        &validity(self.sweep),
                        crate::validity::NO_CONTROL,
                    ));
                    blocks
                }
            },
        })
    }

    fn rows(&self) -> Result<Vec<text::CsvRow>, ReportError> {
        Ok(text::rows(self.sweep))
    }
}

/// The points as their gates left them.
fn validity(sweep: &SingleIpSweep) -> crate::validity::Summary {
    crate::validity::Summary::of(
        sweep
            .points
            .iter()
            .map(|r| (r.id.as_str(), r.validity.as_ref())),
    )
}

const STYLE: &str = "
body{font-family:system-ui,sans-serif;margin:1.2rem;max-width:1180px;color:#222}
h1{font-size:1.35rem}h2{font-size:1.15rem;margin-top:2rem;border-bottom:1px solid #ddd}
h3{font-size:1rem}
table{border-collapse:collapse;margin:.6rem 0;font-size:.88rem}
th,td{border:1px solid #ccc;padding:.25rem .45rem;text-align:right;vertical-align:top}
th{background:#f3f3f3}td{white-space:nowrap}td.l,th.l,td.label,th.label{text-align:left;white-space:normal}
td.holds{background:#e3f4e3}td.fails{background:#f8e0e0}td.na{background:#eee}td.noisy{background:#fdf3d8}
.note{font-size:.86rem;color:#444;max-width:950px}
.plots{display:flex;flex-wrap:wrap;gap:.5rem}
.plots figure{margin:0;flex:0 1 520px;min-width:0}
.plots figure svg{width:100%}svg{max-width:100%;height:auto}
.wrap,.scroll{overflow-x:auto}
";

/// Median and range of values, as text (`—` for none).
fn spread(v: &[f64]) -> String {
    let Some(m) = median(v.iter().copied()) else {
        return "—".into();
    };
    if v.len() < 2 {
        return fmt_num(m);
    }
    let lo = v.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    format!("{} [{}–{}]", fmt_num(m), fmt_num(lo), fmt_num(hi))
}

/// [`spread`] for HTML cells: the range on a second, smaller line.
fn spread_html(v: &[f64]) -> String {
    match spread(v).split_once(" [") {
        Some((m, r)) => format!("{m}<br><small>[{r}</small>"),
        None => spread(v),
    }
}

fn ratio(ours: Option<f64>, paper: f64) -> String {
    match ours {
        Some(o) if paper != 0.0 => format!("{:.2}", o / paper),
        _ => "—".into(),
    }
}

fn system_label(s: System) -> String {
    match s.paper_name() {
        Some(p) => format!("{} ({p})", s.name()),
        None => s.name().to_string(),
    }
}

/// The paper's value of a metric for a system, if it gives one.
fn paper_value(sweep: &SingleIpSweep, m: SingleIpMetric, s: System) -> Option<f64> {
    sweep
        .experiment
        .paper
        .values
        .iter()
        .find(|v| v.metric == Some(m) && v.system == Some(s))
        .map(|v| v.value)
}

const RTT_METRICS: [(SingleIpMetric, &str); 3] = [
    (SingleIpMetric::RttMinUs, "min"),
    (SingleIpMetric::RttMaxUs, "max"),
    (SingleIpMetric::RttMeanUs, "mean"),
];

fn rtt_systems(sweep: &SingleIpSweep) -> Vec<System> {
    let mut v: Vec<System> = System::ALL
        .into_iter()
        .filter(|s| {
            !sweep.values(SingleIpMetric::RttMeanUs, *s, None).is_empty()
                || RTT_METRICS
                    .iter()
                    .any(|(m, _)| paper_value(sweep, *m, *s).is_some())
        })
        .collect();
    v.dedup();
    v
}

/// The SAPS/NAT ratio of a metric: the paper's and ours (medians).
fn saps_nat(sweep: &SingleIpSweep, m: SingleIpMetric) -> (Option<f64>, Option<f64>) {
    let paper = match (
        paper_value(sweep, m, System::Io16k),
        paper_value(sweep, m, System::Nat),
    ) {
        (Some(a), Some(b)) if b != 0.0 => Some(a / b),
        _ => None,
    };
    let ours = match (
        median(sweep.values(m, System::Io16k, None)),
        median(sweep.values(m, System::Nat, None)),
    ) {
        (Some(a), Some(b)) if b != 0.0 => Some(a / b),
        _ => None,
    };
    (paper, ours)
}

fn verdict_class(v: &Verdict) -> &'static str {
    match v {
        Verdict::Holds => "holds",
        Verdict::DoesNotHold { .. } => "fails",
        Verdict::CannotJudge(_) => "noisy",
        Verdict::CannotMeasure(_) | Verdict::NotJudged => "na",
    }
}

/// The HTML of Table 3 and the claims, under the title and description.
fn html(sweep: &SingleIpSweep) -> Result<String, ReportError> {
    let exp = &sweep.experiment;
    let mut h = String::new();
    let _ = writeln!(
        h,
        "<p class=\"note\">{} of {} points{}; {} repetition(s). Ours: median over the valid repetitions (see the validity section), [min–max] when there are several. \
         What should carry over from the paper is the ordering of the systems and their ratios, not absolute times: the paper ran \
         2000s hardware (Opteron 248 I/O server, Myrinet between I/O server and nodes, gigabit Ethernet), this run is namespaces \
         on one shared virtual machine, so every number is noisy.</p>",
        sweep.points.len(),
        sweep.info.points_total,
        if sweep.info.quick { ", --quick" } else { "" },
        exp.effective(sweep.info.quick).repetitions
    );

    // Table 3.
    let _ = writeln!(
        h,
        "<h2>Table 3: 4-byte round trip (µs), paper beside ours</h2>"
    );
    h.push_str("<div class=\"wrap\"><table>\n<tr><th class=\"l\" rowspan=\"2\">system</th>");
    for (_, name) in RTT_METRICS {
        let _ = write!(h, "<th colspan=\"3\">{name}</th>");
    }
    h.push_str("<th rowspan=\"2\">ours: median</th><th rowspan=\"2\">ours: p99</th></tr>\n<tr>");
    for _ in RTT_METRICS {
        h.push_str("<th>paper</th><th>ours</th><th>ours/paper</th>");
    }
    h.push_str("</tr>\n");
    for s in rtt_systems(sweep) {
        let _ = write!(h, "<tr><td class=\"l\">{}</td>", esc(&system_label(s)));
        for (m, _) in RTT_METRICS {
            let ours = sweep.values(m, s, None);
            let p = paper_value(sweep, m, s);
            let _ = write!(
                h,
                "<td>{}</td><td>{}</td><td>{}</td>",
                p.map_or("—".into(), fmt_num_paper),
                spread_html(&ours),
                p.map_or("—".into(), |p| ratio(median(ours.iter().copied()), p))
            );
        }
        let p50 = sweep.values(SingleIpMetric::RttMedianUs, s, None);
        let p99: Vec<f64> = sweep
            .select(ExpKind::Rtt, s, connlab_lab::RTT_BYTES)
            .iter()
            .filter_map(|r| r.rtt.as_ref().map(|x| x.p99_us))
            .collect();
        let _ = writeln!(
            h,
            "<td>{}</td><td>{}</td></tr>",
            spread_html(&p50),
            spread_html(&p99)
        );
    }
    h.push_str("</table></div>\n");
    h.push_str("<table><tr><th class=\"l\">SAPS / NAT</th><th>paper</th><th>ours (io16k / nat)</th></tr>\n");
    for (m, name) in RTT_METRICS {
        let (p, o) = saps_nat(sweep, m);
        let _ = writeln!(
            h,
            "<tr><td class=\"l\">{name}</td><td>{}</td><td>{}</td></tr>",
            p.map_or("—".into(), |v| format!("{v:.2}")),
            o.map_or("—".into(), |v| format!("{v:.2}"))
        );
    }
    h.push_str("</table>\n");
    let count = sweep
        .points
        .iter()
        .find_map(|r| r.rtt.as_ref().map(|x| x.count));
    let _ = writeln!(
        h,
        "<p class=\"note\">The paper's min/max/mean are over 5 measurements; ours are over the {} round trips of each repetition, so our max \
         is a far tail and compares poorly. Our link adds no delay here (the paper's delay router also only forwarded for this test).</p>",
        count.map_or("?".into(), |c| c.to_string())
    );
    let rtt_cdf = rtt_cdf_plot(sweep)?;
    if let Some(svg) = rtt_cdf {
        let _ = writeln!(h, "<div class=\"plots\"><figure>{svg}</figure></div>");
    }

    // Claims.
    let _ = writeln!(h, "<h2>The paper's claims</h2>");
    h.push_str("<div class=\"wrap\"><table>\n<tr><th class=\"l\">source</th><th class=\"l\">claim</th><th class=\"l\">paper</th><th class=\"l\">verdict</th><th class=\"l\">what we compared</th></tr>\n");
    for c in &exp.paper.claims {
        let v = judge(sweep, &c.check);
        let _ = writeln!(
            h,
            "<tr><td class=\"l\">{}</td><td class=\"l\">{}</td><td class=\"l\">{}</td><td class=\"l {}\">{}</td><td class=\"l\">{}</td></tr>",
            esc(&c.source),
            esc(&c.claim),
            esc(c.paper.as_deref().unwrap_or("")),
            verdict_class(&v.verdict),
            v.verdict.word(),
            esc(&v.detail)
        );
    }
    h.push_str("</table></div>\n");

    // Every paper value.
    let _ = writeln!(h, "<h2>Every number the paper gives</h2>");
    h.push_str("<div class=\"wrap\"><table>\n<tr><th class=\"l\">source</th><th class=\"l\">quantity</th><th class=\"l\">system</th><th>paper</th><th>ours</th><th>ours/paper</th></tr>\n");
    for v in &exp.paper.values {
        let ours = match (v.metric, v.system, v.relative_to) {
            (Some(m), Some(s), None) => sweep.values(m, s, v.param.map(|b| b.0)),
            (Some(m), Some(s), Some(over)) => {
                // A ratio: per repetition, this system's figure over the
                // other's (repetitions where both points are valid).
                sweep
                    .paired(m, s, over, v.param.map(|b| b.0))
                    .into_iter()
                    .filter(|(_, _, b)| *b != 0.0)
                    .map(|(_, a, b)| a / b)
                    .collect()
            }
            _ => Vec::new(),
        };
        let _ = writeln!(
            h,
            "<tr><td class=\"l\">{}</td><td class=\"l\">{}{}</td><td class=\"l\">{}</td><td>{} {}</td><td>{}</td><td>{}</td></tr>",
            esc(&v.source),
            esc(&v.quantity),
            v.param.map_or(String::new(), |b| format!(" ({})", bytes_label(b.0))),
            v.system.map_or(String::new(), system_label),
            fmt_num_paper(v.value),
            esc(&v.unit),
            if v.metric.is_some() { spread(&ours) } else { "not measured as such".into() },
            ratio(median(ours.iter().copied()), v.value)
        );
    }
    h.push_str("</table></div>\n");
    h.push_str("<p class=\"note\">The paper's foreground delays (Figures 8-9) are the delays the sender observed; ours is the median time the foreground's packets spent queued: in the emulator beyond the link's own delay, or, with the bottleneck on the front host, the sampled backlog of the host queues (the front's interface, NAT's switch port) over the link rate while the foreground ran. NAT's 1.6 s is compared through the time until the streams first share fairly and the early-window fairness below.</p>\n");
    Ok(h)
}

/// Paper values as printed (217.6 keeps its decimal).
fn fmt_num_paper(v: f64) -> String {
    let s = format!("{v}");
    if s.contains('e') {
        fmt_num(v)
    } else {
        s
    }
}

fn bandwidth_sizes(sweep: &SingleIpSweep) -> Vec<u64> {
    let mut v: Vec<u64> = sweep
        .points
        .iter()
        .filter(|r| r.point.experiment == ExpKind::Bandwidth)
        .map(|r| r.point.param)
        .collect();
    v.sort_unstable();
    v.dedup();
    v
}

fn systems_of(sweep: &SingleIpSweep, kind: ExpKind) -> Vec<System> {
    System::ALL
        .into_iter()
        .filter(|s| {
            sweep
                .points
                .iter()
                .any(|r| r.point.experiment == kind && r.point.system == *s)
        })
        .collect()
}

fn bandwidth_section(h: &mut String, sweep: &SingleIpSweep) -> Result<(), ReportError> {
    let sizes = bandwidth_sizes(sweep);
    if sizes.is_empty() {
        return Ok(());
    }
    let systems = systems_of(sweep, ExpKind::Bandwidth);
    let _ = writeln!(h, "<h2>Figure 7: bandwidth against transfer size</h2>");
    let mut series = Vec::new();
    for s in &systems {
        let pts: Vec<(f64, f64)> = sizes
            .iter()
            .filter_map(|&z| {
                median(sweep.values(SingleIpMetric::TransferMbitS, *s, Some(z)))
                    .map(|m| (z as f64, m))
            })
            .collect();
        series.push((s.name().to_string(), pts));
    }
    let svg = line_plot(
        "Bandwidth against transfer size (connect to last byte)",
        "transfer size",
        "Mbit/s",
        &series,
        Axis::LogSize,
        Axis::Log,
    )?;
    let _ = writeln!(h, "<div class=\"plots\"><figure>{svg}</figure></div>");
    h.push_str("<div class=\"wrap\"><table>\n<tr><th class=\"l\">size</th>");
    for s in &systems {
        let _ = write!(h, "<th>{} ms</th><th>{} Mbit/s</th>", s.name(), s.name());
    }
    h.push_str("<th>io16k / nat time</th></tr>\n");
    for &z in &sizes {
        let _ = write!(h, "<tr><td class=\"l\">{}</td>", bytes_label(z));
        for s in &systems {
            let _ = write!(
                h,
                "<td>{}</td><td>{}</td>",
                spread_html(&sweep.values(SingleIpMetric::TransferMs, *s, Some(z))),
                spread_html(&sweep.values(SingleIpMetric::TransferMbitS, *s, Some(z)))
            );
        }
        let r = match (
            median(sweep.values(SingleIpMetric::TransferMs, System::Io16k, Some(z))),
            median(sweep.values(SingleIpMetric::TransferMs, System::Nat, Some(z))),
        ) {
            (Some(a), Some(b)) if b > 0.0 => format!("{:.2}", a / b),
            _ => "—".into(),
        };
        let _ = writeln!(h, "<td>{r}</td></tr>");
    }
    h.push_str("</table></div>\n<p class=\"note\">Per point the median over its transfers; the paper plots the mean of 3 measurements and prints no numbers.</p>\n");
    // (d) the relay's cost: CPU per byte at the largest size.
    if let Some(&z) = sizes.last() {
        let _ = writeln!(
            h,
            "<h3>Relay cost at {}: CPU seconds per GB (not in the paper)</h3>\n<table><tr><th class=\"l\">system</th><th>Mbit/s</th><th>front process CPU s/GB</th><th>app-nodes CPU s/GB</th></tr>",
            bytes_label(z)
        );
        for s in &systems {
            let _ = writeln!(
                h,
                "<tr><td class=\"l\">{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                esc(&system_label(*s)),
                spread(&sweep.values(SingleIpMetric::TransferMbitS, *s, Some(z))),
                spread(&sweep.values(SingleIpMetric::FrontCpuSPerGb, *s, Some(z))),
                spread(&sweep.values(SingleIpMetric::NodesCpuSPerGb, *s, Some(z)))
            );
        }
        h.push_str("</table>\n<p class=\"note\">The front process is the io-server or HAProxy; NAT's forwarding runs in the kernel (softirq) and is charged to no process, so its row shows only the idle gateway.</p>\n");
    }
    Ok(())
}

const CONTENTION_COLUMNS: [(SingleIpMetric, &str); 8] = [
    (SingleIpMetric::FgCompletionMs, "foreground completion (ms)"),
    (SingleIpMetric::FgQueueMs, "foreground queueing (ms)"),
    (SingleIpMetric::QueuePeakMs, "host queue peak (ms)"),
    (SingleIpMetric::Jain, "Jain, overlap"),
    (SingleIpMetric::JainEarly, "Jain, early window"),
    (SingleIpMetric::FairAfterS, "fair after (s)"),
    (SingleIpMetric::LinkUtilisation, "link utilisation"),
    (SingleIpMetric::TransferMs, "drops"),
];

fn contention_values(sweep: &SingleIpSweep, m: SingleIpMetric, s: System, fg: u64) -> Vec<f64> {
    if m == SingleIpMetric::TransferMs {
        // The drops column.
        return sweep
            .select(ExpKind::Contention, s, fg)
            .iter()
            .filter_map(|r| r.contention.as_ref().map(|c| c.drops as f64))
            .collect();
    }
    sweep.values(m, s, Some(fg))
}

fn contention_section(h: &mut String, sweep: &SingleIpSweep) -> Result<(), ReportError> {
    let systems = systems_of(sweep, ExpKind::Contention);
    if systems.is_empty() {
        return Ok(());
    }
    let mut fgs: Vec<u64> = sweep
        .points
        .iter()
        .filter(|r| r.point.experiment == ExpKind::Contention)
        .map(|r| r.point.param)
        .collect();
    fgs.sort_unstable();
    fgs.dedup();
    let c = sweep.experiment.effective(sweep.info.quick).contention;
    let _ = writeln!(
        h,
        "<h2>Figures 8-12: a foreground transfer under two background streams</h2>"
    );
    if let Some(c) = &c {
        let _ = writeln!(
            h,
            "<p class=\"note\">Two {} background streams, then after {} s the foreground; link {} Mbit/s, {} ms each way, queue {} packets {}. \
             The io16k send limit stands for the paper's IFQ limit, iooff for its runs without it. Jain's index is over the streams as large \
             as the background, in the whole {} ms bins in which all of them ran; the early window is its first {} s; fair after: from the start of the overlap to the first {} s window with Jain's index of at least {}.</p>",
            bytes_label(c.background.0),
            fmt_num(c.foreground_delay.0.as_secs_f64()),
            fmt_num(c.rate.0 as f64 / 1e6),
            fmt_num(c.delay.0.as_secs_f64() * 1e3),
            c.queue,
            match (c.bottleneck, c.nat_switch_queue) {
                (connlab_lab::Bottleneck::Front, Some(n)) => format!(
                    "on the front host's egress (sampled every 5 ms), nat's packets first through a {n}-packet switch queue at the same rate"
                ),
                (connlab_lab::Bottleneck::Front, None) => {
                    "on the front host's egress (sampled every 5 ms)".to_string()
                }
                (connlab_lab::Bottleneck::Emulator, Some(n)) => {
                    format!("in the emulator, nat's packets first through a {n}-packet switch queue")
                }
                (connlab_lab::Bottleneck::Emulator, None) => "in the emulator".to_string(),
            },
            fmt_num(c.bin.0.as_secs_f64() * 1e3),
            fmt_num(c.early_window.0.as_secs_f64()),
            fmt_num(connlab_lab::FAIR_WINDOW_S),
            fmt_num(connlab_lab::FAIR_JAIN)
        );
    }
    h.push_str("<div class=\"wrap\"><table>\n<tr><th class=\"l\">foreground</th><th class=\"l\">system</th>");
    for (_, name) in CONTENTION_COLUMNS {
        let _ = write!(h, "<th>{name}</th>");
    }
    h.push_str("</tr>\n");
    for &fg in &fgs {
        for s in &systems {
            let _ = write!(
                h,
                "<tr><td class=\"l\">{}</td><td class=\"l\">{}</td>",
                bytes_label(fg),
                esc(&system_label(*s))
            );
            for (m, _) in CONTENTION_COLUMNS {
                let _ = write!(
                    h,
                    "<td>{}</td>",
                    spread_html(&contention_values(sweep, m, *s, fg))
                );
            }
            h.push_str("</tr>\n");
        }
    }
    h.push_str("</table></div>\n");
    for &fg in &fgs {
        let _ = writeln!(
            h,
            "<h3>{} foreground: per-stream throughput and packet timelines (first repetition)</h3>\n<div class=\"plots\">",
            bytes_label(fg)
        );
        for s in &systems {
            let Some(r) = sweep.select(ExpKind::Contention, *s, fg).into_iter().next() else {
                continue;
            };
            let Some(c) = &r.contention else { continue };
            let series: Vec<(String, Vec<(f64, f64)>)> = c
                .streams
                .iter()
                .map(|st| {
                    (
                        st.name.clone(),
                        st.bins_mbit_s
                            .iter()
                            .enumerate()
                            .skip((st.start_s / c.bin_s).floor().max(0.0) as usize)
                            .map(|(k, v)| ((k as f64 + 0.5) * c.bin_s, *v))
                            .collect(),
                    )
                })
                .collect();
            let svg = line_plot(
                &format!("{}: throughput per stream", system_label(*s)),
                "time since the background started (s)",
                "Mbit/s",
                &series,
                Axis::Linear,
                Axis::Linear,
            )?;
            let _ = writeln!(h, "<figure>{svg}</figure>");
            let svg = timeline_plot(
                &format!("{}: time against sequence", system_label(*s)),
                r,
                None,
            )?;
            let _ = writeln!(h, "<figure>{svg}</figure>");
            if fg < c.streams.get(1).map_or(u64::MAX, |b| b.size) {
                let fgs = &c.streams[0];
                let t0 = fgs.start_s;
                let t1 = t0 + fgs.completion_s.unwrap_or(1.0);
                let pad = (t1 - t0) * 0.1 + 0.005;
                let svg = timeline_plot(
                    &format!("{}: the foreground close-up", system_label(*s)),
                    r,
                    Some((t0 - pad, t1 + pad)),
                )?;
                let _ = writeln!(h, "<figure>{svg}</figure>");
            }
        }
        h.push_str("</div>\n");
    }
    h.push_str("<p class=\"note\">Timelines: data packets toward the clients as they reached the emulator (linkem's log), sequence relative to each stream's first; every foreground packet of a small foreground and every n-th of the rest (n at least 20, about 1,500 per large stream); drops as crosses.</p>\n");
    Ok(())
}

fn environment_section(h: &mut String, sweep: &SingleIpSweep) {
    let i = &sweep.info;
    let e = &i.environment;
    let cc = sweep
        .points
        .first()
        .map_or(sweep.experiment.congestion_control.clone(), |r| {
            r.congestion_control.clone()
        });
    let _ = writeln!(h, "<h2>Environment</h2>\n<table>");
    let rows = [
        ("kernel", e.kernel.clone()),
        ("CPUs", e.cpu_count.to_string()),
        ("clock source", e.clock_source.clone()),
        (
            "placement",
            format!(
                "clients and linkem on CPU {}; front process on CPU {}; app-nodes and node servers on CPU {}; front host's RPS on CPU {}",
                i.placement.clients, i.placement.front, i.placement.nodes, i.placement.front_rps
            ),
        ),
        ("congestion control", cc),
        ("connlab", i.connlab_version.clone()),
        ("started (Unix s)", format!("{:.0}", i.started_unix_s)),
    ];
    for (k, v) in rows {
        let _ = writeln!(
            h,
            "<tr><th class=\"l\">{k}</th><td class=\"l\">{}</td></tr>",
            esc(&v)
        );
    }
    h.push_str("</table>\n");
    let warnings: Vec<String> = sweep
        .points
        .iter()
        .flat_map(|r| r.warnings.iter().map(move |w| format!("{}: {w}", r.id)))
        .collect();
    if !warnings.is_empty() {
        h.push_str("<h2>Warnings</h2>\n<ul>\n");
        for w in warnings {
            let _ = writeln!(h, "<li>{}</li>", esc(&w));
        }
        h.push_str("</ul>\n");
    }
    let missing = sweep.info.points_total.saturating_sub(sweep.points.len());
    if missing > 0 {
        let _ = writeln!(
            h,
            "<p class=\"note\">{missing} points of the plan are missing (not run yet, or failed: see logs/).</p>"
        );
    }
}
