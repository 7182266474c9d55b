//! The results directory every point-by-point sweep writes and its report
//! reads, whatever its kind:
//!
//! ```text
//! DIR/experiment.toml     the experiment file as run
//! DIR/<info>.json         what was run, where and when (sweep.json, peers.json, ...)
//! DIR/points/<id>.json    one per finished point, written whole
//! DIR/logs/<id>/          the point's process output
//! ```
//!
//! A point file that exists is finished (it is written to a temporary name
//! and renamed), so resuming is running the points whose file is missing.

use crate::results::{write_json_whole, ResultsError};
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::path::{Path, PathBuf};

/// A results directory: its path and the name of its info file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResultsDir {
    path: PathBuf,
    info: &'static str,
}

impl ResultsDir {
    /// The directory at `path` whose info file is `info` (`sweep.json`).
    pub fn new(path: &Path, info: &'static str) -> ResultsDir {
        ResultsDir {
            path: path.to_path_buf(),
            info,
        }
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// `DIR/experiment.toml`.
    pub fn experiment_path(&self) -> PathBuf {
        self.path.join("experiment.toml")
    }

    /// `DIR/<info>`.
    pub fn info_path(&self) -> PathBuf {
        self.path.join(self.info)
    }

    /// `DIR/points/<id>.json`.
    pub fn point_path(&self, id: &str) -> PathBuf {
        self.path.join("points").join(format!("{id}.json"))
    }

    /// `DIR/logs/<id>/`.
    pub fn log_dir(&self, id: &str) -> PathBuf {
        self.path.join("logs").join(id)
    }

    /// Whether point `id` is finished.
    pub fn has_point(&self, id: &str) -> bool {
        self.point_path(id).exists()
    }

    /// Makes the directory ready for a sweep of `text`: with `fresh`, the
    /// points, logs and `extra` subdirectories of an earlier sweep are
    /// removed first; then `points/` is created and the experiment file
    /// written.
    pub fn prepare(&self, text: &str, fresh: bool, extra: &[&str]) -> Result<(), ResultsError> {
        let io = |path: &Path| {
            let path = path.display().to_string();
            move |source| ResultsError::Io { path, source }
        };
        if fresh {
            for sub in ["points", "logs"].iter().chain(extra) {
                let dir = self.path.join(sub);
                if dir.exists() {
                    std::fs::remove_dir_all(&dir).map_err(io(&dir))?;
                }
            }
        }
        let points = self.path.join("points");
        std::fs::create_dir_all(&points).map_err(io(&points))?;
        let experiment = self.experiment_path();
        connlab_os::files::write_atomic(&experiment, text).map_err(io(&experiment))
    }

    /// Reads the info file.
    pub fn read_info<T: DeserializeOwned>(&self) -> Result<T, ResultsError> {
        read_json(&self.info_path())
    }

    /// Writes the info file whole.
    pub fn write_info<T: Serialize>(&self, info: &T) -> Result<(), ResultsError> {
        write_json_whole(&self.info_path(), info, true)
    }

    /// Reads point `id`.
    pub fn read_point<T: DeserializeOwned>(&self, id: &str) -> Result<T, ResultsError> {
        read_json(&self.point_path(id))
    }

    /// Writes point `id` whole; `pretty` indents it.
    pub fn write_point<T: Serialize>(
        &self,
        id: &str,
        point: &T,
        pretty: bool,
    ) -> Result<(), ResultsError> {
        write_json_whole(&self.point_path(id), point, pretty)
    }

    /// The finished points among `ids`, in that order.
    pub fn read_points<T: DeserializeOwned>(
        &self,
        ids: impl IntoIterator<Item = String>,
    ) -> Result<Vec<T>, ResultsError> {
        ids.into_iter()
            .filter(|id| self.has_point(id))
            .map(|id| self.read_point(&id))
            .collect()
    }

    /// Every point file in `points/`, planned or not, in no set order.
    pub fn read_all_points<T: DeserializeOwned>(&self) -> Result<Vec<T>, ResultsError> {
        let dir = self.path.join("points");
        let io = |source| ResultsError::Io {
            path: dir.display().to_string(),
            source,
        };
        let entries = match std::fs::read_dir(&dir) {
            Ok(e) => e.collect::<Result<Vec<_>, _>>().map_err(io)?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            Err(e) => return Err(io(e)),
        };
        entries
            .iter()
            .map(std::fs::DirEntry::path)
            .filter(|p| p.extension().and_then(|e| e.to_str()) == Some("json"))
            .map(|p| read_json(&p))
            .collect()
    }
}

/// Refuses a record of another schema than `expected`.
pub fn check_schema(path: &Path, found: &str, expected: &str) -> Result<(), ResultsError> {
    if found == expected {
        return Ok(());
    }
    Err(ResultsError::Format {
        path: path.display().to_string(),
        message: format!("schema {found:?}, expected {expected:?}"),
    })
}

/// Reads a JSON file of a results directory; an error names the file and
/// the field at fault.
pub(crate) fn read_json<T: DeserializeOwned>(path: &Path) -> Result<T, ResultsError> {
    let text = std::fs::read_to_string(path).map_err(|source| ResultsError::Io {
        path: path.display().to_string(),
        source,
    })?;
    let mut de = serde_json::Deserializer::from_str(&text);
    serde_path_to_error::deserialize(&mut de).map_err(|e| ResultsError::Format {
        path: path.display().to_string(),
        message: match e.path().to_string().as_str() {
            "." => e.inner().to_string(),
            field => format!("{field}: {}", e.inner()),
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(serde::Serialize, serde::Deserialize, Debug, PartialEq)]
    struct P {
        id: String,
        v: u32,
    }

    #[test]
    fn points_round_trip_and_resume_in_plan_order() {
        let path = std::env::temp_dir().join(format!("connlab-results-dir-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        let dir = ResultsDir::new(&path, "sweep.json");
        dir.prepare("name = \"x\"\n", false, &[]).unwrap();
        assert!(dir.experiment_path().is_file());
        for (id, v) in [("b", 2), ("a", 1)] {
            dir.write_point(id, &P { id: id.into(), v }, false).unwrap();
        }
        let ids = ["a", "c", "b"].map(String::from);
        let read: Vec<P> = dir.read_points(ids).unwrap();
        assert_eq!(read.iter().map(|p| p.v).collect::<Vec<_>>(), [1, 2]);
        assert!(dir.has_point("a") && !dir.has_point("c"));
        assert_eq!(dir.read_all_points::<P>().unwrap().len(), 2);
        // A bad field is named with its file.
        std::fs::write(dir.point_path("c"), "{\"id\": \"c\", \"v\": \"x\"}").unwrap();
        let err = dir.read_point::<P>("c").unwrap_err().to_string();
        assert!(err.contains("c.json: v: invalid type"), "{err}");
        // --fresh starts over.
        dir.prepare("name = \"x\"\n", true, &[]).unwrap();
        assert!(!dir.has_point("a"));
        let _ = std::fs::remove_dir_all(&path);
    }
}
