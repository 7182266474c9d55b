//! The reader thread: waits for readiness on every connection (idle ones too,
//! to notice the server closing them), reads, parses responses with the
//! protocol core, timestamps and records. It learns of each send from the
//! writer through an SPSC ring; in closed loop it also sends the next request
//! itself as soon as a response completes.

use crate::result::RequestRecord;
use crate::sender::Sender;
use crate::workload::{Progress, RecordSink};
use connlab_measure::LatencyHistogram;
use connlab_os::{CpuTimes, Shutdown};
use connlab_proto::{ClientSession, Protocol};
use std::collections::{BTreeMap, VecDeque};
use std::io;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::time::{Duration, Instant};

/// A request the writer has started to send.
#[derive(Clone, Copy, Debug)]
pub(crate) struct SendEvent {
    pub(crate) conn: u32,
    pub(crate) seq: u32,
    pub(crate) scheduled_ns: u64,
    pub(crate) send_ns: u64,
}

/// Read chunk.
const READ_CHUNK: usize = 64 * 1024;
/// Longest wait in `epoll_wait`, so the end of the run is noticed.
const WAIT_MS: libc::c_int = 5;
/// Interval of the HdrHistogram interval log.
const LOG_INTERVAL: Duration = Duration::from_secs(1);

/// Closed-loop pacing, driven from the reader.
pub(crate) struct ClosedLoop<'a> {
    pub(crate) sender: Sender<'a>,
    pub(crate) depth: u32,
    /// `--active-policy rotating`: each completion sends the next request to
    /// an idle connection drawn at random from all of them.
    pub(crate) rotate: Option<connlab_measure::SeededRng>,
}

/// A random connection with nothing in flight, alive: a few random draws,
/// then the first such connection after a random start (so a nearly busy
/// set still finds one in bounded time).
fn pick_idle(
    rng: &mut connlab_measure::SeededRng,
    in_flight: &[VecDeque<InFlight>],
    closed: &[bool],
    dead: &[AtomicBool],
) -> Option<usize> {
    let n = in_flight.len();
    let free = |c: usize| in_flight[c].is_empty() && !closed[c] && !dead[c].load(Relaxed);
    for _ in 0..32 {
        let c = rng.below(n as u64) as usize;
        if free(c) {
            return Some(c);
        }
    }
    let start = rng.below(n as u64) as usize;
    (0..n).map(|i| (start + i) % n).find(|&c| free(c))
}

pub(crate) struct ReaderPlan<'a, 'r> {
    pub(crate) fds: &'a [RawFd],
    pub(crate) is_active: &'a [bool],
    pub(crate) active: &'a [usize],
    pub(crate) dead: &'a [AtomicBool],
    pub(crate) protocol: Protocol,
    pub(crate) max_message: u32,
    pub(crate) start: Instant,
    pub(crate) warmup: Duration,
    /// End of sending (warm-up + duration).
    pub(crate) total: Duration,
    pub(crate) drain_timeout: Duration,
    pub(crate) writer_done: &'a AtomicBool,
    pub(crate) shutdown: &'a Shutdown,
    pub(crate) progress: &'a Progress,
    pub(crate) events: Option<rtrb::Consumer<SendEvent>>,
    pub(crate) closed_loop: Option<ClosedLoop<'a>>,
    pub(crate) records: Option<&'a mut (dyn RecordSink + 'r)>,
    /// `--manifest`: the file set, to file each latency under its size class.
    pub(crate) files: Option<(&'a crate::request::FileMix, u64)>,
}

#[derive(Default)]
pub(crate) struct ReaderOutcome {
    pub(crate) service: LatencyHistogram,
    pub(crate) corrected: LatencyHistogram,
    /// Closed loop only: its own send lag is zero by construction.
    pub(crate) closed_loop_sent: u64,
    pub(crate) closed_loop_bytes_sent: u64,
    pub(crate) completed: u64,
    pub(crate) measured_completed: u64,
    /// Errors of the measured window (requests scheduled in it; connection
    /// failures from its start on).
    pub(crate) errors: BTreeMap<&'static str, u64>,
    /// Errors of the warm-up.
    pub(crate) warmup_errors: BTreeMap<&'static str, u64>,
    pub(crate) idle_closed_by_peer: u64,
    pub(crate) bytes_received: u64,
    pub(crate) intervals: Vec<(Duration, Duration, hdrhistogram::Histogram<u64>)>,
    pub(crate) cpu: CpuTimes,
    pub(crate) cpu_seen: Option<usize>,
    pub(crate) interrupted: bool,
    pub(crate) peer_failed: bool,
    /// Service latency per size class (`--manifest` runs only).
    pub(crate) classes: Vec<LatencyHistogram>,
}

struct InFlight {
    seq: u32,
    scheduled_ns: u64,
    send_ns: u64,
}

pub(crate) fn run_reader(mut plan: ReaderPlan<'_, '_>) -> io::Result<ReaderOutcome> {
    let cpu_before = CpuTimes::thread();
    let mut out = ReaderOutcome::default();
    if plan.files.is_some() {
        out.classes = crate::request::class_histograms();
    }
    let n = plan.fds.len();
    // SAFETY: plain syscall; the result is checked.
    let ep = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
    if ep < 0 {
        return Err(io::Error::last_os_error());
    }
    let ep = Epoll(ep);
    for (i, &fd) in plan.fds.iter().enumerate() {
        ep.add(fd, i as u64)?;
    }
    let wake = u64::MAX;
    ep.add(plan.shutdown.wake_fd(), wake)?;
    let mut sessions: Vec<Option<ClientSession>> = plan
        .is_active
        .iter()
        .map(|&a| a.then(|| ClientSession::new(plan.protocol, plan.max_message)))
        .collect();
    let mut in_flight: Vec<VecDeque<InFlight>> = (0..n).map(|_| VecDeque::new()).collect();
    let mut outstanding: u64 = 0;
    let mut closed = vec![false; n];
    let rotating = plan
        .closed_loop
        .as_ref()
        .is_some_and(|cl| cl.rotate.is_some());
    // Rotating: every connection carries requests, so every one counts.
    let mut alive_active = if rotating { n } else { plan.active.len() };
    let mut buf = vec![0u8; READ_CHUNK];
    let mut events = vec![libc::epoll_event { events: 0, u64: 0 }; 1024];
    let warmup_ns = plan.warmup.as_nanos() as u64;
    let total_ns = plan.total.as_nanos() as u64;
    let mut interval_hist = LatencyHistogram::new();
    let mut interval_start = plan.warmup;
    let mut seq: u32 = 0;
    let mut drain_since: Option<Instant> = None;

    // Closed loop: fill every active connection to its depth.
    if let Some(cl) = plan.closed_loop.as_mut() {
        for &c in plan.active {
            for _ in 0..cl.depth {
                let now = plan.start.elapsed().as_nanos() as u64;
                in_flight[c].push_back(InFlight {
                    seq,
                    scheduled_ns: now,
                    send_ns: now,
                });
                outstanding += 1;
                if cl.sender.send(c, plan.fds[c], seq).is_err() {
                    plan.dead[c].store(true, Relaxed);
                }
                seq = seq.wrapping_add(1);
                out.closed_loop_sent += 1;
                plan.progress.sent.fetch_add(1, Relaxed);
            }
        }
    }

    loop {
        // SAFETY: `events` has room for its length.
        let k = unsafe {
            libc::epoll_wait(
                ep.0,
                events.as_mut_ptr(),
                events.len() as libc::c_int,
                WAIT_MS,
            )
        };
        if k < 0 {
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::Interrupted {
                return Err(e);
            }
        }
        drain_sends(plan.events.as_mut(), &mut in_flight, &mut outstanding);
        if plan.shutdown.requested() {
            out.interrupted = true;
            break;
        }
        for ev in &events[..k.max(0) as usize] {
            if ev.u64 == wake {
                continue;
            }
            let c = ev.u64 as usize;
            if closed[c] {
                continue;
            }
            let Some(session) = sessions[c].as_mut() else {
                // An idle connection is readable only when the server closed it
                // (or sent something it should not have).
                if drain_idle(plan.fds[c], &mut buf) {
                    out.idle_closed_by_peer += 1;
                    closed[c] = true;
                    ep.del(plan.fds[c]);
                }
                continue;
            };
            let mut to_send = 0u32;
            let mut fatal: Option<&'static str> = None;
            loop {
                // SAFETY: `buf` is valid for writes of its length.
                let r = unsafe {
                    libc::recv(
                        plan.fds[c],
                        buf.as_mut_ptr().cast(),
                        buf.len(),
                        libc::MSG_DONTWAIT,
                    )
                };
                if r == 0 {
                    fatal = Some(match session.finish() {
                        Err(_) => "truncated_response",
                        Ok(()) => "closed_by_peer",
                    });
                    break;
                }
                if r < 0 {
                    let e = io::Error::last_os_error();
                    match e.kind() {
                        io::ErrorKind::WouldBlock => break,
                        io::ErrorKind::Interrupted => continue,
                        io::ErrorKind::ConnectionReset => fatal = Some("reset"),
                        _ => fatal = Some("recv_failed"),
                    }
                    break;
                }
                // The writer pushes a send's event before sending it, so every
                // request answered in these bytes is in the ring by now.
                drain_sends(plan.events.as_mut(), &mut in_flight, &mut outstanding);
                let bytes = &buf[..r as usize];
                out.bytes_received += r as u64;
                let now = plan.start.elapsed().as_nanos() as u64;
                let queue = &mut in_flight[c];
                let mut mismatch = false;
                let (mut bad_status, mut bad_status_warmup) = (0u64, 0u64);
                let mut done_here = 0u64;
                let result = session.feed(bytes, &mut |done| {
                    let Some(req) = queue.pop_front() else {
                        mismatch = true;
                        return;
                    };
                    if done.seq.is_some_and(|s| s != req.seq) {
                        mismatch = true;
                    }
                    if done.status.is_some_and(|s| s != 200) {
                        if req.scheduled_ns < warmup_ns {
                            bad_status_warmup += 1;
                        } else {
                            bad_status += 1;
                        }
                    }
                    done_here += 1;
                    to_send += 1;
                    if req.scheduled_ns >= warmup_ns && req.scheduled_ns < total_ns {
                        let service = now.saturating_sub(req.send_ns);
                        let corrected = now.saturating_sub(req.scheduled_ns);
                        out.service.record(service);
                        out.corrected.record(corrected);
                        if let Some((files, salt)) = plan.files {
                            let class =
                                crate::request::size_class(files.size(files.entry(req.seq, salt)));
                            out.classes[class].record(service);
                        }
                        interval_hist.record(service);
                        out.measured_completed += 1;
                        if let Some(sink) = plan.records.as_deref_mut() {
                            sink.record(&RequestRecord {
                                conn: c as u32,
                                seq: req.seq,
                                scheduled_us: (req.scheduled_ns - warmup_ns) as f64 / 1e3,
                                send_us: req.send_ns.saturating_sub(warmup_ns) as f64 / 1e3,
                                complete_us: now.saturating_sub(warmup_ns) as f64 / 1e3,
                                service_us: service as f64 / 1e3,
                                corrected_us: corrected as f64 / 1e3,
                                send_lag_us: req.send_ns.saturating_sub(req.scheduled_ns) as f64
                                    / 1e3,
                            });
                        }
                    }
                });
                outstanding -= done_here;
                out.completed += done_here;
                plan.progress.completed.fetch_add(done_here, Relaxed);
                out.count_error("http_status", bad_status, false);
                out.count_error("http_status", bad_status_warmup, true);
                plan.progress
                    .errors
                    .fetch_add(bad_status + bad_status_warmup, Relaxed);
                if result.is_err() {
                    fatal = Some("protocol");
                    break;
                }
                if mismatch {
                    fatal = Some("unexpected_response");
                    break;
                }
                if (r as usize) < buf.len() {
                    break;
                }
            }
            if let Some(kind) = fatal {
                let now = plan.start.elapsed().as_nanos() as u64;
                out.count_error(kind, 1, now < warmup_ns);
                plan.progress.errors.fetch_add(1, Relaxed);
                outstanding -= in_flight[c].len() as u64;
                out.count_unanswered(in_flight[c].drain(..), warmup_ns);
                plan.dead[c].store(true, Relaxed);
                closed[c] = true;
                ep.del(plan.fds[c]);
                alive_active -= 1;
                out.peer_failed = true;
                continue;
            }
            if let Some(cl) = plan.closed_loop.as_mut() {
                let now = plan.start.elapsed().as_nanos() as u64;
                if now < total_ns {
                    for _ in 0..to_send {
                        let target = match cl.rotate.as_mut() {
                            None => c,
                            Some(rng) => match pick_idle(rng, &in_flight, &closed, plan.dead) {
                                Some(t) => t,
                                None => break,
                            },
                        };
                        in_flight[target].push_back(InFlight {
                            seq,
                            scheduled_ns: now,
                            send_ns: now,
                        });
                        outstanding += 1;
                        if cl.sender.send(target, plan.fds[target], seq).is_err() {
                            plan.dead[target].store(true, Relaxed);
                        }
                        seq = seq.wrapping_add(1);
                        out.closed_loop_sent += 1;
                        plan.progress.sent.fetch_add(1, Relaxed);
                    }
                }
            }
        }
        if let Some(cl) = plan.closed_loop.as_mut() {
            if cl.sender.has_backlog() {
                let dead = plan.dead;
                cl.sender
                    .flush_backlog(plan.fds, |c| dead[c].store(true, Relaxed));
            }
        }
        // One interval-log entry per second of measured time.
        let elapsed = plan.start.elapsed();
        if elapsed >= interval_start + LOG_INTERVAL && elapsed > plan.warmup {
            out.intervals.push((
                interval_start - plan.warmup,
                elapsed - interval_start,
                interval_hist.hdr().clone(),
            ));
            interval_hist.reset();
            interval_start = elapsed;
        }
        if alive_active == 0 {
            break;
        }
        let sending_over = match plan.closed_loop {
            Some(_) => elapsed >= plan.total,
            None => plan.writer_done.load(Relaxed),
        };
        if sending_over {
            let ring_empty = plan.events.as_ref().is_none_or(|r| r.is_empty());
            if outstanding == 0 && ring_empty {
                break;
            }
            let since = *drain_since.get_or_insert_with(Instant::now);
            if since.elapsed() >= plan.drain_timeout {
                for q in &mut in_flight {
                    out.count_unanswered(q.drain(..), warmup_ns);
                }
                break;
            }
        }
    }
    if !interval_hist.is_empty() {
        let elapsed = plan.start.elapsed();
        out.intervals.push((
            interval_start.saturating_sub(plan.warmup),
            elapsed.saturating_sub(interval_start),
            interval_hist.hdr().clone(),
        ));
    }
    if let Some(cl) = plan.closed_loop.as_ref() {
        out.closed_loop_bytes_sent = cl.sender.bytes_sent;
    }
    out.cpu = CpuTimes::thread().since(&cpu_before);
    out.cpu_seen = connlab_os::current_cpu();
    Ok(out)
}

impl ReaderOutcome {
    /// Adds `n` errors of `kind` to the warm-up's or the measured window's count.
    fn count_error(&mut self, kind: &'static str, n: u64, warmup: bool) {
        if n == 0 {
            return;
        }
        let map = if warmup {
            &mut self.warmup_errors
        } else {
            &mut self.errors
        };
        *map.entry(kind).or_default() += n;
    }

    /// Counts requests that will get no answer, each in its own window.
    fn count_unanswered(&mut self, lost: impl Iterator<Item = InFlight>, warmup_ns: u64) {
        let (mut warm, mut measured) = (0, 0);
        for r in lost {
            if r.scheduled_ns < warmup_ns {
                warm += 1;
            } else {
                measured += 1;
            }
        }
        self.count_error("unanswered", measured, false);
        self.count_error("unanswered", warm, true);
    }
}

/// Moves the writer's send events into the per-connection FIFOs.
fn drain_sends(
    ring: Option<&mut rtrb::Consumer<SendEvent>>,
    in_flight: &mut [VecDeque<InFlight>],
    outstanding: &mut u64,
) {
    let Some(ring) = ring else {
        return;
    };
    while let Ok(ev) = ring.pop() {
        in_flight[ev.conn as usize].push_back(InFlight {
            seq: ev.seq,
            scheduled_ns: ev.scheduled_ns,
            send_ns: ev.send_ns,
        });
        *outstanding += 1;
    }
}

/// Reads what an idle connection has; true when the server closed it.
fn drain_idle(fd: RawFd, buf: &mut [u8]) -> bool {
    loop {
        // SAFETY: `buf` is valid for writes of its length.
        let r = unsafe { libc::recv(fd, buf.as_mut_ptr().cast(), buf.len(), libc::MSG_DONTWAIT) };
        if r == 0 {
            return true;
        }
        if r < 0 {
            let e = io::Error::last_os_error();
            return match e.kind() {
                io::ErrorKind::WouldBlock => false,
                io::ErrorKind::Interrupted => continue,
                _ => true,
            };
        }
    }
}

/// An owned epoll instance.
struct Epoll(RawFd);

impl Epoll {
    fn add(&self, fd: RawFd, token: u64) -> io::Result<()> {
        let mut ev = libc::epoll_event {
            events: (libc::EPOLLIN | libc::EPOLLRDHUP) as u32,
            u64: token,
        };
        // SAFETY: valid epoll and target descriptors and event.
        if unsafe { libc::epoll_ctl(self.0, libc::EPOLL_CTL_ADD, fd, &mut ev) } < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    fn del(&self, fd: RawFd) {
        // SAFETY: removing a registered descriptor; the event argument may be null.
        unsafe { libc::epoll_ctl(self.0, libc::EPOLL_CTL_DEL, fd, std::ptr::null_mut()) };
    }
}

impl Drop for Epoll {
    fn drop(&mut self) {
        // SAFETY: we own this descriptor and close it once.
        unsafe { libc::close(self.0) };
    }
}
