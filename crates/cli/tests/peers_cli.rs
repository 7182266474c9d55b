//! End to end: `connlab sweep` on a tiny peers experiment (two connlab serve
//! engines driven by `connlab load` on loopback, so no nginx or wrk is
//! needed), resuming without measuring again, refusing a bad field by name,
//! and `connlab report` showing the ratio to the baseline (the file's, or one
//! named with `--baseline`); with `profile = true`, a perf profile of the
//! measured role per contender and body size. Checks structure,
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

# No A/A control and no second attempt: they would only slow the test. The
# machine running the tests is shared, so the gates that read its load are
# off and the outcome does not depend on it.
[validity]
control = "none"
attempts = 1
steal = "off"
foreign_cpu = "off"
stationary = false
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
    // The point's gates: completion and the machine (the others are off).
    let validity = &point["validity"];
    assert_eq!(validity["attempts"], 1);
    let gates: Vec<&str> = validity["gates"]
        .as_array()
        .expect("validity has gates")
        .iter()
        .map(|g| g["name"].as_str().unwrap())
        .collect();
    assert_eq!(gates, ["completion", "machine"], "{validity}");
    assert!(validity["gates"][0]["value"].is_number());
    assert!(validity["valid"].is_boolean());
    // Who used the CPUs over the client's run, by role.
    let roles = point["window_cpu"]["role_cpu_s"].as_object().unwrap();
    assert!(roles.contains_key("server") && roles.contains_key("client"));
    assert!(point["machine"]["cpu_count"].as_u64().unwrap() > 0);

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
    .stdout(contains("epoll-128B-rep2"))
    .stdout(contains("-aa").not())
    .stdout(contains("profile").not());
    // By default the first baseline is measured twice per repetition, last.
    dry_run_text(
        &dir,
        "control.toml",
        &TINY.replace("control = \"none\"\n", ""),
        LIMIT,
    )
    .success()
    .stdout(contains("3 points"))
    .stdout(contains("epoll-128B-rep1\n  poll-128B-rep1-aa\n"));
    // With profiles: one unmeasured run per contender and body size, last.
    let file = write_file(&dir, "dry.toml", TINY);
    connlab_testkit::sweep::dry_run(&file, LIMIT)
        .arg("--profile")
        .assert()
        .success()
        .stdout(contains("2 points and 2 unmeasured profile runs"))
        .stdout(contains("  profile epoll-128B\n"));
}

/// Whether perf can record other processes here (root, or a permissive
/// `kernel.perf_event_paranoid`); `.ci/run` installs it (linux-perf).
fn perf_records() -> bool {
    let runs = std::process::Command::new("perf")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    let paranoid = std::fs::read_to_string("/proc/sys/kernel/perf_event_paranoid")
        .ok()
        .and_then(|s| s.trim().parse::<i32>().ok());
    runs && (connlab_testkit::is_root() || paranoid.is_some_and(|p| p <= 1))
}

#[test]
fn profile_true_records_a_kernel_profile_per_contender_and_size() {
    connlab_testkit::skip_unless!(perf_records(), "needs perf allowed to record (linux-perf)");
    let dir = scratch!("peers", "profile");
    let text = TINY.replace("repetitions = 1", "repetitions = 1\nprofile = true")
        + "\n[quick]\nduration = \"2s\"\n";
    let file = write_file(&dir, "profile.toml", &text);
    let out = dir.join("results");
    sweep(&file, &out, LIMIT)
        .arg("--quick")
        .assert()
        .success()
        .stderr(contains("profile poll-128B:"));
    for id in ["poll-128B", "epoll-128B"] {
        assert!(out.join(format!("points/{id}-rep1.json")).is_file());
        assert!(out.join(format!("profiles/{id}.perf.data")).is_file());
        let report = out.join(format!("profiles/{id}.report.txt"));
        let text = std::fs::read_to_string(&report)
            .unwrap_or_else(|e| panic!("{}: {e}", report.display()));
        // `  12.34%  0.10%  [k] tcp_sendmsg`: a kernel symbol by name.
        let kernel = text.lines().any(|l| {
            let mut parts = l.split_whitespace().skip_while(|p| *p != "[k]").skip(1);
            parts.next().is_some_and(|sym| !sym.starts_with("0x"))
        });
        assert!(
            kernel,
            "{} names no kernel symbol:\n{text}",
            report.display()
        );
    }

    // Again: the points and the profiles are kept, nothing runs.
    sweep(&file, &out, LIMIT)
        .arg("--quick")
        .assert()
        .success()
        .stderr(contains("2 kept from before"))
        .stderr(contains("profile poll-128B").not());
}

#[test]
fn the_profile_flag_is_only_for_peers() {
    let file = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../experiments/pipeline-tables.toml");
    connlab_testkit::sweep::dry_run(&file, LIMIT)
        .arg("--profile")
        .assert()
        .code(2)
        .stderr(contains("--profile: only for peers experiments"));
}

/// Issue 33: a workers axis runs every contender at each worker count
/// (connlab serve `--workers N --cpu <first N>`), records the CPUs, the
/// per-worker connections and the latency run, runs the client as two
/// merged shards, marks the points whose
/// client shared a CPU with the server, and the page fits the curve.
#[test]
fn a_workers_axis_runs_each_count_and_the_page_fits_the_curve() {
    let dir = scratch!("peers", "scaling");
    let cpus = connlab_os::current_affinity()
        .map(|c| c.cpus().to_vec())
        .unwrap_or_default();
    let server: Vec<String> = cpus.iter().rev().take(2).map(usize::to_string).collect();
    let text = TINY
        .replace(
            "[client]",
            &format!(
                "[scaling]\nworkers = [1, 2]\nlatency_rate = 200\n\n[placement]\nserver_cpus = [{}]\nclient_cpus = [{}]\n\n[client]",
                server.join(", "),
                cpus.first().copied().unwrap_or(0)
            ),
        )
        .replace("connections = 4", "connections = 8")
        .replace(
            "kind = \"connlab-load\"",
            "kind = \"connlab-load\"\nshards = 2",
        );
    let file = write_file(&dir, "scaling.toml", &text);
    let out = dir.join("results");
    sweep(&file, &out, LIMIT)
        .assert()
        .success()
        .stderr(contains("epoll-w2-128B-rep1"));
    let (_, p) = read_point(&out, "epoll-w2-128B-rep1");
    assert_eq!(p["params"]["workers"], 2);
    assert_eq!(p["server_cpus"].as_array().unwrap().len(), 2);
    let server_cmd = p["commands"][0][1].as_array().unwrap();
    assert!(
        server_cmd
            .windows(2)
            .any(|w| w[0] == "--workers" && w[1] == "2"),
        "{server_cmd:?}"
    );
    // Both loops of the 2-worker epoll answered connections.
    let per: Vec<u64> = p["worker_connections"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap())
        .collect();
    assert_eq!(per.len(), 2, "{p}");
    assert!(p["imbalance"].as_f64().unwrap() >= 1.0);
    assert!(p["latency"]["p99_us"].as_f64().unwrap() > 0.0, "{p}");
    // The closed-loop client ran as two shards, merged.
    let shards: Vec<&serde_json::Value> = p["commands"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c[1].as_array().unwrap().iter().any(|a| a == "--shard"))
        .collect();
    assert_eq!(shards.len(), 2, "{p}");
    assert!(p["requests"].as_u64().unwrap() > 0);
    assert_eq!(p["latency"]["rate"], 200.0);
    if cpus.len() <= 2 {
        // The client's CPU is one of the server's two: marked.
        assert!(p["client_limited"].as_str().unwrap().contains("shares CPU"));
    }
    report(&out, "markdown", LIMIT)
        .assert()
        .success()
        .stdout(contains("Scaling with the server's workers"))
        .stdout(contains("σ contention"))
        .stdout(contains("| 128 B | 2 | epoll |"));
    report(&out, "csv", LIMIT)
        .assert()
        .success()
        .stdout(contains("usl_fit,128,epoll,"));
}
