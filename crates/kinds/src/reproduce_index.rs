//! The index `connlab reproduce` writes, as a results directory `connlab
//! report` can render again: `DIR/index.json` keeps the whole index (every
//! paper, experiment and claim row), so the page can be re-rendered in any
//! format without running or re-reading the sweeps.

use crate::Results;
use connlab_report::{ExperimentClaims, Format, Index, ReportError};
use serde::{Deserialize, Serialize};
use std::path::Path;

/// The file, in the reproduce results directory.
pub const INDEX_FILE: &str = "index.json";
/// Its version tag.
pub const INDEX_SCHEMA: &str = "connlab.reproduce.index/1";

#[derive(Serialize, Deserialize)]
struct IndexFile {
    schema: String,
    index: Index,
}

/// Whether `dir` holds a reproduce index.
pub fn holds(dir: &Path) -> bool {
    dir.join(INDEX_FILE).is_file()
}

/// Writes `DIR/index.json` whole.
pub fn write(dir: &Path, index: &Index) -> Result<(), String> {
    let file = IndexFile {
        schema: INDEX_SCHEMA.into(),
        index: index.clone(),
    };
    let text = serde_json::to_string_pretty(&file).map_err(|e| e.to_string())?;
    let path = dir.join(INDEX_FILE);
    connlab_os::files::write_atomic(&path, text + "\n")
        .map_err(|e| format!("writing {}: {e}", path.display()))
}

/// Opens `DIR/index.json` for its report.
pub fn open(dir: &Path) -> Result<Box<dyn Results>, String> {
    let path = dir.join(INDEX_FILE);
    let text = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    let file: IndexFile = serde_json::from_str(&text)
        .map_err(|e| format!("{}: not a connlab reproduce index ({e})", path.display()))?;
    if file.schema != INDEX_SCHEMA {
        return Err(format!(
            "{}: schema {:?}, expected {INDEX_SCHEMA:?}",
            path.display(),
            file.schema
        ));
    }
    Ok(Box::new(file.index))
}

impl Results for Index {
    fn name(&self) -> &str {
        "reproduce index"
    }

    fn done(&self) -> String {
        let experiments: usize = self.papers.iter().map(|p| p.experiments.len()).sum();
        format!("{} papers, {experiments} experiments", self.papers.len())
    }

    fn render(&self, format: Format) -> Result<String, ReportError> {
        Ok(Index::render(self, format))
    }

    fn claims(&self) -> ExperimentClaims {
        ExperimentClaims::default()
    }
}
