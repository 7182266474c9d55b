//! `connlab sweep` of single-IP experiment files (`kind = "singleip"`):
//! the shipped file parses (a dry run lists its plan), a bad field is named,
//! a report renders the paper's Table 3 beside ours from a fixture, and (as
//! root) a tiny RTT sweep runs, resumes without measuring again, and its
//! report holds the paper's values beside ours.

use connlab_lab::{
    summarise_rtt, ExpKind, LinkInfo, PlacementInfo, SingleIpPoint, SingleIpRecord, SingleIpSweep,
    SingleIpSweepInfo, System, SINGLEIP_POINT_SCHEMA, SINGLEIP_SWEEP_SCHEMA,
};
use connlab_testkit::{connlab_bin, require_root, workspace_root};
use std::path::PathBuf;
use std::process::Command;

fn shipped() -> PathBuf {
    workspace_root().join("experiments/singleip-saps.toml")
}

#[test]
fn the_shipped_file_parses_into_its_plan() {
    let out = Command::new(connlab_bin())
        .arg("sweep")
        .arg(shipped())
        .arg("--dry-run")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for id in [
        "rtt-io16k-4B-rep1",
        "rtt-haproxy-4B-rep3",
        "bandwidth-nat-100MB-rep2",
        "contention-iooff-100KB-rep1",
        "contention-nat-100MB-rep3",
    ] {
        assert!(text.contains(id), "{id} missing from:\n{text}");
    }
    let exp = connlab_lab::SingleIpExperiment::from_file(&shipped()).unwrap();
    assert_eq!(exp.systems(), System::ALL[..4].to_vec());
    assert!(exp.paper.values.iter().any(|v| v.value == 217.6));
    assert!(exp.paper.values.iter().any(|v| v.value == 255.6));
}

#[test]
fn a_bad_field_is_named_with_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let text = std::fs::read_to_string(shipped()).unwrap();
    for (from, to, needle) in [
        ("round_trips = 1000", "round_trip = 1000", "round_trip"),
        ("queue = 100\n", "queue = \"lots\"\n", "queue"),
        (
            "link_rate = \"1gbit\"",
            "link_rate = \"fast\"",
            "rtt.link_rate",
        ),
        (
            "nat_switch_queue = 40",
            "nat_switch_queue = 0",
            "nat_switch_queue",
        ),
        ("rate = \"100mbit\"", "rate = \"quick\"", "rate"),
        (
            "systems = [\"io16k\", \"iooff\", \"nat\"]",
            "systems = [\"io16k\", \"lvs\"]",
            "lvs",
        ),
    ] {
        assert!(text.contains(from), "{from}");
        let file = dir.path().join("bad.toml");
        std::fs::write(&file, text.replacen(from, to, 1)).unwrap();
        let out = Command::new(connlab_bin())
            .arg("sweep")
            .arg(&file)
            .arg("--dry-run")
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{to}: {err}");
        assert!(
            err.contains(needle) && err.contains("bad.toml"),
            "{to}: {err}"
        );
    }
}

fn record(system: System, samples: &[f64]) -> SingleIpRecord {
    let point = SingleIpPoint {
        experiment: ExpKind::Rtt,
        system,
        param: 4,
        repetition: 1,
    };
    SingleIpRecord {
        schema: SINGLEIP_POINT_SCHEMA.into(),
        id: point.id(),
        point,
        placement: PlacementInfo {
            clients: 0,
            linkem: 0,
            front: 1,
            nodes: 1,
            front_rps: 1,
        },
        link: LinkInfo {
            delay_us: 0,
            rate_bps: None,
            queue_packets: None,
            bottleneck: None,
            switch_queue_packets: None,
        },
        congestion_control: "reno".into(),
        rtt: summarise_rtt(samples),
        transfers: Vec::new(),
        contention: None,
        cpu: None,
        warnings: Vec::new(),
        finished_unix_s: 0.0,
        checked: connlab_lab::validity::Checked {
            validity: None,
            machine: None,
            window_cpu: None,
        },
    }
}

#[test]
fn a_report_from_a_fixture_sets_table_3_beside_ours() {
    let dir = tempfile::tempdir().unwrap();
    let text = std::fs::read_to_string(shipped()).unwrap();
    std::fs::write(dir.path().join("experiment.toml"), &text).unwrap();
    let info = SingleIpSweepInfo {
        schema: SINGLEIP_SWEEP_SCHEMA.into(),
        name: "singleip-saps".into(),
        quick: false,
        started_unix_s: 0.0,
        points_total: 102,
        connlab_version: "test".into(),
        environment: connlab_os::Environment::capture(),
        placement: record(System::Nat, &[1.0]).placement,
    };
    SingleIpSweep::write_info(dir.path(), &info).unwrap();
    SingleIpSweep::write_point(dir.path(), &record(System::Io16k, &[100.0, 120.0, 140.0])).unwrap();
    SingleIpSweep::write_point(dir.path(), &record(System::Nat, &[60.0, 70.0, 80.0])).unwrap();
    let out = dir.path().join("r.html");
    let st = Command::new(connlab_bin())
        .arg("report")
        .arg(dir.path())
        .arg("-o")
        .arg(&out)
        .status()
        .unwrap();
    assert!(st.success());
    let html = std::fs::read_to_string(&out).unwrap();
    for needle in [
        "217.6",
        "255.6",
        "165",
        "334",
        "0.85",
        "does not hold",
        "<svg",
    ] {
        assert!(html.contains(needle), "{needle} missing");
    }
    // ours/paper of the SAPS mean: 120 / 217.6.
    assert!(html.contains("0.55"), "ours/paper of the mean missing");
    // Points from before validity gates read, and are judged as measured.
    assert!(html.contains("Validity of the points"), "validity section");
    assert!(html.contains("No point recorded validity gates"));
    let md = Command::new(connlab_bin())
        .arg("report")
        .arg(dir.path())
        .args(["--format", "markdown"])
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&md.stdout).contains("| io16k (SAPS) | 165 |"));
}

#[test]
fn a_tiny_rtt_sweep_runs_resumes_and_reports_table_3() {
    require_root!("network namespaces");
    let dir = tempfile::tempdir().unwrap();
    let exp = dir.path().join("tiny.toml");
    std::fs::write(
        &exp,
        r#"kind = "singleip"
name = "tiny"
title = "tiny RTT sweep"
repetitions = 1
[validity]
attempts = 1
[rtt]
systems = ["io16k", "iooff"]
round_trips = 200
[[paper.values]]
source = "Table 3"
quantity = "mean"
system = "io16k"
metric = "rtt_mean_us"
value = 217.6
unit = "µs"
[[paper.values]]
source = "Table 3"
quantity = "mean"
system = "nat"
metric = "rtt_mean_us"
value = 255.6
unit = "µs"
"#,
    )
    .unwrap();
    let out = dir.path().join("out");
    let sweep = || {
        Command::new(connlab_bin())
            .arg("sweep")
            .arg(&exp)
            .arg("--out")
            .arg(&out)
            .output()
            .unwrap()
    };
    let first = sweep();
    assert!(
        first.status.success(),
        "{}",
        String::from_utf8_lossy(&first.stderr)
    );
    let points: Vec<PathBuf> = ["rtt-io16k-4B-rep1", "rtt-iooff-4B-rep1"]
        .iter()
        .map(|id| SingleIpSweep::layout(&out).point_path(id))
        .collect();
    let before: Vec<String> = points
        .iter()
        .map(|p| std::fs::read_to_string(p).unwrap())
        .collect();
    let r = SingleIpSweep::read_point(&points[0]).unwrap();
    assert_eq!(r.rtt.as_ref().unwrap().count, 200);
    // Every point records its gates and the window its probes ran in.
    let json: serde_json::Value = serde_json::from_str(&before[0]).unwrap();
    let v = &json["validity"];
    assert!(v["valid"].is_boolean(), "{json}");
    assert_eq!(v["attempts"], 1, "{v}");
    let gates: Vec<&str> = v["gates"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["name"].as_str().unwrap())
        .collect();
    assert_eq!(gates.first(), Some(&"completion"), "{v}");
    assert!(gates.contains(&"machine"), "{v}");
    for g in v["gates"].as_array().unwrap() {
        for key in ["value", "limit", "passed"] {
            assert!(!g[key].is_null(), "{key} of {g}");
        }
    }
    let completion = &v["gates"][0];
    assert_eq!(completion["value"], 1.0, "{completion}");
    assert!(
        json["window_cpu"]["role_cpu_s"]["front"].is_number(),
        "{json}"
    );
    assert_eq!((r.placement.clients, r.placement.front), (0, 1 % cpus()));
    let second = sweep();
    let err = String::from_utf8_lossy(&second.stderr);
    assert!(second.status.success(), "{err}");
    assert!(err.contains("2 already done"), "{err}");
    let after: Vec<String> = points
        .iter()
        .map(|p| std::fs::read_to_string(p).unwrap())
        .collect();
    assert_eq!(before, after, "the second run measured again");
    let html = out.join("report.html");
    let st = Command::new(connlab_bin())
        .arg("report")
        .arg(&out)
        .arg("-o")
        .arg(&html)
        .status()
        .unwrap();
    assert!(st.success());
    let html = std::fs::read_to_string(&html).unwrap();
    assert!(html.contains("217.6") && html.contains("255.6"));
    assert!(html.contains("io16k (SAPS)"));
}

fn cpus() -> u32 {
    std::thread::available_parallelism().map_or(1, |n| n.get()) as u32
}
