//! Building the ring: every optional feature of [`UringFeatures`] asked for is
//! probed here (setup flags by trying them, opcodes with the kernel's probe,
//! multishot flags by kernel version) and dropped with a message on stderr
//! naming the fallback when the kernel lacks it. The engine then uses only
//! the features [`Setup::features`] holds.

use crate::config::{UringFeature, UringFeatures};
use io_uring::{opcode, IoUring, Probe};
use std::io;

/// Submission queue size.
pub(super) const ENTRIES: u32 = 4096;

/// How long an idle SQPOLL thread polls before it sleeps, in milliseconds.
const SQPOLL_IDLE_MS: u32 = 50;

/// The ring and the features it was built with.
pub(super) struct Setup {
    pub(super) ring: IoUring,
    /// The features asked for that this kernel has.
    pub(super) features: UringFeatures,
}

/// Prints a feature the engine goes without, and what it does instead.
pub(super) fn note(feature: UringFeature, why: &str, instead: &str) {
    eprintln!(
        "connlab serve: io_uring {}: {why}; {instead}",
        feature.name()
    );
}

use connlab_os::kernel_version;

/// Setup flags to try, most wanted first, each with the feature it brings
/// and the message if it is refused.
struct Attempt {
    single_issuer: bool,
    defer_taskrun: bool,
    coop_taskrun: bool,
}

fn try_build(sqpoll: bool, a: &Attempt) -> io::Result<IoUring> {
    let mut b = IoUring::builder();
    b.setup_cqsize(ENTRIES * 4);
    if sqpoll {
        b.setup_sqpoll(SQPOLL_IDLE_MS);
    }
    if a.single_issuer {
        b.setup_single_issuer();
    }
    if a.defer_taskrun {
        b.setup_defer_taskrun();
    }
    if a.coop_taskrun {
        b.setup_coop_taskrun().setup_taskrun_flag();
    }
    b.build(ENTRIES)
}

fn setup_failed(e: io::Error) -> io::Error {
    io::Error::new(
        e.kind(),
        format!(
            "--engine uring: io_uring_setup failed ({e}): this kernel has no usable \
             io_uring (too old, or disabled by the kernel.io_uring_disabled sysctl)"
        ),
    )
}

/// Builds the ring with as many of `wanted` as the kernel has.
pub(super) fn build(wanted: UringFeatures) -> io::Result<Setup> {
    let mut features = wanted;
    let sqpoll = wanted.has(UringFeature::Sqpoll);
    if sqpoll && wanted.has(UringFeature::DeferTaskrun) {
        note(
            UringFeature::DeferTaskrun,
            "the kernel refuses DEFER_TASKRUN with SQPOLL",
            "the SQPOLL thread runs completions",
        );
        features = features.with(UringFeature::DeferTaskrun, false);
    }
    // DEFER_TASKRUN needs SINGLE_ISSUER; COOP_TASKRUN is the fallback and the
    // choice when defer-taskrun is off; plain task work is the last resort.
    let mut attempts = Vec::new();
    if features.has(UringFeature::DeferTaskrun) {
        attempts.push(Attempt {
            single_issuer: true,
            defer_taskrun: true,
            coop_taskrun: false,
        });
    }
    attempts.push(Attempt {
        single_issuer: false,
        defer_taskrun: false,
        coop_taskrun: !sqpoll,
    });
    attempts.push(Attempt {
        single_issuer: false,
        defer_taskrun: false,
        coop_taskrun: false,
    });
    let mut built = None;
    let mut last_err = None;
    for attempt in &attempts {
        match try_build(sqpoll, attempt) {
            Ok(ring) => {
                built = Some(ring);
                break;
            }
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
                if attempt.defer_taskrun {
                    note(
                        UringFeature::DeferTaskrun,
                        "SINGLE_ISSUER + DEFER_TASKRUN refused (Linux 6.1 and later)",
                        "trying COOP_TASKRUN",
                    );
                    features = features.with(UringFeature::DeferTaskrun, false);
                } else if attempt.coop_taskrun {
                    eprintln!(
                        "connlab serve: io_uring: COOP_TASKRUN refused (Linux 5.19 and later); \
                         completions interrupt the loop as task work"
                    );
                }
                last_err = Some(e);
            }
            Err(e) if sqpoll && e.raw_os_error() == Some(libc::EPERM) => {
                note(
                    UringFeature::Sqpoll,
                    "SQPOLL not permitted here",
                    "submitting with io_uring_enter",
                );
                features = features.with(UringFeature::Sqpoll, false);
                return build(features);
            }
            Err(e) => return Err(setup_failed(e)),
        }
    }
    let ring = match built {
        Some(ring) => ring,
        None => {
            return Err(setup_failed(
                last_err.unwrap_or_else(|| io::Error::from_raw_os_error(libc::EINVAL)),
            ))
        }
    };
    let mut probe = Probe::new();
    ring.submitter().register_probe(&mut probe).map_err(|e| {
        io::Error::new(
            e.kind(),
            format!(
                "--engine uring: io_uring probe failed ({e}): the engine needs Linux 6.0 or later"
            ),
        )
    })?;
    for (code, name) in [
        (opcode::Accept::CODE, "ACCEPT"),
        (opcode::Recv::CODE, "RECV"),
        (opcode::AsyncCancel::CODE, "ASYNC_CANCEL"),
        (opcode::PollAdd::CODE, "POLL_ADD"),
        (opcode::ProvideBuffers::CODE, "PROVIDE_BUFFERS"),
    ] {
        if !probe.is_supported(code) {
            return Err(io::Error::other(format!(
                "--engine uring: this kernel's io_uring has no IORING_OP_{name}"
            )));
        }
    }
    if features.has(UringFeature::RingSend) && !probe.is_supported(opcode::SendMsg::CODE) {
        note(
            UringFeature::RingSend,
            "no IORING_OP_SENDMSG",
            "sending with sendmsg(2) and POLLOUT",
        );
        features = features.with(UringFeature::RingSend, false);
    }
    let version = kernel_version();
    let at_least = |want: (u32, u32)| version.is_some_and(|v| v >= want);
    if features.has(UringFeature::MultishotAccept) && !at_least((5, 19)) {
        note(
            UringFeature::MultishotAccept,
            "needs Linux 5.19",
            "one accept per completion",
        );
        features = features.with(UringFeature::MultishotAccept, false);
    }
    if features.has(UringFeature::MultishotRecv) && !at_least((6, 0)) {
        note(
            UringFeature::MultishotRecv,
            "needs Linux 6.0",
            "one receive per completion",
        );
        features = features.with(UringFeature::MultishotRecv, false);
    }
    Ok(Setup { ring, features })
}

#[cfg(test)]
mod tests {
    use connlab_os::parse_kernel_version as parse_version;

    #[test]
    fn kernel_release_parses_to_major_and_minor() {
        assert_eq!(parse_version("6.18.44-fc-v669"), Some((6, 18)));
        assert_eq!(parse_version("5.4.0"), Some((5, 4)));
        assert_eq!(parse_version("6.1"), Some((6, 1)));
        assert_eq!(parse_version("linux"), None);
    }
}
