//! `connlab doctor` through the real binary: it reads the machine, watches
//! the CPUs, and assesses every experiment of the shipped suite; with
//! `--json` the same findings load as JSON. The calibration (which starts
//! servers) runs with two runs only. No figure of the machine is asserted:
//! only that each is reported.

use connlab_testkit::{connlab_bin, read_json, run_bounded, workspace_root};
use std::process::Command;
use std::time::Duration;

#[test]
fn doctor_reports_the_machine_and_every_experiment() {
    let dir = tempfile::tempdir().expect("temp dir");
    let json = dir.path().join("doctor.json");
    let out = run_bounded(
        Command::new(connlab_bin())
            .current_dir(workspace_root())
            .args(["doctor", "--seconds", "300ms", "--runs", "2", "--json"])
            .arg(&json),
        Duration::from_secs(120),
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    for needle in [
        "machine",
        "open files",
        "quiet?",
        "A/A noise",
        "locality-table3",
    ] {
        assert!(stdout.contains(needle), "no {needle:?} in:\n{stdout}");
    }
    let f = read_json(&json);
    assert_eq!(f["schema"], "connlab.doctor/1");
    assert!(f["quiet"]["steal_share"].is_number(), "{f}");
    assert!(f["quiet"]["foreign_share"].is_number(), "{f}");
    assert_eq!(f["calibration"]["runs"], 2, "{f}");
    let experiments = f["experiments"].as_array().expect("experiments");
    assert!(experiments.len() >= 5, "{f}");
    for e in experiments {
        assert!(
            ["can judge", "probably cannot judge", "cannot measure"]
                .contains(&e["outlook"].as_str().unwrap_or("")),
            "{e}"
        );
    }
}

#[test]
fn a_missing_suite_is_a_usage_error() {
    let out = run_bounded(
        Command::new(connlab_bin()).args([
            "doctor",
            "--no-calibrate",
            "--suite",
            "/nonexistent.toml",
        ]),
        Duration::from_secs(30),
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("/nonexistent.toml"));
}
