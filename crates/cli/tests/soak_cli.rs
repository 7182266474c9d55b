//! `connlab soak --quick` through the real binary: the CI version of the
//! fault soak (loopback only, about 30 s). Checks from its soak.json: no
//! process crashed, every long-lived process stayed below the memory
//! bound, every request is accounted for (completed + errored = sent) and
//! no load child hung, every scheduled fault fired; the healthy p99 factor
//! is printed, not asserted. Also: Ctrl-C writes what was measured and exits
//! 130; bad flags exit 2; the same soak passes with the gateway on
//! io_uring. Every wait has a deadline.

use connlab_testkit::{connlab_bin, read_json, ChildGuard, Lines};
use serde_json::Value;
use std::process::{Command, Stdio};
use std::time::Duration;

/// Runs `connlab args...` with a deadline; (exit code, stderr).
fn run_bounded(args: &[&str], limit: Duration) -> (i32, String) {
    let out = connlab_testkit::run_bounded(Command::new(connlab_bin()).args(args), limit);
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn quick_soak_passes_its_checks() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("soak");
    let (code, err) = run_bounded(
        &["soak", "--quick", "--out", out.to_str().unwrap()],
        Duration::from_secs(180),
    );
    eprintln!("{err}");
    let r = read_json(&out.join("soak.json"));
    assert!(out.join("soak.md").is_file());
    assert_eq!(r["schema"], "connlab.soak/1");
    let checks = &r["checks"];
    assert_eq!(checks["no_crash"], true, "{:#}", r["failures"]);
    assert_eq!(checks["memory_bounded"], true, "{:#}", r["failures"]);
    assert_eq!(checks["all_accounted"], true, "{:#}", r["failures"]);
    assert_eq!(checks["no_hang"], true, "{:#}", r["failures"]);
    assert_eq!(checks["faults_fired"], true, "{:#}", r["failures"]);
    assert_eq!(r["passed"], true, "{:#}", r["failures"]);
    assert_eq!(code, 0, "{err}");

    // Every fault of the schedule fired: two kills with their restarts, two
    // stops with their continues.
    for kind in ["kill", "restart", "stop", "cont"] {
        assert!(
            r["faults_fired"][kind].as_u64().unwrap_or(0) >= 2,
            "{kind}: {}",
            r["faults_fired"]
        );
    }
    // The killed processes came back (a second incarnation) and every process
    // was watched.
    let procs = r["processes"].as_array().unwrap();
    assert_eq!(procs.len(), 7);
    for p in procs {
        assert!(p["peak_rss_kib"].as_u64().unwrap() > 0, "{p}");
        let name = p["name"].as_str().unwrap();
        if name == "gw-backend-1" || name == "app-node-1" {
            assert_eq!(p["incarnations"], 2, "{p}");
        }
    }
    // Slowloris heads were cut off by the servers' header timeout, behind the
    // gateway and behind the single-IP front end alike.
    let timeouts = |name: &str| {
        procs
            .iter()
            .find(|p| p["name"] == name)
            .and_then(|p| p["stats"]["header_timeouts"].as_f64())
            .unwrap_or(0.0)
    };
    assert!(
        timeouts("gw-backend-1") + timeouts("gw-backend-2") > 0.0,
        "{procs:#?}"
    );
    assert!(timeouts("si-backend") > 0.0, "{procs:#?}");
    // The hostile clients ran against both front ends (garbage also against
    // the node port).
    for kind in ["slowloris", "garbage", "never_read"] {
        for target in ["gateway", "singleip"] {
            assert!(
                r["hostile"][kind]["by_target"][target]["connects"]
                    .as_u64()
                    .unwrap()
                    > 0,
                "{kind} {target}: {}",
                r["hostile"]
            );
        }
        assert!(
            r["hostile"][kind]["connects"].as_u64().unwrap() > 0,
            "{kind}: {}",
            r["hostile"]
        );
    }
    assert!(
        r["hostile"]["garbage"]["by_target"]["singleip-nodes"]["connects"]
            .as_u64()
            .unwrap()
            > 0
    );
    // Both classes carried requests in both phases, each accounted for.
    let classes = r["classes"].as_array().unwrap();
    assert_eq!(classes.len(), 2);
    for c in classes {
        for phase in ["baseline", "fault", "fault_healthy"] {
            let t = &c[phase];
            let sent = t["sent"].as_u64().unwrap();
            assert!(sent > 0, "{} {phase}: {t}", c["name"]);
            assert_eq!(
                sent,
                t["completed"].as_u64().unwrap() + t["errored"].as_u64().unwrap(),
                "{} {phase}: {t}",
                c["name"]
            );
        }
        eprintln!(
            "{}: p99 fault-free {} us, healthy {} us, factor {}",
            c["name"], c["baseline_p99_us"], c["healthy_p99_us"], c["p99_factor"]
        );
        assert!(c["p99_factor"].as_f64().is_some(), "{c}");
    }
}

#[test]
fn ctrl_c_writes_what_was_measured_and_exits_130() {
    interrupt(false, "cluster ", Duration::from_secs(2));
}

#[test]
fn ctrl_c_at_the_terminal_reaching_every_child_is_no_crash() {
    interrupt(true, "cluster ", Duration::from_secs(2));
}

#[test]
fn ctrl_c_before_the_first_kill_restarts_nothing() {
    // In segment 0 of the fault phase: nothing was killed yet, so nothing
    // is restarted (a second copy of a running server would be wrong).
    let r = interrupt(false, "faults start", Duration::from_millis(1500));
    assert_eq!(r["checks"]["faults_fired"], true, "{:#}", r["failures"]);
    assert_eq!(r["faults"].as_array().unwrap().len(), 0, "{}", r["faults"]);
    for p in r["processes"].as_array().unwrap() {
        assert_eq!(p["incarnations"], 1, "{p}");
    }
}

#[test]
fn ctrl_c_during_the_faults_brings_back_what_was_killed() {
    // Most often between the kill of segment 1 (5 s into the fault phase)
    // and its restart; whatever the moment, the checks below hold.
    let r = interrupt(false, "faults start", Duration::from_millis(5400));
    assert_eq!(r["checks"]["faults_fired"], true, "{:#}", r["failures"]);
    for p in r["processes"].as_array().unwrap() {
        // The last incarnation was running, and stopped by the soak at the end.
        let last = p["exits"].as_array().unwrap().last().unwrap().clone();
        assert_eq!(last["why"], "stopped by the soak (SIGTERM)", "{p}");
    }
}

/// Interrupts a quick soak once it printed a line containing `after`, plus
/// `delay`: SIGINT to the soak alone, or (`group`) to its whole process
/// group as a terminal's Ctrl-C does. Returns its soak.json.
fn interrupt(group: bool, after: &str, delay: Duration) -> Value {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("soak");
    let mut child = ChildGuard::spawn(
        Command::new(connlab_bin())
            .args(["soak", "--quick", "--out", out.to_str().unwrap()])
            .stdout(Stdio::null())
            .stderr(Stdio::piped()),
    );
    // Wait until the components are up (the line naming their addresses).
    let lines = Lines::read(child.child().stderr.take().unwrap());
    lines
        .wait_for(Duration::from_secs(60), |l| l.contains(after))
        .expect("connlab soak never reported its components");
    std::thread::sleep(delay);
    if group {
        child.signal_group(libc::SIGINT);
    } else {
        child.signal(libc::SIGINT);
    }
    let status = child.wait_or_kill(Duration::from_secs(60), "connlab soak after Ctrl-C");
    assert_eq!(status.code(), Some(130));
    let r = read_json(&out.join("soak.json"));
    assert_eq!(r["interrupted"], true);
    assert_eq!(r["passed"], false);
    // Servers were stopped by the soak (or by the Ctrl-C itself), cleanly.
    assert_eq!(r["checks"]["no_crash"], true, "{:#}", r["failures"]);
    assert!(
        r["classes"][0]["baseline"]["sent"].as_u64().unwrap() > 0,
        "{r}"
    );
    r
}

/// The same faults and hostile clients against the proxy's io_uring relay
/// (`--gateway-io uring`): nothing crashes, leaks or hangs, and every
/// request is accounted for.
#[test]
fn quick_soak_passes_with_the_io_uring_gateway() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("soak");
    let (code, err) = run_bounded(
        &[
            "soak",
            "--quick",
            "--gateway-io",
            "uring",
            "--out",
            out.to_str().unwrap(),
        ],
        Duration::from_secs(180),
    );
    eprintln!("{err}");
    let r = read_json(&out.join("soak.json"));
    assert_eq!(r["config"]["gateway_io"], "uring");
    for check in [
        "no_crash",
        "memory_bounded",
        "all_accounted",
        "no_hang",
        "faults_fired",
    ] {
        assert_eq!(r["checks"][check], true, "{check}: {:#}", r["failures"]);
    }
    assert_eq!(r["passed"], true, "{:#}", r["failures"]);
    assert_eq!(code, 0, "{err}");
    let gateway = r["classes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "gateway")
        .cloned()
        .unwrap();
    assert!(
        gateway["fault"]["completed"].as_u64().unwrap() > 0,
        "{gateway}"
    );
}

#[test]
fn bad_flags_exit_2() {
    for args in [
        &["soak", "--quick", "--duration", "1m"][..],
        &["soak", "--segment", "100ms"],
        &["soak", "--rate", "0"],
        &["soak", "--p99-factor", "0.5"],
        &["soak", "--duration", "5s", "--segment", "10s"],
        &["soak", "--gateway-io", "epoll"],
    ] {
        let (code, err) = run_bounded(args, Duration::from_secs(30));
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(err.contains("error"), "{args:?}: {err}");
    }
}
