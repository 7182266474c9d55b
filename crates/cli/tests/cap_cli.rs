//! `connlab cap`: a command under a CPU quota gets about its share, its exit
//! code comes through, the group is removed; bad flags exit 2. The quota
//! check needs root and a cgroup cpu controller: skipped with a message
//! without.

use connlab_testkit::{connlab_bin, read_json, require_root, skip_unless};
use std::path::Path;
use std::process::Command;

#[test]
fn a_busy_command_is_held_to_its_share() {
    require_root!("the CPU quota check");
    skip_unless!(Path::new("/sys/fs/cgroup").exists(), "needs cgroups");
    let dir = tempfile::tempdir().unwrap();
    let stats = dir.path().join("cap.json");
    let out = Command::new(connlab_bin())
        .args(["cap", "--cpu", "20%", "--name", "test", "--stats"])
        .arg(&stats)
        .args(["--", "timeout", "1", "sh", "-c", "while :; do :; done"])
        .output()
        .unwrap();
    // `timeout` exits 124 when it had to stop the loop: passed through.
    assert_eq!(out.status.code(), Some(124), "{out:?}");
    let s = read_json(&stats);
    let cpu = s["cpu_user_s"].as_f64().unwrap() + s["cpu_sys_s"].as_f64().unwrap();
    // A second of busy loop under a 20% quota: far from a whole CPU second.
    assert!(cpu < 0.6, "{s}");
    assert!(s["throttled_periods"].as_u64().unwrap() > 0, "{s}");
    assert!(
        !Path::new(s["cgroup"].as_str().unwrap()).exists(),
        "the group is removed"
    );
}

#[test]
fn bad_flags_exit_2() {
    for args in [
        vec!["cap", "--cpu", "0", "--", "true"],
        vec!["cap", "--cpu", "lots", "--", "true"],
        vec!["cap", "--cpu", "20%"],
        vec!["cap", "--cpu", "20%", "--name", "a/b", "--", "true"],
    ] {
        let out = Command::new(connlab_bin()).args(&args).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}: {out:?}");
    }
}
