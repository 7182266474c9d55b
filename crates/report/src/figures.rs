//! The report's plots: our medians with the spread over repetitions as
//! bars, and the paper's cells on the same axes (dashed, hollow markers).

use crate::plots::{self, Kind, Line, Series};
use crate::table::{
    cell_matches, grouped, rate_text, ratio_of, ratio_text, server_stat, PaperTable, Spread,
};
use crate::{distinct, ReportError};
use connlab_lab::{Metric, PaperCell, PointResult, SweepDir};
use std::collections::BTreeMap;

/// A line through the medians of (x, y) samples, with the spread as bars
/// where an x has more than one sample.
fn median_line(name: &str, samples: impl Iterator<Item = (f64, f64)>, positive: bool) -> Line {
    let mut by_x: BTreeMap<u64, (f64, Vec<f64>)> = BTreeMap::new();
    for (x, y) in samples {
        if positive && y <= 0.0 {
            continue;
        }
        by_x.entry(x.to_bits()).or_insert((x, Vec::new())).1.push(y);
    }
    let mut line = Line {
        name: name.to_string(),
        colour_key: name.to_string(),
        ..Line::default()
    };
    let mut xs: Vec<(f64, Spread)> = by_x
        .into_values()
        .filter_map(|(x, ys)| Some((x, Spread::of(ys)?)))
        .collect();
    xs.sort_by(|a, b| a.0.total_cmp(&b.0));
    for (x, s) in xs {
        line.points.push((x, s.median()));
        if s.n() > 1 {
            line.spread.push((x, s.min(), s.max()));
        }
    }
    line
}

/// One plotted quantity of a point.
struct Value {
    name: &'static str,
    axis: &'static str,
    of: fn(&PointResult) -> Option<f64>,
    /// The paper statistic this is (metric, index into its stat names), so
    /// the paper's cells can be drawn on the same axes.
    paper: Option<(Metric, usize)>,
}

const LATENCY_VALUES: [Value; 1] = [Value {
    name: "mean service latency",
    axis: "mean service latency (µs)",
    of: |p| Some(p.load.service_latency_us.mean),
    paper: Some((Metric::ServiceLatency, 0)),
}];

/// The polling paper's figures: time per polling call and per server cycle,
/// throughput, and the client's response time.
const POLL_VALUES: [Value; 5] = [
    Value {
        name: "CPU time per polling call (mean)",
        axis: "server thread CPU time per polling call (µs)",
        of: |p| server_stat(p, "poll_call_cpu_us", "mean"),
        paper: Some((Metric::PollCall, 0)),
    },
    Value {
        name: "wall time per polling call (median)",
        axis: "wall time per polling call, median (µs)",
        of: |p| server_stat(p, "poll_call_us", "p50"),
        paper: Some((Metric::PollCall, 1)),
    },
    Value {
        name: "mean time per server cycle",
        axis: "time per cycle: polling call + the I/O it reported (µs)",
        of: |p| server_stat(p, "cycle_us", "mean"),
        paper: None,
    },
    Value {
        name: "throughput",
        axis: "responses per second",
        of: |p| Some(p.load.achieved_rate_per_s),
        paper: None,
    },
    Value {
        name: "mean response time",
        axis: "mean response time at the client (µs)",
        of: |p| Some(p.load.service_latency_us.mean),
        paper: None,
    },
];

/// The load-balancing experiments: backend CPU, response time and
/// throughput against the request rate, a line per gateway configuration.
const WEB_VALUES: [Value; 3] = [
    Value {
        name: "CPU per backend (mean over backends)",
        axis: "CPU per backend (share of one CPU)",
        of: |p| {
            let used = crate::table::backends_used(p);
            (!used.is_empty()).then(|| used.iter().sum::<f64>() / used.len() as f64)
        },
        paper: None,
    },
    Value {
        name: "mean response time",
        axis: "mean response time at the client (µs)",
        of: |p| Some(p.load.service_latency_us.mean),
        paper: None,
    },
    Value {
        name: "throughput",
        axis: "responses per second",
        of: |p| Some(p.load.achieved_rate_per_s),
        paper: None,
    },
];

/// A plot: (id, caption, svg).
type Plot = (String, String, String);

/// At most this many plots per kind (a group of settings each).
const MAX_PER_KIND: usize = 6;

/// A parameter plotted along the x axis: a plot per group of the other
/// parameters, a line per engine.
struct Along {
    /// The plot ids' prefix: `connections`, `ratio` or `rate`.
    kind: &'static str,
    /// The x axis.
    x_desc: &'static str,
    /// A point's x.
    x_of: fn(&PointResult) -> f64,
    /// A point's group: the other parameters, in words.
    group_of: fn(&PointResult) -> String,
    /// A paper cell's x, where it gives one.
    cell_x: fn(&PaperCell) -> Option<f64>,
}

/// Against connections, the active ratio and the rate.
const ALONG: [Along; 3] = [
    Along {
        kind: "connections",
        x_desc: "total connections",
        x_of: |p| p.params.connections as f64,
        group_of: |p| {
            format!(
                "ratio {} · {}",
                p.params.active_ratio_label,
                rate_text(p.params.rate_per_s)
            )
        },
        cell_x: |c| c.connections.map(|c| c as f64),
    },
    Along {
        kind: "ratio",
        x_desc: "active ratio",
        x_of: |p| p.params.active_ratio,
        group_of: |p| {
            format!(
                "{} conns · {}",
                grouped(p.params.connections as f64),
                rate_text(p.params.rate_per_s)
            )
        },
        cell_x: |c| c.active_ratio.as_ref().and_then(ratio_of),
    },
    Along {
        kind: "rate",
        x_desc: "offered request rate (req/s)",
        x_of: |p| p.params.rate_per_s,
        group_of: |p| {
            format!(
                "{} conns · ratio {}",
                grouped(p.params.connections as f64),
                p.params.active_ratio_label
            )
        },
        cell_x: |c| c.rate_per_s,
    },
];

/// The plots: against each parameter, then the web experiments' against
/// the backend count, then the send-deviation CDFs.
pub(crate) fn plots(dir: &SweepDir, t: &PaperTable) -> Result<Vec<Plot>, ReportError> {
    let mut out = Vec::new();
    let web = dir.experiment.web.is_some();
    for along in &ALONG {
        // Plots against the rate are the web experiments' (the paper's
        // CPU and response time against request rate).
        if (along.kind == "rate") == web {
            parameter_plots(dir, t, along, &mut out)?;
        }
    }
    if web {
        out.extend(backend_count_plots(dir)?);
    }
    // Closed loop has no send schedule: no deviation to plot.
    if !dir.points.iter().all(|p| p.params.closed_loop()) {
        deviation_cdfs(dir, t, &mut out)?;
    }
    Ok(out)
}

/// The groups of `along` in numeric order of their settings (a string
/// sort put 2,000 req/s between 125 and 500).
fn groups(dir: &SweepDir, along: &Along) -> Vec<String> {
    let mut ordered: Vec<_> = dir.points.iter().collect();
    ordered.sort_by(|a, b| {
        let key = |p: &&PointResult| {
            (
                p.params.connections,
                p.params.active_ratio,
                p.params.rate_per_s,
            )
        };
        let (ka, kb) = (key(a), key(b));
        ka.0.cmp(&kb.0)
            .then(ka.1.total_cmp(&kb.1))
            .then(ka.2.total_cmp(&kb.2))
    });
    distinct(ordered.into_iter().map(along.group_of))
}

/// What is plotted against `along`: the polling-cost experiment plots the
/// server's timings, the throughput and the response time; the web
/// experiments the backends' CPU, response time and throughput; the
/// others latency.
fn values(dir: &SweepDir, t: &PaperTable, along: &Along) -> &'static [Value] {
    if dir.experiment.web.is_some() {
        &WEB_VALUES
    } else if t.metric == Metric::PollCall {
        if along.kind == "connections" {
            &POLL_VALUES
        } else {
            &POLL_VALUES[..1]
        }
    } else {
        &LATENCY_VALUES
    }
}

/// A plot per value and group (up to [`MAX_PER_KIND`] groups) against
/// `along`: our medians per engine, the paper's cells beside them.
fn parameter_plots(
    dir: &SweepDir,
    t: &PaperTable,
    along: &Along,
    out: &mut Vec<Plot>,
) -> Result<(), ReportError> {
    let groups = groups(dir, along);
    for value in values(dir, t, along) {
        for group in groups.iter().take(MAX_PER_KIND) {
            let Some(rep) = dir.points.iter().find(|p| (along.group_of)(p) == *group) else {
                continue;
            };
            let mut lines: Vec<Line> = t
                .engines
                .iter()
                .map(|e| {
                    median_line(
                        e,
                        dir.points
                            .iter()
                            .filter(|p| p.params.engine == *e && (along.group_of)(p) == *group)
                            .filter_map(|p| Some(((along.x_of)(p), (value.of)(p)?))),
                        true,
                    )
                })
                .filter(|line| line.points.len() >= 2)
                .collect();
            if lines.is_empty() {
                continue;
            }
            let projected = projected_lines(dir, t, along, value, &lines);
            let projected_lines = projected.len();
            lines.extend(projected);
            let paper = paper_lines(dir, t, along, value, rep);
            let paper_lines = paper.len();
            lines.extend(paper);
            let x_desc = along.x_desc;
            let title = format!("{} against {x_desc} ({group})", value.name);
            let svg = if along.kind == "ratio" {
                plots::log_log_labelled(&title, x_desc, value.axis, &lines, ratio_text)?
            } else {
                plots::log_log_lines(&title, x_desc, value.axis, &lines)?
            };
            let id = format!("{}-{}", along.kind, out.len());
            out.push((
                id,
                format!(
                    "{} against {x_desc}, one line per engine, {group}: the median over repetitions, bars from the lowest to the highest repetition{}{}; both axes logarithmic.",
                    capitalised(value.name),
                    if paper_lines > 0 {
                        "; dotted lines with diamonds outlined in black are the paper's values"
                    } else {
                        ""
                    },
                    if projected_lines > 0 {
                        "; dashed lines with hollow circles are our medians projected to the paper's setting by the least-squares line of the projection table (ours extended, not measured)"
                    } else {
                        ""
                    }
                ),
                svg,
            ));
        }
    }
    Ok(())
}

/// Our lines extended to the paper's setting where the experiment asks
/// for a projection along this parameter of this statistic: from the last
/// measured median to the projected value, per engine whose fit supports
/// one (the rule of [`crate::projection::project`]).
fn projected_lines(
    dir: &SweepDir,
    t: &PaperTable,
    along: &Along,
    value: &Value,
    ours: &[Line],
) -> Vec<Line> {
    let Some(spec) = crate::projection::spec(dir) else {
        return Vec::new();
    };
    let vary = match along.kind {
        "connections" => connlab_lab::Vary::Connections,
        "ratio" => connlab_lab::Vary::ActiveRatio,
        _ => connlab_lab::Vary::Rate,
    };
    if spec.along != vary || value.paper != Some((t.metric, 0)) {
        return Vec::new();
    }
    let mut out = Vec::new();
    for line in ours {
        let Some(last) = line.points.last() else {
            continue;
        };
        let mut points = vec![*last];
        for &target in spec.to.iter().filter(|x| **x > last.0) {
            if let (Ok(v), _) = crate::projection::project(&line.points, target) {
                if v > 0.0 {
                    points.push((target, v));
                }
            }
        }
        if points.len() >= 2 {
            out.push(Line {
                name: format!("{} projected", line.name),
                colour_key: line.colour_key.clone(),
                points,
                spread: Vec::new(),
                kind: Kind::Projected,
            });
        }
    }
    out
}

/// `name` with its first letter in upper case.
fn capitalised(name: &str) -> String {
    let mut name = name.to_string();
    name[..1].make_ascii_uppercase();
    name
}

/// The paper's cells of the group `rep` is in, a line per engine, where
/// the paper gives the plotted statistic.
fn paper_lines(
    dir: &SweepDir,
    t: &PaperTable,
    along: &Along,
    value: &Value,
    rep: &PointResult,
) -> Vec<Line> {
    let (Some(paper), Some((metric, k))) = (dir.experiment.paper.as_ref(), value.paper) else {
        return Vec::new();
    };
    if paper.metric != metric {
        return Vec::new();
    }
    let mut lines = Vec::new();
    for e in &t.engines {
        let mut pts: Vec<(f64, f64)> = paper
            .cells
            .iter()
            .filter(|c| c.engine == *e)
            .filter_map(|c| {
                let x = (along.cell_x)(c)?;
                // Match the group's other parameters.
                let (conns, ratio, rate) = match along.kind {
                    "connections" => (
                        c.connections.unwrap_or(0),
                        rep.params.active_ratio,
                        rep.params.rate_per_s,
                    ),
                    "ratio" => (
                        rep.params.connections,
                        ratio_of(c.active_ratio.as_ref()?)?,
                        rep.params.rate_per_s,
                    ),
                    _ => (
                        rep.params.connections,
                        rep.params.active_ratio,
                        c.rate_per_s?,
                    ),
                };
                let y = c.stats(metric)[k]?;
                (cell_matches(c, e, conns, ratio, rate) && y > 0.0).then_some((x, y))
            })
            .collect();
        pts.sort_by(|a, b| a.0.total_cmp(&b.0));
        if !pts.is_empty() {
            lines.push(Line {
                name: format!("{e} (paper)"),
                colour_key: e.clone(),
                points: pts,
                spread: Vec::new(),
                kind: Kind::Paper,
            });
        }
    }
    lines
}

/// CDF of send deviation: a plot per setting (up to [`MAX_PER_KIND`]), a
/// line per engine, every repetition of the point pooled.
fn deviation_cdfs(dir: &SweepDir, t: &PaperTable, out: &mut Vec<Plot>) -> Result<(), ReportError> {
    for row in t.rows.iter().take(MAX_PER_KIND) {
        let mut pooled_reps = 0;
        let mut first_only = false;
        let series: Vec<Series> = t
            .engines
            .iter()
            .zip(&row.cells)
            .filter_map(|(e, cell)| {
                let reps: Vec<&PointResult> = cell
                    .points
                    .iter()
                    .filter_map(|i| dir.points.get(*i))
                    .collect();
                let (cdf, pooled) = pooled_deviation_cdf(&reps);
                let points: Vec<(f64, f64)> =
                    cdf.iter().map(|c| (c.value_us, c.fraction)).collect();
                if points.len() < 2 {
                    return None;
                }
                pooled_reps = pooled_reps.max(pooled);
                first_only |= pooled < reps.len();
                Some(Series {
                    name: e.clone(),
                    points,
                })
            })
            .collect();
        if series.is_empty() {
            continue;
        }
        let title = format!("CDF of send deviation ({})", row.label);
        let (series, clipped) = plots::bulk(series, 0.02, 0.98);
        let svg = plots::cdf(
            &title,
            "send deviation from the ideal schedule (µs)",
            "fraction of sends",
            &series,
            &clipped.legend_notes(),
        )?;
        let id = format!("cdf-{}", out.len());
        out.push((
            id,
            format!(
                "Cumulative distribution of each send's deviation from the evenly spaced schedule with the same mean (section 5.2), {}, one line per engine{}.{}",
                row.label,
                pooling_text(pooled_reps, first_only),
                clipped.sentence("µs", "sends")
            ),
            svg,
        ));
    }
    Ok(())
}

/// The gateway's limit (web engines named `config:N`): throughput, traffic
/// and gateway CPU against the number of backends, a plot per rate, a line
/// per gateway configuration.
fn backend_count_plots(dir: &SweepDir) -> Result<Vec<Plot>, ReportError> {
    type Of = Box<dyn Fn(&PointResult) -> Option<f64>>;
    // The gateway's CPU as /proc/stat sees it: with nat, the kernel forwards
    // in softirq and the gateway process itself stays idle.
    let gateway_cpu = crate::table::gateway_cpu(&dir.experiment);
    // The paper's values of a statistic against its backend count (its
    // cells and derived cells name engines `config:N`), one point per count.
    let paper_points = |metric: Metric, k: usize| -> Vec<(f64, f64)> {
        let Some(paper) = &dir.experiment.paper else {
            return Vec::new();
        };
        let cells = paper.cells.iter().filter(|_| paper.metric == metric).chain(
            paper
                .derived
                .iter()
                .filter(|d| d.metric == metric)
                .flat_map(|d| d.cells.iter()),
        );
        let mut pts: Vec<(f64, f64)> = Vec::new();
        for c in cells {
            let (Ok((_, Some(n))), Some(y)) =
                (connlab_lab::web_config(&c.engine), c.stats(metric)[k])
            else {
                continue;
            };
            if !pts.iter().any(|p| p.0 == f64::from(n)) {
                pts.push((f64::from(n), y));
            }
        }
        pts.sort_by(|a, b| a.0.total_cmp(&b.0));
        pts
    };
    // (name, axis, our value of a point, the paper's points)
    type Plotted = (&'static str, String, Of, Vec<(f64, f64)>);
    let mut values: Vec<Plotted> = vec![
        (
            "throughput",
            "responses per second".into(),
            Box::new(|p: &PointResult| Some(p.load.achieved_rate_per_s)),
            paper_points(Metric::Throughput, 0),
        ),
        (
            "traffic",
            "response traffic (Mbit/s)".into(),
            Box::new(|p: &PointResult| Some(p.load.throughput_mbit_s)),
            paper_points(Metric::Throughput, 1),
        ),
        (
            "gateway process CPU",
            "gateway process CPU (share of one CPU)".into(),
            Box::new(|p: &PointResult| p.gateway_cpu_share),
            Vec::new(),
        ),
    ];
    if let Some(cpu) = gateway_cpu {
        values.push((
            "busy share of the gateway's CPU",
            format!("CPU {cpu} busy (share, /proc/stat)"),
            Box::new(move |p: &PointResult| p.cpu_busy_share.get(cpu).copied()),
            paper_points(Metric::GatewayCpu, 0),
        ));
    }
    let counted: Vec<(&PointResult, &str, f64)> = dir
        .points
        .iter()
        .filter_map(|p| match connlab_lab::web_config(&p.params.engine) {
            Ok((config, Some(n))) => Some((p, config, f64::from(n))),
            _ => None,
        })
        .collect();
    let mut configs: Vec<&str> = counted.iter().map(|c| c.1).collect();
    configs.sort();
    configs.dedup();
    let mut rates: Vec<f64> = counted.iter().map(|c| c.0.params.rate_per_s).collect();
    rates.sort_by(f64::total_cmp);
    rates.dedup();
    let mut out = Vec::new();
    for rate in rates {
        for (value_name, axis, value_of, paper) in &values {
            let mut series: Vec<Line> = configs
                .iter()
                .filter_map(|config| {
                    let line = median_line(
                        config,
                        counted
                            .iter()
                            .filter(|c| {
                                c.1 == *config && c.0.params.rate_per_s.to_bits() == rate.to_bits()
                            })
                            .filter_map(|(p, _, n)| Some((*n, value_of(p)?))),
                        false,
                    );
                    (line.points.len() >= 2).then_some(line)
                })
                .collect();
            if series.is_empty() {
                continue;
            }
            if !paper.is_empty() {
                series.push(Line {
                    name: "the paper's gateway".into(),
                    colour_key: "paper".into(),
                    points: paper.clone(),
                    spread: Vec::new(),
                    kind: Kind::Paper,
                });
            }
            let title = format!("{value_name} against backends ({})", rate_text(rate));
            let svg = plots::linear_lines(&title, "backends", axis, &series, None, true)?;
            out.push((
                format!("backends-{}", out.len()),
                format!(
                    "{} against the number of backends, one line per gateway configuration (median over repetitions, bars: lowest to highest), {}: where a line stops rising, the gateway (or the clients' CPU) is the limit.{}",
                    capitalised(value_name),
                    rate_text(rate),
                    if paper.is_empty() {
                        ""
                    } else {
                        " Hollow markers: the paper's gateway (Table 2, six segments)."
                    }
                ),
                svg,
            ));
        }
    }
    Ok(out)
}

/// The send-deviation CDF at 0.5% steps of every repetition of a point
/// pooled (their histograms merged), and how many repetitions it pools.
/// Repetitions without a readable histogram cannot be pooled: when none
/// has one, the first repetition's coarse CDF from its summary stands in
/// (pooling 1).
fn pooled_deviation_cdf(reps: &[&PointResult]) -> (Vec<connlab_measure::CdfPoint>, usize) {
    let mut merged: Option<connlab_measure::DeviationHistogram> = None;
    let mut pooled = 0;
    for p in reps {
        let Some(h) = p
            .load
            .histograms
            .send_deviation
            .as_ref()
            .and_then(|parts| connlab_measure::DeviationHistogram::from_parts(parts).ok())
            .filter(|h| !h.is_empty())
        else {
            continue;
        };
        pooled += 1;
        match &mut merged {
            Some(m) => m.merge(&h),
            None => merged = Some(h),
        }
    }
    match merged {
        Some(h) => (h.cdf(201), pooled),
        None => (
            reps.first()
                .map(|p| p.load.send_deviation_cdf.clone())
                .unwrap_or_default(),
            usize::from(!reps.is_empty()),
        ),
    }
}

/// The CDF caption's account of repetitions: `, all 3 repetitions pooled`.
fn pooling_text(pooled: usize, partial: bool) -> String {
    match (pooled, partial) {
        (0 | 1, false) => String::new(),
        (n, false) => format!(" (all {n} repetitions of each point pooled: their histograms merged)"),
        (1, true) => " (one repetition per point: the others carry no deviation histogram to pool)".into(),
        (n, true) => format!(" (up to {n} repetitions of each point pooled: the repetitions that carry a deviation histogram)"),
    }
}
