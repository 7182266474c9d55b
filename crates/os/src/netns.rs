//! Hosts as network namespaces: a topology builder for experiments that need
//! a server host and several client hosts on one machine.
//!
//! Every host is a namespace `connlab-<pid>-<seq>-<host>` with loopback up and
//! an `eth0` holding `198.18.0.<i+1>/24` (198.18.0.0/15 is reserved for
//! benchmarking). In the bridge layout a further namespace `...-sw` holds the
//! bridge `br0` and one port `p<i>` per host; point-to-point joins two hosts
//! with one veth pair. Nothing is created in the caller's namespace, so
//! deleting the namespaces removes everything: [`Topology`] does so on drop,
//! and [`sweep_stale`] removes those of runs whose process died (it runs at
//! the start of every [`Topology::build`]). An optional rate limit puts a
//! `tbf` qdisc on both ends of every link (this kernel has no netem).
//!
//! The namespaces are made with iproute2 (`ip`, `tc`); processes enter them
//! with `setns(2)` (see [`Topology::command`]).

use std::ffi::OsStr;
use std::fs::File;
use std::net::Ipv4Addr;
use std::os::fd::AsRawFd;
use std::os::unix::process::CommandExt;
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// Prefix of every namespace connlab creates.
const PREFIX: &str = "connlab-";
/// Where `ip netns` keeps its namespace handles.
const NETNS_DIR: &str = "/run/netns";

/// Why a topology could not be built or used.
#[derive(Debug, thiserror::Error)]
pub enum NetnsError {
    /// The process may not create namespaces.
    #[error(
        "network namespaces need root (CAP_SYS_ADMIN and CAP_NET_ADMIN); run as root or with sudo"
    )]
    NeedsRoot,
    /// `ip` or `tc` is not installed.
    #[error("{tool} not found: install iproute2 (apt-get install iproute2)")]
    ToolMissing {
        /// The program.
        tool: &'static str,
    },
    /// An `ip`/`tc` call failed.
    #[error("`{cmd}` failed ({status}): {stderr}")]
    Command {
        /// The command line.
        cmd: String,
        /// Its exit status.
        status: String,
        /// What it printed on stderr.
        stderr: String,
    },
    /// No host of that name in the topology.
    #[error("no host {0:?} in this topology")]
    UnknownHost(String),
    /// The specification is invalid.
    #[error("bad topology: {0}")]
    BadSpec(String),
    /// A system call failed.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The error.
        source: std::io::Error,
    },
}

/// How the hosts are linked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Layout {
    /// Every host on one bridge (a switch), in its own namespace.
    Bridge,
    /// Exactly two hosts joined by one veth pair.
    PointToPoint,
}

/// What to build.
#[derive(Clone, Debug)]
pub struct TopologySpec {
    /// Host names (`[a-z0-9]{1,12}`, unique); host i gets `198.18.0.(i+1)`.
    pub hosts: Vec<String>,
    /// Rate limit of every link in bits per second (`tbf`, both directions).
    pub link_rate_bps: Option<u64>,
    /// How the hosts are linked.
    pub layout: Layout,
}

impl TopologySpec {
    /// Hosts on one bridge, no rate limit.
    pub fn bridge(hosts: &[&str]) -> Self {
        TopologySpec {
            hosts: hosts.iter().map(|h| h.to_string()).collect(),
            link_rate_bps: None,
            layout: Layout::Bridge,
        }
    }

    /// Two hosts on one veth pair, no rate limit.
    pub fn point_to_point(a: &str, b: &str) -> Self {
        TopologySpec {
            hosts: vec![a.to_string(), b.to_string()],
            link_rate_bps: None,
            layout: Layout::PointToPoint,
        }
    }

    /// With a rate limit on every link.
    pub fn with_link_rate(mut self, bps: Option<u64>) -> Self {
        self.link_rate_bps = bps;
        self
    }

    fn validate(&self) -> Result<(), NetnsError> {
        if self.hosts.is_empty() || self.hosts.len() > 250 {
            return Err(NetnsError::BadSpec(format!(
                "{} hosts: between 1 and 250",
                self.hosts.len()
            )));
        }
        if self.layout == Layout::PointToPoint && self.hosts.len() != 2 {
            return Err(NetnsError::BadSpec(
                "a point-to-point link joins exactly two hosts".into(),
            ));
        }
        for (i, h) in self.hosts.iter().enumerate() {
            let ok = !h.is_empty()
                && h.len() <= 12
                && h.chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
            if !ok || h == "sw" {
                return Err(NetnsError::BadSpec(format!(
                    "host name {h:?}: 1-12 lowercase letters and digits, not \"sw\""
                )));
            }
            if self.hosts[..i].contains(h) {
                return Err(NetnsError::BadSpec(format!("host {h:?} twice")));
            }
        }
        if let Some(bps) = self.link_rate_bps {
            if bps < 8_000 {
                return Err(NetnsError::BadSpec(format!(
                    "link rate {bps} bit/s: at least 8000"
                )));
            }
        }
        Ok(())
    }
}

/// Built hosts; deleted on drop.
#[derive(Debug)]
pub struct Topology {
    hosts: Vec<String>,
    namespaces: Vec<String>,
    switch: Option<String>,
    torn_down: bool,
}

static SEQ: AtomicU32 = AtomicU32::new(0);

impl Topology {
    /// Builds the namespaces, links, addresses and rate limits; removes stale
    /// namespaces of dead runs first. On failure nothing is left behind.
    pub fn build(spec: &TopologySpec) -> Result<Topology, NetnsError> {
        spec.validate()?;
        require_root()?;
        sweep_stale()?;
        let run = format!(
            "{PREFIX}{}-{}",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        );
        let mut topo = Topology {
            hosts: spec.hosts.clone(),
            namespaces: Vec::new(),
            switch: None,
            torn_down: false,
        };
        // On error `topo` drops and deletes what was made so far.
        topo.create(spec, &run)?;
        Ok(topo)
    }

    fn create(&mut self, spec: &TopologySpec, run: &str) -> Result<(), NetnsError> {
        for h in &spec.hosts {
            let ns = format!("{run}-{h}");
            ip(&["netns", "add", &ns])?;
            self.namespaces.push(ns.clone());
            ip(&["-n", &ns, "link", "set", "lo", "up"])?;
        }
        match spec.layout {
            Layout::Bridge => {
                let sw = format!("{run}-sw");
                ip(&["netns", "add", &sw])?;
                self.switch = Some(sw.clone());
                ip(&["-n", &sw, "link", "set", "lo", "up"])?;
                add_bridge(&sw, "br0")?;
                for (i, ns) in self.namespaces.iter().enumerate() {
                    let port = format!("p{i}");
                    // Both ends are created directly in their namespaces.
                    ip(&[
                        "-n", &sw, "link", "add", &port, "type", "veth", "peer", "name", "eth0",
                        "netns", ns,
                    ])?;
                    ip(&["-n", &sw, "link", "set", &port, "master", "br0"])?;
                    ip(&["-n", &sw, "link", "set", &port, "up"])?;
                    if let Some(bps) = spec.link_rate_bps {
                        tbf(&sw, &port, bps)?;
                    }
                }
            }
            Layout::PointToPoint => {
                let (a, b) = (&self.namespaces[0], &self.namespaces[1]);
                ip(&[
                    "-n", a, "link", "add", "eth0", "type", "veth", "peer", "name", "eth0",
                    "netns", b,
                ])?;
            }
        }
        for (i, ns) in self.namespaces.iter().enumerate() {
            let addr = format!("{}/24", host_ip(i));
            ip(&["-n", ns, "addr", "add", &addr, "dev", "eth0"])?;
            ip(&["-n", ns, "link", "set", "eth0", "up"])?;
            if let Some(bps) = spec.link_rate_bps {
                tbf(ns, "eth0", bps)?;
            }
        }
        wait_for_carrier(&self.namespaces)?;
        Ok(())
    }

    /// Host names in order.
    pub fn hosts(&self) -> &[String] {
        &self.hosts
    }

    fn index(&self, host: &str) -> Result<usize, NetnsError> {
        self.hosts
            .iter()
            .position(|h| h == host)
            .ok_or_else(|| NetnsError::UnknownHost(host.to_string()))
    }

    /// The IPv4 address of a host.
    pub fn host_addr(&self, host: &str) -> Option<Ipv4Addr> {
        self.index(host).ok().map(host_ip)
    }

    /// The namespace of a host (for logs and `ip netns exec`).
    pub fn namespace(&self, host: &str) -> Option<&str> {
        self.index(host).ok().map(|i| self.namespaces[i].as_str())
    }

    /// A command for `program` that runs inside the host's namespace: the
    /// namespace is opened now and entered with `setns(2)` between fork and
    /// exec.
    pub fn command(&self, host: &str, program: impl AsRef<OsStr>) -> Result<Command, NetnsError> {
        let ns = File::open(self.handle(host)?).map_err(|source| NetnsError::Io {
            what: format!("opening the namespace of {host}"),
            source,
        })?;
        let mut cmd = Command::new(program);
        // SAFETY: setns is async-signal-safe; `ns` lives in the closure, so
        // its descriptor is open in the child until exec (then closed: O_CLOEXEC).
        unsafe {
            cmd.pre_exec(move || {
                if libc::setns(ns.as_raw_fd(), libc::CLONE_NEWNET) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        Ok(cmd)
    }

    /// Runs `f` on a new thread that entered the host's namespace (sockets
    /// it creates live there). The calling thread is unaffected.
    pub fn run_in<T: Send>(
        &self,
        host: &str,
        f: impl FnOnce() -> T + Send,
    ) -> Result<T, NetnsError> {
        let i = self.index(host)?;
        run_in_namespace(&self.namespaces[i], f)
    }

    fn handle(&self, host: &str) -> Result<String, NetnsError> {
        let i = self.index(host)?;
        Ok(format!("{NETNS_DIR}/{}", self.namespaces[i]))
    }

    /// Deletes every namespace of the topology, reporting the first error.
    pub fn teardown(mut self) -> Result<(), NetnsError> {
        self.delete_all()
    }

    fn delete_all(&mut self) -> Result<(), NetnsError> {
        self.torn_down = true;
        let names: Vec<String> = self
            .switch
            .take()
            .into_iter()
            .chain(self.namespaces.drain(..))
            .collect();
        delete_namespaces(&names)
    }
}

impl Drop for Topology {
    fn drop(&mut self) {
        if !self.torn_down {
            let _ = self.delete_all();
        }
    }
}

/// Host i's address: 198.18.0.(i+1).
/// Waits (at most 10 s) until `eth0` in each of `namespaces` reports
/// carrier (`LOWER_UP`): a veth peer just moved and set up takes a moment.
pub fn wait_for_carrier(namespaces: &[String]) -> Result<(), NetnsError> {
    let deadline = Instant::now() + Duration::from_secs(10);
    for ns in namespaces {
        loop {
            let out = run_tool("ip", &["-n", ns, "-o", "link", "show", "dev", "eth0"])?;
            if out.contains("LOWER_UP") {
                break;
            }
            if Instant::now() > deadline {
                return Err(NetnsError::BadSpec(format!(
                    "eth0 in {ns} did not come up within 10 s: {out}"
                )));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    Ok(())
}

fn host_ip(i: usize) -> Ipv4Addr {
    Ipv4Addr::new(198, 18, 0, (i + 1) as u8)
}

/// Rate-limits `dev` in `ns` with a token bucket. The bucket holds 1 ms of
/// traffic (at least 64 KiB, so TSO/GSO super-packets of veth still pass),
/// and the queue may delay a packet up to 50 ms before dropping it.
fn tbf(ns: &str, dev: &str, bps: u64) -> Result<(), NetnsError> {
    let burst = (bps / 8 / 1000).max(64 * 1024);
    run_tool(
        "tc",
        &[
            "-n",
            ns,
            "qdisc",
            "add",
            "dev",
            dev,
            "root",
            "tbf",
            "rate",
            &format!("{bps}bit"),
            "burst",
            &burst.to_string(),
            "latency",
            "50ms",
        ],
    )
    .map(drop)
}

/// Runs `ip ARGS` in the calling thread's network namespace.
pub fn ip(args: &[&str]) -> Result<(), NetnsError> {
    run_tool("ip", args).map(drop)
}

/// Runs `f` on a new thread that entered network namespace `ns` (a name in
/// `/run/netns`); sockets, devices and `ip` children it creates belong
/// there. The calling thread is unaffected.
pub fn run_in_namespace<T: Send>(ns: &str, f: impl FnOnce() -> T + Send) -> Result<T, NetnsError> {
    let path = format!("{NETNS_DIR}/{ns}");
    let handle = File::open(&path).map_err(|source| NetnsError::Io {
        what: format!("opening {path}"),
        source,
    })?;
    run_in_namespace_of(&handle, ns, f)
}

/// Runs `f` on a new thread that entered the network namespace `handle`
/// refers to (an open `/proc/.../ns/net` or `/run/netns` file; `what` names
/// it in errors). The calling thread is unaffected.
pub fn run_in_namespace_of<T: Send>(
    handle: &File,
    what: &str,
    f: impl FnOnce() -> T + Send,
) -> Result<T, NetnsError> {
    std::thread::scope(|s| {
        s.spawn(move || {
            // SAFETY: a valid namespace descriptor; only this thread moves.
            if unsafe { libc::setns(handle.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
                return Err(NetnsError::Io {
                    what: format!("setns(CLONE_NEWNET) into {what}"),
                    source: std::io::Error::last_os_error(),
                });
            }
            Ok(f())
        })
        .join()
        .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
    })
}

/// Adds bridge `name` in namespace `ns` and sets it up: no STP, no
/// forwarding delay (ports forward at once).
pub fn add_bridge(ns: &str, name: &str) -> Result<(), NetnsError> {
    ip(&[
        "-n",
        ns,
        "link",
        "add",
        name,
        "type",
        "bridge",
        "forward_delay",
        "0",
        "stp_state",
        "0",
    ])?;
    ip(&["-n", ns, "link", "set", name, "up"])
}

/// Deletes the named namespaces, all of them, reporting the first error.
pub fn delete_namespaces(names: &[String]) -> Result<(), NetnsError> {
    let mut first = None;
    for ns in names {
        if let Err(e) = ip(&["netns", "delete", ns]) {
            first.get_or_insert(e);
        }
    }
    first.map_or(Ok(()), Err)
}

/// Runs an iproute2 tool; its stdout on success, a [`NetnsError::Command`] with
/// the command line and stderr otherwise.
fn run_tool(tool: &'static str, args: &[&str]) -> Result<String, NetnsError> {
    let out = Command::new(tool).args(args).output().map_err(|e| {
        if e.kind() == std::io::ErrorKind::NotFound {
            NetnsError::ToolMissing { tool }
        } else {
            NetnsError::Io {
                what: format!("running {tool}"),
                source: e,
            }
        }
    })?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(NetnsError::Command {
            cmd: format!("{tool} {}", args.join(" ")),
            status: out.status.to_string(),
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        })
    }
}

/// Deletes namespaces `connlab-<pid>-...` whose process is gone; returns their names.
pub fn sweep_stale() -> Result<Vec<String>, NetnsError> {
    let entries = match std::fs::read_dir(NETNS_DIR) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => {
            return Err(NetnsError::Io {
                what: format!("listing {NETNS_DIR}"),
                source,
            })
        }
    };
    let mut removed = Vec::new();
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(pid) = name
            .strip_prefix(PREFIX)
            .and_then(|rest| rest.split('-').next())
            .and_then(|p| p.parse::<i32>().ok())
        else {
            continue;
        };
        // SAFETY: signal 0 only checks that the process exists.
        let alive = unsafe { libc::kill(pid, 0) } == 0
            || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM);
        if !alive {
            match ip(&["netns", "delete", &name]) {
                Ok(()) => removed.push(name),
                // Another process swept it first.
                Err(_) if !std::path::Path::new(NETNS_DIR).join(&name).exists() => {}
                Err(e) => return Err(e),
            }
        }
    }
    Ok(removed)
}

/// Ok when this process may create network namespaces.
pub fn require_root() -> Result<(), NetnsError> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        Ok(())
    } else {
        Err(NetnsError::NeedsRoot)
    }
}
