//! The two background threads: the signal loop, which drains the queued
//! real-time signals into the readiness table, and the timer that wakes
//! waiters whose deadline passed.

use crate::table::Table;
use crate::{lock, sys, Shared};
use std::io;
use std::os::fd::RawFd;
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};

/// The signal thread: reads queued signals from the signalfd in batches
/// and applies them to the table; on overflow marks everything ready (at
/// most once per `delay`); records when the queue was seen empty so parked
/// descriptors can be released.
pub(crate) fn signal_loop(shared: &Shared, sfd: RawFd, delay: Duration) {
    const BATCH: usize = 64;
    const RECORD: usize = size_of::<libc::signalfd_siginfo>();
    /// Longest sleep, so parks made while the thread sleeps are released.
    const TICK: Duration = Duration::from_millis(50);
    // SAFETY: signalfd_siginfo is plain data; all-zero is valid.
    let mut records: [libc::signalfd_siginfo; BATCH] = unsafe { std::mem::zeroed() };
    let mut last_recovery: Option<Instant> = None;
    let mut recovery_due: Option<Instant> = None;
    let recover = |table: &mut Table| {
        table.mark_all();
        shared.recoveries.fetch_add(1, Relaxed);
        shared.poll_cond.notify_all();
    };
    while !shared.stop.load(Relaxed) {
        let seq = lock(shared).park_seq();
        // SAFETY: `records` is valid for writes of its full size.
        let n = unsafe { libc::read(sfd, records.as_mut_ptr().cast(), size_of_val(&records)) };
        if n > 0 {
            // Every record of the read counts (several per read).
            let count = n as usize / RECORD;
            let mut table = lock(shared);
            let mut woke = false;
            let mut overflow = false;
            for r in &records[..count] {
                if r.ssi_signo as libc::c_int == shared.signal {
                    shared.signals.fetch_add(1, Relaxed);
                    woke |= table.on_signal(r.ssi_fd, r.ssi_band);
                } else if r.ssi_signo as libc::c_int == libc::SIGIO {
                    shared.overflows.fetch_add(1, Relaxed);
                    overflow = true;
                }
            }
            if overflow {
                let now = Instant::now();
                match last_recovery {
                    Some(t) if now < t + delay => {
                        recovery_due.get_or_insert(t + delay);
                    }
                    _ => {
                        recover(&mut table);
                        last_recovery = Some(now);
                        recovery_due = None;
                    }
                }
            }
            if woke && table.poll_waiters > 0 {
                shared.poll_cond.notify_all();
            }
            continue;
        }
        let e = io::Error::last_os_error();
        if e.kind() == io::ErrorKind::Interrupted {
            continue;
        }
        // The queue is empty: no event can name a descriptor parked up to `seq`.
        let now = Instant::now();
        {
            let mut table = lock(shared);
            table.drained(seq);
            if recovery_due.is_some_and(|due| now >= due) {
                recover(&mut table);
                last_recovery = Some(now);
                recovery_due = None;
            }
            if table.has_undrained() {
                continue;
            }
        }
        let mut wait = TICK;
        if let Some(due) = recovery_due {
            wait = wait.min(due.saturating_duration_since(now));
        }
        let mut fds = [
            libc::pollfd {
                fd: sfd,
                events: libc::POLLIN,
                revents: 0,
            },
            libc::pollfd {
                fd: shared.stop_fd,
                events: libc::POLLIN,
                revents: 0,
            },
        ];
        // SAFETY: `fds` is a valid pollfd array for the call.
        unsafe { libc::poll(fds.as_mut_ptr(), 2, wait.as_millis().max(1) as libc::c_int) };
    }
}

/// The timer thread: about every `interval`, closes the parked descriptors
/// the signal thread has cleared.
pub(crate) fn timer_loop(shared: &Shared, interval: Duration) {
    let mut table = lock(shared);
    while !shared.stop.load(Relaxed) {
        table = shared
            .timer_cond
            .wait_timeout(table, interval)
            .unwrap_or_else(|p| p.into_inner())
            .0;
        let fds = table.take_closable();
        if fds.is_empty() {
            continue;
        }
        // The numbers are free in the table but still open: close them
        // outside the lock; nobody can be handed these numbers before.
        drop(table);
        for &fd in &fds {
            sys::close(fd);
        }
        shared.closed.fetch_add(fds.len() as u64, Relaxed);
        table = lock(shared);
    }
}
