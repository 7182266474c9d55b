//! Test toolbox for the `connlab serve` black-box tests: a guarded server process, a
//! client written from `shared/protocol.md` alone (no connlab crate), and the
//! `per_engine!` macro that runs each behaviour once per engine variant.
//!
//! Every failure message starts with the engine variant (`[epoll_et] ...`), and every
//! wait is bounded: sockets carry read/write timeouts, the server's first line and
//! its exit are awaited with deadlines, and a dropped [`Server`] is killed.

// Each test binary uses a different subset of this toolbox.
#![allow(dead_code)]

use std::fmt;
use std::fs;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::os::fd::AsRawFd;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStderr, ChildStdout, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver};
use std::thread;
use std::time::{Duration, Instant};

use serde_json::Value;

/// How long any single socket read or write may block.
pub(crate) const IO_TIMEOUT: Duration = Duration::from_secs(10);
/// How long the server may take to print `listening on ...`.
pub(crate) const START_TIMEOUT: Duration = Duration::from_secs(20);
/// How long the server may take to exit after SIGTERM/SIGINT.
pub(crate) const STOP_TIMEOUT: Duration = Duration::from_secs(20);

/// `shared/protocol.md` §1: the CLB1 header length and magic.
pub(crate) const CLB1_HEADER_LEN: u32 = 16;
pub(crate) const CLB1_MAGIC: [u8; 4] = *b"CLB1";

/// The protocol error kinds the stats JSON counts under `protocol_errors`.
pub(crate) const ERROR_KINDS: [&str; 8] = [
    "bad_magic",
    "req_len_out_of_range",
    "resp_len_out_of_range",
    "http_header_too_large",
    "http_malformed",
    "http_too_many_headers",
    "http_body_not_allowed",
    "truncated",
];

pub(crate) const KIB: u32 = 1024;
pub(crate) const MIB: u32 = 1024 * 1024;

/// The `connlab` binary under test.
pub(crate) fn connlab_bin() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_connlab"))
}

// ---------------------------------------------------------------------------
// Engine matrix
// ---------------------------------------------------------------------------

/// One column of the engine matrix: an `--engine` value plus its flags.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Variant {
    Processes,
    Threads,
    Select,
    Poll,
    Epoll,
    /// `--engine epoll --edge-triggered`.
    EpollEt,
    Uring,
    Rtsig,
}

impl Variant {
    pub(crate) const ALL: [Variant; 8] = [
        Variant::Processes,
        Variant::Threads,
        Variant::Select,
        Variant::Poll,
        Variant::Epoll,
        Variant::EpollEt,
        Variant::Uring,
        Variant::Rtsig,
    ];

    /// The name used in test names and failure messages.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Variant::Processes => "processes",
            Variant::Threads => "threads",
            Variant::Select => "select",
            Variant::Poll => "poll",
            Variant::Epoll => "epoll",
            Variant::EpollEt => "epoll_et",
            Variant::Uring => "uring",
            Variant::Rtsig => "rtsig",
        }
    }

    /// The `--engine` value (and the `engine` field of the stats JSON).
    pub(crate) fn engine(self) -> &'static str {
        match self {
            Variant::EpollEt => "epoll",
            other => other.name(),
        }
    }

    /// The command-line arguments selecting this variant.
    pub(crate) fn args(self) -> Vec<&'static str> {
        let mut args = vec!["--engine", self.engine()];
        if self == Variant::EpollEt {
            args.push("--edge-triggered");
        }
        args
    }
}

impl fmt::Display for Variant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Generates `mod <case> { #[test] fn processes() ... fn epoll_et() }` for each
/// behaviour function `fn <case>(engine: Variant)`, so a failure is reported as
/// `<case>::<engine>`.
#[allow(unused_macros)]
macro_rules! per_engine {
    ($($case:ident),+ $(,)?) => {$(
        mod $case {
            use $crate::support::Variant;
            #[test]
            fn processes() { super::$case(Variant::Processes) }
            #[test]
            fn threads() { super::$case(Variant::Threads) }
            #[test]
            fn select() { super::$case(Variant::Select) }
            #[test]
            fn poll() { super::$case(Variant::Poll) }
            #[test]
            fn epoll() { super::$case(Variant::Epoll) }
            #[test]
            fn epoll_et() { super::$case(Variant::EpollEt) }
            #[test]
            fn uring() { super::$case(Variant::Uring) }
            #[test]
            fn rtsig() { super::$case(Variant::Rtsig) }
        }
    )+};
}
#[allow(unused_imports)]
pub(crate) use per_engine;

/// `--protocol` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Protocol {
    Clb1,
    Http,
}

impl Protocol {
    pub(crate) fn as_str(self) -> &'static str {
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
pub(crate) struct Server {
    pub(crate) variant: Variant,
    pub(crate) addr: SocketAddr,
    /// The `listening on ...` line as printed, without the newline.
    pub(crate) listening_line: String,
    stats_path: PathBuf,
    child: Child,
    reaped: bool,
    stdout_rest: Receiver<Vec<u8>>,
    stderr: Receiver<Vec<u8>>,
}

/// What a server left behind when it stopped.
pub(crate) struct Stopped {
    pub(crate) status: ExitStatus,
    /// The stats JSON, or `Value::Null` if the file was missing or unparseable
    /// (`stats_error` then says why).
    pub(crate) stats: Value,
    pub(crate) stats_error: Option<String>,
    /// Everything printed to stdout after the `listening on` line.
    pub(crate) stdout_rest: Vec<u8>,
    pub(crate) stderr: String,
}

impl Server {
    /// Starts `connlab serve` for `variant` on `127.0.0.1:0` with `--stats` pointing
    /// to a fresh file, and waits for its `listening on IP:PORT` line.
    pub(crate) fn start(variant: Variant, protocol: Protocol, extra_args: &[&str]) -> Server {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let stats_path = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!(
            "serve-stats-{}-{}-{}.json",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed),
            variant
        ));
        let _ = fs::remove_file(&stats_path);

        let mut cmd = Command::new(connlab_bin());
        cmd.arg("serve")
            .args(variant.args())
            .args(["--listen", "127.0.0.1:0", "--protocol", protocol.as_str()])
            .arg("--stats")
            .arg(&stats_path)
            .args(extra_args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            // Its own process group, so Drop can also kill the workers the
            // processes engine forks.
            .process_group(0);
        // SAFETY: prctl is async-signal-safe and touches no memory of the parent; it
        // makes the kernel SIGKILL the server if this test thread dies without
        // running Drop (e.g. the test binary is killed by a timeout).
        unsafe {
            cmd.pre_exec(|| {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                    return Err(io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let cmdline = format!("{cmd:?}");
        let mut child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("[{variant}] spawning {cmdline}: {e}"));

        let (first_line, stdout_rest) = drain_stdout(child.stdout.take().expect("piped"));
        let stderr = drain(child.stderr.take().expect("piped"));
        let mut server = Server {
            variant,
            addr: SocketAddr::from(([0, 0, 0, 0], 0)),
            listening_line: String::new(),
            stats_path,
            child,
            reaped: false,
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
    pub(crate) fn connect(&self, label: &str) -> Conn {
        Conn::open(self.addr, &format!("{} {label}", self.variant))
    }

    pub(crate) fn pid(&self) -> libc::pid_t {
        libc::pid_t::try_from(self.child.id()).expect("pid fits pid_t")
    }

    /// Sends `signal` to the server (not its workers) and waits for it to exit.
    pub(crate) fn stop_with(self, signal: libc::c_int) -> (ExitStatus, Value) {
        let stopped = self.stop_with_output(signal);
        (stopped.status, stopped.stats)
    }

    /// SIGTERM, then asserts a clean exit and a parseable stats file, and returns it.
    pub(crate) fn stop(self) -> Value {
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
    pub(crate) fn stop_with_output(mut self, signal: libc::c_int) -> Stopped {
        let variant = self.variant;
        // SAFETY: kill(2) on the pid of our own unreaped child, so the pid cannot
        // have been recycled.
        if unsafe { libc::kill(self.pid(), signal) } != 0 {
            panic!("[{variant}] kill({signal}): {}", io::Error::last_os_error());
        }
        let deadline = Instant::now() + STOP_TIMEOUT;
        let status = loop {
            match self.child.try_wait() {
                Ok(Some(status)) => break status,
                Ok(None) if Instant::now() < deadline => thread::sleep(Duration::from_millis(10)),
                Ok(None) => self.die(&format!(
                    "did not exit within {STOP_TIMEOUT:?} after signal {signal}"
                )),
                Err(e) => panic!("[{variant}] waiting for server: {e}"),
            }
        };
        self.reaped = true;
        let stdout_rest = self
            .stdout_rest
            .recv_timeout(Duration::from_secs(5))
            .unwrap_or_default();
        let stderr = self.collect_stderr();
        let (stats, stats_error) = match fs::read_to_string(&self.stats_path) {
            Err(e) => (
                Value::Null,
                Some(format!(
                    "reading stats file {}: {e}",
                    self.stats_path.display()
                )),
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

    fn collect_stderr(&self) -> String {
        let bytes = self
            .stderr
            .recv_timeout(Duration::from_secs(5))
            .unwrap_or_default();
        String::from_utf8_lossy(&bytes).into_owned()
    }

    fn kill_group(&mut self) {
        if self.reaped {
            return;
        }
        // SAFETY: kill(2) on the process group led by our own unreaped child; the
        // group id cannot be recycled while the leader is unreaped.
        unsafe {
            libc::kill(-self.pid(), libc::SIGKILL);
        }
        let _ = self.child.wait();
        self.reaped = true;
    }

    /// Kills the server and panics with `why` and its stderr.
    fn die(&mut self, why: &str) -> ! {
        self.kill_group();
        let stderr = self.collect_stderr();
        panic!("[{}] server {why}; stderr:\n{stderr}", self.variant);
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let was_running = !self.reaped;
        self.kill_group();
        if was_running && thread::panicking() {
            eprintln!(
                "[{}] server stderr:\n{}",
                self.variant,
                self.collect_stderr()
            );
        }
        let _ = fs::remove_file(&self.stats_path);
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

/// How a process ended, for messages: `exit code 2` or `signal 9`.
pub(crate) fn describe(status: ExitStatus) -> String {
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exit code {code}"),
        (None, Some(sig)) => format!("signal {sig}"),
        _ => format!("{status}"),
    }
}

// ---------------------------------------------------------------------------
// Stats JSON
// ---------------------------------------------------------------------------

/// An unsigned counter of the stats JSON; panics naming the engine if absent.
pub(crate) fn counter(variant: Variant, stats: &Value, field: &str) -> u64 {
    stats.get(field).and_then(Value::as_u64).unwrap_or_else(|| {
        panic!("[{variant}] stats field `{field}` missing or not an unsigned integer in {stats}")
    })
}

/// `protocol_errors.<kind>`; an absent kind counts as 0.
pub(crate) fn protocol_errors(variant: Variant, stats: &Value, kind: &str) -> u64 {
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
pub(crate) fn assert_only_error(variant: Variant, stats: &Value, kind: &str) {
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

// ---------------------------------------------------------------------------
// CLB1 codec (shared/protocol.md §1), written independently of connlab-proto
// ---------------------------------------------------------------------------

/// A 16-byte CLB1 header with arbitrary (possibly invalid) fields.
pub(crate) fn clb1_header(magic: [u8; 4], req_len: u32, resp_len: u32, seq: u32) -> [u8; 16] {
    let mut h = [0u8; 16];
    h[0..4].copy_from_slice(&magic);
    h[4..8].copy_from_slice(&req_len.to_be_bytes());
    h[8..12].copy_from_slice(&resp_len.to_be_bytes());
    h[12..16].copy_from_slice(&seq.to_be_bytes());
    h
}

/// A whole valid request: header plus `req_len - 16` payload bytes.
pub(crate) fn clb1_request(req_len: u32, resp_len: u32, seq: u32) -> Vec<u8> {
    assert!(
        req_len >= CLB1_HEADER_LEN,
        "clb1_request needs req_len >= 16"
    );
    let mut buf = Vec::with_capacity(req_len as usize);
    buf.extend_from_slice(&clb1_header(CLB1_MAGIC, req_len, resp_len, seq));
    // A payload that is not all zeros, so a server that parses payload as a header
    // (mis-framing) trips over the magic check.
    buf.extend((0..req_len - CLB1_HEADER_LEN).map(|i| (i % 251) as u8));
    buf
}

/// A CLB1 response as read off the wire.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Clb1Response {
    pub(crate) header: [u8; 16],
    pub(crate) magic: [u8; 4],
    pub(crate) req_len: u32,
    pub(crate) resp_len: u32,
    pub(crate) seq: u32,
    /// Payload bytes read (always `resp_len - 16` when `Ok`).
    pub(crate) payload_len: u64,
}

/// Reads one CLB1 response: the header, then `resp_len - 16` payload bytes, which
/// are discarded.
pub(crate) fn read_clb1_response<R: Read>(r: &mut R) -> io::Result<Clb1Response> {
    let mut header = [0u8; 16];
    r.read_exact(&mut header)?;
    let field = |at: usize| u32::from_be_bytes(header[at..at + 4].try_into().expect("4 bytes"));
    let resp = Clb1Response {
        header,
        magic: header[0..4].try_into().expect("4 bytes"),
        req_len: field(4),
        resp_len: field(8),
        seq: field(12),
        payload_len: 0,
    };
    if resp.magic != CLB1_MAGIC || resp.resp_len < CLB1_HEADER_LEN {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("invalid response header {header:02x?}"),
        ));
    }
    let payload_len = u64::from(resp.resp_len - CLB1_HEADER_LEN);
    let got = io::copy(&mut r.take(payload_len), &mut io::sink())?;
    if got != payload_len {
        return Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            format!("response {header:02x?}: EOF after {got} of {payload_len} payload bytes"),
        ));
    }
    Ok(Clb1Response {
        payload_len,
        ..resp
    })
}

// ---------------------------------------------------------------------------
// HTTP/1.1 client side (shared/protocol.md §2)
// ---------------------------------------------------------------------------

/// `GET /bytes/N` with a Host header and optional extra header lines.
pub(crate) fn http_get(path: &str, version: &str, extra_headers: &[&str]) -> Vec<u8> {
    http_request("GET", path, version, extra_headers)
}

pub(crate) fn http_request(
    method: &str,
    path: &str,
    version: &str,
    extra_headers: &[&str],
) -> Vec<u8> {
    let mut req = format!("{method} {path} {version}\r\nHost: 127.0.0.1\r\n");
    for h in extra_headers {
        req.push_str(h);
        req.push_str("\r\n");
    }
    req.push_str("\r\n");
    req.into_bytes()
}

/// An HTTP response as read off the wire; the body is counted and discarded.
#[derive(Debug, Clone)]
pub(crate) struct HttpResponse {
    pub(crate) status_line: String,
    pub(crate) status: u16,
    /// Header names lowercased, values trimmed.
    pub(crate) headers: Vec<(String, String)>,
    pub(crate) content_length: Option<u64>,
    pub(crate) body_len: u64,
}

impl HttpResponse {
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// Whether the response carries `Connection: close`.
    pub(crate) fn says_close(&self) -> bool {
        self.header("connection")
            .is_some_and(|v| v.split(',').any(|t| t.trim().eq_ignore_ascii_case("close")))
    }
}

/// Largest response header section this client accepts.
const MAX_RESPONSE_HEAD: usize = 64 * 1024;

/// Reads one HTTP response. Without `Content-Length` the body is taken as empty
/// (the contract says every response carries one; callers assert it).
pub(crate) fn read_http_response<R: BufRead>(r: &mut R) -> io::Result<HttpResponse> {
    let invalid = |msg: String| io::Error::new(io::ErrorKind::InvalidData, msg);
    let mut head_len = 0;
    let mut lines = Vec::new();
    loop {
        let mut line = Vec::new();
        let n = r
            .by_ref()
            .take((MAX_RESPONSE_HEAD - head_len) as u64)
            .read_until(b'\n', &mut line)?;
        head_len += n;
        if n == 0 || !line.ends_with(b"\n") {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!(
                    "response head ended early or exceeded {MAX_RESPONSE_HEAD} bytes after {} lines: {:?}",
                    lines.len(),
                    String::from_utf8_lossy(&line)
                ),
            ));
        }
        let text = String::from_utf8(line)
            .map_err(|e| invalid(format!("non-UTF-8 response head line: {e}")))?;
        let text = text.trim_end_matches(['\r', '\n']).to_owned();
        if text.is_empty() {
            break;
        }
        lines.push(text);
    }
    let status_line = lines.remove(0);
    let mut parts = status_line.splitn(3, ' ');
    let version = parts.next().unwrap_or_default();
    let status = parts.next().and_then(|s| s.parse::<u16>().ok());
    let status = match status {
        Some(s) if version.starts_with("HTTP/1.") => s,
        _ => return Err(invalid(format!("bad status line {status_line:?}"))),
    };
    let mut headers = Vec::new();
    for line in lines {
        let (name, value) = line
            .split_once(':')
            .ok_or_else(|| invalid(format!("bad header line {line:?}")))?;
        headers.push((name.trim().to_ascii_lowercase(), value.trim().to_owned()));
    }
    let content_length = match headers.iter().find(|(n, _)| n == "content-length") {
        None => None,
        Some((_, v)) => Some(
            v.parse::<u64>()
                .map_err(|_| invalid(format!("bad Content-Length {v:?}")))?,
        ),
    };
    let want = content_length.unwrap_or(0);
    let body_len = io::copy(&mut r.take(want), &mut io::sink())?;
    if body_len != want {
        return Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            format!("{status_line:?}: EOF after {body_len} of {want} body bytes"),
        ));
    }
    Ok(HttpResponse {
        status_line,
        status,
        headers,
        content_length,
        body_len,
    })
}

// ---------------------------------------------------------------------------
// Client connection
// ---------------------------------------------------------------------------

/// A client connection with timeouts, whose failures name the engine and the
/// connection's role.
pub(crate) struct Conn {
    pub(crate) label: String,
    reader: BufReader<TcpStream>,
}

impl Conn {
    pub(crate) fn open(addr: SocketAddr, label: &str) -> Conn {
        let stream = TcpStream::connect_timeout(&addr, IO_TIMEOUT)
            .unwrap_or_else(|e| panic!("[{label}] connecting to {addr}: {e}"));
        stream
            .set_read_timeout(Some(IO_TIMEOUT))
            .expect("set_read_timeout");
        stream
            .set_write_timeout(Some(IO_TIMEOUT))
            .expect("set_write_timeout");
        Conn {
            label: label.to_owned(),
            reader: BufReader::with_capacity(64 * 1024, stream),
        }
    }

    pub(crate) fn stream(&self) -> &TcpStream {
        self.reader.get_ref()
    }

    pub(crate) fn set_nodelay(&self) {
        self.stream().set_nodelay(true).expect("set_nodelay");
    }

    /// Writes all of `bytes` (one `write_all`).
    pub(crate) fn send(&mut self, bytes: &[u8]) {
        let label = &self.label;
        self.reader
            .get_mut()
            .write_all(bytes)
            .unwrap_or_else(|e| panic!("[{label}] sending {} bytes: {e}", bytes.len()));
    }

    pub(crate) fn shutdown_write(&self) {
        self.stream()
            .shutdown(Shutdown::Write)
            .unwrap_or_else(|e| panic!("[{}] shutdown(Write): {e}", self.label));
    }

    /// Closes with RST instead of FIN (SO_LINGER with a zero timeout).
    pub(crate) fn reset(self) {
        let linger = libc::linger {
            l_onoff: 1,
            l_linger: 0,
        };
        // SAFETY: setsockopt on a descriptor we own, with a pointer to a live
        // `linger` and its exact size.
        let rc = unsafe {
            libc::setsockopt(
                self.stream().as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_LINGER,
                (&raw const linger).cast(),
                size_of::<libc::linger>() as libc::socklen_t,
            )
        };
        assert_eq!(
            rc,
            0,
            "[{}] setsockopt(SO_LINGER 0): {}",
            self.label,
            io::Error::last_os_error()
        );
    }

    /// Reads exactly `n` raw bytes of `what`.
    pub(crate) fn read_bytes(&mut self, n: usize, what: &str) -> Vec<u8> {
        let mut buf = vec![0; n];
        self.reader
            .read_exact(&mut buf)
            .unwrap_or_else(|e| panic!("[{}] reading {n} bytes of {what}: {e}", self.label));
        buf
    }

    pub(crate) fn read_clb1(&mut self, what: &str) -> Clb1Response {
        read_clb1_response(&mut self.reader)
            .unwrap_or_else(|e| panic!("[{}] reading CLB1 response to {what}: {e}", self.label))
    }

    /// Reads one response and asserts it answers request `(req_len, resp_len, seq)`.
    pub(crate) fn expect_clb1(&mut self, req_len: u32, resp_len: u32, seq: u32) -> Clb1Response {
        let what = format!("request seq {seq} (req_len {req_len}, resp_len {resp_len})");
        let resp = self.read_clb1(&what);
        let expected = clb1_header(CLB1_MAGIC, req_len, resp_len, seq);
        assert_eq!(
            resp.header, expected,
            "[{}] response header to {what}: got {:02x?}, expected {:02x?}",
            self.label, resp.header, expected
        );
        assert_eq!(
            resp.payload_len,
            u64::from(resp_len - CLB1_HEADER_LEN),
            "[{}] response payload length to {what}",
            self.label
        );
        resp
    }

    /// Sends one request and checks its response.
    pub(crate) fn clb1_round_trip(&mut self, req_len: u32, resp_len: u32, seq: u32) {
        self.send(&clb1_request(req_len, resp_len, seq));
        self.expect_clb1(req_len, resp_len, seq);
    }

    pub(crate) fn read_http(&mut self, what: &str) -> HttpResponse {
        let resp = read_http_response(&mut self.reader)
            .unwrap_or_else(|e| panic!("[{}] reading HTTP response to {what}: {e}", self.label));
        assert_eq!(
            resp.content_length,
            Some(resp.body_len),
            "[{}] response to {what} has no Content-Length header: {resp:?}",
            self.label
        );
        resp
    }

    /// Reads one HTTP response and asserts its status, body length, and whether it
    /// announces `Connection: close`.
    pub(crate) fn expect_http(
        &mut self,
        what: &str,
        status: u16,
        body_len: u64,
        closes: bool,
    ) -> HttpResponse {
        let resp = self.read_http(what);
        assert_eq!(
            resp.status, status,
            "[{}] status of response to {what}: {resp:?}",
            self.label
        );
        assert_eq!(
            resp.body_len, body_len,
            "[{}] body length of response to {what}: {resp:?}",
            self.label
        );
        assert_eq!(
            resp.says_close(),
            closes,
            "[{}] `Connection: close` on response to {what} (expected {}): {resp:?}",
            self.label,
            if closes { "present" } else { "absent" }
        );
        resp
    }

    /// Asserts the server closes the connection (EOF or RST) within the read
    /// timeout without sending another byte. `after` says what came before.
    pub(crate) fn expect_eof(&mut self, after: &str) {
        let label = &self.label;
        let mut extra = Vec::new();
        match self.reader.read_to_end(&mut extra) {
            Ok(_) => {}
            Err(e) if is_reset(&e) => {}
            Err(e) if is_timeout(&e) => panic!(
                "[{label}] after {after}: expected the server to close the connection, \
                 still open after {IO_TIMEOUT:?} ({} unexpected bytes received)",
                extra.len()
            ),
            Err(e) => panic!("[{label}] after {after}: expected EOF, got error {e}"),
        }
        assert!(
            extra.is_empty(),
            "[{label}] after {after}: expected EOF with no further bytes, got {} bytes: {:02x?}",
            extra.len(),
            &extra[..extra.len().min(64)]
        );
    }

    /// Asserts the server closes the connection without answering `what`.
    pub(crate) fn expect_eof_without_response(&mut self, what: &str) {
        self.expect_eof(&format!("{what} (no response allowed)"));
    }
}

pub(crate) fn is_reset(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::ConnectionReset
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::BrokenPipe
    )
}

pub(crate) fn is_timeout(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
    )
}
