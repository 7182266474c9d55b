//! What the peers and loadgen sweeps share: the error of reading their
//! files, reading text and JSON with the failing field named, the byte
//! counts and durations their experiment files write, and the point files
//! of their results directories.

use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Why a peers or loadgen experiment file or results directory could not be
/// read ([`crate::PeersError`] and [`crate::LoadgenError`] name it).
#[derive(Debug, thiserror::Error)]
pub enum SweepFileError {
    /// The file could not be read.
    #[error("{path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// The I/O error.
        source: std::io::Error,
    },
    /// A field has the wrong type or value, or is unknown.
    #[error("{origin}: {field}: {message}")]
    Field {
        /// The file (or other origin) of the text.
        origin: String,
        /// The field at fault, as a path (`contender[1].kind`,
        /// `workload.active_ratios[1]`).
        field: String,
        /// What is wrong.
        message: String,
    },
    /// The text is not TOML or JSON at all.
    #[error("{origin}: {message}")]
    Syntax {
        /// The file.
        origin: String,
        /// The parser's message.
        message: String,
    },
}

impl SweepFileError {
    /// Names `origin` in a `(field, message)` error of a validation.
    pub(crate) fn in_field(origin: &str) -> impl Fn((String, String)) -> SweepFileError + '_ {
        move |(field, message)| SweepFileError::Field {
            origin: origin.into(),
            field,
            message,
        }
    }
}

/// The text of `path`.
pub(crate) fn read_text(path: &Path) -> Result<String, SweepFileError> {
    std::fs::read_to_string(path).map_err(|source| SweepFileError::Read {
        path: path.display().to_string(),
        source,
    })
}

/// Reads `path` as JSON; an error names the field at fault.
pub(crate) fn read_json<T: serde::de::DeserializeOwned>(path: &Path) -> Result<T, SweepFileError> {
    let origin = path.display().to_string();
    let text = read_text(path)?;
    let mut de = serde_json::Deserializer::from_str(&text);
    serde_path_to_error::deserialize(&mut de).map_err(|e| SweepFileError::Field {
        origin,
        field: e.path().to_string(),
        message: first_line(&e.inner().to_string()),
    })
}

/// The first line of `s`, trimmed.
pub(crate) fn first_line(s: &str) -> String {
    s.lines().next().unwrap_or_default().trim().to_string()
}

/// `DIR/points/<id>.json`.
pub(crate) fn point_path(dir: &Path, id: &str) -> PathBuf {
    dir.join("points").join(format!("{id}.json"))
}

/// Writes `value` as JSON to `path` whole: a temporary file, then a rename.
pub(crate) fn write_json<T: Serialize>(path: &Path, value: &T) -> std::io::Result<()> {
    crate::results::write_json_whole(path, value, true).map_err(std::io::Error::other)
}

/// A byte count in a file: a number or text such as `10KiB`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "RawSize", into = "u64")]
pub struct Bytes(pub u64);

#[derive(Deserialize)]
#[serde(untagged)]
enum RawSize {
    Number(u64),
    Text(String),
}

impl TryFrom<RawSize> for Bytes {
    type Error = String;
    fn try_from(v: RawSize) -> Result<Self, String> {
        match v {
            RawSize::Number(n) => Ok(Bytes(n)),
            RawSize::Text(t) => connlab_measure::units::parse_size(&t).map(Bytes),
        }
    }
}

impl From<Bytes> for u64 {
    fn from(b: Bytes) -> u64 {
        b.0
    }
}

/// A duration in a file: text such as `10s` or `500ms`, or a number of seconds.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "RawDuration", into = "String")]
pub struct Span(pub Duration);

#[derive(Deserialize)]
#[serde(untagged)]
enum RawDuration {
    Seconds(f64),
    Text(String),
}

impl TryFrom<RawDuration> for Span {
    type Error = String;
    fn try_from(v: RawDuration) -> Result<Self, String> {
        match v {
            RawDuration::Seconds(s) if s.is_finite() && s > 0.0 => {
                Ok(Span(Duration::from_secs_f64(s)))
            }
            RawDuration::Seconds(s) => Err(format!("{s} is not a positive number of seconds")),
            RawDuration::Text(t) => connlab_measure::units::parse_duration(&t).map(Span),
        }
    }
}

impl From<Span> for String {
    fn from(s: Span) -> String {
        let ms = s.0.as_millis();
        if ms.is_multiple_of(1000) {
            format!("{}s", ms / 1000)
        } else {
            format!("{ms}ms")
        }
    }
}
