//! The loadgen kind (`kind = "loadgen"`): for every point it starts
//! `connlab serve` on loopback (pinned with `--cpu`), runs one `connlab
//! load` against it, or N shards (`--shard i/N`, one `--start-at`) whose
//! results merge exactly, stops the server and reads its `--stats`, and
//! writes one JSON file per point, whole. Every child is stopped on every
//! exit path (a guard per process, and the kernel's parent-death signal).
//!
//! Every client starts at one `--start-at` instant, so the measured window
//! is known beforehand: [`super::window`] samples the CPUs of the server
//! and the client over it (roles `server` and `clients`). Every point is
//! judged by its gates ([`crate::validity`]): completion, the writers'
//! schedule (open loop), steal, foreign work, the machine against the
//! sweep's, and the load generator's own arrival and stationarity checks;
//! a point failing a gate other than `machine` is measured again, up to
//! the attempts.

use super::child::{log_reason, ServerChild};
use super::window::{cpus_of, Roles};
use super::{unix_now, Progress, RunError, SweepOutcome, SweepRequest};
use crate::validity::{self, Evidence, Fingerprint, ScheduleEvidence};
use crate::{
    ClientFigures, LoadgenDir, LoadgenExperiment, LoadgenInfo, LoadgenParams, LoadgenPoint, Rate,
    ServerFigures, LOADGEN_POINT_SCHEMA, LOADGEN_SWEEP_SCHEMA,
};
use anyhow::{bail, Context};
use connlab_loadgen::LoadResult;
use connlab_os::child::Child;
use connlab_os::{Environment, Shutdown};
use std::fs::File;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant, UNIX_EPOCH};

/// How long a stopped server may take to exit before it is killed (the
/// processes engine reaps a child per connection).
const GRACE: Duration = Duration::from_secs(30);
/// `--drain-timeout` of every client.
const DRAIN: Duration = Duration::from_secs(2);

/// Runs a loadgen experiment.
pub(super) fn sweep(
    exp: &LoadgenExperiment,
    req: &SweepRequest,
    progress: &mut dyn Progress,
    shutdown: &Shutdown,
) -> Result<SweepOutcome, RunError> {
    let plan = exp.plan(req.quick);
    let dir = LoadgenDir::layout(&req.out);
    let session = super::begin_session(&dir, req, &[], progress)?;
    let info = LoadgenInfo {
        schema: LOADGEN_SWEEP_SCHEMA.into(),
        experiment: exp.clone(),
        quick: req.quick,
        environment: session.environment,
        started_unix_s: session.started_unix_s,
        points_total: plan.len(),
    };
    dir.write_info(&info)
        .map_err(|e| RunError::Failed(e.to_string()))?;
    let mut outcome = super::announce_points(progress, &exp.name, &plan, pending(&dir), req);
    let machine = info.environment.fingerprint();
    let result = run_points(exp, req, &plan, &machine, progress, shutdown, &mut outcome);
    progress.end();
    result?;
    outcome.interrupted = shutdown.requested();
    Ok(outcome)
}

/// Runs the points not done before, in plan order, until the plan ends or a
/// stop is requested.
fn run_points(
    exp: &LoadgenExperiment,
    req: &SweepRequest,
    plan: &[LoadgenParams],
    machine: &Fingerprint,
    progress: &mut dyn Progress,
    shutdown: &Shutdown,
    outcome: &mut SweepOutcome,
) -> Result<(), RunError> {
    let dir = LoadgenDir::layout(&req.out);
    let attempts = super::attempts(req, &exp.validity);
    super::each_point(
        plan,
        progress,
        outcome,
        pending(&dir),
        || shutdown.requested(),
        |p, id, progress| {
            let ctx = PointCtx {
                exp,
                exe: &req.connlab,
                logs: dir.log_dir(id),
                quick: req.quick,
                shutdown,
            };
            measure_point(&ctx, p, attempts, machine, progress).inspect_err(|e| {
                let _ =
                    connlab_os::files::write_atomic(ctx.logs.join("error.txt"), format!("{e:#}\n"));
            })
        },
        |id, point| {
            dir.write_point(id, &point, true)
                .map_err(|e| RunError::Failed(e.to_string()))?;
            Ok(super::Kept {
                summary: describe(&point),
                failed: false,
            })
        },
    )
}

/// How long a point's set-up may take: a second per 2,000 connections,
/// with two seconds for the start.
fn setup_allowance(connections: u64) -> Duration {
    Duration::from_secs(2) + Duration::from_secs_f64(connections as f64 / 2000.0)
}

/// The estimated wall time of one point of a loadgen sweep (set-up,
/// warm-up, the measured duration and half the drain).
pub fn estimate(exp: &LoadgenExperiment, p: &LoadgenParams, quick: bool) -> Duration {
    setup_allowance(p.connections) + exp.workload.warmup.0 + exp.duration(quick) + DRAIN / 2
}

/// The id of a point still to measure (see [`super::pending`]).
fn pending(dir: &crate::ResultsDir) -> impl Fn(&LoadgenParams) -> Option<String> + '_ {
    super::pending(dir, LoadgenParams::id, |r: &LoadgenPoint, p| r.params == *p)
}

/// What every point of a sweep shares.
struct PointCtx<'a> {
    exp: &'a LoadgenExperiment,
    exe: &'a Path,
    logs: PathBuf,
    quick: bool,
    shutdown: &'a Shutdown,
}

/// Measures point `p` until it passes its gates or `attempts` run out (see
/// [`super::with_attempts`]); the last attempt is kept with its record.
/// `None` when interrupted.
fn measure_point(
    ctx: &PointCtx,
    p: &LoadgenParams,
    attempts: u32,
    machine: &Fingerprint,
    progress: &mut dyn Progress,
) -> anyhow::Result<Option<LoadgenPoint>> {
    let measured = super::with_attempts(
        &p.id(),
        attempts,
        progress,
        || ctx.shutdown.requested(),
        || {
            let Some((point, load)) = run_point(ctx, p)? else {
                return Ok(None);
            };
            let gates = validity::gates(&ctx.exp.validity, &evidence(&point, &load, machine));
            Ok(Some((point, gates)))
        },
    )?;
    Ok(measured.map(|(mut point, v)| {
        point.checked.validity = Some(v);
        point
    }))
}

/// What the gates look at for one attempt: completed against scheduled
/// requests (open loop: the rate over the measured seconds; closed loop:
/// completed and errors), each writer's schedule (open loop: a shard's
/// writer sends rate / shards), the window's CPUs, the machine against the
/// sweep's, and the load generator's own checks.
fn evidence(point: &LoadgenPoint, load: &LoadResult, machine: &Fingerprint) -> Evidence {
    let q = &load.requests;
    let (scheduled, schedule) = match point.params.rate {
        Rate::Max => ((q.completed + q.measured_errors()) as f64, None),
        Rate::PerSecond(rate) => (
            rate as f64 * load.config.duration_s,
            Some(ScheduleEvidence {
                send_lag_p99_us: load.send_lag_us.p99,
                writer_rate_per_s: rate as f64 / f64::from(point.params.shards.max(1)),
            }),
        ),
    };
    Evidence {
        completion: Some((q.completed, scheduled)),
        schedule,
        cpu: point.checked.window_cpu.clone(),
        machine: point.checked.machine.clone().map(|m| (m, machine.clone())),
        ..Evidence::default()
    }
    .with_run_checks(load, None)
}

/// Runs one point once: the point (no validity yet) and the client's
/// (merged) result; `None` when interrupted.
fn run_point(
    ctx: &PointCtx,
    p: &LoadgenParams,
) -> anyhow::Result<Option<(LoadgenPoint, LoadResult)>> {
    let exp = ctx.exp;
    if ctx.logs.exists() {
        std::fs::remove_dir_all(&ctx.logs)
            .with_context(|| format!("clearing {}", ctx.logs.display()))?;
    }
    std::fs::create_dir_all(&ctx.logs)
        .with_context(|| format!("creating {}", ctx.logs.display()))?;
    let stats = ctx.logs.join("server-stats.json");
    let mut cmd = Command::new(ctx.exe);
    cmd.args(["serve", "--engine", p.engine.name()])
        .args(["--listen", "127.0.0.1:0"])
        .args(["--protocol", exp.server.protocol.name()])
        .arg("--stats")
        .arg(&stats);
    if let Some(cpu) = exp.placement.server_cpu {
        cmd.args(["--cpu", &cpu.to_string()]);
    }
    let mut commands = vec![describe_cmd(&cmd)];
    let mut server = spawn_server(cmd, &ctx.logs.join("server.log"))?;
    let addr = server.addr;

    let duration = exp.duration(ctx.quick);
    let w = &exp.workload;
    let limit =
        setup_allowance(p.connections) + w.warmup.0 + duration + DRAIN + super::CLIENT_SLACK;
    let k = p.shards;
    // One start for every client (one process too), so the measured window
    // is known before it opens.
    let start_at = unix_now() + setup_allowance(p.connections).as_secs_f64();
    let mut clients = Vec::new();
    let mut files = Vec::new();
    let started = Instant::now();
    for i in 1..=k {
        let (json, log) = if k == 1 {
            (ctx.logs.join("client.json"), ctx.logs.join("client.log"))
        } else {
            (
                ctx.logs.join(format!("shard-{i}.json")),
                ctx.logs.join(format!("shard-{i}.log")),
            )
        };
        let shard = (k > 1).then_some((i, k));
        let cmd = client_command(ctx.exe, exp, p, addr, duration, start_at, shard, &json);
        commands.push(describe_cmd(&cmd));
        clients.push(Client::spawn(cmd, &log)?);
        files.push(json);
    }
    let roles = Roles::default()
        .with("server", [server.pid()])
        .with("clients", clients.iter().map(|c| c.child.pid()));
    let server_cpu = exp.placement.server_cpu.map(|c| c.to_string());
    let watched = cpus_of([
        server_cpu.as_deref(),
        exp.placement.client_cpu_list().as_deref(),
    ]);
    let window_from = UNIX_EPOCH + Duration::from_secs_f64(start_at) + w.warmup.0;
    let probe = super::window::sample(roles, watched, window_from, duration, ctx.shutdown);
    for c in &mut clients {
        if !c.wait(started + limit, ctx.shutdown)? {
            return Ok(None);
        }
    }
    let wall_s = started.elapsed().as_secs_f64();
    let window_cpu = probe.join().ok().flatten();
    server.child().stop(libc::SIGTERM, GRACE);
    let server_figures = read_stats(&stats);
    if ctx.shutdown.requested() {
        return Ok(None);
    }
    let mut parts = Vec::new();
    for (path, c) in files.iter().zip(&clients) {
        let result = read_result(path).with_context(|| {
            format!(
                "the client {} left no result ({})",
                c.log.display(),
                log_reason(&c.log)
            )
        })?;
        if result.interrupted {
            return Ok(None);
        }
        parts.push((path.display().to_string(), result));
    }
    let result = if parts.len() == 1 {
        parts.remove(0).1
    } else {
        let merged = connlab_loadgen::merge(&parts).context("merging the shards")?;
        let path = ctx.logs.join("client.json");
        let text = serde_json::to_string_pretty(&merged).context("encoding the merged result")?;
        connlab_os::files::write_atomic(&path, text + "\n")
            .with_context(|| format!("writing {}", path.display()))?;
        merged
    };
    if result.connections.established == 0 {
        bail!("no connection was established (see {})", ctx.logs.display());
    }
    let point = LoadgenPoint {
        schema: LOADGEN_POINT_SCHEMA.into(),
        id: p.id(),
        params: p.clone(),
        client: ClientFigures::from_result(&result),
        server: server_figures,
        commands,
        wall_s,
        finished_unix_s: unix_now(),
        checked: validity::Checked {
            validity: None,
            machine: Some(Environment::capture().fingerprint()),
            window_cpu,
        },
    };
    Ok(Some((point, result)))
}

/// The `connlab load` of point `p` against `addr`, starting at `start_at`
/// (Unix seconds), as shard `(i, k)` when there are several, writing its
/// result to `json`.
#[allow(clippy::too_many_arguments)]
fn client_command(
    exe: &Path,
    exp: &LoadgenExperiment,
    p: &LoadgenParams,
    addr: SocketAddr,
    duration: Duration,
    start_at: f64,
    shard: Option<(u32, u32)>,
    json: &Path,
) -> Command {
    let w = &exp.workload;
    let mut cmd = Command::new(exe);
    // The sweep judges errors itself (a point past saturation is data).
    cmd.arg("load")
        .args(["--max-error-ratio", "1"])
        .args(["--target", &addr.to_string()])
        .args(["--protocol", exp.server.protocol.name()])
        .args(["-c", &p.connections.to_string()])
        .args(["--active-ratio", &p.active_ratio.label])
        .args(["--rate", &p.rate.label()])
        .args(["--request-size", &w.request_size.0.to_string()])
        .args(["--response-size", &w.response_size.0.to_string()])
        .args(["-d", &format!("{}ms", duration.as_millis())])
        .args(["--warmup", &format!("{}ms", w.warmup.0.as_millis())])
        .args(["--drain-timeout", &format!("{}ms", DRAIN.as_millis())])
        .args(["--io", p.io.name()]);
    if let (Rate::Max, Some(depth)) = (p.rate, w.depth) {
        cmd.args(["--depth", &depth.to_string()]);
    }
    if let Some(src) = &p.source_addrs {
        cmd.args(["--source-addrs", src]);
    }
    if let Some(cpus) = exp.placement.client_cpu_list() {
        cmd.args(["--cpu", &cpus]);
    }
    if let Some((i, k)) = shard {
        cmd.args(["--shard", &format!("{i}/{k}")]);
    }
    cmd.args(["--start-at", &format!("{start_at:.3}")]);
    cmd.arg("--json").arg(json);
    cmd
}

fn read_result(path: &Path) -> anyhow::Result<LoadResult> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    serde_json::from_str(&text)
        .with_context(|| format!("{}: not a connlab load result", path.display()))
}

/// CPU seconds and peak RSS from the server's `--stats`.
fn read_stats(path: &Path) -> ServerFigures {
    let v: Option<serde_json::Value> = std::fs::read_to_string(path)
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok());
    let Some(v) = v else {
        return ServerFigures::default();
    };
    ServerFigures {
        cpu_s: v["cpu_user_s"]
            .as_f64()
            .zip(v["cpu_sys_s"].as_f64())
            .map(|(u, s)| u + s),
        max_rss_kib: v["max_rss_kib"].as_u64(),
    }
}

fn describe(p: &LoadgenPoint) -> String {
    let c = &p.client;
    format!(
        "{} established, {:.0} req/s, service median {:.0} us, send lag p99 {:.0} us{}{}",
        c.established,
        c.achieved_rate_per_s,
        c.service_latency_us.p50,
        c.send_lag_us.p99,
        if c.errors > 0 {
            format!(", {} errors", c.errors)
        } else {
            String::new()
        },
        super::validity_words(p.checked.validity.as_ref())
    )
}

fn describe_cmd(cmd: &Command) -> Vec<String> {
    std::iter::once(cmd.get_program())
        .chain(cmd.get_args())
        .map(|a| a.to_string_lossy().into_owned())
        .collect()
}

/// Spawns a `connlab serve` with stderr in `log` and reads its banner.
fn spawn_server(mut cmd: Command, log: &Path) -> anyhow::Result<ServerChild> {
    let file = File::create(log).with_context(|| format!("creating {}", log.display()))?;
    cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(file);
    ServerChild::spawn(cmd).map_err(|e| anyhow::anyhow!("{e}; {}", log_reason(log)))
}

/// A client (`connlab load`) with its output in a log.
struct Client {
    child: Child,
    log: PathBuf,
}

impl Client {
    /// Spawns `cmd` with stdout and stderr in `log`.
    fn spawn(mut cmd: Command, log: &Path) -> anyhow::Result<Client> {
        let file = File::create(log).with_context(|| format!("creating {}", log.display()))?;
        cmd.stdin(Stdio::null())
            .stdout(file.try_clone()?)
            .stderr(file);
        let child = Child::spawn(&mut cmd).context("starting connlab")?;
        Ok(Client {
            child,
            log: log.to_path_buf(),
        })
    }

    /// Waits for the process to end by itself; kills it at `deadline`
    /// (an error) and returns false when a stop was requested.
    fn wait(&mut self, deadline: Instant, shutdown: &Shutdown) -> anyhow::Result<bool> {
        loop {
            if let Some(status) = self.child.try_wait()? {
                // `connlab load` exits 1 when the server failed under it;
                // its result says how, so only a missing result is an error.
                if status.code().is_none() && !shutdown.requested() {
                    bail!("{} ended by {status}", self.log.display());
                }
                return Ok(true);
            }
            if shutdown.requested() {
                self.child.stop(libc::SIGINT, GRACE);
                return Ok(false);
            }
            if Instant::now() > deadline {
                self.child.kill();
                bail!(
                    "the client ran past its deadline and was killed; see {}",
                    self.log.display()
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn setup_allowance_grows_with_connections() {
        assert_eq!(setup_allowance(0), Duration::from_secs(2));
        assert_eq!(setup_allowance(20000), Duration::from_secs(12));
    }

    #[test]
    fn the_client_gets_the_points_io_path() {
        let text = "kind = \"loadgen\"\nname = \"t\"\ntitle = \"t\"\ntables = [\"pacing\"]\n\
                    [server]\nengines = [\"epoll\"]\n[workload]\nconnections = [10]\n\
                    active_ratios = [1]\nrates = [100]\nduration = \"1s\"\n\
                    io = [\"epoll\", \"uring\"]\n";
        let exp = LoadgenExperiment::from_toml(text, "t.toml").unwrap();
        let plan = exp.plan(false);
        let addr = SocketAddr::from(([127, 0, 0, 1], 9));
        let args = |p: &LoadgenParams| {
            let cmd = client_command(
                Path::new("connlab"),
                &exp,
                p,
                addr,
                Duration::from_secs(1),
                1.0,
                None,
                Path::new("c.json"),
            );
            describe_cmd(&cmd).join(" ")
        };
        assert!(
            args(&plan[0]).contains(" --io epoll "),
            "{}",
            args(&plan[0])
        );
        assert!(
            args(&plan[1]).contains(" --io uring "),
            "{}",
            args(&plan[1])
        );
        // One process starts at the given instant too: its window is known.
        assert!(args(&plan[0]).contains(" --start-at 1.000 "));
        assert!(!args(&plan[0]).contains("--shard"));
    }

    #[test]
    fn an_open_loop_point_is_judged_on_its_schedule_per_writer() {
        let text = "kind = \"loadgen\"\nname = \"t\"\ntitle = \"t\"\ntables = [\"pacing\"]\n\
                    [server]\nengines = [\"epoll\"]\n[workload]\nconnections = [10]\n\
                    active_ratios = [1]\nrates = [2000]\nduration = \"1s\"\nshards = [2]\n";
        let exp = LoadgenExperiment::from_toml(text, "t.toml").unwrap();
        let p = exp.plan(false).remove(0);
        let mut load: LoadResult =
            serde_json::from_str(include_str!("../../../report/tests/fixtures/load.json")).unwrap();
        load.config.duration_s = 1.0;
        load.requests.completed = 1000;
        load.requests.errors.clear();
        load.send_lag_us.p99 = 200.0;
        let point = LoadgenPoint {
            schema: LOADGEN_POINT_SCHEMA.into(),
            id: p.id(),
            params: p,
            client: ClientFigures::from_result(&load),
            server: ServerFigures::default(),
            commands: Vec::new(),
            wall_s: 1.0,
            finished_unix_s: 0.0,
            checked: validity::Checked {
                validity: None,
                machine: None,
                window_cpu: None,
            },
        };
        let e = evidence(&point, &load, &Environment::capture().fingerprint());
        // 1,000 of the 2,000 scheduled; each of two writers sends 1,000 a second.
        assert_eq!(e.completion, Some((1000, 2000.0)));
        let s = e.schedule.unwrap();
        assert_eq!(s.writer_rate_per_s, 1000.0);
        let g = validity::gates(&exp.validity, &e);
        let schedule = g.iter().find(|g| g.name == "schedule").unwrap();
        // A tenth of the 1,000 us interval: 200 us of lag fails.
        assert!(!schedule.passed, "{schedule:?}");
        assert!(g.iter().all(|g| g.name != "machine"), "no machine recorded");
    }
}
