//! The reader thread: waits for readiness on every connection (idle ones too,
//! to notice the server closing them), reads, parses responses with the
//! protocol core, timestamps and records. It learns of each send from the
//! writer through an SPSC ring; in closed loop it also sends the next request
//! itself as soon as a response completes.

use crate::checks::{Systematic, Windows, LATENCY_SAMPLES};
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
    /// `--io uring`: requests are not written here but queued for the
    /// io_uring reader, which sends them from its ring (`sender` then only
    /// lends its request template).
    pub(crate) via_ring: bool,
}

/// The send time of a request queued for the ring and not yet handed to
/// the kernel (see [`Core::stamp_sends`]).
const UNSTAMPED: u64 = u64::MAX;

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
    /// Requests the measured window is expected to complete (open loop:
    /// rate x duration), to size the latency sample; 0 when unknown.
    pub(crate) expected_requests: u64,
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
    /// Measured requests per window of their scheduled instant.
    pub(crate) windows: Windows,
    /// A systematic sample of measured service latencies (us) in
    /// completion order: every k-th completion, k from the expected count
    /// (closed loop: 1), halving the sample and doubling k whenever it
    /// fills (see [`Systematic`]).
    pub(crate) latency_sample: Systematic,
}

struct InFlight {
    seq: u32,
    scheduled_ns: u64,
    send_ns: u64,
}

/// The reader's state and bookkeeping, apart from how it waits: the epoll
/// loop below and the io_uring loop (`uring_reader.rs`) both feed it the
/// bytes each connection received, so they parse, match, time and count the
/// same way.
pub(crate) struct Core<'a, 'r> {
    pub(crate) plan: ReaderPlan<'a, 'r>,
    pub(crate) out: ReaderOutcome,
    sessions: Vec<Option<ClientSession>>,
    in_flight: Vec<VecDeque<InFlight>>,
    outstanding: u64,
    closed: Vec<bool>,
    alive_active: usize,
    warmup_ns: u64,
    total_ns: u64,
    interval_hist: LatencyHistogram,
    interval_start: Duration,
    seq: u32,
    drain_since: Option<Instant>,
    cpu_before: CpuTimes,
    /// Ring sends: requests (connection, seq) for the io_uring reader to send.
    queued: Vec<(usize, u32)>,
    /// Ring sends: connections whose newest requests are [`UNSTAMPED`].
    unstamped: Vec<usize>,
}

impl<'a, 'r> Core<'a, 'r> {
    /// The state for `plan`; in closed loop, every active connection is
    /// filled to its depth here.
    pub(crate) fn new(plan: ReaderPlan<'a, 'r>) -> Self {
        let cpu_before = CpuTimes::thread();
        let mut out = ReaderOutcome {
            windows: Windows::new(plan.warmup.as_nanos() as u64, plan.total.as_nanos() as u64),
            latency_sample: Systematic::new(LATENCY_SAMPLES, plan.expected_requests),
            ..ReaderOutcome::default()
        };
        if plan.files.is_some() {
            out.classes = crate::request::class_histograms();
        }
        let n = plan.fds.len();
        let sessions: Vec<Option<ClientSession>> = plan
            .is_active
            .iter()
            .map(|&a| a.then(|| ClientSession::new(plan.protocol, plan.max_message)))
            .collect();
        let rotating = plan
            .closed_loop
            .as_ref()
            .is_some_and(|cl| cl.rotate.is_some());
        // Rotating: every connection carries requests, so every one counts.
        let alive_active = if rotating { n } else { plan.active.len() };
        let mut core = Core {
            warmup_ns: plan.warmup.as_nanos() as u64,
            total_ns: plan.total.as_nanos() as u64,
            interval_start: plan.warmup,
            plan,
            out,
            sessions,
            in_flight: (0..n).map(|_| VecDeque::new()).collect(),
            outstanding: 0,
            closed: vec![false; n],
            alive_active,
            interval_hist: LatencyHistogram::new(),
            seq: 0,
            drain_since: None,
            cpu_before,
            queued: Vec::new(),
            unstamped: Vec::new(),
        };
        // Closed loop: fill every active connection to its depth.
        let active = core.plan.active;
        for &c in active {
            let depth = core.plan.closed_loop.as_ref().map_or(0, |cl| cl.depth);
            for _ in 0..depth {
                let now = core.plan.start.elapsed().as_nanos() as u64;
                core.start_request(c, now);
            }
        }
        core
    }

    /// Closed loop: puts the next request on connection `target` in flight,
    /// decided at `now`: written at once (epoll), or queued for the ring
    /// with its send time left to [`Core::stamp_sends`] (uring).
    fn start_request(&mut self, target: usize, now: u64) {
        let Some(cl) = self.plan.closed_loop.as_mut() else {
            return;
        };
        let seq = self.seq;
        self.in_flight[target].push_back(InFlight {
            seq,
            scheduled_ns: now,
            send_ns: if cl.via_ring { UNSTAMPED } else { now },
        });
        self.outstanding += 1;
        if cl.via_ring {
            self.queued.push((target, seq));
            self.unstamped.push(target);
        } else if cl.sender.send(target, self.plan.fds[target], seq).is_err() {
            self.plan.dead[target].store(true, Relaxed);
        }
        self.seq = seq.wrapping_add(1);
        self.out.closed_loop_sent += 1;
        self.plan.progress.sent.fetch_add(1, Relaxed);
    }

    /// Ring sends: moves the requests queued since the last call into `into`
    /// as (connection, seq), oldest first.
    pub(crate) fn take_queued(&mut self, into: &mut Vec<(usize, u32)>) {
        into.append(&mut self.queued);
    }

    /// Ring sends: gives every request queued and not yet stamped its send
    /// time (and, closed loop, its scheduled time), taken now. The uring
    /// reader calls this immediately before the `io_uring_enter` that submits
    /// their SEND entries, the point where they are handed to the kernel,
    /// as the epoll path stamps a request immediately before its `sendmsg`.
    /// A request that waits behind its connection's earlier entry (the
    /// socket was full) keeps this stamp, as one in the epoll path's backlog
    /// keeps the stamp of its first `sendmsg`.
    pub(crate) fn stamp_sends(&mut self) {
        if self.unstamped.is_empty() {
            return;
        }
        let now = self.plan.start.elapsed().as_nanos() as u64;
        for &c in &self.unstamped {
            for r in self.in_flight[c].iter_mut().rev() {
                if r.send_ns != UNSTAMPED {
                    break;
                }
                r.send_ns = now;
                r.scheduled_ns = now;
            }
        }
        self.unstamped.clear();
    }

    /// True once connection `c` is given up (closed by the peer or failed).
    pub(crate) fn is_closed(&self, c: usize) -> bool {
        self.closed[c]
    }

    /// True when connection `c` carries requests (it has a session).
    pub(crate) fn is_active(&self, c: usize) -> bool {
        self.sessions[c].is_some()
    }

    /// Moves the writer's send events into the per-connection FIFOs.
    pub(crate) fn drain_sends(&mut self) {
        drain_sends(
            self.plan.events.as_mut(),
            &mut self.in_flight,
            &mut self.outstanding,
        );
    }

    /// True (and the outcome marked) when a stop was requested.
    pub(crate) fn stop_requested(&mut self) -> bool {
        if self.plan.shutdown.requested() {
            self.out.interrupted = true;
            return true;
        }
        false
    }

    /// Feeds bytes active connection `c` received, timestamped now: each
    /// completed response is matched to its request and recorded. Returns
    /// the responses completed, or the error kind that ends the connection.
    pub(crate) fn on_bytes(&mut self, c: usize, bytes: &[u8]) -> Result<u32, &'static str> {
        // The writer pushes a send's event before sending it, so every
        // request answered in these bytes is in the ring by now.
        self.drain_sends();
        let Core {
            plan,
            out,
            sessions,
            in_flight,
            interval_hist,
            warmup_ns,
            total_ns,
            ..
        } = self;
        let (warmup_ns, total_ns) = (*warmup_ns, *total_ns);
        let Some(session) = sessions[c].as_mut() else {
            return Ok(0);
        };
        out.bytes_received += bytes.len() as u64;
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
            if req.scheduled_ns >= warmup_ns && req.scheduled_ns < total_ns {
                let service = now.saturating_sub(req.send_ns);
                let corrected = now.saturating_sub(req.scheduled_ns);
                out.service.record(service);
                out.corrected.record(corrected);
                if let Some((files, salt)) = plan.files {
                    let class = crate::request::size_class(files.size(files.entry(req.seq, salt)));
                    out.classes[class].record(service);
                }
                interval_hist.record(service);
                out.windows.record(req.scheduled_ns, service);
                out.latency_sample.offer(service as f64 / 1e3);
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
                        send_lag_us: req.send_ns.saturating_sub(req.scheduled_ns) as f64 / 1e3,
                    });
                }
            }
        });
        self.outstanding -= done_here;
        self.out.completed += done_here;
        self.plan.progress.completed.fetch_add(done_here, Relaxed);
        self.out.count_error("http_status", bad_status, false);
        self.out.count_error("http_status", bad_status_warmup, true);
        self.plan
            .progress
            .errors
            .fetch_add(bad_status + bad_status_warmup, Relaxed);
        if result.is_err() {
            return Err("protocol");
        }
        if mismatch {
            return Err("unexpected_response");
        }
        Ok(done_here as u32)
    }

    /// The error kind of active connection `c` reaching end of stream.
    pub(crate) fn on_eof(&mut self, c: usize) -> &'static str {
        match self.sessions[c].as_mut().map(|s| s.finish()) {
            Some(Err(_)) => "truncated_response",
            _ => "closed_by_peer",
        }
    }

    /// Gives up active connection `c` after an error of `kind`: its
    /// outstanding requests count as unanswered.
    pub(crate) fn fail(&mut self, c: usize, kind: &'static str) {
        let now = self.plan.start.elapsed().as_nanos() as u64;
        self.out.count_error(kind, 1, now < self.warmup_ns);
        self.plan.progress.errors.fetch_add(1, Relaxed);
        self.outstanding -= self.in_flight[c].len() as u64;
        let warmup_ns = self.warmup_ns;
        let lost: Vec<InFlight> = self.in_flight[c].drain(..).collect();
        self.out.count_unanswered(lost.into_iter(), warmup_ns);
        self.plan.dead[c].store(true, Relaxed);
        self.closed[c] = true;
        self.alive_active -= 1;
        self.out.peer_failed = true;
    }

    /// Idle connection `c` was closed by the server.
    pub(crate) fn idle_closed(&mut self, c: usize) {
        self.out.idle_closed_by_peer += 1;
        self.closed[c] = true;
    }

    /// Closed loop: sends `count` next requests after responses completed on
    /// connection `c` (to `c`, or to random idle connections when rotating).
    pub(crate) fn send_next(&mut self, c: usize, count: u32) {
        if self.plan.closed_loop.is_none() {
            return;
        }
        let now = self.plan.start.elapsed().as_nanos() as u64;
        if now >= self.total_ns {
            return;
        }
        for _ in 0..count {
            let Core {
                plan,
                in_flight,
                closed,
                ..
            } = self;
            let rotate = plan.closed_loop.as_mut().and_then(|cl| cl.rotate.as_mut());
            let target = match rotate {
                None => c,
                Some(rng) => match pick_idle(rng, in_flight, closed, plan.dead) {
                    Some(t) => t,
                    None => break,
                },
            };
            self.start_request(target, now);
        }
    }

    /// The end of a loop turn: retries closed-loop backlogs, logs the
    /// interval histogram, and decides whether the run is over (true: stop).
    pub(crate) fn end_turn(&mut self) -> bool {
        if let Some(cl) = self.plan.closed_loop.as_mut() {
            if cl.sender.has_backlog() {
                let dead = self.plan.dead;
                cl.sender
                    .flush_backlog(self.plan.fds, |c| dead[c].store(true, Relaxed));
            }
        }
        // One interval-log entry per second of measured time.
        let elapsed = self.plan.start.elapsed();
        if elapsed >= self.interval_start + LOG_INTERVAL && elapsed > self.plan.warmup {
            self.out.intervals.push((
                self.interval_start - self.plan.warmup,
                elapsed - self.interval_start,
                self.interval_hist.hdr().clone(),
            ));
            self.interval_hist.reset();
            self.interval_start = elapsed;
        }
        if self.alive_active == 0 {
            return true;
        }
        let sending_over = match self.plan.closed_loop {
            Some(_) => elapsed >= self.plan.total,
            None => self.plan.writer_done.load(Relaxed),
        };
        if sending_over {
            let ring_empty = self.plan.events.as_ref().is_none_or(|r| r.is_empty());
            if self.outstanding == 0 && ring_empty {
                return true;
            }
            let since = *self.drain_since.get_or_insert_with(Instant::now);
            if since.elapsed() >= self.plan.drain_timeout {
                let warmup_ns = self.warmup_ns;
                for q in &mut self.in_flight {
                    let lost: Vec<InFlight> = q.drain(..).collect();
                    self.out.count_unanswered(lost.into_iter(), warmup_ns);
                }
                return true;
            }
        }
        false
    }

    /// The outcome, with the last interval and the thread's CPU time.
    pub(crate) fn finish(mut self) -> ReaderOutcome {
        if !self.interval_hist.is_empty() {
            let elapsed = self.plan.start.elapsed();
            self.out.intervals.push((
                self.interval_start.saturating_sub(self.plan.warmup),
                elapsed.saturating_sub(self.interval_start),
                self.interval_hist.hdr().clone(),
            ));
        }
        if let Some(cl) = self.plan.closed_loop.as_ref() {
            self.out.closed_loop_bytes_sent = cl.sender.bytes_sent;
        }
        self.out.cpu = CpuTimes::thread().since(&self.cpu_before);
        self.out.cpu_seen = connlab_os::current_cpu();
        self.out
    }
}

/// The epoll reader: waits for readiness on every connection and reads each
/// ready one until it would block.
pub(crate) fn run_reader(plan: ReaderPlan<'_, '_>) -> io::Result<ReaderOutcome> {
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
    let fds = plan.fds;
    let mut core = Core::new(plan);
    let mut buf = vec![0u8; READ_CHUNK];
    let mut events = vec![libc::epoll_event { events: 0, u64: 0 }; 1024];
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
        core.drain_sends();
        if core.stop_requested() {
            break;
        }
        for ev in &events[..k.max(0) as usize] {
            if ev.u64 == wake {
                continue;
            }
            let c = ev.u64 as usize;
            if core.is_closed(c) {
                continue;
            }
            if !core.is_active(c) {
                // An idle connection is readable only when the server closed it
                // (or sent something it should not have).
                if drain_idle(fds[c], &mut buf) {
                    core.idle_closed(c);
                    ep.del(fds[c]);
                }
                continue;
            }
            let mut to_send = 0u32;
            let mut fatal: Option<&'static str> = None;
            loop {
                // SAFETY: `buf` is valid for writes of its length.
                let r = unsafe {
                    libc::recv(
                        fds[c],
                        buf.as_mut_ptr().cast(),
                        buf.len(),
                        libc::MSG_DONTWAIT,
                    )
                };
                if r == 0 {
                    fatal = Some(core.on_eof(c));
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
                match core.on_bytes(c, &buf[..r as usize]) {
                    Ok(done) => to_send += done,
                    Err(kind) => {
                        fatal = Some(kind);
                        break;
                    }
                }
                if (r as usize) < buf.len() {
                    break;
                }
            }
            if let Some(kind) = fatal {
                core.fail(c, kind);
                ep.del(fds[c]);
                continue;
            }
            core.send_next(c, to_send);
        }
        if core.end_turn() {
            break;
        }
    }
    Ok(core.finish())
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::request::RequestTemplate;
    use connlab_proto::Header;

    /// A CLB1 response of 16 bytes (header only) to request `seq`.
    fn response(seq: u32) -> [u8; 16] {
        let mut b = [0u8; 16];
        Header {
            req_len: 64,
            resp_len: 16,
            seq,
        }
        .emit(&mut b);
        b
    }

    #[test]
    fn ring_requests_are_queued_in_order_and_stamped_when_handed_over() {
        let template = RequestTemplate::new(Protocol::Clb1, 64, 16, "/");
        let fds = [-1, -1, -1];
        let is_active = [true, false, true];
        let active = [0usize, 2];
        let dead: Vec<AtomicBool> = (0..3).map(|_| AtomicBool::new(false)).collect();
        let shutdown = Shutdown::new().expect("an eventfd");
        let progress = Progress::default();
        let writer_done = AtomicBool::new(false);
        let plan = ReaderPlan {
            fds: &fds,
            is_active: &is_active,
            active: &active,
            dead: &dead,
            protocol: Protocol::Clb1,
            max_message: 1024,
            start: Instant::now(),
            warmup: Duration::ZERO,
            total: Duration::from_secs(3600),
            drain_timeout: Duration::from_secs(1),
            writer_done: &writer_done,
            shutdown: &shutdown,
            progress: &progress,
            events: None,
            closed_loop: Some(ClosedLoop {
                sender: Sender::new(&template, fds.len()),
                depth: 2,
                rotate: None,
                via_ring: true,
            }),
            records: None,
            files: None,
            expected_requests: 0,
        };
        let mut core = Core::new(plan);
        // The fill is queued for the ring, nothing written, nothing stamped.
        let mut queued = Vec::new();
        core.take_queued(&mut queued);
        assert_eq!(queued, [(0, 0), (0, 1), (2, 2), (2, 3)]);
        assert!(core
            .in_flight
            .iter()
            .flatten()
            .all(|r| r.send_ns == UNSTAMPED));
        assert_eq!(core.out.closed_loop_sent, 4);
        core.stamp_sends();
        let first = core.in_flight[0][0].send_ns;
        assert_ne!(first, UNSTAMPED);
        for r in core.in_flight.iter().flatten() {
            assert_eq!((r.send_ns, r.scheduled_ns), (first, first));
        }
        // The answer to request 0 queues request 4 on the same connection;
        // only it awaits a stamp, the one still in flight keeps its own.
        assert_eq!(core.on_bytes(0, &response(0)), Ok(1));
        core.send_next(0, 1);
        queued.clear();
        core.take_queued(&mut queued);
        assert_eq!(queued, [(0, 4)]);
        let seqs: Vec<u32> = core.in_flight[0].iter().map(|r| r.seq).collect();
        assert_eq!(seqs, [1, 4]);
        assert_eq!(core.in_flight[0][0].send_ns, first);
        assert_eq!(core.in_flight[0][1].send_ns, UNSTAMPED);
        core.stamp_sends();
        assert!(core.in_flight[0][1].send_ns >= first);
        assert_ne!(core.in_flight[0][1].send_ns, UNSTAMPED);
        assert_eq!(core.out.measured_completed, 1);
        assert!(dead.iter().all(|d| !d.load(Relaxed)), "nothing was written");
    }
}
