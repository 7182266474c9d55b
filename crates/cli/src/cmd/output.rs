//! Output of load runs: `--json`, `--records`, `--hdr-log`, the live
//! progress line and the human summary on stderr.

use crate::Exit;
use clap::Args;
use connlab_lab::load_files::{write_hdr_log, RecordsFile};
use connlab_loadgen::{LoadOutcome, LoadResult, Progress, Workload};
use std::io::IsTerminal;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::time::{Duration, Instant};

/// Where results go.
#[derive(Args, Debug, Clone, Default)]
pub(crate) struct OutputArgs {
    /// Write the summary as JSON to FILE.
    #[arg(long, value_name = "FILE")]
    pub(crate) json: Option<PathBuf>,
    /// Write one line per measured request to FILE: CSV, or JSON Lines if FILE ends in .jsonl.
    #[arg(long, value_name = "FILE")]
    pub(crate) records: Option<PathBuf>,
    /// Write service-latency HdrHistogram interval logs (one per second) to FILE.
    #[arg(long, value_name = "FILE")]
    pub(crate) hdr_log: Option<PathBuf>,
}

impl OutputArgs {
    /// Checks `--json`, `--records` and `--hdr-log` before the run (exit 2), so a bad
    /// path costs nothing measured.
    pub(crate) fn check(&self) -> Result<(), Exit> {
        crate::cmd::check_output("--json", self.json.as_deref())?;
        crate::cmd::check_output("--records", self.records.as_deref())?;
        crate::cmd::check_output("--hdr-log", self.hdr_log.as_deref())
    }

    /// Opens `--records` (before the run, so a bad path fails early).
    pub(crate) fn open_records(&self) -> Result<Option<RecordsFile>, Exit> {
        Ok(self
            .records
            .as_deref()
            .map(RecordsFile::create)
            .transpose()?)
    }
}

/// Writes `--json` and `--hdr-log`.
pub(crate) fn write_outputs(output: &OutputArgs, outcome: &LoadOutcome) -> Result<(), Exit> {
    if let Some(path) = &output.json {
        crate::cmd::write_json("--json", path, &outcome.result)?;
    }
    if let Some(path) = &output.hdr_log {
        write_hdr_log(path, outcome)?;
    }
    Ok(())
}

/// The human summary on stderr.
pub(crate) fn print_summary(r: &LoadResult) {
    let c = &r.config;
    let rate = c.rate_per_s.map_or_else(
        || format!("closed loop, depth {}", c.depth.unwrap_or(1)),
        |x| format!("{x} req/s {}", c.arrival),
    );
    // HTTP asks for a path (the response is whatever the server sends for
    // it); CLB1 asks for sizes.
    let asks = match (&c.path, &c.manifest) {
        (_, Some(_)) => "paths from the manifest".to_string(),
        (Some(path), None) => format!("GET {path}"),
        (None, None) => format!(
            "{} B requests, {} B responses",
            c.request_size_bytes, c.response_size_bytes
        ),
    };
    let mut t = format!(
        "\nconnlab load -> {} ({}, {} I/O): {} connections, {} active, {asks}, {}, {:.1} s\n",
        c.target,
        c.protocol,
        c.io,
        r.connections.established,
        r.connections.active,
        rate,
        c.duration_s
    );
    // With a connection per request nothing is set up before measuring, so
    // a set-up time (and a rate divided by it) would mean nothing.
    let setup = if c.connection_per_request {
        "a new one per request".to_string()
    } else {
        format!(
            "in {:.2} s ({:.0}/s)",
            r.connections.setup_s, r.connections.setup_rate_per_s
        )
    };
    t.push_str(&format!(
        "  connections   {} established {setup}, {} failed, {} idle closed by server\n",
        r.connections.established, r.connections.failed, r.connections.idle_closed_by_peer
    ));
    // One window per line: the measured one, then the warm-up apart.
    let q = &r.requests;
    t.push_str(&format!(
        "  requests      {} sent, {} completed, {} errors ({:.1}%) in the measured window; achieved {:.1} req/s, {:.1} Mbit/s\n",
        q.sent,
        q.completed,
        q.measured_errors(),
        100.0 * q.error_ratio(),
        r.achieved_rate_per_s,
        r.throughput_mbit_s
    ));
    for (kind, n) in &q.errors {
        t.push_str(&format!("    {kind:<22} {n}\n"));
    }
    let warmup_errors: u64 = q.warmup_errors.values().sum();
    if q.warmup_sent + q.warmup_completed + warmup_errors > 0 {
        t.push_str(&format!(
            "  warm-up       {} sent, {} completed, {} errors (not in the figures)\n",
            q.warmup_sent, q.warmup_completed, warmup_errors
        ));
    }
    t.push_str(
        "  latency (us)       mean     stddev        p50        p99      p99.9        max\n",
    );
    for (name, s) in [
        ("service", &r.service_latency_us),
        ("corrected", &r.corrected_latency_us),
        ("send lag", &r.send_lag_us),
    ] {
        t.push_str(&format!(
            "    {name:<12} {:>10.1} {:>10.1} {:>10.1} {:>10.1} {:>10.1} {:>10.1}\n",
            s.mean, s.stddev, s.p50, s.p99, s.p999, s.max
        ));
    }
    let d = &r.send_deviation_us;
    if d.count > 0 {
        t.push_str(&format!(
            "  send deviation (us)  stddev {:.1}  median {:.1}  max {:.1}\n",
            d.stddev, d.median, d.max
        ));
    }
    t.push_str(&format!(
        "  client cpu    {:.2} s user, {:.2} s sys ({:.0} requests per cpu second); writer on cpu {}, reader on cpu {}\n",
        r.client_cpu_s.user,
        r.client_cpu_s.sys,
        r.requests_per_client_cpu_s,
        r.placement.writer_cpu.map_or("-".into(), |c| c.to_string()),
        r.placement.reader_cpu.map_or("-".into(), |c| c.to_string()),
    ));
    if !r.size_classes.is_empty() {
        t.push_str("  by size (us)   class      requests       mean        p50        p99\n");
        for c in &r.size_classes {
            let s = &c.service_latency_us;
            t.push_str(&format!(
                "                 {:<10} {:>8} {:>10.1} {:>10.1} {:>10.1}\n",
                c.class, c.requests, s.mean, s.p50, s.p99
            ));
        }
    }
    for w in &r.warnings {
        t.push_str(&format!("  warning: {w}\n"));
    }
    eprint!("{t}");
}

/// Runs `f` while a scoped thread shows live progress: a bar on a terminal,
/// a plain line every few seconds otherwise.
pub(crate) fn with_progress<T>(progress: &Progress, w: &Workload, f: impl FnOnce() -> T) -> T {
    let stop = AtomicBool::new(false);
    let total = w.warmup + w.duration;
    let tty = std::io::stderr().is_terminal();
    std::thread::scope(|s| {
        s.spawn(|| show(progress, total, tty, &stop));
        let out = f();
        stop.store(true, Relaxed);
        out
    })
}

fn show(p: &Progress, total: Duration, tty: bool, stop: &AtomicBool) {
    let bar = tty.then(|| {
        let b = indicatif::ProgressBar::new(total.as_millis() as u64);
        b.set_style(
            indicatif::ProgressStyle::with_template("{spinner} [{bar:30}] {msg}")
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
        );
        b
    });
    let mut started: Option<Instant> = None;
    let mut last_line = Instant::now();
    let mut last_done = 0u64;
    while !stop.load(Relaxed) {
        std::thread::sleep(Duration::from_millis(200));
        let measuring = p.measuring.load(Relaxed);
        if measuring && started.is_none() {
            started = Some(Instant::now());
        }
        let (sent, done, errs) = (
            p.sent.load(Relaxed),
            p.completed.load(Relaxed),
            p.errors.load(Relaxed),
        );
        let msg = match started {
            None => format!("connecting: {} established", p.established.load(Relaxed)),
            Some(s) => format!(
                "{:.0}/{:.0} s  sent {sent}  completed {done}  errors {errs}",
                s.elapsed().as_secs_f64(),
                total.as_secs_f64()
            ),
        };
        match &bar {
            Some(b) => {
                if let Some(s) = started {
                    b.set_position(s.elapsed().as_millis() as u64);
                }
                b.set_message(msg);
            }
            None => {
                if last_line.elapsed() >= Duration::from_secs(2) {
                    let rate = (done - last_done) as f64 / last_line.elapsed().as_secs_f64();
                    eprintln!("connlab load: {msg}  ({rate:.0} responses/s)");
                    last_line = Instant::now();
                    last_done = done;
                }
            }
        }
    }
    if let Some(b) = bar {
        b.finish_and_clear();
    }
}
