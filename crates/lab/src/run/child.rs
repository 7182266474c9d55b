//! Child processes of the runners (and of `connlab run`): a
//! `connlab serve` started from a prepared command, its banner read, and a
//! graceful stop that returns its `--stats`.

use anyhow::{anyhow, Context};
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command};
use std::time::{Duration, Instant};

/// A `connlab serve` child, killed if not stopped cleanly.
pub struct ServerChild {
    child: Child,
    /// Where it listens (from its banner).
    pub addr: SocketAddr,
}

impl ServerChild {
    /// Spawns `cmd` (a `connlab serve` with stdout piped) and reads its
    /// `listening on ADDR` banner.
    pub fn spawn(mut cmd: Command) -> anyhow::Result<Self> {
        let mut child = cmd.spawn().context("starting connlab serve")?;
        let addr = read_banner(&mut child).inspect_err(|_| {
            let _ = child.kill();
            let _ = child.wait();
        })?;
        Ok(ServerChild { child, addr })
    }

    /// Its process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// SIGTERM, wait up to `grace` (then SIGKILL), and read its `--stats` file.
    pub fn stop(&mut self, stats: &Path, grace: Duration) -> Option<serde_json::Value> {
        stop_child(&mut self.child, libc::SIGTERM, grace);
        let text = std::fs::read_to_string(stats).ok()?;
        serde_json::from_str(&text).ok()
    }
}

impl Drop for ServerChild {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Server CPU seconds (user + system) from its `--stats`.
pub fn server_cpu_s(stats: &serde_json::Value) -> Option<f64> {
    Some(stats["cpu_user_s"].as_f64()? + stats["cpu_sys_s"].as_f64()?)
}

/// Sends `sig`, waits up to `grace` for the child to end, then kills and
/// reaps it.
pub fn stop_child(child: &mut Child, sig: libc::c_int, grace: Duration) {
    signal(child, sig);
    let deadline = Instant::now() + grace;
    while Instant::now() < deadline {
        if let Ok(Some(_)) = child.try_wait() {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
}

/// Has the kernel kill the child (SIGKILL) when this process dies, so no
/// server or shard outlives an interrupted sweep.
pub fn die_with_parent(cmd: &mut Command) {
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
pub fn signal(child: &Child, sig: libc::c_int) {
    // SAFETY: signalling our own child, which is not reaped yet, so its pid is ours.
    unsafe { libc::kill(child.id() as libc::pid_t, sig) };
}

fn read_banner(child: &mut Child) -> anyhow::Result<SocketAddr> {
    let stdout = child.stdout.take().context("server stdout")?;
    let mut line = String::new();
    BufReader::new(stdout)
        .read_line(&mut line)
        .context("reading the server's banner")?;
    let addr = line
        .trim()
        .strip_prefix("listening on ")
        .and_then(|a| a.parse().ok());
    match addr {
        Some(a) => Ok(a),
        None => {
            let status = child.try_wait().ok().flatten();
            Err(anyhow!(
                "connlab serve did not start (first line {line:?}, status {status:?})"
            ))
        }
    }
}

/// The line of log file `path` that says why its program stopped (see
/// [`telling_line`]); `None` when the log is missing or says nothing.
pub(crate) fn log_line(path: &Path) -> Option<String> {
    std::fs::read_to_string(path)
        .ok()
        .and_then(|text| telling_line(&text))
}

/// [`log_line`] for an error message, or where to look when it says nothing.
pub(crate) fn log_reason(path: &Path) -> String {
    log_line(path).unwrap_or_else(|| format!("(see {})", path.display()))
}

/// The line of a log that says why a program stopped: the first that reads
/// as an error (HAProxy's `[ALERT]`, nginx's `[emerg]`, an `error:`), else
/// the last non-empty one; trimmed and cut to 300 characters.
pub(crate) fn telling_line(text: &str) -> Option<String> {
    let lines = || text.lines().map(str::trim).filter(|l| !l.is_empty());
    let is_error = |l: &&str| {
        let l = l.to_ascii_lowercase();
        l.contains("[alert]") || l.contains("[emerg]") || l.contains("error")
    };
    let line = lines().find(is_error).or_else(|| lines().next_back())?;
    Some(line.chars().take(300).collect())
}

#[cfg(test)]
mod tests {
    use super::telling_line;

    #[test]
    fn the_first_error_line_explains_an_early_exit() {
        let haproxy = "[NOTICE] haproxy version is 2.6.12\n\
            [ALERT] parsing [h.cfg:3] : 'nbthread' value must be between 1 and 64 (was 200)\n\
            [ALERT] Fatal errors found in configuration.\n\n";
        assert_eq!(
            telling_line(haproxy).as_deref(),
            Some("[ALERT] parsing [h.cfg:3] : 'nbthread' value must be between 1 and 64 (was 200)")
        );
        let nginx = "nginx: [emerg] bind() to 127.0.0.1:80 failed (98: Address in use)\n";
        assert!(telling_line(nginx).unwrap().contains("bind()"));
        // Nothing reads as an error: the last thing said.
        assert_eq!(
            telling_line("starting\n  stopped \n").as_deref(),
            Some("stopped")
        );
        assert_eq!(telling_line("\n  \n"), None);
        assert_eq!(telling_line(&"x".repeat(1000)).map(|l| l.len()), Some(300));
    }
}
