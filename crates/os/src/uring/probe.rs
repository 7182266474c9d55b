//! Building a ring with the setup flags this kernel takes, and probing what
//! else it has: opcodes (the kernel's own probe) and multishot flags (by
//! kernel version, as the kernel has no probe for flags).

use super::{Feature, Note};
use crate::kernel_version;
use io_uring::{IoUring, Probe};
use std::io;

/// What to ask of a new ring.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RingConfig {
    /// Submission queue entries; the completion queue gets four times as many.
    pub entries: u32,
    /// `SQPOLL` with this idle time in milliseconds (`None`: no SQPOLL).
    pub sqpoll_idle_ms: Option<u32>,
    /// Try `SINGLE_ISSUER` + `DEFER_TASKRUN` first (dropped with SQPOLL,
    /// which the kernel refuses it with).
    pub defer_taskrun: bool,
}

/// How the kernel runs the ring's completion work.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TaskRun {
    /// `SINGLE_ISSUER` + `DEFER_TASKRUN`: only while the loop waits.
    Defer,
    /// `COOP_TASKRUN` + `TASKRUN_FLAG`: at the loop's next system call.
    Coop,
    /// Plain task work, interrupting the loop.
    Plain,
}

/// A ring and the setup it was built with.
pub struct Built {
    /// The ring.
    pub ring: IoUring,
    /// The task-run mode the kernel took.
    pub task_run: TaskRun,
    /// Whether SQPOLL is on (asked for and permitted).
    pub sqpoll: bool,
}

/// One set of setup flags to try.
#[derive(Clone, Copy)]
struct Attempt {
    sqpoll_idle_ms: Option<u32>,
    task_run: TaskRun,
}

impl Attempt {
    fn build(self, entries: u32) -> io::Result<IoUring> {
        let mut b = IoUring::builder();
        b.setup_cqsize(entries.saturating_mul(4));
        if let Some(idle) = self.sqpoll_idle_ms {
            b.setup_sqpoll(idle);
        }
        match self.task_run {
            TaskRun::Defer => {
                b.setup_single_issuer().setup_defer_taskrun();
            }
            TaskRun::Coop => {
                b.setup_coop_taskrun().setup_taskrun_flag();
            }
            TaskRun::Plain => {}
        }
        b.build(entries)
    }
}

/// Builds a ring as `config` asks, with as much of it as the kernel takes:
/// `SINGLE_ISSUER` + `DEFER_TASKRUN` if asked, else `COOP_TASKRUN` (not
/// with SQPOLL), else plain task work; SQPOLL is dropped where it is not
/// permitted. Each thing dropped is pushed to `notes` (even when the build
/// fails in the end). The error is the kernel's own, for the caller to word:
/// io_uring is missing or disabled.
pub fn build(config: RingConfig, notes: &mut Vec<Note>) -> io::Result<Built> {
    let mut defer = config.defer_taskrun;
    let sqpoll = config.sqpoll_idle_ms.is_some();
    if sqpoll && defer {
        notes.push(Note::new(
            Feature::DeferTaskrun,
            "the kernel refuses DEFER_TASKRUN with SQPOLL",
            "the SQPOLL thread runs completions",
        ));
        defer = false;
    }
    let mut attempts = Vec::with_capacity(3);
    if defer {
        attempts.push(TaskRun::Defer);
    }
    if !sqpoll {
        attempts.push(TaskRun::Coop);
    }
    attempts.push(TaskRun::Plain);
    let mut last_err = None;
    for task_run in attempts {
        let attempt = Attempt {
            sqpoll_idle_ms: config.sqpoll_idle_ms,
            task_run,
        };
        match attempt.build(config.entries) {
            Ok(ring) => {
                return Ok(Built {
                    ring,
                    task_run,
                    sqpoll,
                })
            }
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
                match task_run {
                    TaskRun::Defer => notes.push(Note::new(
                        Feature::DeferTaskrun,
                        "SINGLE_ISSUER + DEFER_TASKRUN refused (Linux 6.1 and later)",
                        "trying COOP_TASKRUN",
                    )),
                    TaskRun::Coop => notes.push(Note::new(
                        Feature::CoopTaskrun,
                        "COOP_TASKRUN refused (Linux 5.19 and later)",
                        "completions interrupt the loop as task work",
                    )),
                    TaskRun::Plain => {}
                }
                last_err = Some(e);
            }
            Err(e) if sqpoll && e.raw_os_error() == Some(libc::EPERM) => {
                notes.push(Note::new(
                    Feature::Sqpoll,
                    "SQPOLL not permitted here",
                    "submitting with io_uring_enter",
                ));
                let without = RingConfig {
                    sqpoll_idle_ms: None,
                    defer_taskrun: defer,
                    ..config
                };
                return build(without, notes);
            }
            Err(e) => return Err(e),
        }
    }
    Err(last_err.unwrap_or_else(|| io::Error::from_raw_os_error(libc::EINVAL)))
}

/// What a ring's kernel has beyond the ring itself: its opcodes (from the
/// kernel's probe, Linux 5.6) and its multishot flags (by kernel version).
pub struct Support {
    opcodes: Probe,
    kernel: Option<(u32, u32)>,
}

impl Support {
    /// Probes the kernel of `ring`; the error is the kernel's own (no probe:
    /// older than Linux 5.6).
    pub fn probe(ring: &IoUring) -> io::Result<Support> {
        let mut opcodes = Probe::new();
        ring.submitter().register_probe(&mut opcodes)?;
        Ok(Support {
            opcodes,
            kernel: kernel_version(),
        })
    }

    /// Whether the kernel has the opcode `code` (e.g. `opcode::Recv::CODE`).
    pub fn has(&self, code: u8) -> bool {
        self.opcodes.is_supported(code)
    }

    /// The name of the first of `needed` (opcode, name) the kernel lacks.
    pub fn first_missing<'n>(&self, needed: &[(u8, &'n str)]) -> Option<&'n str> {
        needed
            .iter()
            .find(|(code, _)| !self.has(*code))
            .map(|&(_, name)| name)
    }

    /// The running kernel's (major, minor), if readable.
    pub fn kernel(&self) -> Option<(u32, u32)> {
        self.kernel
    }

    fn at_least(&self, want: (u32, u32)) -> bool {
        self.kernel.is_some_and(|v| v >= want)
    }

    /// Multishot accept if `wanted` and the kernel has it (Linux 5.19); a
    /// note when it was wanted and is not there.
    pub fn multishot_accept(&self, wanted: bool, notes: &mut Vec<Note>) -> bool {
        self.keep(
            wanted,
            (5, 19),
            Note::new(
                Feature::MultishotAccept,
                "needs Linux 5.19",
                "one accept per completion",
            ),
            notes,
        )
    }

    /// Multishot receive if `wanted` and the kernel has it (Linux 6.0); a
    /// note when it was wanted and is not there.
    pub fn multishot_recv(&self, wanted: bool, notes: &mut Vec<Note>) -> bool {
        self.keep(
            wanted,
            (6, 0),
            Note::new(
                Feature::MultishotRecv,
                "needs Linux 6.0",
                "one receive per completion",
            ),
            notes,
        )
    }

    fn keep(&self, wanted: bool, since: (u32, u32), note: Note, notes: &mut Vec<Note>) -> bool {
        if !wanted {
            return false;
        }
        if self.at_least(since) {
            return true;
        }
        notes.push(note);
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::uring::tests::ring_or_skip;
    use io_uring::opcode;

    const PLAIN: RingConfig = RingConfig {
        entries: 8,
        sqpoll_idle_ms: None,
        defer_taskrun: true,
    };

    #[test]
    fn builds_a_ring_with_a_task_run_mode() {
        let Some(b) = ring_or_skip(PLAIN) else { return };
        assert!(!b.sqpoll);
        assert_eq!(b.ring.params().sq_entries(), 8);
        assert_eq!(b.ring.params().cq_entries(), 32);
    }

    #[test]
    fn sqpoll_drops_defer_taskrun_with_a_note() {
        let mut notes = Vec::new();
        let config = RingConfig {
            sqpoll_idle_ms: Some(10),
            ..PLAIN
        };
        let built = build(config, &mut notes);
        assert_eq!(
            notes.first().map(|n| n.feature),
            Some(Feature::DeferTaskrun),
            "{notes:?}"
        );
        if let Ok(b) = built {
            assert_ne!(b.task_run, TaskRun::Defer);
            assert_ne!(b.task_run, TaskRun::Coop);
        }
    }

    #[test]
    fn probes_opcodes_and_multishot() {
        let Some(b) = ring_or_skip(PLAIN) else { return };
        let Ok(support) = Support::probe(&b.ring) else {
            eprintln!("skipped: no io_uring probe here");
            return;
        };
        assert!(support.has(opcode::Nop::CODE));
        assert_eq!(support.first_missing(&[(opcode::Nop::CODE, "NOP")]), None);
        let mut notes = Vec::new();
        assert!(!support.multishot_accept(false, &mut notes));
        assert!(!support.multishot_recv(false, &mut notes));
        assert!(notes.is_empty(), "nothing wanted, nothing noted");
        let accept = support.multishot_accept(true, &mut notes);
        let recv = support.multishot_recv(true, &mut notes);
        let new = support.kernel().is_some_and(|v| v >= (6, 0));
        assert_eq!((accept, recv), (new || accept, new));
        assert_eq!(notes.len(), usize::from(!accept) + usize::from(!recv));
    }

    /// The multishot decisions rest on this.
    #[test]
    fn kernel_release_parses_to_major_and_minor() {
        use crate::parse_kernel_version as parse;
        assert_eq!(parse("6.18.44-fc-v669"), Some((6, 18)));
        assert_eq!(parse("5.4.0"), Some((5, 4)));
        assert_eq!(parse("6.1"), Some((6, 1)));
        assert_eq!(parse("linux"), None);
    }

    #[test]
    fn a_too_old_kernel_gets_notes_for_multishot() {
        let support = Support {
            opcodes: Probe::new(),
            kernel: Some((5, 15)),
        };
        let mut notes = Vec::new();
        assert!(!support.multishot_accept(true, &mut notes));
        assert!(!support.multishot_recv(true, &mut notes));
        let sentences: Vec<String> = notes.iter().map(Note::sentence).collect();
        assert_eq!(
            sentences,
            [
                "multishot accept needs Linux 5.19; one accept per completion",
                "multishot receive needs Linux 6.0; one receive per completion"
            ]
        );
        assert!(!support.has(opcode::Recv::CODE), "empty probe");
        assert_eq!(
            support.first_missing(&[(opcode::Recv::CODE, "RECV")]),
            Some("RECV")
        );
    }
}
