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
    assert_eq!(out.status.code(), Some(0), "stderr:\n{stderr}");
    for engine in ["epoll", "select", "threads"] {
        assert!(
            stderr.lines().any(|l| l.trim_start().starts_with(engine)),
            "no row for {engine} in:\n{stderr}"
        );
    }
    assert!(
        stderr.lines().any(|l| l.starts_with("verdict: ")),
        "no verdict line in:\n{stderr}"
    );

    let runs = read_runs(&out_dir.join("runs"));
    assert_eq!(runs.len(), 6, "3 engines x 2 repetitions");
    let first = &runs[0]["placement"];
    assert!(first.is_object(), "a placement: {first}");
    for r in &runs {
        assert_eq!(&r["placement"], first, "placements differ");
        assert_eq!(r["schema"], "connlab.run/1");
        assert!(r["load"]["service_latency_us"]["p50"].is_number());
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
    assert!(
        page.contains("Verdict") && page.contains("<svg"),
        "page:\n{page}"
    );
    let comparison: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(out_dir.join("comparison.json")).expect("comparison.json"),
    )
    .expect("comparison is JSON");
    assert_eq!(
        comparison["comparison"]["rows"].as_array().map(Vec::len),
        Some(3)
    );
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
