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

use crate::brief::Headline;
use crate::{Format, ReportError};
use connlab_lab::{
    bytes_label, fmt_num, median, ExpKind, SingleIpMetric, SingleIpRecord, SingleIpSweep, System,
};
use plotters::prelude::*;

mod plots;
mod rows;
#[cfg(test)]
mod tests;

use crate::export::{self, Block, Cell, Group, Page, Report, Table};
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
    type Row = rows::CsvRow;

    /// Table 3, the SAPS/NAT ratios, the claims and the validity in every
    /// format; the figures where the format carries them; the reading
    /// notes, every paper value, Figures 7-12 and the environment with the
    /// detail.
    fn page(&self, format: Format) -> Result<Page, ReportError> {
        let (sweep, exp) = (self.sweep, &self.sweep.experiment);
        let detail = format.detail();
        let mut table3 = table3(sweep, format)?;
        // The round trips' CDF is the key plot: it goes up with the verdicts.
        let key = table3
            .iter()
            .position(|b| matches!(b, Block::Figure { .. }))
            .map(|i| table3.remove(i));
        let headlines: Vec<Headline> = crate::verdicts::singleip_rows(sweep)
            .iter()
            .map(Headline::of_row)
            .collect();
        let mut blocks = crate::brief::section(Vec::new(), &headlines, "claim", key);
        if detail {
            blocks.push(Block::Heading("The sweep".into()));
            blocks.push(Block::Note(intro(sweep)));
        }
        blocks.extend(table3);
        if detail {
            blocks.extend(paper_values(sweep));
        }
        blocks.extend(crate::validity::blocks_with(
            &validity(sweep),
            crate::validity::NO_CONTROL,
        ));
        if detail {
            blocks.extend(bandwidth(sweep, format)?);
            blocks.extend(contention(sweep, format)?);
            blocks.extend(crate::summary::rerun_blocks(&exp.name, sweep.info.quick));
            blocks.extend(environment(sweep));
        }
        Ok(Page {
            title: exp.title.clone(),
            description: if detail {
                exp.description.clone()
            } else {
                String::new()
            },
            style: STYLE.into(),
            viewport: false,
            blocks,
        })
    }

    fn rows(&self) -> Result<Vec<rows::CsvRow>, ReportError> {
        Ok(rows::rows(self.sweep))
    }
}

/// The points as their gates left them.
fn validity(sweep: &SingleIpSweep) -> crate::validity::Summary {
    crate::validity::Summary::of(
        sweep
            .points
            .iter()
            .map(|r| (r.id.as_str(), r.checked.validity.as_ref())),
    )
}

const STYLE: &str = "
body{font-family:system-ui,sans-serif;margin:1.2rem;max-width:1180px;color:#222}
h1{font-size:1.35rem}h2{font-size:1.15rem;margin-top:2rem;border-bottom:1px solid #ddd}
h3{font-size:1rem}
table{border-collapse:collapse;margin:.6rem 0;font-size:.88rem}
th,td{border:1px solid #ccc;padding:.25rem .45rem;text-align:right;vertical-align:top}
th{background:#f3f3f3}td.l,th.l,td.label,th.label{text-align:left;white-space:normal}
td.holds{background:#e3f4e3}td.fails{background:#f8e0e0}td.na{background:#eee}td.noisy{background:#fdf3d8}
.note{font-size:.86rem;color:#444;max-width:950px}
figure.plot{display:block;margin:0 0 .5rem 0;width:100%;max-width:100%}
figure.plot svg{width:100%}svg{max-width:100%;height:auto}
span.spread{display:block;font-size:.75rem;color:#555}
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

/// [`spread`] as a cell: the median, the range as its spread.
fn spread_cell(v: &[f64]) -> Cell {
    match spread(v).split_once(" [") {
        Some((m, r)) => Cell::from(m).spread(Some(r.trim_end_matches(']').to_string())),
        None => Cell::from(spread(v)),
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

/// What the figures are and what should carry over.
fn intro(sweep: &SingleIpSweep) -> String {
    format!(
        "{} of {} points{}; {} repetition(s). Ours: median over the valid repetitions (see the validity section), [min–max] when there are several. \
         What should carry over from the paper is the ordering of the systems and their ratios, not absolute times: the paper ran \
         2000s hardware (Opteron 248 I/O server, Myrinet between I/O server and nodes, gigabit Ethernet), this run is namespaces \
         on one shared virtual machine, so every number is noisy.",
        sweep.points.len(),
        sweep.info.points_total,
        if sweep.info.quick { ", --quick" } else { "" },
        sweep.experiment.effective(sweep.info.quick).repetitions
    )
}

/// Table 3 beside ours, the SAPS/NAT ratios, and the round trips' CDF.
fn table3(sweep: &SingleIpSweep, format: Format) -> Result<Vec<Block>, ReportError> {
    let mut groups: Vec<Group> = RTT_METRICS
        .iter()
        .map(|(_, name)| Group {
            title: (*name).to_string(),
            small: None,
            columns: ["paper", "ours", "ours/paper"].map(String::from).to_vec(),
        })
        .collect();
    groups.push(Group {
        title: "ours".into(),
        small: None,
        columns: ["median", "p99"].map(String::from).to_vec(),
    });
    let rows = rtt_systems(sweep)
        .into_iter()
        .map(|s| {
            let mut row = vec![Cell::from(system_label(s))];
            for (m, _) in RTT_METRICS {
                let ours = sweep.values(m, s, None);
                let p = paper_value(sweep, m, s);
                row.extend([
                    Cell::from(p.map_or("—".into(), fmt_num_paper)),
                    spread_cell(&ours),
                    Cell::from(p.map_or("—".into(), |p| ratio(median(ours.iter().copied()), p))),
                ]);
            }
            let p50 = sweep.values(SingleIpMetric::RttMedianUs, s, None);
            let p99: Vec<f64> = sweep
                .select(ExpKind::Rtt, s, connlab_lab::RTT_BYTES)
                .iter()
                .filter_map(|r| r.rtt.as_ref().map(|x| x.p99_us))
                .collect();
            row.extend([spread_cell(&p50), spread_cell(&p99)]);
            row
        })
        .collect();
    let two = |v: Option<f64>| v.map_or("—".into(), |v| format!("{v:.2}"));
    let mut blocks = vec![
        Block::Heading("Table 3: 4-byte round trip (µs), paper beside ours".into()),
        Block::Table(Table {
            head: vec!["system".into()],
            groups,
            rows,
            labels: 1,
            ..Table::default()
        }),
        Block::Table(Table {
            head: ["SAPS / NAT", "paper", "ours (io16k / nat)"]
                .map(String::from)
                .to_vec(),
            rows: RTT_METRICS
                .iter()
                .map(|(m, name)| {
                    let (p, o) = saps_nat(sweep, *m);
                    vec![Cell::from(*name), Cell::from(two(p)), Cell::from(two(o))]
                })
                .collect(),
            labels: 1,
            ..Table::default()
        }),
    ];
    if format.detail() {
        let count = sweep
            .points
            .iter()
            .find_map(|r| r.rtt.as_ref().map(|x| x.count));
        blocks.push(Block::Note(format!(
            "The paper's min/max/mean are over 5 measurements; ours are over the {} round trips of each repetition, so our max \
             is a far tail and compares poorly. Our link adds no delay here (the paper's delay router also only forwarded for this test).",
            count.map_or("?".into(), |c| c.to_string())
        )));
    }
    if format.figures() {
        if let Some(svg) = rtt_cdf_plot(sweep)? {
            blocks.push(figure(svg));
        }
    }
    Ok(blocks)
}

/// A figure without a caption (the plot's title says it).
fn figure(svg: String) -> Block {
    Block::Figure {
        id: None,
        svg,
        caption: String::new(),
    }
}

/// Every number the paper gives, ours beside it.
fn paper_values(sweep: &SingleIpSweep) -> Vec<Block> {
    let rows = sweep
        .experiment
        .paper
        .values
        .iter()
        .map(|v| {
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
            vec![
                Cell::from(v.source.as_str()),
                Cell::from(format!(
                    "{}{}",
                    v.quantity,
                    v.param
                        .map_or(String::new(), |b| format!(" ({})", bytes_label(b.0)))
                )),
                Cell::from(v.system.map_or(String::new(), system_label)),
                Cell::from(format!("{} {}", fmt_num_paper(v.value), v.unit)),
                if v.metric.is_some() {
                    spread_cell(&ours)
                } else {
                    Cell::from("not measured as such")
                },
                Cell::from(ratio(median(ours.iter().copied()), v.value)),
            ]
        })
        .collect();
    vec![
        Block::Heading("Every number the paper gives".into()),
        Block::Table(Table {
            head: ["source", "quantity", "system", "paper", "ours", "ours/paper"]
                .map(String::from)
                .to_vec(),
            rows,
            labels: 3,
            ..Table::default()
        }),
        Block::Note("The paper's foreground delays (Figures 8-9) are the delays the sender observed; ours is the median time the foreground's packets spent queued: in the emulator beyond the link's own delay, or, with the bottleneck on the front host, the sampled backlog of the host queues (the front's interface, NAT's switch port) over the link rate while the foreground ran. NAT's 1.6 s is compared through the time until the streams first share fairly and the early-window fairness below.".into()),
    ]
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

/// Figure 7: bandwidth against transfer size, and the relay's cost at
/// the largest size (not in the paper).
fn bandwidth(sweep: &SingleIpSweep, format: Format) -> Result<Vec<Block>, ReportError> {
    let sizes = bandwidth_sizes(sweep);
    if sizes.is_empty() {
        return Ok(Vec::new());
    }
    let systems = systems_of(sweep, ExpKind::Bandwidth);
    let mut blocks = vec![Block::Heading(
        "Figure 7: bandwidth against transfer size".into(),
    )];
    if format.figures() {
        let series: Vec<(String, Vec<(f64, f64)>)> = systems
            .iter()
            .map(|s| {
                let pts = sizes
                    .iter()
                    .filter_map(|&z| {
                        median(sweep.values(SingleIpMetric::TransferMbitS, *s, Some(z)))
                            .map(|m| (z as f64, m))
                    })
                    .collect();
                (s.name().to_string(), pts)
            })
            .collect();
        blocks.push(figure(line_plot(
            "Bandwidth against transfer size (connect to last byte)",
            "transfer size",
            "Mbit/s",
            &series,
            Axis::LogSize,
            Axis::Log,
        )?));
    }
    let mut head = vec!["size".to_string()];
    for s in &systems {
        head.extend([format!("{} ms", s.name()), format!("{} Mbit/s", s.name())]);
    }
    head.push("io16k / nat time".into());
    let rows = sizes
        .iter()
        .map(|&z| {
            let mut row = vec![Cell::from(bytes_label(z))];
            for s in &systems {
                row.extend([
                    spread_cell(&sweep.values(SingleIpMetric::TransferMs, *s, Some(z))),
                    spread_cell(&sweep.values(SingleIpMetric::TransferMbitS, *s, Some(z))),
                ]);
            }
            let r = match (
                median(sweep.values(SingleIpMetric::TransferMs, System::Io16k, Some(z))),
                median(sweep.values(SingleIpMetric::TransferMs, System::Nat, Some(z))),
            ) {
                (Some(a), Some(b)) if b > 0.0 => format!("{:.2}", a / b),
                _ => "—".into(),
            };
            row.push(Cell::from(r));
            row
        })
        .collect();
    blocks.push(Block::Table(Table {
        head,
        rows,
        labels: 1,
        ..Table::default()
    }));
    blocks.push(Block::Note("Per point the median over its transfers; the paper plots the mean of 3 measurements and prints no numbers.".into()));
    // (d) the relay's cost: CPU per byte at the largest size.
    if let Some(&z) = sizes.last() {
        blocks.push(Block::Subheading {
            title: format!(
                "Relay cost at {}: CPU seconds per GB (not in the paper)",
                bytes_label(z)
            ),
            link: None,
        });
        blocks.push(Block::Table(Table {
            head: [
                "system",
                "Mbit/s",
                "front process CPU s/GB",
                "app-nodes CPU s/GB",
            ]
            .map(String::from)
            .to_vec(),
            rows: systems
                .iter()
                .map(|s| {
                    vec![
                        Cell::from(system_label(*s)),
                        Cell::from(spread(&sweep.values(
                            SingleIpMetric::TransferMbitS,
                            *s,
                            Some(z),
                        ))),
                        Cell::from(spread(&sweep.values(
                            SingleIpMetric::FrontCpuSPerGb,
                            *s,
                            Some(z),
                        ))),
                        Cell::from(spread(&sweep.values(
                            SingleIpMetric::NodesCpuSPerGb,
                            *s,
                            Some(z),
                        ))),
                    ]
                })
                .collect(),
            labels: 1,
            ..Table::default()
        }));
        blocks.push(Block::Note("The front process is the io-server or HAProxy; NAT's forwarding runs in the kernel (softirq) and is charged to no process, so its row shows only the idle gateway.".into()));
    }
    Ok(blocks)
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

/// Figures 8-12: the foreground under two background streams, a table of
/// every figure and, where the format carries figures, throughput per
/// stream and packet timelines.
fn contention(sweep: &SingleIpSweep, format: Format) -> Result<Vec<Block>, ReportError> {
    let systems = systems_of(sweep, ExpKind::Contention);
    if systems.is_empty() {
        return Ok(Vec::new());
    }
    let mut fgs: Vec<u64> = sweep
        .points
        .iter()
        .filter(|r| r.point.experiment == ExpKind::Contention)
        .map(|r| r.point.param)
        .collect();
    fgs.sort_unstable();
    fgs.dedup();
    let mut blocks = vec![Block::Heading(
        "Figures 8-12: a foreground transfer under two background streams".into(),
    )];
    if let Some(c) = &sweep.experiment.effective(sweep.info.quick).contention {
        blocks.push(Block::Note(contention_setup(c)));
    }
    let mut head = ["foreground", "system"].map(String::from).to_vec();
    head.extend(
        CONTENTION_COLUMNS
            .iter()
            .map(|(_, name)| (*name).to_string()),
    );
    let mut rows = Vec::new();
    for &fg in &fgs {
        for s in &systems {
            let mut row = vec![Cell::from(bytes_label(fg)), Cell::from(system_label(*s))];
            row.extend(
                CONTENTION_COLUMNS
                    .iter()
                    .map(|(m, _)| spread_cell(&contention_values(sweep, *m, *s, fg))),
            );
            rows.push(row);
        }
    }
    blocks.push(Block::Table(Table {
        head,
        rows,
        labels: 2,
        ..Table::default()
    }));
    if format.figures() {
        for &fg in &fgs {
            blocks.push(Block::Subheading {
                title: format!(
                    "{} foreground: per-stream throughput and packet timelines (first repetition)",
                    bytes_label(fg)
                ),
                link: None,
            });
            for s in &systems {
                blocks.extend(contention_figures(sweep, *s, fg)?);
            }
        }
        blocks.push(Block::Note("Timelines: data packets toward the clients as they reached the emulator (linkem's log), sequence relative to each stream's first; every foreground packet of a small foreground and every n-th of the rest (n at least 20, about 1,500 per large stream); drops as crosses.".into()));
    }
    Ok(blocks)
}

/// The contention experiment's setup in words.
fn contention_setup(c: &connlab_lab::ContentionSection) -> String {
    format!(
        "Two {} background streams, then after {} s the foreground; link {} Mbit/s, {} ms each way, queue {} packets {}. \
         The io16k send limit stands for the paper's IFQ limit, iooff for its runs without it. Jain's index is over the streams as large \
         as the background, in the whole {} ms bins in which all of them ran; the early window is its first {} s; fair after: from the start of the overlap to the first {} s window with Jain's index of at least {}.",
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
    )
}

/// The first repetition's throughput per stream and time against sequence
/// of system `s` at foreground `fg` (and the foreground's close-up when it
/// is smaller than the background).
fn contention_figures(
    sweep: &SingleIpSweep,
    s: System,
    fg: u64,
) -> Result<Vec<Block>, ReportError> {
    let Some(r) = sweep.select(ExpKind::Contention, s, fg).into_iter().next() else {
        return Ok(Vec::new());
    };
    let Some(c) = &r.contention else {
        return Ok(Vec::new());
    };
    let mut out = Vec::new();
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
        &format!("{}: throughput per stream", system_label(s)),
        "time since the background started (s)",
        "Mbit/s",
        &series,
        Axis::Linear,
        Axis::Linear,
    )?;
    out.push(figure(svg));
    let svg = timeline_plot(
        &format!("{}: time against sequence", system_label(s)),
        r,
        None,
    )?;
    out.push(figure(svg));
    if fg < c.streams.get(1).map_or(u64::MAX, |b| b.size) {
        let fgs = &c.streams[0];
        let t0 = fgs.start_s;
        let t1 = t0 + fgs.completion_s.unwrap_or(1.0);
        let pad = (t1 - t0) * 0.1 + 0.005;
        let svg = timeline_plot(
            &format!("{}: the foreground close-up", system_label(s)),
            r,
            Some((t0 - pad, t1 + pad)),
        )?;
        out.push(figure(svg));
    }
    Ok(out)
}

/// The machine, the placement, every warning and the points missing.
fn environment(sweep: &SingleIpSweep) -> Vec<Block> {
    let i = &sweep.info;
    let e = &i.environment;
    let cc = sweep
        .points
        .first()
        .map_or(sweep.experiment.congestion_control.clone(), |r| {
            r.congestion_control.clone()
        });
    let facts = [
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
    let mut blocks = vec![
        Block::Heading("Environment".into()),
        Block::Facts {
            id: None,
            facts: facts.map(|(k, v)| (k.to_string(), v)).to_vec(),
        },
    ];
    let mut warnings: Vec<(String, Vec<String>)> = Vec::new();
    for r in &sweep.points {
        for w in &r.warnings {
            match warnings.iter_mut().find(|(t, _)| t == w) {
                Some((_, ids)) => ids.push(r.id.clone()),
                None => warnings.push((w.clone(), vec![r.id.clone()])),
            }
        }
    }
    if !warnings.is_empty() {
        blocks.extend(crate::tally::blocks(warnings, "points"));
    }
    let missing = sweep.info.points_total.saturating_sub(sweep.points.len());
    if missing > 0 {
        blocks.push(Block::Note(format!(
            "{missing} points of the plan are missing (not run yet, or failed: see logs/)."
        )));
    }
    blocks
}
