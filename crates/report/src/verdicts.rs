//! The rows each kind of results directory contributes to the `connlab
//! reproduce` index: its title, how far it ran, and its claims as
//! [`ClaimRow`]s. One function per experiment kind, chosen by what the
//! directory holds.

use crate::index::{ClaimRow, Verdict};
use crate::PaperTable;
use connlab_lab::{PipelineSweep, SweepDir};
use std::path::Path;

/// What one results directory says on the index.
#[derive(Clone, Debug)]
pub struct ExperimentClaims {
    /// The experiment's title.
    pub title: String,
    /// How far it ran, e.g. `45 of 45 points`.
    pub progress: String,
    /// Its tables, figures and claims.
    pub rows: Vec<ClaimRow>,
}

/// Reads a results directory of any experiment kind and returns its index
/// rows; the error says why the directory could not be read.
pub fn claim_rows(dir: &Path) -> Result<ExperimentClaims, String> {
    if dir.join("pipeline.json").exists() {
        let sweep = PipelineSweep::open(dir).map_err(|e| e.to_string())?;
        return Ok(ExperimentClaims {
            title: sweep.experiment.title.clone(),
            progress: format!("{} of {} runs", sweep.runs.len(), sweep.runs_total),
            rows: Vec::new(),
        });
    }
    if !SweepDir::info_path(dir).exists() {
        return Err(format!("{}: no results", dir.display()));
    }
    let sweep = SweepDir::open(dir).map_err(|e| e.to_string())?;
    let table = PaperTable::of(&sweep);
    let rows = table
        .claims(&sweep)
        .into_iter()
        .map(|c| ClaimRow {
            source: table.table.clone(),
            text: format!("{} ({}, {})", c.text, c.engine, c.group),
            paper: c.paper.map_or("—".into(), |r| format!("{r:.2}x")),
            ours: c.ours.map_or("—".into(), |r| format!("{r:.2}x")),
            verdict: Verdict::Compared,
            reason: String::new(),
        })
        .collect();
    Ok(ExperimentClaims {
        title: sweep.info.title.clone(),
        progress: format!(
            "{} of {} points",
            sweep.points.len(),
            sweep.info.points_total
        ),
        rows,
    })
}
