//! The runner of `connlab run`: the main job in one command. Compares
//! engines (and servers already running) under the user's workload: each
//! engine's `connlab serve` child on loopback (port 0), all under one
//! placement (server on one CPU, the client's threads on another), every
//! row measured once per round for the repetitions asked with the order
//! rotated between rounds; the comparison (`crate::compare`) of the rounds
//! at the end. With an output directory, every run's JSON goes to
//! `DIR/runs/`. The binary parses the flags into a [`CompareRequest`],
//! prints the progress ([`RunProgress`]), the table and the page, and
//! turns the [`CompareOutcome`] into an exit code.

pub mod gate;
mod table;

pub use table::{read_baseline, TableRow};

use super::child::{server_cpu_s, ServerChild};
use crate::compare::{compare, recommend, Better, Caveats, Comparison, RowSamples, CONFIDENCE};
use crate::validity::{self, Evidence, ScheduleEvidence, Validity, ValidityLimits};
use anyhow::{anyhow, Context};
use connlab_loadgen::{LoadOutcome, LoadResult, Progress, Rate, Workload};
use connlab_os::awake::KeepAwakeMode;
use connlab_os::files::write_atomic;
use connlab_os::process as procfs;
use connlab_os::window::{WindowCpu, WindowSnapshot};
use connlab_os::{CpuList, Shutdown};
use connlab_server::EngineKind;
use serde::Serialize;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::time::Duration;

/// What `connlab run`'s flags ask for.
#[derive(Clone, Debug)]
pub struct CompareRequest {
    /// Engines to compare, in order.
    pub engines: Vec<EngineKind>,
    /// Edge-triggered epoll for the epoll engine.
    pub edge_triggered: bool,
    /// The workload; its target and client CPUs are set for each run.
    pub workload: Workload,
    /// Rounds: every row is measured once per round.
    pub repetitions: u32,
    /// Servers already running, as (label, address).
    pub against: Vec<(Option<String>, SocketAddr)>,
    /// The process id of the n-th `against` server.
    pub against_pid: Vec<u32>,
    /// Pin the server to these CPUs.
    pub server_cpu: Option<CpuList>,
    /// Event loops of every event engine (`connlab serve --workers N`,
    /// each on its own CPU of the server's list); processes and threads
    /// get the same CPUs, so the rows stay CPU for CPU. `None`: one loop.
    pub workers: Option<u32>,
    /// Pin the client writer to the first CPU and its reader to the last.
    pub client_cpu: Option<CpuList>,
    /// Keep the CPUs awake while measuring.
    pub keep_awake: KeepAwakeMode,
    /// Where every run's JSON goes (`DIR/runs/`).
    pub out: Option<PathBuf>,
}

/// What a comparison tells its user while it runs (the binary prints it).
pub trait RunProgress {
    /// A line about the comparison (what runs, a retry, a warning).
    fn note(&mut self, line: &str);
    /// One run was measured, with its server figures and its gates.
    fn measured(&mut self, result: &LoadResult, server: &ServerFigures, validity: &Validity);
    /// The load generator runs `run` with `progress`: show it as it goes.
    fn load(&mut self, progress: &Progress, workload: &Workload, run: &mut dyn FnMut());
    /// The comparison is about to make `runs` runs (retries come on top).
    fn planned(&mut self, runs: u32) {
        let _ = runs;
    }
    /// A run of `label` in round `round` of `rounds` starts (`retry`: it is
    /// measured once more after failing its gates).
    fn starting(&mut self, round: u32, rounds: u32, label: &str, retry: bool) {
        let _ = (round, rounds, label, retry);
    }
}

/// A resolved comparison: its rows, placement and workload.
pub struct ComparePlan {
    rows: Vec<Row>,
    placement: RunPlacement,
    req: CompareRequest,
}

/// What a comparison measured.
pub struct CompareOutcome {
    /// The rows, in the order given.
    pub rows: Vec<Row>,
    /// Every run kept, in the order measured.
    pub done: Vec<Done>,
    /// The comparison of the rows over the rounds.
    pub comparison: Comparison,
    /// The placement every run shared.
    pub placement: RunPlacement,
    /// The rounds asked for.
    pub repetitions: u32,
    /// Interrupted (a run, or a stop requested): exit 130.
    pub interrupted: bool,
    /// A run saw its server fail: exit 1.
    pub peer_failed: bool,
}

impl CompareOutcome {
    /// Writes `DIR/comparison.json`: the placement, the comparison and the
    /// files of the runs.
    pub fn write_comparison(&self, dir: &Path) -> anyhow::Result<()> {
        #[derive(Serialize)]
        struct ComparisonFile<'a> {
            schema: &'static str,
            placement: &'a RunPlacement,
            comparison: &'a Comparison,
            table: Vec<TableRow>,
            runs: Vec<&'a str>,
        }
        let file = ComparisonFile {
            schema: COMPARISON_SCHEMA,
            placement: &self.placement,
            comparison: &self.comparison,
            table: self.table(),
            runs: self.done.iter().filter_map(|d| d.file.as_deref()).collect(),
        };
        let path = dir.join("comparison.json");
        let text = serde_json::to_string_pretty(&file).context("encoding the comparison")?;
        write_atomic(&path, text + "\n").with_context(|| format!("writing {}", path.display()))?;

        Ok(())
    }

    /// The exit code: 130 interrupted, else 1 when a server failed, else 0.
    pub fn exit_code(&self) -> u8 {
        if self.interrupted {
            130
        } else if self.peer_failed {
            1
        } else {
            0
        }
    }
}

/// The placement every run shares, as recorded in each result.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RunPlacement {
    /// CPUs the server is pinned to (`null`: not pinned).
    pub server_cpus: Option<String>,
    /// CPUs of the client's writer (first) and reader (last) (`null`: not pinned).
    pub client_cpus: Option<String>,
    /// The writer's scheduling asked for (`SCHED_FIFO 10`, `SCHED_OTHER`).
    pub writer_policy: String,
    /// Idle-priority spinners kept the CPUs awake (`--keep-awake`).
    pub keep_awake: bool,
    /// How it was chosen.
    pub note: String,
    /// `--workers`: the event engines' loops (`null`: one).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub workers: Option<u32>,
}

impl RunPlacement {
    /// The placement in words, as the table and the page show it.
    pub fn text(&self) -> String {
        let client = self.client_cpus.as_deref().unwrap_or("any (not pinned)");
        let (writer, reader) = client.split_once(',').map_or((client, client), |(w, r)| {
            (w, r.rsplit(',').next().unwrap_or(r))
        });
        let clients = if writer == reader {
            format!("client writer and reader on cpu {writer}")
        } else {
            format!("client writer on cpu {writer}, reader on cpu {reader}")
        };
        format!(
            "server{} on cpu {}, {clients}, writer {}{}",
            self.workers
                .map_or(String::new(), |w| format!(" ({w} workers)")),
            self.server_cpus.as_deref().unwrap_or("any (not pinned)"),
            self.writer_policy,
            if self.keep_awake {
                ", CPUs kept awake"
            } else {
                ""
            }
        )
    }
}

/// One row: an engine started here, or a server under test.
#[derive(Clone, Debug)]
pub enum Row {
    /// A `connlab serve` engine, started for each run.
    Engine {
        /// The engine.
        kind: EngineKind,
        /// Its name in the table (`epoll-et` when edge-triggered).
        label: String,
    },
    /// A server already running.
    Against {
        /// Its name in the table.
        label: String,
        /// Where it listens.
        addr: SocketAddr,
        /// Its (master) process, to read its figures from.
        pid: Option<u32>,
        /// The server's memory before the first round (KiB), the baseline of
        /// every round's memory per connection: read once, because a server
        /// that keeps buffers between rounds would otherwise hide them.
        idle_kib: Option<u64>,
    },
}

impl Row {
    /// Its name in the table and the files.
    pub fn label(&self) -> &str {
        match self {
            Row::Engine { label, .. } | Row::Against { label, .. } => label,
        }
    }
}

/// The server-side figures of one run.
#[derive(Clone, Debug, Default, Serialize)]
pub struct ServerFigures {
    /// Process id (the master for a server under test).
    pub pid: Option<u32>,
    /// Whether its process tree ran on the placement's server CPUs.
    pub pinned: bool,
    /// CPU seconds (user + system).
    pub cpu_s: Option<f64>,
    /// Where `cpu_s` comes from.
    pub cpu_source: Option<String>,
    /// Voluntary context switches (times it slept and was woken).
    pub voluntary_switches: Option<u64>,
    /// Proportional set size of the process tree before connecting, KiB.
    pub memory_idle_kib: Option<u64>,
    /// The same, with every connection open and the load running, KiB.
    pub memory_loaded_kib: Option<u64>,
    /// Responses the client completed (warm-up and measured window), the
    /// denominator of the per-request figures.
    pub requests: u64,
    /// CPU microseconds per request.
    pub cpu_us_per_request: Option<f64>,
    /// Voluntary context switches per request.
    pub wakeups_per_request: Option<f64>,
    /// (loaded - idle) memory per established connection, bytes.
    pub memory_per_connection_bytes: Option<f64>,
    /// The server's `--stats` (engines only).
    pub stats: Option<serde_json::Value>,
}

/// One run's file in `DIR/runs/`.
#[derive(Serialize)]
struct RunRecord<'a> {
    schema: &'static str,
    label: &'a str,
    kind: &'static str,
    /// Round, from 1.
    round: u32,
    /// Position within the round, from 1.
    position: usize,
    placement: &'a RunPlacement,
    server: &'a ServerFigures,
    /// The gates this run passed or failed (a run that fails is measured
    /// once more; this is the record of the run kept).
    validity: &'a Validity,
    /// Who used the CPUs over the run.
    window_cpu: Option<&'a WindowCpu>,
    load: &'a LoadResult,
}

/// Version tag of `comparison.json`.
pub const COMPARISON_SCHEMA: &str = "connlab.run.comparison/1";

/// Version tag of a run file.
const RUN_SCHEMA: &str = "connlab.run/1";

/// One finished run, kept for the table and the page.
pub struct Done {
    /// Its row (an index into the rows).
    pub row: usize,
    /// Its round, from 1.
    pub round: u32,
    /// The load generator's result.
    pub result: LoadResult,
    /// The server's figures.
    pub server: ServerFigures,
    /// Its gates.
    pub validity: Validity,
    /// Its file under the output directory (`runs/r1-epoll.json`).
    pub file: Option<String>,
}

impl ComparePlan {
    /// Resolves the rows and the placement; an error is the user's (two
    /// rows of one name). May set the writer's priority (see
    /// [`ComparePlan::placement`]).
    pub fn new(mut req: CompareRequest, progress: &mut dyn RunProgress) -> anyhow::Result<Self> {
        let rows = rows(&req)?;
        let placement = placement(&mut req, progress);
        Ok(ComparePlan {
            rows,
            placement,
            req,
        })
    }

    /// The rows' names, in the order given.
    pub fn labels(&self) -> Vec<&str> {
        self.rows.iter().map(Row::label).collect()
    }

    /// The placement every run shares.
    pub fn placement(&self) -> &RunPlacement {
        &self.placement
    }

    /// Runs the comparison, the children started from `exe` (the `connlab`
    /// binary).
    pub fn run(
        self,
        exe: &Path,
        shutdown: &Shutdown,
        progress: &mut dyn RunProgress,
    ) -> anyhow::Result<CompareOutcome> {
        let ComparePlan {
            rows,
            placement,
            req,
        } = self;
        // The whole client (progress and sampling threads too) stays off the
        // server's CPU; the load generator pins its writer and reader itself.
        if let Some(c) = placement
            .client_cpus
            .as_deref()
            .and_then(|c| CpuList::parse(c).ok())
        {
            connlab_os::pin_current_process(&c)
                .with_context(|| format!("pinning connlab run to client cpu {c}"))?;
        }
        let _awake = keep_awake(&placement)?;
        if let Some(dir) = &req.out {
            std::fs::create_dir_all(dir.join("runs"))
                .with_context(|| format!("creating --out directory {}", dir.display()))?;
        }
        let per_run = req.workload.warmup + req.workload.duration;
        let total = rows.len() as u32 * req.repetitions;
        progress.note(&format!(
            "{} rows x {} repetitions = {total} runs of {:.1} s; {}",
            rows.len(),
            req.repetitions,
            per_run.as_secs_f64(),
            placement.text()
        ));
        progress.planned(total);
        let mut done: Vec<Done> = Vec::new();
        let (mut interrupted, mut peer_failed) = (false, false);
        // Every run made, retries too, for the recommendation's confidence.
        let mut caveats = Caveats {
            repetitions: req.repetitions,
            ..Caveats::default()
        };
        'rounds: for round in 1..=req.repetitions {
            let n = rows.len();
            for k in 0..n {
                if shutdown.requested() {
                    break 'rounds;
                }
                // Rotate the order by one row per round.
                let i = (k + round as usize - 1) % n;
                let row = &rows[i];
                progress.starting(round, req.repetitions, row.label(), false);
                let (mut outcome, mut server, mut window) =
                    measure(exe, row, &req, &placement, shutdown, progress)?;
                let mut v = run_validity(&outcome.result, window.as_ref(), 1);
                caveats.count(&v);
                progress.measured(&outcome.result, &server, &v);
                if v.worth_retrying() && !shutdown.requested() {
                    progress.note(&format!(
                        "round {round}, {}: failed its gates ({}); measuring it once more",
                        row.label(),
                        v.failure_text()
                    ));
                    progress.starting(round, req.repetitions, row.label(), true);
                    (outcome, server, window) =
                        measure(exe, row, &req, &placement, shutdown, progress)?;
                    v = run_validity(&outcome.result, window.as_ref(), 2);
                    caveats.count(&v);
                    progress.measured(&outcome.result, &server, &v);
                    if !v.valid {
                        progress.note(&format!(
                            "round {round}, {}: invalid again, left out of the comparison",
                            row.label()
                        ));
                    }
                }
                let r = outcome.result;
                interrupted |= r.interrupted;
                peer_failed |= r.peer_failed;
                let file = match &req.out {
                    Some(dir) => Some(write_run(
                        dir,
                        row,
                        round,
                        k + 1,
                        &placement,
                        &server,
                        &v,
                        window.as_ref(),
                        &r,
                    )?),
                    None => None,
                };
                done.push(Done {
                    row: i,
                    round,
                    result: r,
                    server,
                    validity: v,
                    file,
                });
            }
        }
        let closed_loop = matches!(req.workload.rate, Rate::Max { .. });
        let mut comparison = comparison(&rows, &done, req.repetitions, closed_loop);
        caveats.left_out = done.iter().filter(|d| !counts(d)).count();
        comparison.recommendation = Some(recommend(&comparison, &caveats));
        Ok(CompareOutcome {
            rows,
            done,
            comparison,
            placement,
            repetitions: req.repetitions,
            interrupted: interrupted || shutdown.requested(),
            peer_failed,
        })
    }

    /// `connlab doctor`'s A/A calibration: the first row measured `runs`
    /// times in a row under this placement and workload. Returns the
    /// placement in words and each run's result and gates.
    pub fn calibrate(
        self,
        exe: &Path,
        runs: usize,
        shutdown: &Shutdown,
        progress: &mut dyn RunProgress,
    ) -> anyhow::Result<(String, Vec<(LoadResult, Validity)>)> {
        let row = self
            .rows
            .first()
            .ok_or_else(|| anyhow!("no engine to calibrate with"))?;
        let mut out = Vec::new();
        for _ in 0..runs {
            if shutdown.requested() {
                break;
            }
            let (outcome, _, window) =
                measure(exe, row, &self.req, &self.placement, shutdown, progress)?;
            let v = run_validity(&outcome.result, window.as_ref(), 1);
            out.push((outcome.result, v));
        }
        Ok((self.placement.text(), out))
    }
}

#[allow(clippy::too_many_arguments)]
fn write_run(
    dir: &Path,
    row: &Row,
    round: u32,
    position: usize,
    placement: &RunPlacement,
    server: &ServerFigures,
    validity: &Validity,
    window_cpu: Option<&WindowCpu>,
    load: &LoadResult,
) -> anyhow::Result<String> {
    let name = format!("runs/r{round}-{}.json", row.label());
    let record = RunRecord {
        schema: RUN_SCHEMA,
        label: row.label(),
        kind: match row {
            Row::Engine { .. } => "engine",
            Row::Against { .. } => "against",
        },
        round,
        position,
        placement,
        server,
        validity,
        window_cpu,
        load,
    };
    let path = dir.join(&name);
    let text = serde_json::to_string_pretty(&record).context("encoding a run")?;
    write_atomic(&path, text + "\n").with_context(|| format!("writing {}", path.display()))?;
    Ok(name)
}

/// The rows in the order given: engines, then `--against` servers.
fn rows(args: &CompareRequest) -> anyhow::Result<Vec<Row>> {
    let mut out: Vec<Row> = Vec::new();
    for &kind in &args.engines {
        let label = if kind == EngineKind::Epoll && args.edge_triggered {
            "epoll-et".to_string()
        } else {
            kind.name().to_string()
        };
        out.push(Row::Engine { kind, label });
    }
    for (n, (label, addr)) in args.against.iter().enumerate() {
        let label = label.clone().unwrap_or_else(|| format!("against{}", n + 1));
        let pid = args.against_pid.get(n).copied();
        out.push(Row::Against {
            label,
            addr: *addr,
            pid,
            idle_kib: pid.and_then(|p| procfs::memory_kib(&procfs::process_tree(p as i32))),
        });
    }
    for (i, r) in out.iter().enumerate() {
        if out[..i].iter().any(|o| o.label() == r.label()) {
            return Err(anyhow!(
                "two rows are named {:?}: give each --engines entry once and each --against a LABEL of its own",
                r.label()
            ));
        }
    }
    Ok(out)
}

/// The placement: the flags, else the default that keeps the client on
/// schedule. Three CPUs or more: the server on the second allowed, the
/// writer on the first and the reader on the third, each alone. Two: the
/// server on the second, writer and reader on the first with the writer
/// under SCHED_FIFO 10 where root allows (measured on a 2-CPU VM at 2,000
/// req/s: send-lag p99 2-4 us, against up to 325 us without it, and a
/// service-latency p99 of 120-140 us against about 2 ms with the reader on
/// the server's CPU); but a writer that never sleeps (its interval no
/// longer than --spin) would starve the reader, so then the reader joins
/// the server instead. One: unpinned.
fn placement(args: &mut CompareRequest, progress: &mut dyn RunProgress) -> RunPlacement {
    let allowed = connlab_os::current_affinity()
        .map(|c| c.cpus().to_vec())
        .unwrap_or_default();
    let list = |cpus: &[usize]| {
        CpuList::parse(
            &cpus
                .iter()
                .map(usize::to_string)
                .collect::<Vec<_>>()
                .join(","),
        )
        .ok()
    };
    let interval = match args.workload.rate {
        Rate::PerSecond(r) if r > 0.0 => Some(Duration::from_secs_f64(1.0 / r)),
        _ => None,
    };
    let spins_always = interval.is_some_and(|i| i <= args.workload.spin);
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    let given = args.server_cpu.is_some() || args.client_cpu.is_some();
    let workers = args.workers.map_or(1, |w| w.max(1) as usize);
    let (server, client, note) = if !given && workers > 1 && allowed.len() >= 2 {
        // N workers take N CPUs from the second allowed on; the client
        // takes the first, alone when there is a CPU to spare, else beside
        // the server (and the page then says the client may limit it).
        let mut order: Vec<usize> = allowed[1..].to_vec();
        order.push(allowed[0]);
        let server: Vec<usize> = order.iter().copied().take(workers).collect();
        let note = if allowed.len() > workers {
            format!("--workers {workers}: the server on the {workers} CPUs after the first, the client on the first")
        } else {
            // The writer shares its CPU with a worker: under SCHED_FIFO
            // (root) it still sends on time, as in the 2-CPU default.
            let fifo = root && args.workload.writer_priority.is_none();
            if fifo {
                args.workload.writer_priority = Some(10);
            }
            format!(
                "--workers {workers} on {} CPUs: the client shares CPU {} with the server and may limit it{}",
                allowed.len(),
                allowed[0],
                if args.workload.writer_priority.is_some() {
                    "; its writer runs under SCHED_FIFO"
                } else {
                    ""
                }
            )
        };
        (list(&server), list(&allowed[0..1]), note)
    } else if given || allowed.len() < 2 {
        let note = if given {
            "from --server-cpu/--client-cpu".to_string()
        } else {
            "one CPU allowed: server and client share it".to_string()
        };
        (args.server_cpu.clone(), args.client_cpu.clone(), note)
    } else if allowed.len() >= 3 {
        (
            list(&allowed[1..2]),
            list(&[allowed[0], allowed[2]]),
            "default: server, writer and reader on a CPU each".to_string(),
        )
    } else if spins_always {
        (
            list(&allowed[1..2]),
            list(&[allowed[0], allowed[1]]),
            "default on two CPUs: the writer, which never sleeps at this rate, alone on the first; the reader with the server".to_string(),
        )
    } else {
        let fifo = root && args.workload.writer_priority.is_none();
        if fifo {
            args.workload.writer_priority = Some(10);
        }
        (
            list(&allowed[1..2]),
            list(&allowed[0..1]),
            if fifo || args.workload.writer_priority.is_some() {
                "default on two CPUs: server on the second, writer and reader on the first with the writer under SCHED_FIFO".to_string()
            } else {
                "default on two CPUs: server on the second, writer and reader on the first (not root: the writer cannot run under SCHED_FIFO, so the reader may delay its sends)".to_string()
            },
        )
    };
    if let (Some(s), Some(c)) = (&server, &client) {
        if s.cpus().iter().any(|x| c.cpus().contains(x)) && given {
            progress.note(&format!(
                "warning: server cpus {s} and client cpus {c} overlap: the client competes with the server"
            ));
        }
    }
    RunPlacement {
        server_cpus: server.map(|s| s.to_string()),
        client_cpus: client.map(|c| c.to_string()),
        writer_policy: match args.workload.writer_priority {
            Some(p) => format!("SCHED_FIFO {p}"),
            None => "SCHED_OTHER".into(),
        },
        keep_awake: args.keep_awake.applies(),
        note,
        workers: args.workers,
    }
}

/// Idle-priority spinners on the placement's CPUs (every CPU allowed when
/// one side is not pinned), when `--keep-awake` applies; they are children
/// of this process, so the windows count them as its own.
fn keep_awake(p: &RunPlacement) -> anyhow::Result<Option<connlab_os::awake::KeepAwake>> {
    if !p.keep_awake {
        return Ok(None);
    }
    let mut cpus: Vec<usize> = Vec::new();
    for list in [&p.server_cpus, &p.client_cpus] {
        match list.as_deref().and_then(|c| CpuList::parse(c).ok()) {
            Some(l) => cpus.extend_from_slice(l.cpus()),
            None => {
                cpus = connlab_os::current_affinity()
                    .map(|c| c.cpus().to_vec())
                    .unwrap_or_default();
                break;
            }
        }
    }
    cpus.sort_unstable();
    cpus.dedup();
    connlab_os::awake::KeepAwake::start(&cpus)
        .map(Some)
        .context("starting the keep-awake spinners")
}

/// The gates of one run: completion, schedule, steal, foreign_cpu,
/// arrivals and stationary, at their default limits.
fn run_validity(r: &LoadResult, window: Option<&WindowCpu>, attempt: u32) -> Validity {
    let q = &r.requests;
    let (scheduled, schedule) = match r.config.rate_per_s {
        Some(rate) => (
            rate * r.config.duration_s,
            Some(ScheduleEvidence {
                send_lag_p99_us: r.send_lag_us.p99,
                writer_rate_per_s: rate,
            }),
        ),
        None => ((q.completed + q.measured_errors()) as f64, None),
    };
    let e = Evidence {
        completion: Some((q.completed, scheduled)),
        schedule,
        cpu: window.cloned(),
        ..Evidence::default()
    }
    .with_run_checks(r, None);
    Validity::of(validity::gates(&ValidityLimits::default(), &e), attempt)
}

/// Runs the load against one row once and gathers its server figures and
/// who used the CPUs meanwhile.
fn measure(
    exe: &Path,
    row: &Row,
    args: &CompareRequest,
    placement: &RunPlacement,
    shutdown: &Shutdown,
    progress: &mut dyn RunProgress,
) -> anyhow::Result<(LoadOutcome, ServerFigures, Option<WindowCpu>)> {
    let watched: Vec<usize> = [&placement.server_cpus, &placement.client_cpus]
        .iter()
        .map(|c| c.as_deref().and_then(|c| CpuList::parse(c).ok()))
        .collect::<Option<Vec<CpuList>>>()
        .map(|l| {
            let mut v: Vec<usize> = l.iter().flat_map(|c| c.cpus().to_vec()).collect();
            v.sort_unstable();
            v.dedup();
            v
        })
        .unwrap_or_default();
    let mut roles = vec![("connlab run", vec![std::process::id() as i32])];
    if let Row::Against { pid: Some(p), .. } = row {
        roles.push(("server under test", vec![*p as i32]));
    }
    let before = WindowSnapshot::take(&roles);
    let (outcome, figures) = measure_row(exe, row, args, placement, shutdown, progress)?;
    let after = WindowSnapshot::take(&roles);
    Ok((
        outcome,
        figures,
        Some(WindowCpu::between(&before, &after, &watched)),
    ))
}

/// Runs the load against one row once and gathers its server figures.
fn measure_row(
    exe: &Path,
    row: &Row,
    args: &CompareRequest,
    placement: &RunPlacement,
    shutdown: &Shutdown,
    progress: &mut dyn RunProgress,
) -> anyhow::Result<(LoadOutcome, ServerFigures)> {
    let client_cpus = placement
        .client_cpus
        .as_deref()
        .and_then(|c| CpuList::parse(c).ok());
    let server_cpus = placement
        .server_cpus
        .as_deref()
        .and_then(|c| CpuList::parse(c).ok());
    match row {
        Row::Engine { kind, label } => {
            let stats_path = std::env::temp_dir()
                .join(format!("connlab-run-{}-{label}.json", std::process::id()));
            let mut server = start_server(exe, *kind, args, server_cpus.as_ref(), &stats_path)?;
            let pid = server.pid();
            let idle = procfs::memory_kib(&procfs::process_tree(pid as i32));
            let workload = Workload {
                target: server.addr,
                cpus: client_cpus,
                ..args.workload.clone()
            };
            let switches_before = procfs::children_switches();
            let (outcome, loaded) = drive(&workload, shutdown, Some(pid), progress);
            let stats = server.stop(&stats_path, Duration::from_secs(15));
            let switches = procfs::children_switches().saturating_sub(switches_before);
            let _ = std::fs::remove_file(&stats_path);
            let outcome =
                outcome.map_err(|e| anyhow!(e).context(format!("load against {label}")))?;
            let figures = ServerFigures {
                pid: Some(pid),
                pinned: server_cpus.is_some(),
                cpu_s: stats.as_ref().and_then(server_cpu_s),
                cpu_source: Some("the server's --stats (getrusage, its whole run)".into()),
                voluntary_switches: Some(switches),
                memory_idle_kib: idle,
                memory_loaded_kib: loaded,
                stats,
                ..ServerFigures::default()
            };
            let figures = derive(figures, &outcome.result);
            Ok((outcome, figures))
        }
        Row::Against {
            label,
            addr,
            pid,
            idle_kib,
        } => {
            let workload = Workload {
                target: *addr,
                cpus: client_cpus,
                ..args.workload.clone()
            };
            let tree = pid
                .map(|p| procfs::process_tree(p as i32))
                .unwrap_or_default();
            let pinned = match (&server_cpus, pid) {
                (Some(cpus), Some(p)) => Some(
                    procfs::pin_tree(&tree, cpus)
                        .with_context(|| format!("pinning --against-pid {p} to cpu {cpus}"))?,
                ),
                _ => None,
            };
            let cpu_before = pid.map(|_| procfs::processes_cpu_s(&tree));
            let switches_before = pid.map(|_| procfs::voluntary_switches(&tree));
            let (outcome, loaded) = drive(&workload, shutdown, *pid, progress);
            // Processes started during the run (a worker respawned) count too.
            let tree_after = pid
                .map(|p| procfs::process_tree(p as i32))
                .unwrap_or_default();
            let cpu = cpu_before.map(|b| (procfs::processes_cpu_s(&tree_after) - b).max(0.0));
            let switches =
                switches_before.map(|b| procfs::voluntary_switches(&tree_after).saturating_sub(b));
            let was_pinned = pinned.is_some();
            if let Some(p) = pinned {
                p.restore();
            }
            let outcome = outcome
                .map_err(|e| anyhow!(e).context(format!("load against {label} at {addr}")))?;
            let figures = ServerFigures {
                pid: *pid,
                pinned: was_pinned,
                cpu_s: cpu,
                cpu_source: pid
                    .map(|p| format!("/proc/PID/stat of {p} and its descendants, over the run")),
                voluntary_switches: switches,
                memory_idle_kib: *idle_kib,
                memory_loaded_kib: loaded,
                ..ServerFigures::default()
            };
            let figures = derive(figures, &outcome.result);
            Ok((outcome, figures))
        }
    }
}

/// Fills in the per-request and per-connection figures.
fn derive(mut f: ServerFigures, r: &LoadResult) -> ServerFigures {
    let q = &r.requests;
    let requests = q.total_completed();
    f.requests = requests;
    let per_request = |v: f64| (requests > 0).then(|| v / requests as f64);
    f.cpu_us_per_request = f.cpu_s.and_then(|c| per_request(c * 1e6));
    f.wakeups_per_request = f.voluntary_switches.and_then(|s| per_request(s as f64));
    let conns = r.connections.established;
    f.memory_per_connection_bytes = match (f.memory_idle_kib, f.memory_loaded_kib) {
        (Some(idle), Some(loaded)) if conns > 0 => {
            Some((loaded as f64 - idle as f64).max(0.0) * 1024.0 / conns as f64)
        }
        _ => None,
    };
    f
}

/// Runs the load generator with progress; while it measures, samples the
/// memory of `pid`'s process tree once (every connection is open by then).
fn drive(
    w: &Workload,
    shutdown: &Shutdown,
    pid: Option<u32>,
    shown: &mut dyn RunProgress,
) -> (Result<LoadOutcome, connlab_loadgen::LoadError>, Option<u64>) {
    let progress = Progress::default();
    let finished = AtomicBool::new(false);
    let mut out = None;
    shown.load(&progress, w, &mut || {
        out = Some(std::thread::scope(|s| {
            let sampler = s.spawn(|| {
                let pid = pid?;
                // Wait for the schedule to start, then let it settle.
                while !progress.measuring.load(Relaxed) {
                    if finished.load(Relaxed) {
                        return None;
                    }
                    std::thread::sleep(Duration::from_millis(20));
                }
                let settle = (w.warmup + w.duration).min(Duration::from_millis(300));
                std::thread::sleep(settle);
                if finished.load(Relaxed) {
                    return None;
                }
                procfs::memory_kib(&procfs::process_tree(pid as i32))
            });
            let out = connlab_loadgen::run(w, shutdown, &progress, None);
            finished.store(true, Relaxed);
            (out, sampler.join().ok().flatten())
        }));
    });
    out.unwrap_or_else(|| {
        (
            Err(connlab_loadgen::LoadError::Workload(
                "the progress display did not run the load".into(),
            )),
            None,
        )
    })
}

fn start_server(
    exe: &Path,
    engine: EngineKind,
    args: &CompareRequest,
    cpus: Option<&CpuList>,
    stats: &Path,
) -> anyhow::Result<ServerChild> {
    let mut cmd = Command::new(exe);
    cmd.args([
        "serve",
        "--engine",
        engine.name(),
        "--listen",
        "127.0.0.1:0",
    ])
    .args(["--protocol", args.workload.protocol.name()])
    .arg("--stats")
    .arg(stats)
    .stdin(Stdio::null())
    .stdout(Stdio::piped())
    .stderr(Stdio::null());
    if args.edge_triggered && engine == EngineKind::Epoll {
        cmd.arg("--edge-triggered");
    }
    if let Some(cpu) = cpus {
        cmd.args(["--cpu", &cpu.to_string()]);
    }
    if let Some(n) = args.workers.filter(|_| engine.has_workers()) {
        cmd.args(["--workers", &n.to_string()]);
    }
    ServerChild::spawn(cmd)
}

/// The primary figure of a run: median service latency, or the achieved
/// rate in closed loop.
pub fn primary(r: &LoadResult, closed_loop: bool) -> f64 {
    if closed_loop {
        r.achieved_rate_per_s
    } else {
        r.service_latency_us.p50
    }
}

/// Whether a run is a sample of the comparison: a failed, interrupted or
/// invalid one is not.
fn counts(d: &Done) -> bool {
    !d.result.interrupted && !d.result.peer_failed && d.validity.valid
}

impl Caveats {
    /// Counts one run (an attempt) and whether its client missed its
    /// schedule (its `schedule` gate failed).
    fn count(&mut self, v: &Validity) {
        self.runs += 1;
        if v.gates.iter().any(|g| g.name == "schedule" && !g.passed) {
            self.schedule_misses += 1;
        }
    }
}

/// The samples of every row, one slot per round, and their comparison.
fn comparison(rows: &[Row], done: &[Done], rounds: u32, closed_loop: bool) -> Comparison {
    let samples: Vec<RowSamples> = rows
        .iter()
        .enumerate()
        .map(|(i, row)| {
            let mut s = RowSamples {
                label: row.label().to_string(),
                primary: vec![None; rounds as usize],
                cpu_us_per_request: vec![None; rounds as usize],
                wakeups_per_request: vec![None; rounds as usize],
                memory_per_connection_bytes: vec![None; rounds as usize],
            };
            for d in done.iter().filter(|d| d.row == i && counts(d)) {
                let k = (d.round - 1) as usize;
                s.primary[k] = Some(primary(&d.result, closed_loop));
                s.cpu_us_per_request[k] = d.server.cpu_us_per_request;
                s.wakeups_per_request[k] = d.server.wakeups_per_request;
                // No growth of the server's memory over the run is a
                // reading that missed, not a server that needs no memory.
                s.memory_per_connection_bytes[k] =
                    d.server.memory_per_connection_bytes.filter(|b| *b > 0.0);
            }
            s
        })
        .collect();
    let (metric, better) = if closed_loop {
        ("achieved rate (req/s)", Better::Higher)
    } else {
        ("median service latency", Better::Lower)
    };
    compare(metric, better, &samples, CONFIDENCE)
}
