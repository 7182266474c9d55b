//! CPU quotas for processes with the cgroup `cpu` controller, so that a
//! backend (nginx, `connlab serve`) is limited to a share of a CPU and is the
//! bottleneck of an experiment instead of the machine's shared cores.
//!
//! cgroup v1 (`/sys/fs/cgroup/cpu`: `cpu.cfs_quota_us` / `cpu.cfs_period_us`)
//! is used when mounted, else cgroup v2 (`cpu.max`, the `cpu` controller
//! enabled in the parent's `cgroup.subtree_control`). Groups are named
//! `connlab-<pid>-<name>`; [`sweep_stale`] removes those of dead processes.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

/// The CFS period used, microseconds.
pub const PERIOD_US: u64 = 100_000;

const V1_ROOT: &str = "/sys/fs/cgroup/cpu";
const V2_ROOTS: [&str; 2] = ["/sys/fs/cgroup", "/sys/fs/cgroup/unified"];
const PREFIX: &str = "connlab-";

/// Why a quota could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum CgroupError {
    /// No hierarchy with the `cpu` controller is mounted.
    #[error("no cgroup cpu controller: neither {V1_ROOT} (v1) nor a v2 hierarchy with the cpu controller is mounted")]
    NoController,
    /// A share out of range.
    #[error("CPU quota {0}: give a share of one CPU between 0.01 and 64 (e.g. 0.25 or 25%)")]
    BadShare(f64),
    /// A cgroup file could not be written (often: not root).
    #[error("{path}: {source} (cgroups need root)")]
    Io {
        /// The file or directory.
        path: String,
        /// The error.
        source: io::Error,
    },
}

/// Which cgroup version holds the group.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CgroupVersion {
    /// `/sys/fs/cgroup/cpu`, `cpu.cfs_quota_us`.
    V1,
    /// Unified hierarchy, `cpu.max`.
    V2,
}

/// A cgroup with a CPU quota; removed on drop (its processes, if any are
/// left, are moved to the parent first).
#[derive(Debug)]
pub struct CpuQuota {
    dir: PathBuf,
    version: CgroupVersion,
    share: f64,
}

fn io_err(path: &Path) -> impl FnOnce(io::Error) -> CgroupError + '_ {
    move |source| CgroupError::Io {
        path: path.display().to_string(),
        source,
    }
}

fn write(path: &Path, text: &str) -> Result<(), CgroupError> {
    fs::write(path, text).map_err(io_err(path))
}

/// Parses a share of one CPU: `0.25`, `25%`, `1.5`.
pub fn parse_share(text: &str) -> Result<f64, String> {
    let t = text.trim();
    let v = match t.strip_suffix('%') {
        Some(p) => p.trim().parse::<f64>().map(|p| p / 100.0),
        None => t.parse::<f64>(),
    }
    .map_err(|_| format!("{text:?}: write a share of one CPU like 0.25 or 25%"))?;
    if v.is_finite() && (0.01..=64.0).contains(&v) {
        Ok(v)
    } else {
        Err(format!("{text:?}: between 1% and 6400% of one CPU"))
    }
}

fn v2_root() -> Option<PathBuf> {
    V2_ROOTS.iter().map(PathBuf::from).find(|r| {
        fs::read_to_string(r.join("cgroup.controllers"))
            .is_ok_and(|c| c.split_whitespace().any(|x| x == "cpu"))
    })
}

impl CpuQuota {
    /// Creates `connlab-<pid>-<name>` limited to `share` of one CPU.
    pub fn create(name: &str, share: f64) -> Result<CpuQuota, CgroupError> {
        if !(share.is_finite() && (0.01..=64.0).contains(&share)) {
            return Err(CgroupError::BadShare(share));
        }
        let _ = sweep_stale();
        let leaf = format!("{PREFIX}{}-{name}", std::process::id());
        let quota = (share * PERIOD_US as f64).round() as u64;
        if Path::new(V1_ROOT).join("cpu.cfs_quota_us").exists() {
            let dir = Path::new(V1_ROOT).join(leaf);
            fs::create_dir_all(&dir).map_err(io_err(&dir))?;
            let q = CpuQuota {
                dir,
                version: CgroupVersion::V1,
                share,
            };
            write(&q.dir.join("cpu.cfs_period_us"), &PERIOD_US.to_string())?;
            write(&q.dir.join("cpu.cfs_quota_us"), &quota.to_string())?;
            return Ok(q);
        }
        let root = v2_root().ok_or(CgroupError::NoController)?;
        // The controller must be enabled for the children of the root.
        let _ = fs::write(root.join("cgroup.subtree_control"), "+cpu");
        let dir = root.join(leaf);
        fs::create_dir_all(&dir).map_err(io_err(&dir))?;
        let q = CpuQuota {
            dir,
            version: CgroupVersion::V2,
            share,
        };
        write(&q.dir.join("cpu.max"), &format!("{quota} {PERIOD_US}"))?;
        Ok(q)
    }

    /// Moves process `pid` (and the children it makes later) into the group.
    pub fn add(&self, pid: u32) -> Result<(), CgroupError> {
        write(&self.procs_file(), &pid.to_string())
    }

    /// `cgroup.procs` of the group: write a pid there to move it in (what
    /// [`CpuQuota::add`] does; a child can write its own pid before exec).
    pub fn procs_file(&self) -> PathBuf {
        self.dir.join("cgroup.procs")
    }

    /// The group's directory.
    pub fn path(&self) -> &Path {
        &self.dir
    }

    /// The cgroup version in use.
    pub fn version(&self) -> CgroupVersion {
        self.version
    }

    /// The share of one CPU.
    pub fn share(&self) -> f64 {
        self.share
    }

    /// Processes in the group now.
    pub fn pids(&self) -> Vec<u32> {
        fs::read_to_string(self.procs_file())
            .unwrap_or_default()
            .lines()
            .filter_map(|l| l.trim().parse().ok())
            .collect()
    }

    /// Periods in which the group ran out of quota, and the time it waited
    /// (seconds), from `cpu.stat`.
    pub fn throttling(&self) -> Option<(u64, f64)> {
        let text = fs::read_to_string(self.dir.join("cpu.stat")).ok()?;
        let get = |k: &str| {
            text.lines()
                .find_map(|l| l.strip_prefix(k)?.trim().parse::<u64>().ok())
        };
        match self.version {
            CgroupVersion::V1 => {
                Some((get("nr_throttled ")?, get("throttled_time ")? as f64 / 1e9))
            }
            CgroupVersion::V2 => {
                Some((get("nr_throttled ")?, get("throttled_usec ")? as f64 / 1e6))
            }
        }
    }
}

impl Drop for CpuQuota {
    fn drop(&mut self) {
        remove(&self.dir);
    }
}

/// Moves any process left to the parent group, then removes the directory.
fn remove(dir: &Path) {
    if let (Some(parent), Ok(procs)) = (dir.parent(), fs::read_to_string(dir.join("cgroup.procs")))
    {
        for pid in procs.lines() {
            let _ = fs::write(parent.join("cgroup.procs"), pid.trim());
        }
    }
    let _ = fs::remove_dir(dir);
}

/// `cgroup.procs` of the group `connlab-<pid>-<name>` made by process `pid`
/// (for example a `connlab cap` child), if it exists.
pub fn procs_path(pid: u32, name: &str) -> Option<PathBuf> {
    let leaf = format!("{PREFIX}{pid}-{name}");
    std::iter::once(PathBuf::from(V1_ROOT))
        .chain(v2_root())
        .map(|r| r.join(&leaf).join("cgroup.procs"))
        .find(|p| p.exists())
}

/// CPU seconds (user + system) of the processes listed in `procs`.
pub fn group_cpu_s(procs: &Path) -> f64 {
    fs::read_to_string(procs)
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|pid| pid.parse().ok())
        .filter_map(process_cpu_s)
        .sum()
}

/// CPU seconds of process `pid` so far (None when it is gone): exact for a
/// process of up to 64 threads ([`crate::process::process_cpu_s`]). The 10 ms
/// ticks of /proc/PID/stat read a backend that ran 5 ms in a 1 s window
/// as 0 whenever no tick fell in its bursts, as happened under a loaded
/// test run.
pub fn process_cpu_s(pid: u32) -> Option<f64> {
    crate::process::process_cpu_s(i32::try_from(pid).ok()?)
}

/// Removes the `connlab-<pid>-*` groups whose process is gone; returns them.
pub fn sweep_stale() -> Vec<PathBuf> {
    let mut removed = Vec::new();
    let roots: Vec<PathBuf> = std::iter::once(PathBuf::from(V1_ROOT))
        .chain(v2_root())
        .collect();
    for root in roots {
        let Ok(entries) = fs::read_dir(&root) else {
            continue;
        };
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            let Some(pid) = name
                .strip_prefix(PREFIX)
                .and_then(|r| r.split('-').next())
                .and_then(|p| p.parse::<u32>().ok())
            else {
                continue;
            };
            if !Path::new(&format!("/proc/{pid}")).exists() {
                remove(&e.path());
                removed.push(e.path());
            }
        }
    }
    removed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_parse() {
        assert_eq!(parse_share("25%"), Ok(0.25));
        assert_eq!(parse_share("0.5"), Ok(0.5));
        assert_eq!(parse_share("150%"), Ok(1.5));
        assert!(parse_share("0").is_err());
        assert!(parse_share("lots").is_err());
        assert!(parse_share("-10%").is_err());
    }

    #[test]
    fn a_quota_limits_a_busy_process() {
        connlab_testkit::require_root!("the CPU quota check");
        connlab_testkit::skip_unless!(
            Path::new(V1_ROOT).exists() || v2_root().is_some(),
            "needs a cgroup cpu controller"
        );
        let q = CpuQuota::create("test", 0.2).unwrap();
        assert!(q.path().exists());
        let mut child = std::process::Command::new("sh")
            .args(["-c", "while :; do :; done"])
            .spawn()
            .unwrap();
        q.add(child.id()).unwrap();
        assert_eq!(q.pids(), vec![child.id()]);
        std::thread::sleep(std::time::Duration::from_millis(600));
        let (throttled, _) = q.throttling().unwrap();
        child.kill().unwrap();
        child.wait().unwrap();
        // A busy loop under a 20% quota runs out of quota in most periods.
        assert!(throttled >= 2, "throttled in {throttled} periods");
        let dir = q.path().to_path_buf();
        drop(q);
        assert!(!dir.exists(), "the group is removed on drop");
    }
}
