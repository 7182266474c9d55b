//! What lets a CI job gate on `connlab run`: `--fail-if` conditions on the
//! table (`p99>5ms`, `epoll:cpu>=80`) and, against a saved
//! `comparison.json` (`--baseline`), each row's ratio to its earlier self
//! with `--max-regression`. Pure: the binary reads the files and maps a
//! failure to its exit code.

use super::table::TableRow;
use crate::compare::Better;
use serde::{Deserialize, Serialize};
use std::fmt;

/// A figure of a table row that a condition can name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Metric {
    /// Service latency p50 (a time).
    P50,
    /// Service latency p99 (a time).
    P99,
    /// Achieved responses per second.
    Rate,
    /// Server CPU microseconds per request.
    Cpu,
    /// Failed requests.
    Errors,
}

impl Metric {
    const NAMES: &'static str =
        "p50, p99 (times: 250us, 5ms, 1s), rate (req/s), cpu (us per request), errors";

    fn parse(s: &str) -> Option<Metric> {
        Some(match s {
            "p50" => Metric::P50,
            "p99" => Metric::P99,
            "rate" => Metric::Rate,
            "cpu" => Metric::Cpu,
            "errors" => Metric::Errors,
            _ => return None,
        })
    }

    fn name(self) -> &'static str {
        match self {
            Metric::P50 => "p50",
            Metric::P99 => "p99",
            Metric::Rate => "rate",
            Metric::Cpu => "cpu",
            Metric::Errors => "errors",
        }
    }

    fn is_time(self) -> bool {
        matches!(self, Metric::P50 | Metric::P99)
    }

    /// The row's value, in us for times.
    fn of(self, r: &TableRow) -> Option<f64> {
        match self {
            Metric::P50 => r.p50_us,
            Metric::P99 => r.p99_us,
            Metric::Rate => r.achieved_per_s,
            Metric::Cpu => r.cpu_us_per_request,
            Metric::Errors => Some(r.errors as f64),
        }
    }
}

/// A comparison operator.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Op {
    /// `>`
    Gt,
    /// `>=`
    Ge,
    /// `<`
    Lt,
    /// `<=`
    Le,
}

impl Op {
    fn holds(self, a: f64, b: f64) -> bool {
        match self {
            Op::Gt => a > b,
            Op::Ge => a >= b,
            Op::Lt => a < b,
            Op::Le => a <= b,
        }
    }

    fn text(self) -> &'static str {
        match self {
            Op::Gt => ">",
            Op::Ge => ">=",
            Op::Lt => "<",
            Op::Le => "<=",
        }
    }
}

/// One `--fail-if` condition: `[ROW:]METRIC OP VALUE[UNIT]`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FailIf {
    /// Only this row; every row when `None`.
    pub row: Option<String>,
    /// The figure.
    pub metric: Metric,
    /// The operator.
    pub op: Op,
    /// The threshold, in us for times.
    pub value: f64,
    /// The condition as written.
    pub text: String,
}

impl std::str::FromStr for FailIf {
    type Err = String;

    fn from_str(s: &str) -> Result<FailIf, String> {
        let text: String = s.split_whitespace().collect();
        let bad = |why: String| {
            format!("--fail-if {s:?}: {why}; expected [ROW:]METRIC OP VALUE, as in p99>5ms or epoll:cpu>=80, with METRIC one of {}", Metric::NAMES)
        };
        let (row, cond) = match text.split_once(':') {
            Some((row, cond)) if !row.is_empty() => (Some(row.to_string()), cond),
            Some(_) => return Err(bad("the row before ':' is empty".into())),
            None => (None, text.as_str()),
        };
        let at = cond
            .find(['<', '>'])
            .ok_or_else(|| bad("no operator (>, >=, <, <=)".into()))?;
        let (name, rest) = cond.split_at(at);
        let (op, value) = if let Some(v) = rest.strip_prefix(">=") {
            (Op::Ge, v)
        } else if let Some(v) = rest.strip_prefix("<=") {
            (Op::Le, v)
        } else if let Some(v) = rest.strip_prefix('>') {
            (Op::Gt, v)
        } else {
            (Op::Lt, &rest[1..])
        };
        let metric = Metric::parse(name).ok_or_else(|| bad(format!("unknown metric {name:?}")))?;
        let value = if metric.is_time() {
            parse_time_us(value).ok_or_else(|| {
                bad(format!(
                    "{value:?} is not a time (a number with us, ms or s)"
                ))
            })?
        } else {
            value
                .parse::<f64>()
                .ok()
                .filter(|v| v.is_finite())
                .ok_or_else(|| bad(format!("{value:?} is not a number")))?
        };
        Ok(FailIf {
            row,
            metric,
            op,
            value,
            text,
        })
    }
}

/// A time with its unit (`250us`, `5ms`, `1.5s`) in microseconds.
fn parse_time_us(s: &str) -> Option<f64> {
    let (number, scale) = if let Some(n) = s.strip_suffix("us") {
        (n, 1.0)
    } else if let Some(n) = s.strip_suffix("ms") {
        (n, 1e3)
    } else if let Some(n) = s.strip_suffix('s') {
        (n, 1e6)
    } else {
        return None;
    };
    number
        .parse::<f64>()
        .ok()
        .filter(|v| v.is_finite() && *v >= 0.0)
        .map(|v| v * scale)
}

/// A condition that held for a row: why the run fails.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Failure {
    /// The row.
    pub row: String,
    /// What happened, in words.
    pub text: String,
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.row, self.text)
    }
}

/// The rows of `table` for which a condition of `fail_if` holds; a
/// condition naming a row the table lacks is an error (a typo must not
/// pass a CI job).
pub fn check_fail_if(table: &[TableRow], fail_if: &[FailIf]) -> Result<Vec<Failure>, String> {
    let mut out = Vec::new();
    for cond in fail_if {
        if let Some(row) = &cond.row {
            if !table.iter().any(|r| &r.label == row) {
                return Err(format!(
                    "--fail-if {}: no row {row:?} (rows: {})",
                    cond.text,
                    table
                        .iter()
                        .map(|r| r.label.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ));
            }
        }
        for r in table
            .iter()
            .filter(|r| cond.row.as_ref().is_none_or(|row| &r.label == row))
        {
            let Some(v) = cond.metric.of(r) else {
                // A gate that cannot be checked must not pass a CI job.
                out.push(Failure {
                    row: r.label.clone(),
                    text: format!(
                        "{}: no valid run to check (--fail-if {})",
                        cond.metric.name(),
                        cond.text
                    ),
                });
                continue;
            };
            if cond.op.holds(v, cond.value) {
                let shown = |x: f64| {
                    if cond.metric.is_time() {
                        time_text(x)
                    } else {
                        format!("{x:.1}")
                    }
                };
                out.push(Failure {
                    row: r.label.clone(),
                    text: format!(
                        "{} {} {} {} (--fail-if {})",
                        cond.metric.name(),
                        shown(v),
                        cond.op.text(),
                        shown(cond.value),
                        cond.text
                    ),
                });
            }
        }
    }
    Ok(out)
}

/// A time in us as text in the unit that reads best.
fn time_text(us: f64) -> String {
    if us >= 1e6 {
        format!("{:.2}s", us / 1e6)
    } else if us >= 1e3 {
        format!("{:.2}ms", us / 1e3)
    } else {
        format!("{us:.1}us")
    }
}

/// One row against its earlier self in a saved comparison.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AgainstBaseline {
    /// The row.
    pub label: String,
    /// The primary figure now (`None`: no valid run this time).
    pub now: Option<f64>,
    /// The primary figure in the baseline.
    pub before: f64,
    /// How many times worse it is now (above 1: a regression; below 1: an
    /// improvement), whichever direction is better; `None` without a
    /// valid run now.
    pub worse_by: Option<f64>,
}

/// Each row's primary figure against the baseline row of the same label
/// (rows the baseline lacks or did not measure are left out).
pub fn against_baseline(
    now: &[TableRow],
    before: &[TableRow],
    better: Better,
) -> Vec<AgainstBaseline> {
    now.iter()
        .filter_map(|r| {
            let b = before.iter().find(|b| b.label == r.label)?;
            let p = b.primary.filter(|p| *p > 0.0)?;
            let n = r.primary.filter(|n| *n > 0.0);
            Some(AgainstBaseline {
                label: r.label.clone(),
                now: n,
                before: p,
                worse_by: n.map(|n| match better {
                    Better::Lower => n / p,
                    Better::Higher => p / n,
                }),
            })
        })
        .collect()
}

/// The rows worse than the baseline by more than `max` (`1.10`: ten per
/// cent), and those without a valid run to check (a check that cannot be
/// made must not pass a CI job).
pub fn regressions(rows: &[AgainstBaseline], max: f64) -> Vec<Failure> {
    rows.iter()
        .filter_map(|r| {
            let text = match (r.worse_by, r.now) {
                (Some(w), Some(now)) if w > max => format!(
                    "{w:.2}x worse than the baseline ({now:.1} against {:.1}), above --max-regression {max:.2}",
                    r.before
                ),
                (None, _) | (_, None) => {
                    "no valid run to check against the baseline (--max-regression)".to_string()
                }
                _ => return None,
            };
            Some(Failure {
                row: r.label.clone(),
                text,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compare::Standing;

    fn row(label: &str, p50: f64, p99: f64, cpu: f64) -> TableRow {
        TableRow {
            rank: 1,
            label: label.into(),
            standing: Standing::Best,
            primary: Some(p50),
            primary_min: Some(p50),
            primary_max: Some(p50),
            ratio_to_best: None,
            ratio_lo: None,
            ratio_hi: None,
            ratio_coverage: None,
            p50_us: Some(p50),
            p99_us: Some(p99),
            achieved_per_s: Some(2000.0),
            cpu_us_per_request: Some(cpu),
            wakeups_per_request: Some(1.0),
            memory_per_connection_kib: Some(0.3),
            errors: 0,
            valid_runs: 3,
            runs: 3,
        }
    }

    #[test]
    fn fail_if_parses_rows_operators_and_units() {
        let c: FailIf = "p99 > 5ms".parse().unwrap();
        assert_eq!(
            (c.row.as_deref(), c.metric, c.op, c.value),
            (None, Metric::P99, Op::Gt, 5000.0)
        );
        let c: FailIf = "epoll:cpu>=80".parse().unwrap();
        assert_eq!(
            (c.row.as_deref(), c.metric, c.op, c.value),
            (Some("epoll"), Metric::Cpu, Op::Ge, 80.0)
        );
        let c: FailIf = "rate<1990".parse().unwrap();
        assert_eq!((c.metric, c.op), (Metric::Rate, Op::Lt));
        let c: FailIf = "p50<=250us".parse().unwrap();
        assert_eq!((c.op, c.value), (Op::Le, 250.0));
        for bad in [
            "p99>5", "p98>5ms", "p99=5ms", ":p99>1s", "cpu>many", "p99>-1ms",
        ] {
            let e = bad.parse::<FailIf>().unwrap_err();
            assert!(e.contains("expected [ROW:]METRIC OP VALUE"), "{bad}: {e}");
        }
    }

    #[test]
    fn fail_if_names_each_row_that_crosses_and_refuses_unknown_rows() {
        let table = [
            row("epoll", 80.0, 120.0, 57.0),
            row("poll", 270.0, 6000.0, 430.0),
        ];
        let f = check_fail_if(&table, &["p99>5ms".parse().unwrap()]).unwrap();
        assert_eq!(f.len(), 1);
        assert_eq!(
            f[0].to_string(),
            "poll: p99 6.00ms > 5.00ms (--fail-if p99>5ms)"
        );
        assert!(check_fail_if(&table, &["epoll:p99>5ms".parse().unwrap()])
            .unwrap()
            .is_empty());
        let e = check_fail_if(&table, &["epol:p99>5ms".parse().unwrap()]).unwrap_err();
        assert!(e.contains("no row \"epol\" (rows: epoll, poll)"), "{e}");
    }

    #[test]
    fn a_regression_is_worse_in_the_metric_direction() {
        let before = [row("epoll", 80.0, 0.0, 0.0), row("poll", 270.0, 0.0, 0.0)];
        let now = [
            row("epoll", 92.0, 0.0, 0.0),
            row("poll", 250.0, 0.0, 0.0),
            row("uring", 70.0, 0.0, 0.0),
        ];
        let a = against_baseline(&now, &before, Better::Lower);
        assert_eq!(a.len(), 2, "uring has no baseline");
        assert!((a[0].worse_by.unwrap() - 1.15).abs() < 1e-9);
        let r = regressions(&a, 1.10);
        assert_eq!(r.len(), 1);
        assert!(
            r[0].to_string()
                .starts_with("epoll: 1.15x worse than the baseline"),
            "{}",
            r[0]
        );
        // Higher is better: a lower rate is the regression.
        let a = against_baseline(&now, &before, Better::Higher);
        assert!((a[1].worse_by.unwrap() - 270.0 / 250.0).abs() < 1e-9);
        // No valid run now: the check fails rather than passes.
        let mut gone = now[0].clone();
        gone.primary = None;
        let a = against_baseline(&[gone], &before, Better::Lower);
        assert!(regressions(&a, 1.10)[0].text.starts_with("no valid run"));
    }
}
