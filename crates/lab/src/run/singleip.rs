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

use super::{unix_now, Progress, RunError, SweepOutcome, SweepRequest};
use crate::{
    analyse_contention, bytes_label, fmt_num, summarise_rtt, transfer_result, Bottleneck,
    ContentionSetup, CpuUse, ExpKind, LinkInfo, PlacementInfo, ProbeRtt, ProbeTransfer,
    SingleIpExperiment, SingleIpPoint, SingleIpRecord, SingleIpSweep, SingleIpSweepInfo, System,
    SINGLEIP_POINT_SCHEMA, SINGLEIP_SWEEP_SCHEMA,
};
use anyhow::{anyhow, bail, Context};
use connlab_linkem::lab::{Lab, LabSpec};
use connlab_os::netns::{add_bridge, delete_namespaces, ip, run_in_namespace, wait_for_carrier};
use connlab_os::Shutdown;
use std::ffi::OsStr;
use std::fs::File;
use std::net::{SocketAddr, TcpStream};
use std::os::fd::AsRawFd;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

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
    let (out, quick, text) = (&req.out, req.quick, &req.text);
    let eff = exp.effective(quick);
    let plan = exp.plan(quick);
    connlab_os::netns::require_root().map_err(|e| RunError::Input(e.to_string()))?;
    check_tools(&plan)?;
    let earlier = prepare_dir(out, text, quick, req.fresh)?;
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
        started_unix_s: earlier.as_ref().map_or_else(unix_now, |i| i.started_unix_s),
        points_total: plan.len(),
        connlab_version: env!("CARGO_PKG_VERSION").into(),
        environment: super::sweep_environment(earlier.as_ref().map(|i| &i.environment), progress),
        placement: placement.clone(),
    };
    SingleIpSweep::write_info(out, &info).map_err(|e| RunError::Failed(e.to_string()))?;
    super::write_experiment(out, text)?;

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
    let ctx = Ctx {
        exp: &eff,
        lab: &lab,
        exe: &exe,
        key: &key,
        placement,
        shutdown,
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
    SingleIpSweep::read_point(&SingleIpSweep::point_path(out, &p.id())).is_ok_and(|r| r.point == *p)
}

/// Creates the directory, or checks that it holds this same sweep.
fn prepare_dir(
    out: &Path,
    text: &str,
    quick: bool,
    fresh: bool,
) -> Result<Option<SingleIpSweepInfo>, RunError> {
    let info_path = out.join("sweep.json");
    if fresh {
        for sub in ["points", "logs"] {
            let d = out.join(sub);
            if d.exists() {
                std::fs::remove_dir_all(&d).with_context(|| format!("removing {}", d.display()))?;
            }
        }
        let _ = std::fs::remove_file(&info_path);
    }
    std::fs::create_dir_all(out.join("points"))
        .with_context(|| format!("creating {}", out.display()))?;
    if !info_path.exists() {
        return Ok(None);
    }
    let earlier: SingleIpSweepInfo = std::fs::read_to_string(&info_path)
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .ok_or_else(|| {
            RunError::Input(format!(
                "{}: not a single-IP sweep of this version; use another --out or --fresh",
                info_path.display()
            ))
        })?;
    let old = std::fs::read_to_string(out.join("experiment.toml")).unwrap_or_default();
    let same = crate::same_measurement(&old, text);
    if !same || earlier.quick != quick {
        return Err(RunError::Input(format!(
            "{} holds results of {}; use another --out, or --fresh to discard them",
            out.display(),
            if !same {
                "a different experiment file"
            } else if quick {
                "a run without --quick"
            } else {
                "a run with --quick"
            }
        )));
    }
    Ok(Some(earlier))
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

// ------------------------------------------------------------------ namespaces

/// The linkem lab (clients, router, front) plus the node side (a switch
/// namespace and the node hosts); everything is deleted on drop.
struct SiLab {
    lab: Option<Lab>,
    /// The switch and node namespaces (ours to delete).
    extra: Vec<String>,
    clients: Vec<String>,
    router: String,
    front: String,
    nodes: Vec<String>,
    /// What setting the hosts up could not do but the sweep survives.
    warnings: Vec<String>,
}

impl SiLab {
    fn build(nodes: usize, cc: &str, front_cpu: u32) -> anyhow::Result<SiLab> {
        let lab = Lab::build(&LabSpec {
            left_hosts: 3,
            right_hosts: 1,
        })?;
        let router = lab.router_ns().to_string();
        let clients = lab.left_ns().to_vec();
        let front = lab.right_ns()[0].clone();
        // `connlab-<pid>-lk<n>-router` -> `connlab-<pid>-lk<n>-si-...`, so a
        // killed run's are swept by the next (`netns::sweep_stale`).
        let base = router.trim_end_matches("-router").to_string();
        let mut si = SiLab {
            lab: Some(lab),
            extra: Vec::new(),
            clients,
            router,
            front,
            nodes: Vec::new(),
            warnings: Vec::new(),
        };
        si.create(&base, nodes, cc, front_cpu)?;
        Ok(si)
    }

    fn create(&mut self, base: &str, nodes: usize, cc: &str, front_cpu: u32) -> anyhow::Result<()> {
        let sw = format!("{base}-si-sw");
        add_ns(&sw)?;
        self.extra.push(sw.clone());
        add_bridge(&sw, "br0")?;
        sysctl(&self.front, "net/ipv4/ip_forward", "1")?;
        ip(&[
            "-n",
            &sw,
            "link",
            "add",
            "front",
            "type",
            "veth",
            "peer",
            "name",
            "eth1",
            "netns",
            &self.front,
        ])?;
        ip(&["-n", &sw, "link", "set", "front", "master", "br0", "up"])?;
        ip(&[
            "-n",
            &self.front,
            "addr",
            "add",
            &format!("{FRONT_NODE_SIDE}/24"),
            "dev",
            "eth1",
        ])?;
        ip(&["-n", &self.front, "link", "set", "eth1", "up"])?;
        for j in 0..nodes {
            let n = format!("{base}-si-n{j}");
            add_ns(&n)?;
            self.extra.push(n.clone());
            self.nodes.push(n.clone());
            let port = format!("n{j}");
            ip(&[
                "-n", &sw, "link", "add", &port, "type", "veth", "peer", "name", "eth0", "netns",
                &n,
            ])?;
            ip(&["-n", &sw, "link", "set", &port, "master", "br0", "up"])?;
            ip(&[
                "-n",
                &n,
                "addr",
                "add",
                &format!("{}/24", node_addr(j)),
                "dev",
                "eth0",
            ])?;
            ip(&["-n", &n, "link", "set", "eth0", "up"])?;
            ip(&["-n", &n, "route", "add", "default", "via", FRONT_NODE_SIDE])?;
        }
        wait_for_carrier(&self.nodes)?;
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let o = Command::new("ip")
                .args(["-n", &self.front, "-o", "link", "show", "dev", "eth1"])
                .output()?;
            if String::from_utf8_lossy(&o.stdout).contains("LOWER_UP") {
                break;
            }
            if Instant::now() > deadline {
                bail!("eth1 of the front host did not come up");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        for ns in self.all() {
            sysctl(&ns, "net/ipv4/tcp_congestion_control", cc)
                .with_context(|| format!("setting congestion control {cc:?}"))?;
        }
        // The front host's receive processing on the front CPU (so NAT's
        // forwarding runs there too). `ip netns exec` mounts the
        // namespace's /sys.
        let mask = format!("{:x}", 1u64 << front_cpu.min(63));
        for dev in ["eth0", "eth1"] {
            let st = Command::new("ip")
                .args(["netns", "exec", &self.front, "sh", "-c"])
                .arg(format!(
                    "echo {mask} > /sys/class/net/{dev}/queues/rx-0/rps_cpus"
                ))
                .status()?;
            if !st.success() {
                self.warnings
                    .push(format!("could not set RPS of the front's {dev}"));
            }
        }
        Ok(())
    }

    fn all(&self) -> Vec<String> {
        let mut v = self.clients.clone();
        v.push(self.router.clone());
        v.push(self.front.clone());
        v.extend(self.nodes.iter().cloned());
        v
    }

    fn teardown(mut self) -> anyhow::Result<()> {
        let extra = std::mem::take(&mut self.extra);
        let a = delete_namespaces(&extra);
        let b = self.lab.take().map_or(Ok(()), Lab::teardown);
        a?;
        b?;
        Ok(())
    }
}

impl Drop for SiLab {
    fn drop(&mut self) {
        let _ = delete_namespaces(&self.extra);
    }
}

fn add_ns(ns: &str) -> anyhow::Result<()> {
    ip(&["netns", "add", ns])?;
    run_in_namespace(ns, || -> anyhow::Result<()> {
        for dev in ["all", "default"] {
            let _ = std::fs::write(format!("/proc/sys/net/ipv6/conf/{dev}/disable_ipv6"), "1");
        }
        Ok(ip(&["link", "set", "lo", "up"])?)
    })?
}

fn sysctl(ns: &str, key: &str, value: &str) -> anyhow::Result<()> {
    run_in_namespace(ns, || {
        std::fs::write(format!("/proc/sys/{key}"), value)
            .with_context(|| format!("writing /proc/sys/{key} = {value} in {ns}"))
    })?
}

// ------------------------------------------------------------------ processes

/// A child in a namespace, stopped (SIGINT, then SIGKILL) on drop.
struct Proc {
    child: Child,
    name: String,
    log: PathBuf,
}

impl Proc {
    /// SIGINT, wait up to `grace`, then SIGKILL; returns the exit code.
    fn stop(&mut self, grace: Duration) -> Option<i32> {
        if let Ok(Some(s)) = self.child.try_wait() {
            return s.code();
        }
        super::child::signal(&self.child, libc::SIGINT);
        let deadline = Instant::now() + grace;
        while Instant::now() < deadline {
            if let Ok(Some(s)) = self.child.try_wait() {
                return s.code();
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        self.child.wait().ok().and_then(|s| s.code())
    }

    /// Waits for the child to end by itself until `deadline` (or a Ctrl-C).
    fn wait(&mut self, deadline: Instant, shutdown: &Shutdown) -> anyhow::Result<()> {
        loop {
            if let Some(s) = self.child.try_wait()? {
                if s.success() {
                    return Ok(());
                }
                bail!("{} exited with {s}: {}", self.name, last_line(&self.log));
            }
            if shutdown.requested() {
                self.stop(Duration::from_secs(2));
                bail!("interrupted");
            }
            if Instant::now() > deadline {
                self.stop(Duration::from_secs(2));
                bail!(
                    "{} did not finish in time: {}",
                    self.name,
                    last_line(&self.log)
                );
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.stop(Duration::from_secs(10));
    }
}

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

/// A command that enters network namespace `ns`, pins itself to `cpu` and
/// dies with this process, all between fork and exec.
fn ns_command(ns: &str, cpu: Option<u32>, program: &OsStr) -> anyhow::Result<Command> {
    let path = format!("/run/netns/{ns}");
    let handle = File::open(&path).with_context(|| format!("opening {path}"))?;
    let mut cmd = Command::new(program);
    // SAFETY: setns, sched_setaffinity and prctl are async-signal-safe; the
    // namespace descriptor lives in the closure until exec (O_CLOEXEC).
    unsafe {
        cmd.pre_exec(move || {
            if libc::setns(handle.as_raw_fd(), libc::CLONE_NEWNET) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            if let Some(c) = cpu {
                let mut set: libc::cpu_set_t = std::mem::zeroed();
                libc::CPU_SET(c as usize, &mut set);
                if libc::sched_setaffinity(0, size_of::<libc::cpu_set_t>(), &set) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    Ok(cmd)
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
}

/// The link of one linkem start.
#[derive(Clone, Debug)]
struct LinkSpecArgs {
    delay: Duration,
    rate: Option<(u64, u32)>,
    log: Option<PathBuf>,
}

impl Ctx<'_> {
    /// Starts `program args` in `ns`; output to `log`; waits for `ready`
    /// in the output (20 s at most).
    fn start<S: AsRef<OsStr>>(
        &self,
        ns: &str,
        cpu: Option<u32>,
        program: &OsStr,
        args: &[S],
        log: &Path,
        ready: Option<&str>,
    ) -> anyhow::Result<Proc> {
        let file = File::create(log).with_context(|| format!("creating {}", log.display()))?;
        let mut cmd = ns_command(ns, cpu, program)?;
        cmd.args(args)
            .stdin(Stdio::null())
            .stdout(file.try_clone()?)
            .stderr(file);
        let name = log
            .file_stem()
            .map_or("child".into(), |s| s.to_string_lossy().into_owned());
        let child = cmd
            .spawn()
            .with_context(|| format!("starting {name} ({})", program.to_string_lossy()))?;
        let mut p = Proc {
            child,
            name,
            log: log.to_path_buf(),
        };
        if let Some(ready) = ready {
            let deadline = Instant::now() + Duration::from_secs(20);
            loop {
                let text = std::fs::read_to_string(log).unwrap_or_default();
                if text.contains(ready) {
                    break;
                }
                if let Some(s) = p.child.try_wait()? {
                    bail!("{} exited ({s}) at start: {}", p.name, last_line(log));
                }
                if Instant::now() > deadline || self.shutdown.requested() {
                    bail!("{}: no {ready:?} within 20 s: {}", p.name, last_line(log));
                }
                std::thread::sleep(Duration::from_millis(25));
            }
        }
        Ok(p)
    }

    fn connlab<S: AsRef<OsStr>>(
        &self,
        ns: &str,
        cpu: u32,
        args: &[S],
        log: &Path,
        ready: Option<&str>,
    ) -> anyhow::Result<Proc> {
        self.start(ns, Some(cpu), self.exe.as_os_str(), args, log, ready)
    }

    fn linkem(&self, link: &LinkSpecArgs, logs: &Path, tag: &str) -> anyhow::Result<Proc> {
        let mut args: Vec<String> = [
            "linkem", "run", "--left", "brl", "--right", "brr", "--delay",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        args.push(format!("{}us", link.delay.as_micros()));
        if let Some((rate, queue)) = link.rate {
            args.extend([
                "--rate".into(),
                format!("{rate}bit"),
                "--queue".into(),
                queue.to_string(),
            ]);
        }
        if link.rate.is_some() || link.log.is_some() {
            // One read per wire packet: exact per-segment queueing and logs.
            args.push("--no-offload".into());
        }
        if let Some(log) = &link.log {
            args.push("--log".into());
            args.push(log.display().to_string());
        }
        self.connlab(
            &self.lab.router,
            self.placement.linkem,
            &args,
            &logs.join(format!("linkem-{tag}.log")),
            Some("forwarding"),
        )
    }

    /// Starts the front end; the processes, front first.
    fn start_system(&self, system: System, logs: &Path) -> anyhow::Result<Vec<Proc>> {
        let vip = format!("{VIP}:{PORT}");
        let front = self.placement.front;
        let mut procs = Vec::new();
        match system {
            System::Io16k
            | System::IoOff
            | System::Io16k4x
            | System::Io16kAuto
            | System::Io16kH15 => {
                let (limit, buffer) = system.io_server_flags().unwrap_or(("16KiB", None));
                let stats = logs.join("io-server-stats.json");
                let key = self.key.display().to_string();
                procs.push(self.connlab(
                    &self.lab.front,
                    front,
                    &[
                        "singleip",
                        "io-server",
                        "--listen",
                        &vip,
                        "--nodes",
                        &format!("{FRONT_NODE_SIDE}:{NODE_PORT}"),
                        "--key",
                        &key,
                        "--send-limit",
                        limit,
                        "--stats",
                        &stats.display().to_string(),
                        "--send-buffer",
                        buffer.unwrap_or("share"),
                    ],
                    &logs.join("io-server.log"),
                    Some("io-server ready"),
                )?);
                for (j, n) in self.lab.nodes.iter().enumerate() {
                    procs.push(self.connlab(
                        n,
                        self.placement.nodes,
                        &[
                            "singleip",
                            "app-node",
                            "--io-server",
                            &format!("{FRONT_NODE_SIDE}:{NODE_PORT}"),
                            "--key",
                            &key,
                            "--forward",
                            &format!("127.0.0.1:{SERVER_PORT}"),
                            "--port",
                            &PORT.to_string(),
                            "--node-id",
                            &j.to_string(),
                        ],
                        &logs.join(format!("app-node{j}.log")),
                        Some("app-node ready"),
                    )?);
                }
            }
            System::Nat => {
                let mut args: Vec<String> = [
                    "gateway",
                    "--mode",
                    "nat",
                    "--listen",
                    &vip,
                    "--policy",
                    "round-robin",
                ]
                .iter()
                .map(|s| s.to_string())
                .collect();
                for j in 0..self.lab.nodes.len() {
                    args.push("--backend".into());
                    args.push(format!("{}:{SERVER_PORT}", node_addr(j)));
                }
                procs.push(self.connlab(
                    &self.lab.front,
                    front,
                    &args,
                    &logs.join("nat.log"),
                    Some("gateway: nat mode"),
                )?);
            }
            System::Haproxy => {
                let cfg = logs.join("haproxy.cfg");
                let servers: String = (0..self.lab.nodes.len())
                    .map(|j| format!("  server s{j} {}:{SERVER_PORT}\n", node_addr(j)))
                    .collect();
                std::fs::write(
                    &cfg,
                    format!(
                        "global\n  maxconn 9000\n  nbthread 1\ndefaults\n  mode tcp\n  timeout connect 5s\n  \
                         timeout client 300s\n  timeout server 300s\nlisten gw\n  bind {vip}\n  balance roundrobin\n{servers}"
                    ),
                )
                .with_context(|| format!("writing {}", cfg.display()))?;
                procs.push(self.start(
                    &self.lab.front,
                    Some(front),
                    OsStr::new("haproxy"),
                    &[OsStr::new("-db"), OsStr::new("-f"), cfg.as_os_str()],
                    &logs.join("haproxy.log"),
                    None,
                )?);
            }
        }
        self.wait_reachable(&mut procs)?;
        Ok(procs)
    }

    /// Waits until a client host can connect to the cluster address.
    fn wait_reachable(&self, procs: &mut [Proc]) -> anyhow::Result<()> {
        let target: SocketAddr = format!("{VIP}:{PORT}").parse()?;
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let ok = run_in_namespace(&self.lab.clients[0], || {
                TcpStream::connect_timeout(&target, Duration::from_millis(500)).is_ok()
            })?;
            if ok {
                return Ok(());
            }
            for p in procs.iter_mut() {
                if let Some(s) = p.child.try_wait()? {
                    bail!("{} exited ({s}): {}", p.name, last_line(&p.log));
                }
            }
            if Instant::now() > deadline || self.shutdown.requested() {
                bail!("{target} not reachable from the clients within 20 s");
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn link_of(&self, kind: ExpKind) -> LinkInfo {
        let e = self.exp;
        match kind {
            ExpKind::Rtt => LinkInfo {
                delay_us: e.rtt.as_ref().map_or(0, |r| r.delay.0.as_micros() as u64),
                rate_bps: None,
                queue_packets: None,
                bottleneck: None,
            },
            ExpKind::Bandwidth => LinkInfo {
                delay_us: e
                    .bandwidth
                    .as_ref()
                    .map_or(0, |r| r.delay.0.as_micros() as u64),
                rate_bps: None,
                queue_packets: None,
                bottleneck: None,
            },
            ExpKind::Contention => {
                let c = e.contention.as_ref();
                LinkInfo {
                    delay_us: c.map_or(0, |c| c.delay.0.as_micros() as u64),
                    rate_bps: c.map(|c| c.rate.0),
                    queue_packets: c.map(|c| c.queue),
                    bottleneck: c.map(|c| c.bottleneck),
                }
            }
        }
    }

    /// Runs the points of one (repetition, experiment, system) group and
    /// hands each result to `done` as it finishes.
    fn run_group(
        &self,
        system: System,
        kind: ExpKind,
        points: &[&SingleIpPoint],
        logs: &Path,
        done: &mut PointDone<'_>,
    ) -> anyhow::Result<()> {
        let link = self.link_of(kind);
        let shared_linkem = match kind {
            ExpKind::Contention => None,
            _ => Some(self.linkem(
                &LinkSpecArgs {
                    delay: Duration::from_micros(link.delay_us),
                    rate: None,
                    log: None,
                },
                logs,
                "group",
            )?),
        };
        let procs = self.start_system(system, logs)?;
        for p in points {
            if self.shutdown.requested() {
                bail!("interrupted");
            }
            let began = Instant::now();
            let r = match kind {
                ExpKind::Rtt => self.rtt_point(p, logs),
                ExpKind::Bandwidth => self.bandwidth_point(p, logs, &procs),
                ExpKind::Contention => self.contention_point(p, logs),
            }
            .map(|mut rec| {
                rec.link = link.clone();
                rec
            });
            done(p, r, began.elapsed())?;
        }
        drop(procs);
        drop(shared_linkem);
        Ok(())
    }

    fn record(&self, p: &SingleIpPoint) -> SingleIpRecord {
        SingleIpRecord {
            schema: SINGLEIP_POINT_SCHEMA.into(),
            id: p.id(),
            point: p.clone(),
            placement: self.placement.clone(),
            link: LinkInfo {
                delay_us: 0,
                rate_bps: None,
                queue_packets: None,
                bottleneck: None,
            },
            congestion_control: self.exp.congestion_control.clone(),
            rtt: None,
            transfers: Vec::new(),
            contention: None,
            cpu: None,
            warnings: Vec::new(),
            finished_unix_s: 0.0,
        }
    }

    fn client(&self, i: usize, args: &[String], log: &Path) -> anyhow::Result<Proc> {
        let mut all: Vec<String> = vec!["singleip".into(), "probe".into()];
        all.extend(args.iter().cloned());
        self.connlab(
            &self.lab.clients[i],
            self.placement.clients,
            &all,
            log,
            None,
        )
    }

    fn rtt_point(&self, p: &SingleIpPoint, logs: &Path) -> anyhow::Result<SingleIpRecord> {
        let r = self.exp.rtt.as_ref().context("no [rtt] section")?;
        let json = logs.join(format!("{}.rtt.json", p.id()));
        let mut c = self.client(
            0,
            &[
                "rtt".into(),
                "--target".into(),
                format!("{VIP}:{PORT}"),
                "--count".into(),
                r.round_trips.to_string(),
                "--warmup".into(),
                r.warmup.to_string(),
                "--json".into(),
                json.display().to_string(),
            ],
            &logs.join(format!("{}.client.log", p.id())),
        )?;
        let secs = 60 + u64::from(r.round_trips + r.warmup) / 100;
        c.wait(Instant::now() + Duration::from_secs(secs), self.shutdown)?;
        let probe: ProbeRtt = read_json(&json)?;
        let mut rec = self.record(p);
        rec.rtt = Some(summarise_rtt(&probe.samples_us).context("no round trips measured")?);
        rec.finished_unix_s = unix_now();
        let _ = std::fs::remove_file(&json);
        Ok(rec)
    }

    fn bandwidth_point(
        &self,
        p: &SingleIpPoint,
        logs: &Path,
        procs: &[Proc],
    ) -> anyhow::Result<SingleIpRecord> {
        let b = self
            .exp
            .bandwidth
            .as_ref()
            .context("no [bandwidth] section")?;
        let count = b.transfers_of(p.param);
        let json = logs.join(format!("{}.get.json", p.id()));
        let mut c = self.client(
            0,
            &[
                "get".into(),
                "--target".into(),
                format!("{VIP}:{PORT}"),
                "--size".into(),
                p.param.to_string(),
                "--count".into(),
                count.to_string(),
                "--json".into(),
                json.display().to_string(),
            ],
            &logs.join(format!("{}.client.log", p.id())),
        )?;
        // CPU of the front process (first) and of the app-nodes (the rest
        // of an I/O server system's processes) while the transfers run.
        let cpu_of = |ps: &[Proc]| -> Option<f64> {
            ps.iter()
                .map(|p| connlab_os::cgroup::process_cpu_s(p.child.id()))
                .sum()
        };
        let (front, nodes) = procs.split_at(procs.len().min(1));
        let began = Instant::now();
        let (f0, n0) = (cpu_of(front), cpu_of(nodes));
        let secs = 60 + p.param.saturating_mul(u64::from(count)) * 8 / 20_000_000;
        c.wait(Instant::now() + Duration::from_secs(secs), self.shutdown)?;
        let (f1, n1) = (cpu_of(front), cpu_of(nodes));
        let elapsed_s = began.elapsed().as_secs_f64();
        let probe: Vec<ProbeTransfer> = read_json(&json)?;
        let mut rec = self.record(p);
        rec.transfers = probe.iter().map(transfer_result).collect();
        rec.cpu = Some(CpuUse {
            front_cpu_s: f0.zip(f1).map(|(a, b)| b - a),
            nodes_cpu_s: n0.zip(n1).filter(|_| !nodes.is_empty()).map(|(a, b)| b - a),
            bytes: probe.iter().map(|t| t.got).sum(),
            elapsed_s,
        });
        let short = rec.transfers.iter().filter(|t| t.got != t.size).count();
        if short > 0 {
            rec.warnings
                .push(format!("{short} transfers ended before their last byte"));
        }
        rec.finished_unix_s = unix_now();
        let _ = std::fs::remove_file(&json);
        Ok(rec)
    }

    fn contention_point(&self, p: &SingleIpPoint, logs: &Path) -> anyhow::Result<SingleIpRecord> {
        let c = self
            .exp
            .contention
            .as_ref()
            .context("no [contention] section")?;
        let id = p.id();
        let pkts = logs.join(format!("{id}.pkts.csv"));
        let front = c.bottleneck == Bottleneck::Front;
        let link = LinkSpecArgs {
            delay: c.delay.0,
            rate: (!front).then_some((c.rate.0, c.queue)),
            log: Some(pkts.clone()),
        };
        let _tbf = if front {
            Some(FrontTbf::install(&self.lab.front, c.rate.0, c.queue)?)
        } else {
            None
        };
        let mut lk = self.linkem(&link, logs, &id)?;
        std::thread::sleep(Duration::from_millis(300));
        let epoch = unix_now() + 1.0;
        let fg_at = epoch + c.foreground_delay.0.as_secs_f64();
        let bg = c.background.0;
        let stop = (p.param < bg).then_some(fg_at + c.background_after_small.0.as_secs_f64());
        let target = format!("{VIP}:{PORT}");
        let bin = c.bin.0.as_secs_f64();
        let get = |size: u64, start: f64, json: &Path| {
            let mut a: Vec<String> = vec![
                "get".into(),
                "--target".into(),
                target.clone(),
                "--size".into(),
                size.to_string(),
                "--start-at".into(),
                format!("{start:.6}"),
                "--epoch".into(),
                format!("{epoch:.6}"),
                "--bin".into(),
                format!("{bin}"),
                "--json".into(),
                json.display().to_string(),
            ];
            if let (Some(s), true) = (stop, size >= bg) {
                a.push("--stop-at".into());
                a.push(format!("{s:.6}"));
            }
            a
        };
        let names = ["fg", "bg1", "bg2"];
        let jsons: Vec<PathBuf> = names
            .iter()
            .map(|n| logs.join(format!("{id}.{n}.json")))
            .collect();
        let mut clients = Vec::new();
        for (i, name) in names.iter().enumerate() {
            let (size, start) = if i == 0 {
                (p.param, fg_at)
            } else {
                (bg, epoch)
            };
            clients.push(self.client(
                i,
                &get(size, start, &jsons[i]),
                &logs.join(format!("{id}.{name}.log")),
            )?);
        }
        let secs = c.foreground_delay.0.as_secs_f64()
            + (bg.max(p.param) as f64 * 8.0 * 3.0 / c.rate.0 as f64) * 2.0
            + 60.0;
        let deadline = Instant::now() + Duration::from_secs_f64(secs);
        for cl in &mut clients {
            cl.wait(deadline, self.shutdown)?;
        }
        lk.stop(Duration::from_secs(30));
        drop(lk);
        let mut streams = Vec::new();
        for (i, name) in names.iter().enumerate() {
            let t: Vec<ProbeTransfer> = read_json(&jsons[i])?;
            let t = t.into_iter().next().context("a client wrote no transfer")?;
            streams.push((name.to_string(), t));
            let _ = std::fs::remove_file(&jsons[i]);
        }
        let setup = ContentionSetup {
            background: bg,
            bin_s: bin,
            early_window_s: c.early_window.0.as_secs_f64(),
            rate_bps: c.rate.0,
            delay_ms: c.delay.0.as_secs_f64() * 1e3,
            client_addrs: [
                "198.18.1.1".into(),
                "198.18.1.2".into(),
                "198.18.1.3".into(),
            ],
            timeline_every: u32::try_from(bg.max(p.param) / 1448 / TIMELINE_PACKETS)
                .unwrap_or(u32::MAX)
                .max(TIMELINE_EVERY),
        };
        let mut rec = self.record(p);
        let mut reader = File::open(&pkts)
            .map(std::io::BufReader::new)
            .with_context(|| format!("opening linkem's log {}", pkts.display()))?;
        let result = analyse_contention(&setup, epoch, &streams, Some(&mut reader))
            .map_err(|e| anyhow!("{}: {e}", pkts.display()))?;
        let _ = std::fs::remove_file(&pkts);
        for s in &result.streams {
            if s.got < s.size && s.size < bg.max(p.param) {
                rec.warnings.push(format!(
                    "{} received {} of {}",
                    s.name,
                    s.got,
                    bytes_label(s.size)
                ));
            }
        }
        rec.contention = Some(result);
        rec.finished_unix_s = unix_now();
        Ok(rec)
    }
}

/// A `tbf` rate limit on the front host's egress (eth0), removed on drop.
struct FrontTbf {
    ns: String,
}

impl FrontTbf {
    fn install(ns: &str, rate_bps: u64, queue: u32) -> anyhow::Result<FrontTbf> {
        let st = Command::new("tc")
            .args([
                "-n", ns, "qdisc", "replace", "dev", "eth0", "root", "tbf", "rate",
            ])
            .arg(format!("{rate_bps}bit"))
            .args(["burst", "32kb", "limit"])
            .arg((u64::from(queue) * 1514).to_string())
            .status()
            .context("running tc")?;
        if !st.success() {
            bail!("tc qdisc replace ... tbf on the front's eth0 failed ({st})");
        }
        Ok(FrontTbf { ns: ns.to_string() })
    }
}

impl Drop for FrontTbf {
    fn drop(&mut self) {
        let _ = Command::new("tc")
            .args(["-n", &self.ns, "qdisc", "del", "dev", "eth0", "root"])
            .status();
    }
}

fn read_json<T: for<'de> serde::Deserialize<'de>>(path: &Path) -> anyhow::Result<T> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))
}
