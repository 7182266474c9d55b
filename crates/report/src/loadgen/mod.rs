//! Reports of loadgen sweeps (`DIR/loadgen.json`): one table per entry of
//! the experiment's `tables` (pacing, latency, set-up, memory, CPU, shards),
//! a row per setting, every figure the median over repetitions with the
//! smallest and largest beside it. Memory per connection is the slope of peak
//! RSS between the smallest and largest connection count, and shard scaling
//! the ratio of N merged shards to one process, both taken repetition by
//! repetition so their spread is their own.
//!
//! Only points that passed their validity gates count (points measured
//! before gates existed count as valid): a table's row says how many of its
//! repetitions it left out as invalid, and the validity section lists each
//! invalid point with the gates it failed.

use crate::export::{self, Block, Empty, Page, Report};
use crate::summary;
use crate::summary::{whole, Spread};
use crate::{Format, ReportError};
use connlab_lab::{LoadgenDir, LoadgenParams, LoadgenPoint, LoadgenTable, Rate};
use metrics::{Metric, CPU, LATENCY, MEMORY, PACING, SETUP, SHARDS, SHARD_RATIOS};
use std::collections::BTreeMap;

mod metrics;

/// Renders the report of a loadgen sweep.
pub fn render_loadgen(dir: &LoadgenDir, format: Format) -> Result<String, ReportError> {
    export::export(&Loadgen { dir }, format)
}

/// The axes of a setting, as (CSV column, heading).
const AXES: [(&str, &str); AXIS_COUNT] = [
    ("engine", "engine"),
    ("connections", "connections"),
    ("active_ratio", "active"),
    ("rate", "rate (req/s)"),
    ("source_addrs", "source addresses"),
    ("shards", "client processes"),
    ("io", "client I/O"),
];

/// How many axes a setting has.
const AXIS_COUNT: usize = 7;

/// A setting's value on every axis, numbers as `number` writes them.
fn axis_text(p: &LoadgenParams, number: fn(f64) -> String) -> [String; AXIS_COUNT] {
    [
        p.engine.name().to_string(),
        number(p.connections as f64),
        p.active_ratio.label.clone(),
        match p.rate {
            Rate::PerSecond(n) => number(n as f64),
            Rate::Max => "max (closed loop)".into(),
        },
        p.source_addrs.clone().unwrap_or_else(|| "any".into()),
        p.shards.to_string(),
        p.io.name().to_string(),
    ]
}

/// A setting's value on every axis, as the tables show it (1,100).
fn axis_values(p: &LoadgenParams) -> [String; AXIS_COUNT] {
    axis_text(p, whole)
}

/// A setting's value on every axis, as the CSV holds it (1100).
fn axis_plain(p: &LoadgenParams) -> [String; AXIS_COUNT] {
    axis_text(p, |v| format!("{}", v.round() as i64))
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
    /// Every axis's value as shown, in the table or not.
    axes: [String; AXIS_COUNT],
    /// Every axis's value for CSV: numbers without separators.
    plain: [String; AXIS_COUNT],
    /// Valid repetitions (or pairs of them) the figures rest on.
    repetitions: usize,
    /// Repetitions left out: their point failed a gate.
    invalid: usize,
    values: Vec<Option<Spread>>,
}

/// The settings in plan order with their points (invalid ones among them),
/// repetitions in order.
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
    let values: Vec<[String; AXIS_COUNT]> = plan.iter().map(axis_values).collect();
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
        .map(|(s, points)| {
            let (valid, invalid): (Vec<&LoadgenPoint>, Vec<&LoadgenPoint>) =
                points.into_iter().partition(|p| p.checked.is_valid());
            Row {
                axes: axis_values(&s),
                plain: axis_plain(&s),
                repetitions: valid.len(),
                invalid: invalid.len(),
                values: metrics
                    .iter()
                    .map(|m| {
                        let v: Vec<f64> = valid.iter().filter_map(|p| (m.get)(p)).collect();
                        Spread::of(&v)
                    })
                    .collect(),
            }
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
/// shards) and returns, per group, the valid points by that axis's value
/// and repetition.
fn groups_without(dir: &LoadgenDir, skip: usize) -> Vec<([String; AXIS_COUNT], ByAxis<'_>)> {
    let mut out: Vec<([String; AXIS_COUNT], ByAxis)> = Vec::new();
    for p in dir.points.iter().filter(|p| p.checked.is_valid()) {
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
        let Some(first) = lo_reps.values().next() else {
            continue;
        };
        let mut plain = axis_plain(&first.params);
        plain[1] = format!("{lo} → {hi}");
        rows.push(Row {
            axes: key,
            plain,
            repetitions: client.len(),
            invalid: 0,
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
            let Some(first) = one.values().next() else {
                continue;
            };
            let mut plain = axis_plain(&first.params);
            plain[5] = key[5].clone();
            rows.push(Row {
                axes: key.clone(),
                plain,
                repetitions: reps.keys().filter(|r| one.contains_key(r)).count(),
                invalid: 0,
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
            c.push(match r.invalid {
                0 => r.repetitions.to_string(),
                n => format!("{} (+{n} invalid, left out)", r.repetitions),
            });
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
    let cpu = summary::cpu_text;
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
                "{} of {}, {reps} repetition{}{}{}",
                dir.points.len(),
                i.points_total,
                if reps == 1 { "" } else { "s" },
                match dir.points.iter().filter(|p| !p.checked.is_valid()).count() {
                    0 => String::new(),
                    n => format!(", {n} invalid (left out of every table)"),
                },
                if i.quick { " (--quick)" } else { "" }
            )
        }),
        summary::machine(i.environment.cpu_count, &i.environment.kernel),
    ]
}

/// Plan points with no result yet.
fn missing(dir: &LoadgenDir) -> Vec<String> {
    summary::missing(
        dir.info
            .experiment
            .plan(dir.info.quick)
            .iter()
            .map(LoadgenParams::id),
        dir.points.iter().map(|p| p.id.as_str()),
    )
}

/// The command lines of the first point.
fn commands(dir: &LoadgenDir) -> Vec<String> {
    dir.points
        .first()
        .map(|p| p.commands.iter().map(|c| c.join(" ")).collect())
        .unwrap_or_default()
}

const SPREAD_NOTE: &str = "Every figure is the median over repetitions with the smallest and \
                           largest in brackets (one number when they agree).";

/// One CSV row: one figure of one setting (long form; `invalid` counts the
/// repetitions left out), or with `table` `invalid_point` a point that
/// failed a gate (its setting, `id`, `attempts` and `gates_failed`; the
/// figure columns empty).
#[derive(serde::Serialize)]
pub(crate) struct CsvRow {
    table: &'static str,
    engine: String,
    connections: String,
    active_ratio: String,
    rate: String,
    source_addrs: String,
    shards: String,
    io: String,
    metric: String,
    unit: String,
    repetitions: Option<usize>,
    median: Option<f64>,
    min: Option<f64>,
    max: Option<f64>,
    invalid: Option<usize>,
    id: String,
    attempts: Option<u32>,
    gates_failed: String,
}

/// The loadgen report kind.
struct Loadgen<'a> {
    dir: &'a LoadgenDir,
}

impl Report for Loadgen<'_> {
    type Row = CsvRow;

    fn page(&self, _: Format) -> Result<Page, ReportError> {
        let dir = self.dir;
        let e = &dir.info.experiment;
        let mut blocks = Vec::new();
        for (i, t) in tables(dir).into_iter().enumerate() {
            let (head, rows) = table_cells(&t);
            if i == 0 {
                // The first table is the answer: it goes up, in brief,
                // before the sweep's facts and the other tables.
                blocks.extend(crate::brief::section(
                    vec![Block::Subheading {
                        title: t.title.clone(),
                        link: None,
                    }],
                    &[],
                    "claim",
                    None,
                ));
            } else {
                blocks.push(Block::Heading(t.title.clone()));
            }
            blocks.push(Block::Note(t.note.clone()));
            blocks.push(Block::Table(export::Table {
                head,
                rows: rows
                    .into_iter()
                    .map(|r| r.into_iter().map(Into::into).collect())
                    .collect(),
                labels: t.axes.len(),
                html_skip: 0,
                empty: Some(Empty {
                    html: "No points measured for this table yet.",
                    markdown: "(no points measured for this table yet)",
                }),
                ..export::Table::default()
            }));
            if i == 0 {
                blocks.push(Block::Note(SPREAD_NOTE.into()));
                blocks.push(Block::Heading("The sweep".into()));
                blocks.push(Block::Facts {
                    id: None,
                    facts: facts(dir),
                });
            }
        }
        let validity = crate::validity::Summary::of(
            dir.points
                .iter()
                .map(|p| (p.id.as_str(), p.checked.validity.as_ref())),
        );
        let tail = "every table leaves them out";
        blocks.extend(crate::validity::blocks_for(&validity, None, tail));
        blocks.extend(summary::rerun_blocks(&e.name, dir.info.quick));
        let cmds = commands(dir);
        if !cmds.is_empty() {
            blocks.push(Block::Commands {
                label: Some("What the first point ran".into()),
                lines: cmds
                    .into_iter()
                    .map(|c| (None, summary::user_command(&c, &e.name)))
                    .collect(),
            });
        }
        blocks.push(Block::Missing(missing(dir)));
        Ok(summary::page(
            &e.title,
            &e.description,
            summary::STYLE,
            blocks,
        ))
    }

    fn rows(&self) -> Result<Vec<CsvRow>, ReportError> {
        let mut out = Vec::new();
        for t in tables(self.dir) {
            for r in &t.rows {
                for (v, (key, _, unit)) in r.values.iter().zip(&t.columns) {
                    let [engine, connections, active_ratio, rate, source_addrs, shards, io] =
                        r.plain.clone();
                    let v = v.map(Spread::rounded);
                    out.push(CsvRow {
                        table: t.kind.name(),
                        engine,
                        connections,
                        active_ratio,
                        rate,
                        source_addrs,
                        shards,
                        io,
                        metric: key.clone(),
                        unit: if unit == "×" {
                            "ratio".into()
                        } else {
                            unit.clone()
                        },
                        repetitions: Some(r.repetitions),
                        median: v.map(|s| s.median),
                        min: v.map(|s| s.min),
                        max: v.map(|s| s.max),
                        invalid: Some(r.invalid),
                        id: String::new(),
                        attempts: None,
                        gates_failed: String::new(),
                    });
                }
            }
        }
        for p in &self.dir.points {
            let Some(v) = p.checked.validity.as_ref().filter(|v| !v.valid) else {
                continue;
            };
            let [engine, connections, active_ratio, rate, source_addrs, shards, io] =
                axis_plain(&p.params);
            out.push(CsvRow {
                table: "invalid_point",
                engine,
                connections,
                active_ratio,
                rate,
                source_addrs,
                shards,
                io,
                metric: String::new(),
                unit: String::new(),
                repetitions: None,
                median: None,
                min: None,
                max: None,
                invalid: None,
                id: p.id.clone(),
                attempts: Some(v.attempts),
                gates_failed: v.failure_text(),
            });
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
