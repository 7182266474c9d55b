//! What `connlab run` shows while it measures, on stderr: one progress bar
//! with an ETA across every run (on a terminal; a line per run elsewhere),
//! each run's figures above it, and the warnings counted by kind for the
//! end instead of repeated after every run.

use connlab_lab::run::compare_run::{RunProgress, ServerFigures};
use connlab_lab::tally::Tally;
use connlab_lab::validity::Validity;
use connlab_loadgen::{LoadResult, Progress, Workload};
use indicatif::{ProgressBar, ProgressStyle};
use std::io::IsTerminal;

/// The progress of a comparison and the warnings of its runs.
pub(crate) struct Shown {
    bar: Option<ProgressBar>,
    tty: bool,
    tally: Tally,
}

impl Shown {
    /// Progress on stderr; a bar only when stderr is a terminal.
    pub(crate) fn new() -> Shown {
        Shown {
            bar: None,
            tty: std::io::stderr().is_terminal(),
            tally: Tally::default(),
        }
    }

    /// Prints a line above the bar (or alone).
    fn say(&self, line: &str) {
        match &self.bar {
            Some(b) => b.println(line),
            None => eprintln!("{line}"),
        }
    }

    /// Clears the bar and returns the runs' warnings, counted.
    pub(crate) fn finish(self) -> Tally {
        if let Some(b) = &self.bar {
            b.finish_and_clear();
        }
        self.tally
    }
}

impl RunProgress for Shown {
    fn note(&mut self, line: &str) {
        self.say(&format!("connlab run: {line}"));
    }

    fn planned(&mut self, runs: u32) {
        if !self.tty {
            return;
        }
        let bar = ProgressBar::new(u64::from(runs));
        bar.set_style(
            ProgressStyle::with_template(
                "{spinner} [{bar:30}] {pos}/{len} runs, {elapsed} elapsed, about {eta} left  {msg}",
            )
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
        );
        bar.enable_steady_tick(std::time::Duration::from_millis(200));
        self.bar = Some(bar);
    }

    fn starting(&mut self, round: u32, rounds: u32, label: &str, retry: bool) {
        let again = if retry { ", once more" } else { "" };
        match &self.bar {
            Some(b) => {
                if retry {
                    b.inc_length(1);
                }
                b.set_message(format!("round {round}/{rounds}: {label}{again}"));
            }
            None => eprintln!("connlab run: round {round}/{rounds}, {label}{again}"),
        }
    }

    fn measured(&mut self, result: &LoadResult, server: &ServerFigures, validity: &Validity) {
        self.say(&run_line(result, server, validity));
        self.tally.add(Some(validity), &result.warnings);
        if let Some(b) = &self.bar {
            b.inc(1);
        }
    }

    fn load(&mut self, _progress: &Progress, _workload: &Workload, run: &mut dyn FnMut()) {
        run();
    }
}

/// One run's figures in a line, and the gates it failed by name (the
/// warnings are counted for the end).
fn run_line(r: &LoadResult, s: &ServerFigures, v: &Validity) -> String {
    let opt = |v: Option<f64>, digits: usize| v.map_or("-".into(), |v| format!("{v:.digits$}"));
    let failed: Vec<&str> = v.failed().map(|g| g.name.as_str()).collect();
    format!(
        "  p50 {:.1} us, p99 {:.1} us, {:.1} req/s, {} errors; server {} us cpu/request, {} wake-ups/request, {} B/connection{}",
        r.service_latency_us.p50,
        r.service_latency_us.p99,
        r.achieved_rate_per_s,
        r.requests.measured_errors(),
        opt(s.cpu_us_per_request, 1),
        opt(s.wakeups_per_request, 2),
        opt(s.memory_per_connection_bytes, 0),
        if failed.is_empty() {
            String::new()
        } else {
            format!("; invalid: {}", failed.join(", "))
        }
    )
}
