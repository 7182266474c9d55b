//! Building the ring: every optional feature of [`UringFeatures`] asked for is
//! probed with [`connlab_os::uring`] (setup flags by trying them, opcodes with
//! the kernel's probe, multishot flags by kernel version) and dropped with a
//! message on stderr naming the fallback when the kernel lacks it. The engine
//! then uses only the features [`Setup::features`] holds.

use crate::config::{UringFeature, UringFeatures};
use connlab_os::uring::{self, Feature, Note, RingConfig, Support, TaskRun};
use io_uring::{opcode, IoUring};
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

/// The `--uring-features` name of a feature a [`Note`] is about (none for
/// `COOP_TASKRUN`, the engine's fallback rather than a feature of its own).
fn engine_feature(feature: Feature) -> Option<UringFeature> {
    match feature {
        Feature::Sqpoll => Some(UringFeature::Sqpoll),
        Feature::DeferTaskrun => Some(UringFeature::DeferTaskrun),
        Feature::MultishotAccept => Some(UringFeature::MultishotAccept),
        Feature::MultishotRecv => Some(UringFeature::MultishotRecv),
        Feature::BufRing => Some(UringFeature::BufRing),
        Feature::CoopTaskrun => None,
    }
}

/// Prints (and clears) what [`connlab_os::uring`] dropped, as [`note`] does.
pub(super) fn print_notes(notes: &mut Vec<Note>) {
    for n in notes.drain(..) {
        match engine_feature(n.feature) {
            Some(feature) => note(feature, &n.why, n.instead),
            None => eprintln!("connlab serve: io_uring: {}", n.sentence()),
        }
    }
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
    let mut notes = Vec::new();
    let config = RingConfig {
        entries: ENTRIES,
        sqpoll_idle_ms: wanted.has(UringFeature::Sqpoll).then_some(SQPOLL_IDLE_MS),
        defer_taskrun: wanted.has(UringFeature::DeferTaskrun),
    };
    let built = uring::build(config, &mut notes);
    print_notes(&mut notes);
    let built = built.map_err(setup_failed)?;
    let mut features = wanted
        .with(UringFeature::DeferTaskrun, built.task_run == TaskRun::Defer)
        .with(UringFeature::Sqpoll, built.sqpoll);
    let support = Support::probe(&built.ring).map_err(|e| {
        io::Error::new(
            e.kind(),
            format!(
                "--engine uring: io_uring probe failed ({e}): the engine needs Linux 6.0 or later"
            ),
        )
    })?;
    let missing = support.first_missing(&[
        (opcode::Accept::CODE, "ACCEPT"),
        (opcode::Recv::CODE, "RECV"),
        (opcode::AsyncCancel::CODE, "ASYNC_CANCEL"),
        (opcode::PollAdd::CODE, "POLL_ADD"),
        (opcode::ProvideBuffers::CODE, "PROVIDE_BUFFERS"),
    ]);
    if let Some(name) = missing {
        return Err(io::Error::other(format!(
            "--engine uring: this kernel's io_uring has no IORING_OP_{name}"
        )));
    }
    if features.has(UringFeature::RingSend) && !support.has(opcode::SendMsg::CODE) {
        note(
            UringFeature::RingSend,
            "no IORING_OP_SENDMSG",
            "sending with sendmsg(2) and POLLOUT",
        );
        features = features.with(UringFeature::RingSend, false);
    }
    let accept = support.multishot_accept(features.has(UringFeature::MultishotAccept), &mut notes);
    let recv = support.multishot_recv(features.has(UringFeature::MultishotRecv), &mut notes);
    print_notes(&mut notes);
    features = features
        .with(UringFeature::MultishotAccept, accept)
        .with(UringFeature::MultishotRecv, recv);
    Ok(Setup {
        ring: built.ring,
        features,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn notes_print_under_the_engine_feature_names() {
        assert_eq!(
            engine_feature(Feature::MultishotRecv).map(UringFeature::name),
            Some("multishot-recv")
        );
        assert_eq!(
            engine_feature(Feature::BufRing).map(UringFeature::name),
            Some("buf-ring")
        );
        assert_eq!(engine_feature(Feature::CoopTaskrun), None);
    }
}
