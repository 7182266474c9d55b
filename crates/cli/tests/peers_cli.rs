//! End to end: `connlab sweep` on a tiny peers experiment (two connlab serve
//! engines driven by `connlab load` on loopback, so no nginx or wrk is
//! needed), resuming without measuring again, refusing a bad field by name,
//! and `connlab report` showing the ratio to the baseline. Checks structure,
//! never times.

use assert_cmd::Command;
use predicates::prelude::*;
use predicates::str::contains;
use std::path::{Path, PathBuf};

const TINY: &str = r#"
kind = "peers"
name = "tiny-peers"
title = "poll against epoll"
measure = "server"
baseline = "poll"
repetitions = 1

[workload]
connections = 4
body_sizes = [128]
duration = "1s"

[client]
kind = "connlab-load"

[[contender]]
name = "poll"
kind = "connlab-serve"
engine = "poll"

[[contender]]
name = "epoll"
kind = "connlab-serve"
engine = "epoll"
"#;

/// A fresh directory under the test target's tmpdir.
fn scratch(name: &str) -> PathBuf {
    let dir =
        Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("peers-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn connlab() -> Command {
    let mut cmd = Command::cargo_bin("connlab").unwrap();
    cmd.timeout(std::time::Duration::from_secs(120));
    cmd
}

#[test]
fn a_tiny_peers_sweep_runs_resumes_and_reports_the_ratio() {
    let dir = scratch("tiny");
    let file = dir.join("tiny.toml");
    std::fs::write(&file, TINY).unwrap();
    let out = dir.join("results");
    connlab()
        .arg("sweep")
        .arg(&file)
        .arg("--out")
        .arg(&out)
        .assert()
        .success()
        .stderr(contains("poll-128B-rep1"));
    let points = out.join("points");
    let first = std::fs::read_to_string(points.join("epoll-128B-rep1.json")).unwrap();
    let point: serde_json::Value = serde_json::from_str(&first).unwrap();
    assert_eq!(point["params"]["contender"], "epoll");
    assert!(point["requests"].as_u64().unwrap() > 0);
    assert!(point["requests_per_cpu_s"].as_f64().unwrap() > 0.0);
    assert!(out.join("peers.json").exists());

    // Run again: both points are kept, nothing is measured anew.
    connlab()
        .arg("sweep")
        .arg(&file)
        .arg("--out")
        .arg(&out)
        .assert()
        .success()
        .stderr(contains("2 kept from before"))
        .stderr(contains("epoll-128B-rep1 ...").not());
    assert_eq!(
        std::fs::read_to_string(points.join("epoll-128B-rep1.json")).unwrap(),
        first
    );

    connlab()
        .arg("report")
        .arg(&out)
        .args(["--format", "markdown"])
        .assert()
        .success()
        .stdout(contains("ratio to poll"))
        .stdout(contains("| 128 B | epoll |"))
        .stdout(contains("×"));
    connlab()
        .arg("report")
        .arg(&out)
        .args(["--format", "csv"])
        .assert()
        .success()
        .stdout(contains("ratio_median"))
        .stdout(contains("128,epoll,"));
    let html = out.join("r.html");
    connlab()
        .arg("report")
        .arg(&out)
        .arg("-o")
        .arg(&html)
        .assert()
        .success();
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.contains("<svg"), "the report has a plot");
    assert!(page.contains("ratio to poll"));
}

#[test]
fn a_bad_field_is_named_with_the_file() {
    let dir = scratch("bad");
    let file = dir.join("bad.toml");
    std::fs::write(
        &file,
        TINY.replace(
            "kind = \"connlab-serve\"\nengine = \"epoll\"",
            "kind = \"nginz\"",
        ),
    )
    .unwrap();
    connlab()
        .arg("sweep")
        .arg(&file)
        .arg("--dry-run")
        .assert()
        .code(2)
        .stderr(contains("bad.toml: contender[1].kind"));
}

#[test]
fn dry_run_lists_the_point_ids() {
    let dir = scratch("dry");
    let file = dir.join("dry.toml");
    std::fs::write(&file, TINY.replace("repetitions = 1", "repetitions = 2")).unwrap();
    connlab()
        .arg("sweep")
        .arg(&file)
        .arg("--dry-run")
        .assert()
        .success()
        .stdout(contains("poll-128B-rep1"))
        .stdout(contains("epoll-128B-rep2"));
}
