//! `manifest.csv`: one line per file, `path,size_bytes,weight`, paths
//! relative to the directory as served (`/` separated, no leading `/`).
//! Written by `connlab webset generate`, read by `connlab load --manifest`.

use serde::{Deserialize, Serialize};
use std::io::Write as _;
use std::path::{Component, Path};

/// One file of a set: one row of `manifest.csv`, its fields in column order.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ManifestEntry {
    /// Path relative to the served directory, e.g. `paper/f0001.html`.
    pub path: String,
    /// Size in bytes.
    pub size_bytes: u64,
    /// Relative popularity (any positive scale).
    pub weight: f64,
}

/// A file set's list of files.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Manifest {
    /// The files, in manifest order.
    pub entries: Vec<ManifestEntry>,
}

/// Why a manifest was refused.
#[derive(Debug, thiserror::Error)]
pub enum ManifestError {
    /// The file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The I/O error.
        source: std::io::Error,
    },
    /// A line is malformed.
    #[error("{origin}:{line}: {message}")]
    Line {
        /// The file.
        origin: String,
        /// 1-based line number.
        line: usize,
        /// What is wrong.
        message: String,
    },
    /// The manifest lists no file.
    #[error("{origin}: no files listed")]
    Empty {
        /// The file.
        origin: String,
    },
}

/// Count, smallest, largest, mean and median size of a set, in bytes.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SizeStats {
    /// Files.
    pub count: usize,
    /// Smallest size.
    pub min: u64,
    /// Largest size.
    pub max: u64,
    /// Mean size.
    pub mean: f64,
    /// Median size (the mean of the two middle sizes for an even count).
    pub median: f64,
    /// Total bytes.
    pub total: u64,
    /// Popularity-weighted mean size: the mean response size of requests.
    pub weighted_mean: f64,
}

/// The columns of `manifest.csv`, in order.
const COLUMNS: [&str; 3] = ["path", "size_bytes", "weight"];

impl Manifest {
    /// Size statistics (None for an empty set).
    pub fn stats(&self) -> Option<SizeStats> {
        if self.entries.is_empty() {
            return None;
        }
        let mut sizes: Vec<u64> = self.entries.iter().map(|e| e.size_bytes).collect();
        sizes.sort_unstable();
        let n = sizes.len();
        let total: u64 = sizes.iter().sum();
        let median = if n % 2 == 1 {
            sizes[n / 2] as f64
        } else {
            (sizes[n / 2 - 1] + sizes[n / 2]) as f64 / 2.0
        };
        let wsum: f64 = self.entries.iter().map(|e| e.weight).sum();
        let weighted_mean = self
            .entries
            .iter()
            .map(|e| e.weight * e.size_bytes as f64)
            .sum::<f64>()
            / wsum;
        Some(SizeStats {
            count: n,
            min: sizes[0],
            max: sizes[n - 1],
            mean: total as f64 / n as f64,
            median,
            total,
            weighted_mean,
        })
    }

    /// The manifest as CSV text (a header line, then one row per file).
    pub fn to_csv(&self) -> String {
        let mut w = csv::Writer::from_writer(Vec::with_capacity(32 * self.entries.len() + 32));
        // Writing rows of strings and numbers to memory cannot fail, and
        // the paths need no quoting (see `check_path`).
        for e in &self.entries {
            w.serialize(e).unwrap_or_else(|_| unreachable!());
        }
        let bytes = w.into_inner().unwrap_or_else(|_| unreachable!());
        String::from_utf8(bytes).unwrap_or_else(|_| unreachable!())
    }

    /// Parses CSV text; `origin` names it in errors.
    pub fn from_csv(text: &str, origin: &str) -> Result<Manifest, ManifestError> {
        let bad = |line: u64, message: String| ManifestError::Line {
            origin: origin.to_string(),
            line: line as usize,
            message,
        };
        let mut r = csv::ReaderBuilder::new()
            .flexible(true)
            .trim(csv::Trim::All)
            .from_reader(text.as_bytes());
        let header = r.headers().map_err(|e| bad(1, e.to_string()))?.clone();
        if header.is_empty() || header.iter().all(str::is_empty) {
            return Err(ManifestError::Empty {
                origin: origin.into(),
            });
        }
        if header.iter().ne(COLUMNS) {
            let found: Vec<&str> = header.iter().collect();
            return Err(bad(
                1,
                format!(
                    "expected the header {:?}, found {:?}",
                    COLUMNS.join(","),
                    found.join(",")
                ),
            ));
        }
        let mut entries = Vec::new();
        for record in r.records() {
            let record = record.map_err(|e| {
                let line = e.position().map_or(0, csv::Position::line);
                bad(line, e.to_string())
            })?;
            let n = record.position().map_or(0, csv::Position::line);
            if record.iter().all(str::is_empty) {
                continue;
            }
            if record.len() != COLUMNS.len() {
                return Err(bad(
                    n,
                    format!(
                        "expected 3 fields (path,size_bytes,weight), found {}",
                        record.len()
                    ),
                ));
            }
            let e: ManifestEntry = record.deserialize(Some(&header)).map_err(|e| {
                let message = match e.kind() {
                    csv::ErrorKind::Deserialize { err, .. } => {
                        let i = err.field().unwrap_or(0) as usize;
                        let column = COLUMNS.get(i).copied().unwrap_or("field");
                        let value = record.get(i).unwrap_or("");
                        format!("{column} {value:?}: {}", err.kind())
                    }
                    _ => e.to_string(),
                };
                bad(n, message)
            })?;
            check_path(&e.path).map_err(|m| bad(n, format!("path {:?}: {m}", e.path)))?;
            if !(e.weight.is_finite() && e.weight > 0.0) {
                return Err(bad(n, format!("weight {} must be positive", e.weight)));
            }
            entries.push(e);
        }
        if entries.is_empty() {
            return Err(ManifestError::Empty {
                origin: origin.into(),
            });
        }
        Ok(Manifest { entries })
    }

    /// Reads a manifest file.
    pub fn read(path: &Path) -> Result<Manifest, ManifestError> {
        let text = std::fs::read_to_string(path).map_err(|source| ManifestError::Io {
            path: path.display().to_string(),
            source,
        })?;
        Manifest::from_csv(&text, &path.display().to_string())
    }

    /// Writes every file of the set under `dir` (real files of the listed
    /// sizes, deterministic contents) and `dir/manifest.csv`.
    pub fn write_files(&self, dir: &Path) -> Result<(), ManifestError> {
        let io = |path: &Path| {
            let path = path.display().to_string();
            move |source| ManifestError::Io { path, source }
        };
        std::fs::create_dir_all(dir).map_err(io(dir))?;
        let chunk = filler();
        for e in &self.entries {
            let file = dir.join(&e.path);
            if let Some(parent) = file.parent() {
                std::fs::create_dir_all(parent).map_err(io(parent))?;
            }
            let mut f = std::io::BufWriter::new(std::fs::File::create(&file).map_err(io(&file))?);
            let mut left = e.size_bytes as usize;
            while left > 0 {
                let n = left.min(chunk.len());
                f.write_all(&chunk[..n]).map_err(io(&file))?;
                left -= n;
            }
            f.flush().map_err(io(&file))?;
        }
        let manifest = dir.join("manifest.csv");
        std::fs::write(&manifest, self.to_csv()).map_err(io(&manifest))
    }
}

/// File contents: printable, compressible only a little, the same everywhere.
fn filler() -> Vec<u8> {
    const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 \n";
    // A fixed seed: a fixed pseudo-random pattern.
    let mut rng = connlab_measure::SeededRng::new(0x9e37_79b9);
    (0..64 * 1024)
        .map(|_| ALPHABET[rng.below(ALPHABET.len() as u64) as usize])
        .collect()
}

/// A served path must stay inside the directory: relative, no `..`, no
/// empty segments, and no characters that would need escaping in a URL or
/// the CSV.
fn check_path(path: &str) -> Result<(), String> {
    if path.is_empty() {
        return Err("empty".into());
    }
    if path.starts_with('/') {
        return Err("must be relative to the served directory (no leading /)".into());
    }
    if let Some(c) = path
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '/' | '.' | '-' | '_')))
    {
        return Err(format!(
            "character {c:?} is not allowed (use A-Z a-z 0-9 / . - _)"
        ));
    }
    for c in Path::new(path).components() {
        if !matches!(c, Component::Normal(_)) {
            return Err("must not contain . or .. segments".into());
        }
    }
    if path.contains("//") || path.ends_with('/') {
        return Err("empty path segment".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Manifest {
        Manifest {
            entries: vec![
                ManifestEntry {
                    path: "a/x.html".into(),
                    size_bytes: 10,
                    weight: 1.0,
                },
                ManifestEntry {
                    path: "b.html".into(),
                    size_bytes: 30,
                    weight: 3.0,
                },
            ],
        }
    }

    #[test]
    fn round_trips_and_computes_stats() {
        let m = sample();
        let back = Manifest::from_csv(&m.to_csv(), "m.csv").unwrap();
        assert_eq!(back, m);
        let s = m.stats().unwrap();
        assert_eq!((s.count, s.min, s.max, s.total), (2, 10, 30, 40));
        assert_eq!(s.mean, 20.0);
        assert_eq!(s.median, 20.0);
        assert_eq!(s.weighted_mean, 25.0);
    }

    #[test]
    fn bad_lines_name_the_line() {
        for (text, says) in [
            ("path,size\n", ":1: expected the header"),
            (
                "path,size_bytes,weight\na.html,1\n",
                ":2: expected 3 fields",
            ),
            ("path,size_bytes,weight\na.html,x,1\n", ":2: size_bytes"),
            ("path,size_bytes,weight\na.html,1,0\n", ":2: weight 0"),
            ("path,size_bytes,weight\n../etc/passwd,1,1\n", ":2: path"),
            ("path,size_bytes,weight\n/abs,1,1\n", "no leading /"),
            ("path,size_bytes,weight\na b,1,1\n", "not allowed"),
            ("path,size_bytes,weight\n", "no files"),
        ] {
            let e = Manifest::from_csv(text, "m.csv").unwrap_err().to_string();
            assert!(e.contains(says), "{text:?}: {e}");
            assert!(e.starts_with("m.csv"), "{e}");
        }
    }

    #[test]
    fn writes_real_files_of_the_listed_sizes() {
        let dir = tempfile::tempdir().unwrap();
        sample().write_files(dir.path()).unwrap();
        assert_eq!(
            std::fs::metadata(dir.path().join("a/x.html"))
                .unwrap()
                .len(),
            10
        );
        assert_eq!(
            std::fs::metadata(dir.path().join("b.html")).unwrap().len(),
            30
        );
        let m = Manifest::read(&dir.path().join("manifest.csv")).unwrap();
        assert_eq!(m, sample());
    }

    proptest::proptest! {
        #[test]
        fn arbitrary_text_never_panics(text in ".{0,300}") {
            let _ = Manifest::from_csv(&text, "p.csv");
        }
    }
}
