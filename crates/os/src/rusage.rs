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

/// Peak resident set size of this process so far, in KiB (`ru_maxrss`):
/// user-space memory only; socket buffers live in the kernel and are not in it.
pub fn max_rss_kib() -> u64 {
    // SAFETY: an all-zero rusage is a valid value of this plain C struct.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `ru` is valid and writable.
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) } != 0 {
        return 0;
    }
    ru.ru_maxrss.max(0) as u64
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
