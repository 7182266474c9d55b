//! OS helpers shared by every connlab system: open-file limits, CPU placement,
//! shutdown signals, process-shared memory, splice pipes, CPU accounting and a description of
//! the machine a result was measured on, and output files written whole or not at all. Thin wrappers over `libc`/`nix`; nothing
//! here knows about protocols or the command line.

pub mod awake;
pub mod cgroup;
pub mod child;
mod cpu;
mod environment;
pub mod files;
mod limits;
pub mod memory;
pub mod netns;
pub mod pipe;
pub mod process;
pub mod reserve;
mod rusage;
mod shared;
mod shutdown;
pub mod tcp;
pub mod uring;
pub mod window;

pub use cpu::{
    current_affinity, current_cpu, pin_current_process, set_current_thread_fifo, CpuBusy, CpuList,
    CpuListError,
};
pub use environment::{kernel_version, parse_kernel_version, Environment, Fingerprint};
pub use limits::{raise_nofile_limit, NofileLimit};
pub use rusage::{max_rss_kib, CpuTimes};
pub use shared::{ProcessShared, SharedMem};
pub use shutdown::Shutdown;

/// Errors from the OS layer; each names the call that failed.
#[derive(Debug, thiserror::Error)]
pub enum OsError {
    /// A system call failed.
    #[error("{call} failed: {source}")]
    Sys {
        /// The call, e.g. `setrlimit(RLIMIT_NOFILE)`.
        call: &'static str,
        /// The errno it returned.
        source: std::io::Error,
    },
}

impl OsError {
    /// Builds an error from the current `errno` for `call`.
    pub(crate) fn last(call: &'static str) -> Self {
        OsError::Sys {
            call,
            source: std::io::Error::last_os_error(),
        }
    }
}
