//! The processes of a run: started in a namespace, guarded, stopped on drop.

use crate::run::child::log_reason;
use anyhow::{bail, Context};
use connlab_os::child::Child;
use connlab_os::Shutdown;
use std::ffi::OsStr;
use std::fs::File;
use std::os::fd::AsRawFd;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

// ------------------------------------------------------------------ processes

/// A child in a namespace ([`Child`]) with its name and log, stopped
/// (SIGINT, then SIGKILL) on drop.
pub(super) struct Proc {
    pub(super) child: Child,
    pub(super) name: String,
    pub(super) log: PathBuf,
}

impl Proc {
    /// SIGINT, wait up to `grace`, then SIGKILL; returns the exit code.
    pub(super) fn stop(&mut self, grace: Duration) -> Option<i32> {
        self.child.stop(libc::SIGINT, grace).status?.code()
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

/// A command that enters network namespace `ns` and pins itself to `cpu`,
/// both between fork and exec (spawned as a [`Child`], it dies with this
/// process).
pub(super) fn ns_command(ns: &str, cpu: Option<u32>, program: &OsStr) -> anyhow::Result<Command> {
    let path = format!("/run/netns/{ns}");
    let handle = File::open(&path).with_context(|| format!("opening {path}"))?;
    let mut cmd = Command::new(program);
    // SAFETY: setns and sched_setaffinity are async-signal-safe; the
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
            Ok(())
        });
    }
    Ok(cmd)
}
