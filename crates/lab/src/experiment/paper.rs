//! `[paper]`: the table an experiment reproduces, its cells, derived values
//! and claims, and their checks against the experiment.

use super::file::{Compare, Experiment, ExperimentError, Metric, Over, RatioValue, Vary};
use super::plan::{ratio_value, serde_name};
use serde::{Deserialize, Serialize};

/// `[paper]`: the table this experiment reproduces and the paper's values.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Paper {
    /// E.g. `Table 3`.
    pub table: String,
    /// Citation of the paper.
    pub source: String,
    /// The statistic the table reports.
    pub metric: Metric,
    /// The parameter along the table's rows.
    pub vary: Vary,
    /// Remarks shown under the table (e.g. where the values come from).
    #[serde(default)]
    pub note: String,
    /// The paper's cells, matched to ours by engine and parameters.
    #[serde(default)]
    pub cells: Vec<PaperCell>,
    /// Further paper tables computed from this sweep's points (Table 5 from
    /// the runs of Table 3).
    #[serde(default)]
    pub derived: Vec<PaperDerived>,
    /// The paper's claims, checked against ours.
    #[serde(default)]
    pub claims: Vec<PaperClaim>,
    /// Settings of the paper this machine cannot run, reached by extending
    /// our measurements (the report says so and why).
    #[serde(default)]
    pub projection: Option<PaperProjection>,
}

/// `[paper.projection]`: the paper's values of one parameter beyond what
/// runs here (40,000 connections against a 20,000 open-files limit); the
/// report extends a line through our medians to them, where the data
/// support one.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PaperProjection {
    /// The parameter projected along.
    pub along: Vary,
    /// The paper's values to project to.
    pub to: Vec<f64>,
    /// Why these settings cannot run here.
    pub why: String,
}

/// How a derived table picks, per engine, the point it reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DerivedPick {
    /// The setting whose first statistic (the median over repetitions) is
    /// the largest of the sweep: the locality paper's Table 5 reports each
    /// engine's worst send deviation.
    LargestFirstStat,
    /// The setting with the highest achieved request rate (median over
    /// repetitions): the load-balancing paper's Table 2 reports each
    /// configuration at its limit.
    HighestRate,
}

/// `[[paper.derived]]`: a paper table computed from this sweep's points.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PaperDerived {
    /// E.g. `Table 5`.
    pub table: String,
    /// The statistic the table reports.
    pub metric: Metric,
    /// Which point stands for each engine.
    pub pick: DerivedPick,
    /// Remarks shown under the table.
    #[serde(default)]
    pub note: String,
    /// The paper's cells (usually by engine only).
    #[serde(default)]
    pub cells: Vec<PaperCell>,
}

/// One cell of the paper's table. Parameters left out match any value.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PaperCell {
    /// Engine column.
    pub engine: String,
    /// Total connections of the row.
    #[serde(default)]
    pub connections: Option<u64>,
    /// Active ratio of the row.
    #[serde(default)]
    pub active_ratio: Option<RatioValue>,
    /// Rate of the row.
    #[serde(default)]
    pub rate_per_s: Option<f64>,
    /// Mean in microseconds.
    #[serde(default)]
    pub mean_us: Option<f64>,
    /// Median in microseconds.
    #[serde(default)]
    pub median_us: Option<f64>,
    /// Standard deviation in microseconds.
    #[serde(default)]
    pub stddev_us: Option<f64>,
    /// Maximum in microseconds (send deviation).
    #[serde(default)]
    pub max_us: Option<f64>,
    /// Requests per second the configuration carried (`throughput`'s rate).
    #[serde(default)]
    pub req_per_s: Option<f64>,
    /// Response traffic in Mbit/s (`throughput`'s traffic).
    #[serde(default)]
    pub mbit_per_s: Option<f64>,
    /// The gateway's CPU utilisation as a share of its CPU, 0-1
    /// (`gateway_cpu`'s busy).
    #[serde(default)]
    pub gateway_cpu_share: Option<f64>,
    /// The web servers' CPU utilisation, mean over the servers, as a share
    /// of one CPU, 0-1 (`backend_cpu`'s mean).
    #[serde(default)]
    pub backend_cpu_share: Option<f64>,
}

impl PaperCell {
    /// The cell's three statistics in the order of `metric`'s
    /// [`Metric::stat_names`].
    pub fn stats(&self, metric: Metric) -> [Option<f64>; 3] {
        match metric {
            Metric::ServiceLatency => [self.mean_us, self.median_us, self.stddev_us],
            Metric::SendDeviation => [self.stddev_us, self.median_us, self.max_us],
            Metric::PollCall | Metric::Cycle => [self.mean_us, self.median_us, None],
            Metric::SendShares => [None; 3],
            Metric::BackendCpu => [self.backend_cpu_share, None, None],
            Metric::Throughput => [self.req_per_s, self.mbit_per_s, None],
            Metric::GatewayCpu => [self.gateway_cpu_share, None, None],
        }
    }
}

/// A claim of the paper, in one of four shapes:
///
/// - **along a parameter** (`from` and `to` given, no `versus`): for each
///   engine, the statistic at row `to` divided by the one at row `from`
///   (rows along `along`, the other parameters equal);
/// - **versus an engine** (`versus` given): at every row (or the rows whose
///   `along` value lies in `[from, to]`), each engine's statistic divided by
///   the `versus` engine's;
/// - **a peak** (`over = "peak"`): each engine's highest value over its rows
///   (those in `[from, to]` if given, and with `peak_within_us` only rows
///   whose mean service latency stays within it), taken per repetition,
///   divided by the `versus` engine's peak, or judged as a value without
///   `versus`;
/// - **a change of a ratio** (`over = "change"`, with `versus`, `from`
///   and `to`): each engine's ratio against `versus` at row `to` divided
///   by the same ratio at row `from`, per repetition;
/// - **against another metric** (`versus_metric`): at every row (or those
///   in `[from, to]`), each point's statistic divided by the same point's
///   statistic of the other metric (the polling paper's response time
///   against the server's cycle);
/// - **a plain value** (none of these): the statistic itself at every row.
///
/// `compare = "difference"` subtracts instead of dividing (along, versus
/// and peak-versus claims). The claim holds when our whole spread of the
/// ratio, difference or value lies within `[expect_min, expect_max]`.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PaperClaim {
    /// The paper's table, figure or section the claim comes from; defaults
    /// to [`Paper::table`].
    #[serde(default)]
    pub source: String,
    /// The claim in words, as the paper or the design states it.
    pub text: String,
    /// Engines it is about.
    pub engines: Vec<String>,
    /// The metric; defaults to [`Paper::metric`].
    #[serde(default)]
    pub metric: Option<Metric>,
    /// One of the metric's [`Metric::stat_names`]; defaults to the first.
    #[serde(default)]
    pub statistic: Option<String>,
    /// The parameter `from` and `to` refer to; defaults to [`Paper::vary`].
    #[serde(default)]
    pub along: Option<Vary>,
    /// Row value the ratio starts from (or the low end of the rows compared).
    #[serde(default)]
    pub from: Option<f64>,
    /// Row value the ratio ends at (or the high end of the rows compared).
    #[serde(default)]
    pub to: Option<f64>,
    /// The paper's ratio, if its text gives one (the report computes it from
    /// the paper's cells instead when they cover the claim's rows).
    #[serde(default)]
    pub paper_ratio: Option<f64>,
    /// The paper's number when it is not a ratio: a difference (`compare =
    /// "difference"`) or a value, in the metric's stored unit (µs for
    /// times, shares for CPU, req/s or Mbit/s for throughput).
    #[serde(default)]
    pub paper_value: Option<f64>,
    /// `rows` (the default) or `peak`: compare each engine's highest value
    /// over its rows.
    #[serde(default)]
    pub over: Over,
    /// `ratio` (the default) or `difference`.
    #[serde(default)]
    pub compare: Compare,
    /// With `over = "peak"`: a row counts towards an engine's peak only in
    /// the repetitions whose mean service latency there stays at or below
    /// this many µs (a saturated open-loop point still reports the offered
    /// rate while its queue grows).
    #[serde(default)]
    pub peak_within_us: Option<f64>,
    /// A short heading for the report's brief table of the paper's numbers
    /// beside ours (claims without one are listed only with the claims).
    #[serde(default)]
    pub label: Option<String>,
    /// The paper's number as the range its text gives (`46-47 %` of the
    /// direct server's CPU: `[0.46, 0.47]`), in the unit of `paper_ratio`
    /// or `paper_value`; its midpoint stands for it where one number is
    /// needed (ours / paper).
    #[serde(default)]
    pub paper_range: Option<[f64; 2]>,
    /// Print the claim's ratios as percentages (0.465 as 46.5 %).
    #[serde(default)]
    pub percent: bool,
    /// Compare each engine with this one at the same row.
    #[serde(default)]
    pub versus: Option<String>,
    /// The claim holds when our whole spread is at least this.
    #[serde(default)]
    pub expect_min: Option<f64>,
    /// The claim holds when our whole spread is at most this.
    #[serde(default)]
    pub expect_max: Option<f64>,
    /// The claim cannot be measured on this setup, and why.
    #[serde(default)]
    pub unmeasurable: Option<String>,
    /// Only the rows at these rates (req/s): a claim whose tolerance the
    /// paper gives per rate is written once per tolerance. Not with a claim
    /// along the rate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rates: Option<Vec<f64>>,
    /// Divide by this metric of the same point instead of by another row or
    /// engine (its statistic of the same name, else its first).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub versus_metric: Option<Metric>,
    /// A value or a peak without `versus`: our figure divided by this
    /// before it is compared (the gateway's traffic over six segments,
    /// against the paper's traffic per segment).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub divide_by: Option<f64>,
}

impl PaperClaim {
    /// Whether a row at `rate` req/s is one this claim is about.
    pub fn covers_rate(&self, rate: f64) -> bool {
        self.rates.as_ref().is_none_or(|rs| {
            rs.iter()
                .any(|r| (r - rate).abs() <= 1e-9 * r.abs().max(1.0))
        })
    }
}

/// The shape of a [`PaperClaim`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ClaimShape<'a> {
    /// The ratio of the statistic between rows `from` and `to`.
    Along {
        /// Start row.
        from: f64,
        /// End row.
        to: f64,
    },
    /// Each engine against `engine` at the same row, at rows in `range`.
    Versus {
        /// The engine divided by.
        engine: &'a str,
        /// Rows compared: `along` within `[from, to]`; all rows if `None`.
        range: Option<(f64, f64)>,
    },
    /// Each engine's highest value over the rows in `range` (all if
    /// `None`), against the `versus` engine's highest, or alone.
    Peak {
        /// The engine compared with, if any.
        versus: Option<&'a str>,
        /// Rows considered: `along` within `[from, to]`; all rows if `None`.
        range: Option<(f64, f64)>,
    },
    /// How each engine's ratio against `versus` changes from row `from` to
    /// row `to`.
    Change {
        /// The engine divided by.
        versus: &'a str,
        /// Start row.
        from: f64,
        /// End row.
        to: f64,
    },
    /// Each point's statistic against another metric of the same point, at
    /// rows in `range`.
    Metrics {
        /// The metric divided by.
        other: Metric,
        /// Rows compared: `along` within `[from, to]`; all rows if `None`.
        range: Option<(f64, f64)>,
    },
    /// The statistic itself, at every row.
    Value,
}

impl PaperClaim {
    /// The claim's metric, given the paper's.
    pub fn metric_in(&self, paper: &Paper) -> Metric {
        self.metric.unwrap_or(paper.metric)
    }

    /// The parameter the claim's rows vary along, given the paper's.
    pub fn along_in(&self, paper: &Paper) -> Vary {
        self.along.unwrap_or(paper.vary)
    }

    /// Index in `versus_metric`'s statistics of the one the claim's
    /// statistic is divided by: the one of the same name, else the first.
    pub fn versus_statistic_index(&self, paper: &Paper) -> usize {
        let name = self.metric_in(paper).stat_names()[self.statistic_index(paper)];
        self.versus_metric
            .and_then(|m| m.stat_names().iter().position(|n| *n == name))
            .unwrap_or(0)
    }

    /// Index of the claim's statistic in its metric's
    /// [`Metric::stat_names`] (0 when unnamed or unknown; validated on load).
    pub fn statistic_index(&self, paper: &Paper) -> usize {
        let names = self.metric_in(paper).stat_names();
        self.statistic
            .as_deref()
            .and_then(|s| names.iter().position(|n| *n == s))
            .unwrap_or(0)
    }

    /// The paper's number the claim's text states: `paper_ratio`,
    /// `paper_value`, or the midpoint of `paper_range`.
    pub fn paper_stated(&self) -> Option<f64> {
        self.paper_ratio
            .or(self.paper_value)
            .or(self.paper_range.map(|[a, b]| (a + b) / 2.0))
    }

    /// The claim's shape.
    pub fn shape(&self) -> ClaimShape<'_> {
        if let (Over::Change, Some(versus), Some(from), Some(to)) =
            (self.over, self.versus.as_deref(), self.from, self.to)
        {
            return ClaimShape::Change { versus, from, to };
        }
        if let Some(other) = self.versus_metric {
            return ClaimShape::Metrics {
                other,
                range: self.from.zip(self.to).map(|(a, b)| (a.min(b), a.max(b))),
            };
        }
        if self.over == Over::Peak {
            return ClaimShape::Peak {
                versus: self.versus.as_deref(),
                range: self.from.zip(self.to).map(|(a, b)| (a.min(b), a.max(b))),
            };
        }
        match (&self.versus, self.from, self.to) {
            (Some(v), from, to) => ClaimShape::Versus {
                engine: v,
                range: from.zip(to).map(|(a, b)| (a.min(b), a.max(b))),
            },
            (None, Some(from), Some(to)) => ClaimShape::Along { from, to },
            _ => ClaimShape::Value,
        }
    }
}

impl Experiment {
    /// Checks `[paper]`: engines named by cells and claims exist, claim
    /// statistics belong to their metric, and claim bounds agree.
    pub(super) fn validate_paper(&self, p: &Paper, origin: &str) -> Result<(), ExperimentError> {
        let check = PaperCheck {
            experiment: self,
            paper: p,
            origin,
        };
        check.web_metric("paper.metric".into(), p.metric)?;
        check.cells("paper.cells", &p.cells)?;
        if let Some(proj) = &p.projection {
            check.projection(proj)?;
        }
        for (d, derived) in p.derived.iter().enumerate() {
            check.derived(d, derived)?;
        }
        for (i, c) in p.claims.iter().enumerate() {
            check.claim(i, c)?;
        }
        Ok(())
    }
}

/// The checks of [`Experiment::validate_paper`]; each refusal names its
/// field.
struct PaperCheck<'a> {
    experiment: &'a Experiment,
    paper: &'a Paper,
    origin: &'a str,
}

/// The field `name` of claim `i`.
fn claim_field(i: usize, name: &str) -> String {
    format!("paper.claims[{i}].{name}")
}

type Checked = Result<(), ExperimentError>;

impl PaperCheck<'_> {
    /// The refusal of `field`.
    fn bad(&self, field: String, message: String) -> ExperimentError {
        ExperimentError::Invalid {
            origin: self.origin.to_string(),
            field,
            message,
        }
    }

    /// `e` must be one of the experiment's engines.
    fn engine(&self, field: String, e: &str) -> Checked {
        if self.experiment.server.engines.iter().any(|x| x == e) {
            Ok(())
        } else {
            Err(self.bad(field, format!("{e:?} is not in server.engines")))
        }
    }

    /// A web metric needs a `[web]` section.
    fn web_metric(&self, field: String, m: Metric) -> Checked {
        if m.is_web() && self.experiment.web.is_none() {
            Err(self.bad(
                field,
                format!(
                    "{}: a web metric, but the experiment has no [web] section",
                    serde_name(&m)
                ),
            ))
        } else {
            Ok(())
        }
    }

    /// The paper's cells under `prefix`.
    fn cells(&self, prefix: &str, cells: &[PaperCell]) -> Checked {
        for (i, c) in cells.iter().enumerate() {
            self.cell(&format!("{prefix}[{i}]"), c)?;
        }
        Ok(())
    }

    /// One cell, at `at`: its engine, ratio and finite, non-negative values
    /// (web values only with `[web]`).
    fn cell(&self, at: &str, c: &PaperCell) -> Checked {
        self.engine(format!("{at}.engine"), &c.engine)?;
        if let Some(r) = &c.active_ratio {
            ratio_value(r).map_err(|e| self.bad(format!("{at}.active_ratio"), e))?;
        }
        for (name, v) in [
            ("mean_us", c.mean_us),
            ("median_us", c.median_us),
            ("stddev_us", c.stddev_us),
            ("max_us", c.max_us),
        ] {
            if v.is_some_and(|v| !v.is_finite()) {
                return Err(self.bad(
                    format!("{at}.{name}"),
                    "a finite number of microseconds".into(),
                ));
            }
        }
        for (name, v, what) in [
            ("req_per_s", c.req_per_s, "requests per second"),
            ("mbit_per_s", c.mbit_per_s, "Mbit/s"),
            (
                "gateway_cpu_share",
                c.gateway_cpu_share,
                "share of the gateway's CPU (0.78 for 78%)",
            ),
            (
                "backend_cpu_share",
                c.backend_cpu_share,
                "share of one CPU (0.56 for 56%)",
            ),
        ] {
            let Some(v) = v else { continue };
            if !v.is_finite() || v < 0.0 {
                return Err(self.bad(
                    format!("{at}.{name}"),
                    format!("{v}: a non-negative number, the {what}"),
                ));
            }
            if self.experiment.web.is_none() {
                return Err(self.bad(
                    format!("{at}.{name}"),
                    "a web value, but the experiment has no [web] section".into(),
                ));
            }
        }
        Ok(())
    }

    /// `[paper.projection]`: at least one positive value to project to.
    fn projection(&self, proj: &PaperProjection) -> Checked {
        if proj.to.is_empty() {
            return Err(self.bad(
                "paper.projection.to".into(),
                "give at least one value to project to".into(),
            ));
        }
        for (i, v) in proj.to.iter().enumerate() {
            if !v.is_finite() || *v <= 0.0 {
                return Err(self.bad(
                    format!("paper.projection.to[{i}]"),
                    format!("{v}: a positive number"),
                ));
            }
        }
        Ok(())
    }

    /// Derived table `d`: named, its metric and its cells.
    fn derived(&self, d: usize, derived: &PaperDerived) -> Checked {
        if derived.table.trim().is_empty() {
            return Err(self.bad(
                format!("paper.derived[{d}].table"),
                "name the paper's table, e.g. \"Table 5\"".into(),
            ));
        }
        self.web_metric(format!("paper.derived[{d}].metric"), derived.metric)?;
        self.cells(&format!("paper.derived[{d}].cells"), &derived.cells)
    }

    /// Claim `i`, in the order its fields are checked: what it compares,
    /// its rows, its metrics, the paper's number, its presentation.
    fn claim(&self, i: usize, c: &PaperClaim) -> Checked {
        self.claim_subjects(i, c)?;
        self.claim_rows(i, c)?;
        self.claim_metrics(i, c)?;
        let single = matches!(
            c.shape(),
            ClaimShape::Value | ClaimShape::Peak { versus: None, .. }
        );
        self.claim_paper_number(i, c, single)?;
        self.claim_presentation(i, c, single)
    }

    /// Its engines, `versus`, metric and statistic.
    fn claim_subjects(&self, i: usize, c: &PaperClaim) -> Checked {
        let field = |name: &str| claim_field(i, name);
        if c.engines.is_empty() {
            return Err(self.bad(field("engines"), "name at least one engine".into()));
        }
        for (j, e) in c.engines.iter().enumerate() {
            self.engine(field(&format!("engines[{j}]")), e)?;
        }
        if let Some(v) = &c.versus {
            self.engine(field("versus"), v)?;
            if c.engines.contains(v) {
                return Err(self.bad(
                    field("versus"),
                    format!("{v:?} is also in engines: an engine against itself"),
                ));
            }
        }
        let metric = c.metric_in(self.paper);
        self.web_metric(field("metric"), metric)?;
        if let Some(s) = &c.statistic {
            let names = metric.stat_names();
            if !names.contains(&s.as_str()) {
                return Err(self.bad(
                    field("statistic"),
                    format!(
                        "{s:?}: the {} statistics are {}",
                        serde_name(&metric),
                        names.map(|n| format!("{n:?}")).join(", ")
                    ),
                ));
            }
        }
        Ok(())
    }

    /// Finite numbers, `from` with `to`, `rates`, and `over = "change"`.
    fn claim_rows(&self, i: usize, c: &PaperClaim) -> Checked {
        let field = |name: &str| claim_field(i, name);
        for (name, v) in [
            ("from", c.from),
            ("to", c.to),
            ("paper_ratio", c.paper_ratio),
            ("paper_value", c.paper_value),
            ("peak_within_us", c.peak_within_us),
            ("expect_min", c.expect_min),
            ("expect_max", c.expect_max),
        ] {
            if v.is_some_and(|v| !v.is_finite()) {
                return Err(self.bad(field(name), "a finite number".into()));
            }
        }
        match (c.from, c.to) {
            (Some(_), None) => {
                return Err(self.bad(field("to"), "give to with from (or neither)".into()))
            }
            (None, Some(_)) => {
                return Err(self.bad(field("from"), "give from with to (or neither)".into()))
            }
            (Some(f), Some(t))
                if c.versus.is_none()
                    && c.versus_metric.is_none()
                    && c.over == Over::Rows
                    && f == t =>
            {
                return Err(self.bad(
                    field("to"),
                    format!("{t}: the same row as from; a ratio needs two rows"),
                ))
            }
            _ => {}
        }
        if let Some(rates) = &c.rates {
            self.claim_rates(i, c, rates)?;
        }
        if c.over == Over::Change {
            if c.versus.is_none() || c.from.is_none() {
                return Err(self.bad(
                    field("over"),
                    "\"change\" compares the ratio against versus at two rows: give versus, from and to".into(),
                ));
            }
            if c.from == c.to {
                return Err(self.bad(
                    field("to"),
                    "the same row as from; a change needs two rows".into(),
                ));
            }
        }
        Ok(())
    }

    /// `rates`: positive, and only for a claim from row to row or a value.
    fn claim_rates(&self, i: usize, c: &PaperClaim, rates: &[f64]) -> Checked {
        let field = |name: &str| claim_field(i, name);
        if rates.is_empty() || rates.iter().any(|r| !(r.is_finite() && *r > 0.0)) {
            return Err(self.bad(field("rates"), "a list of positive rates (req/s)".into()));
        }
        let value = c.versus.is_none()
            && c.from.is_none()
            && c.versus_metric.is_none()
            && c.over == Over::Rows;
        if !value && (c.versus.is_some() || c.from.is_none() || c.over != Over::Rows) {
            return Err(self.bad(
                field("rates"),
                "only for a claim from one row to another (from and to), or a value at every row"
                    .into(),
            ));
        }
        if !value && c.along.unwrap_or(self.paper.vary) == Vary::Rate {
            return Err(self.bad(
                field("rates"),
                "a claim along the rate takes from and to, not rates".into(),
            ));
        }
        Ok(())
    }

    /// `versus_metric`, `compare` against the shape, and the bounds' order.
    fn claim_metrics(&self, i: usize, c: &PaperClaim) -> Checked {
        let field = |name: &str| claim_field(i, name);
        if let Some(m) = c.versus_metric {
            self.web_metric(field("versus_metric"), m)?;
            if m == c.metric_in(self.paper) {
                return Err(self.bad(
                    field("versus_metric"),
                    format!("{}: the claim's own metric", serde_name(&m)),
                ));
            }
            if c.versus.is_some() || c.over != Over::Rows {
                return Err(self.bad(
                    field("versus_metric"),
                    "against another metric of the same point: not with versus or over".into(),
                ));
            }
        }
        if (c.over == Over::Change || c.versus_metric.is_some()) && c.compare == Compare::Difference
        {
            return Err(self.bad(
                field("compare"),
                "a change of a ratio, or a metric against another, is a ratio".into(),
            ));
        }
        if let (Some(lo), Some(hi)) = (c.expect_min, c.expect_max) {
            if lo > hi {
                return Err(self.bad(
                    field("expect_min"),
                    format!("{lo} is above expect_max = {hi}: no value can hold"),
                ));
            }
        }
        Ok(())
    }

    /// The paper's number in the field the comparison takes,
    /// `peak_within_us` and `paper_range`. `single`: the claim judges one
    /// value (a value, or a peak without versus).
    fn claim_paper_number(&self, i: usize, c: &PaperClaim, single: bool) -> Checked {
        let field = |name: &str| claim_field(i, name);
        if c.compare == Compare::Difference {
            if single {
                return Err(self.bad(
                    field("compare"),
                    "a difference needs two values: give versus, or from and to".into(),
                ));
            }
            if c.paper_ratio.is_some() {
                return Err(self.bad(
                    field("paper_ratio"),
                    "a difference claim gives the paper's number as paper_value".into(),
                ));
            }
        } else if !single && c.paper_value.is_some() {
            return Err(self.bad(
                field("paper_value"),
                "a ratio claim gives the paper's number as paper_ratio".into(),
            ));
        }
        if let Some(w) = c.peak_within_us {
            if c.over != Over::Peak {
                return Err(self.bad(
                    field("peak_within_us"),
                    "only a peak claim (over = \"peak\") limits its rows by latency".into(),
                ));
            }
            if w <= 0.0 {
                return Err(self.bad(
                    field("peak_within_us"),
                    format!("{w}: a positive number of microseconds"),
                ));
            }
        }
        if let Some([lo, hi]) = c.paper_range {
            if !lo.is_finite() || !hi.is_finite() || lo > hi {
                return Err(self.bad(
                    field("paper_range"),
                    format!("[{lo}, {hi}]: two finite numbers, the lower first"),
                ));
            }
            if c.paper_ratio.is_some() || c.paper_value.is_some() {
                return Err(self.bad(
                    field("paper_range"),
                    "give the paper's number once: paper_range, paper_ratio or paper_value".into(),
                ));
            }
        }
        Ok(())
    }

    /// `divide_by`, `percent`, `label`, a value claim's bounds (or its
    /// context row) and `unmeasurable`. `single` as in
    /// [`PaperCheck::claim_paper_number`].
    fn claim_presentation(&self, i: usize, c: &PaperClaim, single: bool) -> Checked {
        let field = |name: &str| claim_field(i, name);
        if let Some(d) = c.divide_by {
            if !single {
                return Err(self.bad(
                    field("divide_by"),
                    "only a value, or a peak without versus, is divided".into(),
                ));
            }
            if !(d.is_finite() && d > 0.0) {
                return Err(self.bad(field("divide_by"), format!("{d}: a positive number")));
            }
        }
        if c.percent && (single || c.compare == Compare::Difference) {
            return Err(self.bad(field("percent"), "only ratios print as percentages".into()));
        }
        if c.label.as_deref().is_some_and(|l| l.trim().is_empty()) {
            return Err(self.bad(field("label"), "a short heading, or leave label out".into()));
        }
        // Without bounds a value claim is a context row: the paper's
        // number beside ours, not judged (issue 30: a 300 MHz gateway's
        // figure that no current CPU can miss).
        if single
            && c.expect_min.is_none()
            && c.expect_max.is_none()
            && c.unmeasurable.is_none()
            && c.paper_value.is_none()
            && c.paper_range.is_none()
        {
            return Err(self.bad(
                field("expect_max"),
                "a value claim (no from/to, no versus) or a peak without versus needs expect_min or expect_max, unmeasurable, or (a context row) paper_value".into(),
            ));
        }
        if c.unmeasurable
            .as_deref()
            .is_some_and(|u| u.trim().is_empty())
        {
            return Err(self.bad(
                field("unmeasurable"),
                "say why the claim cannot be measured here".into(),
            ));
        }
        Ok(())
    }
}
