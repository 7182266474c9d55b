//! Reports of loadgen sweeps (`DIR/loadgen.json`): one table per entry of
//! the experiment's `tables` (pacing, latency, set-up, memory, CPU, shards),
//! a row per setting, every figure the median over repetitions with the
//! smallest and largest beside it. Memory per connection is the slope of peak
//! RSS between the smallest and largest connection count, and shard scaling
//! the ratio of N merged shards to one process, both taken repetition by
//! repetition so their spread is their own.

use crate::peers::Spread;
use crate::{Format, ReportError};
use connlab_lab::{LoadgenDir, LoadgenParams, LoadgenPoint, LoadgenTable, Rate};
use html_escape::encode_text as esc;
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// Renders the report of a loadgen sweep.
pub fn render_loadgen(dir: &LoadgenDir, format: Format) -> Result<String, ReportError> {
    let tables = tables(dir);
    Ok(match format {
        Format::Csv => csv_text(&tables)?,
        Format::Markdown => markdown(dir, &tables),
        Format::Html => html(dir, &tables),
    })
}

/// A figure of a point: its CSV name, heading, unit and how to read it.
struct Metric {
    key: &'static str,
    heading: &'static str,
    unit: &'static str,
    get: fn(&LoadgenPoint) -> Option<f64>,
}

const fn metric(
    key: &'static str,
    heading: &'static str,
    unit: &'static str,
    get: fn(&LoadgenPoint) -> Option<f64>,
) -> Metric {
    Metric {
        key,
        heading,
        unit,
        get,
    }
}

const PACING: &[Metric] = &[
    metric("send_lag_p50_us", "send lag p50", "µs", |p| {
        Some(p.client.send_lag_us.p50)
    }),
    metric("send_lag_p99_us", "send lag p99", "µs", |p| {
        Some(p.client.send_lag_us.p99)
    }),
    metric("send_lag_p999_us", "send lag p99.9", "µs", |p| {
        Some(p.client.send_lag_us.p999)
    }),
    metric("send_lag_max_us", "send lag max", "µs", |p| {
        Some(p.client.send_lag_us.max)
    }),
    metric(
        "send_deviation_stddev_us",
        "send deviation stddev",
        "µs",
        |p| Some(p.client.send_deviation_us.stddev),
    ),
    metric("send_deviation_max_us", "send deviation max", "µs", |p| {
        Some(p.client.send_deviation_us.max)
    }),
];

const LATENCY: &[Metric] = &[
    metric("service_mean_us", "service mean", "µs", |p| {
        Some(p.client.service_latency_us.mean)
    }),
    metric("service_median_us", "service median", "µs", |p| {
        Some(p.client.service_latency_us.p50)
    }),
    metric("service_stddev_us", "service stddev", "µs", |p| {
        Some(p.client.service_latency_us.stddev)
    }),
    metric("service_p99_us", "service p99", "µs", |p| {
        Some(p.client.service_latency_us.p99)
    }),
    metric("service_max_us", "service max", "µs", |p| {
        Some(p.client.service_latency_us.max)
    }),
    metric("completed_per_s", "completed", "req/s", |p| {
        Some(p.client.achieved_rate_per_s)
    }),
    metric("errors", "errors", "", |p| Some(p.client.errors as f64)),
];

const SETUP: &[Metric] = &[
    metric("established", "established", "connections", |p| {
        Some(p.client.established as f64)
    }),
    metric("failed", "failed", "connections", |p| {
        Some(p.client.failed_connections as f64)
    }),
    metric("setup_ms", "set-up time", "ms", |p| {
        Some(p.client.setup_s * 1000.0)
    }),
    metric("setup_rate_per_s", "set-up rate", "connections/s", |p| {
        Some(p.client.setup_rate_per_s)
    }),
];

const MEMORY: &[Metric] = &[
    metric("client_max_rss_kib", "client peak RSS", "KiB", |p| {
        Some(p.client.max_rss_kib as f64)
    }),
    metric("server_max_rss_kib", "server peak RSS", "KiB", |p| {
        p.server.max_rss_kib.map(|k| k as f64)
    }),
];

const CPU: &[Metric] = &[
    metric("client_cpu_s", "client CPU", "s", |p| Some(p.client.cpu_s)),
    metric("server_cpu_s", "server CPU", "s", |p| p.server.cpu_s),
];

const SHARDS: &[Metric] = &[
    metric("measured_sent", "sent", "requests", |p| {
        Some(p.client.measured_sent as f64)
    }),
    metric("measured_completed", "completed", "requests", |p| {
        Some(p.client.measured_completed as f64)
    }),
    metric("service_mean_us", "service mean", "µs", |p| {
        Some(p.client.service_latency_us.mean)
    }),
    metric("service_p50_us", "service p50", "µs", |p| {
        Some(p.client.service_latency_us.p50)
    }),
    metric("service_p90_us", "service p90", "µs", |p| {
        Some(p.client.service_latency_us.p90)
    }),
    metric("service_p99_us", "service p99", "µs", |p| {
        Some(p.client.service_latency_us.p99)
    }),
    metric("service_p999_us", "service p99.9", "µs", |p| {
        Some(p.client.service_latency_us.p999)
    }),
    metric(
        "send_deviation_stddev_us",
        "send deviation stddev",
        "µs",
        |p| Some(p.client.send_deviation_us.stddev),
    ),
    metric("start_skew_ms", "shard start skew", "ms", |p| {
        p.client.start_skew_ms
    }),
];

/// Figures compared between N shards and one process.
const SHARD_RATIOS: &[Metric] = &[
    metric("measured_completed", "completed", "", |p| {
        Some(p.client.measured_completed as f64)
    }),
    metric("service_p50_us", "service p50", "", |p| {
        Some(p.client.service_latency_us.p50)
    }),
    metric("service_p99_us", "service p99", "", |p| {
        Some(p.client.service_latency_us.p99)
    }),
];

/// The axes of a setting, as (CSV column, heading).
const AXES: [(&str, &str); 6] = [
    ("engine", "engine"),
    ("connections", "connections"),
    ("active_ratio", "active"),
    ("rate", "rate (req/s)"),
    ("source_addrs", "source addresses"),
    ("shards", "client processes"),
];

fn axis_values(p: &LoadgenParams) -> [String; 6] {
    [
        p.engine.name().to_string(),
        whole(p.connections as f64),
        p.active_ratio.label.clone(),
        match p.rate {
            Rate::PerSecond(n) => whole(n as f64),
            Rate::Max => "max (closed loop)".into(),
        },
        p.source_addrs.clone().unwrap_or_else(|| "any".into()),
        p.shards.to_string(),
    ]
}

/// One rendered table: which axes it shows, its columns and rows.
struct Table {
    kind: LoadgenTable,
    title: String,
    note: String,
    /// Shown axes (indices into [`AXES`]); an axis of one value is in the facts.
    axes: Vec<usize>,
    /// Value columns: (CSV metric name, heading with unit).
    columns: Vec<(String, String, String)>,
    rows: Vec<Row>,
}

/// One row: a setting (or a pair of settings), repetitions and figures.
struct Row {
    /// Every axis's value, shown or not (CSV has them all).
    axes: [String; 6],
    repetitions: usize,
    values: Vec<Option<Spread>>,
}

/// The settings in plan order with their points, repetitions in order.
fn settings(dir: &LoadgenDir) -> Vec<(LoadgenParams, Vec<&LoadgenPoint>)> {
    let mut out: Vec<(LoadgenParams, Vec<&LoadgenPoint>)> = Vec::new();
    for p in &dir.points {
        let s = p.params.setting();
        match out.iter_mut().find(|(k, _)| *k == s) {
            Some((_, v)) => v.push(p),
            None => out.push((s, vec![p])),
        }
    }
    for (_, v) in &mut out {
        v.sort_by_key(|p| p.params.repetition);
    }
    out
}

/// Axes that take more than one value in the plan.
fn varying_axes(dir: &LoadgenDir) -> Vec<usize> {
    let plan = dir.info.experiment.plan(dir.info.quick);
    let values: Vec<[String; 6]> = plan.iter().map(axis_values).collect();
    let mut axes: Vec<usize> = (0..AXES.len())
        .filter(|i| values.iter().any(|v| v[*i] != values[0][*i]))
        .collect();
    if axes.is_empty() {
        axes.push(0);
    }
    axes
}

fn metric_table(
    dir: &LoadgenDir,
    kind: LoadgenTable,
    title: &str,
    note: &str,
    metrics: &[Metric],
) -> Table {
    let rows = settings(dir)
        .into_iter()
        .map(|(s, points)| Row {
            axes: axis_values(&s),
            repetitions: points.len(),
            values: metrics
                .iter()
                .map(|m| {
                    let v: Vec<f64> = points.iter().filter_map(|p| (m.get)(p)).collect();
                    Spread::of(&v)
                })
                .collect(),
        })
        .collect();
    Table {
        kind,
        title: title.into(),
        note: note.into(),
        axes: varying_axes(dir),
        columns: metrics
            .iter()
            .map(|m| (m.key.into(), m.heading.into(), m.unit.into()))
            .collect(),
        rows,
    }
}

/// Points of one group: by the value of the axis left out, then by repetition.
type ByAxis<'a> = BTreeMap<u64, BTreeMap<u32, &'a LoadgenPoint>>;

/// Groups settings by everything but one axis (`skip`: 1 connections, 5
/// shards) and returns, per group, the points by that axis's value and
/// repetition.
fn groups_without(dir: &LoadgenDir, skip: usize) -> Vec<([String; 6], ByAxis<'_>)> {
    let mut out: Vec<([String; 6], ByAxis)> = Vec::new();
    for p in &dir.points {
        let mut key = axis_values(&p.params);
        key[skip] = String::new();
        let value = if skip == 1 {
            p.params.connections
        } else {
            u64::from(p.params.shards)
        };
        let entry = match out.iter().position(|(k, _)| *k == key) {
            Some(i) => &mut out[i].1,
            None => {
                out.push((key, BTreeMap::new()));
                let last = out.len() - 1;
                &mut out[last].1
            }
        };
        entry
            .entry(value)
            .or_default()
            .insert(p.params.repetition, p);
    }
    out
}

/// Bytes per connection on each side: the slope of peak RSS between the
/// smallest and the largest connection count, per repetition.
fn memory_slope_table(dir: &LoadgenDir) -> Table {
    let mut rows = Vec::new();
    for (mut key, by_conns) in groups_without(dir, 1) {
        let (Some((&lo, lo_reps)), Some((&hi, hi_reps))) =
            (by_conns.first_key_value(), by_conns.last_key_value())
        else {
            continue;
        };
        if hi == lo {
            continue;
        }
        let slope = |get: fn(&LoadgenPoint) -> Option<u64>| -> Vec<f64> {
            lo_reps
                .iter()
                .filter_map(|(rep, a)| {
                    let b = hi_reps.get(rep)?;
                    let (a, b) = (get(a)? as f64, get(b)? as f64);
                    Some((b - a) * 1024.0 / (hi - lo) as f64)
                })
                .collect()
        };
        let client = slope(|p| Some(p.client.max_rss_kib));
        let server = slope(|p| p.server.max_rss_kib);
        key[1] = format!("{} → {}", whole(lo as f64), whole(hi as f64));
        rows.push(Row {
            axes: key,
            repetitions: client.len(),
            values: vec![Spread::of(&client), Spread::of(&server)],
        });
    }
    let mut axes = varying_axes(dir);
    if !axes.contains(&1) {
        axes.push(1);
        axes.sort_unstable();
    }
    Table {
        kind: LoadgenTable::Memory,
        title: "Memory per connection".into(),
        note: "Peak RSS at the largest connection count minus that at the smallest, over the \
               connections added, within each repetition; user-space memory only (socket \
               buffers are the kernel's)."
            .into(),
        axes,
        columns: vec![
            (
                "client_bytes_per_connection".into(),
                "client".into(),
                "B/connection".into(),
            ),
            (
                "server_bytes_per_connection".into(),
                "server".into(),
                "B/connection".into(),
            ),
        ],
        rows,
    }
}

/// N shards against one process: each figure's ratio within a repetition.
fn shard_ratio_table(dir: &LoadgenDir) -> Table {
    let mut rows = Vec::new();
    for (mut key, by_shards) in groups_without(dir, 5) {
        let Some(one) = by_shards.get(&1) else {
            continue;
        };
        for (&k, reps) in by_shards.iter().filter(|(k, _)| **k != 1) {
            let values = SHARD_RATIOS
                .iter()
                .map(|m| {
                    let r: Vec<f64> = reps
                        .iter()
                        .filter_map(|(rep, p)| {
                            let base = (m.get)(one.get(rep)?)?;
                            (base > 0.0).then(|| (m.get)(p).map(|v| v / base))?
                        })
                        .collect();
                    Spread::of(&r)
                })
                .collect();
            key[5] = format!("{k} against 1");
            rows.push(Row {
                axes: key.clone(),
                repetitions: reps.keys().filter(|r| one.contains_key(r)).count(),
                values,
            });
        }
    }
    let mut axes = varying_axes(dir);
    if !axes.contains(&5) {
        axes.push(5);
    }
    Table {
        kind: LoadgenTable::Shards,
        title: "Shards against one process".into(),
        note: "Each figure of the merged shards divided by the one process's of the same \
               repetition; 1.00× means the shards measure what one process does."
            .into(),
        axes,
        columns: SHARD_RATIOS
            .iter()
            .map(|m| (format!("{}_ratio", m.key), m.heading.into(), "×".into()))
            .collect(),
        rows,
    }
}

/// Every table the experiment asks for, in its order.
fn tables(dir: &LoadgenDir) -> Vec<Table> {
    let mut out = Vec::new();
    for kind in &dir.info.experiment.tables {
        match kind {
            LoadgenTable::Pacing => out.push(metric_table(
                dir,
                *kind,
                "Pacing",
                "Send lag: how late each send left after its scheduled instant. Send deviation: \
                 how far each gap between consecutive sends strayed from the schedule's gap.",
                PACING,
            )),
            LoadgenTable::Latency => out.push(metric_table(
                dir,
                *kind,
                "Service latency",
                "From the send of a request to the last byte of its response, over the measured \
                 window.",
                LATENCY,
            )),
            LoadgenTable::Setup => out.push(metric_table(
                dir,
                *kind,
                "Connection set-up",
                "From the first connect to the last connection established.",
                SETUP,
            )),
            LoadgenTable::Memory => {
                out.push(metric_table(
                    dir,
                    *kind,
                    "Peak memory",
                    "Peak RSS of each process over its life.",
                    MEMORY,
                ));
                out.push(memory_slope_table(dir));
            }
            LoadgenTable::Cpu => out.push(metric_table(
                dir,
                *kind,
                "CPU time",
                "User + system seconds: the client's (all shards) and the server's over its \
                 whole life, set-up included.",
                CPU,
            )),
            LoadgenTable::Shards => {
                out.push(metric_table(
                    dir,
                    *kind,
                    "One process and merged shards",
                    "Counts over the measured window; latency from the merged histograms.",
                    SHARDS,
                ));
                out.push(shard_ratio_table(dir));
            }
        }
    }
    out
}

/// A number for a table: whole with thousands separators from 100 up, else
/// up to two decimals without trailing zeros.
fn num(v: f64) -> String {
    if v.abs() >= 100.0 {
        return whole(v);
    }
    let s = if v.abs() >= 1.0 || v == 0.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.3}")
    };
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// A whole number with thousands separators (123,456).
fn whole(v: f64) -> String {
    let n = v.round() as i64;
    let digits = n.unsigned_abs().to_string();
    let mut out = String::new();
    for (i, ch) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(ch);
    }
    if n < 0 {
        format!("-{out}")
    } else {
        out
    }
}

fn cell(s: Option<Spread>, unit: &str) -> String {
    match s {
        None => "—".into(),
        Some(s) if unit == "×" && s.min == s.max => format!("{:.2}×", s.median),
        Some(s) if unit == "×" => format!("{:.2}× ({:.2}–{:.2})", s.median, s.min, s.max),
        Some(s) if s.min == s.max => num(s.median),
        Some(s) => format!("{} ({}–{})", num(s.median), num(s.min), num(s.max)),
    }
}

fn heading(name: &str, unit: &str) -> String {
    if unit.is_empty() || unit == "×" {
        name.to_string()
    } else {
        format!("{name} ({unit})")
    }
}

fn table_cells(t: &Table) -> (Vec<String>, Vec<Vec<String>>) {
    let mut head: Vec<String> = t.axes.iter().map(|i| AXES[*i].1.to_string()).collect();
    head.push("reps".into());
    head.extend(t.columns.iter().map(|(_, h, u)| heading(h, u)));
    let rows = t
        .rows
        .iter()
        .map(|r| {
            let mut c: Vec<String> = t.axes.iter().map(|i| r.axes[*i].clone()).collect();
            c.push(r.repetitions.to_string());
            c.extend(
                r.values
                    .iter()
                    .zip(&t.columns)
                    .map(|(v, (_, _, u))| cell(*v, u)),
            );
            c
        })
        .collect();
    (head, rows)
}

/// (name, value) facts about the sweep.
fn facts(dir: &LoadgenDir) -> Vec<(String, String)> {
    let i = &dir.info;
    let e = &i.experiment;
    let w = &e.workload;
    let cpu = |c: Option<usize>| c.map_or("not pinned".into(), |c| format!("CPU {c}"));
    let plan = e.plan(i.quick);
    let shown = varying_axes(dir);
    let mut fixed = Vec::new();
    if let Some(first) = plan.first() {
        let v = axis_values(first);
        for (k, (_, name)) in AXES.iter().enumerate() {
            if !shown.contains(&k) {
                fixed.push(format!("{name} {}", v[k]));
            }
        }
    }
    let reported = dir
        .points
        .first()
        .map(|p| {
            format!(
                " (the client reports writer {}, reader {})",
                cpu(p.client.writer_cpu),
                cpu(p.client.reader_cpu)
            )
        })
        .unwrap_or_default();
    vec![
        (
            "workload".into(),
            format!(
                "{}, {} B requests, {} B responses, {} s measured after {} s warm-up, {}",
                e.server.protocol.name().to_uppercase(),
                whole(w.request_size.0 as f64),
                whole(w.response_size.0 as f64),
                num(e.duration(i.quick).as_secs_f64()),
                num(w.warmup.0.as_secs_f64()),
                fixed.join(", ")
            ),
        ),
        (
            "placement".into(),
            format!(
                "server {}, client writer {}, client reader {}{reported}",
                cpu(e.placement.server_cpu),
                cpu(e.placement.writer_cpu),
                cpu(e.placement.reader_cpu.or(e.placement.writer_cpu)),
            ),
        ),
        ("points".into(), {
            let reps = plan.iter().map(|p| p.repetition).max().unwrap_or(0);
            format!(
                "{} of {}, {reps} repetition{}{}",
                dir.points.len(),
                i.points_total,
                if reps == 1 { "" } else { "s" },
                if i.quick { " (--quick)" } else { "" }
            )
        }),
        (
            "machine".into(),
            format!(
                "{} CPUs, kernel {}",
                i.environment.cpu_count, i.environment.kernel
            ),
        ),
    ]
}

/// Plan points with no result yet.
fn missing(dir: &LoadgenDir) -> Vec<String> {
    let have: std::collections::BTreeSet<&str> = dir.points.iter().map(|p| p.id.as_str()).collect();
    dir.info
        .experiment
        .plan(dir.info.quick)
        .iter()
        .map(LoadgenParams::id)
        .filter(|id| !have.contains(id.as_str()))
        .collect()
}

/// The command lines of the first point.
fn commands(dir: &LoadgenDir) -> Vec<String> {
    dir.points
        .first()
        .map(|p| p.commands.iter().map(|c| c.join(" ")).collect())
        .unwrap_or_default()
}

fn md_row(cells: &[String]) -> String {
    let mut s = String::from("|");
    for c in cells {
        let _ = write!(s, " {} |", c.replace('|', "\\|"));
    }
    s
}

const SPREAD_NOTE: &str = "Every figure is the median over repetitions with the smallest and \
                           largest in brackets (one number when they agree).";

fn markdown(dir: &LoadgenDir, tables: &[Table]) -> String {
    let e = &dir.info.experiment;
    let mut m = format!("# {}\n\n", e.title);
    if !e.description.trim().is_empty() {
        let _ = writeln!(m, "{}\n", e.description.trim());
    }
    for (k, v) in facts(dir) {
        let _ = writeln!(m, "- **{k}**: {v}");
    }
    let _ = writeln!(m, "\n{SPREAD_NOTE}");
    for t in tables {
        let (head, rows) = table_cells(t);
        let _ = writeln!(m, "\n## {}\n\n{}\n", t.title, t.note);
        let _ = writeln!(m, "{}", md_row(&head));
        let _ = writeln!(m, "{}", md_row(&vec!["---".to_string(); head.len()]));
        for r in &rows {
            let _ = writeln!(m, "{}", md_row(r));
        }
        if rows.is_empty() {
            let _ = writeln!(m, "\n(no points measured for this table yet)");
        }
    }
    let cmds = commands(dir);
    if !cmds.is_empty() {
        let _ = writeln!(m, "\n## Commands (first point)\n");
        for c in cmds {
            let _ = writeln!(m, "    {c}");
        }
    }
    let miss = missing(dir);
    if !miss.is_empty() {
        let _ = writeln!(m, "\nNot measured yet: {}", miss.join(", "));
    }
    m
}

/// One CSV row: one figure of one setting (long form).
#[derive(serde::Serialize)]
struct CsvRow<'a> {
    table: &'a str,
    engine: &'a str,
    connections: &'a str,
    active_ratio: &'a str,
    rate: &'a str,
    source_addrs: &'a str,
    shards: &'a str,
    metric: &'a str,
    unit: &'a str,
    repetitions: usize,
    median: Option<f64>,
    min: Option<f64>,
    max: Option<f64>,
}

fn csv_text(tables: &[Table]) -> Result<String, ReportError> {
    let mut w = csv::Writer::from_writer(Vec::new());
    let round = |v: f64| (v * 1000.0).round() / 1000.0;
    let err = |e: csv::Error| ReportError::Plot(format!("writing CSV: {e}"));
    for t in tables {
        for r in &t.rows {
            for (v, (key, _, unit)) in r.values.iter().zip(&t.columns) {
                let plain = |s: &str| s.replace(',', "");
                let conns = plain(&r.axes[1]);
                let rate = plain(&r.axes[3]);
                w.serialize(CsvRow {
                    table: t.kind.name(),
                    engine: &r.axes[0],
                    connections: &conns,
                    active_ratio: &r.axes[2],
                    rate: &rate,
                    source_addrs: &r.axes[4],
                    shards: &r.axes[5],
                    metric: key,
                    unit: if unit == "×" { "ratio" } else { unit },
                    repetitions: r.repetitions,
                    median: v.map(|s| round(s.median)),
                    min: v.map(|s| round(s.min)),
                    max: v.map(|s| round(s.max)),
                })
                .map_err(err)?;
            }
        }
    }
    let bytes = w
        .into_inner()
        .map_err(|e| ReportError::Plot(format!("writing CSV: {e}")))?;
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

const STYLE: &str = "
body{font-family:system-ui,-apple-system,'Segoe UI',Roboto,sans-serif;margin:2rem auto;max-width:1100px;color:#222;padding:0 1rem}
h1{font-size:1.5rem}h2{font-size:1.2rem;margin-top:2rem;border-bottom:1px solid #ddd}
table{border-collapse:collapse;margin:.5rem 0;font-size:.85rem}
th,td{border:1px solid #ccc;padding:.25rem .45rem;text-align:right}
th{background:#f3f3f3}td.label,th.label{text-align:left}
div.scroll{overflow-x:auto;max-width:100%}
.note{font-size:.85rem;color:#444;max-width:900px}
code{font-size:.8rem;word-break:break-all}
";

fn html(dir: &LoadgenDir, tables: &[Table]) -> String {
    let e = &dir.info.experiment;
    let mut h = format!(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<meta name=\"viewport\" content=\"width=device-width\">\n<title>{t}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n<h1>{t}</h1>\n",
        t = esc(&e.title)
    );
    if !e.description.trim().is_empty() {
        let _ = writeln!(h, "<p class=\"note\">{}</p>", esc(e.description.trim()));
    }
    h.push_str("<table>\n");
    for (k, v) in facts(dir) {
        let _ = writeln!(
            h,
            "<tr><th class=\"label\">{}</th><td class=\"label\">{}</td></tr>",
            esc(&k),
            esc(&v)
        );
    }
    h.push_str("</table>\n");
    let _ = writeln!(h, "<p class=\"note\">{}</p>", esc(SPREAD_NOTE));
    for t in tables {
        let (head, rows) = table_cells(t);
        let labels = t.axes.len();
        let _ = writeln!(
            h,
            "<h2>{}</h2>\n<p class=\"note\">{}</p>\n<div class=\"scroll\"><table>\n<thead><tr>",
            esc(&t.title),
            esc(&t.note)
        );
        for (i, c) in head.iter().enumerate() {
            let class = if i < labels { " class=\"label\"" } else { "" };
            let _ = write!(h, "<th{class}>{}</th>", esc(c));
        }
        h.push_str("</tr></thead>\n<tbody>\n");
        for r in &rows {
            h.push_str("<tr>");
            for (i, c) in r.iter().enumerate() {
                let class = if i < labels { " class=\"label\"" } else { "" };
                let _ = write!(h, "<td{class}>{}</td>", esc(c));
            }
            h.push_str("</tr>\n");
        }
        h.push_str("</tbody></table></div>\n");
        if rows.is_empty() {
            h.push_str("<p class=\"note\">No points measured for this table yet.</p>\n");
        }
    }
    let cmds = commands(dir);
    if !cmds.is_empty() {
        h.push_str("<h2>Commands (first point)</h2>\n<ul>\n");
        for c in cmds {
            let _ = writeln!(h, "<li><code>{}</code></li>", esc(&c));
        }
        h.push_str("</ul>\n");
    }
    let miss = missing(dir);
    if !miss.is_empty() {
        let _ = writeln!(
            h,
            "<h2>Not measured yet</h2>\n<p class=\"note\">{}</p>",
            esc(&miss.join(", "))
        );
    }
    h.push_str("</body>\n</html>\n");
    h
}

#[cfg(test)]
mod tests {
    use super::*;
    use connlab_lab::{
        ClientFigures, LoadgenExperiment, LoadgenInfo, ServerFigures, LOADGEN_POINT_SCHEMA,
    };

    const FILE: &str = r#"
kind = "loadgen"
name = "fixture"
title = "Fixture"
tables = ["latency", "memory", "shards", "pacing"]
repetitions = 2
[server]
engines = ["epoll"]
[workload]
connections = [100, 1100]
active_ratios = ["1/4"]
rates = [2000]
duration = "1s"
shards = [1, 2]
[placement]
server_cpu = 1
writer_cpu = 0
"#;

    fn point(p: &LoadgenParams) -> LoadgenPoint {
        let rep = f64::from(p.repetition);
        let shards = f64::from(p.shards);
        let mut client: ClientFigures = serde_json::from_value(serde_json::json!({
            "established": p.connections, "failed_connections": 0, "setup_s": 0.1,
            "setup_rate_per_s": 1000.0, "measured_sent": 2000, "measured_completed": 2000,
            "errors": 0, "achieved_rate_per_s": 2000.0,
            "service_latency_us": {"count": 2000, "mean": 100.0, "stddev": 10.0, "min": 50.0,
                "p50": 90.0 * shards, "p90": 120.0, "p99": 200.0 + rep, "p999": 300.0,
                "p9999": 400.0, "max": 500.0},
            "send_lag_us": {"count": 2000, "mean": 10.0, "stddev": 1.0, "min": 1.0, "p50": 5.0,
                "p90": 8.0, "p99": 20.0 * rep, "p999": 30.0, "p9999": 40.0, "max": 50.0},
            "send_deviation_us": {"count": 2000, "stddev": 3.0, "median": 1.0, "max": 9.0},
            "cpu_s": 0.5, "max_rss_kib": 1000
        }))
        .unwrap();
        // 2 KiB more per connection on the client, 1 KiB on the server.
        client.max_rss_kib = 1000 + 2 * p.connections;
        LoadgenPoint {
            schema: LOADGEN_POINT_SCHEMA.into(),
            id: p.id(),
            params: p.clone(),
            client,
            server: ServerFigures {
                cpu_s: Some(0.2),
                max_rss_kib: Some(500 + p.connections),
            },
            commands: vec![vec!["connlab".into(), "serve".into()]],
            wall_s: 1.0,
            finished_unix_s: 0.0,
        }
    }

    fn fixture() -> LoadgenDir {
        let experiment = LoadgenExperiment::from_toml(FILE, "f.toml").unwrap();
        let plan = experiment.plan(false);
        // The last point is missing.
        let points = plan[..plan.len() - 1].iter().map(point).collect();
        LoadgenDir {
            info: LoadgenInfo {
                schema: "connlab.loadgen.sweep/1".into(),
                points_total: plan.len(),
                experiment,
                quick: false,
                environment: connlab_os::Environment::capture(),
                started_unix_s: 0.0,
            },
            points,
        }
    }

    #[test]
    fn markdown_has_every_table_with_medians_and_spread() {
        let md = render_loadgen(&fixture(), Format::Markdown).unwrap();
        for s in [
            "## Service latency",
            "## Memory per connection",
            "## Shards against one process",
            "## Pacing",
            "| connections | client processes | reps | service mean (µs) |",
            "send lag p99.9 (µs)",
            // Send lag p99 is 20 and 40 over the two repetitions.
            "| 30 (20–40) |",
            "| 100 → 1,100 | 2 | 1 |",
            "2,048",
            "2 against 1",
            "| 2.00× |",
            "1 s measured after 1 s warm-up",
            "7 of 8, 2 repetitions",
            "server CPU 1, client writer CPU 0, client reader CPU 0",
            "Not measured yet: epoll-1100c-1of4-2000rps-2sh-rep2",
        ] {
            assert!(md.contains(s), "missing {s:?} in\n{md}");
        }
        assert!(!md.contains('?'), "{md}");
    }

    #[test]
    fn numbers_read_well() {
        assert_eq!(num(19375.4), "19,375");
        assert_eq!(num(99.84), "99.84");
        assert_eq!(num(2.0), "2");
        assert_eq!(num(0.0042), "0.004");
        assert_eq!(num(0.0), "0");
        assert_eq!(cell(Spread::of(&[1.0, 3.0, 2.0]), "µs"), "2 (1–3)");
        assert_eq!(cell(Spread::of(&[1.5]), "×"), "1.50×");
        assert_eq!(cell(None, "µs"), "—");
    }

    #[test]
    fn csv_is_long_form_with_every_column() {
        let text = render_loadgen(&fixture(), Format::Csv).unwrap();
        let mut r = csv::Reader::from_reader(text.as_bytes());
        let head: Vec<String> = r.headers().unwrap().iter().map(str::to_string).collect();
        assert_eq!(
            head,
            [
                "table",
                "engine",
                "connections",
                "active_ratio",
                "rate",
                "source_addrs",
                "shards",
                "metric",
                "unit",
                "repetitions",
                "median",
                "min",
                "max"
            ]
        );
        let rows: Vec<csv::StringRecord> = r.records().map(Result::unwrap).collect();
        let slope = rows
            .iter()
            .find(|r| &r[7] == "server_bytes_per_connection" && &r[6] == "1")
            .unwrap();
        assert_eq!(slope[10].parse::<f64>().unwrap(), 1024.0);
        assert!(rows
            .iter()
            .any(|r| &r[7] == "service_p50_us_ratio" && r[10].parse::<f64>().unwrap() == 2.0));
    }

    #[test]
    fn html_is_a_page_of_tables() {
        let page = render_loadgen(&fixture(), Format::Html).unwrap();
        assert!(page.starts_with("<!DOCTYPE html>"));
        // Six tables, the commands and the points not measured.
        assert_eq!(page.matches("<h2>").count(), 8);
        assert!(page.contains("<th>send lag p50 (µs)</th>"));
    }
}
