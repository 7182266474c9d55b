//! The open-loop writer thread: it holds the schedule. For each scheduled
//! instant it sleeps (timer slack lowered to 1 ns), then spins the last
//! stretch, picks the next active connection round-robin, timestamps, tells
//! the reader, and writes without blocking. Its own lateness is `send_lag`.
//! Hand-written on purpose: the pacing is what the measurements rest on.

use crate::checks::{Systematic, GAP_SAMPLES};
use crate::reader::SendEvent;
use crate::sender::Sender;
use connlab_measure::{Arrival, LatencyHistogram, Schedule, SendDeviation};
use connlab_os::{CpuTimes, Shutdown};
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};

/// Longest single sleep, so a stop request is noticed quickly.
const MAX_SLEEP: Duration = Duration::from_millis(20);
/// How often a backlog of unsent bytes is retried.
const BACKLOG_RETRY: Duration = Duration::from_millis(1);

pub(crate) struct WriterPlan<'a> {
    pub(crate) fds: &'a [RawFd],
    pub(crate) active: &'a [usize],
    pub(crate) dead: &'a [AtomicBool],
    pub(crate) schedule: Schedule,
    pub(crate) start: Instant,
    pub(crate) warmup: Duration,
    pub(crate) total: Duration,
    pub(crate) spin: Duration,
    pub(crate) shutdown: &'a Shutdown,
    pub(crate) sent_counter: &'a AtomicU64,
}

#[derive(Default)]
pub(crate) struct WriterOutcome {
    pub(crate) send_lag: LatencyHistogram,
    pub(crate) deviation: Option<SendDeviation>,
    pub(crate) sent: u64,
    pub(crate) measured_sent: u64,
    /// Measured-window sends dropped because the reader's ring was full.
    pub(crate) queue_full: u64,
    /// Measured-window sends that failed.
    pub(crate) send_failed: u64,
    /// The same two counts for the warm-up.
    pub(crate) warmup_queue_full: u64,
    pub(crate) warmup_send_failed: u64,
    pub(crate) bytes_sent: u64,
    pub(crate) cpu: CpuTimes,
    pub(crate) cpu_seen: Option<usize>,
    /// A systematic sample of the measured window's inter-send gaps, us:
    /// each the send's start minus the previous send's.
    pub(crate) gaps: Systematic,
}

pub(crate) fn run_writer(
    mut plan: WriterPlan<'_>,
    sender: &mut Sender<'_>,
    events: &mut rtrb::Producer<SendEvent>,
) -> WriterOutcome {
    // SAFETY: prctl(PR_SET_TIMERSLACK) only changes this thread's timer slack.
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1u64, 0u64, 0u64, 0u64) };
    let cpu_before = CpuTimes::thread();
    // Sized so that the expected sends of the measured window just fill it.
    let expected_sends = plan.total.saturating_sub(plan.warmup).as_nanos()
        / plan.schedule.interval().as_nanos().max(1);
    let mut out = WriterOutcome {
        deviation: (plan.schedule.arrival() == Arrival::Fixed)
            .then(|| SendDeviation::for_schedule(&plan.schedule)),
        gaps: Systematic::new(GAP_SAMPLES, expected_sends as u64),
        ..WriterOutcome::default()
    };
    let warmup_ns = plan.warmup.as_nanos() as u64;
    let mut previous_send_ns: Option<u64> = None;
    let mut next_conn = 0usize;
    let mut last_retry = Instant::now();
    let mut seq: u32 = 0;
    'schedule: loop {
        let offset = plan.schedule.next_offset();
        if offset >= plan.total {
            break;
        }
        if !wait_until(plan.start + offset, plan.spin, plan.shutdown) {
            break;
        }
        if sender.has_backlog() && last_retry.elapsed() >= BACKLOG_RETRY {
            let dead = plan.dead;
            sender.flush_backlog(plan.fds, |c| dead[c].store(true, Relaxed));
            last_retry = Instant::now();
        }
        // The next live active connection, round-robin.
        let mut tries = 0;
        let conn = loop {
            let c = plan.active[next_conn];
            next_conn = (next_conn + 1) % plan.active.len();
            if !plan.dead[c].load(Relaxed) {
                break c;
            }
            tries += 1;
            if tries == plan.active.len() {
                break 'schedule;
            }
        };
        let send_ns = plan.start.elapsed().as_nanos() as u64;
        let scheduled_ns = offset.as_nanos() as u64;
        if let Some(previous) = previous_send_ns.filter(|_| scheduled_ns >= warmup_ns) {
            out.gaps
                .offer(send_ns.saturating_sub(previous) as f64 / 1e3);
        }
        previous_send_ns = Some(send_ns);
        let event = SendEvent {
            conn: conn as u32,
            seq,
            scheduled_ns,
            send_ns,
        };
        let warm = scheduled_ns < warmup_ns;
        if events.push(event).is_err() {
            if warm {
                out.warmup_queue_full += 1;
            } else {
                out.queue_full += 1;
            }
            continue;
        }
        if sender.send(conn, plan.fds[conn], seq).is_err() {
            plan.dead[conn].store(true, Relaxed);
            if warm {
                out.warmup_send_failed += 1;
            } else {
                out.send_failed += 1;
            }
        }
        seq = seq.wrapping_add(1);
        out.sent += 1;
        plan.sent_counter.fetch_add(1, Relaxed);
        if scheduled_ns >= warmup_ns {
            out.measured_sent += 1;
            out.send_lag.record(send_ns.saturating_sub(scheduled_ns));
            if let Some(d) = out.deviation.as_mut() {
                d.record(send_ns);
            }
        }
    }
    // Give the backlog a last chance so that queued requests are not lost.
    let flush_deadline = Instant::now() + Duration::from_millis(500);
    while sender.has_backlog() && Instant::now() < flush_deadline && !plan.shutdown.requested() {
        let dead = plan.dead;
        sender.flush_backlog(plan.fds, |c| dead[c].store(true, Relaxed));
        std::thread::sleep(BACKLOG_RETRY);
    }
    out.bytes_sent = sender.bytes_sent;
    out.cpu = CpuTimes::thread().since(&cpu_before);
    out.cpu_seen = connlab_os::current_cpu();
    out
}

/// Sleeps, then spins, until `target`; false if a stop was requested first.
fn wait_until(target: Instant, spin: Duration, shutdown: &Shutdown) -> bool {
    loop {
        if shutdown.requested() {
            return false;
        }
        let now = Instant::now();
        if now >= target {
            return true;
        }
        let left = target - now;
        if left > spin {
            std::thread::sleep((left - spin).min(MAX_SLEEP));
        } else {
            while Instant::now() < target {
                std::hint::spin_loop();
            }
            return true;
        }
    }
}
