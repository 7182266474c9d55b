//! End to end: `connlab sweep` on a tiny peers experiment (two connlab serve
//! engines driven by `connlab load` on loopback, so no nginx or wrk is
//! needed), resuming without measuring again, refusing a bad field by name,
//! and `connlab report` showing the ratio to the baseline (the file's, or one
//! named with `--baseline`). Checks structure,
//! never times.

use connlab_testkit::scratch;
use connlab_testkit::sweep::{
    dry_run_text, point as read_point, report, report_page, sweep, write_file,
};
use predicates::prelude::*;
use predicates::str::contains;
use std::time::Duration;

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

/// Bound on one `connlab` run.
const LIMIT: Duration = Duration::from_secs(120);

#[test]
fn a_tiny_peers_sweep_runs_resumes_and_reports_the_ratio() {
    let dir = scratch!("peers", "tiny");
    let file = write_file(&dir, "tiny.toml", TINY);
    let out = dir.join("results");
    sweep(&file, &out, LIMIT)
        .assert()
        .success()
        .stderr(contains("poll-128B-rep1"));
    let (first, point) = read_point(&out, "epoll-128B-rep1");
    assert_eq!(point["params"]["contender"], "epoll");
    assert!(point["requests"].as_u64().unwrap() > 0);
    assert!(point["requests_per_cpu_s"].as_f64().unwrap() > 0.0);
    assert!(out.join("peers.json").exists());

    // Run again: both points are kept, nothing is measured anew.
    sweep(&file, &out, LIMIT)
        .assert()
        .success()
        .stderr(contains("2 kept from before"))
        .stderr(contains("epoll-128B-rep1 ...").not());
    assert_eq!(read_point(&out, "epoll-128B-rep1").0, first);

    report(&out, "markdown", LIMIT)
        .assert()
        .success()
        .stdout(contains("ratio to poll"))
        .stdout(contains("| 128 B | epoll |"))
        .stdout(contains("×"));
    report(&out, "csv", LIMIT)
        .assert()
        .success()
        .stdout(contains("ratio_median"))
        .stdout(contains("128,epoll,"));
    let page = report_page(&out, LIMIT);
    assert!(page.contains("<svg"), "the report has a plot");
    assert!(page.contains("ratio to poll"));

    // Another contender as the baseline, without measuring again.
    report(&out, "markdown", LIMIT)
        .args(["--baseline", "epoll"])
        .assert()
        .success()
        .stdout(contains("ratio to epoll"))
        .stdout(contains("| 128 B | poll |"));
    report(&out, "csv", LIMIT)
        .args(["--baseline", "nope"])
        .assert()
        .code(2)
        .stderr(contains("--baseline \"nope\": no such contender"))
        .stderr(contains("poll, epoll"));
}

#[test]
fn a_bad_field_is_named_with_the_file() {
    let dir = scratch!("peers", "bad");
    dry_run_text(
        &dir,
        "bad.toml",
        &TINY.replace(
            "kind = \"connlab-serve\"\nengine = \"epoll\"",
            "kind = \"nginz\"",
        ),
        LIMIT,
    )
    .code(2)
    .stderr(contains("bad.toml: contender[1].kind"));
}

#[test]
fn dry_run_lists_the_point_ids() {
    let dir = scratch!("peers", "dry");
    dry_run_text(
        &dir,
        "dry.toml",
        &TINY.replace("repetitions = 1", "repetitions = 2"),
        LIMIT,
    )
    .success()
    .stdout(contains("poll-128B-rep1"))
    .stdout(contains("epoll-128B-rep2"));
}
