//! A [`FileSet`] from a web file set's manifest, as `--manifest` and
//! `--popularity` name it.

use crate::request::FileMix;
use crate::workload::FileSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The manifest file `path` names: `path/manifest.csv` for a directory
/// (the output of `connlab webset generate`), else `path` itself.
pub fn manifest_file(path: &Path) -> PathBuf {
    if path.is_dir() {
        path.join("manifest.csv")
    } else {
        path.to_path_buf()
    }
}

impl FileSet {
    /// The files of the manifest at `path` (a file or its directory),
    /// chosen by `popularity` (`manifest`, `uniform`, `zipf`, `zipf:S`)
    /// from `seed`. Errors name the flag (`--manifest`, `--popularity`).
    pub fn open(path: &Path, popularity: &str, seed: u64) -> Result<FileSet, String> {
        let file = manifest_file(path);
        let manifest =
            connlab_webset::Manifest::read(&file).map_err(|e| format!("--manifest {e}"))?;
        let chosen: connlab_webset::Popularity = popularity
            .parse()
            .map_err(|e| format!("--popularity {e}"))?;
        let mix = FileMix::new(&manifest, chosen, seed)
            .map_err(|e| format!("--manifest {}: {e}", file.display()))?;
        Ok(FileSet {
            mix: Arc::new(mix),
            source: file.display().to_string(),
            popularity: popularity.to_string(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_manifest_names_the_flag() {
        let e = FileSet::open(Path::new("/nonexistent/manifest.csv"), "uniform", 1).unwrap_err();
        assert!(e.starts_with("--manifest "), "{e}");
        assert_eq!(
            manifest_file(Path::new("/nonexistent/x.csv")),
            PathBuf::from("/nonexistent/x.csv")
        );
        assert_eq!(
            manifest_file(Path::new("/")),
            PathBuf::from("/manifest.csv")
        );
    }
}
