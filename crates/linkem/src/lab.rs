//! A `left hosts - router - right hosts` topology of network namespaces.
//!
//! Namespaces are named `connlab-<pid>-lk<seq>-<host>` (hosts `l0`, `l1`,
//! ..., `router`, `r0`, ...), the scheme of `connlab_os::netns`, so
//! [`connlab_os::netns::sweep_stale`] (run first by [`Lab::build`] and by
//! every `Topology::build`) removes those of a killed run. The router holds
//! two bridges, `brl` (198.18.1.254/24) and `brr` (198.18.2.254/24), with one
//! veth port per host; left host i is 198.18.1.(i+1) and right host i is
//! 198.18.2.(i+1), each with a default route via the router. IPv6 is off
//! (no router solicitations in the log) and forwarding on, so the router
//! forwards in the kernel until a [`crate::Router`] diverts traffic through
//! the emulator. Nothing is created in the caller's namespace; [`Lab`]
//! deletes the namespaces on drop.

use crate::{ip, LinkemError};
use std::net::Ipv4Addr;
use std::sync::atomic::{AtomicU32, Ordering};

/// The router's interface towards the left hosts.
pub const LEFT_IF: &str = "brl";
/// The router's interface towards the right hosts.
pub const RIGHT_IF: &str = "brr";

/// How many hosts on each side.
#[derive(Clone, Copy, Debug)]
pub struct LabSpec {
    /// Hosts on the left (1-200).
    pub left_hosts: usize,
    /// Hosts on the right (1-200).
    pub right_hosts: usize,
}

impl Default for LabSpec {
    fn default() -> Self {
        LabSpec {
            left_hosts: 1,
            right_hosts: 1,
        }
    }
}

/// The built namespaces; deleted on drop.
#[derive(Debug)]
pub struct Lab {
    router: String,
    left: Vec<String>,
    right: Vec<String>,
    torn_down: bool,
}

static SEQ: AtomicU32 = AtomicU32::new(0);

impl Lab {
    /// Builds the topology (after sweeping namespaces of dead runs). On
    /// failure nothing is left behind.
    pub fn build(spec: &LabSpec) -> Result<Lab, LinkemError> {
        for n in [spec.left_hosts, spec.right_hosts] {
            if !(1..=200).contains(&n) {
                return Err(LinkemError::BadConfig(format!(
                    "{n} hosts on a side: between 1 and 200"
                )));
            }
        }
        connlab_os::netns::require_root().map_err(|_| LinkemError::NeedsRoot)?;
        connlab_os::netns::sweep_stale()?;
        let run = format!(
            "connlab-{}-lk{}",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        );
        let mut lab = Lab {
            router: String::new(),
            left: Vec::new(),
            right: Vec::new(),
            torn_down: false,
        };
        // On error `lab` drops and deletes what was made so far.
        lab.create(spec, &run)?;
        Ok(lab)
    }

    fn create(&mut self, spec: &LabSpec, run: &str) -> Result<(), LinkemError> {
        let router = format!("{run}-router");
        add_namespace(&router)?;
        self.router = router.clone();
        in_namespace(&router, || write_sysctl("net/ipv4/ip_forward", "1"))??;
        for (br, addr) in [(LEFT_IF, "198.18.1.254/24"), (RIGHT_IF, "198.18.2.254/24")] {
            connlab_os::netns::add_bridge(&router, br)?;
            ip(&["-n", &router, "addr", "add", addr, "dev", br])?;
        }
        for (side, n) in [(0u8, spec.left_hosts), (1u8, spec.right_hosts)] {
            for i in 0..n {
                let (letter, br) = if side == 0 {
                    ("l", LEFT_IF)
                } else {
                    ("r", RIGHT_IF)
                };
                let host = format!("{run}-{letter}{i}");
                add_namespace(&host)?;
                if side == 0 {
                    self.left.push(host.clone());
                } else {
                    self.right.push(host.clone());
                }
                let port = format!("{letter}{i}");
                ip(&[
                    "-n", &router, "link", "add", &port, "type", "veth", "peer", "name", "eth0",
                    "netns", &host,
                ])?;
                ip(&["-n", &router, "link", "set", &port, "master", br])?;
                ip(&["-n", &router, "link", "set", &port, "up"])?;
                let addr = format!("{}/24", host_addr(side, i));
                let gw = host_addr(side, 253).to_string();
                ip(&["-n", &host, "addr", "add", &addr, "dev", "eth0"])?;
                ip(&["-n", &host, "link", "set", "eth0", "up"])?;
                ip(&["-n", &host, "route", "add", "default", "via", &gw])?;
            }
        }
        let hosts: Vec<String> = self.left.iter().chain(&self.right).cloned().collect();
        Ok(connlab_os::netns::wait_for_carrier(&hosts)?)
    }

    /// The router's namespace.
    pub fn router_ns(&self) -> &str {
        &self.router
    }

    /// The namespaces of the left hosts.
    pub fn left_ns(&self) -> &[String] {
        &self.left
    }

    /// The namespaces of the right hosts.
    pub fn right_ns(&self) -> &[String] {
        &self.right
    }

    /// Left host i's address (198.18.1.(i+1)).
    pub fn left_addr(&self, i: usize) -> Ipv4Addr {
        host_addr(0, i)
    }

    /// Right host i's address (198.18.2.(i+1)).
    pub fn right_addr(&self, i: usize) -> Ipv4Addr {
        host_addr(1, i)
    }

    /// Every namespace of the lab.
    pub fn namespaces(&self) -> Vec<String> {
        std::iter::once(self.router.clone())
            .chain(self.left.iter().cloned())
            .chain(self.right.iter().cloned())
            .filter(|n| !n.is_empty())
            .collect()
    }

    /// Deletes the namespaces, reporting the first error.
    pub fn teardown(mut self) -> Result<(), LinkemError> {
        self.delete_all()
    }

    fn delete_all(&mut self) -> Result<(), LinkemError> {
        self.torn_down = true;
        let names = self.namespaces();
        self.left.clear();
        self.right.clear();
        self.router.clear();
        Ok(connlab_os::netns::delete_namespaces(&names)?)
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        if !self.torn_down {
            let _ = self.delete_all();
        }
    }
}

fn host_addr(side: u8, i: usize) -> Ipv4Addr {
    Ipv4Addr::new(198, 18, 1 + side, (i + 1) as u8)
}

fn add_namespace(ns: &str) -> Result<(), LinkemError> {
    ip(&["netns", "add", ns])?;
    in_namespace(ns, || -> Result<(), LinkemError> {
        // Best effort: without IPv6 in the kernel these files are absent.
        for dev in ["all", "default"] {
            let _ = write_sysctl(&format!("net/ipv6/conf/{dev}/disable_ipv6"), "1");
        }
        ip(&["link", "set", "lo", "up"])
    })?
}

fn write_sysctl(key: &str, value: &str) -> Result<(), LinkemError> {
    let path = format!("/proc/sys/{key}");
    std::fs::write(&path, value).map_err(|e| LinkemError::io(format!("writing {path}"), e))
}

/// Runs `f` on a new thread that entered network namespace `ns`
/// ([`connlab_os::netns::run_in_namespace`]).
pub fn in_namespace<T: Send>(ns: &str, f: impl FnOnce() -> T + Send) -> Result<T, LinkemError> {
    Ok(connlab_os::netns::run_in_namespace(ns, f)?)
}
