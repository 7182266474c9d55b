//! `connlab reproduce`: a suite of one small experiment runs, writes the
//! experiment's report and an index that links it and lists its claims;
//! running it again resumes; bad suites and `--only` names exit 2 naming the
//! field. No timing is asserted.

use assert_cmd::Command;
use std::path::Path;

fn connlab() -> Command {
    connlab_testkit::connlab(std::time::Duration::from_secs(180))
}

const PIPELINE: &str = r#"
name = "pipetiny"
title = "Tiny pipeline sweep (reproduce test)"
[pipeline]
layers = [1, 2]
message_sizes = ["1KiB"]
messages = 100
modes = ["layer-parallel"]
links = ["memory:unlimited"]
[validity]
attempts = 1
"#;

fn suite(dir: &Path) -> std::path::PathBuf {
    std::fs::write(dir.join("pipetiny.toml"), PIPELINE).unwrap();
    let suite = dir.join("suite.toml");
    std::fs::write(
        &suite,
        r#"
kind = "suite"
name = "t"
title = "Test suite"
[[paper]]
id = "pipeline"
title = "Layer-parallel protocol processing"
source = "004"
experiments = ["pipetiny.toml"]
"#,
    )
    .unwrap();
    suite
}

#[test]
fn a_suite_runs_and_writes_reports_and_an_index() {
    let dir = tempfile::tempdir().unwrap();
    let suite = suite(dir.path());
    let out = dir.path().join("out");
    for _ in 0..2 {
        let o = connlab()
            .arg("reproduce")
            .arg("--suite")
            .arg(&suite)
            .arg("--out")
            .arg(&out)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    }
    assert!(out.join("pipetiny/report.html").is_file());
    assert!(out.join("pipetiny/report.csv").is_file());
    let index = std::fs::read_to_string(out.join("index.html")).unwrap();
    assert!(index.contains("href=\"pipetiny/report.html\""), "{index}");
    assert!(index.contains("Layer-parallel protocol processing"));
    assert!(out.join("index.md").is_file() && out.join("index.csv").is_file());
    // Measured time is summed over the sweep's sessions; the machine named.
    assert!(index.contains("measured in "), "{index}");
    assert!(index.contains(" CPUs, Linux "), "{index}");
    // `connlab report` renders the index again from index.json.
    let o = connlab()
        .arg("report")
        .arg(&out)
        .args(["--format", "markdown"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let md = String::from_utf8_lossy(&o.stdout);
    assert!(md.contains("Layer-parallel protocol processing"), "{md}");
    // The dry run lists the file with its estimate and a total.
    let o = connlab()
        .arg("reproduce")
        .arg("--suite")
        .arg(&suite)
        .arg("--dry-run")
        .output()
        .unwrap();
    let listed = String::from_utf8_lossy(&o.stdout);
    assert!(
        listed.contains("[1/1] pipetiny") && listed.contains(", about "),
        "{listed}"
    );
    assert!(listed.contains("1 experiment file, about "), "{listed}");
}

#[test]
fn bad_suites_and_names_exit_2_naming_the_field() {
    let dir = tempfile::tempdir().unwrap();
    let suite = suite(dir.path());
    let o = connlab()
        .args(["reproduce", "--only", "nope", "--suite"])
        .arg(&suite)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--only \"nope\""));
    let text = std::fs::read_to_string(&suite)
        .unwrap()
        .replace("pipetiny.toml", "missing.toml");
    std::fs::write(&suite, text).unwrap();
    let o = connlab()
        .args(["reproduce", "--suite"])
        .arg(&suite)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("paper[0].experiments[0]"), "{err}");
}
