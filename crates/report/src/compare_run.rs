//! The page of a `connlab run` comparison filled from what the library
//! measured ([`CompareOutcome`]): each row's kind, the CDF of its run
//! nearest the median, its runs, the workload and the environment.
//! [`crate::run::render_run`] lays it out.

use connlab_lab::compare::Better;
use connlab_lab::run::compare_run::{primary, CompareOutcome, Done, Row};

/// The page of `o`; `command` is the command line that made it.
pub fn run_page(o: &CompareOutcome, command: String) -> crate::run::RunPage {
    let closed = o.comparison.better == Better::Higher;
    let rows = o
        .rows
        .iter()
        .enumerate()
        .map(|(i, row)| {
            // The CDF of the run nearest the row's median.
            let median = o.comparison.rows[i].primary.map(|f| f.median);
            let runs: Vec<&Done> = o.done.iter().filter(|d| d.row == i).collect();
            let typical = median.and_then(|m| {
                runs.iter()
                    .min_by(|a, b| {
                        let da = (primary(&a.result, closed) - m).abs();
                        let db = (primary(&b.result, closed) - m).abs();
                        da.total_cmp(&db)
                    })
                    .copied()
            });
            crate::run::RunPageRow {
                label: row.label().to_string(),
                kind: match row {
                    Row::Engine { .. } => "connlab serve engine".into(),
                    Row::Against { addr, pid, .. } => match pid {
                        Some(p) => format!("server under test at {addr} (pid {p})"),
                        None => format!("server under test at {addr} (no pid: no server figures)"),
                    },
                },
                cdf_round: typical.map(|d| d.round),
                cdf: typical.map(latency_cdf).unwrap_or_default(),
                runs: runs
                    .iter()
                    .map(|d| crate::run::RunPageRun {
                        round: d.round,
                        file: d.file.clone(),
                        p50_us: d.result.service_latency_us.p50,
                        p99_us: d.result.service_latency_us.p99,
                        achieved_per_s: d.result.achieved_rate_per_s,
                        errors: d.result.requests.measured_errors(),
                        cpu_us_per_request: d.server.cpu_us_per_request,
                        wakeups_per_request: d.server.wakeups_per_request,
                        memory_per_connection_bytes: d.server.memory_per_connection_bytes,
                        warnings: d.result.warnings.clone(),
                        invalid: (!d.validity.valid).then(|| d.validity.failure_text()),
                    })
                    .collect(),
            }
        })
        .collect();
    let (workload, environment) = match o.done.first() {
        Some(d) => (workload_text(d), environment(d)),
        None => (String::new(), Vec::new()),
    };
    crate::run::RunPage {
        title: "connlab run".into(),
        command,
        workload,
        placement: format!("{} ({})", o.placement.text(), o.placement.note),
        environment,
        comparison: o.comparison.clone(),
        rows,
    }
}

/// A run's service-latency CDF: the summary's points (every 5 %, then the
/// maximum) with the 99th, 99.9th and 99.99th percentiles put in before
/// the maximum, so the tail between 0.95 and 1 is drawn from measured
/// percentiles rather than a straight line to the maximum.
fn latency_cdf(d: &Done) -> Vec<(f64, f64)> {
    let r = &d.result;
    let s = &r.service_latency_us;
    let mut points: Vec<(f64, f64)> = r
        .service_latency_cdf
        .iter()
        .map(|p| (p.value_us, p.fraction))
        .collect();
    for (value, fraction) in [(s.p99, 0.99), (s.p999, 0.999), (s.p9999, 0.9999)] {
        if !points.iter().any(|p| (p.1 - fraction).abs() < 1e-9) {
            points.push((value, fraction));
        }
    }
    points.sort_by(|a, b| a.1.total_cmp(&b.1));
    // Percentiles from the histogram and the summary's points agree to its
    // resolution; keep the line from turning back.
    let mut out: Vec<(f64, f64)> = Vec::with_capacity(points.len());
    for p in points {
        if out.last().is_none_or(|l| p.0 >= l.0) {
            out.push(p);
        }
    }
    out
}

fn workload_text(d: &Done) -> String {
    let r = &d.result;
    let c = &r.config;
    format!(
        "{} connections, active ratio {}, {} B requests, {} B responses, {}, {} {}, {} s measured after {} s warm-up",
        c.connections,
        c.active_ratio,
        c.request_size_bytes,
        c.response_size_bytes,
        c.rate_per_s.map_or(format!("closed loop depth {}", c.depth.unwrap_or(1)), |x| format!("{x} req/s {}", c.arrival)),
        c.protocol,
        c.path.as_deref().unwrap_or(""),
        c.duration_s,
        c.warmup_s
    )
}

fn environment(d: &Done) -> Vec<(String, String)> {
    let r = &d.result;
    let e = &r.environment;
    vec![
        ("kernel".into(), e.kernel.clone()),
        ("cpus".into(), e.cpu_count.to_string()),
        ("clock source".into(), e.clock_source.clone()),
        (
            "open-files limit".into(),
            format!("{} (hard {})", e.nofile_soft, e.nofile_hard),
        ),
        (
            "client threads ran on".into(),
            format!(
                "writer cpu {}, reader cpu {}",
                r.placement.writer_cpu.map_or("-".into(), |c| c.to_string()),
                r.placement.reader_cpu.map_or("-".into(), |c| c.to_string())
            ),
        ),
    ]
}
