//! ARCHITECTURE.md and CONTRIBUTING.md name only paths that exist: every
//! backticked source path (`.rs`, `.md`, `.toml`, `.sh`, `.py`, or a folder
//! ending in `/`) must be a tracked file or folder. A short one
//! (`engine/uring/`, `setup.rs`) may be the tail of a longer one; a Rust file
//! under a crate's heading (`### \`crates/lab\``) is looked up in that crate
//! (or those the heading names). Paths outside the checkout (`/run/...`,
//! `shared/...`, the papers' folder) are not checked.

use std::collections::BTreeSet;
use std::process::Command;

/// Files and folders a results directory or a run writes: named in the
/// docs, never in the repository.
const WRITTEN: [&str; 4] = ["experiment.toml", "soak.md", "report.md", "points/block-N/"];

fn tracked() -> BTreeSet<String> {
    let root = connlab_testkit::workspace_root();
    let out = Command::new("git")
        .args(["ls-files", "--cached", "--others", "--exclude-standard"])
        .current_dir(&root)
        .output()
        .expect("running git ls-files");
    assert!(out.status.success(), "git ls-files failed");
    let mut paths = BTreeSet::new();
    for file in String::from_utf8_lossy(&out.stdout).lines() {
        // The file, and every folder above it with a trailing slash.
        let mut at = 0;
        while let Some(i) = file[at..].find('/') {
            at += i + 1;
            paths.insert(file[..at].to_string());
        }
        paths.insert(file.to_string());
    }
    paths
}

/// The backticked source paths of `text`, each with the crate folders of the
/// heading it appears under and its line number.
fn named_paths(text: &str) -> Vec<(Vec<String>, String, usize)> {
    let mut out = Vec::new();
    let mut crates: Vec<String> = Vec::new();
    let mut fenced = false;
    for (n, line) in text.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            continue;
        }
        if line.starts_with('#') {
            crates = line
                .split('`')
                .skip(1)
                .step_by(2)
                .filter(|p| p.starts_with("crates/"))
                .map(|p| format!("{}/", p.trim_end_matches('/')))
                .collect();
        }
        for (i, token) in line.split('`').enumerate() {
            if i % 2 == 0 {
                continue;
            }
            let source = [".rs", ".md", ".toml", ".sh", ".py", "/"]
                .iter()
                .any(|e| token.ends_with(e));
            let plain = token
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "._/-".contains(c));
            let outside = token.starts_with('/') || token.starts_with("shared/");
            if source && plain && !outside && token.len() > 2 && !WRITTEN.contains(&token) {
                out.push((crates.clone(), token.to_string(), n + 1));
            }
        }
    }
    out
}

fn exists(paths: &BTreeSet<String>, crates: &[String], token: &str) -> bool {
    let token = token.trim_start_matches("./");
    if paths.contains(token) {
        return true;
    }
    let tail = format!("/{token}");
    let in_section = |p: &String| {
        crates.is_empty() || !token.ends_with(".rs") || crates.iter().any(|k| p.starts_with(k))
    };
    paths
        .iter()
        .filter(|p| in_section(p))
        .any(|p| p.ends_with(&tail))
}

#[test]
fn the_design_documents_name_only_paths_that_exist() {
    let root = connlab_testkit::workspace_root();
    let paths = tracked();
    let mut missing = Vec::new();
    for doc in ["ARCHITECTURE.md", "CONTRIBUTING.md"] {
        let text = std::fs::read_to_string(root.join(doc)).expect("reading the document");
        let named = named_paths(&text);
        assert!(named.len() > 10, "{doc}: too few paths found");
        for (crates, token, line) in named {
            if !exists(&paths, &crates, &token) {
                missing.push(format!(
                    "{doc}:{line}: `{token}`{}",
                    if crates.is_empty() {
                        String::new()
                    } else {
                        format!(" (under {})", crates.join(", "))
                    }
                ));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "paths that do not exist:\n{}",
        missing.join("\n")
    );
}
