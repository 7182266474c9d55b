//! `connlab run`'s result table as data: one flat row per server, ranked
//! best first, that the terminal, `--format json|markdown|csv`, the
//! exports, `--baseline` and `--fail-if` all read.

use super::{counts, CompareOutcome, Done};
use crate::compare::{Figure, RowComparison, Standing};
use serde::{Deserialize, Serialize};

/// One row of the table: medians over the row's valid runs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TableRow {
    /// Place in the ranking, from 1 (unmeasured rows come last).
    pub rank: usize,
    /// The row's name (engine, or a server under test).
    pub label: String,
    /// Best, tie, differs, unjudged or not measured.
    pub standing: Standing,
    /// The primary figure's median (service latency p50 in us, or the
    /// achieved rate in closed loop).
    pub primary: Option<f64>,
    /// Its lowest value over the rounds.
    pub primary_min: Option<f64>,
    /// Its highest value over the rounds.
    pub primary_max: Option<f64>,
    /// The median of the per-round ratios to the best row.
    pub ratio_to_best: Option<f64>,
    /// The lower end of that ratio's interval.
    pub ratio_lo: Option<f64>,
    /// The upper end.
    pub ratio_hi: Option<f64>,
    /// The interval's coverage (0.95, or less with few rounds).
    pub ratio_coverage: Option<f64>,
    /// Service latency p50, us (median over valid runs).
    pub p50_us: Option<f64>,
    /// Service latency p99, us (median over valid runs).
    pub p99_us: Option<f64>,
    /// Achieved responses per second (median over valid runs).
    pub achieved_per_s: Option<f64>,
    /// Server CPU microseconds per request.
    pub cpu_us_per_request: Option<f64>,
    /// Server wake-ups per request.
    pub wakeups_per_request: Option<f64>,
    /// Server memory per connection, KiB.
    pub memory_per_connection_kib: Option<f64>,
    /// Failed requests over every run of the row.
    pub errors: u64,
    /// Runs that counted (valid, finished).
    pub valid_runs: usize,
    /// Runs kept for the row (one per round).
    pub runs: usize,
}

impl TableRow {
    /// The row's figures from its comparison alone (what a saved
    /// `comparison.json` without a table holds): no per-run medians, the
    /// rounds that measured its primary figure as its runs.
    fn of_comparison(rank: usize, r: &RowComparison) -> TableRow {
        let runs = r.primary.map_or(0, |f| f.n);
        TableRow {
            rank,
            label: r.label.clone(),
            standing: r.standing,
            primary: r.primary.map(|f| f.median),
            primary_min: r.primary.map(|f| f.min),
            primary_max: r.primary.map(|f| f.max),
            ratio_to_best: r.ratio_to_best,
            ratio_lo: r.ratio_ci.map(|x| x.0),
            ratio_hi: r.ratio_ci.map(|x| x.1),
            ratio_coverage: r.ratio_ci_coverage,
            p50_us: None,
            p99_us: None,
            achieved_per_s: None,
            cpu_us_per_request: r.cpu_us_per_request.map(|f| f.median),
            wakeups_per_request: r.wakeups_per_request.map(|f| f.median),
            memory_per_connection_kib: r.memory_per_connection_bytes.map(|f| f.median / 1024.0),
            errors: 0,
            valid_runs: runs,
            runs,
        }
    }
}

impl CompareOutcome {
    /// The table, best first (see [`crate::compare::Comparison::ranking`]).
    pub fn table(&self) -> Vec<TableRow> {
        let c = &self.comparison;
        c.ranking
            .iter()
            .enumerate()
            .map(|(rank, &i)| {
                let rc = &c.rows[i];
                let runs: Vec<&Done> = self.done.iter().filter(|d| d.row == i).collect();
                let valid: Vec<&Done> = runs.iter().copied().filter(|d| counts(d)).collect();
                let median = |f: &dyn Fn(&Done) -> f64| {
                    let v: Vec<Option<f64>> = valid.iter().map(|d| Some(f(d))).collect();
                    Figure::of(&v).map(|f| f.median)
                };
                TableRow {
                    p50_us: median(&|d| d.result.service_latency_us.p50),
                    p99_us: median(&|d| d.result.service_latency_us.p99),
                    achieved_per_s: median(&|d| d.result.achieved_rate_per_s),
                    errors: runs
                        .iter()
                        .map(|d| d.result.requests.measured_errors())
                        .sum(),
                    valid_runs: valid.len(),
                    runs: runs.len(),
                    ..TableRow::of_comparison(rank + 1, rc)
                }
            })
            .collect()
    }
}

/// A saved `comparison.json`, as `--baseline` reads it: which direction
/// is better and the table (built from the comparison's rows for a file
/// written before the table was saved).
pub fn read_baseline(
    path: &std::path::Path,
) -> Result<(crate::compare::Better, Vec<TableRow>), String> {
    #[derive(Deserialize)]
    struct File {
        schema: String,
        comparison: crate::compare::Comparison,
        #[serde(default)]
        table: Option<Vec<TableRow>>,
    }
    let text =
        std::fs::read_to_string(path).map_err(|e| format!("--baseline {}: {e}", path.display()))?;
    let file: File = serde_json::from_str(&text).map_err(|e| {
        format!(
            "--baseline {}: not a connlab run comparison.json ({e})",
            path.display()
        )
    })?;
    if file.schema != super::COMPARISON_SCHEMA {
        return Err(format!(
            "--baseline {}: schema {:?}, expected {:?}",
            path.display(),
            file.schema,
            super::COMPARISON_SCHEMA
        ));
    }
    let c = file.comparison;
    let table = file.table.unwrap_or_else(|| {
        c.rows
            .iter()
            .enumerate()
            .map(|(i, r)| TableRow::of_comparison(i + 1, r))
            .collect()
    });
    Ok((c.better, table))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compare::{compare, Better, RowSamples, CONFIDENCE};

    #[test]
    fn a_baseline_without_a_table_is_read_from_its_comparison() {
        let rows = [
            RowSamples {
                label: "epoll".into(),
                primary: vec![Some(80.0), Some(82.0), Some(81.0)],
                ..RowSamples::default()
            },
            RowSamples {
                label: "poll".into(),
                primary: vec![Some(270.0), Some(260.0), Some(275.0)],
                ..RowSamples::default()
            },
        ];
        let c = compare("median service latency", Better::Lower, &rows, CONFIDENCE);
        let dir = std::env::temp_dir().join(format!("connlab-baseline-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("comparison.json");
        let file = serde_json::json!({
            "schema": super::super::COMPARISON_SCHEMA,
            "placement": {},
            "comparison": c,
            "runs": [],
        });
        std::fs::write(&path, file.to_string()).unwrap();
        let (better, table) = read_baseline(&path).unwrap();
        assert_eq!(better, Better::Lower);
        assert_eq!(table.len(), 2);
        assert_eq!(
            (table[1].label.as_str(), table[1].primary),
            ("poll", Some(270.0))
        );
        std::fs::write(&path, "{\"schema\": \"other/1\"}").unwrap();
        let e = read_baseline(&path).unwrap_err();
        assert!(e.contains("not a connlab run comparison.json"), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
