//! The processes of a run: started in a namespace, guarded, stopped on drop.

use crate::run::child::log_reason;
use anyhow::{bail, Context};
use connlab_os::Shutdown;
use std::ffi::OsStr;
use std::fs::File;
use std::os::fd::AsRawFd;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command};
use std::time::{Duration, Instant};

// ------------------------------------------------------------------ processes

/// A child in a namespace, stopped (SIGINT, then SIGKILL) on drop.
pub(super) struct Proc {
    pub(super) child: Child,
    pub(super) name: String,
    pub(super) log: PathBuf,
}

impl Proc {
    /// SIGINT, wait up to `grace`, then SIGKILL; returns the exit code.
    pub(super) fn stop(&mut self, grace: Duration) -> Option<i32> {
        if let Ok(Some(s)) = self.child.try_wait() {
            return s.code();
        }
        crate::run::child::signal(&self.child, libc::SIGINT);
        let deadline = Instant::now() + grace;
        while Instant::now() < deadline {
            if let Ok(Some(s)) = self.child.try_wait() {
                return s.code();
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        self.child.wait().ok().and_then(|s| s.code())
    }

    /// Waits for the child to end by itself until `deadline` (or a Ctrl-C).
    pub(super) fn wait(&mut self, deadline: Instant, shutdown: &Shutdown) -> anyhow::Result<()> {
        loop {
            if let Some(s) = self.child.try_wait()? {
                if s.success() {
                    return Ok(());
                }
                bail!("{} exited with {s}: {}", self.name, log_reason(&self.log));
            }
            if shutdown.requested() {
                self.stop(Duration::from_secs(2));
                bail!("interrupted");
            }
            if Instant::now() > deadline {
                self.stop(Duration::from_secs(2));
                bail!(
                    "{} did not finish in time: {}",
                    self.name,
                    log_reason(&self.log)
                );
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.stop(Duration::from_secs(10));
    }
}

/// A command that enters network namespace `ns`, pins itself to `cpu` and
/// dies with this process, all between fork and exec.
pub(super) fn ns_command(ns: &str, cpu: Option<u32>, program: &OsStr) -> anyhow::Result<Command> {
    let path = format!("/run/netns/{ns}");
    let handle = File::open(&path).with_context(|| format!("opening {path}"))?;
    let mut cmd = Command::new(program);
    // SAFETY: setns, sched_setaffinity and prctl are async-signal-safe; the
    // namespace descriptor lives in the closure until exec (O_CLOEXEC).
    unsafe {
        cmd.pre_exec(move || {
            if libc::setns(handle.as_raw_fd(), libc::CLONE_NEWNET) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            if let Some(c) = cpu {
                let mut set: libc::cpu_set_t = std::mem::zeroed();
                libc::CPU_SET(c as usize, &mut set);
                if libc::sched_setaffinity(0, size_of::<libc::cpu_set_t>(), &set) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    Ok(cmd)
}
