//! `connlab linkem`: through the emulator a round trip takes at least the
//! configured delays (and not absurdly more), seeded loss drops about the
//! configured share, jitter keeps packets in order, the log has one line per
//! packet, `run` undoes its rules, and the namespaces are gone afterwards.
//! Bad flags exit 2. The traffic tests need root (a failure under `CI=true`
//! without it) and /dev/net/tun (skipped with a message without). All traffic stays in namespaces the tests create.

use connlab_testkit::{connlab_bin, read_json, require_root, run_bounded, skip_unless};
use std::path::Path;
use std::process::{Command, Output};
use std::time::Duration;

/// Returns from the test unless it has root (see `require_root!`) and a
/// TUN device.
macro_rules! need_root_and_tun {
    () => {
        require_root!("link emulation");
        skip_unless!(Path::new("/dev/net/tun").exists(), "needs /dev/net/tun");
    };
}

/// Runs `connlab ARGS` with a time limit.
fn connlab(args: &[&str]) -> Output {
    run_bounded(
        Command::new(connlab_bin()).args(args),
        Duration::from_secs(120),
    )
}

/// Namespaces left by a process: any `connlab-*-lk*` of a dead process,
/// which this run would have made.
fn leftover_namespaces() -> Vec<String> {
    let Ok(dir) = std::fs::read_dir("/run/netns") else {
        return Vec::new();
    };
    dir.flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| {
            n.starts_with("connlab-") && n.contains("-lk") && {
                let pid: i32 = n
                    .split('-')
                    .nth(1)
                    .and_then(|p| p.parse().ok())
                    .unwrap_or(0);
                // SAFETY: signal 0 only checks that the process exists.
                unsafe { libc::kill(pid, 0) != 0 }
            }
        })
        .collect()
}

#[test]
fn delay_loss_and_log_through_the_lab() {
    need_root_and_tun!();
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("lab.json");
    let log = dir.path().join("pkts.csv");
    let out = connlab(&[
        "linkem",
        "lab",
        "--delay",
        "2ms",
        "--loss",
        "10%",
        "--seed",
        "7",
        "--probes",
        "40",
        "--loss-datagrams",
        "3000",
        "--bulk-duration",
        "0",
        "--json",
        json.to_str().unwrap(),
        "--log",
        log.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{out:?}");
    let v = read_json(&json);
    let val = &v["validation"];
    // RTT: at least both one-way delays, and not absurdly more.
    let rtt = &val["emulated_rtt"]["result"];
    assert!(rtt["answered"].as_u64().unwrap() > 20, "{rtt}");
    let p50 = rtt["p50_us"].as_f64().unwrap();
    assert!(rtt["min_us"].as_f64().unwrap() >= 4000.0, "{rtt}");
    assert!(p50 < 4000.0 + 20_000.0, "{rtt}");
    // Loss: the seeded model drops about 10% of what it is offered (five
    // standard deviations).
    let loss = &val["loss"];
    let em = &loss["emulator"];
    let lr = &em["left_to_right"];
    let count = |v: &serde_json::Value| v.as_u64().unwrap();
    let offered = count(&lr["model"]["offered_packets"]);
    let model_drops = count(&lr["model"]["dropped_loss"]);
    let model_loss = model_drops as f64 / offered as f64;
    let sd = (0.1f64 * 0.9 / offered as f64).sqrt();
    assert!((model_loss - 0.1).abs() < 5.0 * sd, "{loss}");
    // End to end, every datagram lost is accounted for: by the model (which
    // also saw the 40 probes), or outside it when the busy host made the
    // emulator or the receiver late (the TUN queue, the receiving socket).
    let sent = count(&loss["result"]["sent"]);
    let lost = sent - count(&loss["result"]["received"]);
    let outside = count(&lr["dropped_at_tun"])
        + count(&lr["dropped_overflow"])
        + count(&loss["result"]["dropped_at_receiver"]);
    assert!(lost + 40 >= model_drops, "{loss}");
    assert!(lost <= model_drops + outside, "{loss}");
    assert_eq!(loss["result"]["reordered"].as_u64(), Some(0), "{loss}");
    // The log: a header and one line per packet the emulator saw.
    let seen = em["left_to_right"]["model"]["offered_packets"]
        .as_u64()
        .unwrap()
        + em["right_to_left"]["model"]["offered_packets"]
            .as_u64()
            .unwrap();
    let text = std::fs::read_to_string(&log).unwrap();
    let mut lines = text.lines();
    assert!(lines
        .next()
        .unwrap()
        .starts_with("direction,index,arrival_ns"));
    let lines: Vec<&str> = lines.collect();
    assert_eq!(lines.len() as u64, seen);
    assert_eq!(em["log_lines"].as_u64(), Some(seen));
    let lost = lines.iter().filter(|l| l.contains(",loss,")).count() as u64;
    // Both directions lose 10% (the echo answers too).
    let dropped = em["left_to_right"]["model"]["dropped_loss"]
        .as_u64()
        .unwrap()
        + em["right_to_left"]["model"]["dropped_loss"]
            .as_u64()
            .unwrap();
    assert_eq!(lost, dropped);
    assert!(
        leftover_namespaces().is_empty(),
        "{:?}",
        leftover_namespaces()
    );
}

#[test]
fn jitter_keeps_packets_in_order() {
    need_root_and_tun!();
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("lab.json");
    let out = connlab(&[
        "linkem",
        "lab",
        "--delay",
        "1ms",
        "--jitter",
        "900us",
        "--probes",
        "10",
        "--loss-datagrams",
        "5000",
        "--bulk-duration",
        "0",
        "--json",
        json.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{out:?}");
    let v = read_json(&json);
    let loss = &v["validation"]["loss"]["result"];
    assert_eq!(loss["received"].as_u64(), Some(5000), "{loss}");
    assert_eq!(loss["reordered"].as_u64(), Some(0), "{loss}");
    assert!(leftover_namespaces().is_empty());
}

/// A namespace the test owns, deleted on drop.
struct Ns(String);

impl Drop for Ns {
    fn drop(&mut self) {
        let _ = Command::new("ip")
            .args(["netns", "delete", &self.0])
            .status();
    }
}

fn ip(args: &[&str]) {
    let out = Command::new("ip").args(args).output().unwrap();
    assert!(out.status.success(), "ip {args:?}: {out:?}");
}

#[test]
fn run_forwards_until_its_duration_and_undoes_its_rules() {
    need_root_and_tun!();
    let ns = Ns(format!("connlab-{}-lktest-router", std::process::id()));
    ip(&["netns", "add", &ns.0]);
    ip(&[
        "-n", &ns.0, "link", "add", "a0", "type", "veth", "peer", "name", "a1",
    ]);
    ip(&[
        "-n", &ns.0, "link", "add", "b0", "type", "veth", "peer", "name", "b1",
    ]);
    let dir = tempfile::tempdir().unwrap();
    let stats = dir.path().join("stats.json");
    let out = Command::new("timeout")
        .args(["60", "ip", "netns", "exec", &ns.0])
        .arg(connlab_bin())
        .args([
            "linkem",
            "run",
            "--left",
            "a0",
            "--right",
            "b0",
            "--delay",
            "1ms",
            "--duration",
            "1s",
            "--stats",
            stats.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let s = read_json(&stats);
    assert_eq!(s["schema"], "connlab.linkem.stats/1");
    // It ran and ended by itself (no time is asserted: the --duration timer
    // starts before the emulator's own clock does).
    assert!(s["report"]["elapsed_s"].as_f64().unwrap() > 0.0);
    let rules = Command::new("ip")
        .args(["-n", &ns.0, "rule", "list"])
        .output()
        .unwrap();
    let rules = String::from_utf8_lossy(&rules.stdout);
    assert!(
        !rules.contains("7201") && !rules.contains("7202"),
        "{rules}"
    );
    let links = Command::new("ip")
        .args(["-n", &ns.0, "link", "show"])
        .output()
        .unwrap();
    assert!(!String::from_utf8_lossy(&links.stdout).contains("lk0"));
    // A missing interface is the user's error.
    let out = Command::new("ip")
        .args(["netns", "exec", &ns.0])
        .arg(connlab_bin())
        .args(["linkem", "run", "--left", "nope0", "--right", "b0"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("nope0"));
}

#[test]
fn bad_flags_exit_2() {
    for args in [
        vec![
            "linkem", "run", "--left", "a", "--right", "b", "--loss", "150%",
        ],
        vec!["linkem", "run", "--left", "a"],
        vec!["linkem", "lab", "--rate", "fast"],
        vec!["linkem", "lab", "--delay", "soon"],
        vec!["linkem", "lab", "--loss", "ge:0.1,0.2"],
        vec!["linkem", "lab", "--queue", "10", "--queue-bytes", "1KiB"],
    ] {
        let out = Command::new(connlab_bin()).args(&args).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}: {out:?}");
    }
    let help = Command::new(connlab_bin())
        .args(["linkem", "run", "--help"])
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&help.stdout).contains("--delay"));
}
