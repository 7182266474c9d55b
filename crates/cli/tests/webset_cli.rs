//! `connlab webset`: the paper's file set and its statistics, real files,
//! refusals of bad input.

use assert_cmd::Command;

fn connlab() -> Command {
    connlab_testkit::connlab(std::time::Duration::from_secs(120))
}

#[test]
fn generates_the_paper_set_and_prints_its_statistics() {
    let dir = tempfile::tempdir().unwrap();
    let out = connlab()
        .args(["webset", "generate"])
        .arg(dir.path())
        .args(["--model", "paper"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8(out.stdout).unwrap();
    for line in [
        "count   861",
        "min     35 B",
        "max     729000 B",
        "mean    9600 B",
    ] {
        assert!(text.contains(line), "{line:?} missing in:\n{text}");
    }
    assert!(text.contains("median"), "{text}");
    // Real files of the listed sizes.
    let mut manifest = csv::Reader::from_path(dir.path().join("manifest.csv")).unwrap();
    assert_eq!(
        manifest.headers().unwrap(),
        vec!["path", "size_bytes", "weight"]
    );
    let mut total = 0u64;
    for row in manifest.records() {
        let row = row.unwrap();
        let size: u64 = row[1].parse().unwrap();
        assert_eq!(
            std::fs::metadata(dir.path().join(&row[0])).unwrap().len(),
            size,
            "{row:?}"
        );
        total += size;
    }
    assert_eq!(total, 861 * 9600);
    // `stats` reads it back; a second generate refuses without --force.
    let stats = connlab()
        .args(["webset", "stats"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&stats.stdout).contains("count   861"));
    let again = connlab()
        .args(["webset", "generate"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert_eq!(again.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&again.stderr).contains("--force"));
}

#[test]
fn other_models_and_bad_input() {
    let dir = tempfile::tempdir().unwrap();
    let ok = connlab()
        .args(["webset", "generate"])
        .arg(dir.path().join("s"))
        .args(["--model", "specweb96", "--directories", "1"])
        .output()
        .unwrap();
    assert!(ok.status.success(), "{ok:?}");
    assert!(String::from_utf8_lossy(&ok.stdout).contains("count   36"));
    for args in [
        vec!["--model", "zipfian"],
        vec!["--model", "surge", "--zipf", "-1"],
        vec!["--model", "surge", "--files", "0"],
        vec!["--model", "surge", "--max-size", "lots"],
    ] {
        let out = connlab()
            .args(["webset", "generate"])
            .arg(dir.path().join("x"))
            .args(&args)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}: {out:?}");
    }
    let bad = dir.path().join("bad.csv");
    std::fs::write(&bad, "path,size_bytes,weight\n../x,1,1\n").unwrap();
    let out = connlab()
        .args(["webset", "stats"])
        .arg(&bad)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("bad.csv:2"));
}
