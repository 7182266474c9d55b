//! The forwarding loop: one thread per direction, each owning its TUN device
//! and its [`Scheduler`]. A thread reads every packet waiting (stamping it
//! with the monotonic clock), asks the model for its fate, holds accepted
//! packets ordered by departure time and writes each back when its time
//! comes. It waits in `ppoll` (timer slack 1 ns) on the TUN and the
//! shutdown descriptor until `spin` before the next departure, then spins
//! (still reading) for the rest: this VM's timers fire 25-100 us late.

use crate::config::LinkConfig;
use crate::log::{Fate, LogRecord, LogWriter};
use crate::packet::{PacketInfo, VnetHdr, VNET_HDR_LEN};
use crate::sched::{ModelCounters, Scheduler, Verdict};
use crate::tun::Tun;
use crate::LinkemError;
use connlab_os::Shutdown;
use serde::Serialize;
use std::collections::BinaryHeap;
use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::sync::mpsc::Sender;
use std::time::{Duration, Instant};

/// How the emulator runs (not what it emulates).
#[derive(Clone, Debug)]
pub struct EmulatorOptions {
    /// Write the per-packet CSV log here.
    pub log: Option<PathBuf>,
    /// Spin instead of sleeping for the last part of a wait before a departure.
    pub spin: Duration,
    /// Drop (as `overflow`) packets that would make one direction hold more
    /// bytes than this.
    pub max_held_bytes: u64,
}

impl Default for EmulatorOptions {
    fn default() -> Self {
        EmulatorOptions {
            log: None,
            spin: Duration::from_micros(50),
            max_held_bytes: 256 << 20,
        }
    }
}

/// Counters of one direction.
#[derive(Clone, Debug, Default, Serialize)]
pub struct DirStats {
    /// What the model decided (offered, passed, dropped by loss and by queue).
    pub model: ModelCounters,
    /// Packets written back (GSO super-packets count once).
    pub forwarded_packets: u64,
    /// Wire packets written back (GSO super-packets count their segments).
    pub forwarded_segments: u64,
    /// Wire bytes written back.
    pub forwarded_bytes: u64,
    /// Packets dropped because too many bytes were held.
    pub dropped_overflow: u64,
    /// Packets whose write back failed.
    pub write_errors: u64,
    /// Packets still held when the emulator stopped (not sent).
    pub unsent_at_stop: u64,
    /// Packets the kernel dropped at the TUN device before the emulator read
    /// them (its queue was full because the emulator was late); `None` when
    /// the counter could not be read. Loss outside the model.
    pub dropped_at_tun: Option<u64>,
    /// How late packets left compared with their scheduled time.
    pub lateness: Lateness,
}

/// Departure lateness (actual minus scheduled), microseconds.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Lateness {
    /// Median.
    pub p50_us: u64,
    /// 99th percentile.
    pub p99_us: u64,
    /// Maximum.
    pub max_us: u64,
    /// Mean.
    pub mean_us: f64,
}

/// The outcome of a run.
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    /// The link from left to right.
    pub left_to_right: DirStats,
    /// The link from right to left.
    pub right_to_left: DirStats,
    /// Wall time the emulator ran.
    pub elapsed_s: f64,
    /// Lines written to the log (without the header), if logging.
    pub log_lines: Option<u64>,
}

/// Forwards through the two TUN devices (left to right, right to left) with
/// the two configurations until `stop` trips; then writes the log and
/// returns the statistics.
pub fn run(
    tuns: &[Tun; 2],
    configs: [LinkConfig; 2],
    options: &EmulatorOptions,
    stop: &Shutdown,
) -> Result<Report, LinkemError> {
    for c in &configs {
        c.validate().map_err(LinkemError::BadConfig)?;
    }
    let log = options.log.as_deref().map(LogWriter::create).transpose()?;
    let epoch = Instant::now();
    let tun_drops_before = tuns.each_ref().map(Tun::tx_dropped);
    let results: Vec<Result<DirStats, LinkemError>> = std::thread::scope(|s| {
        let handles: Vec<_> = tuns
            .iter()
            .zip(configs)
            .enumerate()
            .map(|(d, (tun, cfg))| {
                let sender = log.as_ref().and_then(LogWriter::sender);
                std::thread::Builder::new()
                    .name(format!("linkem-{}", ["lr", "rl"][d]))
                    .spawn_scoped(s, move || {
                        let r = Direction::new(d as u8, tun, cfg, options, epoch, sender).run(stop);
                        if r.is_err() {
                            // One direction failing stops the other.
                            stop.trigger();
                        }
                        r
                    })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| match h {
                Ok(h) => h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)),
                Err(e) => {
                    stop.trigger();
                    Err(LinkemError::io("starting a forwarding thread", e))
                }
            })
            .collect()
    });
    let elapsed_s = epoch.elapsed().as_secs_f64();
    let log_lines = log.map(LogWriter::finish).transpose()?;
    let mut it = results.into_iter();
    let (Some(lr), Some(rl)) = (it.next(), it.next()) else {
        unreachable!("two directions")
    };
    let (mut lr, mut rl) = (lr?, rl?);
    for ((stats, tun), before) in [&mut lr, &mut rl]
        .into_iter()
        .zip(tuns)
        .zip(tun_drops_before)
    {
        stats.dropped_at_tun = before
            .zip(tun.tx_dropped())
            .map(|(b, a)| a.saturating_sub(b));
    }
    Ok(Report {
        left_to_right: lr,
        right_to_left: rl,
        elapsed_s,
        log_lines,
    })
}

/// A packet waiting for its departure.
struct Held {
    depart: u64,
    index: u64,
    arrival: u64,
    bytes: u64,
    segments: u64,
    info: PacketInfo,
    data: Vec<u8>,
}

impl PartialEq for Held {
    fn eq(&self, other: &Self) -> bool {
        (self.depart, self.index) == (other.depart, other.index)
    }
}
impl Eq for Held {}
impl PartialOrd for Held {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Held {
    /// Reversed, so the max-heap pops the earliest departure (then the
    /// earliest arrival) first.
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (other.depart, other.index).cmp(&(self.depart, self.index))
    }
}

const LATENESS_BUCKETS: usize = 10_001;
const LOG_BATCH: usize = 512;

struct Direction<'a> {
    id: u8,
    tun: &'a Tun,
    sched: Scheduler,
    options: &'a EmulatorOptions,
    epoch: Instant,
    log: Option<Sender<Vec<LogRecord>>>,
    batch: Vec<LogRecord>,
    held: BinaryHeap<Held>,
    held_bytes: u64,
    index: u64,
    stats: DirStats,
    /// Lateness histogram in microseconds (last bucket: beyond).
    late_us: Vec<u64>,
    late_sum_ns: u128,
}

impl<'a> Direction<'a> {
    fn new(
        id: u8,
        tun: &'a Tun,
        cfg: LinkConfig,
        options: &'a EmulatorOptions,
        epoch: Instant,
        log: Option<Sender<Vec<LogRecord>>>,
    ) -> Self {
        Direction {
            id,
            tun,
            sched: Scheduler::new(cfg),
            options,
            epoch,
            log,
            batch: Vec::with_capacity(LOG_BATCH),
            held: BinaryHeap::new(),
            held_bytes: 0,
            index: 0,
            stats: DirStats::default(),
            late_us: vec![0; LATENESS_BUCKETS],
            late_sum_ns: 0,
        }
    }

    fn now(&self) -> u64 {
        self.epoch.elapsed().as_nanos() as u64
    }

    fn run(mut self, stop: &Shutdown) -> Result<DirStats, LinkemError> {
        // SAFETY: PR_SET_TIMERSLACK only changes this thread's timer slack.
        unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0) };
        let mut buf = vec![0u8; VNET_HDR_LEN + 65_536];
        let spin_ns = self.options.spin.as_nanos() as u64;
        loop {
            self.read_waiting(&mut buf)?;
            self.send_due();
            if stop.requested() {
                break;
            }
            let now = self.now();
            let timeout = match self.held.peek() {
                Some(h) if h.depart <= now + spin_ns => continue,
                Some(h) => Some(h.depart - now - spin_ns),
                None => None,
            };
            self.flush_log();
            self.wait(stop, timeout)?;
        }
        while let Some(h) = self.held.pop() {
            self.stats.unsent_at_stop += 1;
            self.record(&h, h.arrival, Some(h.depart), None, Fate::Unsent);
        }
        self.flush_log();
        self.stats.model = self.sched.counters();
        self.finish_lateness();
        Ok(self.stats)
    }

    /// Reads up to a batch of waiting packets and schedules them.
    fn read_waiting(&mut self, buf: &mut [u8]) -> Result<(), LinkemError> {
        let offload = self.tun.offload();
        let off = if offload { VNET_HDR_LEN } else { 0 };
        for _ in 0..256 {
            let n = match self.tun.recv(buf) {
                Ok(Some(n)) if n > off => n,
                Ok(Some(_)) => continue,
                Ok(None) => break,
                Err(e) => return Err(LinkemError::io(format!("reading {}", self.tun.name()), e)),
            };
            let now = self.now();
            let vh = if offload {
                VnetHdr::parse(buf).unwrap_or_default()
            } else {
                VnetHdr::default()
            };
            let (segments, bytes) = vh.wire(n - off);
            self.index += 1;
            let info = if self.log.is_some() {
                PacketInfo::parse(&buf[off..n])
            } else {
                PacketInfo::default()
            };
            let mut h = Held {
                depart: 0,
                index: self.index,
                arrival: now,
                bytes,
                segments,
                info,
                data: Vec::new(),
            };
            match self.sched.offer(now, bytes) {
                Verdict::Drop(reason) => {
                    let fate = match reason {
                        crate::sched::DropReason::Loss => Fate::Loss,
                        crate::sched::DropReason::Queue => Fate::Queue,
                    };
                    self.record(&h, now, None, None, fate);
                }
                Verdict::Depart(t) if self.held_bytes + n as u64 > self.options.max_held_bytes => {
                    self.stats.dropped_overflow += 1;
                    self.record(&h, now, Some(t), None, Fate::Overflow);
                }
                Verdict::Depart(t) => {
                    h.depart = t;
                    h.data = buf[..n].to_vec();
                    self.held_bytes += n as u64;
                    self.held.push(h);
                }
            }
        }
        Ok(())
    }

    /// Writes back every packet whose departure time has come.
    fn send_due(&mut self) {
        let mut now = self.now();
        while self.held.peek().is_some_and(|h| h.depart <= now) {
            let Some(h) = self.held.pop() else { break };
            self.held_bytes -= h.data.len() as u64;
            let fate = match self.tun.send(&h.data) {
                Ok(()) => {
                    self.stats.forwarded_packets += 1;
                    self.stats.forwarded_segments += h.segments;
                    self.stats.forwarded_bytes += h.bytes;
                    let late = now - h.depart;
                    self.late_sum_ns += late as u128;
                    let b = ((late / 1000) as usize).min(LATENESS_BUCKETS - 1);
                    self.late_us[b] += 1;
                    Fate::Sent
                }
                Err(_) => {
                    self.stats.write_errors += 1;
                    Fate::WriteError
                }
            };
            self.record(&h, h.arrival, Some(h.depart), Some(now), fate);
            now = self.now();
        }
    }

    fn record(
        &mut self,
        h: &Held,
        arrival: u64,
        scheduled: Option<u64>,
        departure: Option<u64>,
        fate: Fate,
    ) {
        if self.log.is_none() {
            return;
        }
        self.batch.push(LogRecord {
            direction: self.id,
            index: h.index,
            arrival_ns: arrival,
            scheduled_ns: scheduled,
            departure_ns: departure,
            fate,
            bytes: h.bytes,
            segments: h.segments,
            info: h.info,
        });
        if self.batch.len() >= LOG_BATCH {
            self.flush_log();
        }
    }

    fn flush_log(&mut self) {
        if let Some(tx) = &self.log {
            if !self.batch.is_empty() {
                let batch = std::mem::replace(&mut self.batch, Vec::with_capacity(LOG_BATCH));
                // The writer ends only after every sender is dropped.
                let _ = tx.send(batch);
            }
        }
    }

    /// Sleeps until the TUN is readable, the stop descriptor is, or
    /// `timeout_ns` passes.
    fn wait(&self, stop: &Shutdown, timeout_ns: Option<u64>) -> Result<(), LinkemError> {
        let mut fds = [
            libc::pollfd {
                fd: self.tun.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            },
            libc::pollfd {
                fd: stop.wake_fd(),
                events: libc::POLLIN,
                revents: 0,
            },
        ];
        let ts = timeout_ns.map(|ns| libc::timespec {
            tv_sec: (ns / 1_000_000_000) as libc::time_t,
            tv_nsec: (ns % 1_000_000_000) as libc::c_long,
        });
        let tsp = ts
            .as_ref()
            .map_or(std::ptr::null(), |t| t as *const libc::timespec);
        // SAFETY: two valid pollfds and an optional timespec, all alive
        // for the call; no signal mask.
        let r = unsafe { libc::ppoll(fds.as_mut_ptr(), 2, tsp, std::ptr::null()) };
        if r < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() != std::io::ErrorKind::Interrupted {
                return Err(LinkemError::io("ppoll", e));
            }
        }
        Ok(())
    }

    fn finish_lateness(&mut self) {
        let n: u64 = self.late_us.iter().sum();
        if n == 0 {
            return;
        }
        let pct = |q: f64| {
            let target = ((n as f64) * q).ceil().max(1.0) as u64;
            let mut acc = 0;
            for (i, c) in self.late_us.iter().enumerate() {
                acc += c;
                if acc >= target {
                    return i as u64;
                }
            }
            (LATENESS_BUCKETS - 1) as u64
        };
        let max = self.late_us.iter().rposition(|&c| c > 0).unwrap_or(0) as u64;
        self.stats.lateness = Lateness {
            p50_us: pct(0.5),
            p99_us: pct(0.99),
            max_us: max,
            mean_us: self.late_sum_ns as f64 / n as f64 / 1000.0,
        };
    }
}
