//! The soak's long-lived children: a `connlab` process started from fixed
//! arguments as a [`Child`], its ready line awaited with a deadline.

use anyhow::{anyhow, Context};
use connlab_os::child::{Child, Stream};
use std::fs::File;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::time::Duration;

/// How long a child may take to print its ready line.
pub(super) const START_TIMEOUT: Duration = Duration::from_secs(20);

/// Starts `exe args...` with stderr appended to `log`, and waits until a
/// stdout line starts with `ready`; returns the process and that line.
/// Later stdout lines are read and dropped so the child never blocks on
/// a full pipe.
pub(super) fn spawn(
    exe: &Path,
    args: &[String],
    log: &Path,
    ready: &str,
) -> anyhow::Result<(Child, String)> {
    let err = File::options()
        .create(true)
        .append(true)
        .open(log)
        .with_context(|| format!("opening log {}", log.display()))?;
    let mut cmd = Command::new(exe);
    cmd.args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(err);
    let mut child =
        Child::spawn(&mut cmd).with_context(|| format!("starting connlab {}", args.join(" ")))?;
    match child.wait_ready(Stream::Stdout, START_TIMEOUT, |l| l.starts_with(ready)) {
        Ok(line) => Ok((child, line)),
        Err(e) => {
            let when = if e.timed_out {
                format!("within {}s", START_TIMEOUT.as_secs())
            } else {
                "before closing stdout".into()
            };
            let status = e
                .status
                .map_or("still running".to_string(), |s| describe(&s));
            Err(anyhow!(
                "connlab {} printed no '{ready}' line {when} ({status}; see {})",
                args.join(" "),
                log.display()
            ))
        }
    }
}

/// An exit status in words: `exit 0`, `signal 9 (SIGKILL)`.
pub(super) fn describe(status: &ExitStatus) -> String {
    match (status.code(), status.signal()) {
        (Some(c), _) => format!("exit {c}"),
        (None, Some(s)) => format!("signal {s} ({})", signal_name(s)),
        _ => "unknown".to_string(),
    }
}

fn signal_name(sig: i32) -> &'static str {
    match sig {
        libc::SIGKILL => "SIGKILL",
        libc::SIGTERM => "SIGTERM",
        libc::SIGINT => "SIGINT",
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGABRT => "SIGABRT",
        libc::SIGBUS => "SIGBUS",
        libc::SIGPIPE => "SIGPIPE",
        _ => "other",
    }
}

/// Where a child's `--stats` and log files go: `DIR/NAME-INCARNATION.*`.
pub(super) fn stats_path(dir: &Path, name: &str, incarnation: u32) -> PathBuf {
    dir.join(format!("{name}-{incarnation}.json"))
}
