//! The soak's results: `soak.json` (schema `connlab.soak/1`), its checks,
//! and the content of the short summary page ([`SoakSummary`]).

use super::hostile::HostileReport;
use super::Plan;
use serde::Serialize;
use std::collections::BTreeMap;

/// Version tag of [`SoakReport`].
pub(super) const SOAK_SCHEMA: &str = "connlab.soak/1";

/// How a process incarnation ended.
#[derive(Serialize, Clone, Debug)]
pub(super) struct ExitRecord {
    /// Which start of the process (1 = the first).
    pub(super) incarnation: u32,
    /// Seconds since the soak started.
    pub(super) at_s: f64,
    /// `exit N` or `signal N (NAME)`.
    pub(super) status: String,
    /// Whether this is the end the soak asked for (its SIGKILL, or exit 0 on SIGTERM).
    pub(super) expected: bool,
    /// What led to it.
    pub(super) why: String,
}

/// One long-lived process (all its incarnations).
#[derive(Serialize, Clone, Debug)]
pub(super) struct ProcessReport {
    pub(super) name: String,
    pub(super) role: String,
    pub(super) incarnations: u32,
    /// Largest VmRSS/VmHWM seen over every incarnation, KiB.
    pub(super) peak_rss_kib: u64,
    pub(super) exits: Vec<ExitRecord>,
    /// Numeric top-level fields of the last incarnation's `--stats`.
    pub(super) stats: Option<BTreeMap<String, f64>>,
}

/// One fault action.
#[derive(Serialize, Clone, Debug)]
pub(super) struct FaultRecord {
    pub(super) at_s: f64,
    /// kill, restart, stop or cont.
    pub(super) action: String,
    pub(super) target: String,
    pub(super) ok: bool,
    pub(super) error: Option<String>,
}

/// One load child.
#[derive(Serialize, Clone, Debug)]
pub(super) struct SegmentReport {
    pub(super) class: String,
    /// baseline or fault.
    pub(super) phase: String,
    pub(super) index: usize,
    /// Faults fired in this segment (empty: a healthy segment).
    pub(super) faults: Vec<String>,
    pub(super) started_s: f64,
    pub(super) ended_s: f64,
    pub(super) exit: String,
    pub(super) clean_exit: bool,
    /// Killed for running past its segment + 20 s.
    pub(super) hung: bool,
    pub(super) result_read: bool,
    pub(super) sent: u64,
    pub(super) completed: u64,
    pub(super) errored: u64,
    pub(super) errors: BTreeMap<String, u64>,
    pub(super) p99_us: Option<f64>,
}

/// Requests of one class in one phase.
#[derive(Serialize, Clone, Debug, Default)]
pub(super) struct PhaseTotals {
    pub(super) segments: usize,
    pub(super) sent: u64,
    pub(super) completed: u64,
    pub(super) errored: u64,
    pub(super) errors: BTreeMap<String, u64>,
    /// sent - completed - errored over segments whose result was read.
    pub(super) unaccounted: i64,
    /// Segments with no result or a hang.
    pub(super) lost_segments: usize,
    /// Largest service latency of a completed request, microseconds.
    pub(super) max_us: Option<f64>,
}

impl PhaseTotals {
    pub(super) fn from_segments<'a>(segs: impl Iterator<Item = &'a SegmentReport>) -> Self {
        let mut t = PhaseTotals::default();
        for s in segs {
            t.segments += 1;
            if !s.result_read || s.hung {
                t.lost_segments += 1;
            }
            t.sent += s.sent;
            t.completed += s.completed;
            t.errored += s.errored;
            for (k, v) in &s.errors {
                *t.errors.entry(k.clone()).or_default() += v;
            }
        }
        t.unaccounted = t.sent as i64 - t.completed as i64 - t.errored as i64;
        t
    }
}

/// One load class: totals and p99 per phase.
#[derive(Serialize, Clone, Debug)]
pub(super) struct ClassReport {
    pub(super) name: String,
    pub(super) target: String,
    pub(super) path: String,
    pub(super) baseline: PhaseTotals,
    pub(super) fault: PhaseTotals,
    /// The fault phase's segments with no kill or stop in them.
    pub(super) fault_healthy: PhaseTotals,
    /// Service-latency p99 of the fault-free run, microseconds.
    pub(super) baseline_p99_us: Option<f64>,
    /// p99 of the healthy segments of the fault phase (hostile clients running).
    pub(super) healthy_p99_us: Option<f64>,
    /// p99 of every segment of the fault phase, faults included.
    pub(super) fault_all_p99_us: Option<f64>,
    /// healthy_p99_us / baseline_p99_us.
    pub(super) p99_factor: Option<f64>,
}

impl ClassReport {
    #[allow(clippy::too_many_arguments)]
    pub(super) fn new(
        name: &str,
        target: String,
        path: &str,
        baseline: PhaseTotals,
        fault: PhaseTotals,
        fault_healthy: PhaseTotals,
        baseline_p99_us: Option<f64>,
        healthy_p99_us: Option<f64>,
        fault_all_p99_us: Option<f64>,
    ) -> Self {
        let p99_factor = match (healthy_p99_us, baseline_p99_us) {
            (Some(h), Some(b)) if b > 0.0 => Some(h / b),
            _ => None,
        };
        ClassReport {
            name: name.to_string(),
            target,
            path: path.to_string(),
            baseline,
            fault,
            fault_healthy,
            baseline_p99_us,
            healthy_p99_us,
            fault_all_p99_us,
            p99_factor,
        }
    }
}

/// The run as configured.
#[derive(Serialize, Clone, Debug)]
pub(super) struct ConfigReport {
    pub(super) quick: bool,
    pub(super) segment_s: f64,
    pub(super) baseline_segments: usize,
    pub(super) fault_segments: usize,
    pub(super) rate_per_s_per_class: f64,
    pub(super) workers_per_class: usize,
    pub(super) rss_limit_kib: u64,
    pub(super) p99_factor_limit: Option<f64>,
    pub(super) restart_after_s: f64,
    pub(super) stop_for_s: f64,
    pub(super) never_read_hold_s: f64,
    /// The proxy gateway's `--io` (copy, splice, uring).
    pub(super) gateway_io: &'static str,
}

/// The verdicts.
#[derive(Serialize, Clone, Debug)]
pub(super) struct Checks {
    /// Every process ended the way the soak asked (its signal, or exit 0).
    pub(super) no_crash: bool,
    /// Every long-lived process stayed below the RSS limit.
    pub(super) memory_bounded: bool,
    /// completed + errored = sent for every class and phase, every result read.
    pub(super) all_accounted: bool,
    /// No load child ran past its segment + 20 s.
    pub(super) no_hang: bool,
    /// Every fault action took effect (a restart came up).
    pub(super) faults_fired: bool,
    /// healthy p99 within the factor (null when no --p99-factor was given).
    pub(super) p99_within_factor: Option<bool>,
}

/// `soak.json`.
#[derive(Serialize, Clone, Debug)]
pub struct SoakReport {
    pub(super) schema: &'static str,
    pub(super) config: ConfigReport,
    pub(super) started_unix_s: f64,
    pub(super) wall_s: f64,
    pub(super) interrupted: bool,
    /// Set when the components could not be started (nothing measured).
    pub setup_error: Option<String>,
    pub(super) classes: Vec<ClassReport>,
    /// Fault actions by kind (kill, restart, stop, cont).
    pub(super) faults_fired: BTreeMap<String, u64>,
    pub(super) faults: Vec<FaultRecord>,
    pub(super) hostile: HostileReport,
    pub(super) processes: Vec<ProcessReport>,
    /// Load children that did not end cleanly (exit 0), by class/phase/index.
    pub(super) load_failures: Vec<String>,
    pub(super) checks: Checks,
    /// Why a check failed, one line each.
    pub(super) failures: Vec<String>,
    /// All checks passed (p99 only when a factor was given), nothing interrupted.
    pub passed: bool,
    pub(super) segments: Vec<SegmentReport>,
}

/// Assembles the report and its checks.
#[allow(clippy::too_many_arguments)]
pub(super) fn build(
    plan: &Plan,
    started_unix_s: f64,
    wall_s: f64,
    interrupted: bool,
    setup_error: Option<String>,
    classes: Vec<ClassReport>,
    segments: Vec<SegmentReport>,
    faults: Vec<FaultRecord>,
    hostile: HostileReport,
    processes: Vec<ProcessReport>,
) -> SoakReport {
    let mut failures = Vec::new();
    if let Some(e) = &setup_error {
        failures.push(format!("setup: {e}"));
    }
    for p in &processes {
        for e in p.exits.iter().filter(|e| !e.expected) {
            failures.push(format!(
                "crash: {} (incarnation {}) {} at {:.1}s: {}",
                p.name, e.incarnation, e.status, e.at_s, e.why
            ));
        }
        if p.peak_rss_kib >= plan.rss_limit_kib {
            failures.push(format!(
                "memory: {} peaked at {} KiB, limit {} KiB",
                p.name, p.peak_rss_kib, plan.rss_limit_kib
            ));
        }
    }
    let load_failures: Vec<String> = segments
        .iter()
        .filter(|s| !s.clean_exit)
        .map(|s| format!("{} {} #{}: {}", s.class, s.phase, s.index, s.exit))
        .collect();
    for f in &load_failures {
        failures.push(format!("crash: load child {f}"));
    }
    let hung: Vec<&SegmentReport> = segments.iter().filter(|s| s.hung).collect();
    for s in &hung {
        failures.push(format!(
            "hang: load {} {} #{} still running {:.0}s after its start",
            s.class,
            s.phase,
            s.index,
            s.ended_s - s.started_s
        ));
    }
    let mut all_accounted = true;
    for s in &segments {
        let gap = s.sent as i64 - s.completed as i64 - s.errored as i64;
        if !s.result_read || gap != 0 {
            all_accounted = false;
            failures.push(format!(
                "accounting: load {} {} #{}: {}",
                s.class,
                s.phase,
                s.index,
                if s.result_read {
                    format!(
                        "sent {} != completed {} + errored {}",
                        s.sent, s.completed, s.errored
                    )
                } else {
                    "no result written".to_string()
                }
            ));
        }
    }
    for f in faults.iter().filter(|f| !f.ok) {
        failures.push(format!(
            "fault: {} {} at {:.1}s failed: {}",
            f.action,
            f.target,
            f.at_s,
            f.error.as_deref().unwrap_or("?")
        ));
    }
    let p99_within_factor = plan.p99_factor.map(|limit| {
        classes
            .iter()
            .all(|c| c.p99_factor.is_some_and(|f| f <= limit))
    });
    if p99_within_factor == Some(false) {
        for c in &classes {
            failures.push(format!(
                "p99: {}: healthy {:?} us vs fault-free {:?} us (factor {:?}, limit {:?})",
                c.name, c.healthy_p99_us, c.baseline_p99_us, c.p99_factor, plan.p99_factor
            ));
        }
    }
    let checks = Checks {
        no_crash: processes.iter().all(|p| p.exits.iter().all(|e| e.expected))
            && load_failures.is_empty(),
        memory_bounded: processes
            .iter()
            .all(|p| p.peak_rss_kib < plan.rss_limit_kib),
        all_accounted,
        no_hang: hung.is_empty(),
        faults_fired: faults.iter().all(|f| f.ok),
        p99_within_factor,
    };
    let passed = setup_error.is_none()
        && !interrupted
        && checks.no_crash
        && checks.memory_bounded
        && checks.all_accounted
        && checks.no_hang
        && checks.faults_fired
        && checks.p99_within_factor != Some(false);
    let mut faults_fired = BTreeMap::new();
    for f in faults.iter().filter(|f| f.ok) {
        *faults_fired.entry(f.action.clone()).or_default() += 1;
    }
    SoakReport {
        schema: SOAK_SCHEMA,
        config: ConfigReport {
            quick: plan.quick,
            segment_s: plan.segment.as_secs_f64(),
            baseline_segments: plan.baseline_segments,
            fault_segments: plan.fault_segments,
            rate_per_s_per_class: plan.rate,
            workers_per_class: super::WORKERS,
            rss_limit_kib: plan.rss_limit_kib,
            p99_factor_limit: plan.p99_factor,
            restart_after_s: plan.restart_after.as_secs_f64(),
            stop_for_s: plan.stop_for.as_secs_f64(),
            never_read_hold_s: plan.never_read_hold.as_secs_f64(),
            gateway_io: plan.gateway_io,
        },
        started_unix_s,
        wall_s,
        interrupted,
        setup_error,
        classes,
        faults_fired,
        faults,
        hostile,
        processes,
        load_failures,
        checks,
        failures,
        passed,
        segments,
    }
}

fn us(v: Option<f64>) -> String {
    v.map_or("-".to_string(), |v| format!("{v:.0}"))
}

/// What the soak's summary page (`soak.md`) shows, as text: the report
/// crate lays it out (`connlab_report::render_soak`).
#[derive(Clone, Debug)]
pub struct SoakSummary {
    /// The run in one sentence: segments, rate, the gateway's I/O, wall time.
    pub setup: String,
    /// Per class and phase: class, phase, sent, completed, errored, p99 µs
    /// and max µs.
    pub phases: Vec<[String; 7]>,
    /// Per class: its healthy p99 over its fault-free p99.
    pub factors: Vec<(String, String)>,
    /// The faults fired, the hostile clients and the peak memory: (name, value).
    pub facts: Vec<(String, String)>,
    /// The checks and their results in one sentence.
    pub checks: String,
    /// Every check passed.
    pub passed: bool,
    /// Why checks failed, one line each.
    pub failures: Vec<String>,
}

impl SoakReport {
    /// The summary page's content.
    pub fn summary(&self) -> SoakSummary {
        let c = &self.config;
        let setup = format!(
            "{} fault-free and {} fault segments of {} s, {} req/s per class, \
             gateway `--io {}`; wall {:.0} s{}.",
            c.baseline_segments,
            c.fault_segments,
            c.segment_s,
            c.rate_per_s_per_class,
            c.gateway_io,
            self.wall_s,
            if self.interrupted {
                ", interrupted"
            } else {
                ""
            }
        );
        let mut phases = Vec::new();
        for k in &self.classes {
            for (phase, t, p99) in [
                ("fault-free", &k.baseline, k.baseline_p99_us),
                (
                    "faults, healthy segments",
                    &k.fault_healthy,
                    k.healthy_p99_us,
                ),
                ("faults, all segments", &k.fault, k.fault_all_p99_us),
            ] {
                phases.push([
                    k.name.clone(),
                    phase.to_string(),
                    t.sent.to_string(),
                    t.completed.to_string(),
                    t.errored.to_string(),
                    us(p99),
                    us(t.max_us),
                ]);
            }
        }
        let factors = self
            .classes
            .iter()
            .map(|k| {
                (
                    k.name.clone(),
                    k.p99_factor.map_or("-".into(), |f| format!("{f:.2}")),
                )
            })
            .collect();
        let fired: Vec<String> = self
            .faults_fired
            .iter()
            .map(|(k, v)| format!("{k} {v}"))
            .collect();
        let h = &self.hostile;
        let facts = vec![
            (
                "faults fired".to_string(),
                if fired.is_empty() {
                    "none".to_string()
                } else {
                    fired.join(", ")
                },
            ),
            (
                "hostile".to_string(),
                format!(
                    "slowloris {} connects ({} closed by peer), garbage {} connects ({} closed, \
                     {} unanswered), never-read {} connects",
                    h.slowloris.total.connects,
                    h.slowloris.total.closed_by_peer,
                    h.garbage.total.connects,
                    h.garbage.total.closed_by_peer,
                    h.garbage.total.no_reply,
                    h.never_read.total.connects,
                ),
            ),
            (
                "peak RSS (KiB)".to_string(),
                self.processes
                    .iter()
                    .map(|p| format!("{} {}", p.name, p.peak_rss_kib))
                    .collect::<Vec<_>>()
                    .join(", "),
            ),
        ];
        let k = &self.checks;
        let checks = format!(
            "Checks: no crash {}, memory below {} KiB {}, all accounted {}, no hang {}, \
             faults fired {}, p99 {}.",
            k.no_crash,
            c.rss_limit_kib,
            k.memory_bounded,
            k.all_accounted,
            k.no_hang,
            k.faults_fired,
            k.p99_within_factor
                .map_or("reported only".to_string(), |b| b.to_string()),
        );
        SoakSummary {
            setup,
            phases,
            factors,
            facts,
            checks,
            passed: self.passed,
            failures: self.failures.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn plan(p99_factor: Option<f64>) -> Plan {
        Plan {
            quick: true,
            segment: Duration::from_secs(4),
            baseline_segments: 2,
            fault_segments: 4,
            rate: 100.0,
            rss_limit_kib: 1000,
            p99_factor,
            never_read_hold: Duration::from_secs(5),
            restart_after: Duration::from_secs(1),
            stop_for: Duration::from_secs(2),
            gateway_io: "copy",
        }
    }

    fn segment(sent: u64, completed: u64, errored: u64) -> SegmentReport {
        SegmentReport {
            class: "gateway".into(),
            phase: "fault".into(),
            index: 0,
            faults: Vec::new(),
            started_s: 0.0,
            ended_s: 4.0,
            exit: "exit 0".into(),
            clean_exit: true,
            hung: false,
            result_read: true,
            sent,
            completed,
            errored,
            errors: BTreeMap::new(),
            p99_us: Some(100.0),
        }
    }

    fn process(peak_rss_kib: u64, status: &str, expected: bool) -> ProcessReport {
        ProcessReport {
            name: "gw-backend-1".into(),
            role: "backend".into(),
            incarnations: 1,
            peak_rss_kib,
            exits: vec![ExitRecord {
                incarnation: 1,
                at_s: 10.0,
                status: status.into(),
                expected,
                why: "test".into(),
            }],
            stats: None,
        }
    }

    fn class(factor_of: f64) -> ClassReport {
        ClassReport::new(
            "gateway",
            "127.0.0.1:1".into(),
            "/bytes/1024",
            PhaseTotals::default(),
            PhaseTotals::default(),
            PhaseTotals::default(),
            Some(100.0),
            Some(100.0 * factor_of),
            Some(100.0),
        )
    }

    fn run(
        plan: &Plan,
        segments: Vec<SegmentReport>,
        processes: Vec<ProcessReport>,
        classes: Vec<ClassReport>,
    ) -> SoakReport {
        build(
            plan,
            0.0,
            30.0,
            false,
            None,
            classes,
            segments,
            Vec::new(),
            HostileReport::default(),
            processes,
        )
    }

    #[test]
    fn a_clean_run_passes_and_reports_the_factor() {
        let r = run(
            &plan(None),
            vec![segment(400, 399, 1)],
            vec![process(500, "exit 0", true)],
            vec![class(3.0)],
        );
        assert!(r.passed, "{:?}", r.failures);
        assert_eq!(r.classes[0].p99_factor, Some(3.0));
        assert_eq!(r.checks.p99_within_factor, None);
        let summary = r.summary();
        assert!(summary.passed && summary.failures.is_empty());
        assert_eq!(summary.phases.len(), 3);
        assert_eq!(
            summary.factors,
            [("gateway".to_string(), "3.00".to_string())]
        );
    }

    #[test]
    fn each_check_fails_on_its_own_evidence() {
        let crash = run(
            &plan(None),
            vec![segment(400, 400, 0)],
            vec![process(500, "signal 11 (other)", false)],
            vec![class(1.0)],
        );
        assert!(!crash.passed && !crash.checks.no_crash);
        assert!(crash.failures[0].starts_with("crash: gw-backend-1"));

        let memory = run(
            &plan(None),
            vec![segment(400, 400, 0)],
            vec![process(1000, "exit 0", true)],
            vec![class(1.0)],
        );
        assert!(!memory.passed && !memory.checks.memory_bounded);

        let lost = run(
            &plan(None),
            vec![segment(400, 390, 5)],
            vec![process(500, "exit 0", true)],
            vec![class(1.0)],
        );
        assert!(!lost.passed && !lost.checks.all_accounted);
        assert!(lost.failures[0].contains("sent 400 != completed 390 + errored 5"));

        let mut hung_segment = segment(400, 400, 0);
        hung_segment.hung = true;
        hung_segment.clean_exit = false;
        let hung = run(
            &plan(None),
            vec![hung_segment],
            vec![process(500, "exit 0", true)],
            vec![class(1.0)],
        );
        assert!(!hung.passed && !hung.checks.no_hang);

        let slow = run(
            &plan(Some(2.0)),
            vec![segment(400, 400, 0)],
            vec![process(500, "exit 0", true)],
            vec![class(3.0)],
        );
        assert!(!slow.passed);
        assert_eq!(slow.checks.p99_within_factor, Some(false));
        let fine = run(
            &plan(Some(4.0)),
            vec![segment(400, 400, 0)],
            vec![process(500, "exit 0", true)],
            vec![class(3.0)],
        );
        assert!(fine.passed, "{:?}", fine.failures);
    }
}
