//! `connlab soak`: the fault soak. Mixed HTTP load through the proxy
//! gateway and the single-IP front end on loopback, first fault-free, then
//! while backends and app nodes are killed and restarted, processes are
//! stopped for 2 s, and hostile clients (slowloris, garbage, never-read)
//! run throughout. Reports crashes, peak memory, request accounting and
//! p99 against the fault-free run; exits 1 when a check fails.

mod component;
mod hostile;
mod load;
mod procs;
mod report;
mod start;

use crate::Exit;
use anyhow::{anyhow, Context};
use clap::Args;
use component::{Component, Env};
use connlab_gateway::ProxyIo;
use connlab_measure::units::{parse_duration, parse_size};
use connlab_measure::LatencyHistogram;
use connlab_os::Shutdown;
use hostile::{Hostile, HostileReport, Sizes};
use load::LoadChild;
use procs::describe;
use report::{
    ClassReport, ExitRecord, FaultRecord, PhaseTotals, ProcessReport, SegmentReport, SoakReport,
};
use std::collections::BTreeMap;
use std::fs::File;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant, SystemTime};

/// Flags of `connlab soak`.
#[derive(Args, Debug)]
#[command(after_help = "\
Everything runs on loopback (127.0.0.1, free ports) as children of this command, killed
if it dies. Components: two `connlab serve --protocol http` backends (gw-backend-1, -2)
behind `connlab gateway --mode proxy` (round robin, health check every 200 ms), and a
`connlab singleip io-server` whose cluster port is served by two app nodes forwarding
to one `connlab serve --protocol http` (si-backend). Servers run with
--header-timeout 2s and --idle-timeout 5s, the gateway with --idle-timeout 5s.

Healthy load: `connlab load --connection-per-request` children (HTTP, 8 workers
each), one per class and segment: class gateway (GET /bytes/1024 through the gateway)
and class singleip (GET /bytes/16384 through the cluster address), --rate each. Every
segment is a new load process of --segment length, so a connection lost to a fault
costs only its own request.

Phases: first a fault-free run (--baseline, default a fifth of --duration, at least
two segments), then the fault phase (--duration). Fault schedule, by segment of the
fault phase, repeating every four segments, each action a quarter into its segment:
  segment 4k+0  clean: only the hostile clients
  segment 4k+1  SIGKILL gw-backend-1 and app-node-1; both restarted (same port)
                min(2 s, segment/4) later
  segment 4k+2  clean
  segment 4k+3  SIGSTOP gw-backend-2 and the io-server; SIGCONT 2 s later
Hostile clients, throughout the fault phase, against the gateway and the cluster
address: slowloris (partial HTTP heads, a header line every 500 ms), garbage (random
bytes; also to the single-IP node port), never-read (pipelined GETs of 1 MiB, never
read, each connection held --never-read-hold).

Checks (exit 1 if one fails):
  no crash       every connlab process ends by a signal the soak sent or exits 0
                 (servers stop on SIGTERM at the end; load children exit 0)
  memory         peak RSS (VmHWM from /proc, sampled every 250 ms) of each server,
                 gateway, io-server and app node stays below --rss-limit
  accounting     every load child ends within its segment + 20 s, and for each
                 completed + errored = sent
  faults         every kill, restart, stop and continue took effect (a restarted
                 process printed its ready line)
  p99            healthy p99 (clean segments of the fault phase) over the fault-free
                 p99, per class: reported; checked only when --p99-factor is given

Results: DIR/soak.json (schema connlab.soak/1) and DIR/soak.md, each written whole;
children's stats, load results and logs under DIR/work/. Ctrl-C stops everything,
writes what was measured, and exits 130.

Examples:
  connlab soak --quick --out /tmp/soak              # the CI version, about 30 s
  connlab soak --duration 10m --out results/soak    # the campaign, about 12.5 min")]
pub(crate) struct SoakArgs {
    /// Length of the fault phase.
    #[arg(long, value_parser = parse_duration, default_value = "10m", conflicts_with = "quick")]
    duration: Duration,
    /// The CI version: 4 s segments, an 8 s fault-free run and a 16 s fault phase.
    #[arg(long)]
    quick: bool,
    /// Where results go (created if missing).
    #[arg(long, value_name = "DIR", default_value = "results/soak")]
    out: PathBuf,
    /// Length of one load segment [default: 10s, --quick 4s].
    #[arg(long, value_parser = parse_duration, value_name = "DURATION")]
    segment: Option<Duration>,
    /// Length of the fault-free run [default: --duration / 5, at least two segments].
    #[arg(long, value_parser = parse_duration, value_name = "DURATION")]
    baseline: Option<Duration>,
    /// Requests per second of each load class.
    #[arg(long, default_value_t = 100.0)]
    rate: f64,
    /// Peak resident memory each long-lived process must stay below.
    #[arg(long, default_value = "256MiB", value_parser = parse_size, value_name = "BYTES")]
    rss_limit: u64,
    /// Fail when a class's healthy p99 exceeds this factor times its fault-free p99
    /// (reported only without it).
    #[arg(long, value_name = "FACTOR")]
    p99_factor: Option<f64>,
    /// How long a never-reading client holds its connection [default: 20s, --quick 5s].
    #[arg(long, value_parser = parse_duration, value_name = "DURATION")]
    never_read_hold: Option<Duration>,
    /// The proxy gateway's I/O mode under the faults: copy, splice or uring (its `--io`).
    #[arg(long, value_name = "MODE", default_value = "copy", value_parser = parse_gateway_io)]
    gateway_io: ProxyIo,
}

fn parse_gateway_io(s: &str) -> Result<ProxyIo, String> {
    s.parse()
}

/// The resolved plan of a soak run.
#[derive(Clone, Debug)]
pub(super) struct Plan {
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
    gateway_io: ProxyIo,
}

impl Plan {
    fn from_args(a: &SoakArgs) -> Result<Plan, Exit> {
        let (duration, default_segment) = if a.quick {
            (Duration::from_secs(16), Duration::from_secs(4))
        } else {
            (a.duration, Duration::from_secs(10))
        };
        let segment = a.segment.unwrap_or(default_segment);
        if segment < Duration::from_secs(1) {
            return Err(Exit::usage(anyhow!("--segment must be at least 1s")));
        }
        if duration < segment {
            return Err(Exit::usage(anyhow!(
                "--duration {duration:?} is shorter than one --segment ({segment:?})"
            )));
        }
        if !(a.rate.is_finite() && a.rate > 0.0 && a.rate <= 100_000.0) {
            return Err(Exit::usage(anyhow!(
                "--rate {}: give requests per second per class, above 0 (e.g. 100)",
                a.rate
            )));
        }
        if a.p99_factor.is_some_and(|f| !(f.is_finite() && f >= 1.0)) {
            return Err(Exit::usage(anyhow!("--p99-factor must be at least 1")));
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

/// Runs the soak.
pub(crate) fn run(args: SoakArgs) -> Result<ExitCode, Exit> {
    let plan = Plan::from_args(&args)?;
    let work = args.out.join("work");
    std::fs::create_dir_all(&work)
        .with_context(|| format!("creating --out directory {}", work.display()))?;
    let shutdown = Shutdown::on_termination_signals().context("installing signal handlers")?;
    let exe = std::env::current_exe().context("finding the connlab binary")?;
    let env = Env {
        exe,
        work,
        started: Instant::now(),
    };
    let started_unix_s = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0);
    eprintln!(
        "connlab soak: {} fault-free segments then {} fault segments of {:?}; results in {}",
        plan.baseline_segments,
        plan.fault_segments,
        plan.segment,
        args.out.display()
    );
    let mut soak = Soak::new(&env, &plan, &shutdown);
    let outcome = soak.run_all();
    let interrupted = shutdown.requested();
    let report = soak.finish(outcome.err(), interrupted, started_unix_s);
    let json = serde_json::to_string_pretty(&report).context("encoding the results")?;
    let json_path = args.out.join("soak.json");
    connlab_os::files::write_atomic(&json_path, json + "\n")
        .with_context(|| format!("writing {}", json_path.display()))?;
    let md_path = args.out.join("soak.md");
    connlab_os::files::write_atomic(&md_path, report::markdown(&report))
        .with_context(|| format!("writing {}", md_path.display()))?;
    eprint!("{}", report::markdown(&report));
    eprintln!("connlab soak: results in {}", json_path.display());
    if interrupted {
        return Ok(ExitCode::from(130));
    }
    if let Some(e) = &report.setup_error {
        return Err(Exit::from(anyhow!("{e}")));
    }
    Ok(if report.passed {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// The soak's state.
struct Soak<'a> {
    env: &'a Env,
    plan: &'a Plan,
    shutdown: &'a Shutdown,
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
    fn new(env: &'a Env, plan: &'a Plan, shutdown: &'a Shutdown) -> Self {
        Soak {
            env,
            plan,
            shutdown,
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
        eprintln!(
            "connlab soak: fault-free run done at {:.1}s; faults start",
            self.env.now_s()
        );
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
            eprintln!("connlab soak: {action:?} {name} at {at_s:.1}s failed: {e}");
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
