//! `connlab pipeline` and pipeline sweeps: the named JSON fields, verified
//! delivery in both modes and under loss, the one-layer baseline, refusals
//! of bad flags, and a sweep with its report. Every run is bounded by
//! `--time-limit`; no timing is asserted.

use assert_cmd::Command;
use connlab_testkit::read_json;
use serde_json::Value;
use std::path::Path;

fn connlab() -> Command {
    connlab_testkit::connlab(std::time::Duration::from_secs(120))
}

fn run_json(dir: &Path, name: &str, flags: &[&str]) -> Value {
    let file = dir.join(name);
    let out = connlab()
        .arg("pipeline")
        .args(flags)
        .args(["--time-limit", "60s", "--json"])
        .arg(&file)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{flags:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    read_json(&file)
}

#[test]
fn a_run_reports_the_named_fields_and_its_baseline() {
    let dir = tempfile::tempdir().unwrap();
    let j = run_json(
        dir.path(),
        "lp.json",
        &[
            "--layers",
            "3",
            "--messages",
            "400",
            "--message-size",
            "1KiB",
        ],
    );
    assert_eq!(j["schema"], "connlab.pipeline/1");
    assert_eq!(j["verified"], true);
    assert_eq!(j["messages_delivered"], 400);
    for field in [
        "throughput_mbit_s",
        "relative_capacity",
        "efficiency",
        "projected_throughput_mbit_s",
        "baseline_throughput_mbit_s",
    ] {
        assert!(j[field].as_f64().is_some_and(|v| v > 0.0), "{field}: {j}");
    }
    // The bounded projection: a rate with what bounds it, or the reason
    // there is none; a projected efficiency only where it stays physical.
    let p = &j["projection"];
    assert!(
        p["mbit_s"].as_f64().is_some_and(|v| v > 0.0) && p["bound"].as_str().is_some()
            || p["unsupported"].as_str().is_some(),
        "projection: {p}"
    );
    assert!(
        j["projected_efficiency"].is_null()
            || j["projected_efficiency"]
                .as_f64()
                .is_some_and(|e| e > 0.0 && e <= 1.1),
        "{}",
        j["projected_efficiency"]
    );
    assert!(j["retransmissions"].as_u64().is_some());
    // Three layers on each side.
    assert_eq!(j["per_layer"].as_array().unwrap().len(), 6);
    let rc = j["relative_capacity"].as_f64().unwrap();
    let eff = j["efficiency"].as_f64().unwrap();
    assert!(
        (rc / 3.0 - eff).abs() < 1e-9,
        "efficiency = relative capacity / layers"
    );
    assert!(j["environment"]["cpu_count"].as_u64().is_some());
}

#[test]
fn both_modes_deliver_the_same_stream_under_loss() {
    let dir = tempfile::tempdir().unwrap();
    let common = [
        "--layers",
        "2",
        "--messages",
        "300",
        "--message-size",
        "2KiB",
        "--loss",
        "0.05",
        "--seed",
        "9",
        "--baseline",
        "100",
        "--rto",
        "5ms",
    ];
    let lp = run_json(dir.path(), "lp.json", &common);
    let mut rtc_flags = common.to_vec();
    rtc_flags.extend(["--mode", "run-to-completion"]);
    let rtc = run_json(dir.path(), "rtc.json", &rtc_flags);
    for j in [&lp, &rtc] {
        assert_eq!(j["verified"], true, "{j}");
        assert!(
            j["retransmissions"].as_u64().unwrap() > 0,
            "loss makes retransmissions"
        );
        assert_eq!(j["baseline_measured"], false);
    }
    assert_eq!(lp["stream_checksum"], rtc["stream_checksum"]);
}

#[test]
fn udp_line_delivers_verified() {
    let dir = tempfile::tempdir().unwrap();
    let j = run_json(
        dir.path(),
        "udp.json",
        &[
            "--link",
            "udp",
            "--layers",
            "2",
            "--messages",
            "300",
            "--baseline",
            "100",
        ],
    );
    assert_eq!(j["verified"], true, "{j}");
}

#[test]
fn costs_compares_the_pool_with_a_mutex() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("costs.json");
    let out = connlab()
        .args(["pipeline", "--costs", "--json"])
        .arg(&file)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let j = read_json(&file);
    assert_eq!(j["handoff"]["verified"], true);
    assert_eq!(j["pool"]["verified"], true);
    assert!(j["pool"]["ratio"].as_f64().is_some());
}

#[test]
fn bad_flags_are_refused_with_exit_2() {
    for flags in [
        &["--layers", "0"][..],
        &["--layers", "17"],
        &["--loss", "0.9"],
        &["--loss", "x"],
        &["--message-size", "4"],
        &["--window", "0"],
        &["--link", "udp", "--reorder", "0.1"],
        &["--cpu-map", "a-b"],
        &["--bandwidth", "fast"],
        &["--mode", "sideways"],
    ] {
        let out = connlab().arg("pipeline").args(flags).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{flags:?}: {out:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!err.contains("panicked"), "{flags:?}: {err}");
    }
}

const SWEEP: &str = r#"
name = "pipetiny"
title = "Tiny pipeline sweep (test)"
[pipeline]
layers = [2, 3]
message_sizes = ["1KiB"]
messages = 200
modes = ["layer-parallel", "run-to-completion"]
links = ["memory:800mbit", "memory:unlimited"]
[validity]
attempts = 1
[paper]
citation = "the paper"
link = "memory:800mbit"
messages = 200
[[paper.cells]]
table = "Table 2"
message_size = 1024
layers = 3
mbit_s = 4.3
relative_capacity = 2.80
efficiency = 0.93
[[paper.claims]]
id = "e3"
source = "text"
text = "at least 0.5 at 3 layers"
statistic = "efficiency"
layers = [3]
expect_min = 0.5
"#;

#[test]
fn a_pipeline_sweep_writes_runs_and_a_report() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("p.toml");
    std::fs::write(&file, SWEEP).unwrap();
    let out_dir = dir.path().join("out");
    let out = connlab()
        .arg("sweep")
        .arg(&file)
        .arg("--out")
        .arg(&out_dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let sweep = read_json(&out_dir.join("pipeline.json"));
    assert_eq!(sweep["schema"], "connlab.pipeline.sweep/1");
    // Layers 1 (the baseline), 2 and 3, two modes, two lines.
    let runs = sweep["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 12);
    for r in runs {
        assert_eq!(r["result"]["verified"], true, "{}", r["id"]);
        if r["params"]["layers"] != 1 {
            assert!(r["efficiency"].as_f64().is_some(), "{}", r["id"]);
        }
        // Every run checks its own validity: completion first (verified).
        let v = &r["validity"];
        assert!(v["valid"].is_boolean(), "{}: {v}", r["id"]);
        assert_eq!(v["attempts"], 1, "{}: {v}", r["id"]);
        let gates = v["gates"].as_array().unwrap();
        assert_eq!(gates[0]["name"], "completion", "{v}");
        assert_eq!(gates[0]["passed"], true, "{v}");
        assert!(gates.iter().any(|g| g["name"] == "machine"), "{v}");
        for g in gates {
            for key in ["value", "limit", "passed"] {
                assert!(!g[key].is_null(), "{key} of {g}");
            }
        }
    }
    let csv = std::fs::read_to_string(out_dir.join("runs.csv")).unwrap();
    assert_eq!(csv.lines().count(), 13, "a header and a row per run");
    let header = csv.lines().next().unwrap();
    assert!(header.ends_with(",valid,attempts,failed_gates"), "{header}");
    // Resuming keeps every run.
    let again = connlab()
        .arg("sweep")
        .arg(&file)
        .arg("--out")
        .arg(&out_dir)
        .output()
        .unwrap();
    assert!(again.status.success());
    assert!(String::from_utf8_lossy(&again.stderr).contains("12 kept"));
    let report = dir.path().join("r.html");
    let out = connlab()
        .arg("report")
        .arg(&out_dir)
        .arg("-o")
        .arg(&report)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let html = std::fs::read_to_string(&report).unwrap();
    assert!(html.contains("efficiency against layers"), "plots");
    assert!(
        html.contains("<td class=\"paper\">0.93</td>"),
        "the paper's value"
    );
    assert!(html.contains("efficiency: layer-parallel measured / paper"));
    assert!(html.contains("at least 0.5 at 3 layers"), "the claim");
    assert!(
        html.contains("Validity of the runs"),
        "the validity section"
    );
    let md = connlab()
        .arg("report")
        .arg(&out_dir)
        .args(["--format", "markdown"])
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&md.stdout).contains("| efficiency: paper |"));
}
