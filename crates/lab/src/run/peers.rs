//! The peers kind (`kind = "peers"`): connlab's processes against nginx, HAProxy and wrk on
//! loopback. For every point it starts the server, then the gateway if any,
//! each pinned to its CPU (`sched_setaffinity` before exec), checks that one
//! request gets a 200 through the whole chain, runs the client, and charges
//! the CPU each role used during the client's run: the server's and the
//! gateway's process trees from `/proc/PID/stat` (utime + stime, and the
//! children they reaped), the client from its own rusage when reaped. One
//! JSON file per point, written whole; every child is stopped on every exit
//! path (a guard per process, and the kernel's parent-death signal).

use super::child::die_with_parent;
use super::{stop_flag, unix_now, Progress, RunError, SweepOutcome, SweepRequest};
use crate::{
    PeerParams, PeerPoint, PeersDir, PeersExperiment, PeersInfo, PointSetup, Process, ProcessKind,
    Role, RoleCpu, PEERS_SWEEP_SCHEMA, PEER_POINT_SCHEMA,
};
use anyhow::{anyhow, bail, Context};
use connlab_os::{Environment, Shutdown};
use std::collections::{BTreeSet, HashMap};
use std::fs::File;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::time::{Duration, Instant};

/// How long a process may take to answer its first request.
const READY: Duration = Duration::from_secs(15);
/// How long a stopped process may take to exit before it is killed.
const GRACE: Duration = Duration::from_secs(5);
/// How long past its duration a client may run before it is killed.
const CLIENT_SLACK: Duration = Duration::from_secs(60);

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
    let peer_versions = check_programs(exp).map_err(|e| RunError::Input(format!("{e:#}")))?;
    let earlier = prepare_dir(out, &req.text, quick, req.fresh)?;
    let info = PeersInfo {
        schema: PEERS_SWEEP_SCHEMA.into(),
        experiment: exp.clone(),
        quick,
        environment: Environment::capture(),
        peer_versions,
        started_unix_s: earlier.unwrap_or_else(unix_now),
        points_total: plan.len(),
    };
    PeersDir::write_json(&PeersDir::info_path(out), &info)
        .with_context(|| format!("writing {}", PeersDir::info_path(out).display()))?;
    become_subreaper();
    let stop = stop_flag(shutdown);
    let exe = req.connlab.clone();
    let www = WwwDir::create(exp, quick)?;
    let done_before = plan
        .iter()
        .filter(|p| PeersDir::point_path(out, &p.id()).exists())
        .count();
    let mut outcome = super::announce(
        progress,
        &exp.name,
        "points",
        plan.len(),
        done_before,
        quick,
        out,
    );
    for p in &plan {
        let id = p.id();
        let path = PeersDir::point_path(out, &id);
        if path.exists() {
            continue;
        }
        if stop.load(Relaxed) {
            break;
        }
        progress.start(&id, None);
        let began = Instant::now();
        let ctx = PointCtx {
            exp,
            exe: &exe,
            tmp: &www.path,
            logs: out.join("logs").join(&id),
            duration,
            stop: &stop,
        };
        match run_point(&ctx, p) {
            Ok(Some(point)) => {
                let what = format!(
                    "{:.0} req/s, {:.0} requests per {} CPU s{}",
                    point.requests_per_s,
                    point.requests_per_cpu_s,
                    point.measure.name(),
                    if point.errors > 0 {
                        format!(", {} ERRORS", point.errors)
                    } else {
                        String::new()
                    }
                );
                progress.finish(&id, began.elapsed(), &what);
                if point.errors > 0 {
                    outcome.failed.push(id.clone());
                }
                PeersDir::write_json(&path, &point)
                    .with_context(|| format!("writing {}", path.display()))?;
                outcome.measured += 1;
            }
            Ok(None) => {
                progress.finish(&id, began.elapsed(), "interrupted (not kept)");
                break;
            }
            Err(e) => {
                progress.finish(&id, began.elapsed(), &format!("FAILED: {e:#}"));
                outcome.failed.push(id);
            }
        }
    }
    progress.end();
    outcome.interrupted = stop.load(Relaxed);
    Ok(outcome)
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

/// Creates the results directory; returns when an earlier sweep there started.
fn prepare_dir(out: &Path, text: &str, quick: bool, fresh: bool) -> Result<Option<f64>, RunError> {
    let points = out.join("points");
    if fresh {
        for sub in ["points", "logs"] {
            let dir = out.join(sub);
            if dir.exists() {
                std::fs::remove_dir_all(&dir)
                    .with_context(|| format!("removing {}", dir.display()))?;
            }
        }
    }
    let mut earlier = None;
    let info = PeersDir::info_path(out);
    if !fresh && info.exists() {
        let text = std::fs::read_to_string(&info)
            .with_context(|| format!("reading {}", info.display()))?;
        let old: serde_json::Value = serde_json::from_str(&text).unwrap_or_default();
        if old["quick"].as_bool() != Some(quick) {
            return Err(RunError::Input(format!(
                "{} holds a {} sweep: pass --fresh to start over, or another --out",
                out.display(),
                if quick { "full" } else { "--quick" }
            )));
        }
        earlier = old["started_unix_s"].as_f64();
    }
    std::fs::create_dir_all(&points).with_context(|| format!("creating {}", points.display()))?;
    connlab_os::files::write_atomic(out.join("experiment.toml"), text)
        .with_context(|| format!("writing {}/experiment.toml", out.display()))?;
    Ok(earlier)
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

/// Runs one point; `None` when interrupted.
fn run_point(ctx: &PointCtx, p: &PeerParams) -> anyhow::Result<Option<PeerPoint>> {
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
    let (cmd, stop_sig) = server_command(ctx, &setup.server, server_addr, p.body_bytes)?;
    commands.push((Role::Server, describe(&cmd)));
    let mut server = Proc::spawn(cmd, "server", placement.server_cpu, &ctx.logs, stop_sig)?;

    let mut gateway: Vec<Proc> = Vec::new();
    let mut target = server_addr;
    if let Some(g) = &setup.gateway {
        let addr = free_addr()?;
        wait_ready(&mut server, server_addr, p.body_bytes)?;
        for (name, cmd, listens) in gateway_commands(ctx, g, addr, server_addr)? {
            commands.push((Role::Gateway, describe(&cmd)));
            let mut proc = Proc::spawn(cmd, name, placement.gateway_cpu, &ctx.logs, libc::SIGTERM)?;
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

    let json = ctx.logs.join("client.json");
    let cmd = client_command(ctx, &setup.client, target, p.body_bytes, &json);
    commands.push((Role::Client, describe(&cmd)));
    let server_before = server.tree_cpu_s();
    let gateway_cpu_s = |g: &[Proc]| -> Option<f64> {
        (!g.is_empty()).then(|| g.iter().map(Proc::tree_cpu_s).sum())
    };
    let gateway_before = gateway_cpu_s(&gateway);
    let started = Instant::now();
    let mut client = Proc::spawn(cmd, "client", placement.client_cpu, &ctx.logs, libc::SIGINT)?;
    let Some(client_cpu) = client.wait_rusage(ctx.duration + CLIENT_SLACK, ctx.stop)? else {
        return Ok(None);
    };
    let wall_s = started.elapsed().as_secs_f64();
    let server_cpu = server.tree_cpu_s() - server_before;
    let gateway_cpu = gateway_cpu_s(&gateway)
        .zip(gateway_before)
        .map(|(after, before)| after - before);
    for g in gateway.iter_mut().rev() {
        g.stop();
    }
    server.stop();
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

    let outcome = match setup.client.kind {
        ProcessKind::Wrk => {
            let text = std::fs::read_to_string(ctx.logs.join("client.log"))
                .context("reading wrk's output")?;
            parse_wrk(&text)?
        }
        _ => parse_load(&json)?,
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
    Ok(Some(PeerPoint {
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
    }))
}

/// A command line for the point file.
fn describe(cmd: &Command) -> Vec<String> {
    std::iter::once(cmd.get_program())
        .chain(cmd.get_args())
        .map(|a| a.to_string_lossy().into_owned())
        .collect()
}

/// A loopback address with a port free right now.
fn free_addr() -> anyhow::Result<SocketAddr> {
    let l = TcpListener::bind("127.0.0.1:0").context("finding a free port")?;
    Ok(l.local_addr()?)
}

/// The server's command and the signal that stops it gracefully.
fn server_command(
    ctx: &PointCtx,
    p: &Process,
    addr: SocketAddr,
    body_bytes: u64,
) -> anyhow::Result<(Command, libc::c_int)> {
    match p.kind {
        ProcessKind::ConnlabServe => {
            let mut cmd = Command::new(ctx.exe);
            cmd.args(["serve", "--protocol", "http", "--engine"])
                .arg(p.engine.map_or("epoll", |e| e.name()))
                .arg("--listen")
                .arg(addr.to_string())
                .arg("--stats")
                .arg(ctx.logs.join("server-stats.json"));
            if p.edge_triggered {
                cmd.arg("--edge-triggered");
            }
            Ok((cmd, libc::SIGTERM))
        }
        ProcessKind::NginxReturn | ProcessKind::NginxStatic => {
            let conf = ctx.logs.join("nginx.conf");
            let text = nginx_conf(
                ctx,
                addr,
                (p.kind == ProcessKind::NginxReturn).then_some(body_bytes),
            );
            std::fs::write(&conf, text).with_context(|| format!("writing {}", conf.display()))?;
            let mut cmd = Command::new("nginx");
            cmd.arg("-c")
                .arg(&conf)
                .arg("-p")
                .arg(ctx.tmp)
                .arg("-e")
                .arg(ctx.logs.join("nginx-error.log"));
            Ok((cmd, libc::SIGQUIT))
        }
        other => bail!("{} is not a server", other.name()),
    }
}

/// One nginx worker, no access log, keep-alive without limit; with
/// `return_body` the `/bytes/N` location answers from the configuration.
fn nginx_conf(ctx: &PointCtx, addr: SocketAddr, return_body: Option<u64>) -> String {
    let tmp = ctx.tmp.display().to_string();
    let logs = ctx.logs.display();
    let affinity = ctx.exp.placement.server_cpu.map_or(String::new(), |cpu| {
        format!("worker_cpu_affinity {};\n", cpu_mask_bits(cpu))
    });
    let location = return_body.map_or(String::new(), |n| {
        format!(
            "    location = /bytes/{n} {{ return 200 \"{}\"; }}\n",
            "x".repeat(usize::try_from(n).unwrap_or(0))
        )
    });
    format!(
        "worker_processes 1;\ndaemon off;\npid {tmp}/nginx-{port}.pid;\nerror_log {logs}/nginx-error.log;\n\
         {affinity}events {{ worker_connections 4096; }}\n\
         http {{\n  access_log off;\n  keepalive_requests 1000000;\n  keepalive_timeout 300s;\n\
         \x20 sendfile on;\n  default_type application/octet-stream;\n\
         \x20 open_file_cache max=1000 inactive=600s;\n  open_file_cache_valid 3600s;\n\
         \x20 client_body_temp_path {tmp}/body;\n  proxy_temp_path {tmp}/proxy;\n\
         \x20 fastcgi_temp_path {tmp}/fastcgi;\n  uwsgi_temp_path {tmp}/uwsgi;\n  scgi_temp_path {tmp}/scgi;\n\
         \x20 server {{\n    listen {addr} backlog=4096;\n    root {tmp}/www;\n{location}  }}\n}}\n",
        port = addr.port(),
        tmp = tmp,
    )
}

/// nginx's `worker_cpu_affinity` mask for one CPU: `1` at position `cpu`
/// counted from the right.
fn cpu_mask_bits(cpu: usize) -> String {
    let mut s = "1".to_string();
    s.push_str(&"0".repeat(cpu));
    s
}

/// The gateway's commands (the single-IP relay has two processes), each
/// with the name of its log file and the address it must listen on before
/// the next starts.
fn gateway_commands(
    ctx: &PointCtx,
    p: &Process,
    listen: SocketAddr,
    backend: SocketAddr,
) -> anyhow::Result<Vec<(&'static str, Command, Option<SocketAddr>)>> {
    if p.kind == ProcessKind::SingleipRelay {
        let key = ctx.logs.join("relay.key");
        let mut bytes = [0u8; 32];
        File::open("/dev/urandom")
            .and_then(|mut f| f.read_exact(&mut bytes))
            .context("reading a key from /dev/urandom")?;
        std::fs::write(&key, bytes).with_context(|| format!("writing {}", key.display()))?;
        let nodes = free_addr()?;
        let mut io = Command::new(ctx.exe);
        io.args(["singleip", "io-server", "--listen"])
            .arg(listen.to_string())
            .arg("--nodes")
            .arg(nodes.to_string())
            .arg("--key")
            .arg(&key)
            .arg("--stats")
            .arg(ctx.logs.join("io-server-stats.json"));
        let mut node = Command::new(ctx.exe);
        node.args(["singleip", "app-node", "--io-server"])
            .arg(nodes.to_string())
            .arg("--key")
            .arg(&key)
            .arg("--forward")
            .arg(backend.to_string())
            .arg("--port")
            .arg(listen.port().to_string())
            .arg("--stats")
            .arg(ctx.logs.join("app-node-stats.json"));
        return Ok(vec![("gateway", io, Some(nodes)), ("app-node", node, None)]);
    }
    gateway_command(ctx, p, listen, backend).map(|c| vec![("gateway", c, None)])
}

/// The command of a one-process gateway.
fn gateway_command(
    ctx: &PointCtx,
    p: &Process,
    listen: SocketAddr,
    backend: SocketAddr,
) -> anyhow::Result<Command> {
    match p.kind {
        ProcessKind::ConnlabGateway => {
            let mut cmd = Command::new(ctx.exe);
            cmd.args(["gateway", "--mode", "proxy", "--policy", "round-robin"])
                .arg("--listen")
                .arg(listen.to_string())
                .arg("--backend")
                .arg(backend.to_string())
                .arg("--stats")
                .arg(ctx.logs.join("gateway-stats.json"));
            if p.splice {
                cmd.arg("--splice");
            }
            Ok(cmd)
        }
        ProcessKind::Haproxy => {
            let cfg = ctx.logs.join("haproxy.cfg");
            let text = format!(
                "global\n  maxconn 9000\n  nbthread {}\ndefaults\n  mode tcp\n  timeout connect 5s\n\
                 \x20 timeout client 300s\n  timeout server 300s\nlisten gw\n  bind {listen}\n\
                 \x20 balance roundrobin\n  server s0 {backend}\n",
                p.thread_count()
            );
            std::fs::write(&cfg, text).with_context(|| format!("writing {}", cfg.display()))?;
            let mut cmd = Command::new("haproxy");
            cmd.arg("-db").arg("-f").arg(&cfg);
            Ok(cmd)
        }
        other => bail!("{} is not a gateway", other.name()),
    }
}

/// The client's command: closed loop for the experiment's duration.
fn client_command(
    ctx: &PointCtx,
    p: &Process,
    target: SocketAddr,
    body_bytes: u64,
    json: &Path,
) -> Command {
    let w = &ctx.exp.workload;
    match p.kind {
        ProcessKind::Wrk => {
            let mut cmd = Command::new("wrk");
            cmd.arg(format!("-t{}", p.thread_count()))
                .arg(format!("-c{}", w.connections))
                // wrk takes whole seconds.
                .arg(format!("-d{}s", ctx.duration.as_secs_f64().ceil().max(1.0)))
                .arg(format!("http://{target}/bytes/{body_bytes}"));
            cmd
        }
        _ => {
            let mut cmd = Command::new(ctx.exe);
            cmd.args([
                "load",
                // The sweep judges errors itself.
                "--max-error-ratio",
                "1",
                "--protocol",
                "http",
                "--rate",
                "max",
                "--depth",
                "1",
            ])
            .arg("--target")
            .arg(target.to_string())
            .arg("--path")
            .arg(format!("/bytes/{body_bytes}"))
            .arg("--response-size")
            .arg(body_bytes.to_string())
            .arg("-c")
            .arg(w.connections.to_string())
            .arg("-d")
            .arg(format!("{}ms", ctx.duration.as_millis()))
            .args(["--warmup", "0s"])
            .arg("--json")
            .arg(json);
            if let Some(cpu) = ctx.exp.placement.client_cpu {
                cmd.arg("--cpu").arg(cpu.to_string());
            }
            cmd
        }
    }
}

/// Sends one `GET /bytes/N` to `addr` until a 200 comes back, or fails once
/// `proc` has exited or [`READY`] has passed.
fn wait_ready(proc: &mut Proc, addr: SocketAddr, body_bytes: u64) -> anyhow::Result<()> {
    let deadline = Instant::now() + READY;
    let request =
        format!("GET /bytes/{body_bytes} HTTP/1.1\r\nHost: peers\r\nConnection: close\r\n\r\n");
    loop {
        if let Some(status) = proc.child.try_wait()? {
            proc.reaped = true;
            bail!(
                "the {} exited at start ({status}); see {}",
                proc.name,
                proc.log.display()
            );
        }
        let answer = (|| -> std::io::Result<String> {
            let mut s = TcpStream::connect_timeout(&addr, Duration::from_millis(500))?;
            s.set_read_timeout(Some(Duration::from_secs(2)))?;
            s.write_all(request.as_bytes())?;
            let mut head = [0u8; 12];
            s.read_exact(&mut head)?;
            Ok(String::from_utf8_lossy(&head).into_owned())
        })();
        match answer {
            Ok(head) if head.ends_with(" 200") => return Ok(()),
            Ok(head) if Instant::now() > deadline => {
                bail!("{addr} answered {head:?}, not 200, to GET /bytes/{body_bytes}")
            }
            Err(e) if Instant::now() > deadline => {
                bail!("the {} at {addr} is not serving: {e}", proc.name)
            }
            _ => std::thread::sleep(Duration::from_millis(50)),
        }
    }
}

/// Waits until `addr` accepts a TCP connection, or fails once `proc` has
/// exited or [`READY`] has passed.
fn wait_listening(proc: &mut Proc, addr: SocketAddr) -> anyhow::Result<()> {
    let deadline = Instant::now() + READY;
    loop {
        if let Some(status) = proc.child.try_wait()? {
            proc.reaped = true;
            bail!(
                "the {} exited at start ({status}); see {}",
                proc.name,
                proc.log.display()
            );
        }
        match TcpStream::connect_timeout(&addr, Duration::from_millis(500)) {
            Ok(_) => return Ok(()),
            Err(e) if Instant::now() > deadline => {
                bail!("the {} does not listen on {addr}: {e}", proc.name)
            }
            Err(_) => std::thread::sleep(Duration::from_millis(50)),
        }
    }
}

/// A child process and its descendants, stopped (then killed) on drop.
struct Proc {
    child: Child,
    name: &'static str,
    log: PathBuf,
    stop_signal: libc::c_int,
    reaped: bool,
}

impl Proc {
    /// Spawns `cmd` with its output in `logs/<name>.log`, pinned to `cpu`.
    fn spawn(
        mut cmd: Command,
        name: &'static str,
        cpu: Option<usize>,
        logs: &Path,
        stop_signal: libc::c_int,
    ) -> anyhow::Result<Proc> {
        let log = logs.join(format!("{name}.log"));
        let file = File::create(&log).with_context(|| format!("creating {}", log.display()))?;
        cmd.stdin(Stdio::null())
            .stdout(file.try_clone()?)
            .stderr(file);
        die_with_parent(&mut cmd);
        if let Some(cpu) = cpu {
            // SAFETY: sched_setaffinity on the calling (child) process between
            // fork and exec touches only a stack cpu_set_t.
            unsafe {
                cmd.pre_exec(move || {
                    let mut set: libc::cpu_set_t = std::mem::zeroed();
                    libc::CPU_SET(cpu, &mut set);
                    if libc::sched_setaffinity(0, size_of::<libc::cpu_set_t>(), &set) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    Ok(())
                });
            }
        }
        let program = cmd.get_program().to_string_lossy().into_owned();
        let child = cmd
            .spawn()
            .with_context(|| format!("starting the {name} ({program})"))?;
        Ok(Proc {
            child,
            name,
            log,
            stop_signal,
            reaped: false,
        })
    }

    /// CPU seconds of this process and every descendant alive now,
    /// including what each has reaped from its own children.
    fn tree_cpu_s(&self) -> f64 {
        let pid = self.child.id() as i32;
        tree(pid).iter().filter_map(|p| proc_cpu_s(*p)).sum()
    }

    /// Waits for the process to end by itself and returns its CPU seconds
    /// (rusage of it and its reaped children); kills it after `limit`;
    /// `None` (after killing it) when `stop` is raised.
    fn wait_rusage(&mut self, limit: Duration, stop: &AtomicBool) -> anyhow::Result<Option<f64>> {
        let deadline = Instant::now() + limit;
        let pid = self.child.id() as libc::pid_t;
        loop {
            let mut status = 0;
            // SAFETY: an all-zero rusage is valid.
            let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
            // SAFETY: our own unreaped child; status and usage are valid pointers.
            let r = unsafe { libc::wait4(pid, &mut status, libc::WNOHANG, &mut usage) };
            if r == pid {
                self.reaped = true;
                if !libc::WIFEXITED(status) || libc::WEXITSTATUS(status) != 0 {
                    bail!(
                        "the {} ended with status {status:#x}; see {}",
                        self.name,
                        self.log.display()
                    );
                }
                let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
                return Ok(Some(secs(usage.ru_utime) + secs(usage.ru_stime)));
            }
            if r < 0 {
                bail!(
                    "waiting for the {}: {}",
                    self.name,
                    std::io::Error::last_os_error()
                );
            }
            if stop.load(Relaxed) {
                self.stop();
                return Ok(None);
            }
            if Instant::now() > deadline {
                self.stop();
                bail!(
                    "the {} ran past {:.0} s and was stopped",
                    self.name,
                    limit.as_secs_f64()
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Sends the stop signal, waits [`GRACE`], then kills the process and
    /// any descendant still alive.
    fn stop(&mut self) {
        if self.reaped {
            return;
        }
        let pid = self.child.id() as i32;
        let family = tree(pid);
        // SAFETY: our own unreaped child, so its pid is not reused.
        unsafe { libc::kill(pid, self.stop_signal) };
        let deadline = Instant::now() + GRACE;
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        self.reaped = true;
        // Descendants that outlived their parent (an nginx worker whose master
        // was killed) were handed to this process, the subreaper
        // (`become_subreaper`), or to init: kill and reap those.
        let me = std::process::id() as i32;
        for p in family.into_iter().filter(|p| *p != pid) {
            let Some(parent) = proc_ppid(p) else { continue };
            if parent == me || parent == 1 || parent == pid {
                // SAFETY: kill(2) on a pid read from /proc just now.
                unsafe { libc::kill(p, libc::SIGKILL) };
            }
            if parent == me {
                // SAFETY: waitpid on our own (adopted) child; a null status is allowed.
                unsafe { libc::waitpid(p, std::ptr::null_mut(), 0) };
            }
        }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The fields of `/proc/PID/stat` after the command name.
fn stat_fields(pid: i32) -> Option<Vec<String>> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = text.rsplit_once(')')?.1;
    Some(rest.split_whitespace().map(str::to_string).collect())
}

fn proc_ppid(pid: i32) -> Option<i32> {
    stat_fields(pid)?.get(1)?.parse().ok()
}

/// utime + stime + cutime + cstime of one process, in seconds.
fn proc_cpu_s(pid: i32) -> Option<f64> {
    let f = stat_fields(pid)?;
    // SAFETY: sysconf has no preconditions.
    let tick = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    let ticks: f64 = (11..=14)
        .map(|i| f.get(i).and_then(|v| v.parse::<f64>().ok()))
        .sum::<Option<f64>>()?;
    Some(ticks / tick)
}

/// `pid` and every process descending from it now.
fn tree(pid: i32) -> Vec<i32> {
    let mut children: HashMap<i32, Vec<i32>> = HashMap::new();
    if let Ok(dir) = std::fs::read_dir("/proc") {
        for entry in dir.flatten() {
            if let Some(p) = entry
                .file_name()
                .to_str()
                .and_then(|s| s.parse::<i32>().ok())
            {
                if let Some(pp) = proc_ppid(p) {
                    children.entry(pp).or_default().push(p);
                }
            }
        }
    }
    let mut out = vec![pid];
    let mut i = 0;
    while i < out.len() {
        if let Some(c) = children.get(&out[i]) {
            out.extend(c);
        }
        i += 1;
    }
    out
}

/// What the client reports.
struct Outcome {
    requests: u64,
    requests_per_s: f64,
    errors: u64,
}

/// Reads wrk's summary: requests, Requests/sec, non-2xx and socket errors.
fn parse_wrk(text: &str) -> anyhow::Result<Outcome> {
    let mut requests = None;
    let mut rate = None;
    let mut errors = 0u64;
    for line in text.lines().map(str::trim) {
        if let Some((n, _)) = line.split_once(" requests in ") {
            requests = n.trim().parse::<u64>().ok();
        } else if let Some(r) = line.strip_prefix("Requests/sec:") {
            rate = r.trim().parse::<f64>().ok();
        } else if let Some(n) = line.strip_prefix("Non-2xx or 3xx responses:") {
            errors += n.trim().parse::<u64>().unwrap_or(0);
        } else if let Some(list) = line.strip_prefix("Socket errors:") {
            // "connect 0, read 0, write 0, timeout 0"
            errors += list
                .split(',')
                .filter_map(|part| part.split_whitespace().nth(1)?.parse::<u64>().ok())
                .sum::<u64>();
        }
    }
    match (requests, rate) {
        (Some(requests), Some(requests_per_s)) => Ok(Outcome {
            requests,
            requests_per_s,
            errors,
        }),
        _ => bail!("wrk's output has no summary: {:?}", text.lines().last()),
    }
}

/// Reads `connlab load --json`.
fn parse_load(path: &Path) -> anyhow::Result<Outcome> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let v: serde_json::Value =
        serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))?;
    let requests = v["requests"]["completed"]
        .as_u64()
        .ok_or_else(|| anyhow!("{}: no requests.completed", path.display()))?;
    let errors = v["requests"]["errors"].as_object().map_or(0, |m| {
        m.values().filter_map(serde_json::Value::as_u64).sum()
    });
    Ok(Outcome {
        requests,
        requests_per_s: v["achieved_rate_per_s"].as_f64().unwrap_or(0.0),
        errors,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_wrk_summaries() {
        let text = "Running 1s test @ http://127.0.0.1:1/bytes/128\n  1 threads and 10 connections\n\
                    \x20 95213 requests in 1.00s, 24.87MB read\n\
                    \x20 Socket errors: connect 0, read 2, write 0, timeout 1\n\
                    \x20 Non-2xx or 3xx responses: 4\nRequests/sec:  95102.31\nTransfer/sec:     24.84MB\n";
        let o = parse_wrk(text).unwrap();
        assert_eq!(o.requests, 95213);
        assert_eq!(o.errors, 7);
        assert!((o.requests_per_s - 95102.31).abs() < 1e-6);
        assert!(parse_wrk("nothing").is_err());
    }

    #[test]
    fn nginx_masks_count_from_the_right() {
        assert_eq!(cpu_mask_bits(0), "1");
        assert_eq!(cpu_mask_bits(1), "10");
    }
}
