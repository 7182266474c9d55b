//! What `connlab run` prints and writes: the line after each run, the
//! table at the end and the HTML page (`runs/*.json` are the library's).

use crate::Exit;
use anyhow::Context;
use connlab_lab::compare::{Better, Comparison, Standing};
use connlab_lab::run::compare_run::{CompareOutcome, Done, Row, RunPlacement, ServerFigures};
use connlab_lab::validity::Validity;
use connlab_loadgen::LoadResult;
use connlab_os::files::write_atomic;
use std::path::Path;

pub(super) fn print_run_line(r: &LoadResult, s: &ServerFigures, v: &Validity) {
    let q = &r.requests;
    let opt = |v: Option<f64>, digits: usize| v.map_or("-".into(), |v| format!("{v:.digits$}"));
    eprintln!(
        "  p50 {:.1} us, p99 {:.1} us, {:.1} req/s, {} errors; server {} us cpu/request, {} wake-ups/request, {} B/connection",
        r.service_latency_us.p50,
        r.service_latency_us.p99,
        r.achieved_rate_per_s,
        q.measured_errors(),
        opt(s.cpu_us_per_request, 1),
        opt(s.wakeups_per_request, 2),
        opt(s.memory_per_connection_bytes, 0),
    );
    for w in &r.warnings {
        eprintln!("  warning: {w}");
    }
    if !v.valid {
        eprintln!("  invalid: {}", v.failure_text());
    }
}

/// Median over a row's runs of `f`.
fn row_median(done: &[Done], row: usize, f: impl Fn(&Done) -> Option<f64>) -> Option<f64> {
    let v: Vec<Option<f64>> = done.iter().filter(|d| d.row == row).map(f).collect();
    connlab_lab::compare::Figure::of(&v).map(|f| f.median)
}

pub(super) fn print_table(
    rows: &[Row],
    done: &[Done],
    c: &Comparison,
    placement: &RunPlacement,
    rounds: u32,
) {
    let Some(first) = done.first() else {
        eprintln!("\nno run finished: nothing to compare");
        return;
    };
    let r0 = &first.result.config;
    let closed = c.better == Better::Higher;
    let mut t = format!(
        "\n{} by engine ({} connections, ratio {}, {}, {} B / {} B, {}; {rounds} repetitions; {}):\n",
        if closed { "achieved rate" } else { "service latency" },
        r0.connections,
        r0.active_ratio,
        r0.rate_per_s
            .map_or(format!("closed loop depth {}", r0.depth.unwrap_or(1)), |r| format!("{r} req/s")),
        r0.request_size_bytes,
        r0.response_size_bytes,
        r0.protocol,
        placement.text()
    );
    let head = if closed { "req/s" } else { "p50 us" };
    t.push_str(&format!(
        "  {:<10} {:>22} {:>26} {:>9} {:>11} {:>11} {:>13} {:>13} {:>7}\n",
        "engine",
        format!("{head} median (spread)"),
        "ratio to best (interval)",
        "p99 us",
        "achieved/s",
        "cpu us/req",
        "wake-ups/req",
        "mem/conn KiB",
        "errors"
    ));
    let opt = |v: Option<f64>, digits: usize| v.map_or("-".into(), |v| format!("{v:.digits$}"));
    for (i, row) in rows.iter().enumerate() {
        let rc = &c.rows[i];
        let primary = rc.primary.map_or("-".into(), |f| {
            if closed {
                format!("{:.0} ({:.0}-{:.0})", f.median, f.min, f.max)
            } else {
                format!("{:.1} ({:.1}-{:.1})", f.median, f.min, f.max)
            }
        });
        let ratio = match (rc.standing, rc.ratio_to_best, rc.ratio_ci) {
            (Standing::Best, _, _) => "best".to_string(),
            (_, Some(r), Some((lo, hi))) => format!("{r:.2} ({lo:.2}-{hi:.2})"),
            (_, Some(r), None) => format!("{r:.2}"),
            _ => "-".into(),
        };
        let errors: u64 = done
            .iter()
            .filter(|d| d.row == i)
            .map(|d| d.result.requests.measured_errors())
            .sum();
        t.push_str(&format!(
            "  {:<10} {primary:>22} {ratio:>26} {:>9} {:>11} {:>11} {:>13} {:>13} {errors:>7}\n",
            row.label(),
            opt(
                row_median(done, i, |d| Some(d.result.service_latency_us.p99)),
                1
            ),
            opt(
                row_median(done, i, |d| Some(d.result.achieved_rate_per_s)),
                1
            ),
            opt(rc.cpu_us_per_request.map(|f| f.median), 1),
            opt(rc.wakeups_per_request.map(|f| f.median), 2),
            opt(rc.memory_per_connection_bytes.map(|f| f.median / 1024.0), 2),
        ));
    }
    let mut lines = c.verdict.iter();
    if let Some(l) = lines.next() {
        t.push_str(&format!("verdict: {l}\n"));
    }
    for l in lines {
        t.push_str(&format!("  {l}\n"));
    }
    eprint!("{t}");
}

/// Writes `DIR/comparison.json` and `DIR/index.html`.
pub(super) fn write_page(dir: &Path, o: &CompareOutcome) -> Result<(), Exit> {
    o.write_comparison(dir)?;
    let command = std::env::args().collect::<Vec<_>>().join(" ");
    let page = connlab_report::compare_run::run_page(o, command);
    let html = connlab_report::run::render_run(&page).context("rendering the page")?;
    let path = dir.join("index.html");
    write_atomic(&path, html).with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}
