//! The peers kind (`kind = "peers"`): connlab's processes against nginx, HAProxy and wrk on
//! loopback. For every point it starts the server, then the gateway if any,
//! each pinned to its CPU (`sched_setaffinity` before exec), checks that one
//! request gets a 200 through the whole chain, runs the client, and charges
//! the CPU each role used during the client's run: the server's and the
//! gateway's process trees from `/proc/PID/stat` (utime + stime, and the
//! children they reaped), the client from its own rusage when reaped. One
//! JSON file per point, written whole; every child is stopped on every exit
//! path (a guard per process, and the kernel's parent-death signal). With
//! `profile = true`, perf profiles follow the points ([`profile`]).
//!
//! Every point is judged by its gates ([`crate::validity`]): completion
//! (completed / (completed + errors), the clients being closed loop),
//! steal and foreign work on the roles' CPUs over the client's run (two
//! [`WindowSnapshot`]s, the roles' process trees named `server`, `gateway`,
//! `client`), the machine against the sweep's, and with `connlab load` as
//! the client its own arrival and stationarity checks; a point failing a
//! gate other than `machine` is measured again, up to the attempts.

mod commands;
mod output;
mod procs;
mod profile;
#[cfg(test)]
mod tests;

use crate::run::{stop_flag, unix_now, Progress, RunError, SweepOutcome, SweepRequest};
use crate::validity::{self, Evidence, Fingerprint, WindowCpu};
use crate::{
    PeerParams, PeerPoint, PeersDir, PeersExperiment, PeersInfo, PointSetup, ProcessKind, Role,
    RoleCpu, PEERS_SWEEP_SCHEMA, PEER_POINT_SCHEMA,
};
use anyhow::{anyhow, bail, Context};
use commands::{client_command, client_shard_command, free_addr, gateway_commands, server_command};
use connlab_loadgen::LoadResult;
use connlab_os::window::WindowSnapshot;
use connlab_os::{Environment, Shutdown};
use output::{parse_load, parse_wrk};
use procs::{wait_listening, wait_ready, Proc};
use std::collections::BTreeSet;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::time::{Duration, Instant};

/// How long a process may take to answer its first request.
const READY: Duration = Duration::from_secs(15);
/// How long a stopped process may take to exit before it is killed.
const GRACE: Duration = Duration::from_secs(5);

/// Runs a peers experiment.
pub(super) fn sweep(
    exp: &PeersExperiment,
    req: &SweepRequest,
    progress: &mut dyn Progress,
    shutdown: &Shutdown,
) -> Result<SweepOutcome, RunError> {
    let (out, quick) = (&req.out, req.quick);
    let plan = exp.plan(quick);
    let duration = exp.duration(quick);
    // `connlab sweep --profile` turns profiles on for a file that leaves them off.
    let profiling = exp.profile || req.profile;
    let mut peer_versions = check_programs(exp).map_err(|e| RunError::Input(format!("{e:#}")))?;
    if profiling {
        let perf = profile::check_perf().map_err(|e| RunError::Input(format!("{e:#}")))?;
        peer_versions.push(("perf".into(), perf));
    }
    let dir = PeersDir::layout(out);
    let session = super::begin_session(&dir, req, &["profiles"], progress)?;
    let sweep_machine = session.environment.fingerprint();
    let attempts = super::attempts(req, &exp.validity);
    let info = PeersInfo {
        schema: PEERS_SWEEP_SCHEMA.into(),
        experiment: PeersExperiment {
            profile: profiling,
            ..exp.clone()
        },
        quick,
        environment: session.environment,
        peer_versions,
        started_unix_s: session.started_unix_s,
        points_total: plan.len(),
    };
    dir.write_info(&info)
        .map_err(|e| RunError::Failed(e.to_string()))?;
    become_subreaper();
    let stop = stop_flag(shutdown);
    let exe = req.connlab.clone();
    let www = WwwDir::create(exp, quick)?;
    let pending = super::pending(&dir, PeerParams::id, |r: &PeerPoint, p| r.params == *p);
    let mut outcome = super::announce_points(progress, &exp.name, &plan, &pending, req);
    let result = super::each_point(
        &plan,
        progress,
        &mut outcome,
        pending,
        || stop.load(Relaxed),
        |p, id, progress| {
            let ctx = PointCtx {
                exp,
                exe: &exe,
                tmp: &www.path,
                logs: out.join("logs").join(id),
                duration,
                stop: &stop,
            };
            measure_point(&ctx, p, attempts, &sweep_machine, progress)
        },
        |id, point| {
            dir.write_point(id, &point, true)
                .map_err(|e| RunError::Failed(e.to_string()))?;
            Ok(super::Kept {
                summary: format!(
                    "{:.0} req/s, {:.0} requests per {} CPU s{}{}",
                    point.requests_per_s,
                    point.requests_per_cpu_s,
                    point.measure.name(),
                    if point.errors > 0 {
                        format!(", {} ERRORS", point.errors)
                    } else {
                        String::new()
                    },
                    super::validity_words(point.checked.validity.as_ref())
                ),
                failed: point.errors > 0,
            })
        },
    );
    if result.is_ok() && profiling && !stop.load(Relaxed) {
        let ctx = |logs| PointCtx {
            exp,
            exe: &exe,
            tmp: &www.path,
            logs,
            duration,
            stop: &stop,
        };
        record_profiles(exp, quick, out, ctx, progress, &mut outcome);
    }
    progress.end();
    result?;
    outcome.interrupted = stop.load(Relaxed);
    Ok(outcome)
}

/// Records the profiles of `profile = true` that no earlier sweep finished,
/// one unmeasured run each (see [`profile`]); a failed one is said with
/// perf's reason and counted among the failures, and the rest go on.
fn record_profiles<'a>(
    exp: &PeersExperiment,
    quick: bool,
    out: &Path,
    ctx: impl Fn(PathBuf) -> PointCtx<'a>,
    progress: &mut dyn Progress,
    outcome: &mut SweepOutcome,
) {
    let targets = exp.profile_plan(quick);
    let left: Vec<&PeerParams> = targets
        .iter()
        .filter(|p| !profile::report_path(out, &p.profile_id()).exists())
        .collect();
    if left.is_empty() {
        return;
    }
    let (_, window) = profile::window(exp.duration(quick));
    progress.note(&format!(
        "profiles: {} of {} to record, one unmeasured run each with perf on the {} for up to {:.1} s",
        left.len(),
        targets.len(),
        exp.measure.name(),
        window.as_secs_f64()
    ));
    for p in left {
        let id = p.profile_id();
        let ctx = ctx(out.join("logs").join("profiles").join(&id));
        if ctx.stop.load(Relaxed) {
            return;
        }
        match profile::record_profile(&ctx, p, out) {
            Ok(Some(what)) => progress.note(&format!("profile {id}: {what}")),
            Ok(None) => return,
            Err(e) => {
                progress.note(&format!("profile {id}: FAILED: {e:#}"));
                outcome.failed.push(format!("profile {id}"));
            }
        }
    }
}

/// Makes this process the reaper of its orphaned descendants (an nginx
/// worker whose master died), so [`Proc::stop`] finds and ends them.
fn become_subreaper() {
    // SAFETY: prctl with PR_SET_CHILD_SUBREAPER only sets a flag of this process.
    unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1) };
}

/// Checks the peer programs the experiment names and returns their versions.
fn check_programs(exp: &PeersExperiment) -> anyhow::Result<Vec<(String, String)>> {
    let mut kinds: BTreeSet<&str> = BTreeSet::new();
    let fixed = [&exp.server, &exp.gateway, &exp.client];
    for k in exp
        .contender
        .iter()
        .map(|c| c.kind)
        .chain(fixed.iter().filter_map(|p| p.as_ref().map(|p| p.kind)))
    {
        match k {
            ProcessKind::NginxReturn | ProcessKind::NginxStatic => kinds.insert("nginx"),
            ProcessKind::Haproxy => kinds.insert("haproxy"),
            ProcessKind::Wrk => kinds.insert("wrk"),
            _ => false,
        };
    }
    let mut versions = Vec::new();
    for program in kinds {
        let output = Command::new(program).arg("-v").output().map_err(|e| {
            anyhow!("{program} is needed by this experiment ({e}): apt-get install -y {program}")
        })?;
        let text = String::from_utf8_lossy(&output.stdout).to_string()
            + &String::from_utf8_lossy(&output.stderr);
        let line = text.lines().next().unwrap_or_default();
        // wrk's banner goes on with a copyright notice.
        let line = line
            .split(" Copyright")
            .next()
            .unwrap_or(line)
            .trim()
            .to_string();
        versions.push((program.to_string(), line));
    }
    Ok(versions)
}

/// The document root every nginx serves (`bytes/<N>` files), in /tmp with
/// mode 0755 so nginx's unprivileged worker can read it; removed on drop.
struct WwwDir {
    path: PathBuf,
}

impl WwwDir {
    fn create(exp: &PeersExperiment, quick: bool) -> anyhow::Result<WwwDir> {
        let path = std::env::temp_dir().join(format!("connlab-peers-{}", std::process::id()));
        let www = WwwDir { path };
        let bytes = www.path.join("www").join("bytes");
        std::fs::create_dir_all(&bytes).with_context(|| format!("creating {}", bytes.display()))?;
        for dir in [&www.path, &www.path.join("www"), &bytes] {
            std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755))
                .with_context(|| format!("chmod {}", dir.display()))?;
        }
        let sizes: BTreeSet<u64> = exp.plan(quick).iter().map(|p| p.body_bytes).collect();
        for n in sizes {
            let file = bytes.join(n.to_string());
            std::fs::write(&file, body(n))
                .with_context(|| format!("writing {}", file.display()))?;
        }
        Ok(www)
    }
}

impl Drop for WwwDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

/// The response body of `GET /bytes/N` from nginx (connlab serves its own).
fn body(n: u64) -> Vec<u8> {
    vec![b'x'; usize::try_from(n).unwrap_or(0)]
}

/// What every point of a sweep shares.
struct PointCtx<'a> {
    exp: &'a PeersExperiment,
    exe: &'a Path,
    /// The temporary directory: nginx's prefix, pid and temp files, `www/`.
    tmp: &'a Path,
    logs: PathBuf,
    duration: Duration,
    stop: &'a AtomicBool,
}

/// The server and gateway of a point, started and answering.
struct Roles {
    setup: PointSetup,
    server: Proc,
    /// The gateway's processes (two for the single-IP relay), if any.
    gateway: Vec<Proc>,
    /// Where the client connects: the gateway, else the server.
    target: std::net::SocketAddr,
    /// The command line of each process so far, role by role.
    commands: Vec<(Role, Vec<String>)>,
}

/// The client's JSON result (`connlab load --json`), in a point's logs.
const CLIENT_JSON: &str = "client.json";

impl Roles {
    /// Stops the gateway, then the server.
    fn stop(&mut self) {
        for g in self.gateway.iter_mut().rev() {
            g.stop();
        }
        self.server.stop();
    }

    /// The client's command toward these roles (its JSON result in
    /// `ctx.logs`), recorded among the point's commands.
    fn client_command(&mut self, ctx: &PointCtx, body_bytes: u64) -> Command {
        let json = ctx.logs.join(CLIENT_JSON);
        let cmd = client_command(ctx, &self.setup.client, self.target, body_bytes, &json);
        self.commands.push((Role::Client, describe(&cmd)));
        cmd
    }

    /// The client's processes: one, or with `shards = N` (connlab load)
    /// N, shard i on the i-th CPU of the client's; each with its name,
    /// command, JSON result and CPUs, recorded among the point's commands.
    fn client_processes(
        &mut self,
        ctx: &PointCtx,
        body_bytes: u64,
    ) -> Vec<(String, Command, PathBuf, Vec<usize>)> {
        let client = self.setup.client.clone();
        let cpus = ctx.exp.placement.client_cpus();
        let n = client
            .shards
            .filter(|_| client.kind == ProcessKind::ConnlabLoad)
            .unwrap_or(1);
        if n <= 1 {
            let cmd = self.client_command(ctx, body_bytes);
            return vec![("client".into(), cmd, ctx.logs.join(CLIENT_JSON), cpus)];
        }
        (1..=n)
            .map(|i| {
                let json = ctx.logs.join(format!("client-{i}.json"));
                let own: Vec<usize> = if cpus.is_empty() {
                    Vec::new()
                } else {
                    vec![cpus[(i as usize - 1) % cpus.len()]]
                };
                let cmd = client_shard_command(
                    ctx,
                    &client,
                    self.target,
                    body_bytes,
                    &json,
                    Some((i, n)),
                    &own,
                );
                self.commands.push((Role::Client, describe(&cmd)));
                (format!("client-{i}"), cmd, json, own)
            })
            .collect()
    }
}

/// Reads and merges the results of a sharded connlab load client.
fn merged_load(jsons: &[PathBuf]) -> anyhow::Result<(output::Outcome, Option<LoadResult>)> {
    let mut parts = Vec::new();
    for j in jsons {
        let (_, load) = parse_load(j)?;
        let load = load.ok_or_else(|| anyhow!("{}: not a connlab load result", j.display()))?;
        parts.push((j.display().to_string(), load));
    }
    let merged = connlab_loadgen::merge(&parts).context("merging the client's shards")?;
    let outcome = output::Outcome {
        requests: merged.requests.completed,
        requests_per_s: merged.achieved_rate_per_s,
        errors: merged.requests.errors.values().sum(),
    };
    Ok((outcome, Some(merged)))
}

/// Clears `ctx.logs`, starts the server and the gateway of point `p`, each
/// pinned to its CPU, and waits until one request gets a 200 through them.
fn start_roles(ctx: &PointCtx, p: &PeerParams) -> anyhow::Result<Roles> {
    let exp = ctx.exp;
    let contender = exp
        .contender_named(&p.contender)
        .ok_or_else(|| anyhow!("no contender {:?}", p.contender))?;
    let setup: PointSetup = exp
        .setup(contender)
        .ok_or_else(|| anyhow!("{}: a role has no process", p.id()))?;
    if ctx.logs.exists() {
        std::fs::remove_dir_all(&ctx.logs)
            .with_context(|| format!("clearing {}", ctx.logs.display()))?;
    }
    std::fs::create_dir_all(&ctx.logs)
        .with_context(|| format!("creating {}", ctx.logs.display()))?;
    let placement = &exp.placement;
    let mut commands = Vec::new();

    let server_addr = free_addr()?;
    let (cmd, stop_sig) = server_command(ctx, &setup.server, server_addr, p.body_bytes, p.workers)?;
    commands.push((Role::Server, describe(&cmd)));
    let server_cpus = placement.server_cpus_at(p.workers);
    let mut server = Proc::spawn(cmd, "server", &server_cpus, &ctx.logs, stop_sig)?;

    let mut gateway: Vec<Proc> = Vec::new();
    let mut target = server_addr;
    if let Some(g) = &setup.gateway {
        let addr = free_addr()?;
        wait_ready(&mut server, server_addr, p.body_bytes)?;
        for (name, cmd, listens) in gateway_commands(ctx, g, addr, server_addr)? {
            commands.push((Role::Gateway, describe(&cmd)));
            let cpus: Vec<usize> = placement.gateway_cpu.into_iter().collect();
            let mut proc = Proc::spawn(cmd, name, &cpus, &ctx.logs, libc::SIGTERM)?;
            if let Some(a) = listens {
                wait_listening(&mut proc, a)?;
            }
            gateway.push(proc);
        }
        target = addr;
    }
    match gateway.first_mut() {
        Some(g) => wait_ready(g, target, p.body_bytes)?,
        None => wait_ready(&mut server, target, p.body_bytes)?,
    }
    Ok(Roles {
        setup,
        server,
        gateway,
        target,
        commands,
    })
}

/// Measures point `p` until it passes its gates or `attempts` run out (see
/// [`crate::run::with_attempts`]); the last attempt is kept with its
/// record. `None` when interrupted.
fn measure_point(
    ctx: &PointCtx,
    p: &PeerParams,
    attempts: u32,
    sweep_machine: &Fingerprint,
    progress: &mut dyn Progress,
) -> anyhow::Result<Option<PeerPoint>> {
    let limits = &ctx.exp.validity;
    let measured = super::with_attempts(
        &p.id(),
        attempts,
        progress,
        || ctx.stop.load(Relaxed),
        || {
            let Some(m) = run_point(ctx, p)? else {
                return Ok(None);
            };
            let gates = validity::gates(limits, &evidence(&m, sweep_machine));
            Ok(Some((m.point, gates)))
        },
    )?;
    Ok(measured.map(|(mut point, v)| {
        point.checked.validity = Some(v);
        point
    }))
}

/// One attempt at a point: the point as measured (no validity yet) and,
/// with `connlab load` as the client, its whole result.
struct Measured {
    point: PeerPoint,
    load: Option<LoadResult>,
}

/// What the gates look at for one attempt: completion of the closed-loop
/// client (completed / (completed + errors)), the CPUs over the client's
/// run, the machine against the sweep's, and `connlab load`'s own checks
/// (wrk has none: those gates are left out).
fn evidence(m: &Measured, sweep_machine: &Fingerprint) -> Evidence {
    let p = &m.point;
    let e = Evidence {
        completion: Some((p.requests, (p.requests + p.errors) as f64)),
        cpu: p.checked.window_cpu.clone(),
        machine: p
            .checked
            .machine
            .clone()
            .map(|f| (f, sweep_machine.clone())),
        ..Evidence::default()
    };
    match &m.load {
        Some(load) => e.with_run_checks(load, None),
        None => e,
    }
}

/// The CPUs the roles of a point are pinned to, sorted; empty (every CPU)
/// when one of them is not pinned.
fn pinned_cpus(exp: &PeersExperiment, setup: &PointSetup, workers: Option<u32>) -> Vec<usize> {
    let pl = &exp.placement;
    let mut roles = vec![pl.server_cpus_at(workers), pl.client_cpus()];
    if setup.gateway.is_some() {
        roles.push(pl.gateway_cpu.into_iter().collect());
    }
    if roles.iter().any(Vec::is_empty) {
        return Vec::new();
    }
    let mut cpus: Vec<usize> = roles.into_iter().flatten().collect();
    cpus.sort_unstable();
    cpus.dedup();
    cpus
}

/// Why the client may have limited a point: it shares CPUs with the
/// server, or kept its CPUs busier than `busy_limit`; `None` otherwise.
fn client_limit(
    server_cpus: &[usize],
    client_cpus: &[usize],
    busy: Option<f64>,
    busy_limit: f64,
) -> Option<String> {
    let shared: Vec<String> = client_cpus
        .iter()
        .filter(|c| server_cpus.contains(c))
        .map(usize::to_string)
        .collect();
    let mut why = Vec::new();
    if server_cpus.is_empty() || client_cpus.is_empty() {
        why.push("the client and the server are not both pinned, so they may share CPUs".into());
    } else if !shared.is_empty() {
        why.push(format!(
            "the client shares CPU {} with the server",
            shared.join(", ")
        ));
    }
    if let Some(b) = busy.filter(|b| *b >= busy_limit) {
        why.push(format!(
            "the client kept its CPUs {:.0} % busy (limit {:.0} %)",
            b * 100.0,
            busy_limit * 100.0
        ));
    }
    (!why.is_empty()).then(|| why.join("; "))
}

/// connlab serve's connections per worker and imbalance, from its
/// `--stats` in `logs` (nothing for other servers or without the file).
fn worker_spread(logs: &Path) -> (Vec<u64>, Option<f64>) {
    let Ok(text) = std::fs::read_to_string(logs.join(commands::SERVER_STATS)) else {
        return (Vec::new(), None);
    };
    let Ok(v) = serde_json::from_str::<serde_json::Value>(&text) else {
        return (Vec::new(), None);
    };
    let per: Vec<u64> = v["per_worker"]
        .as_array()
        .map(|a| a.iter().filter_map(|w| w["connections"].as_u64()).collect())
        .unwrap_or_default();
    (per, v["imbalance"].as_f64())
}

/// The open-loop run at `rate` against the point's server (connlab load,
/// on the client's CPUs, the workload's connections and duration).
fn latency_run(
    ctx: &PointCtx,
    target: std::net::SocketAddr,
    body_bytes: u64,
    rate: f64,
) -> anyhow::Result<Option<(crate::LatencyRun, Vec<String>)>> {
    let json = ctx.logs.join("latency.json");
    let cpus = ctx.exp.placement.client_cpus();
    let cmd = commands::connlab_load(ctx, &format!("{rate}"), target, body_bytes, &json, &cpus);
    let line = describe(&cmd);
    let mut client = Proc::spawn(cmd, "latency-client", &cpus, &ctx.logs, libc::SIGINT)?;
    if client
        .wait_rusage(ctx.duration * 2 + super::CLIENT_SLACK, ctx.stop)?
        .is_none()
    {
        return Ok(None);
    }
    let (outcome, load) = parse_load(&json)?;
    let load = load.ok_or_else(|| anyhow!("{}: not a connlab load result", json.display()))?;
    let run = crate::LatencyRun {
        rate,
        achieved_rate_per_s: outcome.requests_per_s,
        p50_us: load.service_latency_us.p50,
        p99_us: load.service_latency_us.p99,
        send_lag_p99_us: load.send_lag_us.p99,
        errors: outcome.errors,
    };
    Ok(Some((run, line)))
}

/// Runs one point once; `None` when interrupted.
fn run_point(ctx: &PointCtx, p: &PeerParams) -> anyhow::Result<Option<Measured>> {
    let exp = ctx.exp;
    let placement = &exp.placement;
    let mut roles = start_roles(ctx, p)?;
    let setup = roles.setup.clone();
    let clients = roles.client_processes(ctx, p.body_bytes);
    let server_before = roles.server.tree_cpu_s();
    let gateway_cpu_s = |g: &[Proc]| -> Option<f64> {
        (!g.is_empty()).then(|| g.iter().map(Proc::tree_cpu_s).sum())
    };
    let gateway_before = gateway_cpu_s(&roles.gateway);
    let started = Instant::now();
    let server_cpus = placement.server_cpus_at(p.workers);
    let client_cpus = placement.client_cpus();
    let mut client_procs = Vec::new();
    let mut client_jsons = Vec::new();
    for (name, cmd, json, cpus) in clients {
        client_procs.push(Proc::spawn(cmd, &name, &cpus, &ctx.logs, libc::SIGINT)?);
        client_jsons.push(json);
    }
    // The window is the client's run: a snapshot of the CPUs and the
    // roles' process trees now, and another once it has ended.
    let mut watched: Vec<(&str, Vec<i32>)> = vec![("server", vec![roles.server.pid()])];
    if !roles.gateway.is_empty() {
        watched.push(("gateway", roles.gateway.iter().map(Proc::pid).collect()));
    }
    watched.push(("client", client_procs.iter().map(Proc::pid).collect()));
    // The sweep's own idle-priority spinners are no foreign work.
    let awake = super::window::awake_pids();
    if !awake.is_empty() {
        watched.push(("keep_awake", awake));
    }
    let before = WindowSnapshot::take(&watched);
    let mut client_cpu = 0.0;
    for client in &mut client_procs {
        let Some(cpu) = client.wait_rusage(ctx.duration + super::CLIENT_SLACK, ctx.stop)? else {
            return Ok(None);
        };
        client_cpu += cpu;
    }
    let wall_s = started.elapsed().as_secs_f64();
    let mut after = WindowSnapshot::take(&watched);
    // The client is reaped by now: its rusage is its CPU over the run.
    after.roles.insert("client".into(), client_cpu);
    let window = WindowCpu::between(&before, &after, &pinned_cpus(exp, &setup, p.workers));
    let server_cpu = roles.server.tree_cpu_s() - server_before;
    let gateway_cpu = gateway_cpu_s(&roles.gateway)
        .zip(gateway_before)
        .map(|(after, before)| after - before);
    // A scaling point's second client run, open loop at a fixed rate,
    // against the same server.
    let latency = match exp.scaling.as_ref().and_then(|s| s.latency_rate) {
        Some(rate) if !ctx.stop.load(Relaxed) => {
            match latency_run(ctx, roles.target, p.body_bytes, rate) {
                Ok(Some((run, line))) => {
                    roles.commands.push((Role::Client, line));
                    Some(run)
                }
                Ok(None) => None,
                Err(e) => {
                    roles.stop();
                    return Err(e.context("the latency run"));
                }
            }
        }
        _ => None,
    };
    roles.stop();
    let (worker_connections, imbalance) = worker_spread(&ctx.logs);
    let client_n = if client_cpus.is_empty() {
        std::thread::available_parallelism().map_or(1, |n| n.get())
    } else {
        client_cpus.len()
    };
    let client_busy = (wall_s > 0.0).then(|| client_cpu / (wall_s * client_n as f64));
    let client_limited = exp
        .scaling
        .as_ref()
        .and_then(|s| client_limit(&server_cpus, &client_cpus, client_busy, s.client_busy));
    let commands = std::mem::take(&mut roles.commands);
    // A Ctrl-C from the terminal reaches the client too, which may end
    // early and cleanly before the flag is seen: such a run is not kept.
    std::thread::sleep(Duration::from_millis(150));
    if ctx.stop.load(Relaxed) {
        return Ok(None);
    }
    if wall_s < ctx.duration.as_secs_f64() * 0.9 {
        bail!(
            "the client ended after {wall_s:.1} s, before its {:.0} s",
            ctx.duration.as_secs_f64()
        );
    }

    let (outcome, load) = match setup.client.kind {
        ProcessKind::Wrk => {
            let log = ctx.logs.join("client.log");
            let text = std::fs::read_to_string(&log)
                .with_context(|| format!("reading wrk's output {}", log.display()))?;
            (parse_wrk(&text)?, None)
        }
        _ if client_jsons.len() > 1 => merged_load(&client_jsons)?,
        _ => parse_load(&ctx.logs.join(CLIENT_JSON))?,
    };
    if outcome.requests == 0 {
        bail!(
            "the client completed no request (see {})",
            ctx.logs.display()
        );
    }
    let cpu = RoleCpu {
        server_s: Some(server_cpu),
        gateway_s: gateway_cpu,
        client_s: Some(client_cpu),
    };
    let measured = match exp.measure {
        Role::Server => Some(server_cpu),
        Role::Gateway => gateway_cpu,
        Role::Client => Some(client_cpu),
    }
    .filter(|c| *c > 0.0)
    .ok_or_else(|| anyhow!("no CPU time measured for the {}", exp.measure.name()))?;
    let point = PeerPoint {
        schema: PEER_POINT_SCHEMA.into(),
        id: p.id(),
        params: p.clone(),
        measure: exp.measure,
        requests: outcome.requests,
        requests_per_s: outcome.requests_per_s,
        errors: outcome.errors,
        cpu,
        measured_cpu_s: measured,
        requests_per_cpu_s: outcome.requests as f64 / measured,
        wall_s,
        commands,
        finished_unix_s: unix_now(),
        server_cpus,
        client_cpus,
        client_busy,
        client_limited,
        worker_connections,
        imbalance,
        latency,
        checked: validity::Checked {
            validity: None,
            machine: Some(Environment::capture().fingerprint()),
            window_cpu: Some(window),
        },
    };
    Ok(Some(Measured { point, load }))
}

/// A command line for the point file.
fn describe(cmd: &Command) -> Vec<String> {
    std::iter::once(cmd.get_program())
        .chain(cmd.get_args())
        .map(|a| a.to_string_lossy().into_owned())
        .collect()
}
