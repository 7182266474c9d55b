//! The namespaces of a single-IP run (clients, router, front, nodes), their
//! sysctls, and the rate limits on the front's egress and the switch port.

use super::{node_addr, FRONT_NODE_SIDE};
use anyhow::{bail, Context};
use connlab_linkem::lab::{Lab, LabSpec};
use connlab_os::netns::{add_bridge, delete_namespaces, ip, run_in_namespace, wait_for_carrier};
use std::process::Command;
use std::time::{Duration, Instant};

// ------------------------------------------------------------------ namespaces

/// The linkem lab (clients, router, front) plus the node side (a switch
/// namespace and the node hosts); everything is deleted on drop.
pub(super) struct SiLab {
    pub(super) lab: Option<Lab>,
    /// The switch and node namespaces (ours to delete).
    pub(super) extra: Vec<String>,
    pub(super) clients: Vec<String>,
    pub(super) router: String,
    pub(super) front: String,
    /// The switch namespace (bridge `br0`; port `front` leads to the front).
    pub(super) switch: String,
    pub(super) nodes: Vec<String>,
    /// What setting the hosts up could not do but the sweep survives.
    pub(super) warnings: Vec<String>,
}

impl SiLab {
    pub(super) fn build(nodes: usize, cc: &str, front_cpu: u32) -> anyhow::Result<SiLab> {
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
            switch: String::new(),
            nodes: Vec::new(),
            warnings: Vec::new(),
        };
        si.create(&base, nodes, cc, front_cpu)?;
        Ok(si)
    }

    pub(super) fn create(
        &mut self,
        base: &str,
        nodes: usize,
        cc: &str,
        front_cpu: u32,
    ) -> anyhow::Result<()> {
        let sw = format!("{base}-si-sw");
        add_ns(&sw)?;
        self.extra.push(sw.clone());
        self.switch = sw.clone();
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

    pub(super) fn all(&self) -> Vec<String> {
        let mut v = self.clients.clone();
        v.push(self.router.clone());
        v.push(self.front.clone());
        v.extend(self.nodes.iter().cloned());
        v
    }

    pub(super) fn teardown(mut self) -> anyhow::Result<()> {
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

/// A `tbf` rate limit with a queue of `queue` full-size packets (in bytes)
/// on a device's egress: the front host's eth0 (its interface queue) or the
/// switch's port toward the front (the NAT switch); removed on drop.
pub(super) struct Tbf {
    ns: String,
    dev: String,
}

impl Tbf {
    pub(super) fn install(ns: &str, dev: &str, rate_bps: u64, queue: u32) -> anyhow::Result<Tbf> {
        let st = Command::new("tc")
            .args([
                "-n", ns, "qdisc", "replace", "dev", dev, "root", "tbf", "rate",
            ])
            .arg(format!("{rate_bps}bit"))
            .args(["burst", "32kb", "limit"])
            .arg((u64::from(queue) * crate::FULL_PACKET_BYTES).to_string())
            .status()
            .context("running tc")?;
        if !st.success() {
            bail!("tc qdisc replace ... tbf on {dev} in {ns} failed ({st})");
        }
        Ok(Tbf {
            ns: ns.to_string(),
            dev: dev.to_string(),
        })
    }
}

impl Drop for Tbf {
    fn drop(&mut self) {
        let _ = Command::new("tc")
            .args(["-n", &self.ns, "qdisc", "del", "dev", &self.dev, "root"])
            .status();
    }
}
