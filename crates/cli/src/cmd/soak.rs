//! `connlab soak`: the flags, then the soak in the library
//! (`connlab_lab::soak`), its notes and summary printed, and the exit code
//! (1 when a check fails, 130 when interrupted).

use crate::Exit;
use anyhow::{anyhow, Context};
use clap::Args;
use connlab_gateway::ProxyIo;
use connlab_lab::soak::{Plan, SoakRequest};
use connlab_measure::units::{parse_duration, parse_size};
use connlab_os::Shutdown;
use connlab_report::Format;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

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

/// Runs the soak.
pub(crate) fn run(args: SoakArgs) -> Result<ExitCode, Exit> {
    let plan = Plan::new(&SoakRequest {
        duration: args.duration,
        quick: args.quick,
        segment: args.segment,
        baseline: args.baseline,
        rate: args.rate,
        rss_limit: args.rss_limit,
        p99_factor: args.p99_factor,
        never_read_hold: args.never_read_hold,
        gateway_io: args.gateway_io.name(),
    })
    .map_err(Exit::usage)?;
    let shutdown = Shutdown::on_termination_signals().context("installing signal handlers")?;
    let exe = std::env::current_exe().context("finding the connlab binary")?;
    let outcome = connlab_lab::soak::run(&plan, &args.out, exe, &shutdown, &mut |line| {
        eprintln!("connlab soak: {line}")
    })?;
    let markdown = connlab_report::render_soak(&outcome.report.summary(), Format::MARKDOWN)
        .map_err(|e| anyhow!(e))?;
    let md_path = args.out.join("soak.md");
    connlab_os::files::write_atomic(&md_path, &markdown)
        .with_context(|| format!("writing {}", md_path.display()))?;
    eprint!("{markdown}");
    eprintln!("connlab soak: results in {}", outcome.json_path.display());
    if outcome.interrupted {
        return Ok(ExitCode::from(130));
    }
    if let Some(e) = &outcome.report.setup_error {
        return Err(Exit::from(anyhow!("{e}")));
    }
    Ok(if outcome.report.passed {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
