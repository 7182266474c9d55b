//! What a result was measured on: kernel, CPUs, clock source, open-files limit
//! and CPU placement, recorded with every result.

use serde::{Deserialize, Serialize};

/// The machine facts stored beside every measurement.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Environment {
    /// `uname -sr`, e.g. `Linux 6.18.0`.
    pub kernel: String,
    /// Online CPUs.
    pub cpu_count: usize,
    /// The kernel's clocksource (`tsc`, `kvm-clock`, ...).
    pub clock_source: String,
    /// The open-files soft limit in force.
    pub nofile_soft: u64,
    /// The open-files hard limit.
    pub nofile_hard: u64,
    /// CPUs this process may run on (`0,1`).
    pub cpu_affinity: String,
    /// The CPU the reporting thread ran on when the record was made.
    pub cpu_now: Option<usize>,
    /// The CPU model (`model name` of `/proc/cpuinfo`); absent in records
    /// made before it was kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_model: Option<String>,
}

/// What makes two machines the same for a measurement: CPU model and count,
/// kernel and clock source. Results of machines with different
/// fingerprints are never pooled.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Fingerprint {
    /// The CPU model, `unknown` if the record has none.
    pub cpu_model: String,
    /// Online CPUs.
    pub cpu_count: usize,
    /// `uname -sr`.
    pub kernel: String,
    /// The kernel's clocksource.
    pub clock_source: String,
}

impl std::fmt::Display for Fingerprint {
    /// `AMD EPYC x 2 CPUs, Linux 6.18.44, tsc`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} x {} CPUs, {}, {}",
            self.cpu_model, self.cpu_count, self.kernel, self.clock_source
        )
    }
}

impl Environment {
    /// Reads the current facts.
    pub fn capture() -> Environment {
        let uts = nix::sys::utsname::uname().ok();
        let kernel = uts
            .map(|u| {
                format!(
                    "{} {}",
                    u.sysname().to_string_lossy(),
                    u.release().to_string_lossy()
                )
            })
            .unwrap_or_else(|| "unknown".into());
        let clock_source = std::fs::read_to_string(
            "/sys/devices/system/clocksource/clocksource0/current_clocksource",
        )
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "unknown".into());
        let mut lim = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: `lim` is a valid, writable rlimit.
        unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) };
        Environment {
            kernel,
            cpu_count: online_cpus(),
            clock_source,
            nofile_soft: lim.rlim_cur,
            nofile_hard: lim.rlim_max,
            cpu_affinity: crate::current_affinity()
                .map(|c| c.to_string())
                .unwrap_or_default(),
            cpu_now: crate::current_cpu(),
            cpu_model: cpu_model(),
        }
    }

    /// The machine's [`Fingerprint`].
    pub fn fingerprint(&self) -> Fingerprint {
        Fingerprint {
            cpu_model: self.cpu_model.clone().unwrap_or_else(|| "unknown".into()),
            cpu_count: self.cpu_count,
            kernel: self.kernel.clone(),
            clock_source: self.clock_source.clone(),
        }
    }
}

/// The first `model name` of `/proc/cpuinfo`, whitespace collapsed.
fn cpu_model() -> Option<String> {
    let text = std::fs::read_to_string("/proc/cpuinfo").ok()?;
    parse_cpu_model(&text)
}

fn parse_cpu_model(cpuinfo: &str) -> Option<String> {
    cpuinfo.lines().find_map(|l| {
        let (key, value) = l.split_once(':')?;
        (key.trim() == "model name")
            .then(|| value.split_whitespace().collect::<Vec<_>>().join(" "))
            .filter(|v| !v.is_empty())
    })
}

/// The running kernel's (major, minor) version, `None` if unreadable: what
/// io_uring feature probes compare against.
pub fn kernel_version() -> Option<(u32, u32)> {
    let uts = nix::sys::utsname::uname().ok()?;
    parse_kernel_version(&uts.release().to_string_lossy())
}

/// `6.18.44-fc` -> (6, 18).
pub fn parse_kernel_version(release: &str) -> Option<(u32, u32)> {
    let mut parts = release.split(|c: char| !c.is_ascii_digit());
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next()?.parse().ok()?;
    Some((major, minor))
}

/// The machine's online CPUs: not `available_parallelism`, which counts only
/// the CPUs this process may run on, so a pinned client would record a
/// one-CPU machine (the affinity has its own field).
fn online_cpus() -> usize {
    // SAFETY: sysconf only reads a configuration value.
    let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    if n > 0 {
        n as usize
    } else {
        std::thread::available_parallelism().map_or(1, |n| n.get())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cpu_model_and_the_fingerprint() {
        let info = "processor\t: 0\nmodel name\t: AMD  EPYC 7B13\nflags\t: fpu\n";
        assert_eq!(parse_cpu_model(info).as_deref(), Some("AMD EPYC 7B13"));
        assert_eq!(parse_cpu_model("processor : 0\n"), None);
        let mut e = Environment::capture();
        e.cpu_model = None;
        let f = e.fingerprint();
        assert_eq!(f.cpu_model, "unknown");
        assert!(
            f.to_string().contains(&format!("x {} CPUs", e.cpu_count)),
            "{f}"
        );
        assert_eq!(
            Environment::capture().fingerprint(),
            Environment::capture().fingerprint()
        );
    }

    #[test]
    fn a_pinned_thread_still_records_every_online_cpu() {
        let online = online_cpus();
        // Pin a fresh thread to one CPU: the record must still name the machine.
        let count = std::thread::spawn(|| {
            // SAFETY: a zeroed cpu_set_t is an empty set.
            let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
            // SAFETY: CPU 0 lies inside the set's bounds.
            unsafe { libc::CPU_SET(0, &mut set) };
            // SAFETY: sets this thread's own affinity from a valid set.
            unsafe { libc::sched_setaffinity(0, size_of_val(&set), &set) };
            Environment::capture().cpu_count
        })
        .join()
        .unwrap();
        assert_eq!(count, online);
        assert!(online >= 1);
    }
}
