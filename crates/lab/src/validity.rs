//! Whether a measured point can be trusted: gates that each check one way
//! the machine or the client could have decided the number rather than the
//! system under test, and the record every point keeps of them
//! (`"validity": {"valid", "attempts", "gates": [{"name", "value", "limit",
//! "passed"}]}`). Pure: the runners gather the evidence (their load result,
//! a [`WindowCpu`] of the measured window, the machine's
//! fingerprint) and [`gates`] judges it against the file's
//! [`ValidityLimits`] (`[validity]`, every kind).
//!
//! | gate | passes when |
//! |---|---|
//! | `completion` | completed / scheduled requests of the measured window >= limit (0.99) |
//! | `schedule` | send-lag p99 <= a tenth of the writer's mean send interval, or an absolute bound (50 us) where a writer sends over 10,000 per second |
//! | `steal` | hypervisor steal time on the CPUs used <= limit (2 %) of their time |
//! | `foreign_cpu` | task time on those CPUs that none of the experiment's processes (nor the kernel's softirq threads) accounts for <= limit (5 %) |
//! | `machine` | the point's machine fingerprint equals the sweep block's |
//! | `arrivals` | the sends followed the configured arrival process (the load generator's own check) |
//! | `stationary` | the latency series over the window has no unit root (augmented Dickey-Fuller, 5 %) |
//! | `precision` | with `--ci-target`: the p99's 95 % order-statistic interval is no wider than the target, relative to the p99 |
//!
//! A gate whose evidence is missing (closed loop has no schedule, a kind
//! without a client) is left out rather than passed.

use serde::{Deserialize, Serialize};
use std::fmt;

pub use connlab_os::window::{PerCpu, WindowCpu};
pub use connlab_os::Fingerprint;

/// The gates' names, in the order a point lists them.
pub const GATE_NAMES: [&str; 8] = [
    "completion",
    "schedule",
    "steal",
    "foreign_cpu",
    "machine",
    "arrivals",
    "stationary",
    "precision",
];

/// A gate's measured value or limit: a number, a word or a fingerprint.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum GateValue {
    /// A number (a share, microseconds, a statistic).
    Number(f64),
    /// Text (a fingerprint, `true`).
    Text(String),
}

impl fmt::Display for GateValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GateValue::Number(v) => f.write_str(&short(*v)),
            GateValue::Text(t) => f.write_str(t),
        }
    }
}

/// Three significant figures, no exponent for everyday sizes.
fn short(v: f64) -> String {
    if v == 0.0 || !v.is_finite() {
        return format!("{v}");
    }
    let digits = (2 - v.abs().log10().floor() as i32).clamp(0, 6) as usize;
    let s = format!("{v:.digits$}");
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

/// One gate's outcome.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Gate {
    /// One of [`GATE_NAMES`].
    pub name: String,
    /// What was measured.
    pub value: GateValue,
    /// What it was held to.
    pub limit: GateValue,
    /// Whether it passed.
    pub passed: bool,
    /// The comparison in words (`send-lag p99 41.2 us <= 250 us (a tenth
    /// of the 2,500 us interval)`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub detail: String,
}

impl Gate {
    /// A gate on a number that must be at least `limit`.
    pub fn at_least(name: &str, value: f64, limit: f64, detail: String) -> Gate {
        Gate {
            name: name.into(),
            value: GateValue::Number(value),
            limit: GateValue::Number(limit),
            passed: value >= limit,
            detail,
        }
    }

    /// A gate on a number that must be at most `limit`.
    pub fn at_most(name: &str, value: f64, limit: f64, detail: String) -> Gate {
        Gate {
            name: name.into(),
            value: GateValue::Number(value),
            limit: GateValue::Number(limit),
            passed: value <= limit,
            detail,
        }
    }

    /// The failure in a few words: `steal 7.3 % > 2 %`.
    pub fn failure_text(&self) -> String {
        let pct = |v: &GateValue| match v {
            GateValue::Number(x) => format!("{} %", short(x * 100.0)),
            t => t.to_string(),
        };
        match self.name.as_str() {
            "steal" => format!("steal {} > {}", pct(&self.value), pct(&self.limit)),
            "foreign_cpu" => format!(
                "foreign_cpu {} > {}{}",
                pct(&self.value),
                pct(&self.limit),
                self.detail
                    .split_once("; busiest others: ")
                    .map(|(_, o)| format!(" (busiest others: {o})"))
                    .unwrap_or_default()
            ),
            "completion" => format!("completion {} < {}", pct(&self.value), pct(&self.limit)),
            "schedule" => format!("send-lag p99 {} us > {} us", self.value, self.limit),
            "machine" => format!("measured on another machine ({})", self.value),
            _ if self.detail.is_empty() => format!("{} failed", self.name),
            _ => format!("{}: {}", self.name, self.detail),
        }
    }
}

/// `; busiest others: kdamond.0 (pid 70) 0.35 s, make (pid 9) 0.2 s`, or
/// nothing when no other process ran 10 ms.
fn others_text(w: &WindowCpu) -> String {
    if w.others_top.is_empty() {
        return String::new();
    }
    let named: Vec<String> = w
        .others_top
        .iter()
        .map(|o| format!("{} (pid {}) {} s", o.comm, o.pid, short(o.cpu_s)))
        .collect();
    format!("; busiest others: {}", named.join(", "))
}

/// A point's validity record.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Validity {
    /// Every gate passed.
    pub valid: bool,
    /// Attempts made for this point (the record is of the last).
    pub attempts: u32,
    /// The gates, in [`GATE_NAMES`] order.
    pub gates: Vec<Gate>,
}

impl Validity {
    /// The record of one attempt's gates.
    pub fn of(gates: Vec<Gate>, attempts: u32) -> Validity {
        Validity {
            valid: gates.iter().all(|g| g.passed),
            attempts,
            gates,
        }
    }

    /// The gates that failed.
    pub fn failed(&self) -> impl Iterator<Item = &Gate> {
        self.gates.iter().filter(|g| !g.passed)
    }

    /// Whether measuring again could help: some gate other than `machine`
    /// failed (the machine does not change between attempts).
    pub fn worth_retrying(&self) -> bool {
        self.failed().any(|g| g.name != "machine")
    }

    /// The failed gates in words, joined: `steal 7.3 % > 2 %; ...`.
    pub fn failure_text(&self) -> String {
        self.failed()
            .map(Gate::failure_text)
            .collect::<Vec<_>>()
            .join("; ")
    }
}

/// What every measured record carries to be judged, whatever its kind:
/// its gates, the machine it ran on and who used the CPUs meanwhile. A
/// record holds it flattened (`#[serde(flatten)]`), so its JSON keeps the
/// fields `validity`, `machine` and `window_cpu`; each is absent in results
/// written before it existed.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Checked {
    /// The gates this record passed or failed (absent: not checked).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub validity: Option<Validity>,
    /// The machine it ran on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub machine: Option<Fingerprint>,
    /// Who used the CPUs while it ran, per role.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window_cpu: Option<WindowCpu>,
}

impl Checked {
    /// Whether the record may be judged: it passed every gate, or was
    /// measured before gates existed.
    pub fn is_valid(&self) -> bool {
        self.validity.as_ref().is_none_or(|v| v.valid)
    }
}

/// A limit in an experiment file: a number, or `"off"` to drop the gate.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Limit(pub Option<f64>);

impl Serialize for Limit {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self.0 {
            Some(v) => s.serialize_f64(v),
            None => s.serialize_str("off"),
        }
    }
}

impl<'de> Deserialize<'de> for Limit {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Limit, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Wire {
            Number(f64),
            Int(i64),
            Text(String),
        }
        match Wire::deserialize(d)? {
            Wire::Number(v) if v.is_finite() && v >= 0.0 => Ok(Limit(Some(v))),
            Wire::Int(v) if v >= 0 => Ok(Limit(Some(v as f64))),
            Wire::Text(t) if t.trim().eq_ignore_ascii_case("off") => Ok(Limit(None)),
            Wire::Text(t) => Err(serde::de::Error::custom(format!(
                "{t:?}: a number at least 0, or \"off\""
            ))),
            _ => Err(serde::de::Error::custom("a number at least 0, or \"off\"")),
        }
    }
}

/// A gate that is on or off in an experiment file.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Switch(pub bool);

/// `[validity]`: the gates' limits of one experiment file, any kind. Every
/// field has the default of the table in the module documentation.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ValidityLimits {
    /// Least completed / scheduled requests (`"off"`: past-saturation
    /// points are data, as in a peak-rate sweep).
    pub completion: Limit,
    /// Largest send-lag p99 as a share of a writer's mean send interval.
    pub schedule: Limit,
    /// Largest send-lag p99 in microseconds where a writer sends over
    /// 10,000 per second (a tenth of its interval is below what timers and
    /// wake-ups allow).
    pub schedule_abs_us: f64,
    /// Largest steal share of the CPUs used.
    pub steal: Limit,
    /// Largest foreign share of the CPUs used.
    pub foreign_cpu: Limit,
    /// Check the machine fingerprint against the sweep block's.
    pub machine: bool,
    /// Require the load generator's arrival check to pass.
    pub arrivals: bool,
    /// Require a stationary latency series.
    pub stationary: bool,
    /// The engine or contender measured twice per round as the A/A control
    /// (`"none"`: no control); by default the kind's reference (epoll for
    /// locality files, the first baseline for peers files).
    pub control: Option<String>,
    /// Attempts per point, the first included (`connlab sweep --attempts`
    /// wins over it).
    pub attempts: Option<u32>,
    /// Keep the CPUs awake with idle-priority spinners while measuring
    /// (`auto`: on virtual machines; locality, web, loadgen and peers
    /// sweeps; see [`connlab_os::awake`]).
    pub keep_awake: connlab_os::awake::KeepAwakeMode,
}

impl Default for ValidityLimits {
    fn default() -> Self {
        ValidityLimits {
            completion: Limit(Some(0.99)),
            schedule: Limit(Some(0.1)),
            schedule_abs_us: 50.0,
            steal: Limit(Some(0.02)),
            foreign_cpu: Limit(Some(0.05)),
            machine: true,
            arrivals: true,
            stationary: true,
            control: None,
            attempts: None,
            keep_awake: connlab_os::awake::KeepAwakeMode::Auto,
        }
    }
}

/// One machine's block of a sweep: a sweep resumed on another machine
/// starts a new block and never pools it with the earlier ones.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MachineBlock {
    /// From 1.
    pub index: u32,
    /// The machine.
    pub fingerprint: Fingerprint,
    /// Unix seconds when the block began.
    pub started_unix_s: f64,
    /// Points of earlier blocks were moved aside when this one began
    /// (into `points/block-N/`).
    #[serde(default)]
    pub points_set_aside: usize,
}

/// Where a point's processes ran.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PointPlacement {
    /// The server's (or gateway's) CPUs, as given to it.
    pub server_cpus: Option<String>,
    /// Each client shard's CPU list (writer on the first, reader on the last).
    pub shard_cpus: Vec<Option<String>>,
    /// The writers' scheduling (`SCHED_FIFO 10`, or `SCHED_OTHER`).
    pub writer_policy: String,
    /// Idle-priority spinners kept the CPUs awake (`validity.keep_awake`).
    #[serde(default)]
    pub keep_awake: bool,
    /// How it was chosen.
    pub note: String,
}

/// Attempts per point when neither the file nor the command line says.
pub const DEFAULT_ATTEMPTS: u32 = 3;

impl ValidityLimits {
    /// Checks the values parsing cannot: shares within 0..=1, attempts 1-20.
    pub fn check(&self) -> Result<(), (String, String)> {
        for (name, l) in [
            ("completion", self.completion),
            ("schedule", self.schedule),
            ("steal", self.steal),
            ("foreign_cpu", self.foreign_cpu),
        ] {
            if let Some(v) = l.0 {
                if v > 1.0 {
                    return Err((
                        format!("validity.{name}"),
                        format!("{v}: a share between 0 and 1, or \"off\""),
                    ));
                }
            }
        }
        if !(self.schedule_abs_us.is_finite() && self.schedule_abs_us > 0.0) {
            return Err((
                "validity.schedule_abs_us".into(),
                format!(
                    "{}: a positive number of microseconds",
                    self.schedule_abs_us
                ),
            ));
        }
        if let Some(a) = self.attempts {
            if !(1..=20).contains(&a) {
                return Err(("validity.attempts".into(), format!("{a}: between 1 and 20")));
            }
        }
        if let Some(c) = &self.control {
            if c.trim().is_empty() {
                return Err((
                    "validity.control".into(),
                    "name an engine or contender, or \"none\"".into(),
                ));
            }
        }
        Ok(())
    }

    /// The control named by the file: `Some(None)` for `"none"`, `None`
    /// when the file leaves it to the kind's default.
    pub fn control_choice(&self) -> Option<Option<&str>> {
        self.control
            .as_deref()
            .map(|c| (!c.eq_ignore_ascii_case("none")).then_some(c))
    }
}

/// The schedule a writer kept.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ScheduleEvidence {
    /// Send-lag p99 over the measured window, microseconds.
    pub send_lag_p99_us: f64,
    /// One writer's configured sends per second (a shard's share).
    pub writer_rate_per_s: f64,
}

/// A check the load generator made of its own run.
#[derive(Clone, Debug, PartialEq)]
pub struct RunCheck {
    /// Passed, failed, or could not tell (`None`: left out).
    pub passed: Option<bool>,
    /// The statistic it rests on.
    pub value: f64,
    /// What it was compared with.
    pub limit: f64,
    /// The method and outcome in words.
    pub detail: String,
}

/// Everything the gates look at for one point; a field left `None` leaves
/// its gate out.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Evidence {
    /// Completed and scheduled requests of the measured window.
    pub completion: Option<(u64, f64)>,
    /// The writers' schedule (open loop only).
    pub schedule: Option<ScheduleEvidence>,
    /// Steal and foreign shares of the CPUs used over the window.
    pub cpu: Option<WindowCpu>,
    /// The point's machine and the sweep block's.
    pub machine: Option<(Fingerprint, Fingerprint)>,
    /// The load generator's arrival check.
    pub arrivals: Option<RunCheck>,
    /// The load generator's stationarity check.
    pub stationary: Option<RunCheck>,
    /// The p99's interval width relative to it, and the target (only
    /// with `--ci-target`).
    pub precision: Option<(f64, f64)>,
}

impl Evidence {
    /// The load generator's own checks of a run (`run_checks`): arrivals,
    /// stationarity, and the p99's relative interval width against
    /// `ci_target` when one is set.
    pub fn with_run_checks(
        mut self,
        load: &connlab_loadgen::LoadResult,
        ci_target: Option<f64>,
    ) -> Evidence {
        let Some(c) = &load.run_checks else {
            return self;
        };
        let a = &c.arrivals;
        self.arrivals = a.passed.map(|passed| match a.p_value {
            Some(p) => RunCheck {
                passed: Some(passed),
                value: p,
                limit: 0.01,
                detail: format!(
                    "Anderson-Darling p = {} over {} gaps ({})",
                    short(p),
                    a.samples,
                    a.method
                ),
            },
            None => RunCheck {
                passed: Some(passed),
                value: a.statistic,
                limit: 0.05,
                detail: format!(
                    "{} % of {} gaps off the interval by more than a tenth",
                    short(a.statistic * 100.0),
                    a.samples
                ),
            },
        });
        let st = &c.stationarity;
        self.stationary =
            match (st.stationary, st.tau, st.critical_5pc) {
                (Some(ok), Some(tau), Some(crit)) => {
                    Some(RunCheck {
                        passed: Some(ok),
                        value: tau,
                        limit: crit,
                        detail: format!(
                    "augmented Dickey-Fuller tau {} against {} (5 %) over {} latency samples",
                    short(tau),
                    short(crit),
                    if st.samples > 0 { st.samples } else { st.windows }
                ),
                    })
                }
                _ => None,
            };
        if let (Some(target), Some(p99)) = (ci_target, &c.service_latency_p99) {
            if p99.value > 0.0 {
                self.precision = Some(((p99.hi - p99.lo) / p99.value, target));
            }
        } else if let Some(target) = ci_target {
            // Too few samples for any interval of the p99: infinitely wide.
            self.precision = Some((f64::INFINITY, target));
        }
        self
    }
}

/// Judges the evidence against the limits: the gates in [`GATE_NAMES`]
/// order, those without evidence or switched off left out.
pub fn gates(limits: &ValidityLimits, e: &Evidence) -> Vec<Gate> {
    let mut out = Vec::new();
    if let (Some(limit), Some((completed, scheduled))) = (limits.completion.0, e.completion) {
        let ratio = if scheduled > 0.0 {
            completed as f64 / scheduled
        } else if completed > 0 {
            1.0
        } else {
            0.0
        };
        out.push(Gate::at_least(
            "completion",
            ratio,
            limit,
            format!(
                "{completed} of {} scheduled requests completed",
                scheduled.round()
            ),
        ));
    }
    if let (Some(share), Some(s)) = (limits.schedule.0, e.schedule) {
        if s.writer_rate_per_s > 0.0 {
            let interval_us = 1e6 / s.writer_rate_per_s;
            let (limit, why) = if s.writer_rate_per_s > 10_000.0 {
                (
                    limits.schedule_abs_us,
                    format!(
                        "the absolute bound: a writer sends {:.0} per second, every {} us",
                        s.writer_rate_per_s,
                        short(interval_us)
                    ),
                )
            } else {
                (
                    interval_us * share,
                    format!(
                        "{} of the writer's {} us interval",
                        short(share),
                        short(interval_us)
                    ),
                )
            };
            out.push(Gate::at_most(
                "schedule",
                s.send_lag_p99_us,
                limit,
                format!(
                    "send-lag p99 {} us against {} us ({why})",
                    short(s.send_lag_p99_us),
                    short(limit)
                ),
            ));
        }
    }
    if let Some(w) = &e.cpu {
        let cpus = w
            .cpus
            .iter()
            .map(usize::to_string)
            .collect::<Vec<_>>()
            .join(",");
        if let Some(limit) = limits.steal.0 {
            out.push(Gate::at_most(
                "steal",
                w.steal_share,
                limit,
                format!("steal on cpu {cpus} over {:.1} s", w.seconds),
            ));
        }
        if let Some(limit) = limits.foreign_cpu.0 {
            out.push(Gate::at_most(
                "foreign_cpu",
                w.foreign_share,
                limit,
                format!(
                    "cpu {cpus} busy {:.1} %, the experiment's processes {:.1} %, kernel softirq threads {:.1} %{}",
                    w.busy_share * 100.0,
                    w.own_share * 100.0,
                    w.kernel_net_share * 100.0,
                    others_text(w)
                ),
            ));
        }
    }
    if let (true, Some((point, sweep))) = (limits.machine, &e.machine) {
        out.push(Gate {
            name: "machine".into(),
            value: GateValue::Text(point.to_string()),
            limit: GateValue::Text(sweep.to_string()),
            passed: point == sweep,
            detail: String::new(),
        });
    }
    for (name, on, check) in [
        ("arrivals", limits.arrivals, &e.arrivals),
        ("stationary", limits.stationary, &e.stationary),
    ] {
        if let (true, Some(c)) = (on, check) {
            if let Some(passed) = c.passed {
                out.push(Gate {
                    name: name.into(),
                    value: GateValue::Number(c.value),
                    limit: GateValue::Number(c.limit),
                    passed,
                    detail: c.detail.clone(),
                });
            }
        }
    }
    if let Some((width, target)) = e.precision {
        out.push(Gate::at_most(
            "precision",
            width,
            target,
            format!(
                "the p99's 95 % interval spans {} % of it (target {} %)",
                short(width * 100.0),
                short(target * 100.0)
            ),
        ));
    }
    out
}

/// The invalid points of a set, counted per gate: `[("steal", 4), ...]` in
/// [`GATE_NAMES`] order, gates without failures left out.
pub fn failures_by_gate<'a>(
    validities: impl IntoIterator<Item = &'a Validity>,
) -> Vec<(String, usize)> {
    let mut counts: Vec<(String, usize)> = Vec::new();
    for v in validities {
        for g in v.failed() {
            match counts.iter_mut().find(|(n, _)| *n == g.name) {
                Some(c) => c.1 += 1,
                None => counts.push((g.name.clone(), 1)),
            }
        }
    }
    counts.sort_by_key(|(n, _)| GATE_NAMES.iter().position(|g| g == n).unwrap_or(usize::MAX));
    counts
}

/// Why comparisons resting on these points cannot be judged: each failing
/// gate with its worst value and how many of the points failed it, e.g.
/// `steal 7.3 % > 2 % at 4 of 6 points`.
pub fn cannot_judge_reason(validities: &[&Validity]) -> String {
    let total = validities.len();
    let mut parts: Vec<String> = Vec::new();
    for name in GATE_NAMES {
        let failed: Vec<&Gate> = validities
            .iter()
            .flat_map(|v| v.failed())
            .filter(|g| g.name == name)
            .collect();
        if failed.is_empty() {
            continue;
        }
        // The worst value: the largest for upper bounds, the smallest for
        // `completion`.
        let worst = failed
            .iter()
            .copied()
            .reduce(|a, b| match (&a.value, &b.value) {
                (GateValue::Number(x), GateValue::Number(y)) => {
                    let b_worse = if name == "completion" { y < x } else { y > x };
                    if b_worse {
                        b
                    } else {
                        a
                    }
                }
                _ => a,
            })
            .expect("failed is not empty");
        parts.push(format!(
            "{} at {} of {total} points",
            worst.failure_text(),
            failed.len()
        ));
    }
    if parts.is_empty() {
        "no valid point".into()
    } else {
        parts.join("; ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use WindowCpu;

    fn fp(model: &str) -> Fingerprint {
        Fingerprint {
            cpu_model: model.into(),
            cpu_count: 2,
            kernel: "Linux 6.18".into(),
            clock_source: "tsc".into(),
        }
    }

    #[test]
    fn every_gate_passes_and_fails_for_its_own_reason() {
        let limits = ValidityLimits::default();
        let good = Evidence {
            completion: Some((1995, 2000.0)),
            schedule: Some(ScheduleEvidence {
                send_lag_p99_us: 40.0,
                writer_rate_per_s: 400.0,
            }),
            cpu: Some(WindowCpu {
                cpus: vec![0, 1],
                seconds: 3.0,
                steal_share: 0.01,
                foreign_share: 0.02,
                ..WindowCpu::default()
            }),
            machine: Some((fp("AMD EPYC"), fp("AMD EPYC"))),
            arrivals: Some(RunCheck {
                passed: Some(true),
                value: 0.01,
                limit: 0.05,
                detail: "fixed".into(),
            }),
            stationary: Some(RunCheck {
                passed: Some(true),
                value: -5.0,
                limit: -2.9,
                detail: "adf".into(),
            }),
            precision: None,
        };
        let g = gates(&limits, &good);
        let names: Vec<&str> = g.iter().map(|g| g.name.as_str()).collect();
        assert_eq!(names, GATE_NAMES[..7].to_vec());
        assert!(Validity::of(g, 1).valid);

        let failing = |e: Evidence, name: &str| {
            let v = Validity::of(gates(&limits, &e), 1);
            let failed: Vec<&str> = v.failed().map(|g| g.name.as_str()).collect();
            assert_eq!(failed, vec![name], "{v:?}");
            v
        };
        // A server that drops half its requests.
        let v = failing(
            Evidence {
                completion: Some((1000, 2000.0)),
                ..good.clone()
            },
            "completion",
        );
        assert_eq!(v.failure_text(), "completion 50 % < 99 %");
        // 2,243 us of lag against a 2,500 us interval (tenth: 250 us).
        failing(
            Evidence {
                schedule: Some(ScheduleEvidence {
                    send_lag_p99_us: 2243.0,
                    writer_rate_per_s: 400.0,
                }),
                ..good.clone()
            },
            "schedule",
        );
        let v = failing(
            Evidence {
                cpu: Some(WindowCpu {
                    steal_share: 0.073,
                    ..good.cpu.clone().unwrap()
                }),
                ..good.clone()
            },
            "steal",
        );
        assert_eq!(v.failure_text(), "steal 7.3 % > 2 %");
        let v = failing(
            Evidence {
                cpu: Some(WindowCpu {
                    foreign_share: 0.5,
                    others_top: vec![connlab_os::window::OtherProcess {
                        pid: 70,
                        comm: "kdamond.0".into(),
                        cpu_s: 0.35,
                    }],
                    ..good.cpu.clone().unwrap()
                }),
                ..good.clone()
            },
            "foreign_cpu",
        );
        // It names its suspects.
        assert_eq!(
            v.failure_text(),
            "foreign_cpu 50 % > 5 % (busiest others: kdamond.0 (pid 70) 0.35 s)"
        );
        let v = failing(
            Evidence {
                machine: Some((fp("Intel Xeon"), fp("AMD EPYC"))),
                ..good.clone()
            },
            "machine",
        );
        assert!(!v.worth_retrying());
        failing(
            Evidence {
                arrivals: Some(RunCheck {
                    passed: Some(false),
                    ..good.arrivals.clone().unwrap()
                }),
                ..good.clone()
            },
            "arrivals",
        );
        failing(
            Evidence {
                stationary: Some(RunCheck {
                    passed: Some(false),
                    ..good.stationary.clone().unwrap()
                }),
                ..good.clone()
            },
            "stationary",
        );
        // --ci-target 5 %: an interval 12 % wide fails, 3 % passes.
        failing(
            Evidence {
                precision: Some((0.12, 0.05)),
                ..good.clone()
            },
            "precision",
        );
        assert!(
            Validity::of(
                gates(
                    &limits,
                    &Evidence {
                        precision: Some((0.03, 0.05)),
                        ..good.clone()
                    }
                ),
                1
            )
            .valid
        );
    }

    #[test]
    fn fast_writers_get_the_absolute_bound_and_missing_evidence_drops_gates() {
        let limits = ValidityLimits::default();
        let e = Evidence {
            schedule: Some(ScheduleEvidence {
                send_lag_p99_us: 36.4,
                writer_rate_per_s: 20_000.0,
            }),
            ..Evidence::default()
        };
        let g = gates(&limits, &e);
        assert_eq!(g.len(), 1);
        assert!(g[0].passed, "{g:?}");
        assert_eq!(g[0].limit, GateValue::Number(50.0));
        // An arrival check that could not tell is left out.
        let e = Evidence {
            arrivals: Some(RunCheck {
                passed: None,
                value: 0.0,
                limit: 0.0,
                detail: String::new(),
            }),
            ..Evidence::default()
        };
        assert!(gates(&limits, &e).is_empty());
    }

    #[test]
    fn limits_read_from_a_file_with_off_and_checks() {
        let l: ValidityLimits =
            toml::from_str("completion = \"off\"\nsteal = 0.05\ncontrol = \"none\"\n").unwrap();
        assert_eq!(l.completion, Limit(None));
        assert_eq!(l.steal, Limit(Some(0.05)));
        assert_eq!(l.control_choice(), Some(None));
        assert_eq!(ValidityLimits::default().control_choice(), None);
        assert!(l.check().is_ok());
        let e = gates(
            &l,
            &Evidence {
                completion: Some((1, 100.0)),
                ..Evidence::default()
            },
        );
        assert!(e.is_empty(), "an off gate is left out: {e:?}");
        let bad: ValidityLimits = toml::from_str("steal = 2\n").unwrap();
        assert_eq!(bad.check().unwrap_err().0, "validity.steal");
        assert!(toml::from_str::<ValidityLimits>("steal = \"lots\"\n").is_err());
        assert!(toml::from_str::<ValidityLimits>("stael = 0.1\n").is_err());
        let bad: ValidityLimits = toml::from_str("attempts = 0\n").unwrap();
        assert_eq!(bad.check().unwrap_err().0, "validity.attempts");
    }

    #[test]
    fn the_reason_names_the_gate_its_worst_value_and_the_count() {
        let steal = |s: f64| Validity::of(vec![Gate::at_most("steal", s, 0.02, String::new())], 3);
        let (a, b, c) = (steal(0.05), steal(0.073), steal(0.01));
        let v = [&a, &b, &c];
        assert_eq!(
            cannot_judge_reason(&v),
            "steal 7.3 % > 2 % at 2 of 3 points"
        );
        assert_eq!(failures_by_gate(v), vec![("steal".to_string(), 2)]);
    }
}
