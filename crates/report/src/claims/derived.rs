//! The paper's derived tables, computed from this sweep's points.

use super::*;

/// A paper table computed from this sweep (`[[paper.derived]]`).
#[derive(Clone, Debug)]
pub struct DerivedTable {
    /// E.g. `Table 5`.
    pub table: String,
    /// Its statistic.
    pub metric: Metric,
    /// Remarks.
    pub note: String,
    /// How each engine's row was picked.
    pub pick: DerivedPick,
    /// One row per engine.
    pub rows: Vec<DerivedRow>,
}

/// One engine of a derived table.
#[derive(Clone, Debug)]
pub struct DerivedRow {
    /// The engine.
    pub engine: String,
    /// The setting picked for it (`None`: nothing measured).
    pub picked: Option<String>,
    /// Ours at that setting and the paper's.
    pub cell: Cell,
}

/// The experiment's derived tables, each engine at the setting whose first
/// statistic (median over repetitions) is the largest of the sweep.
pub fn derived_tables(dir: &SweepDir, t: &PaperTable) -> Vec<DerivedTable> {
    let Some(paper) = &dir.experiment.paper else {
        return Vec::new();
    };
    paper
        .derived
        .iter()
        .map(|d| {
            let rows = t
                .engines
                .iter()
                .enumerate()
                .map(|(col, engine)| {
                    let best = t
                        .rows
                        .iter()
                        .filter_map(|r| {
                            let s = spreads(dir, &r.cells[col].points, d.metric);
                            let key = match d.pick {
                                DerivedPick::LargestFirstStat => s[0].as_ref()?.median(),
                                DerivedPick::HighestRate => {
                                    spreads(dir, &r.cells[col].points, Metric::Throughput)[0]
                                        .as_ref()?
                                        .median()
                                }
                            };
                            Some((r, s, key))
                        })
                        .max_by(|a, b| a.2.total_cmp(&b.2));
                    let paper = d
                        .cells
                        .iter()
                        .find(|c| c.engine == *engine)
                        .map_or([None; 3], |c| c.stats(d.metric));
                    match best {
                        Some((r, ours, _)) => DerivedRow {
                            engine: engine.clone(),
                            picked: Some(setting_text(r)),
                            cell: Cell {
                                points: r.cells[col].points.clone(),
                                invalid: r.cells[col].invalid.clone(),
                                ours,
                                paper,
                            },
                        },
                        None => DerivedRow {
                            engine: engine.clone(),
                            picked: None,
                            cell: Cell {
                                paper,
                                ..Cell::default()
                            },
                        },
                    }
                })
                .collect();
            DerivedTable {
                table: d.table.clone(),
                metric: d.metric,
                note: d.note.clone(),
                pick: d.pick,
                rows,
            }
        })
        .collect()
}
