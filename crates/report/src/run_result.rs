//! `connlab run`'s result as the terminal, `--format` and the exports show
//! it: the ranked table, one line per comparison, the failed checks and
//! the recommendation, as text (coloured on a terminal), Markdown, JSON or
//! CSV. The page is [`crate::compare_run`]'s.

use crate::ReportError;
use connlab_lab::compare::{coverage_text, Better, Standing};
use connlab_lab::run::compare_run::gate::{AgainstBaseline, Failure};
use connlab_lab::run::compare_run::{CompareOutcome, RunPlacement, TableRow};
use serde::Serialize;
use std::fmt::Write as _;

/// What the result looks like.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RunFormat {
    /// A table with the comparisons and the recommendation.
    Text,
    /// The comparison, its table, the baseline and the failures.
    Json,
    /// A GitHub-flavoured table with the comparisons.
    Markdown,
    /// The table, one row per server.
    Csv,
}

/// Everything a rendering of the result needs.
pub struct RunResult<'a> {
    /// What the comparison measured.
    pub outcome: &'a CompareOutcome,
    /// Its table, best first.
    pub table: Vec<TableRow>,
    /// Each row against `--baseline` (empty without one).
    pub baseline: Vec<AgainstBaseline>,
    /// The `--fail-if` and `--max-regression` checks that failed.
    pub failures: Vec<Failure>,
}

/// `connlab run --format json`: the comparison file's fields, then the
/// baseline ratios and the failed conditions.
#[derive(Serialize)]
struct JsonResult<'a> {
    schema: &'static str,
    placement: &'a RunPlacement,
    comparison: &'a connlab_lab::compare::Comparison,
    table: &'a [TableRow],
    baseline: &'a [AgainstBaseline],
    failures: &'a [Failure],
    runs: Vec<&'a str>,
}

impl RunResult<'_> {
    /// The result in `format`; `paint` colours text (a terminal only).
    pub fn render(&self, format: RunFormat, paint: Paint) -> Result<String, ReportError> {
        Ok(match format {
            RunFormat::Text => self.text(paint),
            RunFormat::Markdown => self.markdown(),
            RunFormat::Json => {
                let o = self.outcome;
                let j = JsonResult {
                    schema: connlab_lab::run::compare_run::COMPARISON_SCHEMA,
                    placement: &o.placement,
                    comparison: &o.comparison,
                    table: &self.table,
                    baseline: &self.baseline,
                    failures: &self.failures,
                    runs: o.done.iter().filter_map(|d| d.file.as_deref()).collect(),
                };
                serde_json::to_string_pretty(&j).map_err(|e| ReportError::Json(e.to_string()))?
                    + "\n"
            }
            RunFormat::Csv => {
                let err = |e: ::csv::Error| ReportError::Csv(e.to_string());
                let mut w = ::csv::Writer::from_writer(Vec::new());
                for r in &self.table {
                    w.serialize(r).map_err(err)?;
                }
                let bytes = w
                    .into_inner()
                    .map_err(|e| ReportError::Csv(e.to_string()))?;
                String::from_utf8(bytes).map_err(|e| ReportError::Csv(e.to_string()))?
            }
        })
    }

    /// `service latency by engine (workload; repetitions; placement)`.
    fn heading(&self) -> String {
        let o = self.outcome;
        let closed = o.comparison.better == Better::Higher;
        let what = if closed {
            "achieved rate"
        } else {
            "service latency"
        };
        let Some(first) = o.done.first() else {
            return format!("{what} by engine: no run finished");
        };
        let c = &first.result.config;
        format!(
            "{what} by engine ({} connections, ratio {}, {}, {} B / {} B, {}; {} repetitions; {})",
            c.connections,
            c.active_ratio,
            c.rate_per_s.map_or(
                format!("closed loop depth {}", c.depth.unwrap_or(1)),
                |r| format!("{r} req/s")
            ),
            c.request_size_bytes,
            c.response_size_bytes,
            c.protocol,
            o.repetitions,
            o.placement.text()
        )
    }

    /// The table's cells, best first: heading, then one row per server.
    fn cells(&self) -> (Vec<String>, Vec<Vec<String>>) {
        let closed = self.outcome.comparison.better == Better::Higher;
        let opt = |v: Option<f64>, digits: usize| v.map_or("-".into(), |v| format!("{v:.digits$}"));
        let mut head: Vec<String> = [
            "#",
            "engine",
            if closed {
                "req/s median (spread)"
            } else {
                "p50 us median (spread)"
            },
            "ratio to best [interval]",
            "p99 us",
            "achieved/s",
            "cpu us/req",
            "wake-ups/req",
            "mem/conn KiB",
            "errors",
        ]
        .map(String::from)
        .to_vec();
        if !self.baseline.is_empty() {
            head.push("vs baseline".into());
        }
        let digits = if closed { 0 } else { 1 };
        let rows = self
            .table
            .iter()
            .map(|r| {
                let primary = match (r.primary, r.primary_min, r.primary_max) {
                    (Some(m), Some(lo), Some(hi)) => {
                        format!("{m:.digits$} ({lo:.digits$}-{hi:.digits$})")
                    }
                    _ => "-".into(),
                };
                let ratio = match (r.standing, r.ratio_to_best, r.ratio_lo, r.ratio_hi) {
                    (Standing::Best, ..) => "best".to_string(),
                    (_, Some(x), Some(lo), Some(hi)) => format!("{x:.2} [{lo:.2}-{hi:.2}]"),
                    (_, Some(x), ..) => format!("{x:.2}"),
                    _ => "-".into(),
                };
                let mut cells = vec![
                    r.rank.to_string(),
                    r.label.clone(),
                    primary,
                    ratio,
                    opt(r.p99_us, 1),
                    opt(r.achieved_per_s, 1),
                    opt(r.cpu_us_per_request, 1),
                    opt(r.wakeups_per_request, 2),
                    opt(r.memory_per_connection_kib, 2),
                    r.errors.to_string(),
                ];
                if !self.baseline.is_empty() {
                    cells.push(
                        self.baseline
                            .iter()
                            .find(|b| b.label == r.label)
                            .and_then(|b| b.worse_by)
                            .map_or("-".into(), |w| format!("{w:.2}x worse")),
                    );
                }
                cells
            })
            .collect();
        (head, rows)
    }

    /// The lines under the table: each comparison, what dominates, the
    /// baseline's regressions and failed conditions, the recommendation.
    fn sentences(&self) -> Vec<String> {
        let c = &self.outcome.comparison;
        let mut out: Vec<String> = c.lines.clone();
        out.extend(c.explanations.iter().cloned());
        if c.best.is_none() {
            out.extend(c.verdict.iter().cloned());
        }
        if let Some(coverage) = c
            .rows
            .iter()
            .filter_map(|r| r.ratio_ci_coverage)
            .reduce(f64::min)
            .filter(|cov| *cov + 1e-9 < c.confidence)
        {
            out.push(format!(
                "intervals: {} of the per-round ratios at most (fewer than 6 rounds; --repetitions 6 gives 95%)",
                coverage_text(coverage)
            ));
        }
        out.extend(self.failures.iter().map(|f| format!("FAILED {f}")));
        out
    }

    fn text(&self, paint: Paint) -> String {
        let (head, rows) = self.cells();
        let mut widths: Vec<usize> = head.iter().map(|h| h.chars().count()).collect();
        for r in &rows {
            for (w, c) in widths.iter_mut().zip(r) {
                *w = (*w).max(c.chars().count());
            }
        }
        let line = |cells: &[String]| {
            let mut s = String::from(" ");
            for (i, (c, w)) in cells.iter().zip(&widths).enumerate() {
                // The engine's name is left-aligned, figures right-aligned.
                if i == 1 {
                    let _ = write!(s, " {c:<w$}");
                } else {
                    let _ = write!(s, " {c:>w$}");
                }
            }
            s
        };
        let mut t = format!("{}:\n", self.heading());
        t.push_str(&paint.bold(&line(&head)));
        t.push('\n');
        for (r, cells) in self.table.iter().zip(&rows) {
            let l = line(cells);
            t.push_str(&match r.standing {
                Standing::Best => paint.green(&l),
                Standing::Unjudged | Standing::NotMeasured => paint.dim(&l),
                _ => l,
            });
            t.push('\n');
        }
        for s in self.sentences() {
            let s = if s.starts_with("FAILED") {
                paint.red(&s)
            } else {
                s
            };
            let _ = writeln!(t, "{s}");
        }
        if let Some(r) = &self.outcome.comparison.recommendation {
            let _ = writeln!(t, "{}", paint.bold(&r.line()));
        }
        t
    }

    fn markdown(&self) -> String {
        let (head, rows) = self.cells();
        let row = |cells: &[String]| format!("| {} |\n", cells.join(" | "));
        let mut t = format!("{}\n\n", self.heading());
        t.push_str(&row(&head));
        t.push_str(&row(&vec!["---".to_string(); head.len()]));
        for r in &rows {
            t.push_str(&row(r));
        }
        t.push('\n');
        for s in self.sentences() {
            let _ = writeln!(t, "- {s}");
        }
        if let Some(r) = &self.outcome.comparison.recommendation {
            let _ = writeln!(t, "\n**{}**", r.line());
        }
        t
    }
}

/// Colour for a terminal: off when `NO_COLOR` is set (<https://no-color.org>),
/// with `--color never`, or when stdout is not a terminal under `auto`.
#[derive(Clone, Copy, Debug)]
pub struct Paint(bool);

impl Paint {
    /// Whether to colour stdout under `choice`.
    pub fn new(choice: ColorChoice) -> Paint {
        use std::io::IsTerminal;
        let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
        Paint(match choice {
            ColorChoice::Always => true,
            ColorChoice::Never => false,
            ColorChoice::Auto => !no_color && std::io::stdout().is_terminal(),
        })
    }

    fn wrap(self, code: &str, s: &str) -> String {
        if self.0 {
            format!("\x1b[{code}m{s}\x1b[0m")
        } else {
            s.to_string()
        }
    }

    fn bold(self, s: &str) -> String {
        self.wrap("1", s)
    }

    fn green(self, s: &str) -> String {
        self.wrap("32", s)
    }

    fn red(self, s: &str) -> String {
        self.wrap("31", s)
    }

    fn dim(self, s: &str) -> String {
        self.wrap("2", s)
    }
}

/// `--color`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ColorChoice {
    /// On a terminal, unless `NO_COLOR` is set.
    Auto,
    /// Always.
    Always,
    /// Never.
    Never,
}
