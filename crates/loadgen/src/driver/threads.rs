//! The measured phase of a load run: the writer thread (open loop) and the
//! reader thread, each pinned, run from one start instant until the reader
//! is done.

use super::LoadError;
use crate::reader::{run_reader, ClosedLoop, ReaderOutcome, ReaderPlan, SendEvent};
use crate::request::RequestTemplate;
use crate::sender::Sender;
use crate::workload::{ActivePolicy, IoPath, Progress, Rate, RecordSink, Workload};
use crate::writer::{run_writer, WriterOutcome, WriterPlan};
use connlab_measure::Schedule;
use connlab_os::{CpuList, Shutdown};
use std::io;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::time::{Duration, Instant};

/// Send events the writer may be ahead of the reader.
const RING_CAPACITY: usize = 1 << 16;

/// The writer's outcome and its scheduling policy (`Err`: a warning).
pub(super) type WriterEnd = (WriterOutcome, Result<String, String>);

/// What the two threads share, made before the start so the measured
/// phase allocates nothing of it.
pub(super) struct Threads {
    /// Per connection: whether it may carry requests.
    is_active: Vec<bool>,
    /// Connections found dead (a writer round-robin skips them).
    dead: Vec<AtomicBool>,
    template: RequestTemplate,
    /// Set by the writer when it has sent its last request.
    writer_done: AtomicBool,
    producer: rtrb::Producer<SendEvent>,
    consumer: rtrb::Consumer<SendEvent>,
    /// `--cpu`: the writer's CPU first, the reader's last.
    cpus: Option<Vec<usize>>,
}

impl Threads {
    /// The shared state for `n` open connections, `active` of them active.
    pub(super) fn new(w: &Workload, n: usize, active: &[usize]) -> Threads {
        // Rotating: any connection may carry the next request.
        let mut is_active = vec![w.active_policy == ActivePolicy::Rotating; n];
        for &a in active {
            is_active[a] = true;
        }
        let dead: Vec<AtomicBool> = (0..n).map(|_| AtomicBool::new(false)).collect();
        let template = RequestTemplate::new(w.protocol, w.request_size, w.response_size, &w.path)
            .with_files(
                w.files.as_ref().map(|f| f.mix.clone()),
                u64::from(w.shard.index) << 40,
            );
        let (producer, consumer) = rtrb::RingBuffer::<SendEvent>::new(RING_CAPACITY);
        Threads {
            is_active,
            dead,
            template,
            writer_done: AtomicBool::new(false),
            producer,
            consumer,
            cpus: w.cpus.as_ref().map(|c| c.cpus().to_vec()),
        }
    }
}

/// The connections the threads measure on.
pub(super) struct Targets<'a> {
    /// Their descriptors.
    pub(super) fds: &'a [RawFd],
    /// The active set, indexes into `fds`.
    pub(super) active: &'a [usize],
}

/// Runs the writer (open loop only) and the reader from `start` until the
/// reader is done, and joins both.
pub(super) fn measure(
    w: &Workload,
    targets: Targets<'_>,
    threads: Threads,
    start: Instant,
    shutdown: &Shutdown,
    progress: &Progress,
    records: Option<&mut dyn RecordSink>,
) -> Result<(WriterEnd, ReaderOutcome), LoadError> {
    let Threads {
        is_active,
        dead,
        template,
        writer_done,
        mut producer,
        consumer,
        cpus,
    } = threads;
    let Targets { fds, active } = targets;
    let n = fds.len();
    let rotating = w.active_policy == ActivePolicy::Rotating;
    let total = w.warmup + w.duration;
    let cpus = cpus.as_deref();
    std::thread::scope(|s| {
        let writer = match w.rate {
            Rate::PerSecond(rate) => {
                let schedule = Schedule::for_shard(rate, w.arrival, w.seed, w.shard)
                    .map_err(|e| LoadError::Workload(e.to_string()))?;
                let plan = WriterPlan {
                    fds,
                    active,
                    dead: &dead,
                    schedule,
                    start,
                    warmup: w.warmup,
                    total,
                    spin: w.spin,
                    shutdown,
                    sent_counter: &progress.sent,
                };
                let (template, writer_done, producer) = (&template, &writer_done, &mut producer);
                let priority = writer_priority(w, rate);
                Some(s.spawn(move || {
                    pin(cpus, 0);
                    let policy = priority.apply();
                    let mut sender = Sender::new(template, n);
                    let out = run_writer(plan, &mut sender, producer);
                    writer_done.store(true, Relaxed);
                    (out, policy)
                }))
            }
            Rate::Max { .. } => None,
        };
        let plan = ReaderPlan {
            fds,
            is_active: &is_active,
            active,
            dead: &dead,
            protocol: w.protocol,
            max_message: w.response_size.max(16),
            start,
            warmup: w.warmup,
            total,
            drain_timeout: w.drain_timeout,
            writer_done: &writer_done,
            shutdown,
            progress,
            events: writer.is_some().then_some(consumer),
            closed_loop: closed_loop(w, &template, n, rotating),
            records,
            files: template.files(),
            expected_requests: expected_requests(w),
        };
        let io = w.io;
        let reader = s.spawn(move || {
            pin(cpus, 1);
            match io {
                IoPath::Epoll => run_reader(plan),
                IoPath::Uring => crate::uring_reader::run_reader(plan),
            }
        });
        let reader_out = reader.join().map_err(|_| LoadError::Io {
            what: "reader thread",
            source: io::Error::other("panicked"),
        })?;
        // A reader that stopped early (all connections dead, interrupted) must stop the writer too.
        if writer.is_some() && !writer_done.load(Relaxed) {
            shutdown_writer(&dead);
        }
        let writer_out = match writer {
            Some(h) => h.join().map_err(|_| LoadError::Io {
                what: "writer thread",
                source: io::Error::other("panicked"),
            })?,
            None => (
                WriterOutcome::default(),
                Ok("closed loop: no writer".to_string()),
            ),
        };
        let reader_out = reader_out.map_err(|source| LoadError::Io {
            what: "reading responses",
            source,
        })?;
        Ok::<_, LoadError>((writer_out, reader_out))
    })
}

/// Pins the calling thread: index 0 (the writer) to the first CPU of
/// `--cpu`, the reader to the last.
fn pin(cpus: Option<&[usize]>, index: usize) {
    if let Some(list) = cpus {
        let cpu = if index == 0 {
            list[0]
        } else {
            list[list.len() - 1]
        };
        if let Ok(one) = CpuList::parse(&cpu.to_string()) {
            let _ = connlab_os::pin_current_process(&one);
        }
    }
}

/// The scheduling policy the writer asks for (`--writer-priority`).
enum WriterPriority {
    /// The default policy.
    Other,
    /// SCHED_FIFO refused: the writer never sleeps (why, as a warning).
    Starves(String),
    /// SCHED_FIFO at this priority.
    Fifo(i32),
}

impl WriterPriority {
    /// Applies the policy to the calling thread: its name, or a warning.
    fn apply(self) -> Result<String, String> {
        match self {
            WriterPriority::Other => Ok("SCHED_OTHER".to_string()),
            WriterPriority::Starves(warning) => Err(warning),
            WriterPriority::Fifo(p) => connlab_os::set_current_thread_fifo(p)
                .map(|()| format!("SCHED_FIFO {p}"))
                .map_err(|e| format!("the writer could not run under SCHED_FIFO {p}: {e}")),
        }
    }
}

/// The writer's policy at `rate`: a writer whose interval is no longer
/// than its spin never sleeps, and under SCHED_FIFO would starve a reader
/// on its CPU.
fn writer_priority(w: &Workload, rate: f64) -> WriterPriority {
    let interval = Duration::from_secs_f64(f64::from(w.shard.count) / rate);
    let shares_cpu = w.cpus.as_ref().is_none_or(|c| c.cpus().len() == 1);
    let starves = interval <= w.spin && shares_cpu;
    match w.writer_priority {
        None => WriterPriority::Other,
        Some(p) if starves => WriterPriority::Starves(format!(
            "the writer stayed SCHED_OTHER: its send interval ({:.1} us) is no longer than its spin ({:.1} us), so it never sleeps, and under SCHED_FIFO {p} it would starve the reader on its CPU (give the reader a CPU of its own with --cpu W,R)",
            interval.as_secs_f64() * 1e6,
            w.spin.as_secs_f64() * 1e6
        )),
        Some(p) => WriterPriority::Fifo(p),
    }
}

/// Closed-loop pacing (`--rate max`), driven from the reader.
fn closed_loop<'a>(
    w: &Workload,
    template: &'a RequestTemplate,
    n: usize,
    rotating: bool,
) -> Option<ClosedLoop<'a>> {
    match w.rate {
        Rate::Max { depth } => Some(ClosedLoop {
            sender: Sender::new(template, n),
            depth,
            rotate: rotating.then(|| {
                connlab_measure::SeededRng::new(w.seed ^ (u64::from(w.shard.index) << 32))
            }),
            via_ring: w.io == IoPath::Uring,
        }),
        Rate::PerSecond(_) => None,
    }
}

/// Requests the measured window should complete (open loop: this shard's
/// rate x duration; 0 in closed loop).
fn expected_requests(w: &Workload) -> u64 {
    match w.rate {
        Rate::PerSecond(r) => {
            (r / f64::from(w.shard.count.max(1)) * w.duration.as_secs_f64()) as u64
        }
        Rate::Max { .. } => 0,
    }
}

/// Marks every connection dead, which makes the writer's round-robin give up.
fn shutdown_writer(dead: &[AtomicBool]) {
    for d in dead {
        d.store(true, Relaxed);
    }
}
