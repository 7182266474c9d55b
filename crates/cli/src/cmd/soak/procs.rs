//! The soak's long-lived children: a `connlab` process started from fixed
//! arguments, its ready line awaited with a deadline, its resident memory
//! sampled from /proc, and killed when dropped.

use anyhow::{anyhow, Context};
use std::fs::File;
use std::io::{BufRead, BufReader};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// How long a child may take to print its ready line.
pub(super) const START_TIMEOUT: Duration = Duration::from_secs(20);

/// A running `connlab` child, killed (SIGKILL) and reaped when dropped.
pub(super) struct Proc {
    child: Child,
}

impl Proc {
    /// Starts `exe args...` with stderr appended to `log`, and waits until a
    /// stdout line starts with `ready`; returns the process and that line.
    /// Later stdout lines are read and dropped so the child never blocks on
    /// a full pipe.
    pub(super) fn spawn(
        exe: &Path,
        args: &[String],
        log: &Path,
        ready: &str,
    ) -> anyhow::Result<(Proc, String)> {
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
        die_with_parent(&mut cmd);
        let mut child = cmd
            .spawn()
            .with_context(|| format!("starting connlab {}", args.join(" ")))?;
        let stdout = child.stdout.take().context("child stdout")?;
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { return };
                // The receiver is gone after the ready line: drop the rest.
                let _ = tx.send(line);
            }
        });
        let mut proc = Proc { child };
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match rx.recv_timeout(left) {
                Ok(line) if line.starts_with(ready) => return Ok((proc, line)),
                Ok(_) => {}
                Err(e) => {
                    let when = match e {
                        mpsc::RecvTimeoutError::Timeout => {
                            format!("within {}s", START_TIMEOUT.as_secs())
                        }
                        mpsc::RecvTimeoutError::Disconnected => "before closing stdout".into(),
                    };
                    // Give an exiting child a moment so its status can be told.
                    std::thread::sleep(Duration::from_millis(100));
                    let status = proc
                        .child
                        .try_wait()
                        .ok()
                        .flatten()
                        .map_or("still running".to_string(), |s| describe(&s));
                    return Err(anyhow!(
                        "connlab {} printed no '{ready}' line {when} ({status}; see {})",
                        args.join(" "),
                        log.display()
                    ));
                }
            }
        }
    }

    /// The child's process id.
    pub(super) fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Sends `sig` (the child is not reaped yet, so its pid is ours).
    pub(super) fn signal(&self, sig: libc::c_int) {
        signal_child(&self.child, sig);
    }

    /// Its exit status if it has ended.
    pub(super) fn try_wait(&mut self) -> Option<ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    /// Sends `sig` and waits up to `grace` for the exit; SIGKILL after that.
    /// Returns the status and whether it ended within the grace time.
    pub(super) fn stop(&mut self, sig: libc::c_int, grace: Duration) -> (Option<ExitStatus>, bool) {
        if let Some(s) = self.try_wait() {
            return (Some(s), true);
        }
        // A stopped process must run again to handle the signal.
        self.signal(libc::SIGCONT);
        self.signal(sig);
        let deadline = Instant::now() + grace;
        while Instant::now() < deadline {
            if let Some(s) = self.try_wait() {
                return (Some(s), true);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        (self.child.wait().ok(), false)
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
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

/// Resident memory of a process from /proc/PID/status: (VmRSS, VmHWM) in KiB.
pub(super) fn rss_kib(pid: u32) -> Option<(u64, u64)> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let field = |name: &str| -> Option<u64> {
        text.lines()
            .find_map(|l| l.strip_prefix(name))?
            .trim()
            .trim_end_matches("kB")
            .trim()
            .parse()
            .ok()
    };
    Some((field("VmRSS:")?, field("VmHWM:").unwrap_or(0)))
}

/// Where a child's `--stats` and log files go: `DIR/NAME-INCARNATION.*`.
pub(super) fn stats_path(dir: &Path, name: &str, incarnation: u32) -> PathBuf {
    dir.join(format!("{name}-{incarnation}.json"))
}

/// Has the kernel kill the child (SIGKILL) when the soak dies, so no server
/// or load process outlives it.
pub(super) fn die_with_parent(cmd: &mut Command) {
    // SAFETY: prctl is async-signal-safe; it only sets this child's death signal.
    unsafe {
        cmd.pre_exec(|| {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

/// Sends `sig` to a child that has not been reaped.
pub(super) fn signal_child(child: &Child, sig: libc::c_int) {
    // SAFETY: signalling our own child, which is not reaped yet, so its pid is ours.
    unsafe { libc::kill(child.id() as libc::pid_t, sig) };
}
