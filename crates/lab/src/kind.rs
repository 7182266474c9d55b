//! Which kind of experiment a file describes: its explicit `kind` tag, checked
//! against the file's shape, or (for files written before the tag existed,
//! such as the `experiment.toml` copy in an older results directory) inferred
//! from that shape. Which parser reads a kind, and what a kind runs and
//! reports, is the kind's entry in the registry of `connlab-kinds`.

use crate::{ExperimentError, SweepFileError};
use std::fmt;
use std::path::Path;

/// The kinds of experiment file `connlab sweep` runs (and the suite file
/// `connlab reproduce` reads).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ExperimentKind {
    /// `connlab serve` on network-namespace hosts under sharded `connlab
    /// load` (the locality and polling papers): `[topology]`, `[server]`,
    /// `[matrix]`.
    Locality,
    /// Web backends behind a gateway configuration (the load-balancing
    /// paper): a locality-shaped file with a `[web]` section.
    Web,
    /// The layer-parallel protocol pipeline, in one process: `[pipeline]`.
    Pipeline,
    /// The single-IP cluster's RTT, bandwidth and contention experiments:
    /// `[rtt]`, `[bandwidth]`, `[contention]`.
    Singleip,
    /// connlab against a peer program (wrk, nginx, HAProxy): `[workload]`
    /// and `[[contender]]`.
    Peers,
    /// `connlab load` (one process or merged shards) against one pinned
    /// `connlab serve` on loopback: `[workload]` and `[placement]`.
    Loadgen,
    /// A list of experiment files per paper (`connlab reproduce`): `[[paper]]`
    /// with `experiments`.
    Suite,
}

/// Every kind, in the order the tag's error message lists them.
pub const KINDS: [ExperimentKind; 7] = [
    ExperimentKind::Locality,
    ExperimentKind::Web,
    ExperimentKind::Pipeline,
    ExperimentKind::Singleip,
    ExperimentKind::Peers,
    ExperimentKind::Loadgen,
    ExperimentKind::Suite,
];

impl ExperimentKind {
    /// The tag as written in files (`locality`, `web`, ...).
    pub fn name(self) -> &'static str {
        match self {
            ExperimentKind::Locality => "locality",
            ExperimentKind::Web => "web",
            ExperimentKind::Pipeline => "pipeline",
            ExperimentKind::Singleip => "singleip",
            ExperimentKind::Peers => "peers",
            ExperimentKind::Loadgen => "loadgen",
            ExperimentKind::Suite => "suite",
        }
    }

    /// The section whose presence marks a file of this kind, for messages.
    fn marker(self) -> &'static str {
        match self {
            ExperimentKind::Locality => "[matrix] and no [web]",
            ExperimentKind::Web => "[web]",
            ExperimentKind::Pipeline => "[pipeline]",
            ExperimentKind::Singleip => "[rtt], [bandwidth] or [contention]",
            ExperimentKind::Peers => "[[contender]]",
            ExperimentKind::Loadgen => "[workload] and [placement] without [[contender]]",
            ExperimentKind::Suite => "[[paper]] tables listing experiments",
        }
    }

    /// The kind of a file's text: its `kind` tag, which must agree with the
    /// sections the file has, or, without a tag, the kind those sections
    /// imply (a `[pipeline]` table: pipeline; a `[web]` table: web; otherwise
    /// locality), as files written before the tag existed were read. `origin`
    /// names the file in errors.
    pub fn of_text(text: &str, origin: &str) -> Result<ExperimentKind, ExperimentError> {
        let table: toml::Table =
            text.parse()
                .map_err(|e: toml::de::Error| ExperimentError::Parse {
                    origin: origin.to_string(),
                    message: e.to_string().trim_end().to_string(),
                })?;
        let bad = |message: String| ExperimentError::Invalid {
            origin: origin.to_string(),
            field: "kind".into(),
            message,
        };
        let shape = shape_of(&table);
        let tag = match table.get("kind") {
            None => return Ok(shape.unwrap_or(ExperimentKind::Locality)),
            Some(toml::Value::String(s)) => s.parse::<ExperimentKind>().map_err(bad)?,
            Some(other) => {
                return Err(bad(format!(
                    "{other}: expected a string, one of {}",
                    kind_list()
                )))
            }
        };
        match shape {
            Some(s) if s != tag => Err(bad(format!(
                "{:?}, but the file has {} (the shape of a {:?} experiment); a {:?} file has {}",
                tag.name(),
                s.marker(),
                s.name(),
                tag.name(),
                tag.marker()
            ))),
            _ => Ok(tag),
        }
    }

    /// The kind of an experiment file.
    pub fn of_file(path: &Path) -> Result<ExperimentKind, ExperimentError> {
        let text = read(path)?;
        ExperimentKind::of_text(&text, &path.display().to_string())
    }

    /// The kind of the sweep a results directory holds, from the experiment
    /// file copied into it (`DIR/experiment.toml`).
    pub fn of_dir(dir: &Path) -> Result<ExperimentKind, ExperimentError> {
        ExperimentKind::of_file(&dir.join("experiment.toml"))
    }
}

impl fmt::Display for ExperimentKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for ExperimentKind {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        KINDS
            .into_iter()
            .find(|k| k.name() == s)
            .ok_or_else(|| format!("{s:?}: expected one of {}", kind_list()))
    }
}

impl<'de> serde::Deserialize<'de> for ExperimentKind {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// The kind of `text`, which a parser of `allowed` kinds reads: an error
/// naming the `kind` field when the file is of another kind.
pub(crate) fn expect(
    text: &str,
    origin: &str,
    allowed: &[ExperimentKind],
) -> Result<ExperimentKind, ExperimentError> {
    let kind = ExperimentKind::of_text(text, origin)?;
    if allowed.contains(&kind) {
        return Ok(kind);
    }
    Err(ExperimentError::Invalid {
        origin: origin.to_string(),
        field: "kind".into(),
        message: format!(
            "{:?}: this file is read as {}",
            kind.name(),
            allowed
                .iter()
                .map(|k| format!("{:?}", k.name()))
                .collect::<Vec<_>>()
                .join(" or ")
        ),
    })
}

fn kind_list() -> String {
    KINDS.map(ExperimentKind::name).join(", ")
}

/// The kind a file's sections imply, if they imply one.
pub fn shape_of(t: &toml::Table) -> Option<ExperimentKind> {
    let has = |k: &str| t.contains_key(k);
    // A suite's `paper` is an array of tables; an experiment's is one table.
    if t.get("paper").is_some_and(toml::Value::is_array) {
        return Some(ExperimentKind::Suite);
    }
    if has("pipeline") {
        return Some(ExperimentKind::Pipeline);
    }
    if has("rtt") || has("bandwidth") || has("contention") {
        return Some(ExperimentKind::Singleip);
    }
    // `[workload]` alone is no mark: other kinds may describe one too.
    if has("contender") {
        return Some(ExperimentKind::Peers);
    }
    if has("workload") && has("placement") {
        return Some(ExperimentKind::Loadgen);
    }
    if has("web") {
        return Some(ExperimentKind::Web);
    }
    if has("matrix") {
        return Some(ExperimentKind::Locality);
    }
    None
}

fn read(path: &Path) -> Result<String, ExperimentError> {
    std::fs::read_to_string(path).map_err(|source| ExperimentError::Read {
        path: path.display().to_string(),
        source,
    })
}

impl From<SweepFileError> for ExperimentError {
    fn from(e: SweepFileError) -> ExperimentError {
        match e {
            SweepFileError::Read { path, source } => ExperimentError::Read { path, source },
            SweepFileError::Field {
                origin,
                field,
                message,
            } => ExperimentError::Invalid {
                origin,
                field,
                message,
            },
            SweepFileError::Syntax { origin, message } => {
                ExperimentError::Parse { origin, message }
            }
        }
    }
}

/// Whether two experiment texts ask for the same measurements: equal once
/// comments, layout, `title`, `description`, `kind` and the `[paper]` data are
/// set aside, so a results directory resumes when only the words or the
/// paper's values around the measurement changed (or the `kind` tag was
/// added to an older file). Text that is not TOML compares as written.
pub fn same_measurement(old: &str, new: &str) -> bool {
    let strip = |text: &str| {
        text.parse::<toml::Table>().ok().map(|mut t| {
            for key in ["title", "description", "kind", "paper", "validity"] {
                t.remove(key);
            }
            t
        })
    };
    match (strip(old), strip(new)) {
        (Some(a), Some(b)) => a == b,
        _ => old == new,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LOCALITY: &str = r#"
name = "t"
title = "T"
[topology]
client_hosts = 2
[server]
engines = ["epoll"]
[matrix]
connections = [10]
active_ratios = [1]
rates = [100]
request_size = 128
response_size = 128
duration = "1s"
"#;

    fn dir() -> std::path::PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../experiments")
    }

    #[test]
    fn every_shipped_file_has_a_tag_that_fits_its_shape() {
        let mut n = 0;
        for entry in std::fs::read_dir(dir()).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_none_or(|e| e != "toml") {
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap();
            let table: toml::Table = text.parse().unwrap();
            let tag = table["kind"].as_str().unwrap().to_string();
            let kind = ExperimentKind::of_file(&path).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(kind.name(), tag, "{}", path.display());
            // Without the tag, the file is read as the same kind (older
            // results directories hold untagged copies).
            let untagged: String = text
                .lines()
                .filter(|l| !l.starts_with("kind ="))
                .map(|l| format!("{l}\n"))
                .collect();
            assert_eq!(
                ExperimentKind::of_text(&untagged, "x").unwrap(),
                kind,
                "{}",
                path.display()
            );
            n += 1;
        }
        assert!(n >= 10);
    }

    #[test]
    fn a_missing_tag_is_inferred_the_old_way() {
        assert_eq!(
            ExperimentKind::of_text(LOCALITY, "t.toml").unwrap(),
            ExperimentKind::Locality
        );
        let web = format!("{LOCALITY}[web]\nbackends = 2\n");
        assert_eq!(
            ExperimentKind::of_text(&web, "t.toml").unwrap(),
            ExperimentKind::Web
        );
        let pipeline = "name = \"p\"\ntitle = \"P\"\n[pipeline]\nlayers = [1]\n";
        assert_eq!(
            ExperimentKind::of_text(pipeline, "t.toml").unwrap(),
            ExperimentKind::Pipeline
        );
    }

    #[test]
    fn a_contradicting_tag_names_the_field_and_the_file() {
        let text = format!("kind = \"pipeline\"\n{LOCALITY}");
        let err = ExperimentKind::of_text(&text, "t3.toml")
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("t3.toml: kind: "), "{err}");
        assert!(err.contains("[pipeline]"), "{err}");
        let text = format!("kind = \"locality\"\n{LOCALITY}[web]\nbackends = 2\n");
        let err = ExperimentKind::of_text(&text, "w.toml")
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("w.toml: kind: "), "{err}");
        assert!(err.contains("\"web\""), "{err}");
    }

    #[test]
    fn an_unknown_tag_lists_the_kinds() {
        let text = format!("kind = \"sweep\"\n{LOCALITY}");
        let err = ExperimentKind::of_text(&text, "t.toml")
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("t.toml: kind: \"sweep\""), "{err}");
        assert!(err.contains("locality, web, pipeline"), "{err}");
    }

    #[test]
    fn same_measurement_ignores_words_tag_and_paper() {
        let tagged = format!(
            "# a comment\nkind = \"locality\"\n{}\n[paper]\ntable = \"Table 3\"\n",
            LOCALITY.replace("title = \"T\"", "title = \"Other\"")
        );
        assert!(same_measurement(LOCALITY, &tagged));
        assert!(!same_measurement(
            LOCALITY,
            &LOCALITY.replace("rates = [100]", "rates = [200]")
        ));
        assert!(!same_measurement(
            LOCALITY,
            &LOCALITY.replace("name = \"t\"", "name = \"u\"")
        ));
    }
}
