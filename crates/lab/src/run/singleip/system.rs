//! Starting the processes of a point: linkem, the system under test (I/O
//! server, NAT or HAProxy) and its nodes, and waiting until they answer.

use super::procs::{ns_command, Proc};
use super::{node_addr, Ctx, LinkSpecArgs, FRONT_NODE_SIDE, NODE_PORT, PORT, SERVER_PORT, VIP};
use crate::run::child::log_reason;
use crate::System;
use anyhow::{bail, Context};
use connlab_os::child::Child;
use connlab_os::netns::run_in_namespace;
use std::ffi::OsStr;
use std::fs::File;
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

impl Ctx<'_> {
    /// Starts `program args` in `ns`; output to `log`; waits for `ready`
    /// in the output (20 s at most).
    pub(super) fn start<S: AsRef<OsStr>>(
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
        let child = Child::spawn(&mut cmd)
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
                    bail!("{} exited ({s}) at start: {}", p.name, log_reason(log));
                }
                if Instant::now() > deadline || self.shutdown.requested() {
                    bail!("{}: no {ready:?} within 20 s: {}", p.name, log_reason(log));
                }
                std::thread::sleep(Duration::from_millis(25));
            }
        }
        Ok(p)
    }

    pub(super) fn connlab<S: AsRef<OsStr>>(
        &self,
        ns: &str,
        cpu: u32,
        args: &[S],
        log: &Path,
        ready: Option<&str>,
    ) -> anyhow::Result<Proc> {
        self.start(ns, Some(cpu), self.exe.as_os_str(), args, log, ready)
    }

    pub(super) fn linkem(
        &self,
        link: &LinkSpecArgs,
        logs: &Path,
        tag: &str,
    ) -> anyhow::Result<Proc> {
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
        if link.per_packet {
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
    pub(super) fn start_system(&self, system: System, logs: &Path) -> anyhow::Result<Vec<Proc>> {
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
    pub(super) fn wait_reachable(&self, procs: &mut [Proc]) -> anyhow::Result<()> {
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
                    bail!("{} exited ({s}): {}", p.name, log_reason(&p.log));
                }
            }
            if Instant::now() > deadline || self.shutdown.requested() {
                bail!("{target} not reachable from the clients within 20 s");
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}
