//! `connlab sweep`: runs an experiment file point by point. Builds the
//! experiment's hosts as network namespaces (one server host, K client hosts
//! on a bridge), and for every point starts `connlab serve` in the server's
//! namespace and K `connlab load --shard i/K --start-at T` in the clients',
//! merges the shards, and writes one point file. Finished points are skipped
//! when the same sweep is run again, so an interrupted sweep resumes.

use crate::cmd::child::{signal, ServerChild};
use crate::cmd::load::raise_limit;
use crate::cmd::merge::merge_files;
use crate::Exit;
use anyhow::{anyhow, bail, Context};
use clap::Args;
use connlab_lab::{Experiment, PointParams, PointResult, SweepDir, SweepInfo, TopologyInfo};
use connlab_lab::{POINT_SCHEMA, SWEEP_SCHEMA};
use connlab_os::netns::{Topology, TopologySpec};
use connlab_os::{Environment, Shutdown};
use indicatif::{ProgressBar, ProgressStyle};
use std::fs::File;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Flags of `connlab sweep`.
#[derive(Args, Debug)]
#[command(after_help = "\
Every point runs the server in its own network namespace and one load shard per client
host in theirs (hosts on one bridge, addresses 198.18.0.0/24, links rate-limited as the
experiment says), all shards starting at one instant; the shards are merged exactly.
Needs root (network namespaces).

Results directory:
  DIR/experiment.toml     the experiment as run
  DIR/sweep.json          machine, topology, points in the plan
  DIR/points/<id>.json    one per finished point: parameters, merged load result, server stats
  DIR/logs/<id>/          server and shard output, shard results

Running the same command again resumes: finished points are kept, the rest run.
Ctrl-C stops after cleaning up; the point under way is redone on resume.

Examples:
  connlab sweep experiments/locality-table3.toml --quick --out results/t3
  connlab report results/t3 -o t3.html
  connlab sweep experiments/locality-table4.toml --dry-run")]
pub(crate) struct SweepArgs {
    /// The experiment file (TOML), e.g. experiments/locality-table3.toml.
    file: PathBuf,
    /// Results directory [default: results/NAME, or results/NAME-quick with --quick].
    #[arg(long, short = 'o', value_name = "DIR")]
    out: Option<PathBuf>,
    /// Run the experiment's reduced `[quick]` matrix with short points.
    #[arg(long)]
    quick: bool,
    /// Discard results already in the directory and start over.
    #[arg(long)]
    fresh: bool,
    /// List the points and the estimated time; run nothing.
    #[arg(long)]
    dry_run: bool,
}

/// Descriptors a process needs beyond its sockets.
const FD_MARGIN: u64 = 64;
/// How long a shard may wait for responses after its last send (`--drain-timeout`).
const DRAIN: Duration = Duration::from_secs(2);

/// Runs the sweep.
pub(crate) fn run(args: SweepArgs) -> Result<ExitCode, Exit> {
    let text = std::fs::read_to_string(&args.file)
        .with_context(|| format!("reading {}", args.file.display()))
        .map_err(Exit::usage)?;
    if connlab_lab::SingleIpExperiment::is_singleip(&text) {
        return crate::cmd::sweep_singleip::run(
            &args.file,
            &text,
            args.out,
            args.quick,
            args.fresh,
            args.dry_run,
        );
    }
    if connlab_lab::PeersExperiment::is_peers(&text) {
        let (out, quick, fresh, dry) = (args.out, args.quick, args.fresh, args.dry_run);
        return crate::cmd::sweep_peers::run(&args.file, &text, out, quick, fresh, dry);
    }
    if connlab_lab::LoadgenExperiment::is_loadgen(&text) {
        let (out, quick, fresh, dry) = (args.out, args.quick, args.fresh, args.dry_run);
        return crate::cmd::sweep_loadgen::run(&args.file, &text, out, quick, fresh, dry);
    }
    if connlab_lab::PipelineExperiment::is_pipeline(&text) {
        return crate::cmd::sweep_pipeline::run(
            &args.file,
            &text,
            args.out,
            args.quick,
            args.fresh,
            args.dry_run,
        );
    }
    let experiment = Experiment::from_file(&args.file).map_err(|e| Exit::usage(e.into()))?;
    let plan = experiment.plan(args.quick);
    let out = args.out.clone().unwrap_or_else(|| {
        let suffix = if args.quick { "-quick" } else { "" };
        PathBuf::from("results").join(format!("{}{suffix}", experiment.name))
    });
    // Children (nginx above all) resolve relative paths against their own
    // directories, so every path handed to them starts from an absolute one.
    let out = std::path::absolute(&out)
        .with_context(|| format!("resolving {}", out.display()))
        .map_err(Exit::usage)?;
    if args.dry_run {
        print_plan(&experiment, &plan, &out)?;
        return Ok(ExitCode::SUCCESS);
    }
    check_descriptors(&experiment, &plan)?;
    connlab_os::netns::require_root().map_err(|e| anyhow!(e))?;
    let earlier = prepare_dir(&out, &text, args.quick, args.fresh)?;
    raise_limit();
    let shutdown = Shutdown::on_termination_signals().context("installing signal handlers")?;
    let exe = std::env::current_exe().context("locating the connlab binary")?;

    let server_host = experiment.topology.server_host.clone();
    let clients = experiment.client_hosts();
    let backends = experiment.backend_hosts();
    let mut hosts: Vec<&str> = vec![server_host.as_str()];
    hosts.extend(clients.iter().map(String::as_str));
    hosts.extend(backends.iter().map(String::as_str));
    eprintln!(
        "connlab sweep: {} ({} points{}), building {} hosts{}",
        experiment.name,
        plan.len(),
        if args.quick { ", quick" } else { "" },
        hosts.len(),
        experiment
            .topology
            .link_rate
            .as_deref()
            .map_or(String::new(), |r| format!(" with {r} links"))
    );
    let topology =
        Topology::build(&TopologySpec::bridge(&hosts).with_link_rate(experiment.link_rate_bps()))
            .map_err(|e| anyhow!(e).context("building the network namespaces"))?;
    let server_ip = topology
        .host_addr(&server_host)
        .ok_or_else(|| anyhow!("the topology has no host {server_host:?}"))?;
    let www = match experiment.web {
        Some(_) => Some(
            crate::cmd::sweep_web::prepare(&experiment, &topology, &out)
                .map_err(|e| Exit::usage(e.context("preparing the web experiment")))?,
        ),
        None => None,
    };

    let info = SweepInfo {
        schema: SWEEP_SCHEMA.into(),
        name: experiment.name.clone(),
        title: experiment.title.clone(),
        reproduces: experiment.reproduces().map(str::to_string),
        quick: args.quick,
        started_unix_s: earlier.map_or_else(unix_now, |i| i.started_unix_s),
        points_total: plan.len(),
        connlab_version: env!("CARGO_PKG_VERSION").into(),
        environment: Environment::capture(),
        topology: TopologyInfo {
            server_host: server_host.clone(),
            server_addr: server_ip.to_string(),
            client_hosts: clients.clone(),
            link_rate: experiment.topology.link_rate.clone(),
            link_rate_bps: experiment.link_rate_bps(),
        },
    };
    SweepDir::write_info(&out, &info).map_err(|e| anyhow!(e))?;
    connlab_os::files::write_atomic(SweepDir::experiment_path(&out), &text)
        .with_context(|| format!("writing {}", SweepDir::experiment_path(&out).display()))?;

    let ctx = PointContext {
        www,
        exe,
        experiment: &experiment,
        topology: &topology,
        server_host: &server_host,
        clients: &clients,
        server_ip,
        out: &out,
        shutdown: &shutdown,
    };
    let todo: Vec<&PointParams> = plan.iter().filter(|p| !point_done(&out, p)).collect();
    let kept = plan.len() - todo.len();
    if kept > 0 {
        eprintln!(
            "connlab sweep: resuming {}: {kept} of {} points already done",
            out.display(),
            plan.len()
        );
    }
    let mut progress = SweepProgress::new(&experiment, &todo, plan.len(), kept);
    let (mut measured, mut failed) = (0usize, Vec::new());
    for point in &todo {
        if shutdown.requested() {
            break;
        }
        let id = point.id();
        progress.start(&id);
        let began = Instant::now();
        match ctx.run_point(point) {
            Ok(result) => {
                SweepDir::write_point(&out, &result).map_err(|e| anyhow!(e))?;
                progress.finish(point, began.elapsed(), &describe(&result));
                measured += 1;
            }
            Err(_) if shutdown.requested() => break,
            Err(e) => {
                let log = SweepDir::log_dir(&out, &id);
                let _ = connlab_os::files::write_atomic(log.join("error.txt"), format!("{e:#}\n"));
                progress.finish(point, began.elapsed(), &format!("FAILED: {e:#}"));
                failed.push(id);
            }
        }
    }
    progress.done();
    let teardown = topology.teardown();
    let done = kept + measured;
    eprintln!(
        "connlab sweep: {done} of {} points done ({measured} measured now, {kept} kept), {} failed; results in {}",
        plan.len(),
        failed.len(),
        out.display()
    );
    if let Err(e) = teardown {
        eprintln!("connlab sweep: warning: tearing the namespaces down: {e}");
    }
    for id in &failed {
        eprintln!(
            "  failed: {id} (see {})",
            SweepDir::log_dir(&out, id).display()
        );
    }
    if shutdown.requested() {
        eprintln!(
            "connlab sweep: interrupted; run the same command again to resume ({} points left)",
            plan.len() - done
        );
        return Ok(ExitCode::from(130));
    }
    eprintln!("next: connlab report {} -o report.html", out.display());
    Ok(if failed.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// What a point measures: `connlab serve`, or web backends behind the
/// point's gateway configuration.
enum UnderTest {
    Serve(ServerChild),
    Web(crate::cmd::sweep_web::WebSide),
}

/// Everything a point needs.
struct PointContext<'a> {
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
    /// Runs one point: server, shards, merge.
    fn run_point(&self, p: &PointParams) -> anyhow::Result<PointResult> {
        let exp = self.experiment;
        let id = p.id();
        let logs = SweepDir::log_dir(self.out, &id);
        if logs.exists() {
            std::fs::remove_dir_all(&logs)
                .with_context(|| format!("clearing {}", logs.display()))?;
        }
        std::fs::create_dir_all(&logs).with_context(|| format!("creating {}", logs.display()))?;
        let stats = logs.join("server-stats.json");

        // The server under test: `connlab serve`, or web backends behind
        // the point's gateway configuration.
        let mut under_test = match &self.www {
            None => {
                let mut cmd = self.in_host(self.server_host)?;
                cmd.args(["serve", "--engine", &p.engine, "--listen"])
                    .arg(format!("{}:0", self.server_ip))
                    .args(["--protocol", &exp.server.protocol, "--stats"])
                    .arg(&stats)
                    .stdin(Stdio::null())
                    .stdout(Stdio::piped())
                    .stderr(log_file(&logs.join("server.log"))?);
                if let Some(cpu) = &exp.server.cpu {
                    cmd.args(["--cpu", cpu]);
                }
                if exp.server.profile_poll {
                    cmd.arg("--profile-poll");
                }
                UnderTest::Serve(ServerChild::spawn(cmd).map_err(|e| anyhow!("{e:?}"))?)
            }
            Some(www) => UnderTest::Web(crate::cmd::sweep_web::start(
                exp,
                self.topology,
                &self.exe,
                www,
                &p.engine,
                &logs,
                log_file,
            )?),
        };
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
                .args(["-d", &format!("{}s", p.duration_s)])
                .args(["--warmup", &format!("{}s", p.warmup_s)])
                .args(["--drain-timeout", &format!("{}s", DRAIN.as_secs())])
                .args(["--protocol", &exp.server.protocol])
                .arg("--json")
                .arg(&file)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(log_file(&logs.join(format!("shard-{}.log", i + 1)))?);
            if let Some(cpu) = &exp.client.cpu {
                cmd.args(["--cpu", cpu]);
            }
            if let Some(arrival) = &exp.client.arrival {
                cmd.args(["--arrival", arrival]);
            }
            if let Some(prio) = exp.client.writer_priority {
                cmd.args(["--writer-priority", &prio.to_string()]);
            }
            if let Some(seed) = exp.client.seed {
                cmd.args(["--seed", &seed.to_string()]);
            }
            if let Some(policy) = &exp.client.active_policy {
                cmd.args(["--active-policy", policy]);
            }
            if let Some(depth) = exp.client.depth {
                cmd.args(["--depth", &depth.to_string()]);
            }
            if let Some(www) = &self.www {
                cmd.arg("--manifest").arg(www);
            }
            match cmd.spawn() {
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
            + Duration::from_secs_f64(p.warmup_s + p.duration_s)
            + DRAIN
            + Duration::from_secs(30 + p.connections / 1000);
        let sampler = match &under_test {
            UnderTest::Web(w) => Some(w.sampler(
                start_at + Duration::from_secs_f64(p.warmup_s),
                Duration::from_secs_f64(p.duration_s),
            )),
            UnderTest::Serve(_) => None,
        };
        let statuses = self.wait_shards(&mut shards, deadline);
        let window_cpu = sampler
            .map(|s| s.join().unwrap_or_default())
            .unwrap_or_default();
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
                    last_line(&log)
                )),
                None => warnings.push(format!(
                    "shard {} was killed after the point's deadline: {}",
                    i + 1,
                    last_line(&log)
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
        let load = merge_files(&present)?;
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
        })
    }

    /// A `connlab` command that runs in `host`'s namespace and dies with us.
    fn in_host(&self, host: &str) -> anyhow::Result<Command> {
        let mut cmd = self
            .topology
            .command(host, &self.exe)
            .map_err(|e| anyhow!(e))?;
        crate::cmd::child::die_with_parent(&mut cmd);
        Ok(cmd)
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
                        signal(child, libc::SIGINT);
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
        let _ = c.kill();
        let _ = c.wait();
    }
}

fn log_file(path: &Path) -> anyhow::Result<File> {
    File::create(path).with_context(|| format!("creating {}", path.display()))
}

/// The last non-empty line of a log, for error messages.
fn last_line(path: &Path) -> String {
    std::fs::read_to_string(path)
        .ok()
        .and_then(|t| {
            t.lines()
                .rev()
                .find(|l| !l.trim().is_empty())
                .map(str::to_string)
        })
        .unwrap_or_else(|| format!("(see {})", path.display()))
}

/// Seconds since the Unix epoch, now.
pub(crate) fn unix_now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// True when the point's file exists, reads, and has these parameters.
fn point_done(out: &Path, p: &PointParams) -> bool {
    SweepDir::read_point(&SweepDir::point_path(out, &p.id())).is_ok_and(|r| r.params == *p)
}

/// Creates the directory, or checks that it holds this same sweep (resume).
/// Returns the earlier `sweep.json` when resuming.
fn prepare_dir(
    out: &Path,
    text: &str,
    quick: bool,
    fresh: bool,
) -> Result<Option<SweepInfo>, Exit> {
    let info_path = SweepDir::info_path(out);
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
            return Err(Exit::usage(anyhow!(
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
        Exit::usage(anyhow!(
            "{}: {e}; use --fresh to start over",
            info_path.display()
        ))
    })?;
    let old_text = std::fs::read_to_string(SweepDir::experiment_path(out)).unwrap_or_default();
    if old_text != text || earlier.quick != quick {
        return Err(Exit::usage(anyhow!(
            "{} holds results of {} experiment file{}; use another --out, or --fresh to discard them",
            out.display(),
            if old_text != text { "a different" } else { "the same" },
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
fn check_descriptors(exp: &Experiment, plan: &[PointParams]) -> Result<(), Exit> {
    let hard = connlab_os::raise_nofile_limit()
        .map(|l| l.hard)
        .unwrap_or(u64::MAX);
    let Some(max) = plan.iter().map(|p| p.connections).max() else {
        return Ok(());
    };
    let threaded = exp.server.engines.iter().any(|e| e != "processes");
    if threaded && max + FD_MARGIN > hard {
        return Err(Exit::usage(anyhow!(
            "the plan has points with {max} connections, but one server process may hold {} descriptors here (open-files hard limit {hard}); lower matrix.connections to at most {}",
            hard,
            hard.saturating_sub(FD_MARGIN)
        )));
    }
    let per_shard = max.div_ceil(u64::from(exp.topology.client_hosts));
    if per_shard + FD_MARGIN > hard {
        return Err(Exit::usage(anyhow!(
            "{max} connections over {} client hosts is {per_shard} per shard, over the open-files hard limit {hard}; add client hosts",
            exp.topology.client_hosts
        )));
    }
    Ok(())
}

/// The estimated wall time of one point.
fn estimate(exp: &Experiment, p: &PointParams) -> Duration {
    exp.start_lead(p.connections)
        + Duration::from_secs_f64(p.warmup_s + p.duration_s)
        + Duration::from_secs(1)
}

/// Lists the plan on stdout; a closed pipe (`| head`) ends the listing quietly.
fn print_plan(exp: &Experiment, plan: &[PointParams], out: &Path) -> anyhow::Result<()> {
    use std::io::Write;
    let total: Duration = plan.iter().map(|p| estimate(exp, p)).sum();
    let mut stdout = std::io::stdout().lock();
    let written = writeln!(
        stdout,
        "{}: {} points, about {} (results in {})",
        exp.name,
        plan.len(),
        human(total),
        out.display()
    )
    .and_then(|()| {
        plan.iter()
            .try_for_each(|p| writeln!(stdout, "  {}", p.id()))
    })
    .and_then(|()| stdout.flush());
    match written {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
            Err(anyhow!(e).context("writing the plan"))
        }
        _ => Ok(()),
    }
}

fn describe(r: &PointResult) -> String {
    let s = &r.load.service_latency_us;
    let errors: u64 = r.load.requests.errors.values().sum();
    format!(
        "mean {:.0} us, median {:.0} us, {} requests{}",
        s.mean,
        s.p50,
        r.load.requests.measured_completed,
        if errors > 0 {
            format!(", {errors} errors")
        } else {
            String::new()
        }
    )
}

fn human(d: Duration) -> String {
    let s = d.as_secs();
    if s >= 3600 {
        format!("{}h{:02}m", s / 3600, (s % 3600) / 60)
    } else if s >= 60 {
        format!("{}m{:02}s", s / 60, s % 60)
    } else {
        format!("{s}s")
    }
}

/// Points done and the time left, on a bar (terminal) or a line per point.
struct SweepProgress {
    bar: Option<ProgressBar>,
    total: usize,
    done: usize,
    /// Estimated seconds of the points not yet run.
    left_estimate: f64,
    /// Measured / estimated time of the points run so far.
    spent: f64,
    estimated: f64,
    exp: Experiment,
}

impl SweepProgress {
    fn new(exp: &Experiment, todo: &[&PointParams], total: usize, kept: usize) -> Self {
        let left_estimate = todo.iter().map(|p| estimate(exp, p).as_secs_f64()).sum();
        let bar = std::io::stderr().is_terminal().then(|| {
            let bar = ProgressBar::new(total as u64);
            bar.set_style(
                ProgressStyle::with_template("{bar:30} {pos}/{len} points  {msg}")
                    .unwrap_or_else(|_| ProgressStyle::default_bar()),
            );
            bar.set_position(kept as u64);
            bar
        });
        SweepProgress {
            bar,
            total,
            done: kept,
            left_estimate,
            spent: 0.0,
            estimated: 0.0,
            exp: exp.clone(),
        }
    }

    fn eta(&self) -> String {
        let scale = if self.estimated > 0.0 {
            self.spent / self.estimated
        } else {
            1.0
        };
        human(Duration::from_secs_f64(self.left_estimate * scale))
    }

    fn start(&mut self, id: &str) {
        let msg = format!("{id}  (eta {})", self.eta());
        match &self.bar {
            Some(bar) => bar.set_message(msg),
            None => eprintln!("[{}/{}] {msg}", self.done + 1, self.total),
        }
    }

    fn finish(&mut self, p: &PointParams, took: Duration, what: &str) {
        let est = estimate(&self.exp, p).as_secs_f64();
        self.left_estimate = (self.left_estimate - est).max(0.0);
        self.spent += took.as_secs_f64();
        self.estimated += est;
        self.done += 1;
        let line = format!("  {}: {what} ({:.1} s)", p.id(), took.as_secs_f64());
        match &self.bar {
            Some(bar) => {
                bar.println(line);
                bar.inc(1);
            }
            None => eprintln!("{line}"),
        }
    }

    fn done(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}
