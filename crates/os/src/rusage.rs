//! CPU time accounting through `getrusage`, including reaped children so the
//! process-per-connection engine's work is counted.

/// User and system CPU seconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize)]
pub struct CpuTimes {
    /// User-mode CPU seconds.
    pub user_s: f64,
    /// Kernel-mode CPU seconds.
    pub sys_s: f64,
}

impl CpuTimes {
    /// CPU time of this process (all threads) plus every child it has reaped.
    pub fn self_and_children() -> CpuTimes {
        let a = usage(libc::RUSAGE_SELF);
        let b = usage(libc::RUSAGE_CHILDREN);
        CpuTimes {
            user_s: a.user_s + b.user_s,
            sys_s: a.sys_s + b.sys_s,
        }
    }

    /// CPU time of the calling thread only.
    pub fn thread() -> CpuTimes {
        usage(libc::RUSAGE_THREAD)
    }

    /// Voluntary context switches of the calling thread so far: the times
    /// it slept and was woken.
    pub fn thread_voluntary_switches() -> u64 {
        // SAFETY: an all-zero rusage is a valid value of this plain C struct.
        let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: `ru` is valid and writable.
        if unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut ru) } != 0 {
            return 0;
        }
        ru.ru_nvcsw.max(0) as u64
    }

    /// The difference `self - earlier`.
    pub fn since(&self, earlier: &CpuTimes) -> CpuTimes {
        CpuTimes {
            user_s: self.user_s - earlier.user_s,
            sys_s: self.sys_s - earlier.sys_s,
        }
    }

    /// User plus system seconds.
    pub fn total_s(&self) -> f64 {
        self.user_s + self.sys_s
    }
}

/// Peak resident set size of this process image so far, in KiB: user-space
/// memory only; socket buffers live in the kernel and are not in it.
///
/// Reads `VmHWM` from `/proc/self/status`, not `ru_maxrss`: Linux carries
/// `ru_maxrss` across `execve`, so a process started by a large parent (a
/// Python harness, say) would report the parent's peak as its own.
pub fn max_rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| parse_vm_hwm(&s))
        .unwrap_or_else(|| {
            // SAFETY: an all-zero rusage is a valid value of this plain C struct.
            let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
            // SAFETY: `ru` is valid and writable.
            if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) } != 0 {
                return 0;
            }
            ru.ru_maxrss.max(0) as u64
        })
}

/// The `VmHWM:` value (KiB) of a `/proc/PID/status` text.
fn parse_vm_hwm(status: &str) -> Option<u64> {
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

fn usage(who: libc::c_int) -> CpuTimes {
    // SAFETY: an all-zero rusage is a valid value of this plain C struct.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `ru` is valid and writable; `who` is one of the RUSAGE_* constants.
    if unsafe { libc::getrusage(who, &mut ru) } != 0 {
        return CpuTimes::default();
    }
    let secs = |tv: libc::timeval| tv.tv_sec as f64 + tv.tv_usec as f64 / 1e6;
    CpuTimes {
        user_s: secs(ru.ru_utime),
        sys_s: secs(ru.ru_stime),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vm_hwm_is_read_from_status_text() {
        let status = "Name:\tconnlab\nVmPeak:\t  10 kB\nVmHWM:\t    3668 kB\nVmRSS:\t 3000 kB\n";
        assert_eq!(parse_vm_hwm(status), Some(3668));
        assert_eq!(parse_vm_hwm("Name: x\n"), None);
    }

    #[test]
    fn max_rss_is_positive() {
        assert!(max_rss_kib() > 0);
    }
}
