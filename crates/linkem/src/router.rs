//! The router's plumbing in one network namespace: two TUN devices and policy
//! routing that sends every packet arriving on the left interface into the
//! first TUN and every packet arriving on the right interface into the
//! second. The emulator reads a packet from a TUN (so the TUN it came from
//! is its direction), holds it, and writes it back into the same TUN; the
//! kernel then routes it by the main table (`iif lkN` has no rule) out of the
//! other interface.
//!
//! ```text
//!   left --iif LEFT--> rule: table T -> default dev lk0 --read--> emulator
//!   emulator --write lk0--> main table --> RIGHT --> right
//! ```
//!
//! Forwarding is switched on and reverse-path filtering off (a packet from
//! the left comes back in on `lk0`, which the main table does not route to
//! its source); the previous values are restored on drop, with the rules.

use crate::tun::Tun;
use crate::{ip, LinkemError};
use std::fs::File;
use std::os::fd::AsRawFd;

/// What to plumb.
#[derive(Clone, Debug)]
pub struct RouterSpec {
    /// Interface facing the left hosts (packets arriving here go left to right).
    pub left_if: String,
    /// Interface facing the right hosts.
    pub right_if: String,
    /// Names of the TUN devices (left to right, right to left).
    pub tun_names: [String; 2],
    /// Routing tables used for the two rules.
    pub tables: [u32; 2],
    /// Use GSO/checksum offload on the TUN devices (whole super-packets per read).
    pub offload: bool,
}

impl RouterSpec {
    /// Defaults: TUNs `lk0`/`lk1`, tables 7201/7202, offload on.
    pub fn new(left_if: &str, right_if: &str) -> Self {
        RouterSpec {
            left_if: left_if.to_string(),
            right_if: right_if.to_string(),
            tun_names: ["lk0".into(), "lk1".into()],
            tables: [7201, 7202],
            offload: true,
        }
    }
}

/// The plumbing in place; undone on drop.
#[derive(Debug)]
pub struct Router {
    tuns: Option<[Tun; 2]>,
    netns: File,
    rules: Vec<Vec<String>>,
    sysctls: Vec<(String, String)>,
}

/// Packets a TUN device queues for the emulator before the kernel drops
/// (default 500: 25 ms of a 20-packets-per-millisecond stream, less than a
/// busy two-core host may keep the emulator thread waiting). Drops that still
/// happen are reported as `dropped_at_tun`.
const TUN_QUEUE_PACKETS: u32 = 10_000;

impl Router {
    /// Plumbs the calling thread's network namespace. Needs root.
    pub fn setup(spec: &RouterSpec) -> Result<Router, LinkemError> {
        connlab_os::netns::require_root().map_err(|_| LinkemError::NeedsRoot)?;
        if !std::path::Path::new("/dev/net/tun").exists() {
            return Err(LinkemError::NoTun);
        }
        for dev in [&spec.left_if, &spec.right_if] {
            if ip(&["link", "show", "dev", dev]).is_err() {
                return Err(LinkemError::BadConfig(format!(
                    "no interface {dev:?} in this network namespace"
                )));
            }
        }
        let netns = File::open("/proc/thread-self/ns/net")
            .map_err(|e| LinkemError::io("opening /proc/thread-self/ns/net", e))?;
        let mut r = Router {
            tuns: None,
            netns,
            rules: Vec::new(),
            sysctls: Vec::new(),
        };
        // Before the TUNs exist, so they inherit `default`.
        r.sysctl("net/ipv4/ip_forward", "1")?;
        for dev in ["all", "default", &spec.left_if, &spec.right_if] {
            r.sysctl(&format!("net/ipv4/conf/{dev}/rp_filter"), "0")?;
        }
        let tuns = [
            Tun::open(&spec.tun_names[0], spec.offload)?,
            Tun::open(&spec.tun_names[1], spec.offload)?,
        ];
        for (i, (tun, iif)) in tuns.iter().zip([&spec.left_if, &spec.right_if]).enumerate() {
            let table = spec.tables[i].to_string();
            let queue = TUN_QUEUE_PACKETS.to_string();
            ip(&["link", "set", tun.name(), "txqueuelen", &queue, "up"])?;
            ip(&[
                "route",
                "replace",
                "default",
                "dev",
                tun.name(),
                "table",
                &table,
            ])?;
            let rule: Vec<String> = ["iif", iif, "lookup", &table, "priority", &table]
                .iter()
                .map(|s| s.to_string())
                .collect();
            let mut add = vec!["rule", "add"];
            add.extend(rule.iter().map(String::as_str));
            ip(&add)?;
            r.rules.push(rule);
        }
        r.tuns = Some(tuns);
        Ok(r)
    }

    /// The two TUN devices: left to right, right to left.
    pub fn tuns(&self) -> &[Tun; 2] {
        // Set at the end of `setup`, the only constructor.
        self.tuns.as_ref().unwrap_or_else(|| unreachable!())
    }

    fn sysctl(&mut self, key: &str, value: &str) -> Result<(), LinkemError> {
        let path = format!("/proc/sys/{key}");
        let old = std::fs::read_to_string(&path)
            .map_err(|e| LinkemError::io(format!("reading {path}"), e))?;
        std::fs::write(&path, value).map_err(|e| LinkemError::io(format!("writing {path}"), e))?;
        self.sysctls.push((path, old.trim().to_string()));
        Ok(())
    }

    fn undo(&mut self) {
        self.tuns = None;
        for rule in self.rules.drain(..) {
            let mut del = vec!["rule", "del"];
            del.extend(rule.iter().map(String::as_str));
            let _ = ip(&del);
        }
        for (path, old) in self.sysctls.drain(..).rev() {
            let _ = std::fs::write(path, old);
        }
    }
}

impl Drop for Router {
    fn drop(&mut self) {
        // Undo in the namespace the router was set up in, whichever thread drops it.
        let fd = self.netns.as_raw_fd();
        std::thread::scope(|s| {
            s.spawn(|| {
                // SAFETY: a valid namespace descriptor; only this thread moves.
                if unsafe { libc::setns(fd, libc::CLONE_NEWNET) } == 0 {
                    self.undo();
                }
            });
        });
    }
}
