//! Suite files: which experiment files reproduce which paper, for `connlab
//! reproduce`. A suite names no measurement of its own; it lists experiment
//! files (paths relative to the suite file) grouped by paper, in the order the
//! index page shows them.

use serde::Deserialize;
use std::path::{Path, PathBuf};

use crate::ExperimentError;

/// The suite `connlab reproduce` runs when given none.
pub const DEFAULT_SUITE: &str = "experiments/reproduce.toml";

/// Finds the default suite when `--suite` is not given: `DEFAULT_SUITE`
/// under the working directory, then under the checkout the binary `exe`
/// was built in (it lies in `target/<profile>/` of the checkout), then
/// under the source tree this crate was compiled from. The error says, in
/// one line, every place it looked.
pub fn find_default_suite(exe: Option<&Path>) -> Result<PathBuf, String> {
    let mut places: Vec<PathBuf> = vec![PathBuf::from(DEFAULT_SUITE)];
    if let Some(exe) = exe {
        // target/release/connlab: the checkout is two levels above its folder.
        places.extend(
            exe.ancestors()
                .skip(1)
                .take(4)
                .map(|d| d.join(DEFAULT_SUITE)),
        );
    }
    // crates/lab of the source tree this binary was built from.
    places.push(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../..")
            .join(DEFAULT_SUITE),
    );
    if let Some(found) = places.iter().find(|p| p.is_file()) {
        // `crates/lab/../../experiments/...` reads better resolved.
        return Ok(if found.is_relative() {
            found.clone()
        } else {
            std::fs::canonicalize(found).unwrap_or_else(|_| found.clone())
        });
    }
    let cwd = std::env::current_dir().map_or_else(|_| ".".into(), |d| d.display().to_string());
    let mut looked: Vec<String> = vec![format!("{DEFAULT_SUITE} under {cwd}")];
    looked.extend(places.iter().skip(1).map(|p| p.display().to_string()));
    looked.dedup();
    Err(format!(
        "no suite file: looked for {}; run from the checkout or pass --suite FILE",
        looked.join(", ")
    ))
}

/// A suite file (`kind = "suite"`).
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Suite {
    /// Always `suite`: the explicit tag that tells this file from an experiment.
    pub kind: SuiteKind,
    /// Short name.
    pub name: String,
    /// Title of the index page.
    pub title: String,
    /// What the suite shows.
    #[serde(default)]
    pub description: String,
    /// The papers, in index order.
    #[serde(rename = "paper")]
    pub papers: Vec<SuitePaper>,
    /// Where the suite file lies (experiment paths are relative to it); set
    /// by [`Suite::from_file`].
    #[serde(skip)]
    pub base: PathBuf,
}

/// The tag value of a suite file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SuiteKind {
    /// A suite of experiment files.
    Suite,
}

/// One paper of a suite and the experiment files that reproduce it.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SuitePaper {
    /// Short id used in file names and anchors (`locality`).
    pub id: String,
    /// The paper's subject in a few words.
    pub title: String,
    /// Where the paper is (e.g. `shared/seeds/000_...txt`).
    pub source: String,
    /// The connlab system that reproduces it.
    #[serde(default)]
    pub system: String,
    /// Experiment files, relative to the suite file.
    pub experiments: Vec<PathBuf>,
}

impl Suite {
    /// Reads and checks a suite file: every experiment it names must exist.
    pub fn from_file(path: &Path) -> Result<Suite, ExperimentError> {
        let text = std::fs::read_to_string(path).map_err(|source| ExperimentError::Read {
            path: path.display().to_string(),
            source,
        })?;
        let origin = path.display().to_string();
        let mut suite = Suite::from_toml(&text, &origin)?;
        suite.base = path.parent().map(Path::to_path_buf).unwrap_or_default();
        for (i, p) in suite.papers.iter().enumerate() {
            for (j, e) in p.experiments.iter().enumerate() {
                let full = suite.base.join(e);
                if !full.is_file() {
                    return Err(ExperimentError::Invalid {
                        origin: origin.clone(),
                        field: format!("paper[{i}].experiments[{j}]"),
                        message: format!("{}: no such file", full.display()),
                    });
                }
            }
        }
        Ok(suite)
    }

    /// Parses and checks suite text; `origin` names it in errors. Paths are
    /// not checked (see [`Suite::from_file`]).
    pub fn from_toml(text: &str, origin: &str) -> Result<Suite, ExperimentError> {
        crate::kind::expect(text, origin, &[crate::ExperimentKind::Suite])?;
        let suite: Suite = crate::values::parse_toml(text, origin)?;
        let bad = |field: String, message: String| ExperimentError::Invalid {
            origin: origin.to_string(),
            field,
            message,
        };
        if suite.papers.is_empty() {
            return Err(bad("paper".into(), "list at least one paper".into()));
        }
        let mut ids: Vec<&str> = Vec::new();
        for (i, p) in suite.papers.iter().enumerate() {
            if p.id.is_empty()
                || !p
                    .id
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
            {
                return Err(bad(
                    format!("paper[{i}].id"),
                    format!("{:?}: use letters, digits, - and _", p.id),
                ));
            }
            if ids.contains(&p.id.as_str()) {
                return Err(bad(format!("paper[{i}].id"), format!("{:?} twice", p.id)));
            }
            ids.push(&p.id);
            if p.experiments.is_empty() {
                return Err(bad(
                    format!("paper[{i}].experiments"),
                    "list at least one experiment file".into(),
                ));
            }
        }
        Ok(suite)
    }

    /// Every experiment file of the suite, with its paper, in order.
    pub fn experiment_paths(&self) -> Vec<(&SuitePaper, PathBuf)> {
        self.papers
            .iter()
            .flat_map(|p| p.experiments.iter().map(move |e| (p, self.base.join(e))))
            .collect()
    }
}

/// The experiment's `name` field as written in its file (every experiment
/// kind has one), or the file stem when the file has none.
pub fn experiment_name(path: &Path) -> String {
    #[derive(Deserialize)]
    struct Named {
        name: Option<String>,
    }
    std::fs::read_to_string(path)
        .ok()
        .and_then(|t| toml::from_str::<toml::Table>(&t).ok())
        .and_then(|t| toml::Value::Table(t).try_into::<Named>().ok())
        .and_then(|n| n.name)
        .unwrap_or_else(|| {
            path.file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default()
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    const SUITE: &str = r#"
kind = "suite"
name = "s"
title = "S"
[[paper]]
id = "locality"
title = "Locality"
source = "000"
experiments = ["a.toml", "b.toml"]
[[paper]]
id = "pipeline"
title = "Pipeline"
source = "004"
experiments = ["c.toml"]
"#;

    /// From any directory the suite of the source tree is found; a binary
    /// in a checkout's target/<profile>/ finds that checkout's.
    #[test]
    fn the_default_suite_is_found_beside_the_binary_or_the_sources() {
        let found = find_default_suite(None).unwrap();
        assert!(
            found.ends_with(DEFAULT_SUITE) && found.is_file(),
            "{}",
            found.display()
        );
        let root = std::env::temp_dir().join(format!("connlab-suite-{}", std::process::id()));
        std::fs::create_dir_all(root.join("experiments")).unwrap();
        std::fs::write(root.join(DEFAULT_SUITE), "").unwrap();
        let exe = root.join("target/release/connlab");
        // Tests run in crates/lab, which has no experiments/ of its own.
        assert_eq!(
            find_default_suite(Some(&exe)).unwrap(),
            root.join(DEFAULT_SUITE)
        );
        let _ = std::fs::remove_dir_all(&root);
    }

    #[test]
    fn parses_and_lists_experiments_in_order() {
        let s = Suite::from_toml(SUITE, "s.toml").unwrap();
        let paths: Vec<_> = s
            .experiment_paths()
            .into_iter()
            .map(|(p, e)| (p.id.clone(), e))
            .collect();
        assert_eq!(paths.len(), 3);
        assert_eq!(paths[2], ("pipeline".into(), PathBuf::from("c.toml")));
    }

    #[test]
    fn errors_name_the_field() {
        for (from, to, says) in [
            ("id = \"pipeline\"", "id = \"locality\"", "paper[1].id"),
            ("id = \"pipeline\"", "id = \"a b\"", "paper[1].id"),
            ("[\"c.toml\"]", "[]", "paper[1].experiments"),
            ("kind = \"suite\"", "kind = \"sweep\"", "kind"),
        ] {
            let err = Suite::from_toml(&SUITE.replace(from, to), "s.toml")
                .unwrap_err()
                .to_string();
            assert!(err.starts_with("s.toml"), "{err}");
            assert!(err.contains(says), "{to}: {err}");
        }
    }

    #[test]
    fn the_shipped_suite_names_existing_files() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../..")
            .join(DEFAULT_SUITE);
        let s = Suite::from_file(&path).unwrap_or_else(|e| panic!("{e}"));
        assert!(s.papers.len() >= 4);
        for (_, e) in s.experiment_paths() {
            assert!(!experiment_name(&e).is_empty());
        }
    }
}
