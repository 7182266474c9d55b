//! Issue 17 parts 3 and 4 through the real binary: a run that is mostly
//! errors says so and fails (`--max-error-ratio`), the summary's counts cover
//! one window, `serve --manifest` serves a web file set, and Ctrl-C during
//! connection set-up still writes the result and exits 130.

use connlab_testkit::serve::{Protocol, Server, Variant};
use connlab_testkit::{connlab_bin, json_u64 as u, out_path, read_json, ChildGuard, Lines};
use serde_json::Value;
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

/// A fresh output path under the test's target tmpdir.
fn out_path(name: &str) -> PathBuf {
    out_path!("outcomes", name)
}

fn spawn_load(args: &[&str]) -> ChildGuard {
    ChildGuard::spawn_piped(Command::new(connlab_bin()).arg("load").args(args))
}

fn load(args: &[&str]) -> Output {
    spawn_load(args).output_within(Duration::from_secs(60))
}

/// A web file set's manifest in its own directory (as `webset generate` leaves it).
fn web_manifest() -> PathBuf {
    let dir = out_path("webset");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("manifest.csv"),
        "path,size_bytes,weight\nindex.html,300,2\nimg/a.gif,4000,1\npaper/f0001.pdf,60000,1\n",
    )
    .unwrap();
    dir
}

/// Open loop with a warm-up, over a `--manifest`.
fn web_load(target: &str, manifest: &Path, json: &Path, extra: &[&str]) -> Output {
    let mut args = vec![
        "--target",
        target,
        "--protocol",
        "http",
        "--manifest",
        manifest.to_str().unwrap(),
        "-c",
        "8",
        "--rate",
        "300",
        "-d",
        "1s",
        "--warmup",
        "1s",
        "--json",
        json.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    load(&args)
}

/// Issue 17 part 3: `load --manifest` against a server that knows none of the
/// paths got 404 for every request, exited 0 and warned of nothing; its
/// summary counted warm-up errors with measured requests.
#[test]
fn r17_all_errors_warns_exits_1_and_counts_one_window() {
    let server = Server::start(Variant::Epoll, Protocol::Http, &[]);
    let target = server.addr.to_string();
    let manifest = web_manifest();
    let json = out_path("all-404.json");
    let out = web_load(&target, &manifest, &json, &[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "stderr:\n{stderr}");
    assert!(
        stderr.contains("warning:") && stderr.contains("--max-error-ratio"),
        "stderr:\n{stderr}"
    );
    let v = read_json(&json);
    let warnings = v["warnings"].as_array().unwrap();
    assert!(
        warnings
            .iter()
            .any(|w| w.as_str().unwrap().contains("--max-error-ratio")),
        "{warnings:?}"
    );
    // Every count of the measured window is of the measured window.
    let measured_sent = u(&v, "/requests/sent");
    assert!(measured_sent > 0, "{v}");
    assert_eq!(u(&v, "/requests/errors/http_status"), measured_sent, "{v}");
    assert_eq!(u(&v, "/requests/completed"), measured_sent, "{v}");
    // The warm-up's errors are counted apart.
    let warmup_sent = u(&v, "/requests/warmup_sent");
    assert!(warmup_sent > 0, "{v}");
    assert_eq!(
        u(&v, "/requests/warmup_errors/http_status"),
        warmup_sent,
        "{v}"
    );
    // And so is the printed summary.
    let line = stderr
        .lines()
        .find(|l| l.trim_start().starts_with("requests "))
        .unwrap_or_else(|| panic!("no requests line in:\n{stderr}"));
    let expect = format!("{measured_sent} sent, {measured_sent} completed, {measured_sent} errors");
    assert!(line.contains(&expect), "{line:?} lacks {expect:?}");
    assert!(stderr.contains("warm-up"), "stderr:\n{stderr}");

    // A threshold of 1 accepts any share of errors.
    let json = out_path("all-404-accepted.json");
    let out = web_load(&target, &manifest, &json, &["--max-error-ratio", "1"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let bad = load(&["--target", &target, "--max-error-ratio", "2"]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("--max-error-ratio"));
}

/// `--io uring`: error statuses are counted per window as with epoll, and
/// the run fails the same way.
#[test]
fn io_uring_counts_error_statuses_and_exits_1() {
    let server = Server::start(Variant::Epoll, Protocol::Http, &[]);
    let target = server.addr.to_string();
    let json = out_path("all-404-uring.json");
    let out = web_load(&target, &web_manifest(), &json, &["--io", "uring"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "stderr:\n{stderr}");
    let v = read_json(&json);
    assert_eq!(v["config"]["io"], "uring");
    let measured_sent = u(&v, "/requests/sent");
    assert!(measured_sent > 0, "{v}");
    assert_eq!(u(&v, "/requests/errors/http_status"), measured_sent, "{v}");
    assert_eq!(
        u(&v, "/requests/warmup_errors/http_status"),
        u(&v, "/requests/warmup_sent"),
        "{v}"
    );
}

/// Issue 17 part 3: `serve --protocol http --manifest DIR` answers the file
/// set's paths with the manifest's sizes, so the web workload runs against
/// the reference server without errors.
#[test]
fn r17_serve_with_manifest_serves_the_file_set() {
    let manifest = web_manifest();
    let server = Server::start(
        Variant::Epoll,
        Protocol::Http,
        &["--manifest", manifest.to_str().unwrap()],
    );
    let target = server.addr.to_string();
    let json = out_path("web.json");
    let out = web_load(&target, &manifest, &json, &[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "stderr:\n{stderr}");
    let v = read_json(&json);
    assert!(
        v["requests"]["errors"].as_object().unwrap().is_empty(),
        "{v}"
    );
    let classes: Vec<&str> = v["size_classes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["class"].as_str().unwrap())
        .collect();
    assert_eq!(classes, ["<1KB", "1-10KB", "10-100KB"], "{v}");
    // One request for a listed path, answered with the manifest's size.
    let mut conn = server.connect("manifest path");
    conn.send(&connlab_testkit::wire::http_get(
        "/img/a.gif",
        "HTTP/1.1",
        &[],
    ));
    let mut reader = std::io::BufReader::new(conn.stream().try_clone().unwrap());
    let response = connlab_testkit::wire::read_http_response(&mut reader).unwrap();
    assert_eq!(response.status, 200);
    assert_eq!(response.body_len, 4000);
    server.stop();

    // Bad combinations name the flag.
    for (args, says) in [
        (
            vec![
                "--protocol",
                "clb1",
                "--manifest",
                manifest.to_str().unwrap(),
            ],
            "--protocol http",
        ),
        (
            vec!["--protocol", "http", "--manifest", "/nonexistent/dir"],
            "--manifest",
        ),
        (
            vec![
                "--protocol",
                "http",
                "--manifest",
                manifest.to_str().unwrap(),
                "--max-message",
                "1KiB",
            ],
            "--max-message",
        ),
    ] {
        let out = Command::new(connlab_bin())
            .arg("serve")
            .args(["--listen", "127.0.0.1:0"])
            .args(&args)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(says), "{args:?}: {stderr}");
    }
}

/// A listener with a one-place accept queue that never accepts: once the
/// queue is full, the kernel drops further SYNs, so connects to it hang.
struct StuckListener {
    fd: OwnedFd,
    addr: SocketAddr,
}

impl StuckListener {
    fn new() -> StuckListener {
        // SAFETY: plain socket calls on a descriptor this function owns; the
        // address structures are local and sized as passed.
        unsafe {
            let raw = libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
            assert!(raw >= 0, "socket: {}", std::io::Error::last_os_error());
            let fd = OwnedFd::from_raw_fd(raw);
            let mut sa: libc::sockaddr_in = std::mem::zeroed();
            sa.sin_family = libc::AF_INET as libc::sa_family_t;
            sa.sin_addr.s_addr = u32::from(std::net::Ipv4Addr::LOCALHOST).to_be();
            let len = size_of::<libc::sockaddr_in>() as libc::socklen_t;
            assert_eq!(
                libc::bind(fd.as_raw_fd(), (&raw const sa).cast(), len),
                0,
                "bind: {}",
                std::io::Error::last_os_error()
            );
            assert_eq!(libc::listen(fd.as_raw_fd(), 0), 0);
            let mut got: libc::sockaddr_in = std::mem::zeroed();
            let mut got_len = len;
            libc::getsockname(fd.as_raw_fd(), (&raw mut got).cast(), &mut got_len);
            let addr =
                SocketAddr::from((std::net::Ipv4Addr::LOCALHOST, u16::from_be(got.sin_port)));
            StuckListener { fd, addr }
        }
    }

    /// Fills the accept queue with connections of this test; returns them.
    fn fill(&self) -> Vec<std::net::TcpStream> {
        let mut held = Vec::new();
        while let Ok(s) =
            std::net::TcpStream::connect_timeout(&self.addr, Duration::from_millis(300))
        {
            held.push(s);
            assert!(held.len() < 64, "the accept queue does not fill");
        }
        held
    }
}

/// Starts `load` against `target` with many connections, waits (by its
/// progress lines, not by time) until it reports `connecting:` with at least
/// `min` established, sends SIGINT; returns the output and the JSON.
fn interrupt_during_setup(target: SocketAddr, min: u64, name: &str) -> (Output, Value, u64) {
    let json = out_path(name);
    let target = target.to_string();
    let mut child = spawn_load(&[
        "--target",
        &target,
        "-c",
        "200",
        "--json",
        json.to_str().unwrap(),
    ]);
    let lines = Lines::read(child.child().stderr.take().unwrap());
    let established = |line: &str| {
        line.split_once("connecting: ")
            .and_then(|(_, rest)| rest.split_whitespace().next())
            .and_then(|n| n.parse::<u64>().ok())
    };
    let line = lines
        .wait_for(Duration::from_secs(60), |l| {
            established(l).is_some_and(|n| n >= min)
        })
        .expect("a `connecting:` progress line");
    let seen = established(&line).expect("the established count");
    let mut out = child.interrupt(Duration::from_secs(30));
    out.stderr = lines.all().into_bytes();
    assert_eq!(
        out.status.code(),
        Some(130),
        "stderr:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v = read_json(&json);
    (out, v, seen)
}

/// Issue 17 part 4: Ctrl-C while no connection could be established yet
/// ended with "no connection could be established", exit 1 and no JSON.
#[test]
fn r17_ctrl_c_before_any_connection_writes_the_result_and_exits_130() {
    let listener = StuckListener::new();
    let _held = listener.fill();
    let (_, v, _) = interrupt_during_setup(listener.addr, 0, "setup-none.json");
    assert_eq!(v["interrupted"], true, "{v}");
    assert_eq!(u(&v, "/connections/established"), 0, "{v}");
    assert_eq!(u(&v, "/requests/sent"), 0, "{v}");
}

/// Issue 17 part 4: Ctrl-C with some connections established and others
/// still connecting writes what was measured: the established count.
#[test]
fn r17_ctrl_c_during_setup_writes_the_established_count_and_exits_130() {
    let listener = StuckListener::new();
    let (_, v, seen) = interrupt_during_setup(listener.addr, 1, "setup-some.json");
    assert_eq!(v["interrupted"], true, "{v}");
    let established = u(&v, "/connections/established");
    assert!(established >= seen && established < 200, "{v}");
    assert_eq!(u(&v, "/requests/sent"), 0, "{v}");
    assert!(
        v["warnings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|w| w.as_str().unwrap().contains("connection set-up")),
        "{v}"
    );
    drop(listener.fd);
}
