//! The processes of a point: started pinned, waited for until they answer,
//! their CPU time read from `/proc`, stopped on drop.

use super::{GRACE, READY};
use crate::run::child::log_line;
use anyhow::{bail, Context};
use connlab_os::child::Child;
use std::fs::File;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::time::{Duration, Instant};

/// Sends one `GET /bytes/N` to `addr` until a 200 comes back, or fails once
/// `proc` has exited or [`READY`] has passed.
pub(super) fn wait_ready(proc: &mut Proc, addr: SocketAddr, body_bytes: u64) -> anyhow::Result<()> {
    let deadline = Instant::now() + READY;
    let request =
        format!("GET /bytes/{body_bytes} HTTP/1.1\r\nHost: peers\r\nConnection: close\r\n\r\n");
    loop {
        if let Some(status) = proc.child.try_wait()? {
            return Err(exited_at_start(proc, status));
        }
        let answer = (|| -> std::io::Result<String> {
            let mut s = TcpStream::connect_timeout(&addr, Duration::from_millis(500))?;
            s.set_read_timeout(Some(Duration::from_secs(2)))?;
            s.write_all(request.as_bytes())?;
            let mut head = [0u8; 12];
            s.read_exact(&mut head)?;
            Ok(String::from_utf8_lossy(&head).into_owned())
        })();
        match answer {
            Ok(head) if head.ends_with(" 200") => return Ok(()),
            Ok(head) if Instant::now() > deadline => {
                bail!("{addr} answered {head:?}, not 200, to GET /bytes/{body_bytes}")
            }
            Err(e) if Instant::now() > deadline => {
                bail!("the {} at {addr} is not serving: {e}", proc.name)
            }
            _ => std::thread::sleep(Duration::from_millis(50)),
        }
    }
}

/// The error of a process that exited before it served: its status, the
/// last line it logged (usually why) and where the whole log is.
fn exited_at_start(proc: &Proc, status: std::process::ExitStatus) -> anyhow::Error {
    let said = log_line(&proc.log)
        .map(|line| format!(": {line}"))
        .unwrap_or_default();
    anyhow::anyhow!(
        "the {} exited at start ({status}){said} (log: {})",
        proc.name,
        proc.log.display()
    )
}

/// Waits until `addr` accepts a TCP connection, or fails once `proc` has
/// exited or [`READY`] has passed.
pub(super) fn wait_listening(proc: &mut Proc, addr: SocketAddr) -> anyhow::Result<()> {
    let deadline = Instant::now() + READY;
    loop {
        if let Some(status) = proc.child.try_wait()? {
            return Err(exited_at_start(proc, status));
        }
        match TcpStream::connect_timeout(&addr, Duration::from_millis(500)) {
            Ok(_) => return Ok(()),
            Err(e) if Instant::now() > deadline => {
                bail!("the {} does not listen on {addr}: {e}", proc.name)
            }
            Err(_) => std::thread::sleep(Duration::from_millis(50)),
        }
    }
}

/// A child process and its descendants ([`Child`]) with its log, name and
/// stop signal; the whole tree is stopped (then killed) on drop.
pub(super) struct Proc {
    child: Child,
    name: String,
    log: PathBuf,
    stop_signal: libc::c_int,
}

impl Proc {
    /// Spawns `cmd` with its output in `logs/<name>.log`, pinned to `cpu`.
    pub(super) fn spawn(
        mut cmd: Command,
        name: &str,
        cpus: &[usize],
        logs: &Path,
        stop_signal: libc::c_int,
    ) -> anyhow::Result<Proc> {
        let log = logs.join(format!("{name}.log"));
        let file = File::create(&log).with_context(|| format!("creating {}", log.display()))?;
        cmd.stdin(Stdio::null())
            .stdout(file.try_clone()?)
            .stderr(file);
        if !cpus.is_empty() {
            let cpus = cpus.to_vec();
            // SAFETY: sched_setaffinity on the calling (child) process between
            // fork and exec touches only a stack cpu_set_t.
            unsafe {
                cmd.pre_exec(move || {
                    let mut set: libc::cpu_set_t = std::mem::zeroed();
                    for &cpu in &cpus {
                        libc::CPU_SET(cpu, &mut set);
                    }
                    if libc::sched_setaffinity(0, size_of::<libc::cpu_set_t>(), &set) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    Ok(())
                });
            }
        }
        let program = cmd.get_program().to_string_lossy().into_owned();
        let child =
            Child::spawn(&mut cmd).with_context(|| format!("starting the {name} ({program})"))?;
        Ok(Proc {
            child,
            name: name.to_string(),
            log,
            stop_signal,
        })
    }

    /// The process's id.
    pub(super) fn pid(&self) -> i32 {
        self.child.pid() as i32
    }

    /// This process and every descendant alive now.
    pub(super) fn tree(&self) -> Vec<i32> {
        self.child.tree()
    }

    /// CPU seconds of this process and every descendant alive now,
    /// including what each has reaped from its own children.
    pub(super) fn tree_cpu_s(&self) -> f64 {
        self.child.tree_usage().cpu_s
    }

    /// Waits for the process to end by itself and returns its CPU seconds
    /// (rusage of it and its reaped children); kills it after `limit`;
    /// `None` (after killing it) when `stop` is raised.
    pub(super) fn wait_rusage(
        &mut self,
        limit: Duration,
        stop: &AtomicBool,
    ) -> anyhow::Result<Option<f64>> {
        let deadline = Instant::now() + limit;
        loop {
            match self.child.try_wait_cpu() {
                Ok(Some((status, cpu_s))) => {
                    if status.code() != Some(0) {
                        bail!(
                            "the {} ended with status {:#x}; see {}",
                            self.name,
                            status.into_raw(),
                            self.log.display()
                        );
                    }
                    return Ok(Some(cpu_s));
                }
                Ok(None) => {}
                Err(e) => bail!("waiting for the {}: {e}", self.name),
            }
            if stop.load(Relaxed) {
                self.stop();
                return Ok(None);
            }
            if Instant::now() > deadline {
                self.stop();
                bail!(
                    "the {} ran past {:.0} s and was stopped",
                    self.name,
                    limit.as_secs_f64()
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Sends the stop signal, waits [`GRACE`], then kills the process and
    /// any descendant still alive.
    pub(super) fn stop(&mut self) {
        if !self.child.is_reaped() {
            self.child.stop_tree(self.stop_signal, GRACE);
        }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.stop();
    }
}
