//! The io_uring layer every io_uring loop of connlab shares: building a ring
//! with the task-run mode the kernel takes ([`build`]), probing its opcodes
//! and multishot flags ([`Support`]), and the receive buffers the kernel
//! fills ([`BufferPool`]) lent to it through a registered provided-buffer
//! ring ([`BufRing`]) or `IORING_OP_PROVIDE_BUFFERS` entries ([`Provider`]).
//!
//! The loops themselves (the server engine, the gateway relay, the load
//! generator's reader) stay in their crates. Nothing here prints: a feature
//! the kernel lacks becomes a [`Note`] naming what is used instead, for the
//! caller to print in its own words.

mod buffers;
mod probe;

pub use buffers::{BufRing, BufferPool, OutsidePool, Provider, RegisterError};
pub use probe::{build, Built, RingConfig, Support, TaskRun};

/// An optional io_uring feature a [`Note`] is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Feature {
    /// A kernel thread polling the submission queue (`IORING_SETUP_SQPOLL`).
    Sqpoll,
    /// `IORING_SETUP_SINGLE_ISSUER` + `IORING_SETUP_DEFER_TASKRUN` (Linux 6.1).
    DeferTaskrun,
    /// `IORING_SETUP_COOP_TASKRUN` + `IORING_SETUP_TASKRUN_FLAG` (Linux 5.19).
    CoopTaskrun,
    /// `IORING_ACCEPT_MULTISHOT` (Linux 5.19).
    MultishotAccept,
    /// `IORING_RECV_MULTISHOT` (Linux 6.0).
    MultishotRecv,
    /// A registered provided-buffer ring (Linux 5.19).
    BufRing,
}

impl Feature {
    /// The feature in words, where a note's reason does not name it itself.
    fn subject(self) -> Option<&'static str> {
        match self {
            Feature::MultishotAccept => Some("multishot accept"),
            Feature::MultishotRecv => Some("multishot receive"),
            Feature::Sqpoll | Feature::DeferTaskrun | Feature::CoopTaskrun | Feature::BufRing => {
                None
            }
        }
    }
}

/// A feature a caller asked for and goes without: why, and what it does
/// instead. The caller prints it (see [`Note::sentence`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Note {
    /// The feature dropped.
    pub feature: Feature,
    /// Why, e.g. `needs Linux 5.19` or `COOP_TASKRUN refused (Linux 5.19 and later)`.
    pub why: String,
    /// What is used instead, e.g. `one accept per completion`.
    pub instead: &'static str,
}

impl Note {
    fn new(feature: Feature, why: impl Into<String>, instead: &'static str) -> Note {
        Note {
            feature,
            why: why.into(),
            instead,
        }
    }

    /// The note as one sentence that names its feature:
    /// `multishot accept needs Linux 5.19; one accept per completion`.
    pub fn sentence(&self) -> String {
        match self.feature.subject() {
            Some(subject) => format!("{subject} {}; {}", self.why, self.instead),
            None => format!("{}; {}", self.why, self.instead),
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A ring, or `None` with a message where this machine has no io_uring
    /// (the test then passes without checking anything).
    pub(crate) fn ring_or_skip(config: RingConfig) -> Option<Built> {
        let mut notes = Vec::new();
        match build(config, &mut notes) {
            Ok(b) => Some(b),
            Err(e) => {
                eprintln!("skipped: io_uring is not usable here ({e})");
                None
            }
        }
    }

    #[test]
    fn a_sentence_names_the_feature_once() {
        let n = Note::new(
            Feature::MultishotAccept,
            "needs Linux 5.19",
            "one accept per completion",
        );
        assert_eq!(
            n.sentence(),
            "multishot accept needs Linux 5.19; one accept per completion"
        );
        let n = Note::new(
            Feature::CoopTaskrun,
            "COOP_TASKRUN refused (Linux 5.19 and later)",
            "completions interrupt the loop as task work",
        );
        assert_eq!(
            n.sentence(),
            "COOP_TASKRUN refused (Linux 5.19 and later); completions interrupt the loop as task work"
        );
    }
}
