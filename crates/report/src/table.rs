//! The paper-layout table as data: one row per setting along the table's
//! varied parameter (and per combination of the other parameters that vary),
//! a column group per engine, and for every cell our statistics and the
//! paper's where the experiment file gives them. Every output format renders
//! this one model.

use connlab_lab::{Metric, PaperCell, PointResult, RatioValue, SweepDir, Vary};
use connlab_measure::ActiveRatio;

/// Three statistics of one cell, in the order of [`Metric`]'s column names.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Stats(pub [Option<f64>; 3]);

/// One engine's cell in one row.
#[derive(Clone, Debug, Default)]
pub struct Cell {
    /// Points averaged (repetitions).
    pub n: usize,
    /// Ours, averaged over repetitions.
    pub ours: Option<Stats>,
    /// The paper's, if the experiment file gives it.
    pub paper: Option<Stats>,
}

/// One row: a setting of the parameters.
#[derive(Clone, Debug)]
pub struct Row {
    /// Label in the row header, e.g. `2,000 conns · 1,000 req/s`.
    pub label: String,
    /// Total connections.
    pub connections: u64,
    /// Active ratio.
    pub active_ratio: f64,
    /// Active ratio as written.
    pub active_ratio_label: String,
    /// Requests per second.
    pub rate_per_s: f64,
    /// A cell per engine, in [`PaperTable::engines`] order.
    pub cells: Vec<Cell>,
}

/// The table.
#[derive(Clone, Debug)]
pub struct PaperTable {
    /// E.g. `Table 3`, or the experiment's name.
    pub table: String,
    /// The statistic.
    pub metric: Metric,
    /// The parameter along the rows.
    pub vary: Vary,
    /// Engine columns.
    pub engines: Vec<String>,
    /// Rows in order.
    pub rows: Vec<Row>,
    /// Whether any paper value is present.
    pub has_paper_values: bool,
}

/// One checked claim: our ratio per engine and parameter group.
#[derive(Clone, Debug)]
pub struct ClaimCheck {
    /// The claim in words.
    pub text: String,
    /// Engine.
    pub engine: String,
    /// The other parameters of the rows compared.
    pub group: String,
    /// Row value our ratio starts from.
    pub from: f64,
    /// Row value the ratio ends at.
    pub to: f64,
    /// Whether `from` and `to` are the claim's own rows (else the widest
    /// span measured).
    pub exact: bool,
    /// Our ratio (to / from) of the table's first statistic.
    pub ours: Option<f64>,
    /// The paper's ratio.
    pub paper: Option<f64>,
}

/// Column names of a metric's three statistics.
pub fn stat_names(metric: Metric) -> [&'static str; 3] {
    match metric {
        Metric::ServiceLatency => ["mean", "median", "stddev"],
        Metric::SendDeviation => ["stddev", "median", "max"],
        Metric::PollCall => ["CPU mean", "wall median", "wall mean"],
    }
}

/// What the statistics are of, for captions.
pub fn metric_name(metric: Metric) -> &'static str {
    match metric {
        Metric::ServiceLatency => "service latency",
        Metric::SendDeviation => "send-timing deviation",
        Metric::PollCall => "time per polling call",
    }
}

fn our_stats(metric: Metric, p: &PointResult) -> Stats {
    match metric {
        Metric::ServiceLatency => {
            let s = &p.load.service_latency_us;
            Stats([Some(s.mean), Some(s.p50), Some(s.stddev)])
        }
        Metric::SendDeviation => {
            let s = &p.load.send_deviation_us;
            Stats([Some(s.stddev), Some(s.median), Some(s.max)])
        }
        Metric::PollCall => {
            // The call's cost is its thread CPU time: the wall time also
            // holds waiting for work and preemption by other threads.
            Stats([
                server_stat(p, "poll_call_cpu_us", "mean"),
                server_stat(p, "poll_call_us", "p50"),
                server_stat(p, "poll_call_us", "mean"),
            ])
        }
    }
}

/// Server statistics field `name`.`key` of a point, as a number.
pub(crate) fn server_stat(p: &PointResult, name: &str, key: &str) -> Option<f64> {
    p.server.as_ref()?[name][key].as_f64()
}

fn paper_stats(metric: Metric, c: &PaperCell) -> Stats {
    match metric {
        Metric::ServiceLatency => Stats([c.mean_us, c.median_us, c.stddev_us]),
        Metric::SendDeviation => Stats([c.stddev_us, c.median_us, c.max_us]),
        Metric::PollCall => Stats([c.mean_us, c.median_us, None]),
    }
}

fn ratio_of(v: &RatioValue) -> Option<f64> {
    match v {
        RatioValue::Number(n) => Some(*n),
        RatioValue::Text(t) => t.parse::<ActiveRatio>().ok().map(ActiveRatio::get),
    }
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0)
}

/// A setting: connections, active-ratio label, active ratio, rate.
type Setting = (u64, String, f64, f64);

/// Groups points by their parameters (engine and repetition aside).
fn key(p: &PointResult) -> (u64, String, u64) {
    (
        p.params.connections,
        p.params.active_ratio_label.clone(),
        p.params.rate_per_s.to_bits(),
    )
}

/// A rate for labels: `1,000 req/s`, or `closed loop` (rate 0 = `max`).
pub fn rate_text(rate_per_s: f64) -> String {
    if rate_per_s == 0.0 {
        "closed loop".into()
    } else {
        format!("{} req/s", grouped(rate_per_s))
    }
}

/// Thousands separators: 10000 -> 10,000.
pub fn grouped(n: f64) -> String {
    let rounded = n.round();
    if (n - rounded).abs() > 1e-9 {
        return format!("{n}");
    }
    let digits = format!("{}", rounded.abs() as u64);
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    if rounded < 0.0 {
        out.insert(0, '-');
    }
    out
}

impl PaperTable {
    /// Builds the table of a sweep.
    pub fn of(dir: &SweepDir) -> PaperTable {
        let exp = &dir.experiment;
        let engines = exp.server.engines.clone();
        // Distinct settings in plan order.
        let plan = exp.plan(dir.info.quick);
        let mut settings: Vec<Setting> = Vec::new();
        for p in plan.iter().chain(dir.points.iter().map(|r| &r.params)) {
            let s = (
                p.connections,
                p.active_ratio_label.clone(),
                p.active_ratio,
                p.rate_per_s,
            );
            if !settings
                .iter()
                .any(|t| t.0 == s.0 && t.1 == s.1 && t.3.to_bits() == s.3.to_bits())
            {
                settings.push(s);
            }
        }
        let varies = |f: &dyn Fn(&Setting) -> String| {
            let mut v: Vec<String> = settings.iter().map(f).collect();
            v.sort();
            v.dedup();
            v.len() > 1
        };
        let conns_vary = varies(&|s| s.0.to_string());
        let ratio_vary = varies(&|s| s.1.clone());
        let rate_vary = varies(&|s| s.3.to_string());
        let (metric, vary, table) = match &exp.paper {
            Some(p) => (p.metric, p.vary, p.table.clone()),
            None => {
                let vary = if conns_vary {
                    Vary::Connections
                } else if ratio_vary {
                    Vary::ActiveRatio
                } else {
                    Vary::Rate
                };
                (Metric::ServiceLatency, vary, exp.name.clone())
            }
        };
        // Rows: the other parameters outermost, the varied one innermost.
        settings.sort_by(|a, b| {
            let inner = |s: &Setting| match vary {
                Vary::Connections => s.0 as f64,
                Vary::ActiveRatio => -s.2,
                Vary::Rate => s.3,
            };
            let outer = |s: &Setting| match vary {
                Vary::Connections => (-s.2, s.3),
                Vary::ActiveRatio => (s.0 as f64, s.3),
                Vary::Rate => (s.0 as f64, -s.2),
            };
            outer(a)
                .partial_cmp(&outer(b))
                .unwrap_or(std::cmp::Ordering::Equal)
                .then(inner(a).total_cmp(&inner(b)))
        });
        let mut has_paper_values = false;
        let rows = settings
            .iter()
            .map(|(conns, label, ratio, rate)| {
                let mut parts = Vec::new();
                if conns_vary || vary == Vary::Connections {
                    parts.push(format!("{} conns", grouped(*conns as f64)));
                }
                if ratio_vary || vary == Vary::ActiveRatio {
                    parts.push(format!("ratio {label}"));
                }
                if rate_vary || vary == Vary::Rate {
                    parts.push(rate_text(*rate));
                }
                let cells = engines
                    .iter()
                    .map(|engine| {
                        let pts: Vec<&PointResult> = dir
                            .points
                            .iter()
                            .filter(|p| {
                                p.params.engine == *engine
                                    && key(p) == (*conns, label.clone(), rate.to_bits())
                            })
                            .collect();
                        let ours = (!pts.is_empty()).then(|| {
                            // Mean over the repetitions that have the value.
                            let mut sum = [(0.0, 0usize); 3];
                            for p in &pts {
                                for (s, v) in sum.iter_mut().zip(our_stats(metric, p).0) {
                                    if let Some(v) = v {
                                        s.0 += v;
                                        s.1 += 1;
                                    }
                                }
                            }
                            Stats(sum.map(|(s, n)| (n > 0).then(|| s / n as f64)))
                        });
                        let paper = exp.paper.as_ref().and_then(|paper| {
                            paper
                                .cells
                                .iter()
                                .find(|c| {
                                    c.engine == *engine
                                        && c.connections.is_none_or(|x| x == *conns)
                                        && c.rate_per_s.is_none_or(|x| close(x, *rate))
                                        && c.active_ratio.as_ref().is_none_or(|r| {
                                            ratio_of(r).is_some_and(|r| close(r, *ratio))
                                        })
                                })
                                .map(|c| paper_stats(metric, c))
                        });
                        has_paper_values |= paper.is_some();
                        Cell {
                            n: pts.len(),
                            ours,
                            paper,
                        }
                    })
                    .collect();
                Row {
                    label: parts.join(" · "),
                    connections: *conns,
                    active_ratio: *ratio,
                    active_ratio_label: label.clone(),
                    rate_per_s: *rate,
                    cells,
                }
            })
            .collect();
        PaperTable {
            table,
            metric,
            vary,
            engines,
            rows,
            has_paper_values,
        }
    }

    /// The row's value along the varied parameter.
    pub fn vary_value(&self, row: &Row) -> f64 {
        match self.vary {
            Vary::Connections => row.connections as f64,
            Vary::ActiveRatio => row.active_ratio,
            Vary::Rate => row.rate_per_s,
        }
    }

    /// The row's other parameters, as a group label.
    pub fn group_label(&self, row: &Row) -> String {
        match self.vary {
            Vary::Connections => format!(
                "ratio {} · {}",
                row.active_ratio_label,
                rate_text(row.rate_per_s)
            ),
            Vary::ActiveRatio => format!(
                "{} conns · {}",
                grouped(row.connections as f64),
                rate_text(row.rate_per_s)
            ),
            Vary::Rate => format!(
                "{} conns · ratio {}",
                grouped(row.connections as f64),
                row.active_ratio_label
            ),
        }
    }

    /// Checks the experiment's claims against our rows.
    pub fn claims(&self, dir: &SweepDir) -> Vec<ClaimCheck> {
        let Some(paper) = &dir.experiment.paper else {
            return Vec::new();
        };
        let mut out = Vec::new();
        let mut groups: Vec<String> = self.rows.iter().map(|r| self.group_label(r)).collect();
        groups.dedup();
        for claim in &paper.claims {
            if let Some(versus) = &claim.versus {
                out.extend(self.versus_claims(claim, versus));
                continue;
            }
            for engine in &claim.engines {
                let Some(col) = self.engines.iter().position(|e| e == engine) else {
                    continue;
                };
                for group in &groups {
                    let rows: Vec<(f64, Option<f64>)> = self
                        .rows
                        .iter()
                        .filter(|r| self.group_label(r) == *group)
                        .map(|r| (self.vary_value(r), r.cells[col].ours.and_then(|s| s.0[0])))
                        .collect();
                    // The claim's rows, or else the widest span measured in
                    // the same direction (a quick sweep has fewer rows).
                    let exact = |v: f64| rows.iter().find(|(x, _)| close(*x, v)).copied();
                    let lo = rows.iter().copied().min_by(|a, b| a.0.total_cmp(&b.0));
                    let hi = rows.iter().copied().max_by(|a, b| a.0.total_cmp(&b.0));
                    let (from, to) = match (exact(claim.from), exact(claim.to)) {
                        (Some(f), Some(t)) => (Some(f), Some(t)),
                        _ if claim.from <= claim.to => (lo, hi),
                        _ => (hi, lo),
                    };
                    let (Some((from_x, a)), Some((to_x, b))) = (from, to) else {
                        continue;
                    };
                    if close(from_x, to_x) {
                        continue;
                    }
                    let ours = match (a, b) {
                        (Some(a), Some(b)) if a > 0.0 => Some(b / a),
                        _ => None,
                    };
                    out.push(ClaimCheck {
                        text: claim.text.clone(),
                        engine: engine.clone(),
                        group: group.clone(),
                        from: from_x,
                        to: to_x,
                        exact: close(from_x, claim.from) && close(to_x, claim.to),
                        ours,
                        paper: claim.paper_ratio,
                    });
                }
            }
        }
        out
    }

    /// A claim between engines: at every row, each engine's first statistic
    /// divided by the `versus` engine's.
    fn versus_claims(&self, claim: &connlab_lab::PaperClaim, versus: &str) -> Vec<ClaimCheck> {
        let Some(vcol) = self.engines.iter().position(|e| e == versus) else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for engine in &claim.engines {
            let Some(col) = self.engines.iter().position(|e| e == engine) else {
                continue;
            };
            for row in &self.rows {
                let mean = |c: usize| row.cells[c].ours.and_then(|s| s.0[0]);
                let ours = match (mean(col), mean(vcol)) {
                    (Some(a), Some(b)) if b > 0.0 => Some(a / b),
                    _ => None,
                };
                let x = self.vary_value(row);
                out.push(ClaimCheck {
                    text: claim.text.clone(),
                    engine: format!("{engine} ÷ {versus}"),
                    group: self.group_label(row),
                    from: x,
                    to: x,
                    exact: true,
                    ours,
                    paper: claim.paper_ratio,
                });
            }
        }
        out
    }
}
