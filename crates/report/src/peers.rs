//! Reports of peers sweeps (`DIR/peers.json`): per body size and contender,
//! the median and spread (min–max across repetitions) of requests per second
//! and of requests per CPU second of the measured role, and each contender's
//! ratio to the baseline, taken repetition by repetition (the baseline of the
//! same repetition ran minutes apart at most) so its spread is the ratio's own;
//! a dot plot per body size; the validity of the points with the A/A
//! control's noise; the command lines; the points not measured.
//!
//! Only points that passed their gates count (points measured before gates
//! existed count as valid): a contender's figures rest on its valid
//! repetitions, and a ratio on the rounds where both it and the baseline
//! are valid. A ratio with no such round cannot be judged here (the gates
//! its points failed say why). A ratio is *higher* or *lower* than the
//! baseline only when its median's interval and its median moved by the
//! A/A noise factor either way all lie on one side of 1 (the rule of
//! [`crate::claims`]' verdicts, with parity as the bound); otherwise it
//! cannot be judged here.

use crate::claims::{p90, Noise};
use crate::export::{self, Block, Cell, Page, Report};
use crate::summary;
use crate::summary::whole;
pub use crate::summary::Spread;
use crate::{Format, ReportError};
use connlab_lab::validity::{cannot_judge_reason, Validity};
use connlab_lab::{PeerPoint, PeersDir, ProcessKind, Role};
use connlab_measure::stats::{median_interval, MedianInterval};
use plotters::coord::ranged1d::SegmentValue;
use plotters::prelude::*;
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// The confidence of a ratio's interval.
const CONFIDENCE: f64 = 0.95;

/// Renders the report of a peers sweep.
pub fn render_peers(dir: &PeersDir, format: Format) -> Result<String, ReportError> {
    export::export(&Peers { dir }, format)
}

/// One contender at one body size.
#[derive(Clone, Debug, PartialEq)]
pub struct PeerRow {
    /// Response body bytes.
    pub body_bytes: u64,
    /// The server's workers, with a `[scaling]` axis.
    pub workers: Option<u32>,
    /// Contender name.
    pub contender: String,
    /// What it runs (`nginx-return`, `connlab-serve epoll`).
    pub what: String,
    /// Repetitions the figures rest on: the valid ones (every one measured
    /// when none is valid).
    pub repetitions: usize,
    /// Repetitions whose point failed a gate.
    pub invalid: usize,
    /// Requests per second.
    pub requests_per_s: Spread,
    /// Requests per CPU second of the measured role.
    pub requests_per_cpu_s: Spread,
    /// Each repetition's requests per CPU second, in repetition order (the
    /// repetitions the figures rest on).
    pub per_rep: Vec<f64>,
    /// Per baseline at this body size: the ratio to it, repetition by
    /// repetition; `None` when no repetition has both.
    pub ratios: Vec<(String, Option<PeerRatio>)>,
    /// Client-reported errors, summed.
    pub errors: u64,
}

/// A contender's ratio to a baseline at one body size, from the rounds
/// (repetitions) where both points are valid.
#[derive(Clone, Debug, PartialEq)]
pub struct PeerRatio {
    /// The per-round ratios' median and range; `None` when no round has
    /// two valid points.
    pub spread: Option<Spread>,
    /// The median's 95 % distribution-free interval (the rounds' range,
    /// with its lower coverage, below six rounds).
    pub interval: Option<MedianInterval>,
    /// Where the contender stands against the baseline; `None` for a
    /// baseline against itself.
    pub standing: Option<Standing>,
}

/// Where a contender stands against a baseline.
#[derive(Clone, Debug, PartialEq)]
pub enum Standing {
    /// Above it: the interval and the median moved by the A/A noise factor
    /// either way all lie above 1.
    Higher,
    /// Below it: all of them lie below 1.
    Lower,
    /// Cannot be judged here: the points failed their gates, or the
    /// interval or the A/A noise reaches across 1. Says which, with figures.
    CannotJudge(String),
}

impl Standing {
    /// `higher`, `lower`, `cannot be judged here`.
    pub fn word(&self) -> &'static str {
        match self {
            Standing::Higher => "higher",
            Standing::Lower => "lower",
            Standing::CannotJudge(_) => "cannot be judged here",
        }
    }

    /// The CSV key: `higher`, `lower`, `cannot_judge_here`.
    pub fn csv_key(&self) -> &'static str {
        match self {
            Standing::Higher => "higher",
            Standing::Lower => "lower",
            Standing::CannotJudge(_) => "cannot_judge_here",
        }
    }

    /// Why it cannot be judged, or nothing.
    pub fn reason(&self) -> &str {
        match self {
            Standing::CannotJudge(why) => why,
            _ => "",
        }
    }
}

/// The standing of a ratio whose median has `iv` as its interval, against
/// parity: the rule of a claim's verdict (`judge_noisy`) with 1 as the
/// bound on either side.
fn standing(iv: &MedianInterval, noise: Option<&Noise>) -> Standing {
    let (lo, hi) = match noise {
        Some(n) if n.factor.is_finite() => (
            iv.lo.min(iv.median / n.factor),
            iv.hi.max(iv.median * n.factor),
        ),
        _ => (iv.lo, iv.hi),
    };
    if lo > 1.0 {
        return Standing::Higher;
    }
    if hi < 1.0 {
        return Standing::Lower;
    }
    let over = if iv.coverage >= CONFIDENCE {
        format!("95 % over {} rounds", iv.n)
    } else if iv.n == 1 {
        "one round".into()
    } else {
        format!(
            "the range of {} rounds, {:.0} % coverage",
            iv.n,
            iv.coverage * 100.0
        )
    };
    Standing::CannotJudge(match noise {
        Some(n) if n.factor.is_finite() => format!(
            "the median {:.2}× and its interval ({over}) lie within the machine's A/A noise ({}) of 1",
            iv.median,
            n.short()
        ),
        _ => format!(
            "the interval {:.2}–{:.2}× ({over}) reaches across 1",
            iv.lo, iv.hi
        ),
    })
}

/// The ratio of `points` to `base` (each by repetition), from the rounds
/// where both are valid; `None` when no repetition has both.
fn ratio(
    points: &BTreeMap<u32, &PeerPoint>,
    base: Option<&BTreeMap<u32, &PeerPoint>>,
    itself: bool,
    noise: Option<&Noise>,
) -> Option<PeerRatio> {
    let base = base?;
    let rounds: Vec<(&PeerPoint, &PeerPoint)> = points
        .iter()
        .filter_map(|(rep, p)| Some((*p, *base.get(rep)?)))
        .collect();
    if rounds.is_empty() {
        return None;
    }
    let per_round: Vec<f64> = rounds
        .iter()
        .filter(|(p, b)| p.checked.is_valid() && b.checked.is_valid() && b.requests_per_cpu_s > 0.0)
        .map(|(p, b)| p.requests_per_cpu_s / b.requests_per_cpu_s)
        .collect();
    let Some(interval) = median_interval(&per_round, CONFIDENCE) else {
        // Every round has an invalid point: the gates they failed, counted
        // among the rounds' points (each once).
        let records: BTreeMap<&str, &Validity> = rounds
            .iter()
            .flat_map(|(p, b)| [*p, *b])
            .filter_map(|p| Some((p.id.as_str(), p.checked.validity.as_ref()?)))
            .collect();
        let records: Vec<&Validity> = records.into_values().collect();
        return Some(PeerRatio {
            spread: None,
            interval: None,
            standing: Some(Standing::CannotJudge(cannot_judge_reason(&records))),
        });
    };
    Some(PeerRatio {
        spread: Spread::of(&per_round),
        interval: Some(interval),
        standing: (!itself).then(|| standing(&interval, noise)),
    })
}

/// The A/A control's noise in requests per CPU second: each valid control
/// point against its contender's valid point of the same repetition and
/// body size (control / original), the factor the 90th percentile of
/// `max(r, 1/r)` (the largest below ten pairs); `None` without a pair.
pub(crate) fn aa_noise(dir: &PeersDir) -> Option<Noise> {
    let pairs = control_pairs(dir);
    let ratios: Vec<f64> = pairs.iter().map(|p| p.3).collect();
    let factor = p90(ratios.iter().map(|r| r.max(1.0 / r)).collect())?;
    let difference = p90(pairs.iter().map(|p| (p.2 - p.1).abs()).collect())?;
    Some(Noise {
        engine: pairs.first().map(|p| p.0.params.contender.clone())?,
        factor,
        difference,
        n: ratios.len(),
        unit: ("req/CPU-s", 1.0),
        ratios,
    })
}

/// Each valid control point with its original's and its own requests per
/// CPU second and their ratio, in plan order.
fn control_pairs(dir: &PeersDir) -> Vec<(&PeerPoint, f64, f64, f64)> {
    dir.controls()
        .filter(|c| c.checked.is_valid())
        .filter_map(|c| {
            let o = dir.measured().find(|o| {
                o.checked.is_valid()
                    && o.params.contender == c.params.contender
                    && o.params.body_bytes == c.params.body_bytes
                    && o.params.workers == c.params.workers
                    && o.params.repetition == c.params.repetition
            })?;
            let (a, b) = (o.requests_per_cpu_s, c.requests_per_cpu_s);
            (a > 0.0 && b > 0.0 && a.is_finite() && b.is_finite()).then_some((c, a, b, b / a))
        })
        .collect()
}

fn what(dir: &PeersDir, contender: &str) -> String {
    let exp = &dir.info.experiment;
    exp.contender_named(contender).map_or(String::new(), |c| {
        let mut s = c.kind.name().to_string();
        if let Some(e) = c.engine {
            let _ = write!(s, " {}", e.name());
        }
        if c.edge_triggered {
            s.push_str(" (edge-triggered)");
        }
        if c.kind == ProcessKind::SingleipRelay {
            // Two programs: say whose flags are whose.
            if !c.args.is_empty() {
                let _ = write!(s, " io-server {}", c.args.join(" "));
            }
            if c.splice || !c.node_args.is_empty() {
                s.push_str(" app-node");
                if c.splice {
                    s.push_str(" --splice");
                }
                for a in &c.node_args {
                    let _ = write!(s, " {a}");
                }
            }
            return s;
        }
        if c.splice && c.kind == ProcessKind::Haproxy {
            s.push_str(" splice-request/-response");
        } else if c.splice {
            s.push_str(" --splice");
        }
        if let Some(io) = c.io {
            let _ = write!(s, " --io {}", io.name());
        }
        for a in &c.args {
            let _ = write!(s, " {a}");
        }
        if matches!(c.kind, ProcessKind::Wrk | ProcessKind::Haproxy) {
            let _ = write!(s, " ({} thread)", c.threads.unwrap_or(1));
        }
        s
    })
}

/// The in-brief verdicts: each contender against each baseline at each
/// body size, its ratio's median and interval, and where it stands.
fn headlines(rows: &[PeerRow], measure: Role) -> Vec<crate::brief::Headline> {
    let mut out = Vec::new();
    for r in rows {
        for (base, ratio) in &r.ratios {
            let Some(ratio) = ratio else { continue };
            let Some(standing) = &ratio.standing else {
                continue;
            };
            out.push(crate::brief::Headline {
                source: setting_text(r.body_bytes, r.workers),
                text: format!("{} against {base}: {}", r.contender, measure_text(measure)),
                paper: "—".into(),
                ours: ratio
                    .spread
                    .as_ref()
                    .map_or("—".into(), |s| format!("{:.2}×", s.median)),
                interval: ratio.interval.as_ref().map_or("—".into(), |iv| {
                    format!("{:.2}–{:.2}× ({:.0} %)", iv.lo, iv.hi, iv.coverage * 100.0)
                }),
                key: match standing {
                    Standing::CannotJudge(_) => "noisy",
                    _ => "decided",
                },
                word: standing.word().to_string(),
                why: (!standing.reason().is_empty()).then(|| standing.reason().to_string()),
            });
        }
    }
    out
}

/// The summary rows, body sizes in plan order, contenders in file order,
/// on valid points (see the module documentation); the A/A control's
/// points only give the noise.
pub fn summarize(dir: &PeersDir) -> Vec<PeerRow> {
    let exp = &dir.info.experiment;
    let noise = aa_noise(dir);
    type Key<'a> = (u64, Option<u32>, &'a str);
    let mut by: BTreeMap<Key, BTreeMap<u32, &PeerPoint>> = BTreeMap::new();
    for p in dir.measured() {
        by.entry((
            p.params.body_bytes,
            p.params.workers,
            p.params.contender.as_str(),
        ))
        .or_default()
        .insert(p.params.repetition, p);
    }
    let mut settings: Vec<(u64, Option<u32>)> = dir
        .measured()
        .map(|p| (p.params.body_bytes, p.params.workers))
        .collect();
    settings.sort_unstable();
    settings.dedup();
    let mut rows = Vec::new();
    for (size, workers) in settings {
        let bases = exp.baselines_at(size);
        for c in &exp.contender {
            let Some(points) = by.get(&(size, workers, c.name.as_str())) else {
                continue;
            };
            let valid: Vec<&PeerPoint> = points
                .values()
                .copied()
                .filter(|p| p.checked.is_valid())
                .collect();
            let shown: Vec<&PeerPoint> = if valid.is_empty() {
                points.values().copied().collect()
            } else {
                valid
            };
            let rps: Vec<f64> = shown.iter().map(|p| p.requests_per_s).collect();
            let rpc: Vec<f64> = shown.iter().map(|p| p.requests_per_cpu_s).collect();
            let ratios = bases
                .iter()
                .map(|b| {
                    let base = by.get(&(size, workers, *b));
                    let r = ratio(points, base, *b == c.name, noise.as_ref());
                    (b.to_string(), r)
                })
                .collect();
            let (Some(requests_per_s), Some(requests_per_cpu_s)) =
                (Spread::of(&rps), Spread::of(&rpc))
            else {
                continue;
            };
            rows.push(PeerRow {
                body_bytes: size,
                workers,
                contender: c.name.clone(),
                what: what(dir, &c.name),
                repetitions: shown.iter().filter(|p| p.checked.is_valid()).count(),
                invalid: points.values().filter(|p| !p.checked.is_valid()).count(),
                requests_per_s,
                requests_per_cpu_s,
                per_rep: rpc,
                ratios,
                errors: shown.iter().map(|p| p.errors).sum(),
            });
        }
    }
    rows
}

fn whole_spread(s: &Spread) -> String {
    format!("{} ({}–{})", whole(s.median), whole(s.min), whole(s.max))
}

/// A ratio cell: `1.50× (1.45–1.62) higher`, `cannot be judged here: ...`,
/// or `—` without a pair.
fn ratio_text(r: Option<&PeerRatio>) -> String {
    let Some(r) = r else {
        return "—".into();
    };
    match (&r.spread, &r.standing) {
        (Some(s), standing) => {
            let mut t = format!("{:.2}× ({:.2}–{:.2})", s.median, s.min, s.max);
            if let Some(st) = standing {
                let _ = write!(t, " {}", st.word());
            }
            t
        }
        (None, Some(st)) => format!("{}: {}", st.word(), st.reason()),
        (None, None) => "—".into(),
    }
}

/// The repetitions cell: `5`, or `4 (+1 invalid)`; `none valid (2 invalid
/// shown)` when the figures rest on invalid points alone.
fn reps_text(r: &PeerRow) -> String {
    match (r.repetitions, r.invalid) {
        (n, 0) => n.to_string(),
        (0, bad) => format!("none valid ({bad} invalid shown)"),
        (n, bad) => format!("{n} (+{bad} invalid)"),
    }
}

/// `128 B body`, or `128 B body, 2 workers` with a workers axis.
fn setting_text(bytes: u64, workers: Option<u32>) -> String {
    match workers {
        Some(w) => format!("{} body, {w} worker{}", size_text(bytes), plural(w)),
        None => format!("{} body", size_text(bytes)),
    }
}

fn plural(n: u32) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

/// A row's name in plots: the contender, with `×N` workers on an axis.
fn row_label(r: &PeerRow) -> String {
    match r.workers {
        Some(w) => format!("{} ×{w}", r.contender),
        None => r.contender.clone(),
    }
}

pub(crate) fn size_text(bytes: u64) -> String {
    if bytes >= 1024 && bytes.is_multiple_of(1024) {
        format!("{} KiB", bytes / 1024)
    } else {
        format!("{bytes} B")
    }
}

fn measure_text(role: Role) -> String {
    format!("requests per {} CPU s", role.name())
}

/// Column headings of the summary table at one body size.
fn headings(dir: &PeersDir, body_bytes: u64) -> Vec<String> {
    let m = dir.info.experiment.measure;
    let mut h: Vec<String> = vec!["body".into()];
    if dir.info.experiment.scaling.is_some() {
        h.push("workers".into());
    }
    h.extend([
        "contender".into(),
        "program".into(),
        "reps".into(),
        "req/s median (min–max)".into(),
        format!("{} median (min–max)", measure_text(m)),
        format!("{} CPU µs per request", m.name()),
    ]);
    for b in dir.info.experiment.baselines_at(body_bytes) {
        h.push(format!("ratio to {b} (min–max)"));
    }
    h.push("errors".into());
    h
}

fn cells(r: &PeerRow) -> Vec<String> {
    let mut c = vec![size_text(r.body_bytes)];
    if let Some(w) = r.workers {
        c.push(w.to_string());
    }
    c.extend([
        r.contender.clone(),
        r.what.clone(),
        reps_text(r),
        whole_spread(&r.requests_per_s),
        whole_spread(&r.requests_per_cpu_s),
        format!("{:.1}", 1e6 / r.requests_per_cpu_s.median),
    ]);
    c.extend(r.ratios.iter().map(|(_, s)| ratio_text(s.as_ref())));
    c.push(r.errors.to_string());
    c
}

/// (name, value) facts about the sweep; `noise` is the A/A control's.
fn facts(dir: &PeersDir, noise: Option<&Noise>) -> Vec<(String, String)> {
    let i = &dir.info;
    let e = &i.experiment;
    let w = &e.workload;
    let fixed = |role: &str, p: &Option<connlab_lab::Process>| {
        p.as_ref().map(|p| {
            let mut s = p.kind.name().to_string();
            if let Some(engine) = p.engine {
                let _ = write!(s, " {}", engine.name());
            }
            (role.to_string(), s)
        })
    };
    let cpu = summary::cpu_text;
    let list = |cpus: Vec<usize>, one: Option<usize>| -> String {
        if cpus.len() > 1 {
            format!(
                "on CPUs {}",
                cpus.iter()
                    .map(usize::to_string)
                    .collect::<Vec<_>>()
                    .join(",")
            )
        } else {
            cpu(cpus.first().copied().or(one))
        }
    };
    let server = list(e.placement.server_cpus_at(None), e.placement.server_cpu);
    let client = list(e.placement.client_cpus(), e.placement.client_cpu);
    let mut out = vec![
        ("compared".into(), format!("{}s", e.contender_role().name())),
        ("measure".into(), measure_text(e.measure)),
        ("baselines".into(), e.baseline.names().join(", ")),
        (
            "workload".into(),
            format!(
                "HTTP/1.1 keep-alive, closed loop, {} connections, GET /bytes/N, {:.0} s per point",
                w.connections,
                e.duration(i.quick).as_secs_f64()
            ),
        ),
        (
            "placement".into(),
            if e.gateway.is_some() || e.contender_role() == Role::Gateway {
                format!(
                    "server {server}, gateway {}, client {client}",
                    cpu(e.placement.gateway_cpu),
                )
            } else if e.scaling.is_some() {
                format!("server {server} (N workers: the first N), client {client}")
            } else {
                format!("server {server}, client {client}")
            },
        ),
        (
            "points".into(),
            format!(
                "{} of {}{}{}",
                dir.points.len(),
                i.points_total,
                match dir.points.iter().filter(|p| !p.checked.is_valid()).count() {
                    0 => String::new(),
                    n => format!(", {n} invalid"),
                },
                if i.quick { " (--quick)" } else { "" }
            ),
        ),
        (
            "A/A control".into(),
            match (e.control_contender(), noise) {
                (_, Some(n)) => format!("noise {}", n.text()),
                (Some(c), None) => format!("{c} twice per repetition, no valid pair yet"),
                (None, None) => "none (validity.control = \"none\")".into(),
            },
        ),
        summary::machine(i.environment.cpu_count, &i.environment.kernel),
    ];
    out.extend(fixed("server", &e.server));
    out.extend(fixed("gateway", &e.gateway));
    out.extend(fixed("client", &e.client));
    for (program, version) in &i.peer_versions {
        out.push((program.clone(), version.clone()));
    }
    out.push((
        "CPU accounting".into(),
        "server and gateway: utime + stime of the process tree from /proc/PID/stat \
         (nginx: master and worker) over the client's run; client: its rusage"
            .into(),
    ));
    out
}

/// The A/A control, per body size and repetition: control / original of
/// requests per CPU second, e.g. `128 B: rep 1 1.012, rep 2 0.987`.
fn control_lines(dir: &PeersDir) -> Vec<String> {
    let mut by: BTreeMap<u64, Vec<String>> = BTreeMap::new();
    for (c, _, _, r) in control_pairs(dir) {
        by.entry(c.params.body_bytes)
            .or_default()
            .push(format!("rep {} {r:.3}", c.params.repetition));
    }
    by.into_iter()
        .map(|(size, reps)| format!("{}: {}", size_text(size), reps.join(", ")))
        .collect()
}

/// Plan points with no result yet.
fn missing(dir: &PeersDir) -> Vec<String> {
    summary::missing(
        dir.info
            .experiment
            .plan(dir.info.quick)
            .iter()
            .map(connlab_lab::PeerParams::id),
        dir.points.iter().map(|p| p.id.as_str()),
    )
}

/// The command line of each contender's first point, role by role.
fn commands(dir: &PeersDir) -> Vec<(String, Vec<(Role, String)>)> {
    let mut seen = std::collections::BTreeSet::new();
    let mut out = Vec::new();
    for p in &dir.points {
        if seen.insert(p.params.contender.clone()) {
            out.push((
                p.id.clone(),
                p.commands.iter().map(|(r, c)| (*r, c.join(" "))).collect(),
            ));
        }
    }
    out
}

/// One CSV row. `kind` is `contender` (the summary of a contender at a body
/// size against one baseline: `repetitions` valid, `invalid` left out, the
/// ratio's median and range, its interval `ratio_lo`..`ratio_hi` with
/// `ratio_coverage`, and `verdict` `higher`, `lower` or `cannot_judge_here`
/// with the reason in `detail`), `invalid_point` (a point that failed a
/// gate: `id`, `attempts`, the gates in `detail`) or `noise_floor` (the A/A
/// control: its contender, `repetitions` = pairs, the range of its ratios
/// in `ratio_min`..`ratio_max`, the factor in `noise_factor`), with a
/// workers axis `scaling` (a contender at `workers`: requests per second,
/// `speedup_*` over one worker with its interval, `client_limited` points,
/// `imbalance_median`, `latency_p99_us_median`) and `usl_fit` (the
/// Universal Scalability Law fitted to a contender's curve: `usl_*`);
/// columns that do not apply to a kind are empty.
#[derive(serde::Serialize, Default)]
pub(crate) struct CsvRow {
    kind: &'static str,
    body_bytes: Option<u64>,
    contender: String,
    program: String,
    pub(crate) repetitions: Option<usize>,
    invalid: Option<usize>,
    requests_per_s_median: Option<f64>,
    requests_per_s_min: Option<f64>,
    requests_per_s_max: Option<f64>,
    measure: &'static str,
    requests_per_cpu_s_median: Option<f64>,
    requests_per_cpu_s_min: Option<f64>,
    requests_per_cpu_s_max: Option<f64>,
    baseline: String,
    ratio_median: Option<f64>,
    ratio_min: Option<f64>,
    ratio_max: Option<f64>,
    ratio_lo: Option<f64>,
    ratio_hi: Option<f64>,
    ratio_coverage: Option<f64>,
    verdict: &'static str,
    detail: String,
    errors: Option<u64>,
    id: String,
    attempts: Option<u32>,
    noise_factor: Option<f64>,
    workers: Option<u32>,
    pub(crate) speedup_median: Option<f64>,
    pub(crate) speedup_lo: Option<f64>,
    pub(crate) speedup_hi: Option<f64>,
    pub(crate) client_limited: Option<usize>,
    pub(crate) imbalance_median: Option<f64>,
    pub(crate) latency_p99_us_median: Option<f64>,
    pub(crate) usl_lambda: Option<f64>,
    pub(crate) usl_sigma: Option<f64>,
    pub(crate) usl_kappa: Option<f64>,
    pub(crate) usl_peak_workers: Option<f64>,
    pub(crate) usl_fit_error: Option<f64>,
}

impl CsvRow {
    /// A `scaling` row (a contender at a worker count) or a `usl_fit` row
    /// (`workers` empty), filled in by [`crate::scaling::csv_rows`].
    pub(crate) fn scaling(
        kind: &'static str,
        body_bytes: u64,
        contender: &str,
        workers: Option<u32>,
        measure: Role,
    ) -> CsvRow {
        CsvRow {
            kind,
            body_bytes: Some(body_bytes),
            contender: contender.to_string(),
            workers,
            measure: measure.name(),
            ..CsvRow::default()
        }
    }

    /// Sets the requests per second's median and range, and the valid
    /// repetitions.
    pub(crate) fn with_rate(mut self, values: &[f64]) -> CsvRow {
        if let Some(s) = Spread::of(values).map(Spread::rounded) {
            self.requests_per_s_median = Some(s.median);
            self.requests_per_s_min = Some(s.min);
            self.requests_per_s_max = Some(s.max);
        }
        self.repetitions = Some(values.len());
        self
    }
}

/// Three decimals, as the CSV files hold figures.
pub(crate) fn round3(v: f64) -> f64 {
    (v * 1000.0).round() / 1000.0
}

/// The peers report kind.
struct Peers<'a> {
    dir: &'a PeersDir,
}

impl Report for Peers<'_> {
    type Row = CsvRow;

    /// A format with the detail adds the reading note, a heading per body
    /// size and the command lines, one with figures a plot per body size;
    /// Markdown has the tables alone.
    fn page(&self, format: Format) -> Result<Page, ReportError> {
        let dir = self.dir;
        let e = &dir.info.experiment;
        let rows = summarize(dir);
        let noise = aa_noise(dir);
        let mut sizes: Vec<u64> = rows.iter().map(|r| r.body_bytes).collect();
        sizes.dedup();
        // With a workers axis, the first ratio column comes one later.
        let first_ratio = 7 + usize::from(e.scaling.is_some());
        let mut plots = Vec::new();
        if format.figures() {
            for &size in &sizes {
                let at: Vec<&PeerRow> = rows.iter().filter(|r| r.body_bytes == size).collect();
                plots.push(Block::Figure {
                    id: None,
                    svg: dot_plot(
                        &format!("{}, {} body", measure_text(e.measure), size_text(size)),
                        &measure_text(e.measure),
                        &at,
                    )?,
                    caption: "Bars: median; dots: each repetition; whiskers: smallest to largest."
                        .into(),
                });
            }
        }
        // The first body size's plot is the key one: it goes up with the
        // verdicts; the others stay beside their tables.
        let mut plots = plots.into_iter();
        let mut verdicts = crate::scaling::headlines(dir);
        verdicts.extend(headlines(&rows, e.measure));
        let mut blocks = crate::brief::section(Vec::new(), &verdicts, "comparison", plots.next());
        blocks.push(Block::Heading("The sweep".into()));
        blocks.push(Block::Facts {
            id: None,
            facts: facts(dir, noise.as_ref()),
        });
        if format.detail() {
            blocks.push(Block::Note(format!(
                "Medians across repetitions with the smallest and largest in brackets, over the points \
                 that passed their validity gates. The ratio divides a contender's {} by the baseline's \
                 of the same repetition and body, both valid, then takes the median and range of those \
                 quotients. Contenders alternate within a repetition, so slow drifts of a shared machine \
                 fall on all of them. A ratio is higher or lower when the median's 95 % interval (the \
                 rounds' range below six rounds) and the median moved by the A/A noise either way all \
                 lie on one side of 1; otherwise it cannot be judged here.",
                measure_text(e.measure)
            )));
        }
        for (i, size) in sizes.into_iter().enumerate() {
            let at: Vec<&PeerRow> = rows.iter().filter(|r| r.body_bytes == size).collect();
            if format.detail() {
                blocks.push(Block::Heading(format!("{} body", size_text(size))));
            }
            blocks.push(Block::Table(export::Table {
                head: headings(dir, size),
                rows: at
                    .iter()
                    .map(|r| {
                        cells(r)
                            .into_iter()
                            .enumerate()
                            .map(|(i, text)| {
                                // A ratio to another contender's baseline.
                                Cell::from(text).strong(
                                    i >= first_ratio
                                        && i < first_ratio + r.ratios.len()
                                        && r.ratios[i - first_ratio].0 != r.contender,
                                )
                            })
                            .collect()
                    })
                    .collect(),
                labels: 2 + usize::from(e.scaling.is_some()),
                // The heading says the body size.
                html_skip: 1,
                ..export::Table::default()
            }));
            if i > 0 {
                blocks.extend(plots.next());
            }
        }
        if let Some(sc) = &e.scaling {
            blocks.extend(crate::scaling::blocks(dir, sc, format.figures())?);
        }
        let validity = crate::validity::Summary::of(
            dir.points
                .iter()
                .map(|p| (p.id.as_str(), p.checked.validity.as_ref())),
        );
        let what = measure_text(e.measure);
        let controls = control_lines(dir);
        let per_rep = (!controls.is_empty()).then(|| {
            format!(
                "The A/A control per repetition, control / original {what}: {}.",
                controls.join("; ")
            )
        });
        let floor = Some((noise.as_ref(), what.as_str()));
        let tail = "a ratio resting on them alone says \"cannot be judged here\"";
        blocks.extend(crate::validity::blocks_for(&validity, floor, tail));
        if let Some(line) = per_rep {
            blocks.push(Block::Note(line));
        }
        if format.detail() {
            let name = &e.name;
            blocks.extend(summary::rerun_blocks(name, dir.info.quick));
            for (id, cmds) in commands(dir) {
                blocks.push(Block::Commands {
                    label: Some(format!("What point {id} ran")),
                    lines: cmds
                        .into_iter()
                        .map(|(role, c)| {
                            (
                                Some(role.name().to_string()),
                                summary::user_command(&c, name),
                            )
                        })
                        .collect(),
                });
            }
        }
        blocks.push(Block::Missing(missing(dir)));
        Ok(summary::page(
            &e.title,
            &e.description,
            summary::FIGURE_STYLE,
            blocks,
        ))
    }

    fn rows(&self) -> Result<Vec<CsvRow>, ReportError> {
        let dir = self.dir;
        let measure = dir.info.experiment.measure;
        let mut out = Vec::new();
        for r in summarize(dir) {
            let none = [(String::new(), None)];
            let ratios: &[(String, Option<PeerRatio>)] = if r.ratios.is_empty() {
                &none
            } else {
                &r.ratios
            };
            let (rps, rpc) = (r.requests_per_s.rounded(), r.requests_per_cpu_s.rounded());
            for (baseline, ratio) in ratios {
                let spread = ratio.as_ref().and_then(|x| x.spread).map(Spread::rounded);
                let interval = ratio.as_ref().and_then(|x| x.interval);
                let standing = ratio.as_ref().and_then(|x| x.standing.as_ref());
                out.push(CsvRow {
                    kind: "contender",
                    body_bytes: Some(r.body_bytes),
                    workers: r.workers,
                    contender: r.contender.clone(),
                    program: r.what.clone(),
                    repetitions: Some(r.repetitions),
                    invalid: Some(r.invalid),
                    requests_per_s_median: Some(rps.median),
                    requests_per_s_min: Some(rps.min),
                    requests_per_s_max: Some(rps.max),
                    measure: measure.name(),
                    requests_per_cpu_s_median: Some(rpc.median),
                    requests_per_cpu_s_min: Some(rpc.min),
                    requests_per_cpu_s_max: Some(rpc.max),
                    baseline: baseline.clone(),
                    ratio_median: spread.map(|s| s.median),
                    ratio_min: spread.map(|s| s.min),
                    ratio_max: spread.map(|s| s.max),
                    ratio_lo: interval.map(|i| round3(i.lo)),
                    ratio_hi: interval.map(|i| round3(i.hi)),
                    ratio_coverage: interval.map(|i| round3(i.coverage)),
                    verdict: standing.map_or("", Standing::csv_key),
                    detail: standing.map_or(String::new(), |s| s.reason().to_string()),
                    errors: Some(r.errors),
                    ..CsvRow::default()
                });
            }
        }
        for p in dir.points.iter().filter(|p| !p.checked.is_valid()) {
            let Some(v) = &p.checked.validity else {
                continue;
            };
            out.push(CsvRow {
                kind: "invalid_point",
                body_bytes: Some(p.params.body_bytes),
                workers: p.params.workers,
                contender: p.params.contender.clone(),
                measure: measure.name(),
                detail: v.failure_text(),
                id: p.id.clone(),
                attempts: Some(v.attempts),
                ..CsvRow::default()
            });
        }
        out.extend(crate::scaling::csv_rows(dir));
        if let Some(n) = aa_noise(dir) {
            let range = Spread::of(&n.ratios).map(Spread::rounded);
            out.push(CsvRow {
                kind: "noise_floor",
                contender: n.engine.clone(),
                repetitions: Some(n.n),
                measure: measure.name(),
                ratio_median: range.map(|s| s.median),
                ratio_min: range.map(|s| s.min),
                ratio_max: range.map(|s| s.max),
                noise_factor: Some(round3(n.factor)),
                ..CsvRow::default()
            });
        }
        Ok(out)
    }
}

fn plot_err<E: std::fmt::Debug>(e: E) -> ReportError {
    ReportError::Plot(format!("{e:?}"))
}

/// Axis numbers: whole, with a `k` for thousands (20k, 125k, 1.5k), never a
/// trailing `.0`.
fn axis_number(v: f64) -> String {
    if v.abs() >= 1000.0 {
        let k = v / 1000.0;
        if (k - k.round()).abs() < 1e-9 {
            format!("{}k", k.round() as i64)
        } else {
            format!("{}k", (k * 10.0).round() / 10.0)
        }
    } else {
        format!("{}", v.round() as i64)
    }
}

/// A bar per contender (its median), whiskers from smallest to largest, a
/// dot per repetition; the y axis starts at zero.
fn dot_plot(title: &str, y_desc: &str, rows: &[&PeerRow]) -> Result<String, ReportError> {
    let n = rows.len().max(1);
    let top = rows
        .iter()
        .flat_map(|r| r.per_rep.iter().copied())
        .fold(0.0_f64, f64::max)
        .max(1.0)
        * 1.15;
    let names: Vec<String> = rows.iter().map(|r| row_label(r)).collect();
    let mut svg = String::new();
    {
        // Room for the longest name under each bar (about 7 px a
        // character at 12 px), so long contender names do not run into
        // each other; wider than the page is scaled down with the labels.
        let longest = names.iter().map(|s| s.chars().count()).max().unwrap_or(0) as u32;
        let slot = (8 * longest + 16).max(110);
        let width = (160 + slot * n as u32).clamp(crate::plots::WIDTH, 1300);
        let root = SVGBackend::with_string(&mut svg, (width, 400)).into_drawing_area();
        root.fill(&WHITE).map_err(plot_err)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(
                title,
                ("sans-serif", crate::plots::title_font(title, width)),
            )
            .margin(12)
            .x_label_area_size(46)
            .y_label_area_size(72)
            .build_cartesian_2d((0..n - 1).into_segmented(), 0.0..top)
            .map_err(plot_err)?;
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_labels(n)
            .x_label_formatter(&|v| match v {
                SegmentValue::CenterOf(i) | SegmentValue::Exact(i) => {
                    names.get(*i).cloned().unwrap_or_default()
                }
                SegmentValue::Last => String::new(),
            })
            .y_label_formatter(&|v| axis_number(*v))
            .x_desc("contender")
            .y_desc(y_desc)
            .label_style(("sans-serif", crate::plots::LABEL_FONT))
            .x_label_style(("sans-serif", crate::plots::LABEL_FONT))
            .axis_desc_style(("sans-serif", crate::plots::DESC_FONT))
            .light_line_style(WHITE)
            .draw()
            .map_err(plot_err)?;
        let bar = RGBColor(120, 160, 210);
        chart
            .draw_series(rows.iter().enumerate().map(|(i, r)| {
                let mut rect = Rectangle::new(
                    [
                        (SegmentValue::Exact(i), 0.0),
                        (SegmentValue::Exact(i + 1), r.requests_per_cpu_s.median),
                    ],
                    bar.filled(),
                );
                rect.set_margin(0, 0, 18, 18);
                rect
            }))
            .map_err(plot_err)?;
        chart
            .draw_series(rows.iter().enumerate().map(|(i, r)| {
                PathElement::new(
                    vec![
                        (SegmentValue::CenterOf(i), r.requests_per_cpu_s.min),
                        (SegmentValue::CenterOf(i), r.requests_per_cpu_s.max),
                    ],
                    BLACK.stroke_width(2),
                )
            }))
            .map_err(plot_err)?;
        chart
            .draw_series(rows.iter().enumerate().flat_map(|(i, r)| {
                r.per_rep
                    .iter()
                    .map(move |v| Circle::new((SegmentValue::CenterOf(i), *v), 4, BLACK.filled()))
            }))
            .map_err(plot_err)?;
        root.present().map_err(plot_err)?;
    }
    Ok(crate::plots::full_width(svg))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_read_well() {
        assert_eq!(whole(1234567.4), "1,234,567");
        assert_eq!(axis_number(20000.0), "20k");
        assert_eq!(axis_number(1500.0), "1.5k");
        assert_eq!(axis_number(500.0), "500");
        assert_eq!(size_text(10240), "10 KiB");
        assert_eq!(size_text(128), "128 B");
    }

    /// The results directory of experiment `text` before any point.
    fn dir_without_points(text: &str) -> PeersDir {
        let experiment = connlab_lab::PeersExperiment::from_toml(text, "t.toml").unwrap();
        PeersDir {
            info: connlab_lab::PeersInfo {
                schema: connlab_lab::PEERS_SWEEP_SCHEMA.into(),
                experiment,
                quick: false,
                environment: connlab_os::Environment::capture(),
                peer_versions: Vec::new(),
                started_unix_s: 0.0,
                points_total: 0,
            },
            points: Vec::new(),
        }
    }

    #[test]
    fn a_connlab_load_contender_names_its_io_path() {
        let text = "kind = \"peers\"\nname = \"t\"\ntitle = \"t\"\nmeasure = \"client\"\n\
                    baseline = \"a\"\n[workload]\nconnections = 10\nbody_sizes = [128]\n\
                    duration = \"1s\"\n[server]\nkind = \"nginx-return\"\n\
                    [[contender]]\nname = \"a\"\nkind = \"connlab-load\"\n\
                    [[contender]]\nname = \"b\"\nkind = \"connlab-load\"\nio = \"uring\"\n";
        let dir = dir_without_points(text);
        assert_eq!(what(&dir, "a"), "connlab-load");
        assert_eq!(what(&dir, "b"), "connlab-load --io uring");
    }

    /// HAProxy has no `--splice` flag: its contender names the options.
    #[test]
    fn a_splicing_haproxy_names_its_options() {
        let text = include_str!("../../../experiments/peers-gateway-vs-haproxy.toml");
        let dir = dir_without_points(text);
        assert_eq!(
            what(&dir, "haproxy-splice"),
            "haproxy splice-request/-response (1 thread)"
        );
        assert_eq!(what(&dir, "proxy-splice"), "connlab-gateway --splice");
    }

    fn interval(median: f64, lo: f64, hi: f64, n: u64) -> MedianInterval {
        MedianInterval {
            median,
            lo,
            hi,
            coverage: 1.0 - 2.0 * 0.5f64.powi(n as i32),
            n,
        }
    }

    fn noise(factor: f64) -> Noise {
        Noise {
            engine: "nginx-return".into(),
            factor,
            difference: 0.0,
            n: 5,
            unit: ("req/CPU-s", 1.0),
            ratios: Vec::new(),
        }
    }

    /// Higher or lower only when the interval and the median moved by the
    /// A/A noise both lie on one side of 1.
    #[test]
    fn a_ratio_stands_against_parity_beyond_its_interval_and_the_noise() {
        let n = noise(1.05);
        assert_eq!(
            standing(&interval(1.2, 1.15, 1.3, 5), Some(&n)),
            Standing::Higher
        );
        assert_eq!(
            standing(&interval(0.8, 0.75, 0.85, 5), Some(&n)),
            Standing::Lower
        );
        // The interval clears 1, the noise does not.
        let s = standing(&interval(1.03, 1.01, 1.04, 5), Some(&n));
        assert_eq!(s.csv_key(), "cannot_judge_here");
        assert!(s.reason().contains("A/A noise (±5 %) of 1"), "{s:?}");
        assert!(s.reason().contains("the range of 5 rounds"), "{s:?}");
        // Without a control: the interval alone.
        assert_eq!(
            standing(&interval(1.03, 1.01, 1.04, 5), None),
            Standing::Higher
        );
        let s = standing(&interval(1.0, 0.9, 1.1, 1), None);
        assert!(s.reason().contains("reaches across 1"), "{s:?}");
        assert!(s.reason().contains("one round"), "{s:?}");
    }

    /// A relay contender's flags are named with the program they go to.
    #[test]
    fn a_relay_contender_names_each_programs_flags() {
        let text = include_str!("../../../experiments/peers-relay-vs-haproxy.toml");
        let dir = dir_without_points(text);
        assert_eq!(what(&dir, "relay"), "singleip-relay");
        assert_eq!(
            what(&dir, "relay-splice"),
            "singleip-relay app-node --splice"
        );
        assert_eq!(
            what(&dir, "relay-iosplice-nolimit"),
            "singleip-relay io-server --send-limit off --splice"
        );
        assert_eq!(
            what(&dir, "relay-splice-v1"),
            "singleip-relay io-server --max-version 1 app-node --splice"
        );
    }
}
