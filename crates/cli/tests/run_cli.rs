//! Black-box test of `connlab run` through the real binary: three engines,
//! two repetitions, short runs on loopback; every run's JSON in `--out`
//! records the same placement, the page exists, and the table ends in a
//! verdict. Nothing here asserts on a time or a latency.

use connlab_testkit::{connlab_bin, run_bounded};
use std::path::Path;
use std::process::Command;
use std::time::Duration;

#[test]
fn compares_engines_under_one_placement_and_writes_a_page() {
    let dir = tempfile::tempdir().expect("temp dir");
    let out_dir = dir.path().join("out");
    let out = run_bounded(
        Command::new(connlab_bin())
            .args(["run", "--engines", "epoll,select,threads"])
            .args(["--repetitions", "2", "--quick", "-c", "20", "--rate", "200"])
            .arg("--out")
            .arg(&out_dir),
        Duration::from_secs(180),
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "stderr:\n{stderr}");
    // The result is on stdout, ranked (#1 first), progress on stderr only.
    for engine in ["epoll", "select", "threads"] {
        assert!(
            stdout
                .lines()
                .any(|l| l.split_whitespace().nth(1) == Some(engine)),
            "no row for {engine} in:\n{stdout}"
        );
    }
    let ranks: Vec<&str> = stdout
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|w| w.parse::<u32>().is_ok())
        .collect();
    assert_eq!(ranks, ["1", "2", "3"], "{stdout}");
    assert!(
        stdout.lines().any(|l| l.starts_with("recommendation: ")),
        "no recommendation in:\n{stdout}"
    );
    assert!(
        !stdout.contains("connlab run:"),
        "progress on stdout:\n{stdout}"
    );
    assert!(stderr.contains("connlab run:"), "no progress on stderr");

    let runs = read_runs(&out_dir.join("runs"));
    assert_eq!(runs.len(), 6, "3 engines x 2 repetitions");
    let first = &runs[0]["placement"];
    assert!(first.is_object(), "a placement: {first}");
    for r in &runs {
        assert_eq!(&r["placement"], first, "placements differ");
        assert_eq!(r["schema"], "connlab.run/1");
        assert!(r["load"]["service_latency_us"]["p50"].is_number());
        // Every round judged its own validity.
        assert!(r["validity"]["valid"].is_boolean(), "{}", r["validity"]);
        assert!(r["validity"]["gates"]
            .as_array()
            .is_some_and(|g| !g.is_empty()));
    }
    // With two CPUs or more the default puts server and client apart.
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    if cpus >= 2 {
        assert!(first["server_cpus"].is_string() && first["client_cpus"].is_string());
        assert_ne!(first["server_cpus"], first["client_cpus"]);
        for r in &runs {
            assert_eq!(r["server"]["pinned"], true);
        }
    }
    let page = std::fs::read_to_string(out_dir.join("index.html")).expect("index.html");
    assert!(page.contains("In brief"), "page:\n{page}");
    // The CDF plot needs a valid run; a loaded machine may leave none.
    if runs.iter().any(|r| r["validity"]["valid"] == true) {
        assert!(page.contains("<svg"), "page:\n{page}");
    }
    let comparison: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(out_dir.join("comparison.json")).expect("comparison.json"),
    )
    .expect("comparison is JSON");
    assert_eq!(
        comparison["comparison"]["rows"].as_array().map(Vec::len),
        Some(3)
    );
}

/// A CI gate: `--format csv` on stdout, the exports, a `--fail-if` that
/// holds for any run (p99 above 0 us: exit 3, whatever the machine) and a
/// baseline no run can match (a 1 ns median: a regression, named in the
/// JSON export). A condition naming no row is a usage error (exit 2).
#[test]
fn fail_if_and_baseline_gate_a_ci_job_and_exports_are_written() {
    let dir = tempfile::tempdir().expect("temp dir");
    let baseline = dir.path().join("base.json");
    std::fs::write(
        &baseline,
        serde_json::json!({
            "schema": "connlab.run.comparison/1",
            "comparison": {
                "metric": "median service latency", "better": "lower", "confidence": 0.95,
                "best": 0, "verdict": [],
                "rows": [{
                    "label": "epoll", "primary": {"median": 0.001, "min": 0.001, "max": 0.001, "n": 1},
                    "ratio_to_best": null, "ratio_ci": null, "ratio_ci_coverage": null,
                    "paired_rounds": 0, "standing": "best", "cpu_us_per_request": null,
                    "wakeups_per_request": null, "memory_per_connection_bytes": null, "causes": []
                }]
            }
        })
        .to_string(),
    )
    .unwrap();
    let json = dir.path().join("x/result.json");
    let md = dir.path().join("result.md");
    let run = |extra: &[&str]| {
        run_bounded(
            Command::new(connlab_bin())
                .args(["run", "--engines", "epoll", "--repetitions", "1", "--quick"])
                .args(["-c", "10", "--rate", "200", "--format", "csv"])
                .arg("--export-json")
                .arg(&json)
                .arg("--export-markdown")
                .arg(&md)
                .arg("--baseline")
                .arg(&baseline)
                .args(["--max-regression", "1.5"])
                .args(extra),
            Duration::from_secs(120),
        )
    };
    let out = run(&["--fail-if", "p99 > 0us"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "stderr:\n{stderr}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let mut csv = stdout.lines();
    let head = csv.next().unwrap_or_default();
    assert!(head.starts_with("rank,label,standing,primary,"), "{stdout}");
    assert!(
        csv.next().is_some_and(|l| l.starts_with("1,epoll,")),
        "{stdout}"
    );
    let j: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).expect("json export")).unwrap();
    let failures: Vec<&str> = j["failures"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|f| f["text"].as_str())
        .collect();
    // Each check failed: crossed, or not checkable when the busy machine
    // left no valid run (a CI gate never passes on no data).
    assert_eq!(failures.len(), 2, "{failures:?}");
    assert!(
        failures[0].starts_with("p99 ") || failures[0].starts_with("p99: no valid run"),
        "{failures:?}"
    );
    assert!(
        failures[1].contains("worse than the baseline") || failures[1].starts_with("no valid run"),
        "{failures:?}"
    );
    let m = std::fs::read_to_string(&md).expect("markdown export");
    assert!(
        m.contains("| 1 | epoll |") && m.contains("**recommendation: "),
        "{m}"
    );
    // Without the --fail-if, the regression alone: exit 4.
    let out = run(&[]);
    assert_eq!(
        out.status.code(),
        Some(4),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = run(&["--fail-if", "nosuch:p99>1ms"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no row \"nosuch\""));
}

#[test]
fn against_pid_without_against_is_a_usage_error() {
    let out = run_bounded(
        Command::new(connlab_bin()).args(["run", "--against-pid", "1"]),
        Duration::from_secs(30),
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "stderr:\n{stderr}");
    assert!(stderr.contains("--against-pid"), "stderr:\n{stderr}");
}

/// A CLB1 server written from the spec that answers only the connections it
/// accepted first, third, fifth, ...: the others' requests are read and
/// never answered.
fn half_answering_server() -> std::net::SocketAddr {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("addr");
    std::thread::spawn(move || {
        for (n, stream) in listener.incoming().enumerate() {
            let Ok(mut s) = stream else { continue };
            let answer = n % 2 == 0;
            std::thread::spawn(move || {
                let mut head = [0u8; 16];
                while s.read_exact(&mut head).is_ok() {
                    let req_len = u32::from_be_bytes(head[4..8].try_into().unwrap());
                    let resp_len = u32::from_be_bytes(head[8..12].try_into().unwrap());
                    let mut rest = vec![0u8; req_len.saturating_sub(16) as usize];
                    if s.read_exact(&mut rest).is_err() {
                        return;
                    }
                    if answer {
                        let mut resp = head.to_vec();
                        resp.resize(resp_len.max(16) as usize, 0);
                        if s.write_all(&resp).is_err() {
                            return;
                        }
                    }
                }
            });
        }
    });
    addr
}

/// The completion gate, end to end: a server that answers half of the
/// requests fails it; the round is measured once more, then left out of
/// the comparison and marked in its JSON.
#[test]
fn a_server_that_drops_half_its_requests_fails_completion() {
    let addr = half_answering_server();
    let dir = tempfile::tempdir().expect("temp dir");
    let out_dir = dir.path().join("out");
    let out = run_bounded(
        Command::new(connlab_bin())
            .args(["run", "--engines", "epoll", "--against"])
            .arg(format!("half={addr}"))
            .args(["--repetitions", "1", "--quick", "-c", "10", "--rate", "200"])
            .args(["--response-size", "1KiB", "--drain-timeout", "500ms"])
            .arg("--out")
            .arg(&out_dir),
        Duration::from_secs(180),
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        matches!(out.status.code(), Some(0 | 1)),
        "stderr:\n{stderr}"
    );
    let runs = read_runs(&out_dir.join("runs"));
    let half = runs
        .iter()
        .find(|r| r["label"] == "half")
        .unwrap_or_else(|| panic!("no run of the half server:\n{stderr}"));
    let v = &half["validity"];
    assert_eq!(v["valid"], false, "{v}");
    assert_eq!(v["attempts"], 2, "measured once more: {v}");
    let completion = v["gates"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["name"] == "completion")
        .unwrap_or_else(|| panic!("no completion gate: {v}"));
    assert_eq!(completion["passed"], false, "{completion}");
    assert!(completion["value"].as_f64().unwrap() < 0.75, "{completion}");
    assert!(
        stderr.contains("half: invalid again, left out of the comparison"),
        "{stderr}"
    );
}

fn read_runs(dir: &Path) -> Vec<serde_json::Value> {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .expect("runs directory")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    files.sort();
    files
        .iter()
        .map(|p| {
            let text = std::fs::read_to_string(p).expect("read run");
            serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
        })
        .collect()
}
