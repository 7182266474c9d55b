//! What the peers and loadgen sweeps share: the error of reading their
//! files, reading text, the byte counts and durations their experiment
//! files write, and writing JSON whole (their results directories are
//! [`ResultsDir`](crate::ResultsDir)s).

use serde::{Deserialize, Serialize};
use std::path::Path;
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

/// A results directory's error in the peers' and loadgen's words.
impl From<crate::ResultsError> for SweepFileError {
    fn from(e: crate::ResultsError) -> SweepFileError {
        match e {
            crate::ResultsError::Io { path, source } => SweepFileError::Read { path, source },
            crate::ResultsError::Format { path, message } => SweepFileError::Syntax {
                origin: path,
                message,
            },
            crate::ResultsError::Experiment(e) => e.into(),
        }
    }
}

/// The same error in the peers' and loadgen's words.
impl From<crate::ExperimentError> for SweepFileError {
    fn from(e: crate::ExperimentError) -> SweepFileError {
        use crate::ExperimentError as E;
        match e {
            E::Read { path, source } => SweepFileError::Read { path, source },
            E::Parse { origin, message } => SweepFileError::Syntax { origin, message },
            E::Invalid {
                origin,
                field,
                message,
            } => SweepFileError::Field {
                origin,
                field,
                message,
            },
        }
    }
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

/// A byte count in a file: a number or text such as `10KiB`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(into = "u64")]
pub struct Bytes(pub u64);

/// By hand rather than through an untagged enum, whose error ("did not
/// match any variant of untagged enum") said neither what was expected
/// nor where (issue 29).
impl<'de> Deserialize<'de> for Bytes {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visit;
        impl serde::de::Visitor<'_> for Visit {
            type Value = Bytes;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a size: a whole number of bytes or text such as \"10KiB\"")
            }
            fn visit_u64<E: serde::de::Error>(self, n: u64) -> Result<Bytes, E> {
                Ok(Bytes(n))
            }
            fn visit_i64<E: serde::de::Error>(self, n: i64) -> Result<Bytes, E> {
                u64::try_from(n)
                    .map(Bytes)
                    .map_err(|_| E::custom(format!("{n} is not a size: bytes cannot be negative")))
            }
            fn visit_str<E: serde::de::Error>(self, t: &str) -> Result<Bytes, E> {
                connlab_measure::units::parse_size(t)
                    .map(Bytes)
                    .map_err(E::custom)
            }
        }
        d.deserialize_any(Visit)
    }
}

impl From<Bytes> for u64 {
    fn from(b: Bytes) -> u64 {
        b.0
    }
}

/// A duration in a file: text such as `10s` or `500ms`, or a number of seconds.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
#[serde(into = "String")]
pub struct Span(pub Duration);

/// By hand, as [`Bytes`] is.
impl<'de> Deserialize<'de> for Span {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visit;
        impl serde::de::Visitor<'_> for Visit {
            type Value = Span;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(
                    "a duration: text such as \"10s\" or \"500ms\", or a positive number of seconds",
                )
            }
            fn visit_f64<E: serde::de::Error>(self, s: f64) -> Result<Span, E> {
                if s.is_finite() && s > 0.0 {
                    Ok(Span(Duration::from_secs_f64(s)))
                } else {
                    Err(E::custom(format!(
                        "{s} is not a positive number of seconds"
                    )))
                }
            }
            fn visit_i64<E: serde::de::Error>(self, n: i64) -> Result<Span, E> {
                self.visit_f64(n as f64)
            }
            fn visit_u64<E: serde::de::Error>(self, n: u64) -> Result<Span, E> {
                self.visit_f64(n as f64)
            }
            fn visit_str<E: serde::de::Error>(self, t: &str) -> Result<Span, E> {
                connlab_measure::units::parse_duration(t)
                    .map(Span)
                    .map_err(E::custom)
            }
        }
        d.deserialize_any(Visit)
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
