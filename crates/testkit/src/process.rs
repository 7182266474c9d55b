//! The `connlab` binary and the processes tests start: every one is killed
//! and reaped when its guard drops, and every wait has a deadline.

use connlab_os::child::Child;
use std::io::{BufRead, BufReader, Read};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Output, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver};
use std::sync::OnceLock;
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

/// The `connlab` binary under test: `$CONNLAB_BIN` if set, else `connlab`
/// beside the running test binary's `deps` folder (where Cargo puts it
/// before it runs the `connlab` crate's integration tests).
pub fn connlab_bin() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        if let Some(bin) = std::env::var_os("CONNLAB_BIN") {
            return PathBuf::from(bin);
        }
        let exe = std::env::current_exe().expect("the test binary's path");
        let mut dir = exe.parent().expect("the test binary's folder");
        if dir.ends_with("deps") {
            dir = dir.parent().expect("the profile folder");
        }
        let bin = dir.join(format!("connlab{}", std::env::consts::EXE_SUFFIX));
        assert!(
            bin.exists(),
            "{} does not exist: build it (`cargo build -p connlab`) or set CONNLAB_BIN",
            bin.display()
        );
        bin
    })
}

/// `connlab` as an `assert_cmd` command that is killed after `limit`.
pub fn connlab(limit: Duration) -> assert_cmd::Command {
    let mut cmd = assert_cmd::Command::new(connlab_bin());
    cmd.timeout(limit);
    cmd
}

/// How a process ended, for messages: `exit code 2` or `signal 9`.
pub fn describe(status: ExitStatus) -> String {
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exit code {code}"),
        (None, Some(sig)) => format!("signal {sig}"),
        _ => format!("{status}"),
    }
}

/// A child process in its own process group, as a test wants it: a
/// [`connlab_os::child::Child`] that panics instead of returning errors.
/// Dropping the guard SIGKILLs the group (so children the process forked go
/// too) and reaps the child; the kernel also kills it if the test thread
/// dies without running `Drop`.
pub struct ChildGuard {
    child: Child,
}

impl ChildGuard {
    /// Spawns `cmd` in a new process group, dying with the spawning thread.
    /// Panics naming the command if it cannot start.
    pub fn spawn(cmd: &mut Command) -> ChildGuard {
        let child = Child::spawn_group(cmd).unwrap_or_else(|e| panic!("spawning {cmd:?}: {e}"));
        ChildGuard { child }
    }

    /// Spawns `cmd` with stdin closed and stdout and stderr piped.
    pub fn spawn_piped(cmd: &mut Command) -> ChildGuard {
        cmd.stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        ChildGuard::spawn(cmd)
    }

    /// The child, e.g. to take its pipes.
    pub fn child(&mut self) -> &mut std::process::Child {
        self.child.inner()
    }

    /// The child's process id, as `std::process::Child::id` gives it.
    pub fn id(&self) -> u32 {
        self.child.pid()
    }

    /// The child's process id.
    pub fn pid(&self) -> libc::pid_t {
        libc::pid_t::try_from(self.child.pid()).expect("pid fits pid_t")
    }

    /// Sends `signal` to the child alone.
    pub fn signal(&self, signal: libc::c_int) {
        if let Err(e) = self.child.signal(signal) {
            panic!("kill({}, {signal}): {e}", self.pid());
        }
    }

    /// Sends `signal` to the child's whole process group, as a terminal's
    /// Ctrl-C does.
    pub fn signal_group(&self, signal: libc::c_int) {
        if let Err(e) = self.child.signal_group(signal) {
            panic!("kill(-{}, {signal}): {e}", self.pid());
        }
    }

    /// Waits up to `limit` for the child to exit; `None` if it still runs.
    pub fn wait_timeout(&mut self, limit: Duration) -> Option<ExitStatus> {
        self.child.wait_timeout(limit)
    }

    /// Waits up to `limit` for the child to exit; kills it and panics with
    /// `what` if it does not.
    pub fn wait_or_kill(&mut self, limit: Duration, what: &str) -> ExitStatus {
        match self.wait_timeout(limit) {
            Some(status) => status,
            None => {
                self.kill();
                panic!("{what} did not exit within {limit:?}");
            }
        }
    }

    /// Everything left on the child's stderr pipe (if piped), once it has
    /// exited or been killed.
    pub fn stderr_text(&mut self) -> String {
        let mut text = String::new();
        if let Some(mut e) = self.child.inner().stderr.take() {
            let _ = e.read_to_string(&mut text);
        }
        text
    }

    /// Sends SIGINT (as Ctrl-C does) and collects the output, waiting up to
    /// `limit` for the exit.
    pub fn interrupt(self, limit: Duration) -> Output {
        self.signal(libc::SIGINT);
        self.output_within(limit)
    }

    /// Collects stdout and stderr (if piped) while waiting up to `limit` for
    /// the child to exit; kills it and panics with its stderr if it does not.
    pub fn output_within(mut self, limit: Duration) -> Output {
        let stdout = self.child.inner().stdout.take().map(read_all);
        let stderr = self.child.inner().stderr.take().map(read_all);
        let status = self.wait_timeout(limit);
        let collect = |h: Option<JoinHandle<Vec<u8>>>| {
            h.map(|h| h.join().unwrap_or_default()).unwrap_or_default()
        };
        let Some(status) = status else {
            self.kill();
            panic!(
                "child did not finish within {limit:?}; stderr:\n{}",
                String::from_utf8_lossy(&collect(stderr))
            );
        };
        Output {
            status,
            stdout: collect(stdout),
            stderr: collect(stderr),
        }
    }

    /// SIGKILLs the process group and reaps the child (once).
    pub fn kill(&mut self) {
        self.child.kill();
    }
}

/// Reads all of `r` on a thread, so a child never blocks on a full pipe.
pub fn read_all(mut r: impl Read + Send + 'static) -> JoinHandle<Vec<u8>> {
    thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = r.read_to_end(&mut buf);
        buf
    })
}

/// Runs `cmd` (stdin closed, output collected) to completion within `limit`;
/// kills it and panics with its stderr if it takes longer.
pub fn run_bounded(cmd: &mut Command, limit: Duration) -> Output {
    ChildGuard::spawn_piped(cmd).output_within(limit)
}

/// The lines of a child's output, read on a thread: wait for one that
/// matches, then take everything that was read.
pub struct Lines {
    rx: Receiver<String>,
    reader: JoinHandle<String>,
}

impl Lines {
    /// Starts reading `r` line by line.
    pub fn read(r: impl Read + Send + 'static) -> Lines {
        let (tx, rx) = mpsc::channel();
        let reader = thread::spawn(move || {
            let mut all = String::new();
            for line in BufReader::new(r).lines() {
                let Ok(line) = line else { break };
                all.push_str(&line);
                all.push('\n');
                let _ = tx.send(line);
            }
            all
        });
        Lines { rx, reader }
    }

    /// The first further line for which `pred` holds, waiting at most
    /// `limit`; `None` at the deadline or the end of the output.
    pub fn wait_for(&self, limit: Duration, mut pred: impl FnMut(&str) -> bool) -> Option<String> {
        let deadline = Instant::now() + limit;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.rx.recv_timeout(left) {
                Ok(line) if pred(&line) => return Some(line),
                Ok(_) => {}
                Err(_) => return None,
            }
        }
    }

    /// Everything read, once the output has ended.
    pub fn all(self) -> String {
        drop(self.rx);
        self.reader.join().unwrap_or_default()
    }
}

/// Makes `<base>/<prefix>-<pid>-<name>` a fresh, empty directory (see
/// [`crate::scratch!`]).
pub fn fresh_dir(base: &Path, prefix: &str, name: &str) -> PathBuf {
    let dir = base.join(format!("{prefix}-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("creating {}: {e}", dir.display()));
    dir
}

/// `<base>/<prefix>-<pid>-<n>-<name>` with `n` new on every call (see
/// [`crate::out_path!`]).
pub fn unique_path(base: &Path, prefix: &str, name: &str) -> PathBuf {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    base.join(format!(
        "{prefix}-{}-{}-{name}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ))
}
