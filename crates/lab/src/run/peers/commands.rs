//! The command lines and configuration files of each role: connlab serve,
//! nginx, the gateways (connlab, HAProxy) and the clients (wrk, connlab load).

use super::PointCtx;
use crate::{ClientIo, Process, ProcessKind};
use anyhow::{bail, Context};
use std::fs::File;
use std::io::Read;
use std::net::{SocketAddr, TcpListener};
use std::path::Path;
use std::process::Command;

/// A loopback address with a port free right now.
pub(super) fn free_addr() -> anyhow::Result<SocketAddr> {
    let l = TcpListener::bind("127.0.0.1:0").context("finding a free port")?;
    Ok(l.local_addr()?)
}

/// The server's command and the signal that stops it gracefully.
pub(super) fn server_command(
    ctx: &PointCtx,
    p: &Process,
    addr: SocketAddr,
    body_bytes: u64,
    workers: Option<u32>,
) -> anyhow::Result<(Command, libc::c_int)> {
    let cpus = ctx.exp.placement.server_cpus_at(workers);
    match p.kind {
        ProcessKind::ConnlabServe => {
            let mut cmd = Command::new(ctx.exe);
            cmd.args(["serve", "--protocol", "http", "--engine"])
                .arg(p.engine.map_or("epoll", |e| e.name()))
                .arg("--listen")
                .arg(addr.to_string())
                .arg("--stats")
                .arg(ctx.logs.join(SERVER_STATS));
            if p.edge_triggered {
                cmd.arg("--edge-triggered");
            }
            // Event engines run N loops, each pinned to its CPU; processes
            // and threads spread over the same CPUs (the process's
            // affinity), so a comparison stays CPU for CPU.
            if let Some(n) = workers {
                if p.engine.is_some_and(|e| e.has_workers()) {
                    cmd.arg("--workers").arg(n.to_string());
                    if !cpus.is_empty() {
                        cmd.arg("--cpu").arg(cpu_list(&cpus));
                    }
                }
            }
            cmd.args(&p.args);
            Ok((cmd, libc::SIGTERM))
        }
        ProcessKind::NginxReturn | ProcessKind::NginxStatic => {
            let conf = ctx.logs.join("nginx.conf");
            let text = nginx_conf(
                ctx,
                addr,
                (p.kind == ProcessKind::NginxReturn).then_some(body_bytes),
                workers.unwrap_or(1),
                &cpus,
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

/// The file name of connlab serve's `--stats` in a point's logs.
pub(super) const SERVER_STATS: &str = "server-stats.json";

/// A CPU list for `--cpu`: `1,0`.
pub(super) fn cpu_list(cpus: &[usize]) -> String {
    cpus.iter()
        .map(usize::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

/// `workers` nginx workers (each on its own CPU of `cpus`, in order, when
/// given), no access log, keep-alive without limit; with `return_body`
/// the `/bytes/N` location answers from the configuration.
fn nginx_conf(
    ctx: &PointCtx,
    addr: SocketAddr,
    return_body: Option<u64>,
    workers: u32,
    cpus: &[usize],
) -> String {
    let tmp = ctx.tmp.display().to_string();
    let logs = ctx.logs.display();
    let affinity = if cpus.is_empty() {
        String::new()
    } else {
        let masks: Vec<String> = (0..workers as usize)
            .map(|i| cpu_mask_bits(cpus[i % cpus.len()]))
            .collect();
        format!("worker_cpu_affinity {};\n", masks.join(" "))
    };
    let location = return_body.map_or(String::new(), |n| {
        format!(
            "    location = /bytes/{n} {{ return 200 \"{}\"; }}\n",
            "x".repeat(usize::try_from(n).unwrap_or(0))
        )
    });
    format!(
        "worker_processes {workers};\ndaemon off;\npid {tmp}/nginx-{port}.pid;\nerror_log {logs}/nginx-error.log;\n\
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
pub(super) fn cpu_mask_bits(cpu: usize) -> String {
    let mut s = "1".to_string();
    s.push_str(&"0".repeat(cpu));
    s
}

/// The gateway's commands (the single-IP relay has two processes), each
/// with the name of its log file and the address it must listen on before
/// the next starts.
pub(super) fn gateway_commands(
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
        // The response path (server -> node -> I/O server) is the node's
        // to splice; the I/O server still copies toward clients.
        if p.splice {
            node.arg("--splice");
        }
        io.args(&p.args);
        node.args(&p.node_args);
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
            if p.io == Some(ClientIo::Uring) {
                cmd.args(["--io", "uring"]);
            }
            cmd.args(&p.args);
            Ok(cmd)
        }
        ProcessKind::Haproxy => {
            let cfg = ctx.logs.join("haproxy.cfg");
            let text = haproxy_config(p, listen, backend);
            std::fs::write(&cfg, text).with_context(|| format!("writing {}", cfg.display()))?;
            let mut cmd = Command::new("haproxy");
            cmd.arg("-db").arg("-f").arg(&cfg);
            Ok(cmd)
        }
        other => bail!("{} is not a gateway", other.name()),
    }
}

/// HAProxy's configuration: mode tcp, one `listen` section relaying to
/// `backend`; with `splice = true` HAProxy moves both directions with
/// splice(2) (`option splice-request`, `option splice-response`), the peer of
/// a connlab contender that splices.
pub(super) fn haproxy_config(p: &Process, listen: SocketAddr, backend: SocketAddr) -> String {
    // Pipes count against the open-files limit (20,000 here, which HAProxy
    // cannot raise): 9,000 connections take 18,000 descriptors, so at most
    // 500 pipes of two.
    let (pipes, splice) = if p.splice {
        (
            "  maxpipes 500\n",
            "  option splice-request\n  option splice-response\n",
        )
    } else {
        ("", "")
    };
    format!(
        "global\n  maxconn 9000\n{pipes}  nbthread {}\ndefaults\n  mode tcp\n  timeout connect 5s\n\
         \x20 timeout client 300s\n  timeout server 300s\nlisten gw\n  bind {listen}\n\
         \x20 balance roundrobin\n{splice}  server s0 {backend}\n",
        p.thread_count()
    )
}

/// The client's command: closed loop for the experiment's duration
/// (connlab load: the whole client's CPUs; see [`client_shard_command`]).
pub(super) fn client_command(
    ctx: &PointCtx,
    p: &Process,
    target: SocketAddr,
    body_bytes: u64,
    json: &Path,
) -> Command {
    client_shard_command(
        ctx,
        p,
        target,
        body_bytes,
        json,
        None,
        &ctx.exp.placement.client_cpus(),
    )
}

/// `connlab load` at `rate` (`max`, or requests per second) against
/// `target`'s `/bytes/<body_bytes>` with the workload's connections and the
/// point's duration, its result in `json`, pinned to `cpus` when given;
/// errors are the sweep's to judge (`--max-error-ratio 1`).
pub(super) fn connlab_load(
    ctx: &PointCtx,
    rate: &str,
    target: SocketAddr,
    body_bytes: u64,
    json: &Path,
    cpus: &[usize],
) -> Command {
    let mut cmd = Command::new(ctx.exe);
    cmd.args(["load", "--max-error-ratio", "1", "--protocol", "http"])
        .args(["--rate", rate])
        .arg("--target")
        .arg(target.to_string())
        .arg("--path")
        .arg(format!("/bytes/{body_bytes}"))
        .arg("--response-size")
        .arg(body_bytes.to_string())
        .arg("-c")
        .arg(ctx.exp.workload.connections.to_string())
        .arg("-d")
        .arg(format!("{}ms", ctx.duration.as_millis()))
        .arg("--json")
        .arg(json);
    if !cpus.is_empty() {
        cmd.arg("--cpu").arg(cpu_list(cpus));
    }
    cmd
}

/// The client's command, for connlab load one shard `(i, n)` of the load
/// on `cpus` when given.
pub(super) fn client_shard_command(
    ctx: &PointCtx,
    p: &Process,
    target: SocketAddr,
    body_bytes: u64,
    json: &Path,
    shard: Option<(u32, u32)>,
    cpus: &[usize],
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
            let mut cmd = connlab_load(ctx, "max", target, body_bytes, json, cpus);
            cmd.args(["--depth", "1", "--warmup", "0s"]);
            if let Some((i, n)) = shard {
                cmd.arg("--shard").arg(format!("{i}/{n}"));
            }
            if let Some(io) = p.io {
                cmd.args(["--io", io.name()]);
            }
            cmd.args(&p.args);
            cmd
        }
    }
}
