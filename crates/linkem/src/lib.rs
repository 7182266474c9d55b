//! A user-space link emulator (this kernel has no `netem`): a router host
//! that forwards packets between two links and adds, per direction, one-way
//! delay, jitter, loss (Bernoulli or Gilbert-Elliott) and a rate limit with a
//! bounded queue, optionally logging every packet (TCP sequence numbers and
//! times, for packet timeline plots).
//!
//! - [`sched`]: the sans-I/O model of one direction (time passed in, seeded);
//! - [`router`]: TUN devices and policy routing in the router's namespace;
//! - [`emulator`]: the forwarding threads, one per direction;
//! - [`log`]: the per-packet CSV log;
//! - [`lab`]: a `left hosts - router - right hosts` topology of namespaces;
//! - [`probe`]: the measurements that validate an emulated link (UDP echo
//!   RTT, one-way UDP loss, TCP bulk throughput);
//! - [`validate`]: those measurements on a demo topology, phase by phase.

pub mod config;
pub mod emulator;
pub mod lab;
pub mod log;
pub mod packet;
pub mod probe;
pub mod router;
pub mod sched;
pub mod tun;
pub mod validate;

pub use config::{LinkConfig, Loss, QueueLimit};
pub use emulator::{DirStats, EmulatorOptions, Report};
pub use lab::{Lab, LabSpec};
pub use router::{Router, RouterSpec};
pub use sched::{Scheduler, Verdict};

/// Why the emulator could not run.
#[derive(Debug, thiserror::Error)]
pub enum LinkemError {
    /// Not root.
    #[error("the link emulator needs root (CAP_NET_ADMIN for TUN devices, routing rules and namespaces); run as root or with sudo")]
    NeedsRoot,
    /// No TUN support.
    #[error("/dev/net/tun is missing: load the tun module (modprobe tun) or run where TUN devices exist")]
    NoTun,
    /// A bad value.
    #[error("{0}")]
    BadConfig(String),
    /// Building the namespaces, or an iproute2 call, failed.
    #[error(transparent)]
    Netns(#[from] connlab_os::netns::NetnsError),
    /// A system call or file operation failed.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The error.
        source: std::io::Error,
    },
}

impl LinkemError {
    pub(crate) fn io(what: impl Into<String>, source: std::io::Error) -> Self {
        LinkemError::Io {
            what: what.into(),
            source,
        }
    }
}

/// Runs `ip ARGS` (in the calling thread's network namespace).
pub(crate) fn ip(args: &[&str]) -> Result<(), LinkemError> {
    Ok(connlab_os::netns::ip(args)?)
}
