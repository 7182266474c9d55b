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
            cpu_count: std::thread::available_parallelism().map_or(1, |n| n.get()),
            clock_source,
            nofile_soft: lim.rlim_cur,
            nofile_hard: lim.rlim_max,
            cpu_affinity: crate::current_affinity()
                .map(|c| c.to_string())
                .unwrap_or_default(),
            cpu_now: crate::current_cpu(),
        }
    }
}
