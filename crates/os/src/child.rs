//! Child processes that cannot outlive their parent: the one guard every
//! runner, the soak and the tests start processes with.
//!
//! A [`Child`] is spawned with the kernel's parent-death signal set
//! (SIGKILL when this process dies, so no server outlives an interrupted
//! sweep), can wait for a ready line on its output with a deadline, stops
//! with grace (a signal, a deadline, then SIGKILL), is killed and reaped
//! when dropped, and reads the CPU time and memory of its whole process
//! tree through [`crate::process`].

use crate::process;
use std::io::{self, BufRead, BufReader, Read};
use std::os::unix::process::CommandExt;
use std::process::{Command, ExitStatus};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// Makes the kernel SIGKILL the calling process when its parent (the
/// thread that forked it) dies. For code that forks by hand; a
/// [`Command`] gets it through [`die_with_parent`]. Async-signal-safe:
/// one system call, so it may run between fork and exec.
pub fn set_parent_death_kill() -> io::Result<()> {
    // SAFETY: prctl only sets this process's parent-death signal.
    if unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Has the kernel kill the command's process (SIGKILL) when this process
/// dies. [`Child::spawn`] does this itself; call it for a command spawned
/// some other way.
pub fn die_with_parent(cmd: &mut Command) {
    // SAFETY: the closure makes one async-signal-safe system call and
    // touches no memory of the parent.
    unsafe {
        cmd.pre_exec(set_parent_death_kill);
    }
}

/// Which output of a child carries its ready line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stream {
    /// Its standard output.
    Stdout,
    /// Its standard error.
    Stderr,
}

/// Why no ready line came.
#[derive(Debug)]
pub struct NotReady {
    /// The deadline passed (`false`: the output closed first, or was not
    /// piped).
    pub timed_out: bool,
    /// The child's exit status, if it had ended (given a moment to end).
    pub status: Option<ExitStatus>,
    /// The lines it printed before, none of them the ready line.
    pub lines: Vec<String>,
}

impl std::fmt::Display for NotReady {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let when = if self.timed_out {
            "before the deadline"
        } else {
            "before closing its output"
        };
        write!(f, "no ready line {when}")?;
        match self.status {
            Some(s) => write!(f, " ({s})"),
            None => write!(f, " (still running)"),
        }
    }
}

impl std::error::Error for NotReady {}

/// How a graceful stop went.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stopped {
    /// The exit status (`None` if it could not be read).
    pub status: Option<ExitStatus>,
    /// Whether it ended within the grace time (else it was killed).
    pub in_grace: bool,
}

/// What a process tree uses now.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct TreeUsage {
    /// How many processes the tree holds.
    pub processes: usize,
    /// CPU seconds of them all, children they reaped included
    /// ([`process::processes_cpu_s`]).
    pub cpu_s: f64,
    /// Resident memory of them all, KiB (VmRSS summed).
    pub rss_kib: u64,
}

/// A child process, dying with this one, killed and reaped when dropped.
#[derive(Debug)]
pub struct Child {
    inner: std::process::Child,
    status: Option<ExitStatus>,
    group: bool,
}

impl Child {
    /// Spawns `cmd`, dying with this process.
    pub fn spawn(cmd: &mut Command) -> io::Result<Child> {
        die_with_parent(cmd);
        Ok(Child {
            inner: cmd.spawn()?,
            status: None,
            group: false,
        })
    }

    /// Spawns `cmd` leading a process group of its own, dying with this
    /// process; dropping it kills the whole group (processes it forked
    /// too).
    pub fn spawn_group(cmd: &mut Command) -> io::Result<Child> {
        cmd.process_group(0);
        let mut c = Child::spawn(cmd)?;
        c.group = true;
        Ok(c)
    }

    /// Its process id.
    pub fn pid(&self) -> u32 {
        self.inner.id()
    }

    /// The standard library's handle, e.g. to take its pipes. Waiting on it
    /// directly bypasses this guard's record of the exit: use
    /// [`Child::try_wait`] and friends instead.
    pub fn inner(&mut self) -> &mut std::process::Child {
        &mut self.inner
    }

    /// Whether it has been reaped.
    pub fn is_reaped(&self) -> bool {
        self.status.is_some()
    }

    /// Sends `sig` to it; an error once it has been reaped (its pid may
    /// name another process then) or if kill(2) fails.
    pub fn signal(&self, sig: libc::c_int) -> io::Result<()> {
        self.send(self.inner.id() as libc::pid_t, sig)
    }

    /// Sends `sig` to the process group it leads (see [`Child::spawn_group`]).
    pub fn signal_group(&self, sig: libc::c_int) -> io::Result<()> {
        self.send(-(self.inner.id() as libc::pid_t), sig)
    }

    fn send(&self, target: libc::pid_t, sig: libc::c_int) -> io::Result<()> {
        if self.status.is_some() {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                "signal to a reaped child",
            ));
        }
        // SAFETY: kill(2) on our own unreaped child (or the group it
        // leads); its pid cannot have been reused while it is unreaped.
        if unsafe { libc::kill(target, sig) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Its exit status if it has ended (reaping it), without blocking.
    pub fn try_wait(&mut self) -> io::Result<Option<ExitStatus>> {
        if self.status.is_none() {
            self.status = self.inner.try_wait()?;
        }
        Ok(self.status)
    }

    /// Like [`Child::try_wait`], with the CPU seconds (user + system) the
    /// child and the children it reaped used over their whole lives, from
    /// wait4(2).
    pub fn try_wait_cpu(&mut self) -> io::Result<Option<(ExitStatus, f64)>> {
        if self.status.is_some() {
            return Err(io::Error::other("the child was already reaped"));
        }
        let pid = self.inner.id() as libc::pid_t;
        let mut raw = 0;
        // SAFETY: an all-zero rusage is valid.
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: our own unreaped child; both pointers are valid.
        let r = unsafe { libc::wait4(pid, &mut raw, libc::WNOHANG, &mut usage) };
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        if r != pid {
            return Ok(None);
        }
        let status = std::os::unix::process::ExitStatusExt::from_raw(raw);
        self.status = Some(status);
        let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
        Ok(Some((status, secs(usage.ru_utime) + secs(usage.ru_stime))))
    }

    /// Waits up to `limit` for it to end; `None` if it still runs (or
    /// cannot be waited for).
    pub fn wait_timeout(&mut self, limit: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + limit;
        loop {
            match self.try_wait() {
                Ok(Some(s)) => return Some(s),
                Ok(None) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(10))
                }
                _ => return None,
            }
        }
    }

    /// SIGKILLs it (its group, if it leads one) and reaps it, once.
    pub fn kill(&mut self) -> Option<ExitStatus> {
        if self.status.is_none() {
            if self.group {
                let _ = self.signal_group(libc::SIGKILL);
            }
            let _ = self.inner.kill();
            self.status = self.inner.wait().ok();
        }
        self.status
    }

    /// Sends `sig` (after SIGCONT, since a stopped process must run to
    /// handle it), waits up to `grace` for the exit, then SIGKILLs it.
    pub fn stop(&mut self, sig: libc::c_int, grace: Duration) -> Stopped {
        if let Ok(Some(s)) = self.try_wait() {
            return Stopped {
                status: Some(s),
                in_grace: true,
            };
        }
        let _ = self.signal(libc::SIGCONT);
        let _ = self.signal(sig);
        if let Some(s) = self.wait_timeout(grace) {
            return Stopped {
                status: Some(s),
                in_grace: true,
            };
        }
        Stopped {
            status: self.kill(),
            in_grace: false,
        }
    }

    /// [`Child::stop`], then SIGKILLs what is left of its tree as it was
    /// before the stop: descendants that outlived their parent (an nginx
    /// worker whose master was killed) were handed to this process (a
    /// subreaper) or to init. This process reaps those it adopted.
    pub fn stop_tree(&mut self, sig: libc::c_int, grace: Duration) -> Stopped {
        let family = if self.is_reaped() {
            Vec::new()
        } else {
            self.tree()
        };
        let stopped = self.stop(sig, grace);
        let pid = self.inner.id() as i32;
        let me = std::process::id() as i32;
        for p in family.into_iter().filter(|p| *p != pid) {
            let Some(parent) = process::parent_pid(p) else {
                continue;
            };
            if parent == me || parent == 1 || parent == pid {
                // SAFETY: kill(2) on a pid read from /proc just now.
                unsafe { libc::kill(p, libc::SIGKILL) };
            }
            if parent == me {
                // SAFETY: waitpid on our own (adopted) child; a null status
                // is allowed.
                unsafe { libc::waitpid(p, std::ptr::null_mut(), 0) };
            }
        }
        stopped
    }

    /// Takes its piped `stream` and waits up to `limit` for a line for
    /// which `ready` holds; returns that line. The lines after it are read
    /// and dropped on a thread, so the child never blocks on a full pipe.
    /// On failure the child is left running (dropping it kills it).
    pub fn wait_ready(
        &mut self,
        stream: Stream,
        limit: Duration,
        mut ready: impl FnMut(&str) -> bool,
    ) -> Result<String, NotReady> {
        let pipe: Option<Box<dyn Read + Send>> = match stream {
            Stream::Stdout => self.inner.stdout.take().map(|p| Box::new(p) as _),
            Stream::Stderr => self.inner.stderr.take().map(|p| Box::new(p) as _),
        };
        let mut lines = Vec::new();
        let mut timed_out = false;
        if let Some(pipe) = pipe {
            let (tx, rx) = mpsc::channel();
            std::thread::spawn(move || {
                for line in BufReader::new(pipe).lines() {
                    let Ok(line) = line else { return };
                    // The receiver is gone after the ready line: drop the rest.
                    let _ = tx.send(line);
                }
            });
            let deadline = Instant::now() + limit;
            loop {
                let left = deadline.saturating_duration_since(Instant::now());
                match rx.recv_timeout(left) {
                    Ok(line) if ready(&line) => return Ok(line),
                    Ok(line) => lines.push(line),
                    Err(e) => {
                        timed_out = e == mpsc::RecvTimeoutError::Timeout;
                        break;
                    }
                }
            }
        }
        // Give an exiting child a moment so its status can be told.
        let status = self.wait_timeout(Duration::from_millis(100));
        Err(NotReady {
            timed_out,
            status,
            lines,
        })
    }

    /// Its process and every descendant alive now, parents first.
    pub fn tree(&self) -> Vec<i32> {
        if self.is_reaped() {
            return Vec::new();
        }
        process::process_tree(self.inner.id() as i32)
    }

    /// CPU time and resident memory of its whole process tree now
    /// (nothing once it has been reaped).
    pub fn tree_usage(&self) -> TreeUsage {
        let tree = self.tree();
        TreeUsage {
            processes: tree.len(),
            cpu_s: process::processes_cpu_s(&tree),
            rss_kib: tree
                .iter()
                .filter_map(|&p| process::rss_kib(p))
                .map(|m| m.rss_kib)
                .sum(),
        }
    }

    /// Resident memory of its own process now (not its tree).
    pub fn rss(&self) -> Option<process::Rss> {
        if self.is_reaped() {
            return None;
        }
        process::rss_kib(self.inner.id() as i32)
    }
}

impl Drop for Child {
    fn drop(&mut self) {
        self.kill();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Stdio;

    fn sh(script: &str) -> Command {
        let mut cmd = Command::new("sh");
        cmd.args(["-c", script])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        cmd
    }

    #[test]
    fn a_ready_line_is_awaited_and_later_lines_are_drained() {
        let mut c = Child::spawn(&mut sh(
            "echo starting; echo 'ready at 1'; i=0; while [ $i -lt 2000 ]; do echo more; i=$((i+1)); done; sleep 30",
        ))
        .unwrap();
        let line = c
            .wait_ready(Stream::Stdout, Duration::from_secs(10), |l| {
                l.starts_with("ready")
            })
            .unwrap();
        assert_eq!(line, "ready at 1");
        assert!(c.try_wait().unwrap().is_none());
        let s = c.stop(libc::SIGTERM, Duration::from_secs(5));
        assert!(s.in_grace, "{s:?}");
        assert!(c.is_reaped() && c.signal(libc::SIGTERM).is_err());
    }

    #[test]
    fn no_ready_line_tells_timeout_from_exit() {
        let mut c = Child::spawn(&mut sh("echo nope >&2; exit 3")).unwrap();
        let e = c
            .wait_ready(Stream::Stderr, Duration::from_secs(10), |l| l == "ready")
            .unwrap_err();
        assert!(!e.timed_out);
        assert_eq!(e.lines, ["nope"]);
        assert_eq!(e.status.and_then(|s| s.code()), Some(3));
        let mut c = Child::spawn(&mut sh("sleep 30")).unwrap();
        let e = c
            .wait_ready(Stream::Stdout, Duration::from_millis(200), |_| true)
            .unwrap_err();
        assert!(e.timed_out && e.status.is_none(), "{e}");
    }

    #[test]
    fn a_child_ignoring_the_signal_is_killed_after_the_grace() {
        let mut c = Child::spawn(&mut sh("trap '' TERM; echo up; sleep 30")).unwrap();
        c.wait_ready(Stream::Stdout, Duration::from_secs(10), |_| true)
            .unwrap();
        let s = c.stop(libc::SIGTERM, Duration::from_millis(200));
        assert!(!s.in_grace);
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(s.status.and_then(|s| s.signal()), Some(libc::SIGKILL));
    }

    #[test]
    fn the_tree_is_measured_and_dies_with_the_guard() {
        let mut c = Child::spawn_group(&mut sh("sleep 30 & echo $!; wait")).unwrap();
        let line = c
            .wait_ready(Stream::Stdout, Duration::from_secs(10), |_| true)
            .unwrap();
        let grandchild: i32 = line.trim().parse().unwrap();
        let mut usage = c.tree_usage();
        for _ in 0..100 {
            if usage.processes >= 2 {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
            usage = c.tree_usage();
        }
        assert!(usage.processes >= 2, "{usage:?}");
        assert!(usage.rss_kib > 0 && usage.cpu_s >= 0.0, "{usage:?}");
        assert!(c.tree().contains(&grandchild));
        drop(c);
        // The group was killed: the grandchild is gone (or a zombie of init).
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline && alive(grandchild) {
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(!alive(grandchild));
    }

    /// Whether `pid` runs (exists and is no zombie).
    fn alive(pid: i32) -> bool {
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .ok()
            .and_then(|t| Some(t.rsplit_once(')')?.1.trim_start().starts_with('Z')))
            .is_some_and(|zombie| !zombie)
    }

    #[test]
    fn stopping_the_tree_kills_what_outlives_its_parent() {
        // The shell exits on SIGTERM; its sleep would be left to init.
        let mut c = Child::spawn(&mut sh("sleep 30 & echo $!; wait")).unwrap();
        let line = c
            .wait_ready(Stream::Stdout, Duration::from_secs(10), |_| true)
            .unwrap();
        let orphan: i32 = line.trim().parse().unwrap();
        let deadline = Instant::now() + Duration::from_secs(5);
        while !c.tree().contains(&orphan) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        let s = c.stop_tree(libc::SIGTERM, Duration::from_secs(5));
        assert!(s.status.is_some());
        let deadline = Instant::now() + Duration::from_secs(5);
        while alive(orphan) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(!alive(orphan));
    }

    #[test]
    fn waiting_reads_the_cpu_of_a_finished_child() {
        let mut c =
            Child::spawn(&mut sh("i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done")).unwrap();
        let deadline = Instant::now() + Duration::from_secs(20);
        let (status, cpu) = loop {
            if let Some(done) = c.try_wait_cpu().unwrap() {
                break done;
            }
            assert!(Instant::now() < deadline);
            std::thread::sleep(Duration::from_millis(10));
        };
        assert!(status.success() && cpu > 0.0, "{status} {cpu}");
        assert_eq!(c.try_wait().unwrap(), Some(status));
        assert!(c.try_wait_cpu().is_err());
    }
}
