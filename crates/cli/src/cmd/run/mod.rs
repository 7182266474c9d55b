//! `connlab run`: the main job in one command. Starts a `connlab serve` child
//! on loopback (port 0) for each engine asked for, drives it with the load
//! generator on an embedded default workload, and prints the summary, and for
//! several engines one comparison table in the style of the locality paper.

use crate::cmd::child::{server_cpu_s, ServerChild};
use crate::cmd::load::{raise_limit, WorkloadArgs};
use crate::cmd::output::{print_summary, with_progress, write_outputs, OutputArgs};
use crate::Exit;
use anyhow::{anyhow, Context};
use clap::Args;
use connlab_loadgen::{LoadResult, Progress};
use connlab_os::{CpuList, Shutdown};
use connlab_server::EngineKind;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::time::Duration;

/// Flags of `connlab run`.
#[derive(Args, Debug)]
#[command(after_help = "\
Defaults reproduce one cell of the locality paper: 1,000 connections, active ratio 1/16,
128 B requests, 10 KiB responses, 2,000 req/s, 10 s. `--engines all` runs every engine in
turn and prints mean, median and stddev of service latency per engine.

Examples:
  connlab run
  connlab run --engines all -c 2000 --active-ratio 1 -d 5s
  connlab run --engine select --json select.json")]
pub(crate) struct RunArgs {
    /// Engines to compare: one name, a comma list, or `all`.
    #[arg(long, visible_alias = "engine", default_value = "epoll", value_parser = parse_engines)]
    engines: EngineList,
    /// Edge-triggered epoll for the epoll engine.
    #[arg(long)]
    edge_triggered: bool,
    #[command(flatten)]
    workload: WorkloadArgs,
    /// Pin the server to these CPUs.
    #[arg(long, value_name = "LIST")]
    server_cpu: Option<CpuList>,
    /// Pin the client writer to the first CPU of LIST and its reader to the last.
    #[arg(long, value_name = "LIST")]
    client_cpu: Option<CpuList>,
    /// Write results as JSON: FILE for one engine; FILE with the engine name
    /// inserted before the extension for several (run-epoll.json).
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
}

/// `--engines` value.
#[derive(Clone, Debug)]
pub(crate) struct EngineList(Vec<EngineKind>);

fn parse_engines(s: &str) -> Result<EngineList, String> {
    if s == "all" {
        return Ok(EngineList(EngineKind::ALL.to_vec()));
    }
    s.split(',')
        .map(|e| e.trim().parse())
        .collect::<Result<Vec<_>, _>>()
        .map(EngineList)
}

/// Gives `run` the defaults of the locality paper's cell where they differ
/// from `load`'s, so that `connlab run --help` shows the values in force.
pub(crate) fn with_run_defaults(cmd: clap::Command) -> clap::Command {
    cmd.mut_arg("connections", |a| a.default_value("1000"))
        .mut_arg("active_ratio", |a| a.default_value("1/16"))
        .mut_arg("rate", |a| a.default_value("2000"))
}

/// Runs the default experiment.
pub(crate) fn run(args: RunArgs) -> Result<ExitCode, Exit> {
    raise_limit();
    let shutdown = Shutdown::on_termination_signals().context("installing signal handlers")?;
    let exe = std::env::current_exe().context("locating the connlab binary")?;
    let mut rows: Vec<(String, LoadResult, Option<f64>)> = Vec::new();
    let mut code = ExitCode::SUCCESS;
    let several = args.engines.0.len() > 1;
    for &engine in &args.engines.0 {
        if shutdown.requested() {
            break;
        }
        let label = if engine == EngineKind::Epoll && args.edge_triggered {
            "epoll-et".to_string()
        } else {
            engine.name().to_string()
        };
        eprintln!("connlab run: engine {label}");
        let stats_path =
            std::env::temp_dir().join(format!("connlab-run-{}-{label}.json", std::process::id()));
        let mut server = start_server(&exe, engine, &args, &stats_path)?;
        let workload = args
            .workload
            .workload(server.addr, args.client_cpu.clone())?;
        let progress = Progress::default();
        let outcome = with_progress(&progress, &workload, || {
            connlab_loadgen::run(&workload, &shutdown, &progress, None)
        });
        let server_cpu = server
            .stop(&stats_path, Duration::from_secs(15))
            .as_ref()
            .and_then(server_cpu_s);
        let _ = std::fs::remove_file(&stats_path);
        let outcome = outcome.map_err(|e| anyhow!(e).context(format!("load against {label}")))?;
        let output = OutputArgs {
            json: args.json.as_ref().map(|p| {
                if several {
                    with_suffix(p, &label)
                } else {
                    p.clone()
                }
            }),
            ..OutputArgs::default()
        };
        write_outputs(&output, &outcome)?;
        print_summary(&outcome.result);
        if let Some(cpu) = server_cpu {
            eprintln!("  server cpu    {cpu:.2} s");
        }
        if outcome.result.interrupted {
            code = ExitCode::from(130);
        } else if outcome.result.peer_failed && code == ExitCode::SUCCESS {
            code = ExitCode::from(1);
        }
        rows.push((label, outcome.result, server_cpu));
    }
    if rows.len() > 1 {
        print_comparison(&rows);
    }
    Ok(code)
}

fn with_suffix(p: &Path, label: &str) -> PathBuf {
    let stem = p
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let name = match p.extension() {
        Some(ext) => format!("{stem}-{label}.{}", ext.to_string_lossy()),
        None => format!("{stem}-{label}"),
    };
    p.with_file_name(name)
}

fn print_comparison(rows: &[(String, LoadResult, Option<f64>)]) {
    let r0 = &rows[0].1.config;
    let mut t = format!(
        "\nservice latency by engine ({} connections, ratio {}, {} req/s, {} B / {} B):\n",
        r0.connections,
        r0.active_ratio,
        r0.rate_per_s.map_or("max".into(), |r| r.to_string()),
        r0.request_size_bytes,
        r0.response_size_bytes
    );
    t.push_str("  engine        mean us   median us   stddev us     p99 us   achieved/s   server cpu s   errors\n");
    for (label, r, cpu) in rows {
        let s = &r.service_latency_us;
        let errors: u64 = r.requests.errors.values().sum();
        t.push_str(&format!(
            "  {label:<10} {:>10.1} {:>11.1} {:>11.1} {:>10.1} {:>12.1} {:>14} {:>8}\n",
            s.mean,
            s.p50,
            s.stddev,
            s.p99,
            r.achieved_rate_per_s,
            cpu.map_or("-".into(), |c| format!("{c:.2}")),
            errors
        ));
    }
    eprint!("{t}");
}

fn start_server(
    exe: &Path,
    engine: EngineKind,
    args: &RunArgs,
    stats: &Path,
) -> Result<ServerChild, Exit> {
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
    if let Some(cpu) = &args.server_cpu {
        cmd.args(["--cpu", &cpu.to_string()]);
    }
    Ok(ServerChild::spawn(cmd)?)
}
