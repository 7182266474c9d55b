//! The reference server `connlab serve` under a guard, once per engine
//! variant: started on `127.0.0.1:0` with a fresh `--stats` file, its
//! `listening on` line awaited with a deadline, killed with its process
//! group when dropped. Every failure message starts with the engine variant
//! (`[epoll_et] ...`).

use std::fmt;
use std::fs;
use std::io::{BufRead, BufReader, Read};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{ChildStderr, ChildStdout, Command, ExitStatus};
use std::sync::mpsc::{self, Receiver};
use std::thread;
use std::time::Duration;

use serde_json::Value;

use crate::process::{connlab_bin, ChildGuard};
use crate::wire::Conn;

/// How long the server may take to print `listening on ...`.
pub const START_TIMEOUT: Duration = Duration::from_secs(20);
/// How long the server may take to exit after SIGTERM/SIGINT.
pub const STOP_TIMEOUT: Duration = Duration::from_secs(20);

/// The protocol error kinds the stats JSON counts under `protocol_errors`.
pub const ERROR_KINDS: [&str; 8] = [
    "bad_magic",
    "req_len_out_of_range",
    "resp_len_out_of_range",
    "http_header_too_large",
    "http_malformed",
    "http_too_many_headers",
    "http_body_not_allowed",
    "truncated",
];

// ---------------------------------------------------------------------------
// Engine matrix
// ---------------------------------------------------------------------------

/// One column of the engine matrix: an `--engine` value plus its flags.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Variant {
    /// `--engine processes`.
    Processes,
    /// `--engine threads`.
    Threads,
    /// `--engine select`.
    Select,
    /// `--engine poll`.
    Poll,
    /// `--engine epoll` (level-triggered).
    Epoll,
    /// `--engine epoll --edge-triggered`.
    EpollEt,
    /// `--engine uring`.
    Uring,
    /// `--engine rtsig`.
    Rtsig,
    /// `--engine select --workers 2` (a listener each, `SO_REUSEPORT`).
    SelectW2,
    /// `--engine poll --workers 2`.
    PollW2,
    /// `--engine epoll --workers 2`.
    EpollW2,
    /// `--engine epoll --workers 2 --accept shared` (`EPOLLEXCLUSIVE`).
    EpollW2Shared,
    /// `--engine uring --workers 2`.
    UringW2,
    /// `--engine uring --workers 2 --accept shared` (a multishot accept
    /// per ring on one listener).
    UringW2Shared,
    /// `--engine rtsig --workers 2` (a signal thread and table per loop).
    RtsigW2,
}

impl Variant {
    /// Every variant, in matrix order.
    pub const ALL: [Variant; 15] = [
        Variant::Processes,
        Variant::Threads,
        Variant::Select,
        Variant::Poll,
        Variant::Epoll,
        Variant::EpollEt,
        Variant::Uring,
        Variant::Rtsig,
        Variant::SelectW2,
        Variant::PollW2,
        Variant::EpollW2,
        Variant::EpollW2Shared,
        Variant::UringW2,
        Variant::UringW2Shared,
        Variant::RtsigW2,
    ];

    /// The name used in test names and failure messages.
    pub fn name(self) -> &'static str {
        match self {
            Variant::Processes => "processes",
            Variant::Threads => "threads",
            Variant::Select => "select",
            Variant::Poll => "poll",
            Variant::Epoll => "epoll",
            Variant::EpollEt => "epoll_et",
            Variant::Uring => "uring",
            Variant::Rtsig => "rtsig",
            Variant::SelectW2 => "select_w2",
            Variant::PollW2 => "poll_w2",
            Variant::EpollW2 => "epoll_w2",
            Variant::EpollW2Shared => "epoll_w2_shared",
            Variant::UringW2 => "uring_w2",
            Variant::UringW2Shared => "uring_w2_shared",
            Variant::RtsigW2 => "rtsig_w2",
        }
    }

    /// The `--engine` value (and the `engine` field of the stats JSON).
    pub fn engine(self) -> &'static str {
        match self {
            Variant::EpollEt | Variant::EpollW2 | Variant::EpollW2Shared => "epoll",
            Variant::SelectW2 => "select",
            Variant::PollW2 => "poll",
            Variant::UringW2 | Variant::UringW2Shared => "uring",
            Variant::RtsigW2 => "rtsig",
            other => other.name(),
        }
    }

    /// The event loops the variant runs (`--workers`).
    pub fn workers(self) -> usize {
        match self {
            Variant::SelectW2
            | Variant::PollW2
            | Variant::EpollW2
            | Variant::EpollW2Shared
            | Variant::UringW2
            | Variant::UringW2Shared
            | Variant::RtsigW2 => 2,
            _ => 1,
        }
    }

    /// The command-line arguments selecting this variant.
    pub fn args(self) -> Vec<&'static str> {
        let mut args = vec!["--engine", self.engine()];
        if self == Variant::EpollEt {
            args.push("--edge-triggered");
        }
        if self.workers() > 1 {
            args.extend(["--workers", "2"]);
        }
        if matches!(self, Variant::EpollW2Shared | Variant::UringW2Shared) {
            args.extend(["--accept", "shared"]);
        }
        args
    }
}

impl fmt::Display for Variant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// `--protocol` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    /// `shared/protocol.md` §1.
    Clb1,
    /// `shared/protocol.md` §2.
    Http,
}

impl Protocol {
    /// The `--protocol` value.
    pub fn as_str(self) -> &'static str {
        match self {
            Protocol::Clb1 => "clb1",
            Protocol::Http => "http",
        }
    }
}

// ---------------------------------------------------------------------------
// Server process guard
// ---------------------------------------------------------------------------

/// A running `connlab serve`. Dropping it SIGKILLs its process group and reaps it.
pub struct Server {
    /// The engine variant it runs.
    pub variant: Variant,
    /// The address it listens on.
    pub addr: SocketAddr,
    /// The `listening on ...` line as printed, without the newline.
    pub listening_line: String,
    stats_dir: tempfile::TempDir,
    child: ChildGuard,
    stdout_rest: Receiver<Vec<u8>>,
    stderr: Receiver<Vec<u8>>,
}

/// What a server left behind when it stopped.
pub struct Stopped {
    /// How it exited.
    pub status: ExitStatus,
    /// The stats JSON, or `Value::Null` if the file was missing or unparseable
    /// (`stats_error` then says why).
    pub stats: Value,
    /// Why `stats` is `Value::Null`.
    pub stats_error: Option<String>,
    /// Everything printed to stdout after the `listening on` line.
    pub stdout_rest: Vec<u8>,
    /// Everything printed to stderr.
    pub stderr: String,
}

impl Server {
    /// Starts `connlab serve` for `variant` on `127.0.0.1:0` with `--stats` pointing
    /// to a fresh file, and waits for its `listening on IP:PORT` line.
    pub fn start(variant: Variant, protocol: Protocol, extra_args: &[&str]) -> Server {
        Server::start_inner(variant, protocol, extra_args, None)
    }

    /// [`Server::start`] with the open-files limit (soft and hard) already at
    /// `nofile` when the server starts: lowered afterwards, the limit races
    /// the engine's first wait (io_uring's armed accept did not see it).
    pub fn start_with_nofile(
        variant: Variant,
        protocol: Protocol,
        extra_args: &[&str],
        nofile: u64,
    ) -> Server {
        Server::start_inner(variant, protocol, extra_args, Some(nofile))
    }

    fn start_inner(
        variant: Variant,
        protocol: Protocol,
        extra_args: &[&str],
        nofile: Option<u64>,
    ) -> Server {
        let stats_dir = tempfile::Builder::new()
            .prefix("connlab-serve-stats")
            .tempdir()
            .unwrap_or_else(|e| panic!("[{variant}] creating a stats folder: {e}"));
        let mut cmd = Command::new(connlab_bin());
        cmd.arg("serve")
            .args(variant.args())
            .args(["--listen", "127.0.0.1:0", "--protocol", protocol.as_str()])
            .arg("--stats")
            .arg(stats_dir.path().join("stats.json"))
            .args(extra_args);
        let cmdline = format!("{cmd:?}");
        if let Some(n) = nofile {
            use std::os::unix::process::CommandExt as _;
            let limit = libc::rlimit {
                rlim_cur: n,
                rlim_max: n,
            };
            // SAFETY: setrlimit is async-signal-safe and touches only the
            // child between fork and exec.
            unsafe {
                cmd.pre_exec(move || {
                    if libc::setrlimit(libc::RLIMIT_NOFILE, &limit) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    Ok(())
                });
            }
        }
        // Its own process group, so Drop also kills the workers the processes
        // engine forks.
        let mut child = ChildGuard::spawn_piped(&mut cmd);

        let (first_line, stdout_rest) = drain_stdout(child.child().stdout.take().expect("piped"));
        let stderr = drain(child.child().stderr.take().expect("piped"));
        let mut server = Server {
            variant,
            addr: SocketAddr::from(([0, 0, 0, 0], 0)),
            listening_line: String::new(),
            stats_dir,
            child,
            stdout_rest,
            stderr,
        };

        let line = match first_line.recv_timeout(START_TIMEOUT) {
            Ok(Some(line)) => line,
            Ok(None) => server.die(&format!(
                "exited before printing `listening on` ({cmdline})"
            )),
            Err(_) => server.die(&format!(
                "printed no `listening on` line within {START_TIMEOUT:?} ({cmdline})"
            )),
        };
        let line = line.trim_end_matches(['\n', '\r']).to_owned();
        let addr = line
            .strip_prefix("listening on ")
            .and_then(|a| a.parse::<SocketAddr>().ok());
        match addr {
            Some(addr) => server.addr = addr,
            None => server.die(&format!(
                "first stdout line is {line:?}, expected `listening on IP:PORT` ({cmdline})"
            )),
        }
        server.listening_line = line;
        server
    }

    /// Opens a client connection named `label` (used in failure messages).
    pub fn connect(&self, label: &str) -> Conn {
        Conn::open(self.addr, &format!("{} {label}", self.variant))
    }

    /// The server's process id.
    pub fn pid(&self) -> libc::pid_t {
        self.child.pid()
    }

    /// Sends `signal` to the server (not its workers) and waits for it to exit.
    pub fn stop_with(self, signal: libc::c_int) -> (ExitStatus, Value) {
        let stopped = self.stop_with_output(signal);
        (stopped.status, stopped.stats)
    }

    /// SIGTERM, then asserts a clean exit and a parseable stats file, and returns it.
    pub fn stop(self) -> Value {
        let variant = self.variant;
        let stopped = self.stop_with_output(libc::SIGTERM);
        assert!(
            stopped.status.success(),
            "[{variant}] server exited with {} after SIGTERM, expected 0; stderr:\n{}",
            stopped.status,
            stopped.stderr
        );
        if let Some(err) = &stopped.stats_error {
            panic!("[{variant}] {err}; stderr:\n{}", stopped.stderr);
        }
        stopped.stats
    }

    /// Like [`Server::stop_with`], keeping everything the server printed.
    pub fn stop_with_output(mut self, signal: libc::c_int) -> Stopped {
        self.child.signal(signal);
        let Some(status) = self.child.wait_timeout(STOP_TIMEOUT) else {
            self.die(&format!(
                "did not exit within {STOP_TIMEOUT:?} after signal {signal}"
            ))
        };
        let stdout_rest = self
            .stdout_rest
            .recv_timeout(Duration::from_secs(5))
            .unwrap_or_default();
        let stderr = self.collect_stderr();
        let stats_path = self.stats_path();
        let (stats, stats_error) = match fs::read_to_string(&stats_path) {
            Err(e) => (
                Value::Null,
                Some(format!("reading stats file {}: {e}", stats_path.display())),
            ),
            Ok(text) => match serde_json::from_str(&text) {
                Ok(v) => (v, None),
                Err(e) => (
                    Value::Null,
                    Some(format!("stats file is not JSON ({e}): {text:?}")),
                ),
            },
        };
        Stopped {
            status,
            stats,
            stats_error,
            stdout_rest,
            stderr,
        }
    }

    fn stats_path(&self) -> PathBuf {
        self.stats_dir.path().join("stats.json")
    }

    fn collect_stderr(&self) -> String {
        let bytes = self
            .stderr
            .recv_timeout(Duration::from_secs(5))
            .unwrap_or_default();
        String::from_utf8_lossy(&bytes).into_owned()
    }

    /// Kills the server and panics with `why` and its stderr.
    fn die(&mut self, why: &str) -> ! {
        self.child.kill();
        let stderr = self.collect_stderr();
        panic!("[{}] server {why}; stderr:\n{stderr}", self.variant);
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let running = matches!(self.child.child().try_wait(), Ok(None));
        self.child.kill();
        if running && thread::panicking() {
            eprintln!(
                "[{}] server stderr:\n{}",
                self.variant,
                self.collect_stderr()
            );
        }
    }
}

/// Reads the first stdout line on a thread (sent as `Some(line)`, or `None` at EOF),
/// then keeps draining so the server never blocks on a full pipe.
fn drain_stdout(stdout: ChildStdout) -> (Receiver<Option<String>>, Receiver<Vec<u8>>) {
    let (line_tx, line_rx) = mpsc::channel();
    let (rest_tx, rest_rx) = mpsc::channel();
    thread::spawn(move || {
        let mut reader = BufReader::new(stdout);
        let mut line = String::new();
        match reader.read_line(&mut line) {
            Ok(n) if n > 0 => {
                let _ = line_tx.send(Some(line));
            }
            _ => {
                let _ = line_tx.send(None);
            }
        }
        let mut rest = Vec::new();
        let _ = reader.read_to_end(&mut rest);
        let _ = rest_tx.send(rest);
    });
    (line_rx, rest_rx)
}

fn drain(mut stderr: ChildStderr) -> Receiver<Vec<u8>> {
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = stderr.read_to_end(&mut buf);
        let _ = tx.send(buf);
    });
    rx
}

// ---------------------------------------------------------------------------
// Stats JSON
// ---------------------------------------------------------------------------

/// An unsigned counter of the stats JSON; panics naming the engine if absent.
pub fn counter(variant: Variant, stats: &Value, field: &str) -> u64 {
    stats.get(field).and_then(Value::as_u64).unwrap_or_else(|| {
        panic!("[{variant}] stats field `{field}` missing or not an unsigned integer in {stats}")
    })
}

/// `protocol_errors.<kind>`; an absent kind counts as 0.
pub fn protocol_errors(variant: Variant, stats: &Value, kind: &str) -> u64 {
    let errors = stats
        .get("protocol_errors")
        .and_then(Value::as_object)
        .unwrap_or_else(|| panic!("[{variant}] stats has no `protocol_errors` object: {stats}"));
    match errors.get(kind) {
        None => 0,
        Some(v) => v.as_u64().unwrap_or_else(|| {
            panic!("[{variant}] protocol_errors.{kind} is not an unsigned integer: {stats}")
        }),
    }
}

/// Asserts that exactly one protocol error was counted, under `kind`.
pub fn assert_only_error(variant: Variant, stats: &Value, kind: &str) {
    for other in ERROR_KINDS {
        let expected = u64::from(other == kind);
        let got = protocol_errors(variant, stats, other);
        assert_eq!(
            got, expected,
            "[{variant}] protocol_errors.{other} = {got}, expected {expected} \
             (the one bad input was `{kind}`); stats: {stats}"
        );
    }
}
