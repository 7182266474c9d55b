//! The built-in registry reads every shipped experiment file, tells kinds
//! apart with and without their tag, and refuses what is no sweep.

use connlab_kinds::{Registry, ReportOptions};
use std::collections::BTreeSet;
use std::path::Path;

fn experiments() -> Vec<std::path::PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../experiments");
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .collect();
    files.sort();
    files
}

#[test]
fn every_shipped_file_loads_and_every_kind_is_shipped() {
    let registry = Registry::builtin();
    let mut kinds = BTreeSet::new();
    for path in experiments() {
        let text = std::fs::read_to_string(&path).unwrap();
        let origin = path.display().to_string();
        let kind = registry.kind_of(&text, &origin).unwrap();
        let table: toml::Table = text.parse().unwrap();
        assert_eq!(table["kind"].as_str(), Some(kind.name()), "{origin}");
        // Without the tag, the sections say the same kind (older results
        // directories hold untagged copies).
        let untagged: String = text
            .lines()
            .filter(|l| !l.starts_with("kind ="))
            .map(|l| format!("{l}\n"))
            .collect();
        assert_eq!(
            registry.kind_of(&untagged, &origin).unwrap().name(),
            kind.name(),
            "{origin}"
        );
        let exp = kind.load(&text, &origin).unwrap_or_else(|e| panic!("{e}"));
        assert!(!exp.name().is_empty(), "{origin}");
        if kind.name() != "suite" {
            assert!(!exp.plan(false).is_empty(), "{origin}");
            let listing = exp.listing(true, false, Path::new("/tmp/x")).unwrap();
            assert!(listing.head.starts_with(exp.name()), "{}", listing.head);
        }
        kinds.insert(kind.name());
    }
    let all: BTreeSet<&str> = registry.names().into_iter().collect();
    assert_eq!(kinds, all);
}

#[test]
fn an_unknown_tag_lists_the_registered_kinds() {
    let registry = Registry::builtin();
    let err = registry
        .load("kind = \"sweep\"\nname = \"x\"\n", "t.toml")
        .err()
        .unwrap()
        .to_string();
    assert!(err.starts_with("t.toml: kind: \"sweep\""), "{err}");
    assert!(err.contains("locality, web, pipeline"), "{err}");
}

#[test]
fn a_tag_that_contradicts_the_sections_is_refused_by_the_kind() {
    let text = "kind = \"pipeline\"\nname = \"t\"\ntitle = \"T\"\n[matrix]\nconnections = [1]\n";
    let err = Registry::builtin()
        .load(text, "t3.toml")
        .err()
        .unwrap()
        .to_string();
    assert!(err.starts_with("t3.toml: kind: "), "{err}");
}

#[test]
fn a_suite_is_no_sweep() {
    let text = "kind = \"suite\"\nname = \"s\"\ntitle = \"S\"\n[[paper]]\nid = \"a\"\ntitle = \"A\"\nsource = \"x\"\nexperiments = [\"a.toml\"]\n";
    let exp = Registry::builtin().load(text, "s.toml").unwrap();
    assert!(exp.plan(false).is_empty());
    let err = exp.check(false).unwrap_err().to_string();
    assert!(err.contains("connlab reproduce --suite s.toml"), "{err}");
    assert!(exp.listing(false, false, Path::new("x")).is_err());
}

#[test]
fn a_directory_without_results_names_itself() {
    let dir = std::env::temp_dir().join(format!("connlab-kinds-empty-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let err = Registry::builtin()
        .open(&dir, &Default::default())
        .err()
        .unwrap();
    assert!(err.contains("no results here"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Where no kind's results are, the error names what was expected: the
/// results file of the kind the copied experiment file names, or else every
/// kind's; a reproduce index is opened and rendered again.
#[test]
fn missing_results_are_named_and_a_reproduce_index_reopens() {
    let dir = std::env::temp_dir().join(format!("connlab-missing-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let registry = Registry::builtin();
    let e = registry
        .open(&dir, &ReportOptions::default())
        .err()
        .unwrap();
    for file in [
        "sweep.json (locality, web",
        "pipeline.json (pipeline)",
        "peers.json (peers)",
        "index.json (connlab reproduce)",
    ] {
        assert!(e.contains(file), "{e}");
    }
    let pipeline = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../experiments/pipeline-tables.toml"),
    )
    .unwrap();
    std::fs::write(dir.join("experiment.toml"), pipeline).unwrap();
    let e = registry
        .open(&dir, &ReportOptions::default())
        .err()
        .unwrap();
    assert!(
        e.contains("a pipeline experiment (experiment.toml) without its pipeline.json"),
        "{e}"
    );
    std::fs::remove_file(dir.join("experiment.toml")).unwrap();
    let index = connlab_report::Index {
        title: "T".into(),
        description: String::new(),
        facts: vec![("machine".into(), "m".into())],
        papers: Vec::new(),
    };
    connlab_kinds::reproduce_index::write(&dir, &index).unwrap();
    let r = registry.open(&dir, &ReportOptions::default()).unwrap();
    assert_eq!(r.name(), "reproduce index");
    assert!(r
        .render(connlab_report::Format::MARKDOWN)
        .unwrap()
        .starts_with("# T"));
    let _ = std::fs::remove_dir_all(&dir);
}
