//! Building the relay's ring: the task-run mode the kernel takes, and the
//! opcodes and multishot flags it has, each missing one with a message
//! that names the fallback.

use super::ENTRIES;
use io_uring::{opcode, IoUring, Probe};
use std::io;

/// What the kernel turned out to have.
#[derive(Clone, Copy, Debug)]
pub(super) struct Features {
    pub(super) defer_taskrun: bool,
    pub(super) coop_taskrun: bool,
    pub(super) multishot_accept: bool,
    pub(super) multishot_recv: bool,
    /// IORING_ENTER's minimum wait (Linux 6.12).
    pub(super) min_timeout: bool,
}

pub(super) fn note(what: &str, instead: &str) {
    eprintln!("connlab gateway: io_uring: {what}; {instead}");
}

fn unavailable(e: &io::Error) -> io::Error {
    io::Error::new(
        e.kind(),
        format!(
            "--io uring: io_uring_setup failed ({e}): this kernel has no usable io_uring \
             (too old, or disabled by the kernel.io_uring_disabled sysctl); use --io copy"
        ),
    )
}

/// Builds the ring with SINGLE_ISSUER + DEFER_TASKRUN, else COOP_TASKRUN,
/// else neither, and probes the opcodes and multishot flags.
pub(super) fn build() -> io::Result<(IoUring, Features)> {
    let attempt = |defer: bool, coop: bool| {
        let mut b = IoUring::builder();
        b.setup_cqsize(ENTRIES * 4);
        if defer {
            b.setup_single_issuer().setup_defer_taskrun();
        }
        if coop {
            b.setup_coop_taskrun().setup_taskrun_flag();
        }
        b.build(ENTRIES)
    };
    let mut features = Features {
        defer_taskrun: true,
        coop_taskrun: false,
        multishot_accept: true,
        multishot_recv: true,
        min_timeout: false,
    };
    let ring = match attempt(true, false) {
        Ok(r) => r,
        Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
            note(
                "SINGLE_ISSUER + DEFER_TASKRUN refused (Linux 6.1 and later)",
                "trying COOP_TASKRUN",
            );
            features.defer_taskrun = false;
            match attempt(false, true) {
                Ok(r) => {
                    features.coop_taskrun = true;
                    r
                }
                Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
                    note(
                        "COOP_TASKRUN refused (Linux 5.19 and later)",
                        "completions interrupt the loop as task work",
                    );
                    attempt(false, false).map_err(|e| unavailable(&e))?
                }
                Err(e) => return Err(unavailable(&e)),
            }
        }
        Err(e) => return Err(unavailable(&e)),
    };
    features.min_timeout = ring.params().is_feature_min_timeout();
    let mut probe = Probe::new();
    ring.submitter().register_probe(&mut probe).map_err(|e| {
        io::Error::new(
            e.kind(),
            format!("--io uring: io_uring probe failed ({e}): the relay needs Linux 5.19 or later"),
        )
    })?;
    for (code, name) in [
        (opcode::Accept::CODE, "ACCEPT"),
        (opcode::Connect::CODE, "CONNECT"),
        (opcode::Recv::CODE, "RECV"),
        (opcode::Send::CODE, "SEND"),
        (opcode::AsyncCancel::CODE, "ASYNC_CANCEL"),
        (opcode::PollAdd::CODE, "POLL_ADD"),
    ] {
        if !probe.is_supported(code) {
            return Err(io::Error::other(format!(
                "--io uring: this kernel's io_uring has no IORING_OP_{name}; use --io copy"
            )));
        }
    }
    let version = connlab_os::kernel_version();
    let at_least = |want: (u32, u32)| version.is_some_and(|v| v >= want);
    if !at_least((5, 19)) {
        features.multishot_accept = false;
        note(
            "multishot accept needs Linux 5.19",
            "one accept per completion",
        );
    }
    if !at_least((6, 0)) {
        features.multishot_recv = false;
        note(
            "multishot receive needs Linux 6.0",
            "one receive per completion",
        );
    }
    Ok((ring, features))
}
