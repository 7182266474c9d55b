//! The results of a pipeline sweep (`pipeline.json`, `runs.csv`): the
//! recorded runs, capacities, spreads, cells and the claims judged on them.

use super::experiment::{LinkSpec, PipelineExperiment, PipelineRunParams};
use super::paper::{size_of, ClaimStatistic, PipelineClaim};
use super::PIPELINE_SWEEP_SCHEMA;
use crate::validity::{cannot_judge_reason, Validity};
use crate::verdict::{Judgement, Verdict};
use connlab_os::Environment;
use serde::{Deserialize, Serialize};
use std::path::Path;

/// One finished run in `pipeline.json`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct PipelineRunRecord {
    /// `PipelineRunParams::id`.
    pub id: String,
    /// The parameters.
    pub params: PipelineRunParams,
    /// The library's result (throughput, per layer, projection).
    pub result: connlab_pipeline::PipelineResult,
    /// Throughput × layers / the one-layer throughput of the same mode,
    /// line, size and repetition (the paper's definition).
    pub relative_capacity: Option<f64>,
    /// Relative capacity / layers.
    pub efficiency: Option<f64>,
    /// The same from the projected (one core per thread) throughputs.
    pub projected_relative_capacity: Option<f64>,
    /// Projected relative capacity / layers.
    pub projected_efficiency: Option<f64>,
    /// Unix seconds when the run finished.
    pub finished_unix_s: f64,
    /// Its gates (`validity`), its machine (`machine`) and who used the CPUs
    /// meanwhile (`window_cpu`), while it ran (role `runner`: this process, whose
    /// threads run the pipeline).
    #[serde(flatten)]
    pub checked: crate::validity::Checked,
}

/// `pipeline.json`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct PipelineSweep {
    /// [`PIPELINE_SWEEP_SCHEMA`].
    pub schema: String,
    /// The experiment as run.
    pub experiment: PipelineExperiment,
    /// Whether `--quick` reduced it.
    pub quick: bool,
    /// Where it ran.
    pub environment: Environment,
    /// Unix seconds at the start.
    pub started_unix_s: f64,
    /// Runs planned.
    pub runs_total: usize,
    /// Finished runs, in plan order.
    pub runs: Vec<PipelineRunRecord>,
    /// CPUs the runs' threads could use (the distinct CPUs of
    /// `pipeline.cpu_map`, else the sweep's affinity): measured relative
    /// capacity and efficiency are judged only at layer counts whose runs
    /// (and one-layer runs) start no more threads than this. Absent in
    /// results written before it was recorded: the machine's CPU count.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpus: Option<usize>,
}

/// Relative capacity and efficiency of `throughput` at `layers` against
/// the one-layer `base` (the paper's definitions); `None` without a base.
pub fn capacity(throughput: f64, layers: u32, base: Option<f64>) -> (Option<f64>, Option<f64>) {
    match base {
        Some(b) if b > 0.0 && layers > 0 => {
            let rc = connlab_pipeline::relative_capacity(throughput, layers as usize, b);
            (Some(rc), Some(rc / f64::from(layers)))
        }
        _ => (None, None),
    }
}

/// Largest projected efficiency taken as physical: above it the projected
/// run with more layers beats the projected one-layer run, which the stage
/// timings cannot support.
pub const MAX_PROJECTED_EFFICIENCY: f64 = 1.1;

/// Projected relative capacity and efficiency of a run at `layers` against
/// its one-layer `base` run, or why there are none.
pub fn projected_capacity(
    run: &connlab_pipeline::PipelineResult,
    layers: u32,
    base: Option<&connlab_pipeline::PipelineResult>,
) -> Result<(f64, f64), String> {
    let p = run
        .projection
        .value()
        .map_err(|why| format!("no projection: {why}"))?;
    let base = base.ok_or("no projection: no one-layer run to compare with")?;
    let b = base
        .projection
        .value()
        .map_err(|why| format!("no projection: the one-layer run has none ({why})"))?;
    let (Some(rc), Some(eff)) = capacity(p, layers, Some(b)) else {
        return Err("no projection: the one-layer projection is zero".into());
    };
    if eff > MAX_PROJECTED_EFFICIENCY {
        return Err(format!(
            "no projection: projected efficiency {eff:.2} is above 1 (the {layers}-layer projection, {p:.0} Mbit/s, beats the one-layer one, {b:.0} Mbit/s, bounded by {})",
            base.projection.bound
        ));
    }
    Ok((rc, eff))
}

/// `8 KiB`, `1,000 B`.
pub fn size_text(bytes: u64) -> String {
    if bytes > 0 && bytes.is_multiple_of(1024) {
        format!("{} KiB", bytes / 1024)
    } else {
        format!("{bytes} B")
    }
}

/// Median and range of one figure over repetitions.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Spread {
    /// Median (the mean of the middle two for an even count).
    pub median: f64,
    /// Smallest.
    pub min: f64,
    /// Largest.
    pub max: f64,
    /// Values.
    pub n: usize,
}

impl Spread {
    /// The spread of `values`; `None` if there are none.
    pub fn of(values: &[f64]) -> Option<Spread> {
        let mut v: Vec<f64> = values.iter().copied().filter(|v| v.is_finite()).collect();
        if v.is_empty() {
            return None;
        }
        v.sort_by(f64::total_cmp);
        let n = v.len();
        Some(Spread {
            median: if n % 2 == 1 {
                v[n / 2]
            } else {
                (v[n / 2 - 1] + v[n / 2]) / 2.0
            },
            min: v[0],
            max: v[n - 1],
            n,
        })
    }

    /// `0.87 (0.85–0.90)`, or `0.87` when every value is the same.
    pub fn text(&self, digits: usize) -> String {
        let m = format!("{:.digits$}", self.median);
        let (a, b) = (
            format!("{:.digits$}", self.min),
            format!("{:.digits$}", self.max),
        );
        if a == b {
            m
        } else {
            format!("{m} ({a}–{b})")
        }
    }
}

/// Our figures for one mode, line, size, message count and layer count:
/// one value per valid repetition (runs that failed a gate are left out,
/// and a relative capacity needs a valid one-layer run too).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct OursCell {
    /// Finished valid repetitions.
    pub runs: usize,
    /// The validity records of the runs left out (failed a gate).
    pub invalid: Vec<Validity>,
    /// The validity records of the one-layer runs of valid repetitions
    /// that failed a gate (those repetitions have no relative capacity).
    pub invalid_baselines: Vec<Validity>,
    /// Measured Mbit/s, relative capacity, efficiency.
    pub measured: [Vec<f64>; 3],
    /// Projected Mbit/s, relative capacity, efficiency.
    pub projected: [Vec<f64>; 3],
    /// Why repetitions have no projected Mbit/s (distinct reasons).
    pub no_projection: Vec<String>,
    /// Why repetitions have no projected relative capacity (distinct).
    pub no_projected_capacity: Vec<String>,
    /// What bounded the projections (distinct).
    pub bounds: Vec<String>,
    /// Run-to-completion: the share of layer-lock acquisitions that found
    /// the lock held by another worker, per valid repetition (none in
    /// layer-parallel mode, which takes no layer lock).
    pub lock_contention: Vec<f64>,
}

/// A claim judged on the paper's own values and our measured figures, with
/// our projected figures beside them.
#[derive(Clone, Debug)]
pub struct ClaimResult {
    /// The claim.
    pub claim: PipelineClaim,
    /// On the paper's tables.
    pub paper: Judgement,
    /// On our measured figures. A claim on relative capacity or efficiency
    /// is judged only at the layer counts whose runs, and their one-layer
    /// runs, start no more threads than [`ClaimResult::cpus`]; the detail
    /// gives the projected figures of the other layer counts, unjudged.
    pub measured: Judgement,
    /// Our projected figures (one core per thread) at every layer count the
    /// claim speaks of, and whether each meets the claim's bounds: shown as
    /// a projection, never a verdict.
    pub projection: String,
    /// The CPUs measured figures were held to ([`PipelineSweep::judging_cpus`]).
    pub cpus: usize,
}

/// Why a comparison of a claim has no values.
enum Missing {
    /// Nothing to compare (no run, no projection): cannot be measured.
    Measure(String),
    /// Runs exist, but none valid: cannot be judged, and why.
    Judge(String),
}

impl From<String> for Missing {
    fn from(why: String) -> Missing {
        Missing::Measure(why)
    }
}

impl From<&str> for Missing {
    fn from(why: &str) -> Missing {
        Missing::Measure(why.into())
    }
}

impl Missing {
    fn text(&self) -> &str {
        match self {
            Missing::Measure(t) | Missing::Judge(t) => t,
        }
    }
}

/// The reason of runs left out for failing their gates.
fn invalid_text(what: &str, v: &[Validity]) -> String {
    let refs: Vec<&Validity> = v.iter().collect();
    format!(
        "{what}: {}",
        cannot_judge_reason(&refs).replace("points", "runs")
    )
}

/// ` (2 invalid runs left out)`, or nothing.
fn left_out_text(n: usize) -> String {
    match n {
        0 => String::new(),
        1 => " (1 invalid run left out)".into(),
        n => format!(" ({n} invalid runs left out)"),
    }
}

/// Where a claim's values come from.
#[derive(Clone, Copy, PartialEq)]
enum Source {
    Paper,
    Measured,
    Projected,
}

/// `1.2 %–3.4 %`: shares as percentages.
fn percent_text(v: &[f64]) -> String {
    Spread::of(v).map_or("—".into(), |s| {
        let (a, b) = (
            format!("{:.1} %", s.min * 100.0),
            format!("{:.1} %", s.max * 100.0),
        );
        if a == b {
            a
        } else {
            format!("{a}–{b}")
        }
    })
}

/// Whether a statistic compares a run with its one-layer run (relative
/// capacity, efficiency): on this machine's shared CPUs such a ratio
/// measures the sharing, so it is judged only where the threads fit.
fn rests_on_capacity(s: ClaimStatistic) -> bool {
    matches!(
        s,
        ClaimStatistic::Efficiency
            | ClaimStatistic::RelativeCapacity
            | ClaimStatistic::EfficiencyFalls
            | ClaimStatistic::CapacityRises
            | ClaimStatistic::EfficiencyBySize
    )
}

fn within(v: f64, c: &PipelineClaim) -> bool {
    c.expect_min.is_none_or(|m| v >= m) && c.expect_max.is_none_or(|m| v <= m)
}

fn values_text(v: &[f64]) -> String {
    Spread::of(v).map_or("—".into(), |s| {
        let (a, b) = (format!("{:.2}", s.min), format!("{:.2}", s.max));
        if a == b {
            a
        } else {
            format!("{a}–{b}")
        }
    })
}

impl PipelineSweep {
    /// Reads `DIR/pipeline.json`.
    pub fn open(dir: &Path) -> Result<PipelineSweep, crate::ResultsError> {
        let path = dir.join("pipeline.json");
        let text = std::fs::read_to_string(&path).map_err(|source| crate::ResultsError::Io {
            path: path.display().to_string(),
            source,
        })?;
        let sweep: PipelineSweep =
            serde_json::from_str(&text).map_err(|e| crate::ResultsError::Format {
                path: path.display().to_string(),
                message: e.to_string(),
            })?;
        if sweep.schema != PIPELINE_SWEEP_SCHEMA {
            return Err(crate::ResultsError::Format {
                path: path.display().to_string(),
                message: format!(
                    "schema {:?}, expected {PIPELINE_SWEEP_SCHEMA}",
                    sweep.schema
                ),
            });
        }
        Ok(sweep)
    }

    /// Writes `DIR/pipeline.json` (temporary name, then rename) and `DIR/runs.csv`.
    pub fn save(&self, dir: &Path) -> Result<(), crate::ResultsError> {
        let io = |path: &Path| {
            let path = path.display().to_string();
            move |source| crate::ResultsError::Io { path, source }
        };
        let path = dir.join("pipeline.json");
        let json = serde_json::to_string_pretty(self).map_err(|e| crate::ResultsError::Format {
            path: path.display().to_string(),
            message: e.to_string(),
        })?;
        connlab_os::files::write_atomic(&path, json + "\n").map_err(io(&path))?;
        let csv = dir.join("runs.csv");
        let text = self.csv().map_err(|e| crate::ResultsError::Format {
            path: csv.display().to_string(),
            message: e.to_string(),
        })?;
        connlab_os::files::write_atomic(&csv, text).map_err(io(&csv))
    }

    /// The paper's conditions as this sweep labels them: line and messages
    /// per run.
    pub fn paper_conditions(&self) -> Option<(String, u64)> {
        let p = self.experiment.paper.as_ref()?;
        Some((LinkSpec::parse(&p.link).ok()?.label(), p.messages))
    }

    /// The configured rate of the paper's line at a message size, Mbit/s
    /// of user data (a frame without layer headers is all user data): what
    /// stands in for our line alone where no zero-layer run measured it.
    /// `None` for an unlimited or UDP line.
    pub fn line_alone_mbit_s(&self, message_size: u64) -> Option<f64> {
        let link = LinkSpec::parse(&self.experiment.paper.as_ref()?.link).ok()?;
        self.experiment
            .line_rate(link, message_size)
            .map(|bps| bps as f64 / 1e6)
    }

    /// Our line alone (the zero-layer runs) at a size over a line (label)
    /// with a message count, per valid repetition.
    pub fn line_alone_runs(&self, link: &str, message_size: u64, messages: u64) -> Vec<(u32, f64)> {
        self.line_alone(link, message_size, messages)
            .filter(|r| r.checked.is_valid())
            .map(|r| (r.params.repetition, r.result.throughput_mbit_s))
            .collect()
    }

    /// Every zero-layer run at a size over a line with a message count.
    fn line_alone<'a>(
        &'a self,
        link: &'a str,
        message_size: u64,
        messages: u64,
    ) -> impl Iterator<Item = &'a PipelineRunRecord> + 'a {
        self.runs.iter().filter(move |r| {
            r.params.layers == 0
                && r.params.link.label() == link
                && r.params.message_size == message_size
                && r.params.messages == messages
        })
    }

    /// Our figures for a mode, line (label), size, message count and layers.
    pub fn cell(
        &self,
        mode: &str,
        link: &str,
        message_size: u64,
        messages: u64,
        layers: u32,
    ) -> OursCell {
        let mut c = OursCell::default();
        let push = |v: &mut Vec<String>, s: String| {
            if !v.contains(&s) {
                v.push(s);
            }
        };
        for r in self.runs.iter().filter(|r| {
            r.params.mode == mode
                && r.params.link.label() == link
                && r.params.message_size == message_size
                && r.params.messages == messages
                && r.params.layers == layers
        }) {
            if let Some(v) = r.checked.validity.as_ref().filter(|v| !v.valid) {
                c.invalid.push(v.clone());
                continue;
            }
            c.runs += 1;
            let x = &r.result;
            let base = match self.run(&r.params.baseline()) {
                Some(b) if b.checked.is_valid() => Some(&b.result),
                Some(b) => {
                    if r.params.layers != 1 {
                        c.invalid_baselines.extend(b.checked.validity.clone());
                    }
                    None
                }
                None => None,
            };
            c.lock_contention.extend(x.lock_contention());
            c.measured[0].push(x.throughput_mbit_s);
            let (rc, eff) = capacity(
                x.throughput_mbit_s,
                layers,
                base.map(|b| b.throughput_mbit_s),
            );
            c.measured[1].extend(rc);
            c.measured[2].extend(eff);
            match x.projection.value() {
                Ok(v) => {
                    c.projected[0].push(v);
                    push(&mut c.bounds, x.projection.bound.clone());
                }
                Err(why) => push(&mut c.no_projection, why.to_string()),
            }
            match projected_capacity(x, layers, base) {
                Ok((rc, eff)) => {
                    c.projected[1].push(rc);
                    c.projected[2].push(eff);
                }
                Err(why) => push(&mut c.no_projected_capacity, why),
            }
        }
        c
    }

    /// Every claim of the paper, judged.
    pub fn claims(&self) -> Vec<ClaimResult> {
        let Some(paper) = &self.experiment.paper else {
            return Vec::new();
        };
        paper
            .claims
            .iter()
            .map(|c| ClaimResult {
                claim: c.clone(),
                paper: self.judge(c, Source::Paper),
                measured: self.judge(c, Source::Measured),
                projection: self.judge(c, Source::Projected).detail,
                cpus: self.judging_cpus(),
            })
            .collect()
    }

    /// CPUs the runs' threads could use: [`PipelineSweep::cpus`] as
    /// recorded, else the machine's CPU count.
    pub fn judging_cpus(&self) -> usize {
        self.cpus.unwrap_or(self.environment.cpu_count).max(1)
    }

    /// Whether measured relative capacity or efficiency of `mode` at each of
    /// `layers` may be judged: every such run and the one-layer run it is
    /// held against start no more threads than [`Self::judging_cpus`].
    /// `None` when they fit, else why not (`22 threads for 2 CPUs`).
    pub fn beyond_cpus(&self, mode: &str, layers: &[u32]) -> Option<String> {
        let cpus = self.judging_cpus();
        let need = layers
            .iter()
            .chain(std::iter::once(&1))
            .map(|&l| self.experiment.threads_of(mode, l))
            .max()
            .unwrap_or(0);
        (need > cpus).then(|| format!("{need} threads for {cpus} CPUs"))
    }

    fn claim_sizes(&self, c: &PipelineClaim) -> Vec<u64> {
        match &c.message_sizes {
            Some(v) => v.iter().filter_map(|s| size_of(s).ok()).collect(),
            None => {
                let v = self.experiment.paper_sizes();
                if v.is_empty() {
                    let mut v: Vec<u64> = self.runs.iter().map(|r| r.params.message_size).collect();
                    v.sort_unstable();
                    v.dedup();
                    v
                } else {
                    v
                }
            }
        }
    }

    /// The values of a statistic at one size and layer count, or why none.
    fn values(
        &self,
        c: &PipelineClaim,
        from: Source,
        size: u64,
        layers: u32,
        statistic: ClaimStatistic,
    ) -> Result<Vec<f64>, Missing> {
        let exp = &self.experiment;
        if statistic == ClaimStatistic::LockContention {
            return self.lock_contention(c, from, size, layers);
        }
        if from == Source::Paper {
            let cell = exp
                .paper_cell(size, layers)
                .ok_or("not in the paper's tables")?;
            return match statistic {
                ClaimStatistic::RelativeCapacity => Ok(vec![cell.relative_capacity]),
                ClaimStatistic::LineShare => {
                    let line = exp.paper_line(size).ok_or("no line-alone figure")?;
                    Ok(vec![cell.mbit_s / line.mbit_s])
                }
                _ => Ok(vec![cell.efficiency]),
            };
        }
        let (link, messages) = self
            .paper_conditions()
            .ok_or("the experiment names no paper line")?;
        let cell = self.cell(&c.mode, &link, size, messages, layers);
        if cell.runs == 0 && !cell.invalid.is_empty() {
            return Err(Missing::Judge(invalid_text("no valid run", &cell.invalid)));
        }
        if cell.runs == 0 {
            return Err(format!("no {} run over {link} with {messages} messages", c.mode).into());
        }
        let set = if from == Source::Measured {
            &cell.measured
        } else {
            &cell.projected
        };
        let why = |reasons: &[String]| {
            reasons
                .first()
                .cloned()
                .unwrap_or_else(|| "no value".into())
        };
        let v = match statistic {
            ClaimStatistic::RelativeCapacity => set[1].clone(),
            ClaimStatistic::LineShare => {
                let alone = self.line_alone_runs(&link, size, messages);
                let invalid: Vec<Validity> = self
                    .line_alone(&link, size, messages)
                    .filter_map(|r| r.checked.validity.clone().filter(|v| !v.valid))
                    .collect();
                if alone.is_empty() && !invalid.is_empty() {
                    return Err(Missing::Judge(invalid_text(
                        "no valid line-alone run",
                        &invalid,
                    )));
                }
                if alone.is_empty() {
                    let line = self
                        .line_alone_mbit_s(size)
                        .ok_or("the paper's line has no rate here (unlimited or UDP)")?;
                    set[0].iter().map(|v| v / line).collect()
                } else {
                    // Each repetition's figure against the same repetition's
                    // line alone (the median line alone if it has none).
                    let all: Vec<f64> = alone.iter().map(|a| a.1).collect();
                    let median = Spread::of(&all).map_or(f64::NAN, |s| s.median);
                    self.runs
                        .iter()
                        .filter(|r| {
                            r.params.mode == c.mode
                                && r.params.link.label() == link
                                && r.params.message_size == size
                                && r.params.messages == messages
                                && r.params.layers == layers
                                && r.checked.is_valid()
                        })
                        .filter_map(|r| {
                            let v = if from == Source::Measured {
                                Some(r.result.throughput_mbit_s)
                            } else {
                                r.result.projection.mbit_s
                            }?;
                            let line = alone
                                .iter()
                                .find(|a| a.0 == r.params.repetition)
                                .map_or(median, |a| a.1);
                            (line > 0.0).then(|| v / line)
                        })
                        .collect()
                }
            }
            _ => set[2].clone(),
        };
        let needs_base = statistic != ClaimStatistic::LineShare;
        if v.is_empty() && needs_base && !cell.invalid_baselines.is_empty() {
            return Err(Missing::Judge(invalid_text(
                "no valid one-layer run",
                &cell.invalid_baselines,
            )));
        }
        if v.is_empty() {
            return Err(match (from, statistic) {
                (Source::Projected, ClaimStatistic::LineShare) => why(&cell.no_projection),
                (Source::Projected, _) => why(&cell.no_projected_capacity),
                _ => "no one-layer run to compare with".into(),
            }
            .into());
        }
        Ok(v)
    }

    fn judge(&self, c: &PipelineClaim, from: Source) -> Judgement {
        if c.statistic == ClaimStatistic::NotMeasured {
            return Judgement::cannot_measure(c.unmeasurable.clone().unwrap_or_default());
        }
        let sizes = self.claim_sizes(c);
        let (mut parts, mut judged, mut failed) = (Vec::new(), 0, false);
        // The comparisons whose runs all failed their gates, with why.
        let mut unjudged: Vec<String> = Vec::new();
        let mut missing = |at: String, e: Missing, parts: &mut Vec<String>| {
            if let Missing::Judge(why) = &e {
                unjudged.push(format!("{at}: {why}"));
            }
            parts.push(format!("{at}: {}", e.text()));
        };
        // Measured capacity and efficiency only where the threads fit.
        let fit_rule = from == Source::Measured && rests_on_capacity(c.statistic);
        let mut beyond = 0;
        let mut not_here = |at: &str, why: String, projected: String, parts: &mut Vec<String>| {
            beyond += 1;
            parts.push(format!("{at}: not judged ({why}), projected {projected}"));
        };
        if c.statistic == ClaimStatistic::EfficiencyBySize {
            // Per layer count: every repetition of a larger size above every
            // one of the next smaller.
            for &l in &c.layers {
                let at = format!("{l} {}", if l == 1 { "layer" } else { "layers" });
                if let Some(why) = self.beyond_cpus(&c.mode, &[l]).filter(|_| fit_rule) {
                    let projected: Vec<String> = sizes
                        .iter()
                        .map(|&size| {
                            format!(
                                "{} {}",
                                size_text(size),
                                self.projected_text(c, size, l, ClaimStatistic::Efficiency)
                            )
                        })
                        .collect();
                    not_here(&at, why, projected.join(", "), &mut parts);
                    continue;
                }
                let per_size: Result<Vec<(u64, Vec<f64>)>, Missing> = sizes
                    .iter()
                    .map(|&size| {
                        self.values(c, from, size, l, ClaimStatistic::Efficiency)
                            .map(|v| (size, v))
                    })
                    .collect();
                match per_size {
                    Ok(mut v) => {
                        v.sort_by_key(|(size, _)| *size);
                        let ok = v.windows(2).all(|w| {
                            w[1].1.iter().copied().fold(f64::MAX, f64::min)
                                > w[0].1.iter().copied().fold(f64::MIN, f64::max)
                        });
                        judged += 1;
                        failed |= !ok;
                        let listed: Vec<String> = v
                            .iter()
                            .map(|(size, x)| format!("{} {}", size_text(*size), values_text(x)))
                            .collect();
                        let left: usize = sizes.iter().map(|&s| self.left_out(c, from, s, l)).sum();
                        parts.push(format!(
                            "{at}: {}{}{}",
                            listed.join(", "),
                            if ok { "" } else { " (not rising with size)" },
                            left_out_text(left)
                        ));
                    }
                    Err(e) => missing(at, e, &mut parts),
                }
            }
        }
        for &size in &sizes {
            if c.statistic == ClaimStatistic::EfficiencyBySize {
                break;
            }
            if matches!(
                c.statistic,
                ClaimStatistic::EfficiencyFalls | ClaimStatistic::CapacityRises
            ) {
                let (lo, hi) = (
                    c.layers.iter().copied().min().unwrap_or(1),
                    c.layers.iter().copied().max().unwrap_or(1),
                );
                let rises = c.statistic == ClaimStatistic::CapacityRises;
                let stat = if rises {
                    ClaimStatistic::RelativeCapacity
                } else {
                    ClaimStatistic::Efficiency
                };
                if let Some(why) = self.beyond_cpus(&c.mode, &[lo, hi]).filter(|_| fit_rule) {
                    let projected = format!(
                        "{} at {lo}, {} at {hi}",
                        self.projected_text(c, size, lo, stat),
                        self.projected_text(c, size, hi, stat)
                    );
                    not_here(&size_text(size), why, projected, &mut parts);
                    continue;
                }
                match (
                    self.values(c, from, size, lo, stat),
                    self.values(c, from, size, hi, stat),
                ) {
                    (Ok(a), Ok(b)) => {
                        let max = |v: &[f64]| v.iter().copied().fold(f64::MIN, f64::max);
                        let min = |v: &[f64]| v.iter().copied().fold(f64::MAX, f64::min);
                        let ok = if rises {
                            min(&b) > max(&a)
                        } else {
                            max(&b) < min(&a)
                        };
                        judged += 1;
                        failed |= !ok;
                        let lo_text = format!("{lo} {}", if lo == 1 { "layer" } else { "layers" });
                        parts.push(format!(
                            "{}: {} at {lo_text}, {} at {hi}{}{}",
                            size_text(size),
                            values_text(&a),
                            values_text(&b),
                            match (ok, rises) {
                                (true, _) => "",
                                (false, true) => " (not higher)",
                                (false, false) => " (not lower)",
                            },
                            left_out_text(
                                self.left_out(c, from, size, lo) + self.left_out(c, from, size, hi)
                            )
                        ));
                    }
                    (Err(e), _) | (_, Err(e)) => missing(size_text(size), e, &mut parts),
                }
                continue;
            }
            for &l in &c.layers {
                let at = format!(
                    "{} {l} {}",
                    size_text(size),
                    if l == 1 { "layer" } else { "layers" }
                );
                if let Some(why) = self.beyond_cpus(&c.mode, &[l]).filter(|_| fit_rule) {
                    let projected = self.projected_text(c, size, l, c.statistic);
                    not_here(&at, why, projected, &mut parts);
                    continue;
                }
                match self.values(c, from, size, l, c.statistic) {
                    Ok(v) => {
                        let ok = v.iter().all(|x| within(*x, c));
                        judged += 1;
                        failed |= !ok;
                        parts.push(format!(
                            "{at}: {}{}{}",
                            if c.statistic == ClaimStatistic::LockContention {
                                percent_text(&v)
                            } else {
                                values_text(&v)
                            },
                            if ok { "" } else { " (outside)" },
                            left_out_text(self.left_out(c, from, size, l))
                        ));
                    }
                    Err(e) => missing(at, e, &mut parts),
                }
            }
        }
        let detail = parts.join("; ");
        if judged == 0 && beyond > 0 && !failed && unjudged.is_empty() {
            return Judgement::cannot_measure(format!(
                "no layer count it speaks of runs with a CPU per thread here (measured figures are judged only where a run's threads, and its one-layer run's, fit the {} CPUs): {detail}",
                self.judging_cpus()
            ));
        }
        if failed {
            // A comparison that fails on valid runs decides the claim.
            Judgement::does_not_hold(detail)
        } else if !unjudged.is_empty() {
            Judgement {
                verdict: Verdict::CannotJudge(unjudged.join("; ")),
                detail,
            }
        } else if judged == 0 {
            Judgement::cannot_measure(detail)
        } else {
            Judgement::holds(detail)
        }
    }

    /// The lock-contention share of each valid run of the claim's mode at
    /// one size and layer count over the paper's line, or why none.
    fn lock_contention(
        &self,
        c: &PipelineClaim,
        from: Source,
        size: u64,
        layers: u32,
    ) -> Result<Vec<f64>, Missing> {
        match from {
            Source::Paper => {
                return Err("the paper measures no lock contention: it cites another study".into())
            }
            Source::Projected => return Err("no projection models lock waits".into()),
            Source::Measured => {}
        }
        let (link, messages) = self
            .paper_conditions()
            .ok_or("the experiment names no paper line")?;
        let runs: Vec<&PipelineRunRecord> = self
            .runs
            .iter()
            .filter(|r| {
                r.params.mode == c.mode
                    && r.params.link.label() == link
                    && r.params.message_size == size
                    && r.params.messages == messages
                    && r.params.layers == layers
            })
            .collect();
        let invalid: Vec<Validity> = runs
            .iter()
            .filter_map(|r| r.checked.validity.clone().filter(|v| !v.valid))
            .collect();
        let v: Vec<f64> = runs
            .iter()
            .filter(|r| r.checked.is_valid())
            .filter_map(|r| r.result.lock_contention())
            .collect();
        if v.is_empty() && !invalid.is_empty() {
            return Err(Missing::Judge(invalid_text("no valid run", &invalid)));
        }
        if v.is_empty() {
            return Err(format!(
                "no {} run with layer locks over {link} with {messages} messages",
                c.mode
            )
            .into());
        }
        Ok(v)
    }

    /// Our projected values of a statistic at one size and layer count, as
    /// text (`0.91–0.95`, or why there are none).
    fn projected_text(
        &self,
        c: &PipelineClaim,
        size: u64,
        layers: u32,
        statistic: ClaimStatistic,
    ) -> String {
        match self.values(c, Source::Projected, size, layers, statistic) {
            Ok(v) => values_text(&v),
            Err(e) => format!("none ({})", e.text()),
        }
    }

    /// How many runs a comparison of our figures left out for failing
    /// their gates (0 on the paper's values).
    fn left_out(&self, c: &PipelineClaim, from: Source, size: u64, layers: u32) -> usize {
        match (from, self.paper_conditions()) {
            (Source::Paper, _) | (_, None) => 0,
            (_, Some((link, messages))) => self
                .cell(&c.mode, &link, size, messages, layers)
                .invalid
                .len(),
        }
    }

    /// The finished run with these parameters.
    pub fn run(&self, params: &PipelineRunParams) -> Option<&PipelineRunRecord> {
        self.runs.iter().find(|r| r.params == *params)
    }
}
