//! The single-IP kind (`kind = "singleip"`): the SAPS paper's RTT, bandwidth and contention
//! experiments against the I/O server (send limit on and off), nftables NAT
//! and HAProxy, in network namespaces:
//!
//! ```text
//!   c0 c1 c2 (198.18.1.1-3)       clients (probe rtt|get)          CPU client_cpu
//!      | bridge brl
//!   router: connlab linkem run     delay, rate, queue, packet log   CPU client_cpu
//!      | bridge brr
//!   front 198.18.2.1 (eth0)        io-server | gateway nat | haproxy  CPU front_cpu
//!         198.18.3.1 (eth1)        RPS of eth0/eth1 on front_cpu
//!      | bridge br0 (namespace sw)
//!   n0 n1 (198.18.3.2-)            app-node + probe serve :8080     CPU front_cpu
//! ```
//!
//! Points sharing an experiment, system and repetition share one start of
//! the front end (and, except for contention, of linkem). Each finished
//! point is written whole at once; a rerun skips them. Every process runs
//! under a guard that stops it (and the kernel kills it if this process
//! dies); the namespaces go with their guards, and a killed run's are swept
//! by the next one.

mod lab;
mod points;
mod procs;
mod qdisc;
mod system;

use crate::run::{Progress, RunError, SweepOutcome, SweepRequest};
use crate::{
    fmt_num, PlacementInfo, SingleIpExperiment, SingleIpPoint, SingleIpRecord, SingleIpSweep,
    SingleIpSweepInfo, System, SINGLEIP_SWEEP_SCHEMA,
};
use anyhow::{anyhow, Context};
use connlab_os::Shutdown;
use lab::SiLab;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// The cluster address clients connect to.
const VIP: &str = "198.18.2.1";
/// The front host's address toward the nodes.
const FRONT_NODE_SIDE: &str = "198.18.3.1";
/// The cluster port.
const PORT: u16 = 80;
/// The node servers' port.
const SERVER_PORT: u16 = 8080;
/// The io-server's node port.
const NODE_PORT: u16 = 7000;
/// Every n-th background packet goes on the timeline, at least.
const TIMELINE_EVERY: u32 = 20;
/// About this many packets of each large stream go on the timeline.
const TIMELINE_PACKETS: u64 = 1500;

fn node_addr(j: usize) -> String {
    format!("198.18.3.{}", j + 2)
}

/// Runs a single-IP experiment.
pub(super) fn sweep(
    exp: &SingleIpExperiment,
    req: &SweepRequest,
    progress: &mut dyn Progress,
    shutdown: &Shutdown,
) -> Result<SweepOutcome, RunError> {
    let (out, quick) = (&req.out, req.quick);
    let eff = exp.effective(quick);
    let plan = exp.plan(quick);
    connlab_os::netns::require_root().map_err(|e| RunError::Input(e.to_string()))?;
    check_tools(&plan)?;
    let session = super::begin_session(&SingleIpSweep::layout(out), req, &[], progress)?;
    let exe = req.connlab.clone();
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get()) as u32;
    let client_cpu = eff.placement.client_cpu % cpus;
    let front_cpu = eff.placement.front_cpu % cpus;
    if (client_cpu, front_cpu) != (eff.placement.client_cpu, eff.placement.front_cpu) {
        progress.note(&format!(
            "warning: {cpus} CPUs here; clients on CPU {client_cpu}, front on CPU {front_cpu}"
        ));
    }
    let placement = PlacementInfo {
        clients: client_cpu,
        linkem: client_cpu,
        front: front_cpu,
        nodes: front_cpu,
        front_rps: front_cpu,
    };
    let info = SingleIpSweepInfo {
        schema: SINGLEIP_SWEEP_SCHEMA.into(),
        name: exp.name.clone(),
        quick,
        started_unix_s: session.started_unix_s,
        points_total: plan.len(),
        connlab_version: env!("CARGO_PKG_VERSION").into(),
        environment: session.environment,
        placement: placement.clone(),
    };
    SingleIpSweep::write_info(out, &info).map_err(|e| RunError::Failed(e.to_string()))?;

    let todo: Vec<&SingleIpPoint> = plan.iter().filter(|p| !point_done(out, p)).collect();
    let kept = plan.len() - todo.len();
    progress.note(&format!(
        "{} ({} points{}{}), results in {}",
        exp.name,
        plan.len(),
        if quick { ", quick" } else { "" },
        if kept > 0 {
            format!(", {kept} already done")
        } else {
            String::new()
        },
        out.display()
    ));
    let mut outcome = SweepOutcome {
        out: out.clone(),
        total: plan.len(),
        kept,
        ..SweepOutcome::default()
    };
    if todo.is_empty() {
        return Ok(outcome);
    }
    let lab = SiLab::build(eff.nodes as usize, &eff.congestion_control, front_cpu)
        .map_err(|e| e.context("building the network namespaces"))?;
    for w in &lab.warnings {
        progress.note(&format!("warning: {w}"));
    }
    let logs_root = out.join("logs");
    std::fs::create_dir_all(&logs_root)
        .with_context(|| format!("creating {}", logs_root.display()))?;
    let key = logs_root.join("cluster.key");
    write_key(&key)?;
    let mut watched = vec![client_cpu as usize, front_cpu as usize];
    watched.sort_unstable();
    watched.dedup();
    let mut ctx = Ctx {
        exp: &eff,
        lab: &lab,
        exe: &exe,
        key: &key,
        placement,
        shutdown,
        attempts: super::attempts(req, &exp.validity),
        machine: info.environment.fingerprint(),
        watched,
        node_servers: Vec::new(),
    };
    // The unmodified servers on the node hosts, for the whole sweep.
    let mut servers = Vec::new();
    for j in 0..lab.nodes.len() {
        let p = ctx
            .start(
                &lab.nodes[j],
                Some(front_cpu),
                exe.as_os_str(),
                &[
                    "singleip",
                    "probe",
                    "serve",
                    "--listen",
                    &format!("0.0.0.0:{SERVER_PORT}"),
                ],
                &logs_root.join(format!("server-n{j}.log")),
                Some("probe server ready"),
            )
            .map_err(|e| e.context(format!("starting the server on node {j}")))?;
        servers.push(p);
    }
    ctx.node_servers = servers.iter().map(|p| p.child.pid()).collect();

    progress.begin(plan.len(), kept);
    let (mut measured, mut failed) = (0usize, Vec::<String>::new());
    let mut i = 0;
    while i < todo.len() {
        if shutdown.requested() {
            break;
        }
        let g = todo[i].group();
        let mut j = i;
        while j < todo.len() && todo[j].group() == g {
            j += 1;
        }
        let group = &todo[i..j];
        i = j;
        let (rep, kind, system) = g;
        let gid = format!("{}-{}-rep{rep}", kind.name(), system.name());
        let glogs = logs_root.join(&gid);
        let _ = std::fs::remove_dir_all(&glogs);
        std::fs::create_dir_all(&glogs).with_context(|| format!("creating {}", glogs.display()))?;
        let result = ctx.run_group(system, kind, group, &glogs, &mut |p, r, took| {
            match r {
                Ok(rec) => {
                    SingleIpSweep::write_point(out, &rec).map_err(|e| anyhow!(e))?;
                    measured += 1;
                    let what = format!("{} ({:.1} s)", describe(&rec), took.as_secs_f64());
                    progress.finish(&p.id(), took, &what);
                }
                Err(e) if shutdown.requested() => {
                    progress.finish(&p.id(), took, "interrupted");
                    let _ = e;
                }
                Err(e) => {
                    let _ = connlab_os::files::write_atomic(
                        glogs.join(format!("{}.error.txt", p.id())),
                        format!("{e:#}\n"),
                    );
                    progress.finish(&p.id(), took, &format!("FAILED: {e:#}"));
                    failed.push(p.id());
                }
            }
            Ok(())
        });
        if let Err(e) = result {
            if shutdown.requested() {
                break;
            }
            let _ = connlab_os::files::write_atomic(glogs.join("error.txt"), format!("{e:#}\n"));
            progress.note(&format!("{gid}: FAILED: {e:#} (see {})", glogs.display()));
            for p in group {
                if !point_done(out, p) && !failed.contains(&p.id()) {
                    failed.push(p.id());
                }
            }
        }
    }
    progress.end();
    drop(servers);
    if let Err(e) = lab.teardown() {
        outcome
            .warnings
            .push(format!("tearing the namespaces down: {e:#}"));
    }
    outcome.measured = measured;
    outcome.failed = failed;
    outcome.interrupted = shutdown.requested();
    Ok(outcome)
}

fn describe(r: &SingleIpRecord) -> String {
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
    format!("{}{validity}", figures(r))
}

fn figures(r: &SingleIpRecord) -> String {
    if let Some(x) = &r.rtt {
        return format!(
            "RTT min {} / median {} / mean {} / max {} µs over {}",
            fmt_num(x.min_us),
            fmt_num(x.p50_us),
            fmt_num(x.mean_us),
            fmt_num(x.max_us),
            x.count
        );
    }
    if let Some(c) = &r.contention {
        return format!(
            "foreground {} ms, Jain {}, utilisation {}, fg queue {} ms, {} drops",
            c.fg_completion_ms.map_or("—".into(), fmt_num),
            c.jain_overlap.map_or("—".into(), fmt_num),
            c.link_utilisation.map_or("—".into(), fmt_num),
            c.queue_ms_fg_median.map_or("—".into(), fmt_num),
            c.drops
        );
    }
    let m = crate::median(r.transfers.iter().filter_map(|t| t.mbit_s));
    format!(
        "{} transfers, median {} Mbit/s",
        r.transfers.len(),
        m.map_or("—".into(), fmt_num)
    )
}

fn check_tools(plan: &[SingleIpPoint]) -> Result<(), RunError> {
    let need = |s: System| plan.iter().any(|p| p.system == s);
    let have = |tool: &str, arg: &str| Command::new(tool).arg(arg).output().is_ok();
    if need(System::Nat) && !have("nft", "--version") {
        return Err(RunError::Input(
            "the nat system needs nftables: apt-get install nftables".into(),
        ));
    }
    if need(System::Haproxy) && !have("haproxy", "-v") {
        return Err(RunError::Input(
            "the haproxy system needs HAProxy: apt-get install haproxy".into(),
        ));
    }
    if !Path::new("/dev/net/tun").exists() {
        return Err(RunError::Input(
            "/dev/net/tun is missing (linkem needs TUN devices)".into(),
        ));
    }
    Ok(())
}

fn point_done(out: &Path, p: &SingleIpPoint) -> bool {
    SingleIpSweep::read_point(&SingleIpSweep::layout(out).point_path(&p.id()))
        .is_ok_and(|r| r.point == *p)
}

fn write_key(path: &Path) -> anyhow::Result<()> {
    use std::io::Read as _;
    use std::os::unix::fs::OpenOptionsExt;
    let mut key = [0u8; 32];
    File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut key))
        .context("reading /dev/urandom")?;
    let _ = std::fs::remove_file(path);
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .with_context(|| format!("creating {}", path.display()))?;
    std::io::Write::write_all(&mut f, &key).with_context(|| format!("writing {}", path.display()))
}

/// Called with each point's result as it finishes.
type PointDone<'a> =
    dyn FnMut(&SingleIpPoint, anyhow::Result<SingleIpRecord>, Duration) -> anyhow::Result<()> + 'a;

struct Ctx<'a> {
    exp: &'a SingleIpExperiment,
    lab: &'a SiLab,
    exe: &'a Path,
    key: &'a Path,
    placement: PlacementInfo,
    shutdown: &'a Shutdown,
    /// Attempts per point, the first included.
    attempts: u32,
    /// The sweep's machine: each point's is checked against it.
    machine: connlab_os::Fingerprint,
    /// The CPUs the processes are pinned to (clients and linkem, front and
    /// nodes): the window's CPUs.
    watched: Vec<usize>,
    /// The node servers (`probe serve`), running for the whole sweep.
    node_servers: Vec<u32>,
}

/// The link of one linkem start.
#[derive(Clone, Debug)]
struct LinkSpecArgs {
    delay: Duration,
    rate: Option<(u64, u32)>,
    log: Option<PathBuf>,
    /// One read per wire packet (`--no-offload`): exact per-segment
    /// queueing and logs, at a cost in forwarding rate.
    per_packet: bool,
}

fn read_json<T: for<'de> serde::Deserialize<'de>>(path: &Path) -> anyhow::Result<T> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))
}
