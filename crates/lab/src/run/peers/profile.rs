//! `profile = true`: where the measured role's CPU time goes, as
//! `perf record -e cpu-clock -F 4000 -g` of every process of that role.
//!
//! The profiles come from runs of their own, one per contender and body
//! size, after every measured repetition: the same set-up started again and
//! loaded for the experiment's duration, with perf attached for a window in
//! the middle of the load. Sampling at 4 kHz with call graphs costs the
//! profiled processes CPU time, so a profile taken during a measured run
//! would lower its requests per CPU second; a run of its own leaves every
//! measured figure as it is without profiling. One run per contender and
//! body size rather than one per point: the repetitions only differ in when
//! they ran, and a profile run costs as long as a point.
//!
//! ```text
//! DIR/profiles/<contender>-<body>B.perf.data    perf record's output
//! DIR/profiles/<contender>-<body>B.report.txt   perf report --children --sort sym --stdio -g none
//! DIR/logs/profiles/<contender>-<body>B/        the processes' output, perf's own
//! ```
//!
//! The report is written last and whole (a temporary file, then a rename):
//! a resumed sweep skips the profiles whose report exists.

use super::{start_roles, PointCtx};
use crate::run::child::telling_line;
use crate::run::CLIENT_SLACK;
use crate::{PeerParams, Role};
use anyhow::{anyhow, bail, Context};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::mpsc::RecvTimeoutError;
use std::time::{Duration, Instant};

/// The longest window perf records.
const WINDOW_MAX: Duration = Duration::from_secs(10);

/// What perf samples, how often, with call graphs (the command of the
/// hand-made profiles in BENCHMARKS.md).
const RECORD: [&str; 6] = ["-e", "cpu-clock", "-F", "4000", "-g", "--no-buildid-cache"];

/// `DIR/profiles/<id>.report.txt`.
pub(super) fn report_path(out: &Path, id: &str) -> PathBuf {
    out.join("profiles").join(format!("{id}.report.txt"))
}

/// `DIR/profiles/<id>.perf.data`.
fn data_path(out: &Path, id: &str) -> PathBuf {
    out.join("profiles").join(format!("{id}.perf.data"))
}

/// The window perf records: half the load, at most [`WINDOW_MAX`], and
/// when it starts after the client: so that it sits in the middle.
pub(super) fn window(duration: Duration) -> (Duration, Duration) {
    let window = (duration / 2).min(WINDOW_MAX);
    ((duration - window) / 2, window)
}

/// Checks that perf runs and can record a process this sweep started, as
/// the profiles will; returns `perf --version`.
pub(super) fn check_perf() -> anyhow::Result<String> {
    let output = Command::new("perf")
        .arg("--version")
        .output()
        .map_err(|e| {
            anyhow!("perf is needed for profile = true ({e}): apt-get install -y linux-perf")
        })?;
    if !output.status.success() {
        bail!("perf does not run: {}", said(&output));
    }
    let version = String::from_utf8_lossy(&output.stdout).trim().to_string();
    let data = std::env::temp_dir().join(format!("connlab-perf-check-{}.data", std::process::id()));
    let mut sleeper = Command::new("sleep")
        .arg("10")
        .stdin(Stdio::null())
        .spawn()
        .context("starting sleep to try perf on")?;
    let tried = record(
        &[sleeper.id() as i32],
        &data,
        Duration::from_millis(50),
        Instant::now() + Duration::from_secs(30),
        &AtomicBool::new(false),
    );
    let _ = sleeper.kill();
    let _ = sleeper.wait();
    let _ = std::fs::remove_file(&data);
    let _ = std::fs::remove_file(data.with_extension("data.old"));
    tried.map_err(|e| {
        let paranoid = std::fs::read_to_string("/proc/sys/kernel/perf_event_paranoid")
            .map_or_else(|_| "unreadable".to_string(), |s| s.trim().to_string());
        anyhow!(
            "perf cannot record a profile here ({e:#}); kernel.perf_event_paranoid is {paranoid}: \
             run as root, or lower it"
        )
    })?;
    Ok(version)
}

/// `perf record` of `pids` into `data`: from when perf says it records,
/// for `window` but not past `latest_end` (nor past `stop` being raised);
/// returns how long it recorded.
///
/// perf's workload is a shell that says `recording` and waits for its
/// input to close: perf enables the events on `pids` before it starts the
/// workload, so the line marks the start of the samples whatever perf took
/// to set up, and closing the input ends them.
fn record(
    pids: &[i32],
    data: &Path,
    window: Duration,
    latest_end: Instant,
    stop: &AtomicBool,
) -> anyhow::Result<Duration> {
    let pids: Vec<String> = pids.iter().map(i32::to_string).collect();
    let mut perf = Command::new("perf")
        .arg("record")
        .args(RECORD)
        .arg("-p")
        .arg(pids.join(","))
        .arg("-o")
        .arg(data)
        .args(["--", "sh", "-c", "echo recording; read line; true"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .context("starting perf record")?;
    let (tx, rx) = std::sync::mpsc::channel();
    if let Some(out) = perf.stdout.take() {
        std::thread::spawn(move || {
            let mut line = String::new();
            let _ = BufReader::new(out).read_line(&mut line);
            let _ = tx.send(line);
        });
    }
    let wait = latest_end.saturating_duration_since(Instant::now());
    let ready = rx.recv_timeout(wait);
    let began = Instant::now();
    if !matches!(&ready, Ok(line) if line.trim() == "recording") {
        let _ = perf.kill();
        let output = perf.wait_with_output().context("waiting for perf record")?;
        match ready {
            Err(RecvTimeoutError::Timeout) => bail!(
                "perf record had not started after {:.1} s, when the window had to end",
                wait.as_secs_f64()
            ),
            _ => bail!("perf record failed ({}): {}", output.status, said(&output)),
        }
    }
    let end = (began + window).min(latest_end);
    while Instant::now() < end && !stop.load(Relaxed) {
        std::thread::sleep(Duration::from_millis(10));
    }
    let recorded = began.elapsed();
    drop(perf.stdin.take());
    let output = perf.wait_with_output().context("waiting for perf record")?;
    if !output.status.success() {
        bail!("perf record failed ({}): {}", output.status, said(&output));
    }
    Ok(recorded)
}

/// The line of a failed command's output that says why.
fn said(output: &Output) -> String {
    let text = String::from_utf8_lossy(&output.stderr).to_string()
        + &String::from_utf8_lossy(&output.stdout);
    telling_line(&text).unwrap_or_else(|| "(it said nothing)".into())
}

/// Runs the set-up of `p` again, unmeasured, and records the profile of the
/// measured role's processes into `DIR/profiles` (`ctx.logs` is the run's
/// log directory); returns what to say about it, `None` when interrupted.
pub(super) fn record_profile(
    ctx: &PointCtx,
    p: &PeerParams,
    out: &Path,
) -> anyhow::Result<Option<String>> {
    let id = p.profile_id();
    let dir = out.join("profiles");
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let data = data_path(out, &id);
    for old in [data.clone(), data.with_extension("data.old")] {
        if old.exists() {
            std::fs::remove_file(&old).with_context(|| format!("removing {}", old.display()))?;
        }
    }
    let mut roles = start_roles(ctx, p)?;
    let cmd = roles.client_command(ctx, p.body_bytes);
    let placement = &ctx.exp.placement;
    let mut client = super::Proc::spawn(
        cmd,
        "client",
        &placement.client_cpus(),
        &ctx.logs,
        libc::SIGINT,
    )?;
    // perf starts when the window should; it takes a moment to set up, so
    // its samples begin later, and end half a lead before the load does.
    let (lead, window) = window(ctx.duration);
    let started = Instant::now();
    while started.elapsed() < lead {
        if ctx.stop.load(Relaxed) {
            return Ok(None);
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let pids: Vec<i32> = match ctx.exp.measure {
        Role::Server => roles.server.tree(),
        Role::Gateway => roles.gateway.iter().flat_map(|g| g.tree()).collect(),
        Role::Client => client.tree(),
    };
    if pids.is_empty() {
        bail!("the {} has no process to profile", ctx.exp.measure.name());
    }
    let latest_end = started + lead + window + lead / 2;
    let recorded = record(&pids, &data, window, latest_end, ctx.stop);
    if ctx.stop.load(Relaxed) {
        return Ok(None);
    }
    let recorded = recorded?;
    if client
        .wait_rusage(ctx.duration + CLIENT_SLACK, ctx.stop)?
        .is_none()
    {
        return Ok(None);
    }
    roles.stop();
    let output = Command::new("perf")
        .arg("report")
        .arg("-i")
        .arg(&data)
        .args(["--children", "--sort", "sym", "--stdio", "-g", "none"])
        .stdin(Stdio::null())
        .output()
        .context("starting perf report")?;
    if !output.status.success() {
        bail!("perf report failed ({}): {}", output.status, said(&output));
    }
    let text = String::from_utf8_lossy(&output.stdout);
    if !text
        .lines()
        .any(|l| l.trim_start().starts_with(|c: char| c.is_ascii_digit()))
    {
        bail!(
            "perf report of {} lists no symbol: {}",
            data.display(),
            said(&output)
        );
    }
    let report = report_path(out, &id);
    connlab_os::files::write_atomic(&report, text.as_bytes())
        .with_context(|| format!("writing {}", report.display()))?;
    Ok(Some(format!(
        "{} process{} of the {} for {:.1} s -> {}",
        pids.len(),
        if pids.len() == 1 { "" } else { "es" },
        ctx.exp.measure.name(),
        recorded.as_secs_f64(),
        report.display()
    )))
}

#[cfg(test)]
mod tests {
    use super::{record, window};
    use std::sync::atomic::AtomicBool;
    use std::time::{Duration, Instant};

    #[test]
    fn a_failed_perf_record_says_why_in_perfs_words() {
        let runs = std::process::Command::new("perf")
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success());
        if !runs {
            eprintln!("skipped: needs perf");
            return;
        }
        // A process that has exited: perf cannot attach to it.
        let mut gone = std::process::Command::new("true").spawn().unwrap();
        let pid = gone.id() as i32;
        gone.wait().unwrap();
        let data = std::env::temp_dir().join(format!("connlab-perf-gone-{pid}.data"));
        let e = record(
            &[pid],
            &data,
            Duration::from_millis(50),
            Instant::now() + Duration::from_secs(30),
            &AtomicBool::new(false),
        )
        .unwrap_err()
        .to_string();
        let _ = std::fs::remove_file(&data);
        assert!(e.starts_with("perf record failed"), "{e}");
        assert!(!e.contains("it said nothing"), "{e}");
    }

    #[test]
    fn the_window_sits_in_the_middle_of_the_load() {
        let s = Duration::from_secs;
        assert_eq!(window(s(4)), (s(1), s(2)));
        assert_eq!(window(s(60)), (s(25), s(10)));
        let (lead, w) = window(Duration::from_millis(1500));
        assert_eq!((lead.as_millis(), w.as_millis()), (375, 750));
    }
}
