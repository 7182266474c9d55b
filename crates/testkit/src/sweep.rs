//! `connlab sweep` and `connlab report` on experiment files a test writes:
//! each call an `assert_cmd` command killed after its limit.

use std::path::{Path, PathBuf};
use std::time::Duration;

use assert_cmd::assert::Assert;
use assert_cmd::Command;

use crate::process::connlab;

/// Writes `text` to `dir/name` and returns the path.
pub fn write_file(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap_or_else(|e| panic!("writing {}: {e}", path.display()));
    path
}

/// `connlab sweep FILE --out OUT`.
pub fn sweep(file: &Path, out: &Path, limit: Duration) -> Command {
    let mut cmd = connlab(limit);
    cmd.arg("sweep").arg(file).arg("--out").arg(out);
    cmd
}

/// `connlab sweep FILE --dry-run`.
pub fn dry_run(file: &Path, limit: Duration) -> Command {
    let mut cmd = connlab(limit);
    cmd.arg("sweep").arg(file).arg("--dry-run");
    cmd
}

/// `connlab report OUT --format FORMAT`.
pub fn report(out: &Path, format: &str, limit: Duration) -> Command {
    let mut cmd = connlab(limit);
    cmd.arg("report").arg(out).args(["--format", format]);
    cmd
}

/// Runs `connlab report OUT -o OUT/r.html`, asserts it succeeds, and
/// returns the page.
pub fn report_page(out: &Path, limit: Duration) -> String {
    let html = out.join("r.html");
    connlab(limit)
        .arg("report")
        .arg(out)
        .arg("-o")
        .arg(&html)
        .assert()
        .success();
    std::fs::read_to_string(&html).unwrap_or_else(|e| panic!("reading {}: {e}", html.display()))
}

/// The text and the JSON of point `id` in the results folder `out`.
pub fn point(out: &Path, id: &str) -> (String, serde_json::Value) {
    let path = out.join("points").join(format!("{id}.json"));
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    let json =
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("parsing {}: {e}", path.display()));
    (text, json)
}

/// Writes `text` to `dir/name` and runs `connlab sweep <it> --dry-run`.
pub fn dry_run_text(dir: &Path, name: &str, text: &str, limit: Duration) -> Assert {
    dry_run(&write_file(dir, name, text), limit).assert()
}
