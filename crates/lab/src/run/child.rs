//! Child processes of the runners (and of `connlab run`): a
//! `connlab serve` started from a prepared command, its banner read, and a
//! graceful stop that returns its `--stats`.

use anyhow::{anyhow, Context};
use connlab_os::child::{Child, Stream};
use std::net::SocketAddr;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

/// How long a `connlab serve` may take to print its banner.
pub const BANNER_TIMEOUT: Duration = Duration::from_secs(60);

/// A `connlab serve` child ([`Child`]: dies with this process, killed if
/// not stopped cleanly) and the address its banner named.
pub struct ServerChild {
    child: Child,
    /// Where it listens (from its banner).
    pub addr: SocketAddr,
}

impl ServerChild {
    /// Spawns `cmd` (a `connlab serve` with stdout piped) and reads its
    /// `listening on ADDR` banner, its first line on stdout.
    pub fn spawn(mut cmd: Command) -> anyhow::Result<Self> {
        let mut child = Child::spawn(&mut cmd).context("starting connlab serve")?;
        let line = match child.wait_ready(Stream::Stdout, BANNER_TIMEOUT, |_| true) {
            Ok(line) => line,
            Err(e) if e.timed_out => {
                return Err(anyhow!(
                    "connlab serve printed no banner within {} s",
                    BANNER_TIMEOUT.as_secs()
                ))
            }
            Err(_) => String::new(),
        };
        match line
            .trim()
            .strip_prefix("listening on ")
            .and_then(|a| a.parse().ok())
        {
            Some(addr) => Ok(ServerChild { child, addr }),
            None => {
                let status = child.try_wait().ok().flatten();
                Err(anyhow!(
                    "connlab serve did not start (first line {line:?}, status {status:?})"
                ))
            }
        }
    }

    /// Its process id.
    pub fn pid(&self) -> u32 {
        self.child.pid()
    }

    /// The process guard, e.g. to read its tree's CPU and memory.
    pub fn child(&mut self) -> &mut Child {
        &mut self.child
    }

    /// SIGTERM, wait up to `grace` (then SIGKILL), and read its `--stats` file.
    pub fn stop(&mut self, stats: &Path, grace: Duration) -> Option<serde_json::Value> {
        self.child.stop(libc::SIGTERM, grace);
        let text = std::fs::read_to_string(stats).ok()?;
        serde_json::from_str(&text).ok()
    }
}

/// Server CPU seconds (user + system) from its `--stats`.
pub fn server_cpu_s(stats: &serde_json::Value) -> Option<f64> {
    Some(stats["cpu_user_s"].as_f64()? + stats["cpu_sys_s"].as_f64()?)
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
