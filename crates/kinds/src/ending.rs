//! How a sweep's end is told: the lines `connlab sweep` prints, its exit
//! code, and the error it ends with (exit 1), per kind's wording.

use crate::SweepOutcome;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The end of a sweep as the CLI reports it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Ending {
    /// Lines for standard error, in order.
    pub lines: Vec<String>,
    /// The exit code: 0 done, 1 points failed, 130 interrupted.
    pub code: u8,
    /// When set, the sweep ends with this error (exit 1) after the lines.
    pub error: Option<String>,
}

/// `connlab sweep` suggests the report next.
fn next(out: &Path) -> String {
    format!("next: connlab report {} -o report.html", out.display())
}

impl Ending {
    /// The ending of a sweep of points (locality, web, single-IP): how many
    /// are done, kept and failed, each failure with its log directory when
    /// `logs` names one, and how to resume an interrupted sweep.
    pub fn points(o: &SweepOutcome, logs: Option<fn(&Path, &str) -> PathBuf>) -> Ending {
        let mut lines = vec![format!(
            "connlab sweep: {} of {} points done ({} measured now, {} kept), {} failed; results in {}",
            o.kept + o.measured,
            o.total,
            o.measured,
            o.kept,
            o.failed.len(),
            o.out.display()
        )];
        lines.extend(
            o.warnings
                .iter()
                .map(|w| format!("connlab sweep: warning: {w}")),
        );
        if let Some(log_dir) = logs {
            lines.extend(
                o.failed
                    .iter()
                    .map(|id| format!("  failed: {id} (see {})", log_dir(&o.out, id).display())),
            );
        }
        if o.interrupted {
            lines.push(format!(
                "connlab sweep: interrupted; run the same command again to resume ({} points left)",
                o.total - o.kept - o.measured
            ));
            return Ending {
                lines,
                code: 130,
                error: None,
            };
        }
        lines.push(next(&o.out));
        Ending {
            lines,
            code: u8::from(!o.failed.is_empty()),
            error: None,
        }
    }

    /// The ending of a sweep of runs (pipeline, peers, loadgen): `unit`
    /// names what the plan counts, `bad` the failed ones in the summary and
    /// `failed` in the error that lists them; `say_interrupted` adds how to
    /// resume.
    pub fn runs(
        o: &SweepOutcome,
        took: Duration,
        unit: &str,
        bad: &str,
        failed: &str,
        say_interrupted: bool,
    ) -> Ending {
        let mut lines = vec![format!(
            "connlab sweep: {} of {} {unit} done in {:.0} s, {} {bad}; results in {}",
            o.kept + o.measured,
            o.total,
            took.as_secs_f64(),
            o.failed.len(),
            o.out.display()
        )];
        lines.extend(
            o.warnings
                .iter()
                .map(|w| format!("connlab sweep: warning: {w}")),
        );
        if say_interrupted && o.interrupted {
            lines.push("connlab sweep: interrupted; run the same command again to resume".into());
            return Ending {
                lines,
                code: 130,
                error: None,
            };
        }
        lines.push(next(&o.out));
        if o.interrupted {
            return Ending {
                lines,
                code: 130,
                error: None,
            };
        }
        let error = (!o.failed.is_empty()).then(|| format!("{failed}: {}", o.failed.join(", ")));
        Ending {
            lines,
            code: u8::from(error.is_some()),
            error,
        }
    }

    /// A sweep that found every point finished before: only what to do next.
    pub fn nothing_left(o: &SweepOutcome) -> Ending {
        Ending {
            lines: vec![next(&o.out)],
            code: 0,
            error: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outcome() -> SweepOutcome {
        SweepOutcome {
            out: PathBuf::from("results/x"),
            total: 4,
            kept: 1,
            measured: 2,
            failed: vec!["p2".into()],
            interrupted: false,
            warnings: vec!["w".into()],
        }
    }

    #[test]
    fn points_name_their_failures_and_exit_1() {
        let e = Ending::points(&outcome(), Some(|out, id| out.join("logs").join(id)));
        assert_eq!(e.code, 1);
        assert!(e.lines[0].contains("3 of 4 points done (2 measured now, 1 kept), 1 failed"));
        assert_eq!(e.lines[1], "connlab sweep: warning: w");
        assert!(e.lines[2].contains("failed: p2 (see results/x/logs/p2)"));
        assert!(e.lines[3].starts_with("next: connlab report"));
    }

    #[test]
    fn an_interrupted_sweep_exits_130_and_says_how_to_resume() {
        let o = SweepOutcome {
            interrupted: true,
            ..outcome()
        };
        let e = Ending::points(&o, None);
        assert_eq!(e.code, 130);
        assert!(e.lines.last().unwrap().contains("(1 points left)"));
        let e = Ending::runs(
            &o,
            Duration::from_secs(3),
            "runs",
            "failed",
            "runs failed",
            false,
        );
        assert_eq!((e.code, e.error.as_deref()), (130, None));
        let e = Ending::runs(&o, Duration::from_secs(3), "points", "failed", "x", true);
        assert!(e
            .lines
            .last()
            .unwrap()
            .contains("run the same command again"));
    }

    #[test]
    fn failed_runs_end_in_an_error_listing_them() {
        let e = Ending::runs(
            &outcome(),
            Duration::from_secs(3),
            "runs",
            "failed or unverified",
            "runs failed or unverified",
            false,
        );
        assert_eq!(e.error.as_deref(), Some("runs failed or unverified: p2"));
        assert!(e.lines[0].contains("3 of 4 runs done in 3 s, 1 failed or unverified"));
    }
}
