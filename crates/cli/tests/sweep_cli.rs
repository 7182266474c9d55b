//! End to end: `connlab sweep` on a tiny experiment (a server host and two
//! client hosts in network namespaces), resuming, refusing bad experiment
//! files, and `connlab report` on the result. Checks counts and structure,
//! never times. Needs root for the namespaces: a failure under `CI=true` without it,
//! skipped with a message elsewhere.

use connlab_testkit::{connlab_bin, read_json, require_root, run_bounded, scratch, skip_unless};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// A fresh directory under the test target's tmpdir.
fn scratch(name: &str) -> PathBuf {
    scratch!("sweep", name)
}

/// Runs connlab with a deadline, collecting its output.
fn connlab(args: &[&str], limit: Duration) -> Output {
    run_bounded(Command::new(connlab_bin()).args(args), limit)
}

const TINY: &str = r#"
name = "tiny"
title = "Tiny sweep (test)"
[topology]
client_hosts = 2
link_rate = "100mbit"
[server]
engines = ["select", "epoll"]
[client]
start_lead = "1s"
[matrix]
connections = [20, 40]
active_ratios = ["1/2"]
rates = [200]
request_size = 128
response_size = "1KiB"
duration = "1s"
warmup = "200ms"
[paper]
table = "Table 3"
source = "test"
metric = "service_latency"
vary = "connections"
[[paper.cells]]
engine = "epoll"
connections = 20
mean_us = 123.0
[[paper.claims]]
text = "select grows"
engines = ["select"]
from = 20
to = 40
paper_ratio = 2.0
[validity]
control = "none"
attempts = 1
"#;

#[test]
fn tiny_sweep_resumes_and_reports() {
    require_root!("network namespaces");
    let dir = scratch("tiny");
    let file = dir.join("tiny.toml");
    std::fs::write(&file, TINY).unwrap();
    let out = dir.join("results");
    let (file_s, out_s) = (file.to_str().unwrap(), out.to_str().unwrap());

    let run = connlab(&["sweep", file_s, "--out", out_s], Duration::from_secs(120));
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert_eq!(run.status.code(), Some(0), "sweep failed:\n{stderr}");
    let info = read_json(&out.join("sweep.json"));
    assert_eq!(info["schema"], "connlab.sweep/1");
    assert_eq!(info["points_total"], 4);
    assert_eq!(
        info["topology"]["client_hosts"].as_array().unwrap().len(),
        2
    );
    let ids = [
        "select-c20-a1_2-r200-rep1",
        "epoll-c20-a1_2-r200-rep1",
        "select-c40-a1_2-r200-rep1",
        "epoll-c40-a1_2-r200-rep1",
    ];
    for id in ids {
        let p = read_json(&out.join("points").join(format!("{id}.json")));
        assert_eq!(p["schema"], "connlab.point/1", "{id}");
        assert_eq!(p["shards"], 2, "{id}");
        let load = &p["load"];
        assert_eq!(load["merged"]["shards"], 2, "{id}");
        let conns = p["params"]["connections"].as_u64().unwrap();
        assert_eq!(
            load["connections"]["established"].as_u64(),
            Some(conns),
            "{id}"
        );
        assert_eq!(
            load["connections"]["active"].as_u64(),
            Some(conns / 2),
            "{id}"
        );
        // 200 req/s for 1 s over both shards, every request answered.
        assert_eq!(load["requests"]["sent"], 200, "{id}");
        assert_eq!(load["requests"]["completed"], 200, "{id}");
        assert!(
            load["requests"]["errors"].as_object().unwrap().is_empty(),
            "{id}"
        );
        assert_eq!(p["server"]["engine"], p["params"]["engine"], "{id}");
        // Every point judged its own validity (its verdict depends on the
        // machine, not asserted here).
        let gates = p["validity"]["gates"].as_array().expect("validity.gates");
        assert!(
            gates.iter().any(|g| g["name"] == "completion") && p["validity"]["valid"].is_boolean(),
            "{id}: {}",
            p["validity"]
        );
        assert!(p["window_cpu"]["cpus"].is_array(), "{id}");
        assert!(p["server"]["requests"].as_u64().unwrap() >= 200, "{id}");
        // Clients reached the server over the bridge, from their own hosts.
        assert!(
            load["config"]["target"]
                .as_str()
                .unwrap()
                .starts_with("198.18.0.1:"),
            "{id}: {}",
            load["config"]["target"]
        );
    }

    // Run again: nothing left to do.
    let again = connlab(&["sweep", file_s, "--out", out_s], Duration::from_secs(60));
    let stderr = String::from_utf8_lossy(&again.stderr);
    assert_eq!(again.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("4 of 4 points already done"), "{stderr}");

    // Lose one point (as if interrupted): only that one runs again.
    std::fs::remove_file(out.join("points").join(format!("{}.json", ids[3]))).unwrap();
    let resumed = connlab(&["sweep", file_s, "--out", out_s], Duration::from_secs(60));
    let stderr = String::from_utf8_lossy(&resumed.stderr);
    assert_eq!(resumed.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("3 of 4 points already done"), "{stderr}");
    assert!(stderr.contains("1 measured now"), "{stderr}");
    assert!(out.join("points").join(format!("{}.json", ids[3])).exists());

    // Another experiment file into the same directory is refused.
    let other = dir.join("other.toml");
    std::fs::write(&other, TINY.replace("rates = [200]", "rates = [300]")).unwrap();
    let refused = connlab(
        &["sweep", other.to_str().unwrap(), "--out", out_s],
        Duration::from_secs(30),
    );
    assert_eq!(refused.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&refused.stderr).contains("different experiment file"));

    // The report: the paper's table with our cells and the paper's, plots.
    let html_path = dir.join("report.html");
    let rep = connlab(
        &["report", out_s, "-o", html_path.to_str().unwrap()],
        Duration::from_secs(60),
    );
    assert_eq!(
        rep.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&rep.stderr)
    );
    let html = std::fs::read_to_string(&html_path).unwrap();
    for needle in [
        "<!DOCTYPE html>",
        "id=\"paper-table\"",
        "id=\"claims\"",
        "id=\"environment\"",
        "id=\"points\"",
        "id=\"validity\"",
        "<svg",
        "select",
        "epoll",
        "123",
    ] {
        assert!(html.contains(needle), "report lacks {needle:?}");
    }
    render_in_chromium(&html_path);
    let md = connlab(
        &["report", out_s, "--format", "markdown"],
        Duration::from_secs(60),
    );
    assert_eq!(md.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&md.stdout).contains("| "));
    let csv = connlab(
        &["report", out_s, "--format", "csv"],
        Duration::from_secs(60),
    );
    assert_eq!(csv.status.code(), Some(0));
    let csv = String::from_utf8_lossy(&csv.stdout);
    // Long form: a row per (connection count, engine, statistic) of the
    // valid points (a busy test machine may fail some of their gates: those
    // are listed as invalid points instead), then the claim's comparisons.
    assert!(csv.starts_with("kind,"), "{csv}");
    let invalid = ids
        .iter()
        .filter(|id| {
            read_json(&out.join("points").join(format!("{id}.json")))["validity"]["valid"] == false
        })
        .count();
    assert_eq!(
        csv.lines()
            .filter(|l| l.starts_with("invalid_point,"))
            .count(),
        invalid,
        "{csv}"
    );
    if invalid == 0 {
        assert_eq!(
            csv.lines().filter(|l| l.starts_with("cell,")).count(),
            2 * 2 * 3,
            "{csv}"
        );
    }
    assert!(csv.lines().any(|l| l.starts_with("claim,")), "{csv}");
}

/// Loads the report in headless Chromium: it must load, build a DOM with the
/// tables and plots, and log no errors. Skipped without Chromium unless `CI`
/// is set (`.ci/run` installs it).
fn render_in_chromium(html: &Path) {
    let Some(browser) = ["chromium", "chromium-browser"].into_iter().find(|b| {
        Command::new(b)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success())
    }) else {
        assert!(
            std::env::var_os("CI").is_none(),
            "chromium is missing: apt-get install chromium"
        );
        eprintln!("skipped the browser check: chromium not installed");
        return;
    };
    // Output to files: a DOM larger than a pipe buffer would block chromium
    // while we wait for it.
    let dom_path = html.with_extension("dom.html");
    let log_path = html.with_extension("chromium.log");
    let mut child = Command::new(browser)
        .args([
            "--headless=new",
            "--no-sandbox",
            "--disable-gpu",
            "--enable-logging=stderr",
            "--v=0",
            "--dump-dom",
        ])
        .arg(format!("file://{}", html.display()))
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&dom_path).unwrap())
        .stderr(std::fs::File::create(&log_path).unwrap())
        .spawn()
        .expect("starting chromium");
    let deadline = Instant::now() + Duration::from_secs(90);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("chromium did not render the report within 90 s");
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let dom = std::fs::read_to_string(&dom_path).unwrap();
    let log = std::fs::read_to_string(&log_path).unwrap();
    assert!(status.success(), "chromium failed: {log}");
    for needle in [
        "id=\"paper-table\"",
        "id=\"claims\"",
        "<svg",
        "id=\"environment\"",
    ] {
        assert!(dom.contains(needle), "the rendered DOM lacks {needle}");
    }
    for line in log.lines() {
        assert!(
            !(line.contains("CONSOLE")
                || line.contains("Uncaught")
                || line.contains("Failed to load")),
            "the page logged an error: {line}"
        );
    }
}

/// The foreign_cpu gate, end to end: a busy loop pinned to the server's CPU
/// makes every point invalid, and the claim resting on them says "cannot
/// be judged here" naming the gate. Then the machine gate's sibling: a
/// sweep resumed on "another machine" (its fingerprint edited) starts a
/// new block and sets the earlier points aside instead of pooling them.
#[test]
fn a_busy_loop_on_the_server_cpu_leaves_the_claim_unjudged() {
    require_root!("network namespaces");
    if std::thread::available_parallelism().map_or(1, |n| n.get()) < 2 {
        eprintln!("skipped: needs two CPUs to pin the server apart from the client");
        return;
    }
    let dir = scratch("foreign");
    let file = dir.join("foreign.toml");
    let text = TINY
        .replace(
            "engines = [\"select\", \"epoll\"]",
            "engines = [\"select\"]\ncpu = \"1\"",
        )
        .replace("[client]", "[client]\ncpu = \"0\"")
        .replace("paper_ratio = 2.0", "paper_ratio = 2.0\nexpect_min = 0.5")
        .replace(
            "engine = \"epoll\"\nconnections = 20",
            "engine = \"select\"\nconnections = 20",
        );
    std::fs::write(&file, &text).unwrap();
    let out = dir.join("results");
    let (file_s, out_s) = (file.to_str().unwrap(), out.to_str().unwrap());
    let busy = connlab_testkit::ChildGuard::spawn(Command::new("taskset").args([
        "-c",
        "1",
        "sh",
        "-c",
        "while :; do :; done",
    ]));
    let run = connlab(&["sweep", file_s, "--out", out_s], Duration::from_secs(120));
    drop(busy);
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert_eq!(run.status.code(), Some(0), "sweep failed:\n{stderr}");
    for id in ["select-c20-a1_2-r200-rep1", "select-c40-a1_2-r200-rep1"] {
        let p = read_json(&out.join("points").join(format!("{id}.json")));
        let v = &p["validity"];
        assert_eq!(v["valid"], false, "{id}: {v}");
        let foreign = v["gates"]
            .as_array()
            .unwrap()
            .iter()
            .find(|g| g["name"] == "foreign_cpu")
            .unwrap_or_else(|| panic!("{id}: no foreign_cpu gate in {v}"));
        assert_eq!(foreign["passed"], false, "{id}: {foreign}");
        assert!(foreign["value"].as_f64().unwrap() > 0.05, "{foreign}");
        assert_eq!(v["attempts"], 1);
    }
    assert!(stderr.contains("INVALID"), "{stderr}");
    let csv = connlab(
        &["report", out_s, "--format", "csv"],
        Duration::from_secs(60),
    );
    let csv = String::from_utf8_lossy(&csv.stdout);
    let claim = csv
        .lines()
        .find(|l| l.starts_with("claim,"))
        .unwrap_or_else(|| panic!("no claim row: {csv}"));
    assert!(
        claim.contains("cannot be judged here") && claim.contains("foreign_cpu"),
        "{claim}"
    );
    assert!(
        csv.lines().any(|l| l.starts_with("invalid_point,")),
        "{csv}"
    );

    // Resumed "on another machine": a new block, the old points set aside.
    let info_path = out.join("sweep.json");
    let mut info = read_json(&info_path);
    info["blocks"][0]["fingerprint"]["cpu_model"] = "Another CPU".into();
    std::fs::write(&info_path, info.to_string()).unwrap();
    let again = connlab(&["sweep", file_s, "--out", out_s], Duration::from_secs(120));
    let stderr = String::from_utf8_lossy(&again.stderr);
    assert_eq!(again.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("resuming on another machine"), "{stderr}");
    assert!(stderr.contains("2 measured now"), "{stderr}");
    assert!(out
        .join("points/block-1/select-c20-a1_2-r200-rep1.json")
        .is_file());
    let info = read_json(&info_path);
    assert_eq!(info["blocks"].as_array().map(Vec::len), Some(2), "{info}");
    assert_eq!(info["blocks"][1]["points_set_aside"], 2);
}

#[test]
fn bad_experiment_files_exit_2_naming_the_field() {
    let dir = scratch("bad");
    for (from, to, says) in [
        ("rates = [200]", "rates = [-5]", "matrix.rates[0]"),
        (
            "engines = [\"select\", \"epoll\"]",
            "engines = [\"kqueue\"]",
            "server.engines[0]",
        ),
        ("duration = \"1s\"", "duration = 1", "duration"),
        // Issue 29: a type error names the field and the line; a CPU the
        // machine lacks fails the dry run, not every point.
        (
            "duration = \"1s\"",
            "duration = true",
            "matrix.duration: invalid type: boolean",
        ),
        (
            "[server]\n",
            "[server]\ncpu = \"4095\"\n",
            "server.cpu: CPU 4095",
        ),
    ] {
        let file = dir.join("bad.toml");
        std::fs::write(&file, TINY.replacen(from, to, 1)).unwrap();
        let out = connlab(
            &["sweep", file.to_str().unwrap(), "--dry-run"],
            Duration::from_secs(30),
        );
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{to}: {stderr}");
        assert!(stderr.contains(says), "{to} should name {says}: {stderr}");
        assert!(stderr.contains("bad.toml"), "{stderr}");
    }
    let missing = connlab(&["sweep", "/nonexistent/x.toml"], Duration::from_secs(30));
    assert_eq!(missing.status.code(), Some(2));
}

#[test]
fn dry_run_lists_the_shipped_experiments_points() {
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../experiments/locality-table3.toml");
    let out = connlab(
        &["sweep", file.to_str().unwrap(), "--quick", "--dry-run"],
        Duration::from_secs(30),
    );
    assert_eq!(out.status.code(), Some(0));
    let stdout = String::from_utf8_lossy(&out.stdout);
    // 5 engines and the A/A control (epoll again) at 3 settings.
    assert!(stdout.contains("18 points"), "{stdout}");
    assert!(stdout.contains("processes-c400-a1-r500-rep1"), "{stdout}");
    assert!(stdout.contains("epoll-c400-a1-r500-rep1-aa"), "{stdout}");
}

/// Issue 29: a pipeline or loadgen sweep replaced another experiment's
/// `experiment.toml` and added its files. Every kind now refuses a
/// directory holding another experiment's results, with one message, and
/// leaves the directory as it was.
#[test]
fn every_kind_refuses_another_experiments_results() {
    let root = connlab_testkit::workspace_root().join("experiments");
    let files = [
        ("locality", "locality-table3.toml"),
        ("web", "gateway-web.toml"),
        ("pipeline", "pipeline-tables.toml"),
        ("singleip", "singleip-saps.toml"),
        ("peers", "peers-serve-vs-nginx.toml"),
        ("loadgen", "loadgen-pacing.toml"),
    ];
    for (kind, file) in files {
        let file = root.join(file);
        // The results of another kind's experiment.
        let other = if kind == "pipeline" {
            "locality-table5.toml"
        } else {
            "pipeline-extended.toml"
        };
        let other_text = std::fs::read_to_string(root.join(other)).unwrap();
        let out = scratch(&format!("foreign-{kind}"));
        std::fs::write(out.join("experiment.toml"), &other_text).unwrap();
        let before: Vec<_> = std::fs::read_dir(&out)
            .unwrap()
            .flatten()
            .map(|e| e.file_name())
            .collect();
        let run = connlab(
            &[
                "sweep",
                file.to_str().unwrap(),
                "--out",
                out.to_str().unwrap(),
            ],
            Duration::from_secs(60),
        );
        let stderr = String::from_utf8_lossy(&run.stderr);
        assert_eq!(run.status.code(), Some(2), "[{kind}] {stderr}");
        assert!(
            stderr.contains("different experiment file"),
            "[{kind}] {stderr}"
        );
        assert_eq!(
            std::fs::read_to_string(out.join("experiment.toml")).unwrap(),
            other_text,
            "[{kind}] the other experiment's file was replaced"
        );
        let after: Vec<_> = std::fs::read_dir(&out)
            .unwrap()
            .flatten()
            .map(|e| e.file_name())
            .collect();
        assert_eq!(before, after, "[{kind}] files were added");
    }
}

#[test]
fn report_refuses_a_directory_that_is_not_a_sweep() {
    let dir = scratch("notasweep");
    let out = connlab(&["report", dir.to_str().unwrap()], Duration::from_secs(30));
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("sweep.json"));
}

const WEB: &str = r#"
name = "webtiny"
title = "Tiny web sweep (test)"
[topology]
server_host = "gw"
client_hosts = 2
[server]
engines = ["direct", "nat", "proxy", "haproxy", "proxy:1"]
protocol = "http"
[matrix]
connections = [8]
active_ratios = ["1"]
rates = [600, 1200]
request_size = 128
response_size = "10KiB"
duration = "1s"
warmup = "300ms"
[web]
backends = 2
backend_cpu = "50%"
[validity]
control = "none"
attempts = 1
"#;

/// A web experiment: nginx backends under CPU quotas behind each gateway
/// configuration; every point completes, backend CPU is measured for the
/// backends each configuration uses (one for direct and `proxy:1`), and the
/// report plots it.
#[test]
fn web_sweep_runs_backends_behind_each_gateway() {
    let tools = ["nginx", "haproxy", "nft"]
        .iter()
        .all(|t| Command::new(t).arg("-v").output().is_ok());
    require_root!("the web sweep");
    skip_unless!(tools, "needs nginx, haproxy and nft");
    let dir = scratch("web");
    let file = dir.join("web.toml");
    std::fs::write(&file, WEB).unwrap();
    let out_dir = dir.join("out");
    let out = connlab(
        &[
            "sweep",
            file.to_str().unwrap(),
            "--out",
            out_dir.to_str().unwrap(),
        ],
        Duration::from_secs(240),
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for (config, rate) in ["direct", "nat", "proxy", "haproxy", "proxy-b1"]
        .iter()
        .flat_map(|c| [(*c, 600u64), (*c, 1200)])
    {
        let path = out_dir.join(format!("points/{config}-c8-a1-r{rate}-rep1.json"));
        let p = read_json(&path);
        let completed = p["load"]["requests"]["completed"].as_u64().unwrap();
        assert!(
            completed >= rate * 9 / 10,
            "{config} {rate}: {completed} requests"
        );
        assert!(
            p["load"]["requests"]["errors"]
                .as_object()
                .unwrap()
                .is_empty(),
            "{config}: {}",
            p["load"]["requests"]["errors"]
        );
        let cpu: Vec<f64> = p["backend_cpu_share"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_f64().unwrap())
            .collect();
        let used = if matches!(config, "direct" | "proxy-b1") {
            1
        } else {
            2
        };
        assert_eq!(cpu.len(), used, "{config}: {cpu:?}");
        assert!(cpu.iter().all(|c| *c > 0.0), "{config}: {cpu:?}");
        if config == "direct" {
            assert!(p.get("gateway_cpu_share").is_none(), "no gateway process");
        } else {
            assert!(
                p["gateway_cpu_share"].as_f64().is_some(),
                "{config}: gateway CPU"
            );
        }
        assert!(p["load"]["size_classes"]
            .as_array()
            .is_some_and(|c| !c.is_empty()));
    }
    let report = dir.join("web.html");
    let out = connlab(
        &[
            "report",
            out_dir.to_str().unwrap(),
            "-o",
            report.to_str().unwrap(),
        ],
        Duration::from_secs(60),
    );
    assert!(out.status.success());
    let html = std::fs::read_to_string(&report).unwrap();
    assert!(
        html.contains("CPU per backend"),
        "the report plots backend CPU"
    );
}
