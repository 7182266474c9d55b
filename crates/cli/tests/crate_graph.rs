//! The crate graph ARCHITECTURE.md documents (its `crate-graph` block) is the
//! one `cargo metadata` reports: a dependency between connlab crates that is
//! not written down there fails this test, and so does a documented edge
//! that no longer exists.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::process::Command;

type Graph = BTreeMap<String, BTreeSet<String>>;

fn root() -> PathBuf {
    connlab_testkit::workspace_root()
}

/// The short name of a connlab crate: `connlab-lab` is `lab`, the binary's
/// crate `connlab` stays `connlab`.
fn short(name: &str) -> String {
    name.strip_prefix("connlab-").unwrap_or(name).to_string()
}

/// Normal (not dev, not build) dependencies between workspace members.
fn actual() -> Graph {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .args([
            "metadata",
            "--format-version",
            "1",
            "--no-deps",
            "--offline",
        ])
        .current_dir(root())
        .output()
        .expect("running cargo metadata");
    assert!(
        out.status.success(),
        "cargo metadata: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let meta: serde_json::Value = serde_json::from_slice(&out.stdout).expect("metadata JSON");
    let packages = meta["packages"].as_array().expect("packages");
    let members: BTreeSet<String> = packages
        .iter()
        .map(|p| p["name"].as_str().expect("name").to_string())
        .collect();
    packages
        .iter()
        .map(|p| {
            let deps = p["dependencies"]
                .as_array()
                .expect("dependencies")
                .iter()
                .filter(|d| d["kind"].is_null())
                .filter_map(|d| d["name"].as_str())
                .filter(|n| members.contains(*n))
                .map(short)
                .collect();
            (short(p["name"].as_str().expect("name")), deps)
        })
        .collect()
}

/// The graph in ARCHITECTURE.md between `<!-- crate-graph -->` and
/// `<!-- /crate-graph -->`: one `crate: dep, dep` line per crate.
fn documented(text: &str) -> Result<Graph, String> {
    let start = text
        .find("<!-- crate-graph -->")
        .ok_or("ARCHITECTURE.md has no <!-- crate-graph --> block")?;
    let end = text[start..]
        .find("<!-- /crate-graph -->")
        .ok_or("the crate-graph block is not closed")?;
    let mut graph = Graph::new();
    for (i, line) in text[start..start + end].lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with("<!--") || line.starts_with("```") {
            continue;
        }
        let (name, deps) = line
            .split_once(':')
            .ok_or_else(|| format!("crate-graph line {i}: expected `crate: deps`, got {line:?}"))?;
        let deps = deps
            .split(',')
            .map(str::trim)
            .filter(|d| !d.is_empty())
            .map(str::to_string)
            .collect();
        if graph.insert(name.trim().to_string(), deps).is_some() {
            return Err(format!("crate-graph: {name} is listed twice"));
        }
    }
    Ok(graph)
}

/// What differs between the two graphs, one line per difference.
fn differences(doc: &Graph, real: &Graph) -> Vec<String> {
    let mut out = Vec::new();
    let names: BTreeSet<&String> = doc.keys().chain(real.keys()).collect();
    let empty = BTreeSet::new();
    for name in names {
        let (d, r) = (
            doc.get(name).unwrap_or(&empty),
            real.get(name).unwrap_or(&empty),
        );
        if !doc.contains_key(name) {
            out.push(format!(
                "crate {name} is not in ARCHITECTURE.md's crate graph"
            ));
        }
        if !real.contains_key(name) {
            out.push(format!(
                "ARCHITECTURE.md lists crate {name}, which the workspace lacks"
            ));
        }
        for dep in r.difference(d) {
            out.push(format!(
                "{name} -> {dep} is in Cargo.toml but not documented"
            ));
        }
        for dep in d.difference(r) {
            out.push(format!(
                "{name} -> {dep} is documented but not in Cargo.toml"
            ));
        }
    }
    out
}

#[test]
fn the_documented_crate_graph_is_the_real_one() {
    let text = std::fs::read_to_string(root().join("ARCHITECTURE.md")).expect("ARCHITECTURE.md");
    let doc = documented(&text).unwrap_or_else(|e| panic!("{e}"));
    let diff = differences(&doc, &actual());
    assert!(
        diff.is_empty(),
        "update ARCHITECTURE.md's crate graph:\n{}",
        diff.join("\n")
    );
}

#[test]
fn an_undocumented_edge_is_caught() {
    let doc = documented("<!-- crate-graph -->\n```\nlab: os\nos:\n```\n<!-- /crate-graph -->\n")
        .unwrap();
    let mut real = doc.clone();
    real.get_mut("lab").unwrap().insert("server".into());
    real.insert("server".into(), BTreeSet::new());
    let diff = differences(&doc, &real);
    assert!(
        diff.iter()
            .any(|d| d == "lab -> server is in Cargo.toml but not documented"),
        "{diff:?}"
    );
    assert!(
        diff.iter().any(|d| d.contains("crate server is not in")),
        "{diff:?}"
    );
    assert!(documented("no block").is_err());
}
