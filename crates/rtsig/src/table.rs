//! The readiness table: what the library believes about every descriptor it
//! watches. Hand-written on purpose: this table, and the rules that keep it
//! right, are the research of the RT-signal polling paper.
//!
//! Two sources update it, always under the one lock that also covers the I/O:
//! - queued real-time signals set bits (`si_band` says which), and an
//!   overflow (plain `SIGIO`) sets every bit of every descriptor;
//! - the outcome of the application's non-blocking I/O clears them: a short
//!   read or `EAGAIN` clears readable, a short write or `EAGAIN` clears
//!   writable.
//!
//! Because the I/O and the update it implies happen under the same lock, a
//! signal that arrives during a read is applied after the read's "not ready",
//! never overwritten by it.
//!
//! One refinement of the paper's rule, found by the server's half-close
//! test: a peer's FIN queues the same `POLL_IN` signal as data. When data
//! and then a FIN arrive and both signals are applied before the read, the
//! read returns the data short and the end of file behind it would be lost.
//! So a short read clears readable only when at most one readable signal
//! was applied since readable was last cleared (one signal cannot announce
//! both data and an end of file that a data read would not return);
//! otherwise the next read decides, at the cost of one extra call. With one
//! request per connection at a time the rule costs nothing.

use std::io;
use std::os::fd::RawFd;
use std::sync::{Arc, Condvar};

/// What a descriptor is ready for, as the table believes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Ready {
    /// A read (or accept) would not block.
    pub readable: bool,
    /// A write would not block.
    pub writable: bool,
    /// An error is pending; reported once, then cleared.
    pub error: bool,
    /// The peer hung up; stays set.
    pub hangup: bool,
}

impl Ready {
    /// Nothing ready.
    pub const NONE: Ready = Ready {
        readable: false,
        writable: false,
        error: false,
        hangup: false,
    };
    /// The state of a new socket: writable, not readable (the paper's rule).
    pub const NEW_SOCKET: Ready = Ready {
        readable: false,
        writable: true,
        error: false,
        hangup: false,
    };
    /// The state of an accepted socket: data may already have arrived before
    /// signals were armed, so it starts readable (and writable).
    pub const ACCEPTED: Ready = Ready {
        readable: true,
        writable: true,
        error: false,
        hangup: false,
    };
}

/// Where a descriptor number stands.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum Slot {
    /// Not known to the library.
    #[default]
    Free,
    /// Armed for signals; its readiness is kept.
    Watched,
    /// Closed by the application, shut down, waiting until no queued signal
    /// can name it before the number is really closed. `seq` orders parks.
    Parked { seq: u64 },
}

#[derive(Default)]
struct Entry {
    slot: Slot,
    ready: Ready,
    /// Readable signals applied since readable was last cleared
    /// (`UNKNOWN` after an overflow or for an initial readable state).
    read_signals: u32,
    /// Threads blocked on this descriptor's condition.
    waiters: u32,
    /// The per-descriptor condition of the blocking calls (made on first use).
    cond: Option<Arc<Condvar>>,
}

/// Why the table refused to watch a descriptor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WatchError {
    /// Negative descriptor.
    Invalid,
    /// Already watched.
    Watched,
    /// Closed but not yet released (cannot be open again: a bug in the caller).
    Parked,
}

/// The readiness table.
#[derive(Default)]
pub(crate) struct Table {
    entries: Vec<Entry>,
    /// Parked descriptors and their park sequence numbers, oldest first.
    parked: Vec<(RawFd, u64)>,
    /// Sequence number of the latest park.
    park_seq: u64,
    /// Every descriptor parked with a sequence number up to this one has no
    /// event left in the signal queue (the signal thread saw it empty after).
    drained_seq: u64,
    /// Threads waiting in `poll`/`select`.
    pub(crate) poll_waiters: u32,
    watched: usize,
}

/// `read_signals` when readiness did not come from counted signals.
const UNKNOWN: u32 = u32::MAX;

/// `si_band`/`revents` bits that make a descriptor readable.
const READ_BITS: u32 = (libc::POLLIN | libc::POLLRDNORM | libc::POLLPRI | libc::POLLRDHUP) as u32;
/// Bits that make it writable.
const WRITE_BITS: u32 = (libc::POLLOUT | libc::POLLWRNORM | libc::POLLWRBAND) as u32;

impl Table {
    fn watched_mut(&mut self, fd: RawFd) -> Option<&mut Entry> {
        if fd < 0 {
            return None;
        }
        self.entries
            .get_mut(fd as usize)
            .filter(|e| e.slot == Slot::Watched)
    }

    /// Starts keeping `fd`'s readiness, from `initial`.
    pub(crate) fn watch(&mut self, fd: RawFd, initial: Ready) -> Result<(), WatchError> {
        if fd < 0 {
            return Err(WatchError::Invalid);
        }
        let i = fd as usize;
        if self.entries.len() <= i {
            self.entries.resize_with(i + 1, Entry::default);
        }
        let e = &mut self.entries[i];
        match e.slot {
            Slot::Watched => return Err(WatchError::Watched),
            Slot::Parked { .. } => return Err(WatchError::Parked),
            Slot::Free => {}
        }
        e.slot = Slot::Watched;
        e.ready = initial;
        e.read_signals = if initial.readable { UNKNOWN } else { 0 };
        self.watched += 1;
        Ok(())
    }

    /// Stops keeping `fd` (the descriptor stays open); says whether it was watched.
    pub(crate) fn forget(&mut self, fd: RawFd) -> bool {
        let Some(e) = self.watched_mut(fd) else {
            return false;
        };
        e.slot = Slot::Free;
        e.ready = Ready::NONE;
        if let Some(c) = &e.cond {
            c.notify_all();
        }
        self.watched -= 1;
        true
    }

    /// Whether `fd` is watched.
    pub(crate) fn is_watched(&self, fd: RawFd) -> bool {
        fd >= 0
            && self
                .entries
                .get(fd as usize)
                .is_some_and(|e| e.slot == Slot::Watched)
    }

    /// `fd`'s readiness, if watched.
    pub(crate) fn ready(&self, fd: RawFd) -> Option<Ready> {
        if fd < 0 {
            return None;
        }
        self.entries
            .get(fd as usize)
            .filter(|e| e.slot == Slot::Watched)
            .map(|e| e.ready)
    }

    /// Applies one queued signal: `band` is its `si_band`. Events for
    /// descriptors that are not watched (parked, forgotten) are dropped.
    /// Returns whether some readiness was set (a poller may want waking).
    pub(crate) fn on_signal(&mut self, fd: RawFd, band: u32) -> bool {
        let Some(e) = self.watched_mut(fd) else {
            return false;
        };
        let before = e.ready;
        if band & READ_BITS != 0 {
            e.ready.readable = true;
            e.read_signals = e.read_signals.saturating_add(1);
        }
        if band & WRITE_BITS != 0 {
            e.ready.writable = true;
        }
        if band & libc::POLLERR as u32 != 0 {
            e.ready.error = true;
            // A pending error makes both calls return at once.
            e.ready.readable = true;
            e.ready.writable = true;
        }
        if band & libc::POLLHUP as u32 != 0 {
            e.ready.hangup = true;
            e.ready.readable = true;
        }
        let changed = e.ready != before;
        if changed && e.waiters > 0 {
            if let Some(c) = &e.cond {
                c.notify_all();
            }
        }
        changed
    }

    /// Signal-queue overflow: events were lost, so every watched descriptor
    /// is marked readable and writable and the application's non-blocking
    /// I/O finds out the truth.
    pub(crate) fn mark_all(&mut self) {
        for e in &mut self.entries {
            if e.slot == Slot::Watched {
                e.ready.readable = true;
                e.read_signals = UNKNOWN;
                e.ready.writable = true;
                if e.waiters > 0 {
                    if let Some(c) = &e.cond {
                        c.notify_all();
                    }
                }
            }
        }
    }

    /// Updates `fd` after a non-blocking input call (read, recv, accept)
    /// that asked for `requested` bytes: `EAGAIN` clears readable; a short
    /// count clears it when at most one readable signal came since the last
    /// clear (see the module notes); end of file (0) leaves it set, as the
    /// kernel would.
    pub(crate) fn after_input(&mut self, fd: RawFd, requested: usize, result: &io::Result<usize>) {
        let Some(e) = self.watched_mut(fd) else {
            return;
        };
        match result {
            Ok(0) if requested > 0 => {}
            Ok(n) if *n < requested => {
                if e.read_signals <= 1 {
                    e.ready.readable = false;
                    e.read_signals = 0;
                } else {
                    // An end of file may wait behind the data just read.
                    e.read_signals = 1;
                }
            }
            Ok(_) => {}
            Err(err) if err.kind() == io::ErrorKind::WouldBlock => {
                e.ready.readable = false;
                e.read_signals = 0;
            }
            Err(_) => e.ready.error = false,
        }
    }

    /// Updates `fd` after a non-blocking output call that offered
    /// `requested` bytes: a short count or `EAGAIN` clears writable.
    pub(crate) fn after_output(&mut self, fd: RawFd, requested: usize, result: &io::Result<usize>) {
        let Some(e) = self.watched_mut(fd) else {
            return;
        };
        match result {
            Ok(n) if *n < requested => e.ready.writable = false,
            Ok(_) => {}
            Err(err) if err.kind() == io::ErrorKind::WouldBlock => e.ready.writable = false,
            Err(_) => e.ready.error = false,
        }
    }

    /// `poll` semantics for one entry: the `revents` for `events` on `fd`.
    /// A pending error is returned once and cleared. Negative descriptors
    /// are ignored (0), as `poll(2)` does; unwatched ones get `POLLNVAL`.
    pub(crate) fn revents(&mut self, fd: RawFd, events: libc::c_short) -> libc::c_short {
        if fd < 0 {
            return 0;
        }
        let Some(e) = self.watched_mut(fd) else {
            return libc::POLLNVAL;
        };
        let mut r = 0;
        if e.ready.readable && events & (libc::POLLIN | libc::POLLRDNORM) != 0 {
            r |= events & (libc::POLLIN | libc::POLLRDNORM);
        }
        if e.ready.writable && events & (libc::POLLOUT | libc::POLLWRNORM) != 0 {
            r |= events & (libc::POLLOUT | libc::POLLWRNORM);
        }
        if e.ready.hangup {
            r |= libc::POLLHUP;
        }
        if e.ready.error {
            r |= libc::POLLERR;
            e.ready.error = false;
        }
        r
    }

    /// `select` semantics for one descriptor: whether it is readable and
    /// writable among what is asked; a pending error counts as both and is
    /// cleared. None when `fd` is not watched.
    pub(crate) fn select_one(
        &mut self,
        fd: RawFd,
        read: bool,
        write: bool,
    ) -> Option<(bool, bool)> {
        let e = self.watched_mut(fd)?;
        let error = std::mem::take(&mut e.ready.error);
        Some((
            read && (e.ready.readable || error),
            write && (e.ready.writable || error),
        ))
    }

    /// Fills `fds` (a `poll` array) from the table; returns how many entries
    /// have events.
    pub(crate) fn scan(&mut self, fds: &mut [libc::pollfd]) -> usize {
        let mut n = 0;
        for p in fds {
            p.revents = self.revents(p.fd, p.events);
            if p.revents != 0 {
                n += 1;
            }
        }
        n
    }

    /// Registers a thread about to block on `fd`'s condition; returns the condition.
    pub(crate) fn wait_on(&mut self, fd: RawFd) -> Option<Arc<Condvar>> {
        let e = self.watched_mut(fd)?;
        e.waiters += 1;
        Some(
            e.cond
                .get_or_insert_with(|| Arc::new(Condvar::new()))
                .clone(),
        )
    }

    /// Undoes [`Table::wait_on`].
    pub(crate) fn done_waiting(&mut self, fd: RawFd) {
        if let Some(e) = self.entries.get_mut(fd as usize) {
            e.waiters = e.waiters.saturating_sub(1);
        }
    }

    /// Parks `fd` (the application closed it); the caller has already
    /// disarmed its signals. Returns false when `fd` was not watched.
    pub(crate) fn park(&mut self, fd: RawFd) -> bool {
        let seq = self.park_seq + 1;
        let Some(e) = self.watched_mut(fd) else {
            return false;
        };
        e.slot = Slot::Parked { seq };
        e.ready = Ready::NONE;
        if let Some(c) = &e.cond {
            c.notify_all();
        }
        self.park_seq = seq;
        self.parked.push((fd, seq));
        self.watched -= 1;
        true
    }

    /// Sequence number of the latest park (the signal thread reads it before
    /// each read of the signal queue).
    pub(crate) fn park_seq(&self) -> u64 {
        self.park_seq
    }

    /// The signal thread found the queue empty after parks up to `seq`.
    pub(crate) fn drained(&mut self, seq: u64) {
        self.drained_seq = self.drained_seq.max(seq);
    }

    /// Whether some parked descriptor still waits for the queue to drain.
    pub(crate) fn has_undrained(&self) -> bool {
        self.parked
            .last()
            .is_some_and(|&(_, s)| s > self.drained_seq)
    }

    /// Frees every parked descriptor no queued signal can name any more and
    /// returns them for closing (the numbers stay taken until closed, so
    /// nobody can reuse one before the caller closes it).
    pub(crate) fn take_closable(&mut self) -> Vec<RawFd> {
        let split = self.parked.partition_point(|&(_, s)| s <= self.drained_seq);
        let done: Vec<RawFd> = self.parked.drain(..split).map(|(fd, _)| fd).collect();
        for &fd in &done {
            self.entries[fd as usize].slot = Slot::Free;
        }
        done
    }

    /// Every parked descriptor, freed for closing (shutdown).
    pub(crate) fn take_all_parked(&mut self) -> Vec<RawFd> {
        self.drained_seq = self.park_seq;
        self.take_closable()
    }

    /// Every watched descriptor (shutdown).
    pub(crate) fn watched_fds(&self) -> Vec<RawFd> {
        self.entries
            .iter()
            .enumerate()
            .filter(|(_, e)| e.slot == Slot::Watched)
            .map(|(i, _)| i as RawFd)
            .collect()
    }

    /// Descriptors watched and parked.
    pub(crate) fn counts(&self) -> (usize, usize) {
        (self.watched, self.parked.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const IN: u32 = (libc::POLLIN | libc::POLLRDNORM) as u32;
    const OUT: u32 = (libc::POLLOUT | libc::POLLWRNORM | libc::POLLWRBAND) as u32;
    const ERR: u32 = libc::POLLERR as u32;
    const HUP: u32 = (libc::POLLHUP | libc::POLLERR) as u32;

    fn would_block() -> io::Result<usize> {
        Err(io::ErrorKind::WouldBlock.into())
    }

    #[test]
    fn new_socket_is_writable_accepted_socket_is_readable() {
        let mut t = Table::default();
        t.watch(3, Ready::NEW_SOCKET).unwrap();
        t.watch(4, Ready::ACCEPTED).unwrap();
        assert_eq!(t.revents(3, libc::POLLIN | libc::POLLOUT), libc::POLLOUT);
        assert_eq!(
            t.revents(4, libc::POLLIN | libc::POLLOUT),
            libc::POLLIN | libc::POLLOUT
        );
        assert_eq!(t.revents(4, libc::POLLIN), libc::POLLIN);
    }

    #[test]
    fn signals_set_and_io_results_clear() {
        let mut t = Table::default();
        t.watch(5, Ready::NEW_SOCKET).unwrap();
        assert!(t.on_signal(5, IN));
        assert!(t.ready(5).unwrap().readable);
        // A full read leaves it readable; a short read clears it.
        t.after_input(5, 100, &Ok(100));
        assert!(t.ready(5).unwrap().readable);
        t.after_input(5, 100, &Ok(40));
        assert!(!t.ready(5).unwrap().readable);
        t.on_signal(5, IN);
        t.after_input(5, 100, &would_block());
        assert!(!t.ready(5).unwrap().readable);
        // End of file stays readable: the next read returns 0 at once.
        t.on_signal(5, IN);
        t.after_input(5, 100, &Ok(0));
        assert!(t.ready(5).unwrap().readable);
        // Writes.
        t.after_output(5, 100, &Ok(100));
        assert!(t.ready(5).unwrap().writable);
        t.after_output(5, 100, &Ok(10));
        assert!(!t.ready(5).unwrap().writable);
        t.on_signal(5, OUT);
        assert!(t.ready(5).unwrap().writable);
        t.after_output(5, 100, &would_block());
        assert!(!t.ready(5).unwrap().writable);
    }

    #[test]
    fn a_short_read_after_two_signals_keeps_readable_once() {
        let mut t = Table::default();
        t.watch(5, Ready::NEW_SOCKET).unwrap();
        // Data, then a FIN: both signals applied before the read.
        t.on_signal(5, IN);
        t.on_signal(5, IN);
        t.after_input(5, 100, &Ok(40));
        assert!(
            t.ready(5).unwrap().readable,
            "the end of file may be pending"
        );
        t.after_input(5, 100, &Ok(0));
        assert!(t.ready(5).unwrap().readable, "end of file stays readable");
        // Without a FIN the next read says EAGAIN and clears it.
        let mut t = Table::default();
        t.watch(5, Ready::NEW_SOCKET).unwrap();
        t.on_signal(5, IN);
        t.on_signal(5, IN);
        t.after_input(5, 100, &Ok(40));
        t.after_input(5, 100, &would_block());
        assert!(!t.ready(5).unwrap().readable);
        // An accepted socket's initial state is not from signals: the first
        // short read keeps it, the second clears it.
        t.watch(6, Ready::ACCEPTED).unwrap();
        t.after_input(6, 100, &Ok(10));
        assert!(t.ready(6).unwrap().readable);
        t.after_input(6, 100, &Ok(10));
        assert!(!t.ready(6).unwrap().readable);
    }

    #[test]
    fn error_is_reported_once() {
        let mut t = Table::default();
        t.watch(6, Ready::NONE).unwrap();
        t.on_signal(6, ERR);
        assert_ne!(t.revents(6, libc::POLLIN) & libc::POLLERR, 0);
        assert_eq!(t.revents(6, 0) & libc::POLLERR, 0, "cleared once returned");
    }

    #[test]
    fn hangup_is_readable_and_sticky() {
        let mut t = Table::default();
        t.watch(7, Ready::NONE).unwrap();
        t.on_signal(7, HUP);
        let r = t.revents(7, libc::POLLIN);
        assert_ne!(r & libc::POLLIN, 0);
        assert_ne!(r & libc::POLLHUP, 0);
        assert_ne!(t.revents(7, libc::POLLIN) & libc::POLLHUP, 0);
    }

    #[test]
    fn unknown_and_negative_descriptors() {
        let mut t = Table::default();
        assert_eq!(t.revents(-1, libc::POLLIN), 0);
        assert_eq!(t.revents(9, libc::POLLIN), libc::POLLNVAL);
        assert!(
            !t.on_signal(9, IN),
            "events for unknown descriptors are dropped"
        );
        assert_eq!(t.watch(-2, Ready::NONE), Err(WatchError::Invalid));
        t.watch(9, Ready::NONE).unwrap();
        assert_eq!(t.watch(9, Ready::NONE), Err(WatchError::Watched));
    }

    #[test]
    fn overflow_marks_everything_ready() {
        let mut t = Table::default();
        for fd in 3..10 {
            t.watch(fd, Ready::NONE).unwrap();
        }
        t.mark_all();
        for fd in 3..10 {
            let r = t.ready(fd).unwrap();
            assert!(r.readable && r.writable);
        }
    }

    #[test]
    fn parked_descriptor_ignores_events_until_drained() {
        let mut t = Table::default();
        t.watch(8, Ready::ACCEPTED).unwrap();
        let before = t.park_seq();
        assert!(t.park(8));
        assert!(!t.park(8), "parking twice is refused");
        assert!(!t.on_signal(8, IN), "a stale event is dropped");
        assert_eq!(t.watch(8, Ready::NONE), Err(WatchError::Parked));
        // The queue was seen empty, but before the park: not yet closable.
        t.drained(before);
        assert!(t.has_undrained());
        assert!(t.take_closable().is_empty());
        t.drained(t.park_seq());
        assert_eq!(t.take_closable(), vec![8]);
        assert!(!t.has_undrained());
        // The number may now be reused.
        t.watch(8, Ready::NEW_SOCKET).unwrap();
        assert!(!t.ready(8).unwrap().readable);
    }

    #[test]
    fn poll_scan_counts_entries_with_events() {
        let mut t = Table::default();
        t.watch(3, Ready::ACCEPTED).unwrap();
        t.watch(4, Ready::NONE).unwrap();
        let mut fds = [
            libc::pollfd {
                fd: 3,
                events: libc::POLLIN,
                revents: 0,
            },
            libc::pollfd {
                fd: 4,
                events: libc::POLLIN,
                revents: 0,
            },
            libc::pollfd {
                fd: -1,
                events: libc::POLLIN,
                revents: 0,
            },
        ];
        assert_eq!(t.scan(&mut fds), 1);
        assert_eq!(fds[0].revents, libc::POLLIN);
        assert_eq!(fds[1].revents, 0);
    }
}
