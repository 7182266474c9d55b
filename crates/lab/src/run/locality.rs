//! The locality and web kinds: builds the experiment's hosts as network
//! namespaces (one server host, K client hosts on a bridge, and for web
//! experiments the backends), and for every point starts `connlab serve` (or
//! the web backends behind the point's gateway configuration) in the
//! server's namespace and K `connlab load --shard i/K --start-at T` in the
//! clients', merges the shards, and writes one point file. Finished points
//! are skipped when the same sweep is run again, so an interrupted sweep
//! resumes.

use super::child::{log_reason, ServerChild};
use super::window::{cpus_of, Roles};
use super::{unix_now, Progress, RunError, SweepOutcome, SweepRequest};
use crate::validity::{self, Evidence, PointPlacement, ScheduleEvidence, Validity};
use crate::{Experiment, PointParams, PointResult, SweepDir, SweepInfo, TopologyInfo};
use crate::{POINT_SCHEMA, SWEEP_SCHEMA};
use anyhow::{anyhow, bail, Context};
use connlab_os::child::Child;
use connlab_os::netns::{Topology, TopologySpec};
use connlab_os::Shutdown;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Descriptors a process needs beyond its sockets.
const FD_MARGIN: u64 = 64;
/// How long a shard may wait for responses after its last send (`--drain-timeout`).
const DRAIN: Duration = Duration::from_secs(2);

/// Runs a locality or web experiment.
pub(super) fn sweep(
    experiment: &Experiment,
    req: &SweepRequest,
    progress: &mut dyn Progress,
    shutdown: &Shutdown,
) -> Result<SweepOutcome, RunError> {
    let plan = experiment.plan_with(req.quick, req.repetitions);
    let out = req.out.clone();
    let text = &req.text;
    check_descriptors(experiment, &plan)?;
    connlab_os::netns::require_root().map_err(|e| RunError::Failed(e.to_string()))?;
    let earlier = prepare_dir(&out, text, req.quick, req.fresh)?;
    let exe = req.connlab.clone();

    let server_host = experiment.topology.server_host.clone();
    let clients = experiment.client_hosts();
    let backends = experiment.backend_hosts();
    let mut hosts: Vec<&str> = vec![server_host.as_str()];
    hosts.extend(clients.iter().map(String::as_str));
    hosts.extend(backends.iter().map(String::as_str));
    progress.note(&format!(
        "{} ({} points{}), building {} hosts{}",
        experiment.name,
        plan.len(),
        if req.quick { ", quick" } else { "" },
        hosts.len(),
        experiment
            .topology
            .link_rate
            .as_ref()
            .map_or(String::new(), |r| format!(" with {r} links"))
    ));
    let topology =
        Topology::build(&TopologySpec::bridge(&hosts).with_link_rate(experiment.link_rate_bps()))
            .map_err(|e| RunError::Failed(format!("building the network namespaces: {e}")))?;
    let server_ip = topology
        .host_addr(&server_host)
        .ok_or_else(|| RunError::Failed(format!("the topology has no host {server_host:?}")))?;
    let www = match experiment.web {
        Some(_) => Some(
            super::web::prepare(experiment, &topology, &out)
                .map_err(|e| RunError::Input(format!("preparing the web experiment: {e:#}")))?,
        ),
        None => None,
    };

    let now = connlab_os::Environment::capture();
    let (blocks, new_block) = super::machine_blocks(
        earlier
            .as_ref()
            .map(|i| (i.blocks.as_slice(), &i.environment, i.started_unix_s)),
        &now.fingerprint(),
    );
    let mut blocks = blocks;
    let block = blocks.last().cloned().expect("at least one block");
    if new_block {
        let moved = super::set_aside(&out.join("points"), block.index - 1)?;
        if let Some(b) = blocks.last_mut() {
            b.points_set_aside = moved;
        }
        progress.note(&format!(
            "resuming on another machine ({}): block {} begins; the {moved} points of block {} are kept in points/block-{} and not pooled with it",
            block.fingerprint,
            block.index,
            block.index - 1,
            block.index - 1
        ));
    }
    let info = SweepInfo {
        schema: SWEEP_SCHEMA.into(),
        name: experiment.name.clone(),
        title: experiment.title.clone(),
        reproduces: experiment.reproduces().map(str::to_string),
        quick: req.quick,
        started_unix_s: earlier.as_ref().map_or_else(unix_now, |i| i.started_unix_s),
        points_total: plan.len(),
        repetitions: Some(req.repetitions.unwrap_or(experiment.repetitions(req.quick))),
        connlab_version: env!("CARGO_PKG_VERSION").into(),
        environment: if new_block {
            now
        } else {
            super::sweep_environment(earlier.as_ref().map(|i| &i.environment), progress)
        },
        topology: TopologyInfo {
            server_host: server_host.clone(),
            server_addr: server_ip.to_string(),
            client_hosts: clients.clone(),
            link_rate: experiment
                .topology
                .link_rate
                .as_ref()
                .map(|r| r.to_string()),
            link_rate_bps: experiment.link_rate_bps(),
        },
        blocks,
    };
    SweepDir::write_info(&out, &info).map_err(|e| RunError::Failed(e.to_string()))?;
    super::write_experiment(&out, text)?;

    let placement = placement(experiment, connlab_os::Environment::capture().cpu_count);
    progress.note(&format!("placement: {}", placement.note));
    let ctx = PointContext {
        ci_target: req.ci_target,
        ci_max_duration: req.ci_max_duration,
        placement,
        block: block.fingerprint.clone(),
        www,
        exe,
        experiment,
        topology: &topology,
        server_host: &server_host,
        clients: &clients,
        server_ip,
        out: &out,
        shutdown,
    };
    let attempts = super::attempts(req, &experiment.validity);
    let todo: Vec<&PointParams> = plan.iter().filter(|p| !point_done(&out, p)).collect();
    let kept = plan.len() - todo.len();
    if kept > 0 {
        progress.note(&format!(
            "resuming {}: {kept} of {} points already done",
            out.display(),
            plan.len()
        ));
    }
    progress.begin(plan.len(), kept);
    // The time left, from the estimates scaled by how long points took so far.
    let mut left_estimate: f64 = todo
        .iter()
        .map(|p| estimate(experiment, p).as_secs_f64())
        .sum();
    let (mut spent, mut estimated) = (0.0f64, 0.0f64);
    let mut outcome = SweepOutcome {
        out: out.clone(),
        total: plan.len(),
        kept,
        ..SweepOutcome::default()
    };
    for point in &todo {
        if shutdown.requested() {
            break;
        }
        let id = point.id();
        let scale = if estimated > 0.0 {
            spent / estimated
        } else {
            1.0
        };
        progress.start(&id, Some(Duration::from_secs_f64(left_estimate * scale)));
        let began = Instant::now();
        let result = ctx.measure_with_attempts(point, attempts, progress);
        let took = began.elapsed();
        let est = estimate(experiment, point).as_secs_f64();
        left_estimate = (left_estimate - est).max(0.0);
        spent += took.as_secs_f64();
        estimated += est;
        match result {
            Ok(result) => {
                SweepDir::write_point(&out, &result)
                    .map_err(|e| RunError::Failed(e.to_string()))?;
                progress.finish(&id, took, &describe(&result));
                outcome.measured += 1;
            }
            Err(_) if shutdown.requested() => break,
            Err(e) => {
                let log = SweepDir::layout(&out).log_dir(&id);
                let _ = connlab_os::files::write_atomic(log.join("error.txt"), format!("{e:#}\n"));
                progress.finish(&id, took, &format!("FAILED: {e:#}"));
                outcome.failed.push(id);
            }
        }
    }
    progress.end();
    if let Err(e) = topology.teardown() {
        outcome
            .warnings
            .push(format!("tearing the namespaces down: {e}"));
    }
    outcome.interrupted = shutdown.requested();
    Ok(outcome)
}

/// What a point measures: `connlab serve`, or web backends behind the
/// point's gateway configuration.
enum UnderTest {
    Serve(ServerChild),
    Web(super::web::WebSide),
}

/// Everything a point needs.
struct PointContext<'a> {
    /// `--ci-target`: the p99 interval's largest relative width.
    ci_target: Option<f64>,
    /// `--ci-max-duration`: the longest measured seconds a point may be
    /// extended to (default four times the file's).
    ci_max_duration: Option<f64>,
    /// Where the server and the shards run.
    placement: PointPlacement,
    /// The machine of the sweep's current block.
    block: connlab_os::Fingerprint,
    /// Web experiments: the file set the backends serve.
    www: Option<PathBuf>,
    exe: PathBuf,
    experiment: &'a Experiment,
    topology: &'a Topology,
    server_host: &'a str,
    clients: &'a [String],
    server_ip: std::net::Ipv4Addr,
    out: &'a Path,
    shutdown: &'a Shutdown,
}

impl PointContext<'_> {
    /// Runs a point until it passes its gates or `attempts` run out; the
    /// last attempt is kept, with its gates. With `--ci-target`, a point
    /// whose p99 interval is too wide is measured again for twice as long,
    /// up to the cap, without counting against its attempts.
    fn measure_with_attempts(
        &self,
        p: &PointParams,
        attempts: u32,
        progress: &mut dyn Progress,
    ) -> anyhow::Result<PointResult> {
        let (mut attempt, mut tries) = (1, 1);
        let mut duration = p.duration_s;
        let cap = self
            .ci_max_duration
            .unwrap_or(p.duration_s * 4.0)
            .max(p.duration_s);
        loop {
            let mut r = self.run_point(p, duration)?;
            let gates = validity::gates(&self.experiment.validity, &self.evidence(p, &r));
            let v = Validity::of(gates, tries);
            let imprecise = v.failed().any(|g| g.name == "precision");
            let others = v
                .failed()
                .any(|g| g.name != "precision" && g.name != "machine");
            let stopped = self.shutdown.requested();
            let longer = imprecise && !others && duration * 2.0 <= cap + 1e-9 && !stopped;
            let again = others && attempt < attempts && !stopped;
            if longer {
                progress.note(&format!(
                    "{}: {}; measuring again for {} s",
                    p.id(),
                    v.failure_text(),
                    duration * 2.0
                ));
                duration *= 2.0;
            } else if again {
                progress.note(&format!(
                    "{}: attempt {attempt} of {attempts} failed its gates ({}); measuring again",
                    p.id(),
                    v.failure_text()
                ));
                attempt += 1;
            }
            r.checked.validity = Some(v);
            if !longer && !again {
                return Ok(r);
            }
            tries += 1;
        }
    }

    /// What the gates look at for a measured point.
    fn evidence(&self, p: &PointParams, r: &PointResult) -> Evidence {
        let q = &r.load.requests;
        let scheduled = if p.closed_loop() {
            (q.completed + q.measured_errors()) as f64
        } else {
            p.rate_per_s * r.load.config.duration_s
        };
        Evidence {
            completion: Some((q.completed, scheduled)),
            schedule: (!p.closed_loop()).then(|| ScheduleEvidence {
                send_lag_p99_us: r.load.send_lag_us.p99,
                writer_rate_per_s: p.rate_per_s / f64::from(r.shards.max(1)),
            }),
            cpu: super::window::gated(r.checked.window_cpu.as_ref()),
            machine: Some((r.load.environment.fingerprint(), self.block.clone())),
            ..Evidence::default()
        }
        .with_run_checks(&r.load, self.ci_target)
    }

    /// The server under test: `connlab serve`, or web backends behind the
    /// point's gateway configuration.
    fn start_under_test(
        &self,
        p: &PointParams,
        stats: &Path,
        logs: &Path,
    ) -> anyhow::Result<UnderTest> {
        let exp = self.experiment;
        Ok(match &self.www {
            None => {
                let mut cmd = self.in_host(self.server_host)?;
                cmd.args(["serve", "--engine", &p.engine, "--listen"])
                    .arg(format!("{}:0", self.server_ip))
                    .args(["--protocol", &exp.server.protocol, "--stats"])
                    .arg(stats)
                    .stdin(Stdio::null())
                    .stdout(Stdio::piped())
                    .stderr(log_file(&logs.join("server.log"))?);
                if let Some(cpu) = &exp.server.cpu {
                    cmd.args(["--cpu", cpu.as_str()]);
                }
                if exp.server.profile_poll {
                    cmd.arg("--profile-poll");
                }
                UnderTest::Serve(ServerChild::spawn(cmd)?)
            }
            Some(www) => UnderTest::Web(super::web::start(
                exp,
                self.topology,
                &self.exe,
                www,
                &p.engine,
                logs,
                log_file,
            )?),
        })
    }

    /// Runs one point for `duration_s` measured seconds: server, shards,
    /// merge.
    fn run_point(&self, p: &PointParams, duration_s: f64) -> anyhow::Result<PointResult> {
        let exp = self.experiment;
        let id = p.id();
        let logs = SweepDir::layout(self.out).log_dir(&id);
        if logs.exists() {
            std::fs::remove_dir_all(&logs)
                .with_context(|| format!("clearing {}", logs.display()))?;
        }
        std::fs::create_dir_all(&logs).with_context(|| format!("creating {}", logs.display()))?;
        let stats = logs.join("server-stats.json");

        let mut under_test = self.start_under_test(p, &stats, &logs)?;
        let target = match &under_test {
            UnderTest::Serve(s) => s.addr,
            UnderTest::Web(w) => w.target,
        };

        let lead = exp.start_lead(p.connections);
        let start_at = SystemTime::now() + lead;
        let start_s = start_at.duration_since(UNIX_EPOCH)?.as_secs_f64();
        let k = self.clients.len();
        let mut shard_files = Vec::new();
        let mut shards: Vec<Child> = Vec::new();
        for (i, host) in self.clients.iter().enumerate() {
            let file = logs.join(format!("shard-{}.json", i + 1));
            let mut cmd = self.in_host(host)?;
            // The sweep judges errors itself (a point past saturation is data).
            cmd.arg("load")
                .args(["--max-error-ratio", "1"])
                .args(["--target", &target.to_string()])
                .args(["--shard", &format!("{}/{k}", i + 1)])
                .args(["--start-at", &format!("{start_s:.3}")])
                .args(["-c", &p.connections.to_string()])
                .args(["--active-ratio", &p.active_ratio_label])
                .args(["--rate", &p.rate_label()])
                .args(["--request-size", &p.request_size_bytes.to_string()])
                .args(["--response-size", &p.response_size_bytes.to_string()])
                .args(["-d", &format!("{duration_s}s")])
                .args(["--warmup", &format!("{}s", p.warmup_s)])
                .args(["--drain-timeout", &format!("{}s", DRAIN.as_secs())])
                .args(["--protocol", &exp.server.protocol])
                .arg("--json")
                .arg(&file)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(log_file(&logs.join(format!("shard-{}.log", i + 1)))?);
            if let Some(cpu) = self.placement.shard_cpus.get(i).cloned().flatten() {
                cmd.args(["--cpu", &cpu]);
            }
            if let Some(arrival) = exp.client.arrival {
                cmd.args(["--arrival", arrival.as_str()]);
            }
            if let Some(prio) = writer_priority(exp, &self.placement) {
                cmd.args(["--writer-priority", &prio.to_string()]);
            }
            if let Some(seed) = exp.client.seed {
                cmd.args(["--seed", &seed.to_string()]);
            }
            if let Some(policy) = exp.client.active_policy {
                cmd.args(["--active-policy", policy.as_str()]);
            }
            if let Some(depth) = exp.client.depth {
                cmd.args(["--depth", &depth.to_string()]);
            }
            if let Some(www) = &self.www {
                cmd.arg("--manifest").arg(www);
            }
            match Child::spawn(&mut cmd) {
                Ok(child) => shards.push(child),
                Err(e) => {
                    stop_all(&mut shards);
                    bail!("starting shard {} in {host}: {e}", i + 1);
                }
            }
            shard_files.push(file);
        }

        // The shards end by themselves; the deadline only guards against a hang.
        let deadline = Instant::now()
            + lead
            + Duration::from_secs_f64(p.warmup_s + duration_s)
            + DRAIN
            + Duration::from_secs(30 + p.connections / 1000);
        let window_from = start_at + Duration::from_secs_f64(p.warmup_s);
        let window_length = Duration::from_secs_f64(duration_s);
        let sampler = match &under_test {
            UnderTest::Web(w) => Some(w.sampler(window_from, window_length)),
            UnderTest::Serve(_) => None,
        };
        let roles = match &under_test {
            UnderTest::Serve(s) => Roles::default().with("server", [s.pid()]),
            UnderTest::Web(w) => w.roles(),
        }
        .with("clients", shards.iter().map(Child::pid));
        let watched = cpus_of(
            std::iter::once(self.placement.server_cpus.as_deref())
                .chain(self.placement.shard_cpus.iter().map(|c| c.as_deref())),
        );
        let probe =
            super::window::sample(roles, watched, window_from, window_length, self.shutdown);
        let statuses = self.wait_shards(&mut shards, deadline);
        let window_cpu = sampler
            .map(|s| s.join().unwrap_or_default())
            .unwrap_or_default();
        let window = probe.join().ok().flatten();
        let server_stats = match under_test {
            UnderTest::Serve(ref mut s) => {
                s.stop(&stats, Duration::from_secs(30 + p.connections / 500))
            }
            UnderTest::Web(w) => w.stop(),
        };
        if self.shutdown.requested() {
            bail!("interrupted");
        }
        let mut warnings = Vec::new();
        let mut present = Vec::new();
        for (i, (file, status)) in shard_files.iter().zip(&statuses).enumerate() {
            let log = logs.join(format!("shard-{}.log", i + 1));
            match status {
                Some(0) => {}
                Some(code) => warnings.push(format!(
                    "shard {} exited with status {code}: {}",
                    i + 1,
                    log_reason(&log)
                )),
                None => warnings.push(format!(
                    "shard {} was killed after the point's deadline: {}",
                    i + 1,
                    log_reason(&log)
                )),
            }
            if file.exists() {
                present.push(file.clone());
            }
        }
        if present.len() != shard_files.len() {
            bail!(
                "{} of {k} shards wrote no result: {}",
                shard_files.len() - present.len(),
                warnings.join("; ")
            );
        }
        let load = super::merge_files(&present)?;
        if let Some(s) = &server_stats {
            if let Some(shed) = s["connections_shed"].as_u64().filter(|n| *n > 0) {
                warnings.push(format!(
                    "the server shed {shed} connections at its open-files limit"
                ));
            }
        } else if self.www.is_none() {
            warnings.push("the server wrote no statistics (see server.log)".into());
        }
        Ok(PointResult {
            schema: POINT_SCHEMA.into(),
            id,
            params: p.clone(),
            shards: k as u32,
            load,
            server: server_stats,
            warnings,
            backend_cpu_share: window_cpu.backends,
            gateway_cpu_share: window_cpu.gateway,
            cpu_busy_share: window_cpu.cpus,
            finished_unix_s: unix_now(),
            checked: validity::Checked {
                validity: None,
                machine: Some(connlab_os::Environment::capture().fingerprint()),
                window_cpu: window,
            },
            placement: Some(self.placement.clone()),
        })
    }

    /// A `connlab` command that runs in `host`'s namespace (spawned as a
    /// [`Child`], it dies with us).
    fn in_host(&self, host: &str) -> anyhow::Result<Command> {
        self.topology
            .command(host, &self.exe)
            .map_err(|e| anyhow!(e))
    }

    /// Waits for every shard; forwards a Ctrl-C; kills what outlives `deadline`.
    /// Returns each shard's exit code (`None`: killed or lost).
    fn wait_shards(&self, shards: &mut [Child], deadline: Instant) -> Vec<Option<i32>> {
        let mut codes: Vec<Option<Option<i32>>> = vec![None; shards.len()];
        let mut forwarded = false;
        while codes.iter().any(Option::is_none) {
            for (child, code) in shards.iter_mut().zip(codes.iter_mut()) {
                if code.is_none() {
                    match child.try_wait() {
                        Ok(Some(status)) => *code = Some(status.code()),
                        Ok(None) => {}
                        Err(_) => *code = Some(None),
                    }
                }
            }
            if self.shutdown.requested() && !forwarded {
                for (child, code) in shards.iter().zip(&codes) {
                    if code.is_none() {
                        let _ = child.signal(libc::SIGINT);
                    }
                }
                forwarded = true;
            }
            if Instant::now() >= deadline {
                stop_all(shards);
                break;
            }
            std::thread::sleep(Duration::from_millis(25));
        }
        codes.into_iter().map(Option::flatten).collect()
    }
}

fn stop_all(children: &mut [Child]) {
    for c in children {
        c.kill();
    }
}

fn log_file(path: &Path) -> anyhow::Result<File> {
    File::create(path).with_context(|| format!("creating {}", path.display()))
}

/// True when the point's file exists, reads, and has these parameters.
fn point_done(out: &Path, p: &PointParams) -> bool {
    SweepDir::read_point(&SweepDir::layout(out).point_path(&p.id())).is_ok_and(|r| r.params == *p)
}

/// Creates the directory, or checks that it holds this same sweep (resume).
/// Returns the earlier `sweep.json` when resuming.
fn prepare_dir(
    out: &Path,
    text: &str,
    quick: bool,
    fresh: bool,
) -> Result<Option<SweepInfo>, RunError> {
    let info_path = SweepDir::layout(out).info_path();
    if fresh {
        for sub in ["points", "logs"] {
            let d = out.join(sub);
            if d.exists() {
                std::fs::remove_dir_all(&d).with_context(|| format!("removing {}", d.display()))?;
            }
        }
        let _ = std::fs::remove_file(&info_path);
    }
    if !info_path.exists() {
        if out.join("points").exists() {
            return Err(RunError::Input(format!(
                "{} has points/ but no sweep.json: not a sweep directory of this version; use another --out or --fresh",
                out.display()
            )));
        }
        std::fs::create_dir_all(out.join("points"))
            .with_context(|| format!("creating {}", out.display()))?;
        return Ok(None);
    }
    let earlier: SweepInfo = serde_json::from_str(
        &std::fs::read_to_string(&info_path)
            .with_context(|| format!("reading {}", info_path.display()))?,
    )
    .map_err(|e| {
        RunError::Input(format!(
            "{}: {e}; use --fresh to start over",
            info_path.display()
        ))
    })?;
    let old_text =
        std::fs::read_to_string(SweepDir::layout(out).experiment_path()).unwrap_or_default();
    let same = crate::same_measurement(&old_text, text);
    if !same || earlier.quick != quick {
        return Err(RunError::Input(format!(
            "{} holds results of {} experiment file{}; use another --out, or --fresh to discard them",
            out.display(),
            if same { "the same" } else { "a different" },
            if earlier.quick != quick {
                if quick { " run without --quick" } else { " run with --quick" }
            } else {
                ""
            }
        )));
    }
    Ok(Some(earlier))
}

/// Refuses a plan that needs more descriptors than one process may hold.
pub(super) fn check_descriptors(exp: &Experiment, plan: &[PointParams]) -> Result<(), RunError> {
    let hard = connlab_os::raise_nofile_limit()
        .map(|l| l.hard)
        .unwrap_or(u64::MAX);
    let Some(max) = plan.iter().map(|p| p.connections).max() else {
        return Ok(());
    };
    let threaded = exp.server.engines.iter().any(|e| e != "processes");
    if threaded && max + FD_MARGIN > hard {
        return Err(RunError::Input(format!(
            "the plan has points with {max} connections, but one server process may hold {} descriptors here (open-files hard limit {hard}); lower matrix.connections to at most {}",
            hard,
            hard.saturating_sub(FD_MARGIN)
        )));
    }
    let per_shard = max.div_ceil(u64::from(exp.topology.client_hosts));
    if per_shard + FD_MARGIN > hard {
        return Err(RunError::Input(format!(
            "{max} connections over {} client hosts is {per_shard} per shard, over the open-files hard limit {hard}; add client hosts",
            exp.topology.client_hosts
        )));
    }
    Ok(())
}

/// The estimated wall time of one point.
pub fn estimate(exp: &Experiment, p: &PointParams) -> Duration {
    exp.start_lead(p.connections)
        + Duration::from_secs_f64(p.warmup_s + p.duration_s)
        + Duration::from_secs(1)
}

fn describe(r: &PointResult) -> String {
    let s = &r.load.service_latency_us;
    let errors: u64 = r.load.requests.errors.values().sum();
    let validity = match &r.checked.validity {
        Some(v) if !v.valid => format!(
            "; INVALID after {} attempt{}: {}",
            v.attempts,
            if v.attempts == 1 { "" } else { "s" },
            v.failure_text()
        ),
        Some(v) if v.attempts > 1 => format!("; valid at attempt {}", v.attempts),
        _ => String::new(),
    };
    format!(
        "mean {:.0} us, median {:.0} us, {} requests{}{validity}",
        s.mean,
        s.p50,
        r.load.requests.completed,
        if errors > 0 {
            format!(", {errors} errors")
        } else {
            String::new()
        }
    )
}

/// Where the server and each client shard run. The file's CPUs, except
/// that a locality sweep on a machine with more CPUs than the file pins
/// gives each shard CPUs of its own (a writer's and a reader's where there
/// are two per shard, else one), the server keeping its own.
fn placement(exp: &Experiment, cpu_count: usize) -> PointPlacement {
    let shards = exp.topology.client_hosts as usize;
    let server = exp.server.cpu.as_ref().map(|c| c.as_str().to_string());
    let file_client = exp.client.cpu.as_ref().map(|c| c.as_str().to_string());
    let pinned = cpus_of([server.as_deref(), file_client.as_deref()]);
    let free: Vec<usize> = (0..cpu_count).filter(|c| !pinned.contains(c)).collect();
    let spread = exp.web.is_none() && server.is_some() && file_client.is_some();
    let (shard_cpus, note) = if spread && free.len() >= 2 * shards {
        (
            (0..shards)
                .map(|i| Some(format!("{},{}", free[2 * i], free[2 * i + 1])))
                .collect::<Vec<_>>(),
            format!(
                "server on cpu {}; each of the {shards} shards on two CPUs of its own (writer, reader) from {} free",
                server.as_deref().unwrap_or("?"),
                free.len()
            ),
        )
    } else if spread && free.len() >= shards {
        (
            (0..shards).map(|i| Some(free[i].to_string())).collect(),
            format!(
                "server on cpu {}; each of the {shards} shards on a CPU of its own",
                server.as_deref().unwrap_or("?")
            ),
        )
    } else {
        (
            vec![file_client.clone(); shards],
            format!(
                "as the file pins: server on cpu {}, every shard on cpu {}",
                server.as_deref().unwrap_or("any"),
                file_client.as_deref().unwrap_or("any")
            ),
        )
    };
    let mut p = PointPlacement {
        server_cpus: server,
        shard_cpus,
        writer_policy: String::new(),
        keep_awake: !super::window::awake_pids().is_empty(),
        note,
    };
    p.writer_policy = match writer_priority(exp, &p) {
        Some(prio) => format!("SCHED_FIFO {prio}"),
        None => "SCHED_OTHER".into(),
    };
    p
}

/// The priority of the shards' writers: the file's `client.writer_priority`;
/// without one, 10 where a writer shares its CPU with its reader (sweeps
/// run as root, which SCHED_FIFO needs), so sends preempt the reader.
fn writer_priority(exp: &Experiment, p: &PointPlacement) -> Option<i32> {
    let shares = p
        .shard_cpus
        .iter()
        .any(|c| c.as_deref().is_some_and(|c| cpus_of([Some(c)]).len() == 1));
    exp.client.writer_priority.or(shares.then_some(10))
}
