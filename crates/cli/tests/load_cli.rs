//! Black-box tests of `connlab load` and `connlab run` through the real binary:
//! the client against the server for every engine and both protocols on
//! loopback (checking counts, never times), the JSON summary against the
//! checked-in schema, Ctrl-C and server death, and bad flags.

use connlab_testkit::serve::{Protocol, Server, Variant};
use connlab_testkit::{
    assert_matches_schema, connlab_bin, json_u64 as u, out_path, per_engine, read_json,
    run_bounded, ChildGuard,
};
use serde_json::Value;
use std::path::PathBuf;
use std::process::{Command, Output};
use std::time::Duration;

per_engine!(
    profile_poll_times_every_event_loop_call,
    open_loop_clb1_completes_every_request,
    open_loop_http_completes_every_request,
    closed_loop_completes_requests_without_errors,
);

/// A fresh output path under the test's target tmpdir.
fn out_path(name: &str) -> PathBuf {
    out_path!("load", name)
}

/// Runs `connlab SUBCOMMAND ARGS` to completion with a deadline.
fn connlab(subcommand: &str, args: &[&str], limit: Duration) -> Output {
    run_bounded(
        Command::new(connlab_bin()).arg(subcommand).args(args),
        limit,
    )
}

/// Runs `connlab load` to completion (60 s at most).
fn load(args: &[&str]) -> Output {
    connlab("load", args, Duration::from_secs(60))
}

/// Validates a result against `crates/loadgen/schema/load-result.schema.json`.
fn assert_schema_valid(v: &Value) {
    assert_matches_schema(v, "crates/loadgen/schema/load-result.schema.json");
}

/// The `--io` flag for `io` (none for the default, epoll).
fn io_flag(io: &str) -> Vec<&str> {
    if io == "epoll" {
        Vec::new()
    } else {
        vec!["--io", io]
    }
}

/// 20 connections, half active, 400 req/s for 1 s: exactly 400 measured
/// requests are scheduled, and every one must complete without error, with
/// the client's reader on `io`.
fn open_loop_case(engine: Variant, protocol: Protocol, io: &str) {
    let server = Server::start(engine, protocol, &[]);
    let json = out_path("open.json");
    let records = out_path("records.csv");
    let target = server.addr.to_string();
    let mut args = io_flag(io);
    args.extend_from_slice(&[
        "--target",
        &target,
        "-c",
        "20",
        "--active-ratio",
        "1/2",
        "--rate",
        "400",
        "-d",
        "1s",
        "--warmup",
        "200ms",
        "--protocol",
        protocol.as_str(),
        "--response-size",
        "1KiB",
        "--json",
        json.to_str().unwrap(),
        "--records",
        records.to_str().unwrap(),
    ]);
    let out = load(&args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(0),
        "[{engine}] exit status; stderr:\n{stderr}"
    );
    let v = read_json(&json);
    assert_schema_valid(&v);
    assert_eq!(v["config"]["io"], io, "[{engine}]");
    assert_eq!(u(&v, "/connections/established"), 20, "[{engine}] {v}");
    assert_eq!(u(&v, "/connections/active"), 10, "[{engine}] {v}");
    assert_eq!(u(&v, "/requests/sent"), 400, "[{engine}] {v}");
    assert_eq!(u(&v, "/requests/completed"), 400, "[{engine}] {v}");
    assert_eq!(u(&v, "/service_latency_us/count"), 400, "[{engine}] {v}");
    assert_eq!(
        u(&v, "/requests/warmup_sent"),
        u(&v, "/requests/warmup_completed"),
        "[{engine}] {v}"
    );
    assert!(
        v["requests"]["errors"].as_object().unwrap().is_empty(),
        "[{engine}] errors: {}",
        v["requests"]["errors"]
    );
    // The run checks: their material counts every measured request (no
    // verdict is asserted: those depend on timing).
    let checks = &v["run_checks"];
    assert_eq!(checks["arrivals"]["distribution"], "fixed", "[{engine}]");
    assert_eq!(window_total(checks), 400, "[{engine}] {checks}");
    assert_eq!(samples(checks, "latency_samples_us"), 400, "[{engine}]");
    assert_eq!(samples(checks, "arrival_gap_samples_us"), 400, "[{engine}]");
    let lines = std::fs::read_to_string(&records).unwrap();
    assert_eq!(
        lines.lines().count(),
        401,
        "[{engine}] header + one record per request"
    );
    let stats = server.stop();
    assert_eq!(
        stats["requests"].as_u64(),
        Some(u(&v, "/requests/completed") + u(&v, "/requests/warmup_completed")),
        "[{engine}] server and client agree on the request count"
    );
}

/// `--profile-poll`: the event loops time each polling call (wall and CPU)
/// and each cycle; engines without a polling call say so.
fn profile_poll_times_every_event_loop_call(engine: Variant) {
    let server = Server::start(engine, Protocol::Clb1, &["--profile-poll"]);
    let target = server.addr.to_string();
    let out = load(&[
        "--target", &target, "-c", "20", "--rate", "200", "-d", "500ms", "--warmup", "100ms",
    ]);
    assert_eq!(out.status.code(), Some(0), "[{engine}]");
    let stats = server.stop();
    let event_loop = !matches!(engine, Variant::Processes | Variant::Threads);
    assert_eq!(
        stats["profile_poll"].as_bool(),
        Some(event_loop),
        "[{engine}] {stats}"
    );
    for field in ["poll_call_us", "poll_call_cpu_us", "cycle_us"] {
        if event_loop {
            let t = &stats[field];
            // Every request needs at least one call that reported it; with
            // several workers only the first loop is timed.
            let least = if engine.workers() > 1 { 1 } else { 100 };
            assert!(
                t["count"].as_u64().unwrap() >= least,
                "[{engine}] {field}: {t}"
            );
            for k in ["mean", "p50", "p99"] {
                assert!(t[k].as_f64().unwrap() >= 0.0, "[{engine}] {field}.{k}: {t}");
            }
        } else {
            assert!(
                stats.get(field).is_none(),
                "[{engine}] {field} without a polling call"
            );
        }
    }
}

fn open_loop_clb1_completes_every_request(engine: Variant) {
    open_loop_case(engine, Protocol::Clb1, "epoll");
}

fn open_loop_http_completes_every_request(engine: Variant) {
    open_loop_case(engine, Protocol::Http, "epoll");
}

/// `--io uring`: the same open-loop runs complete every scheduled request.
#[test]
fn io_uring_open_loop_completes_every_request() {
    open_loop_case(Variant::Epoll, Protocol::Clb1, "uring");
    open_loop_case(Variant::Epoll, Protocol::Http, "uring");
}

fn closed_loop_completes_requests_without_errors(engine: Variant) {
    closed_loop_case(engine, "epoll");
}

/// `--io uring`: closed loop completes requests without errors.
#[test]
fn io_uring_closed_loop_completes_requests_without_errors() {
    closed_loop_case(Variant::Epoll, "uring");
}

/// 8 connections, 4 outstanding each, for 500 ms, the reader on `io`.
fn closed_loop_case(engine: Variant, io: &str) {
    let server = Server::start(engine, Protocol::Clb1, &[]);
    let json = out_path("closed.json");
    let target = server.addr.to_string();
    let mut args = io_flag(io);
    args.extend_from_slice(&[
        "--target",
        &target,
        "-c",
        "8",
        "--rate",
        "max",
        "--depth",
        "4",
        "-d",
        "500ms",
        "--warmup",
        "100ms",
        "--json",
        json.to_str().unwrap(),
    ]);
    let out = load(&args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "[{engine}] stderr:\n{stderr}");
    let v = read_json(&json);
    assert_schema_valid(&v);
    assert_eq!(v["config"]["io"], io, "[{engine}]");
    assert!(u(&v, "/requests/completed") > 0, "[{engine}] {v}");
    assert_eq!(
        u(&v, "/requests/warmup_sent"),
        u(&v, "/requests/warmup_completed"),
        "[{engine}] {v}"
    );
    assert!(
        v["requests"]["errors"].as_object().unwrap().is_empty(),
        "[{engine}] {v}"
    );
    assert_eq!(v["config"]["arrival"], "closed");
    let checks = &v["run_checks"];
    assert_eq!(checks["arrivals"]["distribution"], "closed", "[{engine}]");
    assert!(checks["arrivals"]["passed"].is_null(), "[{engine}]");
    assert_eq!(samples(checks, "arrival_gap_samples_us"), 0, "[{engine}]");
    assert_eq!(
        window_total(checks),
        u(&v, "/requests/completed"),
        "[{engine}] {checks}"
    );
    let n = samples(checks, "latency_samples_us");
    assert!(n > 0 && n <= 4000, "[{engine}] {n} latency samples");
}

/// Requests counted over the `run_checks.latency_windows` (40 of them).
fn window_total(checks: &Value) -> u64 {
    let windows = checks["latency_windows"]
        .as_array()
        .expect("latency_windows");
    assert_eq!(windows.len(), 40);
    windows.iter().map(|w| w["count"].as_u64().unwrap()).sum()
}

/// Length of the `run_checks` sample array `field`.
fn samples(checks: &Value, field: &str) -> u64 {
    checks[field].as_array().map_or(0, Vec::len) as u64
}

/// Closed loop on both I/O paths (on uring its requests go out through the
/// ring): every request sent is answered, in order, and byte-exact, for
/// small and large CLB1 requests (a 600 kB one takes several send entries or
/// system calls) and for HTTP; each record's send precedes its completion and
/// a closed-loop send is never late.
#[test]
fn closed_loop_sends_every_request_whole_on_both_io_paths() {
    for io in ["epoll", "uring"] {
        for (protocol, request_size, depth) in [
            (Protocol::Clb1, 128u64, "1"),
            (Protocol::Clb1, 600_000, "2"),
            (Protocol::Http, 0, "3"),
        ] {
            closed_loop_bytes_case(io, protocol, request_size, depth);
        }
    }
}

fn closed_loop_bytes_case(io: &str, protocol: Protocol, request_size: u64, depth: &str) {
    let server = Server::start(Variant::Epoll, protocol, &[]);
    let target = server.addr.to_string();
    let json = out_path(&format!("closed-bytes-{io}-{request_size}.json"));
    let records = out_path(&format!("closed-bytes-{io}-{request_size}.csv"));
    let size = request_size.to_string();
    let mut args = vec!["--io", io, "--target", &target, "-c", "6"];
    args.extend_from_slice(&["--rate", "max", "--depth", depth]);
    args.extend_from_slice(&["-d", "300ms", "--warmup", "100ms"]);
    args.extend_from_slice(&["--response-size", "64"]);
    if protocol == Protocol::Http {
        args.extend_from_slice(&["--protocol", "http"]);
    } else {
        args.extend_from_slice(&["--request-size", &size]);
    }
    args.extend_from_slice(&["--json", json.to_str().unwrap()]);
    args.extend_from_slice(&["--records", records.to_str().unwrap()]);
    let out = load(&args);
    let case = format!("[{io} {protocol:?} {request_size} B depth {depth}]");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{case} {stderr}");
    // The summary says what was asked: a path over HTTP (not the CLB1
    // sizes, which HTTP does not use), sizes over CLB1.
    let asked = if protocol == Protocol::Http {
        "GET /bytes/64,".to_string()
    } else {
        format!("{request_size} B requests, 64 B responses")
    };
    assert!(stderr.contains(&asked), "{case} {stderr}");
    server.stop();
    let v = read_json(&json);
    assert_schema_valid(&v);
    assert_eq!(v["config"]["io"], io, "{case}");
    assert!(
        v["requests"]["errors"].as_object().unwrap().is_empty(),
        "{case} {v}"
    );
    let sent = u(&v, "/requests/sent") + u(&v, "/requests/warmup_sent");
    let completed = u(&v, "/requests/completed") + u(&v, "/requests/warmup_completed");
    assert!(completed > 0, "{case} {v}");
    assert_eq!(sent, completed, "{case} every request answered");
    if protocol == Protocol::Clb1 {
        assert_eq!(
            u(&v, "/bytes_sent"),
            sent * request_size,
            "{case} every request whole"
        );
    } else {
        assert_eq!(u(&v, "/bytes_sent") % sent, 0, "{case} {v}");
    }
    let rows: Vec<connlab_loadgen::RequestRecord> = csv::Reader::from_path(&records)
        .unwrap()
        .deserialize()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(rows.len() as u64, u(&v, "/requests/completed"), "{case}");
    for r in &rows {
        assert!(r.send_us <= r.complete_us, "{case} {r:?}");
        assert_eq!(r.send_lag_us, 0.0, "{case} {r:?}");
        assert_eq!(r.scheduled_us, r.send_us, "{case} {r:?}");
    }
}

/// The JSON's top-level `requests.completed` is the "completed" the summary
/// prints (the measured window's), with the warm-up's under its own name,
/// open and closed loop, on both I/O paths.
#[test]
fn json_completed_is_the_printed_completed() {
    for io in ["epoll", "uring"] {
        for rate in ["200", "max"] {
            printed_case(io, rate);
        }
    }
}

fn printed_case(io: &str, rate: &str) {
    let server = Server::start(Variant::Epoll, Protocol::Clb1, &[]);
    let json = out_path(&format!("printed-{io}-{rate}.json"));
    let target = server.addr.to_string();
    let out = load(&[
        "--io",
        io,
        "--target",
        &target,
        "-c",
        "4",
        "--rate",
        rate,
        "-d",
        "500ms",
        "--warmup",
        "300ms",
        "--json",
        json.to_str().unwrap(),
    ]);
    server.stop();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "stderr:\n{stderr}");
    let line = stderr
        .lines()
        .find(|l| l.trim_start().starts_with("requests "))
        .unwrap_or_else(|| panic!("no requests line in:\n{stderr}"));
    let printed: u64 = line
        .split(", ")
        .find_map(|part| part.strip_suffix(" completed"))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no completed count in {line:?}"));
    let v = read_json(&json);
    assert_schema_valid(&v);
    assert_eq!(u(&v, "/requests/completed"), printed, "{line:?} {v}");
    assert_eq!(u(&v, "/service_latency_us/count"), printed, "{v}");
    assert!(u(&v, "/requests/warmup_completed") > 0, "{v}");
}

/// Ctrl-C ends a run with its results written, open and closed loop, on
/// both I/O paths (closed loop on uring has sends in its ring then).
#[test]
fn ctrl_c_writes_results_and_exits_130() {
    for io in ["epoll", "uring"] {
        for rate in ["200", "max"] {
            ctrl_c_case(io, rate);
        }
    }
}

fn ctrl_c_case(io: &str, rate: &str) {
    let server = Server::start(Variant::Epoll, Protocol::Clb1, &[]);
    let json = out_path(&format!("interrupted-{io}-{rate}.json"));
    let target = server.addr.to_string();
    let child = ChildGuard::spawn_piped(
        Command::new(connlab_bin())
            .args([
                "load", "--target", &target, "-c", "10", "--rate", rate, "-d", "60s",
            ])
            .args(["--io", io])
            .args(["--warmup", "0s", "--json", json.to_str().unwrap()]),
    );
    std::thread::sleep(Duration::from_millis(1500));
    child.signal(libc::SIGINT);
    let out = child.output_within(Duration::from_secs(30));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(130),
        "[{io} {rate}] stderr:\n{stderr}"
    );
    let v = read_json(&json);
    assert_schema_valid(&v);
    assert_eq!(v["config"]["io"], io);
    assert_eq!(v["interrupted"], true);
    assert!(u(&v, "/requests/completed") > 0, "{v}");
}

#[test]
fn server_death_is_counted_and_exits_1() {
    server_death_case("epoll", "200");
    server_death_case("epoll", "max");
}

/// `--io uring`: a server that dies is counted as failed connections, open
/// and closed loop (whose sends then fail in the ring).
#[test]
fn io_uring_server_death_is_counted_and_exits_1() {
    server_death_case("uring", "200");
    server_death_case("uring", "max");
}

/// Kills the server under a 60 s run at `rate` whose reader is on `io`.
fn server_death_case(io: &str, rate: &str) {
    let server = Server::start(Variant::Epoll, Protocol::Clb1, &[]);
    let json = out_path(&format!("died-{io}-{rate}.json"));
    let target = server.addr.to_string();
    let child = ChildGuard::spawn_piped(
        Command::new(connlab_bin())
            .args([
                "load", "--target", &target, "-c", "10", "--rate", rate, "-d", "60s",
            ])
            .args(["--io", io])
            .args(["--warmup", "0s", "--json", json.to_str().unwrap()]),
    );
    std::thread::sleep(Duration::from_millis(1500));
    // SAFETY: killing the server process this test started.
    unsafe { libc::kill(server.pid(), libc::SIGKILL) };
    let out = child.output_within(Duration::from_secs(30));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "stderr:\n{stderr}");
    let v = read_json(&json);
    assert_schema_valid(&v);
    assert_eq!(v["config"]["io"], io);
    assert_eq!(v["peer_failed"], true);
    let errors = v["requests"]["errors"].as_object().unwrap();
    assert!(
        errors.contains_key("closed_by_peer") || errors.contains_key("reset"),
        "errors by kind: {errors:?}"
    );
}

/// Idle connections the server closes are counted apart, not as errors,
/// with either reader.
#[test]
fn idle_connections_closed_by_the_server_are_counted() {
    for io in ["epoll", "uring"] {
        let server = Server::start(Variant::Epoll, Protocol::Clb1, &["--idle-timeout", "300ms"]);
        let json = out_path("idle-closed.json");
        let target = server.addr.to_string();
        // Each active connection carries a request every 50 ms: only the idle half times out.
        let out = load(&[
            "--target",
            &target,
            "--io",
            io,
            "-c",
            "20",
            "--active-ratio",
            "1/2",
            "--rate",
            "200",
            "-d",
            "1500ms",
            "--warmup",
            "0s",
            "--json",
            json.to_str().unwrap(),
        ]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "[{io}] stderr:\n{stderr}");
        let v = read_json(&json);
        assert_eq!(u(&v, "/connections/idle_closed_by_peer"), 10, "[{io}] {v}");
        assert!(
            v["requests"]["errors"].as_object().unwrap().is_empty(),
            "[{io}] {v}"
        );
    }
}

#[test]
fn refuses_unreachable_target_with_exit_1() {
    // Bind then drop a listener: nothing listens on that port any more.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let out = load(&[
        "--target",
        &format!("127.0.0.1:{port}"),
        "-c",
        "3",
        "-d",
        "1s",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "stderr:\n{stderr}");
    assert!(stderr.contains("no connection"), "stderr:\n{stderr}");
}

/// `--manifest`: requests drawn from a file set (here paths the reference
/// server answers, `bytes/N`), the right bytes received, latency per size
/// class, and every class's count adding up to the measured requests.
#[test]
fn manifest_requests_follow_the_file_set_and_report_size_classes() {
    let manifest = out_path("manifest.csv");
    std::fs::write(
        &manifest,
        "path,size_bytes,weight\nbytes/100,100,1\nbytes/5000,5000,1\nbytes/50000,50000,2\n",
    )
    .unwrap();
    // Open loop on both I/O paths, and closed loop on uring (each request's
    // GET then goes out through the ring).
    for (io, rate) in [("epoll", "1000"), ("uring", "1000"), ("uring", "max")] {
        manifest_case(&manifest, io, rate);
    }
}

/// A `--manifest` run at `rate` with the reader on `io`: every request
/// answered, filed under its size class in the manifest's proportions.
fn manifest_case(manifest: &std::path::Path, io: &str, rate: &str) {
    let server = Server::start(Variant::Epoll, Protocol::Http, &[]);
    let target = server.addr.to_string();
    let json = out_path(&format!("manifest-{io}-{rate}.json"));
    let out = load(&[
        "--io",
        io,
        "--target",
        &target,
        "--protocol",
        "http",
        "--manifest",
        manifest.to_str().unwrap(),
        "-c",
        "10",
        "--rate",
        rate,
        "-d",
        "1s",
        "--warmup",
        "0s",
        "--json",
        json.to_str().unwrap(),
    ]);
    let case = format!("[{io} {rate}]");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{case} {stderr}");
    assert!(stderr.contains("by size"), "{case} {stderr}");
    server.stop();
    let v = read_json(&json);
    assert_schema_valid(&v);
    assert!(
        v["requests"]["errors"].as_object().unwrap().is_empty(),
        "{case} {v}"
    );
    assert_eq!(v["config"]["manifest_files"], 3);
    let classes = v["size_classes"].as_array().unwrap();
    let names: Vec<&str> = classes
        .iter()
        .map(|c| c["class"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["<1KB", "1-10KB", "10-100KB"], "{case}");
    let counts: Vec<u64> = classes
        .iter()
        .map(|c| c["requests"].as_u64().unwrap())
        .collect();
    assert_eq!(counts.iter().sum::<u64>(), u(&v, "/requests/completed"));
    // Weights 1:1:2, so about half of the requests are the 50 KB file.
    let half = counts[2] as f64 / counts.iter().sum::<u64>() as f64;
    assert!((0.4..0.6).contains(&half), "{case} {counts:?}");
}

/// Bad combinations of `--manifest` flags are refused.
#[test]
fn manifest_flags_are_checked() {
    let manifest = out_path("manifest-flags.csv");
    std::fs::write(&manifest, "path,size_bytes,weight\nbytes/100,100,1\n").unwrap();
    for (args, says) in [
        (
            vec!["--manifest", manifest.to_str().unwrap()],
            "--protocol http",
        ),
        (
            vec!["--protocol", "http", "--manifest", "/nonexistent/m.csv"],
            "--manifest",
        ),
        (
            vec![
                "--protocol",
                "http",
                "--manifest",
                manifest.to_str().unwrap(),
                "--popularity",
                "zipf:x",
            ],
            "--popularity",
        ),
    ] {
        let mut all = vec!["--target", "127.0.0.1:9", "-d", "1s"];
        all.extend(args.iter().copied());
        let out = load(&all);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains(says),
            "{args:?}"
        );
    }
}

/// `--connection-per-request`: every request on its own connection; counts
/// add up, and the server accepted one connection per request.
#[test]
fn connection_per_request_opens_one_connection_per_request() {
    let server = Server::start(Variant::Epoll, Protocol::Http, &[]);
    let target = server.addr.to_string();
    let json = out_path("per-request.json");
    let out = load(&[
        "--target",
        &target,
        "--protocol",
        "http",
        "--connection-per-request",
        "-c",
        "4",
        "--rate",
        "200",
        "-d",
        "1s",
        "--warmup",
        "0s",
        "--json",
        json.to_str().unwrap(),
    ]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Nothing is set up before measuring, so the summary gives no set-up
    // rate (it once printed a count divided by a near-zero time).
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("established a new one per request"),
        "{stderr}"
    );
    let stats = server.stop();
    let v = read_json(&json);
    assert_schema_valid(&v);
    assert_eq!(v["config"]["connection_per_request"], true);
    assert!(
        v["requests"]["errors"].as_object().unwrap().is_empty(),
        "{v}"
    );
    let completed = u(&v, "/requests/completed");
    assert_eq!(completed, 200, "{v}");
    assert_eq!(stats["connections_accepted"], completed, "{stats}");
    let refused = load(&["--target", &target, "--connection-per-request", "-d", "1s"]);
    assert_eq!(refused.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&refused.stderr).contains("--protocol http"));
}

/// `--active-policy rotating`: 2% of 200 connections busy at once, but the
/// requests spread over (nearly) all of them.
#[test]
fn rotating_policy_spreads_requests_over_every_connection() {
    rotating_case("epoll");
}

/// `--io uring`: the rotating policy's requests spread the same way, and
/// every one has its per-request record.
#[test]
fn io_uring_rotating_policy_spreads_requests_over_every_connection() {
    rotating_case("uring");
}

/// The rotating run with the reader on `io`.
fn rotating_case(io: &str) {
    let server = Server::start(Variant::Epoll, Protocol::Clb1, &[]);
    let target = server.addr.to_string();
    let json = out_path("rotating.json");
    let records = out_path("rotating.csv");
    let mut args = io_flag(io);
    args.extend_from_slice(&[
        "--target",
        &target,
        "-c",
        "200",
        "--active-ratio",
        "2%",
        "--rate",
        "max",
        "--active-policy",
        "rotating",
        "-d",
        "1s",
        "--warmup",
        "100ms",
        "--json",
        json.to_str().unwrap(),
        "--records",
        records.to_str().unwrap(),
    ]);
    let out = load(&args);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    server.stop();
    let v = read_json(&json);
    assert_schema_valid(&v);
    assert_eq!(v["config"]["active_policy"], "rotating");
    assert_eq!(u(&v, "/connections/active"), 4);
    assert!(
        v["requests"]["errors"].as_object().unwrap().is_empty(),
        "{v}"
    );
    let rows: Vec<connlab_loadgen::RequestRecord> = csv::Reader::from_path(&records)
        .unwrap()
        .deserialize()
        .collect::<Result<_, _>>()
        .unwrap();
    let conns: std::collections::HashSet<u32> = rows.iter().map(|r| r.conn).collect();
    let requests = rows.len();
    assert_eq!(
        requests as u64,
        u(&v, "/requests/completed"),
        "one record each"
    );
    assert!(requests >= 1000, "{requests} requests");
    assert!(
        conns.len() >= 150,
        "{} of 200 connections carried requests",
        conns.len()
    );
}

#[test]
fn bad_flags_exit_2_naming_the_flag() {
    for (args, flag) in [
        (vec!["--active-ratio", "0"], "--active-ratio"),
        (vec!["--active-ratio", "3/2"], "--active-ratio"),
        (vec!["--rate", "fast"], "--rate"),
        (vec!["--request-size", "12XB"], "--request-size"),
        (vec!["-d", "ten"], "--duration"),
        (vec!["--arrival", "bursty"], "--arrival"),
        (
            vec!["--source-addrs", "127.0.0.9-127.0.0.1"],
            "--source-addrs",
        ),
        (vec!["--depth", "0", "--rate", "max"], "--depth"),
        (vec!["--active-policy", "sideways"], "--active-policy"),
        (
            vec!["--active-policy", "rotating", "--rate", "100"],
            "--active-policy",
        ),
        (vec!["--io", "kqueue"], "--io"),
        (
            vec![
                "--io",
                "uring",
                "--connection-per-request",
                "--protocol",
                "http",
            ],
            "--io",
        ),
        // Issue 29: an output that cannot be written fails before the run.
        (
            vec!["--json", "/nonexistent-connlab-dir/result.json"],
            "--json",
        ),
        (vec!["--json", "/tmp"], "--json"),
        (
            vec!["--records", "/nonexistent-connlab-dir/records.csv"],
            "--records",
        ),
        // A start two hours ahead is a typo, not a plan.
        (vec!["--start-at", "+2h"], "--start-at"),
    ] {
        let mut all = vec!["--target", "127.0.0.1:9"];
        all.extend(args.iter().copied());
        let out = load(&all);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: stderr:\n{stderr}");
        assert!(
            stderr.contains(flag),
            "{args:?} should name {flag}: {stderr}"
        );
    }
}

/// Issue 29: a run that fails leaves no header-only records file behind.
#[test]
fn a_failed_run_leaves_no_records_file() {
    let records = out_path("failed-run.csv");
    let _ = std::fs::remove_file(&records);
    // Nothing listens on the discard port: every connect is refused.
    let out = load(&[
        "--target",
        "127.0.0.1:9",
        "-c",
        "2",
        "-d",
        "1s",
        "--records",
        records.to_str().unwrap(),
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_ne!(out.status.code(), Some(0), "stderr:\n{stderr}");
    assert!(
        !records.exists(),
        "a failed run left {}: {:?}",
        records.display(),
        std::fs::read_to_string(&records)
    );
}

#[test]
fn refuses_runs_beyond_the_open_files_limit() {
    let out = load(&["--target", "127.0.0.1:9", "-c", "1000000", "-d", "1s"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "stderr:\n{stderr}");
    assert!(stderr.contains("open-files limit"), "stderr:\n{stderr}");
}

#[test]
fn run_compares_every_engine_in_one_table() {
    let child = ChildGuard::spawn_piped(
        Command::new(connlab_bin())
            .args([
                "run",
                "--engines",
                "all",
                "-c",
                "40",
                "--rate",
                "200",
                "-d",
                "500ms",
            ])
            .args(["--warmup", "100ms", "--response-size", "1KiB"]),
    );
    let out = child.output_within(Duration::from_secs(120));
    let stderr = String::from_utf8_lossy(&out.stderr);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "stderr:\n{stderr}");
    // The table is the result: on stdout, a ranked row per engine.
    assert!(
        stdout.contains("service latency by engine"),
        "stdout:\n{stdout}"
    );
    for engine in ["processes", "threads", "select", "poll", "epoll"] {
        assert!(
            stdout
                .lines()
                .any(|l| l.split_whitespace().nth(1) == Some(engine)),
            "no row for {engine} in:\n{stdout}"
        );
    }
}

/// Runs `connlab merge` to completion (30 s at most).
fn merge(args: &[&str]) -> Output {
    connlab("merge", args, Duration::from_secs(30))
}

/// The workload both the single run and the shards run: 40 connections,
/// a quarter active, 400 req/s for 1 s (exactly 400 measured sends).
const SHARD_WORKLOAD: [&str; 10] = [
    "-c",
    "40",
    "--active-ratio",
    "1/4",
    "--rate",
    "400",
    "-d",
    "1s",
    "--warmup",
    "200ms",
];

#[test]
fn two_shards_merged_match_one_run_in_counts() {
    let server = Server::start(Variant::Epoll, Protocol::Clb1, &[]);
    let target = server.addr.to_string();
    let single = out_path("single.json");
    let mut args = vec!["--target", &target, "--json", single.to_str().unwrap()];
    args.extend(SHARD_WORKLOAD);
    let out = load(&args);
    assert_eq!(
        out.status.code(),
        Some(0),
        "single run: {}",
        String::from_utf8_lossy(&out.stderr)
    );

    let shard_files: Vec<PathBuf> = (1..=2)
        .map(|i| out_path(&format!("shard{i}.json")))
        .collect();
    let shards: Vec<ChildGuard> = shard_files
        .iter()
        .enumerate()
        .map(|(i, file)| {
            ChildGuard::spawn_piped(
                Command::new(connlab_bin())
                    .arg("load")
                    .args(["--target", &target, "--json", file.to_str().unwrap()])
                    .args(SHARD_WORKLOAD)
                    .args(["--shard", &format!("{}/2", i + 1), "--start-at", "+1s"]),
            )
        })
        .collect();
    for (i, child) in shards.into_iter().enumerate() {
        let out = child.output_within(Duration::from_secs(60));
        assert_eq!(
            out.status.code(),
            Some(0),
            "shard {}: {}",
            i + 1,
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let merged = out_path("merged.json");
    let out = merge(&[
        shard_files[0].to_str().unwrap(),
        shard_files[1].to_str().unwrap(),
        "--json",
        merged.to_str().unwrap(),
    ]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "merge: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let twice = merge(&[
        shard_files[0].to_str().unwrap(),
        shard_files[0].to_str().unwrap(),
    ]);
    assert_eq!(
        twice.status.code(),
        Some(2),
        "the same shard twice must be refused: {}",
        String::from_utf8_lossy(&twice.stderr)
    );
    let with_single = merge(&[shard_files[0].to_str().unwrap(), single.to_str().unwrap()]);
    assert_eq!(
        with_single.status.code(),
        Some(2),
        "a shard with a whole run"
    );
    server.stop();

    let one = read_json(&single);
    let both = read_json(&merged);
    assert_schema_valid(&both);
    for shard in &shard_files {
        let v = read_json(shard);
        assert_schema_valid(&v);
        assert_eq!(u(&v, "/connections/established"), 20, "{v}");
    }
    for field in [
        "/connections/established",
        "/connections/active",
        "/requests/sent",
        "/requests/completed",
        "/service_latency_us/count",
        "/send_deviation_us/count",
    ] {
        assert_eq!(u(&both, field), u(&one, field), "{field}");
    }
    assert_eq!(u(&both, "/requests/completed"), 400);
    assert_eq!(both["merged"]["files"].as_array().map(Vec::len), Some(2));
    // The run checks: windows add index by index, samples concatenate,
    // the arrivals are the worst shard's.
    let checks = &both["run_checks"];
    assert_eq!(window_total(checks), 400, "{checks}");
    let parts: Vec<Value> = shard_files.iter().map(|f| read_json(f)).collect();
    for i in 0..40 {
        let sum: u64 = parts
            .iter()
            .map(|p| {
                p["run_checks"]["latency_windows"][i]["count"]
                    .as_u64()
                    .unwrap()
            })
            .sum();
        assert_eq!(
            checks["latency_windows"][i]["count"].as_u64(),
            Some(sum),
            "window {i}"
        );
    }
    assert_eq!(samples(checks, "latency_samples_us"), 400);
    assert_eq!(samples(checks, "arrival_gap_samples_us"), 400);
    assert!(
        checks["arrivals"]["method"]
            .as_str()
            .unwrap()
            .starts_with("worst of 2 shards"),
        "{checks}"
    );
}

#[test]
fn merge_rejects_bad_input_with_exit_2() {
    let garbage = out_path("garbage.json");
    std::fs::write(&garbage, "{\"schema\": 1").unwrap();
    let missing = out_path("missing.json");
    for (files, says) in [
        (vec![garbage.to_str().unwrap()], "not a connlab load result"),
        (vec![missing.to_str().unwrap()], "reading"),
    ] {
        let out = merge(&files);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{files:?}: {stderr}");
        assert!(
            stderr.contains(says),
            "{files:?} should say {says:?}: {stderr}"
        );
    }
}
