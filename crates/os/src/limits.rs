//! The open-files limit: every connection costs a descriptor, and this machine's
//! hard limit (20,000) cannot be raised, so runs raise the soft limit to the hard
//! one and say how many connections fit.

use crate::OsError;

/// The `RLIMIT_NOFILE` values before and after [`raise_nofile_limit`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct NofileLimit {
    /// Soft limit found at start.
    pub soft_before: u64,
    /// Soft limit now in force.
    pub soft: u64,
    /// Hard limit (the ceiling for an unprivileged process).
    pub hard: u64,
}

impl NofileLimit {
    /// True when the soft limit was raised.
    pub fn raised(&self) -> bool {
        self.soft > self.soft_before
    }
}

/// Raises the soft open-files limit to the hard limit and reports both.
pub fn raise_nofile_limit() -> Result<NofileLimit, OsError> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `lim` is a valid, writable rlimit.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        return Err(OsError::last("getrlimit(RLIMIT_NOFILE)"));
    }
    let soft_before = lim.rlim_cur;
    if lim.rlim_cur < lim.rlim_max {
        let raised = libc::rlimit {
            rlim_cur: lim.rlim_max,
            rlim_max: lim.rlim_max,
        };
        // SAFETY: `raised` is a valid rlimit that only raises the soft limit to the hard one.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } != 0 {
            return Err(OsError::last("setrlimit(RLIMIT_NOFILE)"));
        }
        lim.rlim_cur = lim.rlim_max;
    }
    Ok(NofileLimit {
        soft_before,
        soft: lim.rlim_cur,
        hard: lim.rlim_max,
    })
}
