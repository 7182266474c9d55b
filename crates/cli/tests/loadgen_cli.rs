//! End to end: `connlab sweep` on a tiny loadgen experiment (`connlab load`,
//! one process and two merged shards, against `connlab serve` on loopback),
//! resuming without measuring again, refusing a bad field by name, and
//! `connlab report` with the expected tables and columns. Checks structure,
//! never times.

use connlab_testkit::scratch;
use connlab_testkit::sweep::{
    dry_run_text, point as read_point, report, report_page, sweep, write_file,
};
use predicates::prelude::*;
use predicates::str::contains;
use std::time::Duration;

const TINY: &str = r#"
kind = "loadgen"
name = "tiny-loadgen"
title = "tiny loadgen sweep"
tables = ["pacing", "latency", "setup", "memory", "cpu", "shards"]
repetitions = 1

[server]
engines = ["epoll"]

[workload]
connections = [4, 8]
active_ratios = ["1/2"]
rates = [200]
duration = "1s"
warmup = "200ms"
shards = [1, 2]

# No second attempt: it would only slow the test. The machine running the
# tests is shared, so the gates that read its load (and a schedule kept to a
# tenth of the interval) are off and the outcome does not depend on it.
[validity]
attempts = 1
completion = "off"
schedule = "off"
steal = "off"
foreign_cpu = "off"
arrivals = false
stationary = false
"#;

/// Bound on one `connlab` run.
const LIMIT: Duration = Duration::from_secs(180);

#[test]
fn a_tiny_loadgen_sweep_runs_resumes_and_reports() {
    let dir = scratch!("loadgen", "tiny");
    let file = write_file(&dir, "tiny.toml", TINY);
    let out = dir.join("results");
    sweep(&file, &out, LIMIT)
        .assert()
        .success()
        .stderr(contains("epoll-4c-1of2-200rps-1sh-rep1"));
    let (one, point) = read_point(&out, "epoll-8c-1of2-200rps-2sh-rep1");
    assert_eq!(point["params"]["shards"], 2);
    assert_eq!(
        point["params"]["io"], "epoll",
        "the default client I/O path"
    );
    let client = point["commands"][1].as_array().unwrap();
    assert!(client.windows(2).any(|a| a[0] == "--io" && a[1] == "epoll"));
    assert_eq!(point["client"]["established"], 8);
    assert!(point["client"]["measured_completed"].as_u64().unwrap() > 0);
    assert!(
        point["client"]["start_skew_ms"].is_number(),
        "shards merged"
    );
    assert!(point["server"]["max_rss_kib"].as_u64().unwrap() > 0);
    assert_eq!(point["commands"].as_array().unwrap().len(), 3);
    // The point's gates: the machine alone (the others are off).
    let validity = &point["validity"];
    assert_eq!(validity["attempts"], 1);
    let gates = validity["gates"].as_array().expect("validity has gates");
    assert_eq!(gates[0]["name"], "machine", "{validity}");
    assert!(validity["valid"].is_boolean());
    // Who used the CPUs over the measured window, by role.
    let roles = point["window_cpu"]["role_cpu_s"].as_object().unwrap();
    assert!(roles.contains_key("server") && roles.contains_key("clients"));
    // One process starts at a given instant too (its window is known).
    let (_, single) = read_point(&out, "epoll-4c-1of2-200rps-1sh-rep1");
    let client = single["commands"][1].as_array().unwrap();
    assert!(client.iter().any(|a| a == "--start-at"));
    assert!(out.join("loadgen.json").exists());
    assert!(out
        .join("logs/epoll-8c-1of2-200rps-2sh-rep1/client.json")
        .exists());

    // Run again: every point is kept, nothing is measured anew.
    sweep(&file, &out, LIMIT)
        .assert()
        .success()
        .stderr(contains("4 kept from before"))
        .stderr(contains("epoll-4c-1of2-200rps-1sh-rep1 ...").not());
    assert_eq!(read_point(&out, "epoll-8c-1of2-200rps-2sh-rep1").0, one);

    // Another workload in the same directory is refused before measuring.
    let other = write_file(
        &dir,
        "other.toml",
        &TINY.replace("rates = [200]", "rates = [300]"),
    );
    sweep(&other, &out, LIMIT)
        .assert()
        .code(2)
        .stderr(contains("a different experiment"));

    report(&out, "markdown", LIMIT)
        .assert()
        .success()
        .stdout(contains("## Pacing"))
        .stdout(contains("send lag p99.9 (µs)"))
        .stdout(contains("send deviation stddev (µs)"))
        .stdout(contains("service median (µs)"))
        .stdout(contains("set-up rate (connections/s)"))
        .stdout(contains("## Memory per connection"))
        .stdout(contains("| 4 → 8 |"))
        .stdout(contains("## Shards against one process"))
        .stdout(contains("2 against 1"));
    let csv = report(&out, "csv", LIMIT)
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let csv = String::from_utf8(csv).unwrap();
    assert!(csv.starts_with(
        "table,engine,connections,active_ratio,rate,source_addrs,shards,io,metric,unit,repetitions,median,min,max,invalid,id,attempts,gates_failed\n"
    ));
    for metric in [
        "send_lag_p50_us",
        "send_lag_p99_us",
        "send_lag_p999_us",
        "send_deviation_stddev_us",
        "send_deviation_max_us",
        "setup_rate_per_s",
        "client_bytes_per_connection",
        "server_bytes_per_connection",
        "service_mean_us",
        "service_median_us",
        "service_stddev_us",
        "measured_completed_ratio",
    ] {
        assert!(
            csv.contains(&format!(",{metric},")),
            "no {metric} in\n{csv}"
        );
    }
    let page = report_page(&out, LIMIT);
    assert!(page.contains("<table>"));
    assert!(page.contains("<th>send lag p99 (µs)</th>"));
    assert!(page.contains("<h2 id=\"validity\">"));
}

#[test]
fn a_bad_field_is_named_with_the_file() {
    let dir = scratch!("loadgen", "bad");
    dry_run_text(
        &dir,
        "bad.toml",
        &TINY.replace("engines = [\"epoll\"]", "engines = [\"epol\"]"),
        LIMIT,
    )
    .code(2)
    .stderr(contains("bad.toml: server.engines[0]"));
}

#[test]
fn dry_run_lists_the_point_ids() {
    let dir = scratch!("loadgen", "dry");
    dry_run_text(
        &dir,
        "dry.toml",
        &TINY.replace("repetitions = 1", "repetitions = 2"),
        LIMIT,
    )
    .success()
    .stdout(contains("8 points"))
    .stdout(contains("epoll-4c-1of2-200rps-1sh-rep1"))
    .stdout(contains("epoll-8c-1of2-200rps-2sh-rep2"));
}

#[test]
fn the_shipped_loadgen_experiments_plan() {
    let experiments = connlab_testkit::workspace_root().join("experiments");
    for name in ["pacing", "scale", "engines", "shards"] {
        connlab_testkit::connlab(LIMIT)
            .arg("sweep")
            .arg(experiments.join(format!("loadgen-{name}.toml")))
            .args(["--dry-run", "--quick"])
            .assert()
            .success()
            .stdout(contains(format!("loadgen-{name}: ")));
    }
}
