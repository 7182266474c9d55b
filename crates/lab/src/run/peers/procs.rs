//! The processes of a point: started pinned, waited for until they answer,
//! their CPU time read from `/proc`, stopped on drop.

use super::{GRACE, READY};
use crate::run::child::{die_with_parent, log_line};
use anyhow::{bail, Context};
use connlab_os::process::{parent_pid, process_tree, processes_cpu_s};
use std::fs::File;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
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
            proc.reaped = true;
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
            proc.reaped = true;
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

/// A child process and its descendants, stopped (then killed) on drop.
pub(super) struct Proc {
    child: Child,
    name: &'static str,
    log: PathBuf,
    stop_signal: libc::c_int,
    reaped: bool,
}

impl Proc {
    /// Spawns `cmd` with its output in `logs/<name>.log`, pinned to `cpu`.
    pub(super) fn spawn(
        mut cmd: Command,
        name: &'static str,
        cpu: Option<usize>,
        logs: &Path,
        stop_signal: libc::c_int,
    ) -> anyhow::Result<Proc> {
        let log = logs.join(format!("{name}.log"));
        let file = File::create(&log).with_context(|| format!("creating {}", log.display()))?;
        cmd.stdin(Stdio::null())
            .stdout(file.try_clone()?)
            .stderr(file);
        die_with_parent(&mut cmd);
        if let Some(cpu) = cpu {
            // SAFETY: sched_setaffinity on the calling (child) process between
            // fork and exec touches only a stack cpu_set_t.
            unsafe {
                cmd.pre_exec(move || {
                    let mut set: libc::cpu_set_t = std::mem::zeroed();
                    libc::CPU_SET(cpu, &mut set);
                    if libc::sched_setaffinity(0, size_of::<libc::cpu_set_t>(), &set) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    Ok(())
                });
            }
        }
        let program = cmd.get_program().to_string_lossy().into_owned();
        let child = cmd
            .spawn()
            .with_context(|| format!("starting the {name} ({program})"))?;
        Ok(Proc {
            child,
            name,
            log,
            stop_signal,
            reaped: false,
        })
    }

    /// The process's id.
    pub(super) fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    /// This process and every descendant alive now.
    pub(super) fn tree(&self) -> Vec<i32> {
        process_tree(self.child.id() as i32)
    }

    /// CPU seconds of this process and every descendant alive now,
    /// including what each has reaped from its own children.
    pub(super) fn tree_cpu_s(&self) -> f64 {
        let pid = self.child.id() as i32;
        processes_cpu_s(&process_tree(pid))
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
        let pid = self.child.id() as libc::pid_t;
        loop {
            let mut status = 0;
            // SAFETY: an all-zero rusage is valid.
            let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
            // SAFETY: our own unreaped child; status and usage are valid pointers.
            let r = unsafe { libc::wait4(pid, &mut status, libc::WNOHANG, &mut usage) };
            if r == pid {
                self.reaped = true;
                if !libc::WIFEXITED(status) || libc::WEXITSTATUS(status) != 0 {
                    bail!(
                        "the {} ended with status {status:#x}; see {}",
                        self.name,
                        self.log.display()
                    );
                }
                let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
                return Ok(Some(secs(usage.ru_utime) + secs(usage.ru_stime)));
            }
            if r < 0 {
                bail!(
                    "waiting for the {}: {}",
                    self.name,
                    std::io::Error::last_os_error()
                );
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
        if self.reaped {
            return;
        }
        let pid = self.child.id() as i32;
        let family = process_tree(pid);
        // SAFETY: our own unreaped child, so its pid is not reused.
        unsafe { libc::kill(pid, self.stop_signal) };
        let deadline = Instant::now() + GRACE;
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        self.reaped = true;
        // Descendants that outlived their parent (an nginx worker whose master
        // was killed) were handed to this process, the subreaper
        // (`become_subreaper`), or to init: kill and reap those.
        let me = std::process::id() as i32;
        for p in family.into_iter().filter(|p| *p != pid) {
            let Some(parent) = parent_pid(p) else {
                continue;
            };
            if parent == me || parent == 1 || parent == pid {
                // SAFETY: kill(2) on a pid read from /proc just now.
                unsafe { libc::kill(p, libc::SIGKILL) };
            }
            if parent == me {
                // SAFETY: waitpid on our own (adopted) child; a null status is allowed.
                unsafe { libc::waitpid(p, std::ptr::null_mut(), 0) };
            }
        }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.stop();
    }
}
