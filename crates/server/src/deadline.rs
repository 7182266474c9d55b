//! Header and idle timeouts as plain data: no I/O and no clock (every
//! method is given `now`). [`ConnTimer`] keeps one connection's deadlines;
//! [`DeadlineQueue`] orders the connections of an event loop by their next
//! deadline so the loop knows how long it may wait. The blocking engines use
//! [`ConnTimer`] alone and let the kernel wait (`SO_RCVTIMEO`).
//!
//! The header timeout works as nginx's `client_header_timeout`: once the first
//! byte of a request head has arrived, the whole head must arrive within it.
//! A connection that has sent nothing since its last request is idle, not
//! slow: only the idle timeout (off by default, because the locality
//! experiments hold thousands of silent connections open on purpose) closes it.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::time::{Duration, Instant};

/// The timeouts a server enforces on every connection.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Limits {
    /// A request head must be complete this long after its first byte.
    pub(crate) header: Option<Duration>,
    /// A connection with no bytes moved either way for this long is closed.
    pub(crate) idle: Option<Duration>,
}

impl Limits {
    /// Whether any timeout is set (if not, no clock needs to be read).
    pub(crate) fn any(self) -> bool {
        self.header.is_some() || self.idle.is_some()
    }
}

/// Which timeout closed a connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Expiry {
    /// A request head did not complete in time.
    Header,
    /// Nothing moved in time.
    Idle,
}

/// Where a connection's protocol session stands after taking input.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct HeadProgress {
    /// A request head that began in this input is still incomplete.
    pub(crate) began: bool,
    /// The session is inside a request head.
    pub(crate) in_head: bool,
}

/// One connection's deadlines.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct ConnTimer {
    head_deadline: Option<Instant>,
    idle_deadline: Option<Instant>,
    /// The earliest entry this connection has in a [`DeadlineQueue`].
    armed: Option<Instant>,
}

impl ConnTimer {
    /// A connection opened at `now`.
    pub(crate) fn new(limits: Limits, now: Instant) -> ConnTimer {
        ConnTimer {
            head_deadline: None,
            idle_deadline: limits.idle.map(|d| now + d),
            armed: None,
        }
    }

    /// Bytes arrived at `now`, leaving the session at `progress`.
    pub(crate) fn on_input(&mut self, limits: Limits, now: Instant, progress: HeadProgress) {
        self.on_output(limits, now);
        if !progress.in_head {
            self.head_deadline = None;
        } else if progress.began || self.head_deadline.is_none() {
            self.head_deadline = limits.header.map(|d| now + d);
        }
    }

    /// Input ended every request head it began, with no idle timeout set:
    /// what [`ConnTimer::on_input`] would do then, without needing the time.
    pub(crate) fn head_complete(&mut self) {
        self.head_deadline = None;
    }

    /// Bytes left for the peer at `now`.
    pub(crate) fn on_output(&mut self, limits: Limits, now: Instant) {
        self.idle_deadline = limits.idle.map(|d| now + d);
    }

    /// The next deadline, if any.
    pub(crate) fn deadline(&self) -> Option<Instant> {
        match (self.head_deadline, self.idle_deadline) {
            (Some(h), Some(i)) => Some(h.min(i)),
            (h, i) => h.or(i),
        }
    }

    /// How long a blocking call made at `now` may wait (`None`: forever).
    /// Blocking engines call it right after the last byte moved, so the idle
    /// wait is the whole idle timeout: a constant, which keeps the socket's
    /// `SO_RCVTIMEO` unchanged from request to request.
    pub(crate) fn blocking_wait(&self, limits: Limits, now: Instant) -> Option<Duration> {
        let head = self.head_deadline.map(|d| d.saturating_duration_since(now));
        match (head, limits.idle) {
            (Some(h), Some(i)) => Some(h.min(i)),
            (h, i) => h.or(i),
        }
    }

    /// The timeout that has passed at `now`, the header's first.
    pub(crate) fn expired(&self, now: Instant) -> Option<Expiry> {
        if self.head_deadline.is_some_and(|d| d <= now) {
            Some(Expiry::Header)
        } else if self.idle_deadline.is_some_and(|d| d <= now) {
            Some(Expiry::Idle)
        } else {
            None
        }
    }

    /// The deadline to put in the queue, if the queue does not already hold
    /// an entry for this connection at or before it. An entry whose deadline
    /// moved later stays; [`ConnTimer::popped`] re-arms it when it comes due.
    pub(crate) fn next_to_arm(&mut self) -> Option<Instant> {
        let next = self.deadline()?;
        match self.armed {
            Some(armed) if armed <= next => None,
            _ => {
                self.armed = Some(next);
                Some(next)
            }
        }
    }

    /// The queue gave back an entry for this connection due at `at`: whether
    /// it is the connection's live entry (others are stale and ignored).
    pub(crate) fn popped(&mut self, at: Instant) -> bool {
        if self.armed == Some(at) {
            self.armed = None;
            true
        } else {
            false
        }
    }
}

/// Deadlines of many connections, earliest first. Entries are never
/// removed early: a closed or re-armed connection's entries are recognised
/// as stale when they come due (by `key` and [`ConnTimer::popped`]).
#[derive(Debug)]
pub(crate) struct DeadlineQueue<K: Ord> {
    heap: BinaryHeap<Reverse<(Instant, K)>>,
}

impl<K: Ord> Default for DeadlineQueue<K> {
    fn default() -> Self {
        DeadlineQueue {
            heap: BinaryHeap::new(),
        }
    }
}

impl<K: Ord + Copy> DeadlineQueue<K> {
    /// Adds a deadline for `key`.
    pub(crate) fn push(&mut self, at: Instant, key: K) {
        self.heap.push(Reverse((at, key)));
    }

    /// How long a loop may wait at `now` before the earliest deadline:
    /// `None` when there is none (wait for I/O only).
    pub(crate) fn wait(&self, now: Instant) -> Option<Duration> {
        self.heap
            .peek()
            .map(|Reverse((at, _))| at.saturating_duration_since(now))
    }

    /// Whether no deadline is queued.
    pub(crate) fn is_empty(&self) -> bool {
        self.heap.is_empty()
    }

    /// Takes the earliest entry if it is due at `now`.
    pub(crate) fn pop_due(&mut self, now: Instant) -> Option<(Instant, K)> {
        match self.heap.peek() {
            Some(Reverse((at, _))) if *at <= now => self.heap.pop().map(|Reverse(e)| e),
            _ => None,
        }
    }

    /// Entries queued, stale ones included.
    pub(crate) fn len(&self) -> usize {
        self.heap.len()
    }

    /// Keeps only the entries for which `keep(at, key)` holds.
    pub(crate) fn retain(&mut self, mut keep: impl FnMut(Instant, K) -> bool) {
        self.heap.retain(|Reverse((at, key))| keep(*at, *key));
    }
}

/// A wait for `poll(2)`/`epoll_wait(2)` in milliseconds, rounded up so a
/// loop never wakes just before a deadline and spins; -1 waits forever.
pub(crate) fn wait_ms(wait: Option<Duration>) -> libc::c_int {
    match wait {
        None => -1,
        Some(d) => {
            let ms = d.as_nanos().div_ceil(1_000_000);
            libc::c_int::try_from(ms).unwrap_or(libc::c_int::MAX)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEADER: Duration = Duration::from_secs(10);
    const IDLE: Duration = Duration::from_secs(60);

    fn secs(s: u64) -> Duration {
        Duration::from_secs(s)
    }

    fn started(began: bool) -> HeadProgress {
        HeadProgress {
            began,
            in_head: true,
        }
    }

    const DONE: HeadProgress = HeadProgress {
        began: false,
        in_head: false,
    };

    #[test]
    fn silent_connection_has_no_deadline_without_idle_timeout() {
        let t0 = Instant::now();
        let limits = Limits {
            header: Some(HEADER),
            idle: None,
        };
        let timer = ConnTimer::new(limits, t0);
        assert_eq!(timer.deadline(), None);
        assert_eq!(timer.expired(t0 + secs(1_000_000)), None);
    }

    #[test]
    fn head_complete_is_on_input_done_without_idle_timeout() {
        let t0 = Instant::now();
        let limits = Limits {
            header: Some(HEADER),
            idle: None,
        };
        let mut read = ConnTimer::new(limits, t0);
        read.on_input(limits, t0 + secs(1), started(true));
        let mut clockless = read;
        read.on_input(limits, t0 + secs(2), DONE);
        clockless.head_complete();
        assert_eq!(clockless.deadline(), read.deadline());
        assert_eq!(clockless.deadline(), None);
    }

    #[test]
    fn head_must_complete_within_header_timeout_of_its_first_byte() {
        let t0 = Instant::now();
        let limits = Limits {
            header: Some(HEADER),
            idle: None,
        };
        let mut timer = ConnTimer::new(limits, t0);
        timer.on_input(limits, t0 + secs(100), started(true));
        // More bytes of the same head do not extend it (slowloris).
        timer.on_input(limits, t0 + secs(105), started(false));
        assert_eq!(timer.deadline(), Some(t0 + secs(110)));
        assert_eq!(timer.expired(t0 + secs(109)), None);
        assert_eq!(timer.expired(t0 + secs(110)), Some(Expiry::Header));
    }

    #[test]
    fn completed_head_clears_and_next_head_restarts_the_deadline() {
        let t0 = Instant::now();
        let limits = Limits {
            header: Some(HEADER),
            idle: None,
        };
        let mut timer = ConnTimer::new(limits, t0);
        timer.on_input(limits, t0, started(true));
        timer.on_input(limits, t0 + secs(5), DONE);
        assert_eq!(timer.deadline(), None);
        // A head completed and the next began in one read.
        timer.on_input(limits, t0 + secs(6), started(true));
        timer.on_input(limits, t0 + secs(9), started(true));
        assert_eq!(timer.deadline(), Some(t0 + secs(19)));
    }

    #[test]
    fn idle_deadline_moves_with_traffic_either_way() {
        let t0 = Instant::now();
        let limits = Limits {
            header: None,
            idle: Some(IDLE),
        };
        let mut timer = ConnTimer::new(limits, t0);
        assert_eq!(timer.deadline(), Some(t0 + IDLE));
        timer.on_input(limits, t0 + secs(30), DONE);
        timer.on_output(limits, t0 + secs(40));
        assert_eq!(timer.expired(t0 + secs(99)), None);
        assert_eq!(timer.expired(t0 + secs(100)), Some(Expiry::Idle));
    }

    #[test]
    fn blocking_wait_is_the_idle_timeout_unless_a_head_is_due_sooner() {
        let t0 = Instant::now();
        let limits = Limits {
            header: Some(HEADER),
            idle: Some(IDLE),
        };
        let mut timer = ConnTimer::new(limits, t0);
        assert_eq!(timer.blocking_wait(limits, t0 + secs(5)), Some(IDLE));
        timer.on_input(limits, t0 + secs(5), started(true));
        assert_eq!(timer.blocking_wait(limits, t0 + secs(7)), Some(secs(8)));
        let no_idle = Limits {
            idle: None,
            ..limits
        };
        assert_eq!(ConnTimer::new(no_idle, t0).blocking_wait(no_idle, t0), None);
    }

    #[test]
    fn header_expiry_wins_over_idle_expiry() {
        let t0 = Instant::now();
        let limits = Limits {
            header: Some(HEADER),
            idle: Some(HEADER),
        };
        let mut timer = ConnTimer::new(limits, t0);
        timer.on_input(limits, t0, started(true));
        assert_eq!(timer.expired(t0 + HEADER), Some(Expiry::Header));
    }

    #[test]
    fn queue_holds_one_live_entry_per_connection_and_rearms_late_ones() {
        let t0 = Instant::now();
        let limits = Limits {
            header: Some(HEADER),
            idle: Some(IDLE),
        };
        let mut queue = DeadlineQueue::default();
        let mut timer = ConnTimer::new(limits, t0);
        let arm = |timer: &mut ConnTimer, queue: &mut DeadlineQueue<u32>| {
            if let Some(at) = timer.next_to_arm() {
                queue.push(at, 7);
            }
        };
        arm(&mut timer, &mut queue);
        // Every read moves the idle deadline later: no new entry for that.
        for s in 1..=20 {
            timer.on_input(limits, t0 + secs(s), DONE);
            arm(&mut timer, &mut queue);
        }
        assert_eq!(queue.len(), 1);
        // A head begins: its deadline (t0 + 31) is before the armed one (t0 + 60).
        timer.on_input(limits, t0 + secs(21), started(true));
        arm(&mut timer, &mut queue);
        assert_eq!(queue.len(), 2);
        assert_eq!(queue.wait(t0 + secs(21)), Some(HEADER));
        // The head completes; at its old deadline the entry is live but the
        // connection is not expired, so it is re-armed for idle (t0 + 82).
        timer.on_input(limits, t0 + secs(22), DONE);
        let now = t0 + secs(31);
        let (at, key) = queue.pop_due(now).expect("header entry due");
        assert_eq!(key, 7);
        assert!(timer.popped(at));
        assert_eq!(timer.expired(now), None);
        arm(&mut timer, &mut queue);
        assert_eq!(queue.pop_due(now), None);
        assert_eq!(queue.wait(now), Some(secs(29)));
        // The first entry (idle, t0 + 60) is stale now.
        let (at, _) = queue.pop_due(t0 + secs(60)).expect("old idle entry due");
        assert!(!timer.popped(at));
        let (at, _) = queue.pop_due(t0 + secs(82)).expect("idle entry due");
        assert!(timer.popped(at));
        assert_eq!(timer.expired(t0 + secs(82)), Some(Expiry::Idle));
        assert!(queue.is_empty());
    }

    #[test]
    fn wait_rounds_up_to_whole_milliseconds() {
        assert_eq!(wait_ms(None), -1);
        assert_eq!(wait_ms(Some(Duration::ZERO)), 0);
        assert_eq!(wait_ms(Some(Duration::from_micros(1))), 1);
        assert_eq!(wait_ms(Some(Duration::from_millis(1500))), 1500);
        assert_eq!(wait_ms(Some(secs(u64::MAX / 4))), libc::c_int::MAX);
    }
}
