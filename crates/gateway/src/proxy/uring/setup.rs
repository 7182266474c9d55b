//! Building the relay's ring with [`connlab_os::uring`]: the task-run mode
//! the kernel takes, and the opcodes and multishot flags it has, each
//! missing one with a message that names the fallback.

use super::ENTRIES;
use connlab_os::uring::{self, Note, RingConfig, Support, TaskRun};
use io_uring::{opcode, IoUring};
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

/// Prints (and clears) what [`connlab_os::uring`] dropped, as [`note`] does.
fn print_notes(notes: &mut Vec<Note>) {
    for n in notes.drain(..) {
        eprintln!("connlab gateway: io_uring: {}", n.sentence());
    }
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
    let mut notes = Vec::new();
    let config = RingConfig {
        entries: ENTRIES,
        sqpoll_idle_ms: None,
        defer_taskrun: true,
    };
    let built = uring::build(config, &mut notes);
    print_notes(&mut notes);
    let built = built.map_err(|e| unavailable(&e))?;
    let ring = built.ring;
    let support = Support::probe(&ring).map_err(|e| {
        io::Error::new(
            e.kind(),
            format!("--io uring: io_uring probe failed ({e}): the relay needs Linux 5.19 or later"),
        )
    })?;
    let missing = support.first_missing(&[
        (opcode::Accept::CODE, "ACCEPT"),
        (opcode::Connect::CODE, "CONNECT"),
        (opcode::Recv::CODE, "RECV"),
        (opcode::Send::CODE, "SEND"),
        (opcode::AsyncCancel::CODE, "ASYNC_CANCEL"),
        (opcode::PollAdd::CODE, "POLL_ADD"),
    ]);
    if let Some(name) = missing {
        return Err(io::Error::other(format!(
            "--io uring: this kernel's io_uring has no IORING_OP_{name}; use --io copy"
        )));
    }
    let multishot_accept = support.multishot_accept(true, &mut notes);
    let multishot_recv = support.multishot_recv(true, &mut notes);
    print_notes(&mut notes);
    let features = Features {
        defer_taskrun: built.task_run == TaskRun::Defer,
        coop_taskrun: built.task_run == TaskRun::Coop,
        multishot_accept,
        multishot_recv,
        min_timeout: ring.params().is_feature_min_timeout(),
    };
    Ok((ring, features))
}
