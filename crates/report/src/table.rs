//! The paper-layout table as data: one row per setting along the table's
//! varied parameter (and per combination of the other parameters that vary),
//! a cell per engine with our statistics over the repetitions (median and
//! spread) and the paper's where the experiment file gives them. Every output
//! format renders this one model; claims and derived tables live in
//! [`crate::claims`].

use connlab_lab::{Experiment, Metric, PaperCell, PointResult, RatioValue, SweepDir, Vary};
use connlab_measure::ActiveRatio;

/// One statistic of one cell over its repetitions.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Spread {
    /// The repetitions' values, sorted ascending.
    pub values: Vec<f64>,
}

impl Spread {
    /// A spread of these values (non-finite ones dropped); `None` if none.
    pub fn of(values: impl IntoIterator<Item = f64>) -> Option<Spread> {
        let mut values: Vec<f64> = values.into_iter().filter(|v| v.is_finite()).collect();
        values.sort_by(f64::total_cmp);
        (!values.is_empty()).then_some(Spread { values })
    }

    /// The median over repetitions (the mean of the middle two for an even
    /// count).
    pub fn median(&self) -> f64 {
        let v = &self.values;
        let n = v.len();
        if n % 2 == 1 {
            v[n / 2]
        } else {
            (v[n / 2 - 1] + v[n / 2]) / 2.0
        }
    }

    /// The smallest repetition.
    pub fn min(&self) -> f64 {
        self.values[0]
    }

    /// The largest repetition.
    pub fn max(&self) -> f64 {
        self.values[self.values.len() - 1]
    }

    /// Repetitions.
    pub fn n(&self) -> usize {
        self.values.len()
    }
}

/// One engine's cell in one row.
#[derive(Clone, Debug, Default)]
pub struct Cell {
    /// Indices into the sweep's points of this cell's valid repetitions
    /// (those that passed their gates, or were measured before gates).
    pub points: Vec<usize>,
    /// Indices of its repetitions that failed a gate: shown, never judged.
    pub invalid: Vec<usize>,
    /// Ours, per statistic in the order of [`stat_names`].
    pub ours: [Option<Spread>; 3],
    /// The paper's, per statistic, in µs.
    pub paper: [Option<f64>; 3],
}

impl Cell {
    /// Repetitions measured.
    pub fn n(&self) -> usize {
        self.points.len()
    }

    /// Our median over the paper's value for statistic `k`.
    pub fn ours_over_paper(&self, k: usize) -> Option<f64> {
        let (o, p) = (self.ours[k].as_ref()?.median(), self.paper[k]?);
        (p != 0.0 && o.signum() == p.signum()).then(|| o / p)
    }
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

impl Row {
    /// The row's value of a parameter.
    pub fn value(&self, along: Vary) -> f64 {
        match along {
            Vary::Connections => self.connections as f64,
            Vary::ActiveRatio => self.active_ratio,
            Vary::Rate => self.rate_per_s,
        }
    }
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

/// Column names of a metric's three statistics.
pub fn stat_names(metric: Metric) -> [&'static str; 3] {
    metric.stat_names()
}

/// What the statistics are of, for captions.
pub fn metric_name(metric: Metric) -> &'static str {
    match metric {
        Metric::ServiceLatency => "service latency",
        Metric::SendDeviation => "send-timing deviation",
        Metric::SendShares => "send deviation shares",
        Metric::PollCall => "time per polling call",
        Metric::Cycle => "server cycle",
        Metric::BackendCpu => "backend CPU",
        Metric::Throughput => "throughput",
        Metric::GatewayCpu => "gateway CPU",
    }
}

/// The unit a metric's first statistic prints in, and its size in the
/// stored unit: times in µs (as stored, and as the plots draw them, though
/// the locality paper gives latency in ms). See [`stat_unit`] for the
/// others.
pub fn unit(metric: Metric) -> (&'static str, f64) {
    stat_unit(metric, 0)
}

/// The unit statistic `k` of `metric` prints in, and its size in the
/// stored unit (µs for times; CPU shares, req/s and Mbit/s as stored).
pub fn stat_unit(metric: Metric, k: usize) -> (&'static str, f64) {
    match (metric, k) {
        // Times are in µs everywhere on a page, as in its plots.
        (Metric::ServiceLatency | Metric::SendDeviation | Metric::PollCall | Metric::Cycle, _) => {
            ("µs", 1.0)
        }
        (Metric::SendShares, 2) => ("sends", 1.0),
        (Metric::SendShares, _) => ("share", 1.0),
        (Metric::BackendCpu, _) | (Metric::GatewayCpu, 1) => ("CPUs", 1.0),
        (Metric::GatewayCpu, _) => ("share", 1.0),
        (Metric::Throughput, 0) => ("req/s", 1.0),
        (Metric::Throughput, 1) => ("Mbit/s", 1.0),
        (Metric::Throughput, _) => ("share", 1.0),
    }
}

/// The gateway's CPU of a web experiment: the first CPU of `server.cpu`.
pub(crate) fn gateway_cpu(exp: &Experiment) -> Option<usize> {
    exp.server
        .cpu
        .as_deref()
        .and_then(|c| c.split([',', '-']).next())
        .and_then(|c| c.trim().parse().ok())
}

/// The backends a web point's configuration uses, as a share of one CPU
/// each: one for `direct`, N for `config:N`, all recorded otherwise.
pub fn backends_used(p: &PointResult) -> &[f64] {
    let s = &p.backend_cpu_share;
    let n = match connlab_lab::web_config(&p.params.engine) {
        Ok(("direct", _)) => 1,
        Ok((_, Some(n))) => n as usize,
        _ => s.len(),
    };
    &s[..n.min(s.len())]
}

/// Our three statistics of a point for `metric`, in the stored unit (µs
/// for times), in the experiment `exp` (which names the gateway's CPU).
pub fn our_stats(exp: &Experiment, metric: Metric, p: &PointResult) -> [Option<f64>; 3] {
    match metric {
        Metric::BackendCpu => {
            let used = backends_used(p);
            if used.is_empty() {
                return [None; 3];
            }
            let total: f64 = used.iter().sum();
            [
                Some(total / used.len() as f64),
                used.iter().copied().reduce(f64::max),
                Some(total),
            ]
        }
        Metric::Throughput => {
            let l = &p.load;
            let errors: u64 = l.requests.errors.values().sum();
            let tried = l.requests.completed + errors;
            [
                Some(l.achieved_rate_per_s),
                Some(l.throughput_mbit_s),
                (tried > 0).then(|| errors as f64 / tried as f64),
            ]
        }
        Metric::GatewayCpu => {
            let cpu = gateway_cpu(exp);
            match (&p.checked.window_cpu, cpu) {
                (Some(w), Some(c)) => gateway_cpu_by_role(w, c, p.gateway_cpu_share),
                // Results from before roles: machine-wide busy shares.
                _ => {
                    let busy = cpu.and_then(|c| p.cpu_busy_share.get(c).copied());
                    let others = cpu.and_then(|c| {
                        p.cpu_busy_share
                            .iter()
                            .enumerate()
                            .filter(|(i, _)| *i != c)
                            .map(|(_, v)| *v)
                            .reduce(f64::max)
                    });
                    [busy, p.gateway_cpu_share, others]
                }
            }
        }

        Metric::ServiceLatency => {
            let s = &p.load.service_latency_us;
            [Some(s.mean), Some(s.p50), Some(s.stddev)]
        }
        Metric::SendDeviation => {
            let s = &p.load.send_deviation_us;
            [Some(s.stddev), Some(s.median), Some(s.max)]
        }
        Metric::SendShares => {
            let s = &p.load.send_deviation_us;
            // Results from before the shares carry none.
            let known = s.count > 0 && (s.share_over_10us > 0.0 || s.share_near_median > 0.0);
            [
                known.then_some(s.share_over_10us),
                known.then_some(s.share_near_median),
                Some(s.count as f64),
            ]
        }
        Metric::Cycle => [
            server_stat(p, "cycle_us", "mean"),
            server_stat(p, "cycle_us", "p50"),
            server_stat(p, "cycle_us", "p99"),
        ],
        Metric::PollCall => {
            // The call's cost is its thread CPU time: the wall time also
            // holds waiting for work and preemption by other threads.
            [
                server_stat(p, "poll_call_cpu_us", "mean"),
                server_stat(p, "poll_call_us", "p50"),
                server_stat(p, "poll_call_us", "mean"),
            ]
        }
    }
}

/// The gateway's CPU of a web point from the experiment's own processes:
/// the gateway's process tree plus the interrupt and `ksoftirqd` time of
/// its CPU (the kernel's forwarding), and on the other CPUs watched the
/// clients' and backends' trees plus their interrupt time, as a share of
/// those CPUs. Work of other processes (idle-priority ones too) counts for
/// neither, so "the others are busy" can fail.
pub(crate) fn gateway_cpu_by_role(
    w: &connlab_lab::validity::WindowCpu,
    gateway: usize,
    gateway_process: Option<f64>,
) -> [Option<f64>; 3] {
    let secs = w.seconds;
    if secs <= 0.0 {
        return [None, gateway_process, None];
    }
    let role = |name: &str| w.role_cpu_s.get(name).copied().unwrap_or(0.0) / secs;
    let kernel = |c: &connlab_lab::validity::PerCpu| c.interrupt + c.kernel_net;
    let busy = w
        .cpu(gateway)
        .map(|c| (role("gateway") + kernel(c)).min(1.0));
    let others: Vec<&connlab_lab::validity::PerCpu> =
        w.per_cpu.iter().filter(|c| c.cpu != gateway).collect();
    let others_busy = (!others.is_empty()).then(|| {
        let kernel_s: f64 = others.iter().map(|c| kernel(c)).sum();
        ((role("clients") + role("backends") + kernel_s) / others.len() as f64).min(1.0)
    });
    [busy, gateway_process.or(Some(role("gateway"))), others_busy]
}

/// Our spreads of `metric` over the points at `idx`.
pub(crate) fn spreads(dir: &SweepDir, idx: &[usize], metric: Metric) -> [Option<Spread>; 3] {
    let stats: Vec<[Option<f64>; 3]> = idx
        .iter()
        .map(|&i| our_stats(&dir.experiment, metric, &dir.points[i]))
        .collect();
    std::array::from_fn(|k| Spread::of(stats.iter().filter_map(|s| s[k])))
}

/// Server statistics field `name`.`key` of a point, as a number.
pub(crate) fn server_stat(p: &PointResult, name: &str, key: &str) -> Option<f64> {
    p.server.as_ref()?[name][key].as_f64()
}

/// A paper cell's active ratio as a number.
pub(crate) fn ratio_of(v: &RatioValue) -> Option<f64> {
    match v {
        RatioValue::Number(n) => Some(*n),
        RatioValue::Text(t) => t.parse::<ActiveRatio>().ok().map(ActiveRatio::get),
    }
}

/// Equal up to rounding.
pub(crate) fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0)
}

/// Whether a paper cell is for this engine and setting (its parameters left
/// out match any value).
pub(crate) fn cell_matches(c: &PaperCell, engine: &str, conns: u64, ratio: f64, rate: f64) -> bool {
    c.engine == engine
        && c.connections.is_none_or(|x| x == conns)
        && c.rate_per_s.is_none_or(|x| close(x, rate))
        && c.active_ratio
            .as_ref()
            .is_none_or(|r| ratio_of(r).is_some_and(|r| close(r, ratio)))
}

/// A setting: connections, active-ratio label, active ratio, rate.
type Setting = (u64, String, f64, f64);

/// A rate for labels: `1,000 req/s`, or `closed loop` (rate 0 = `max`).
pub fn rate_text(rate_per_s: f64) -> String {
    if rate_per_s == 0.0 {
        "closed loop".into()
    } else {
        format!("{} req/s", grouped(rate_per_s))
    }
}

/// An active ratio for labels: `1`, `1/16`.
pub fn ratio_text(ratio: f64) -> String {
    if ratio < 1.0 && ratio > 0.0 && close((1.0 / ratio).round(), 1.0 / ratio) {
        format!("1/{}", grouped(1.0 / ratio))
    } else {
        format!("{ratio}")
    }
}

/// A parameter value as the report writes it: `10,000 conns`, `ratio 1/16`,
/// `125 req/s`.
pub fn param_text(along: Vary, v: f64) -> String {
    match along {
        Vary::Connections => format!("{} conns", grouped(v)),
        Vary::ActiveRatio => format!("ratio {}", ratio_text(v)),
        Vary::Rate => rate_text(v),
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
                        let (points, invalid): (Vec<usize>, Vec<usize>) = dir
                            .points
                            .iter()
                            .enumerate()
                            .filter(|(_, p)| {
                                p.params.engine == *engine
                                    && p.params.connections == *conns
                                    && p.params.active_ratio_label == *label
                                    && p.params.rate_per_s.to_bits() == rate.to_bits()
                            })
                            .map(|(i, _)| i)
                            .partition(|&i| dir.points[i].checked.is_valid());
                        let paper = exp
                            .paper
                            .as_ref()
                            .and_then(|paper| {
                                paper
                                    .cells
                                    .iter()
                                    .find(|c| cell_matches(c, engine, *conns, *ratio, *rate))
                            })
                            .map_or([None; 3], |c| c.stats(metric));
                        has_paper_values |= paper.iter().any(Option::is_some);
                        Cell {
                            ours: spreads(dir, &points, metric),
                            points,
                            invalid,
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

    /// Most repetitions of any cell.
    pub fn max_repetitions(&self) -> usize {
        self.rows
            .iter()
            .flat_map(|r| r.cells.iter().map(Cell::n))
            .max()
            .unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spread_is_median_and_range() {
        let s = Spread::of([3.0, 1.0, f64::NAN, 2.0]).unwrap();
        assert_eq!((s.min(), s.median(), s.max(), s.n()), (1.0, 2.0, 3.0, 3));
        let s = Spread::of([4.0, 1.0]).unwrap();
        assert_eq!(s.median(), 2.5);
        assert!(Spread::of([]).is_none());
    }

    #[test]
    fn labels() {
        assert_eq!(ratio_text(1.0 / 16.0), "1/16");
        assert_eq!(ratio_text(1.0), "1");
        assert_eq!(param_text(Vary::Connections, 10000.0), "10,000 conns");
        assert_eq!(rate_text(0.0), "closed loop");
    }
}
