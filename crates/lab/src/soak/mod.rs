//! The fault soak (`connlab soak`). Mixed HTTP load through the proxy
//! gateway and the single-IP front end on loopback, first fault-free, then
//! while backends and app nodes are killed and restarted, processes are
//! stopped for 2 s, and hostile clients (slowloris, garbage, never-read)
//! run throughout. Reports crashes, peak memory, request accounting and
//! p99 against the fault-free run in `soak.json`, and gives the content of
//! the summary page `soak.md` as a [`SoakSummary`] (the report crate lays
//! it out). The binary parses the flags into a [`SoakRequest`], prints the
//! notes, writes and prints the summary, and turns the [`SoakOutcome`]
//! into an exit code.

mod component;
mod hostile;
mod load;
mod procs;
mod report;
mod start;

use anyhow::{anyhow, Context};
use component::{Component, Env};
use connlab_measure::LatencyHistogram;
use connlab_os::Shutdown;
use hostile::{Hostile, HostileReport, Sizes};
use load::LoadChild;
use procs::describe;
use report::{ClassReport, ExitRecord, FaultRecord, PhaseTotals, ProcessReport, SegmentReport};
pub use report::{SoakReport, SoakSummary};
use std::collections::BTreeMap;
use std::fs::File;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

/// What the flags of `connlab soak` ask for, before it is resolved into a
/// [`Plan`].
#[derive(Clone, Debug)]
pub struct SoakRequest {
    /// Length of the fault phase (ignored with `quick`).
    pub duration: Duration,
    /// The CI version: 4 s segments, an 8 s fault-free run and a 16 s fault phase.
    pub quick: bool,
    /// Length of one load segment (default 10 s, `quick` 4 s).
    pub segment: Option<Duration>,
    /// Length of the fault-free run (default a fifth of the duration, at
    /// least two segments).
    pub baseline: Option<Duration>,
    /// Requests per second of each load class.
    pub rate: f64,
    /// Peak resident memory each long-lived process must stay below, bytes.
    pub rss_limit: u64,
    /// Fail when a class's healthy p99 exceeds this factor times its
    /// fault-free p99.
    pub p99_factor: Option<f64>,
    /// How long a never-reading client holds its connection (default 20 s,
    /// `quick` 5 s).
    pub never_read_hold: Option<Duration>,
    /// The proxy gateway's `--io` under the faults (`copy`, `splice`, `uring`).
    pub gateway_io: &'static str,
}

/// The resolved plan of a soak run.
#[derive(Clone, Debug)]
pub struct Plan {
    quick: bool,
    segment: Duration,
    baseline_segments: usize,
    fault_segments: usize,
    rate: f64,
    rss_limit_kib: u64,
    p99_factor: Option<f64>,
    never_read_hold: Duration,
    /// Delay from a kill to the restart.
    restart_after: Duration,
    /// How long a stopped process stays stopped.
    stop_for: Duration,
    /// The proxy gateway's `--io`.
    gateway_io: &'static str,
}

impl Plan {
    /// Resolves a request; an error names the flag that is wrong.
    pub fn new(a: &SoakRequest) -> anyhow::Result<Plan> {
        let (duration, default_segment) = if a.quick {
            (Duration::from_secs(16), Duration::from_secs(4))
        } else {
            (a.duration, Duration::from_secs(10))
        };
        let segment = a.segment.unwrap_or(default_segment);
        if segment < Duration::from_secs(1) {
            return Err(anyhow!("--segment must be at least 1s"));
        }
        if duration < segment {
            return Err(anyhow!(
                "--duration {duration:?} is shorter than one --segment ({segment:?})"
            ));
        }
        if !(a.rate.is_finite() && a.rate > 0.0 && a.rate <= 100_000.0) {
            return Err(anyhow!(
                "--rate {}: give requests per second per class, above 0 (e.g. 100)",
                a.rate
            ));
        }
        if a.p99_factor.is_some_and(|f| !(f.is_finite() && f >= 1.0)) {
            return Err(anyhow!("--p99-factor must be at least 1"));
        }
        let per = |d: Duration| d.as_secs_f64() / segment.as_secs_f64();
        let fault_segments = (per(duration).ceil() as usize).max(1);
        let baseline = a.baseline.unwrap_or(if a.quick {
            Duration::from_secs(8)
        } else {
            duration / 5
        });
        let baseline_segments = (per(baseline).ceil() as usize).max(2);
        Ok(Plan {
            quick: a.quick,
            segment,
            baseline_segments,
            fault_segments,
            rate: a.rate,
            rss_limit_kib: a.rss_limit / 1024,
            p99_factor: a.p99_factor,
            never_read_hold: a.never_read_hold.unwrap_or(if a.quick {
                Duration::from_secs(5)
            } else {
                Duration::from_secs(20)
            }),
            restart_after: (segment / 4).min(Duration::from_secs(2)),
            stop_for: Duration::from_secs(2),
            gateway_io: a.gateway_io,
        })
    }
}

/// Longest a load child may run past its segment before it counts as hung
/// (connect 5 s + response 5 s + start-up and exit).
const HANG_SLACK: Duration = Duration::from_secs(20);
/// Attempts to restart a killed process.
const RESTART_TRIES: u32 = 5;
/// Workers of each load child.
const WORKERS: usize = 8;
/// Grace for a server to stop on SIGTERM at the end.
const STOP_GRACE: Duration = Duration::from_secs(10);

/// One load class: where its requests go.
struct Class {
    name: &'static str,
    target: SocketAddr,
    path: &'static str,
    /// `--response-size` (the path is `/bytes/{it}`).
    response_size: &'static str,
}

/// A fault action due at some instant.
#[derive(Clone, Copy, Debug)]
enum Action {
    Kill,
    Restart,
    Stop,
    Cont,
}

/// How a soak ended: its report, where it was written, and whether a
/// Ctrl-C cut it short.
pub struct SoakOutcome {
    /// The report, as written to `soak.json`.
    pub report: SoakReport,
    /// Where `soak.json` is.
    pub json_path: PathBuf,
    /// A stop was requested (Ctrl-C): exit 130.
    pub interrupted: bool,
}

/// Runs the soak of `plan` with results under `out` (created if missing),
/// the children started from `exe` (the `connlab` binary); `note` gets each
/// line worth telling the user as it happens.
pub fn run(
    plan: &Plan,
    out: &Path,
    exe: PathBuf,
    shutdown: &Shutdown,
    note: &mut dyn FnMut(&str),
) -> anyhow::Result<SoakOutcome> {
    let work = out.join("work");
    std::fs::create_dir_all(&work)
        .with_context(|| format!("creating --out directory {}", work.display()))?;
    let env = Env {
        exe,
        work,
        started: Instant::now(),
    };
    let started_unix_s = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0);
    note(&format!(
        "{} fault-free segments then {} fault segments of {:?}; results in {}",
        plan.baseline_segments,
        plan.fault_segments,
        plan.segment,
        out.display()
    ));
    let mut soak = Soak::new(&env, plan, shutdown, note);
    let outcome = soak.run_all();
    let interrupted = shutdown.requested();
    let report = soak.finish(outcome.err(), interrupted, started_unix_s);
    let json = serde_json::to_string_pretty(&report).context("encoding the results")?;
    let json_path = out.join("soak.json");
    connlab_os::files::write_atomic(&json_path, json + "\n")
        .with_context(|| format!("writing {}", json_path.display()))?;
    Ok(SoakOutcome {
        report,
        json_path,
        interrupted,
    })
}

/// The soak's state.
struct Soak<'a> {
    env: &'a Env,
    plan: &'a Plan,
    shutdown: &'a Shutdown,
    /// Where the lines for the user go.
    note: &'a mut dyn FnMut(&str),
    components: Vec<Component>,
    classes: Vec<Class>,
    loads: Vec<LoadChild>,
    segments: Vec<SegmentReport>,
    /// Service-latency histograms by (class, bucket): baseline, healthy, all-fault.
    histograms: BTreeMap<(usize, &'static str), LatencyHistogram>,
    faults: Vec<FaultRecord>,
    hostile: Option<Hostile>,
    hostile_report: HostileReport,
    load_logs: Vec<File>,
    last_sample: Option<Instant>,
}

/// Named addresses for the hostile clients.
type Targets = Vec<(String, SocketAddr)>;

/// Component indices (fixed order of [`Soak::start_components`]).
const GW_B1: usize = 0;
const GW_B2: usize = 1;
const SI_BACKEND: usize = 2;
const GATEWAY: usize = 3;
const IO_SERVER: usize = 4;
const NODE1: usize = 5;
const NODE2: usize = 6;

impl<'a> Soak<'a> {
    fn new(
        env: &'a Env,
        plan: &'a Plan,
        shutdown: &'a Shutdown,
        note: &'a mut dyn FnMut(&str),
    ) -> Self {
        Soak {
            env,
            plan,
            shutdown,
            note,
            components: Vec::new(),
            classes: Vec::new(),
            loads: Vec::new(),
            segments: Vec::new(),
            histograms: BTreeMap::new(),
            faults: Vec::new(),
            hostile: None,
            hostile_report: HostileReport::default(),
            load_logs: Vec::new(),
            last_sample: None,
        }
    }

    fn run_all(&mut self) -> anyhow::Result<()> {
        let (http, raw) = self.start_components()?;
        self.run_phase("baseline", self.plan.baseline_segments, false)?;
        if self.shutdown.requested() {
            return Ok(());
        }
        (self.note)(&format!(
            "fault-free run done at {:.1}s; faults start",
            self.env.now_s()
        ));
        let sizes = Sizes {
            slowloris: if self.plan.quick { 8 } else { 32 },
            never_read: 2,
            never_read_hold: self.plan.never_read_hold,
        };
        self.hostile = Some(Hostile::start(&http, &raw, sizes));
        let result = self.run_phase("fault", self.plan.fault_segments, true);
        if let Some(h) = self.hostile.take() {
            self.hostile_report = h.stop();
        }
        result
    }

    /// The faults of segment `index` of the fault phase, as (offset, action,
    /// components).
    fn schedule(&self, index: usize) -> Vec<(Duration, Action, usize)> {
        let at = self.plan.segment / 4;
        match index % 4 {
            1 => vec![
                (at, Action::Kill, GW_B1),
                (at, Action::Kill, NODE1),
                (at + self.plan.restart_after, Action::Restart, GW_B1),
                (at + self.plan.restart_after, Action::Restart, NODE1),
            ],
            3 => vec![
                (at, Action::Stop, GW_B2),
                (at, Action::Stop, IO_SERVER),
                (at + self.plan.stop_for, Action::Cont, GW_B2),
                (at + self.plan.stop_for, Action::Cont, IO_SERVER),
            ],
            _ => Vec::new(),
        }
    }

    /// Runs `segments` load segments per class, one every `--segment`, with
    /// the fault schedule when `faults`; returns when every child is done.
    fn run_phase(
        &mut self,
        phase: &'static str,
        segments: usize,
        faults: bool,
    ) -> anyhow::Result<()> {
        let start = Instant::now();
        let seg = self.plan.segment;
        // (instant, action, component, segment)
        let mut due: Vec<(Instant, Action, usize, usize)> = Vec::new();
        if faults {
            for k in 0..segments {
                for (off, action, comp) in self.schedule(k) {
                    due.push((start + seg * k as u32 + off, action, comp, k));
                }
            }
            due.sort_by_key(|d| d.0);
        }
        let mut next_segment = 0usize;
        let mut due = due.into_iter().peekable();
        loop {
            if self.shutdown.requested() {
                break;
            }
            let now = Instant::now();
            while next_segment < segments && now >= start + seg * next_segment as u32 {
                let names: Vec<String> = if faults {
                    self.schedule(next_segment)
                        .iter()
                        .filter(|(_, a, _)| matches!(a, Action::Kill | Action::Stop))
                        .map(|(_, a, c)| {
                            format!("{a:?} {}", self.components[*c].name).to_lowercase()
                        })
                        .collect()
                } else {
                    Vec::new()
                };
                for class in 0..self.classes.len() {
                    self.spawn_load(class, phase, next_segment, names.clone())?;
                }
                next_segment += 1;
            }
            while let Some(&(when, action, comp, _)) = due.peek() {
                if when > now {
                    break;
                }
                due.next();
                self.fire(action, comp);
            }
            self.tick();
            if next_segment >= segments && due.peek().is_none() && self.loads.is_empty() {
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        // Interrupted: bring back what a fired kill or stop left down or
        // stopped (not what later segments would have touched), and collect
        // what the load children measured.
        for (_, action, comp, _) in due {
            let c = &self.components[comp];
            let pending = match action {
                Action::Restart => c.proc.is_none(),
                Action::Cont => c.stopped,
                _ => false,
            };
            if pending {
                self.fire(action, comp);
            }
        }
        if self.shutdown.requested() {
            for l in &self.loads {
                let _ = l.child.signal(libc::SIGINT);
            }
            let end = Instant::now() + Duration::from_secs(15);
            while !self.loads.is_empty() && Instant::now() < end {
                self.tick();
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        Ok(())
    }

    fn fire(&mut self, action: Action, comp: usize) {
        let at_s = self.env.now_s();
        let c = &mut self.components[comp];
        let result = match action {
            Action::Kill => c.kill(at_s),
            Action::Restart if c.proc.is_some() => Err(format!("{} is already running", c.name)),
            Action::Restart => c.restart(self.env).map_err(|e| format!("{e:#}")),
            Action::Stop => c.signal(libc::SIGSTOP),
            Action::Cont => c.signal(libc::SIGCONT),
        };
        let name = c.name.clone();
        if let Err(e) = &result {
            (self.note)(&format!("{action:?} {name} at {at_s:.1}s failed: {e}"));
        }
        self.faults.push(FaultRecord {
            at_s,
            action: format!("{action:?}").to_lowercase(),
            target: name,
            ok: result.is_ok(),
            error: result.err(),
        });
    }

    /// Samples memory, notices crashes, reaps finished load children.
    fn tick(&mut self) {
        let at_s = self.env.now_s();
        let interrupted = self.shutdown.requested();
        let sample = self
            .last_sample
            .is_none_or(|t| t.elapsed() >= Duration::from_millis(250));
        for c in &mut self.components {
            if sample {
                c.sample();
            }
            c.check_alive(at_s, interrupted);
        }
        if sample {
            self.last_sample = Some(Instant::now());
        }
        let mut i = 0;
        while i < self.loads.len() {
            let status = self.loads[i].child.try_wait().ok().flatten();
            let hung = status.is_none() && Instant::now() > self.loads[i].deadline;
            if status.is_none() && !hung {
                i += 1;
                continue;
            }
            let mut l = self.loads.swap_remove(i);
            let status = if hung { l.child.kill() } else { status };
            self.collect(l, status, hung);
        }
    }

    /// Stops everything and builds the report.
    fn finish(
        &mut self,
        error: Option<anyhow::Error>,
        interrupted: bool,
        started_unix_s: f64,
    ) -> SoakReport {
        if let Some(h) = self.hostile.take() {
            self.hostile_report = h.stop();
        }
        for l in &self.loads {
            let _ = l.child.signal(libc::SIGINT);
        }
        let end = Instant::now() + Duration::from_secs(15);
        while !self.loads.is_empty() && Instant::now() < end {
            self.tick();
            std::thread::sleep(Duration::from_millis(50));
        }
        for l in &mut self.loads {
            l.child.kill();
        }
        self.tick();
        // Front ends first, so backends do not see them as failures.
        let at_s = self.env.now_s();
        for i in [NODE1, NODE2, IO_SERVER, GATEWAY, GW_B1, GW_B2, SI_BACKEND] {
            if let Some(c) = self.components.get_mut(i) {
                c.finish(at_s, interrupted);
            }
        }
        let processes: Vec<ProcessReport> = self
            .components
            .iter()
            .map(|c| ProcessReport {
                name: c.name.clone(),
                role: c.role.to_string(),
                incarnations: c.incarnation,
                peak_rss_kib: c.peak_rss_kib,
                exits: c.exits.clone(),
                stats: c.last_stats.as_deref().and_then(top_level_numbers),
            })
            .collect();
        let classes: Vec<ClassReport> = self
            .classes
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let totals = |phase: &str, healthy_only: bool, bucket: &'static str| {
                    let mut t = PhaseTotals::from_segments(self.segments.iter().filter(|s| {
                        s.class == c.name
                            && s.phase == phase
                            && (!healthy_only || s.faults.is_empty())
                    }));
                    t.max_us = self
                        .histograms
                        .get(&(i, bucket))
                        .filter(|h| !h.is_empty())
                        .map(|h| h.summary().max);
                    t
                };
                let p99 = |b: &'static str| {
                    self.histograms
                        .get(&(i, b))
                        .filter(|h| !h.is_empty())
                        .map(|h| h.summary().p99)
                };
                ClassReport::new(
                    c.name,
                    c.target.to_string(),
                    c.path,
                    totals("baseline", false, "baseline"),
                    totals("fault", false, "fault_all"),
                    totals("fault", true, "fault_healthy"),
                    p99("baseline"),
                    p99("fault_healthy"),
                    p99("fault_all"),
                )
            })
            .collect();
        report::build(
            self.plan,
            started_unix_s,
            self.env.now_s(),
            interrupted,
            error.map(|e| format!("{e:#}")),
            classes,
            std::mem::take(&mut self.segments),
            std::mem::take(&mut self.faults),
            self.hostile_report.clone(),
            processes,
        )
    }
}

/// An exit the soak did not ask for: expected only when Ctrl-C reached the
/// process as well (the terminal signals the whole process group) and it
/// exited by itself (an exit code, not a signal such as SIGSEGV).
fn exit_record(
    incarnation: u32,
    at_s: f64,
    status: std::process::ExitStatus,
    interrupted: bool,
    why: &str,
) -> ExitRecord {
    let by_itself = status.code().is_some();
    ExitRecord {
        incarnation,
        at_s,
        status: describe(&status),
        expected: interrupted && by_itself,
        why: if interrupted && by_itself {
            "exited on Ctrl-C".to_string()
        } else {
            why.to_string()
        },
    }
}

/// The address in a ready line `PREFIX ADDR`.
fn banner_addr(line: &str, prefix: &str) -> anyhow::Result<SocketAddr> {
    line.strip_prefix(prefix)
        .and_then(|a| a.split_whitespace().next())
        .and_then(|a| a.parse().ok())
        .ok_or_else(|| anyhow!("no address in the ready line {line:?}"))
}

/// The numeric top-level fields of a `--stats` file (counters, CPU).
fn top_level_numbers(path: &Path) -> Option<BTreeMap<String, f64>> {
    let text = std::fs::read_to_string(path).ok()?;
    let v: serde_json::Value = serde_json::from_str(&text).ok()?;
    Some(
        v.as_object()?
            .iter()
            .filter_map(|(k, v)| Some((k.clone(), v.as_f64()?)))
            .collect(),
    )
}
