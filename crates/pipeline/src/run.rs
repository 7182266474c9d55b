//! One run from start to end: the sockets, the line threads both modes
//! share, spawning, the coordinator that ends the run, and the collection
//! of what the threads report. The drivers of the two modes are
//! [`crate::parallel::run_parallel`] and [`crate::rtc::run_rtc`].

use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use rtrb::RingBuffer;

use crate::bench::measure_handoff;
use crate::config::{ConfigError, LinkConfig, Mode, PipelineConfig, WIRE_QUEUE};
use crate::layer;
use crate::line::{self, LayerEnds, MemoryParams};
use crate::pool::{self, BufferPool};
use crate::results::{assemble, PipelineResult, Side};
use crate::runtime::{Ctx, ThreadReport};
use crate::{parallel, rtc};

/// Why a run failed (partial results are not errors: see
/// [`PipelineResult::interrupted`]).
#[derive(Debug, thiserror::Error)]
pub enum PipelineError {
    /// Bad configuration.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The pool could not be created.
    #[error("buffer pool: {0}")]
    Pool(#[from] pool::PoolError),
    /// Socket or thread setup failed.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The error.
        source: std::io::Error,
    },
    /// A thread failed (pinning, socket error) or panicked.
    #[error("pipeline thread failed: {0}")]
    Thread(String),
}

fn thread_error(what: &str, e: std::io::Error) -> PipelineError {
    PipelineError::Io {
        what: what.to_string(),
        source: e,
    }
}

fn udp_pair(
    sender: SocketAddr,
    receiver: SocketAddr,
) -> Result<(UdpSocket, UdpSocket), PipelineError> {
    let open = |addr: SocketAddr, what: &str| -> Result<UdpSocket, PipelineError> {
        let domain = socket2::Domain::for_address(addr);
        let s = socket2::Socket::new(domain, socket2::Type::DGRAM, None)
            .map_err(|e| thread_error(what, e))?;
        // Large buffers: a burst of 32 KiB frames must not overflow at once.
        let _ = s.set_recv_buffer_size(8 << 20);
        let _ = s.set_send_buffer_size(8 << 20);
        s.bind(&addr.into()).map_err(|e| thread_error(what, e))?;
        s.set_nonblocking(true).map_err(|e| thread_error(what, e))?;
        Ok(s.into())
    };
    let a = open(sender, &format!("binding the sender socket to {sender}"))?;
    let b = open(
        receiver,
        &format!("binding the receiver socket to {receiver}"),
    )?;
    let a_addr = a
        .local_addr()
        .map_err(|e| thread_error("sender address", e))?;
    let b_addr = b
        .local_addr()
        .map_err(|e| thread_error("receiver address", e))?;
    a.connect(b_addr)
        .map_err(|e| thread_error(&format!("connecting to {b_addr}"), e))?;
    b.connect(a_addr)
        .map_err(|e| thread_error(&format!("connecting to {a_addr}"), e))?;
    Ok((a, b))
}

/// What the coordinator collects from the threads.
#[derive(Default)]
pub(crate) struct Collected {
    pub(crate) threads: Vec<ThreadReport>,
    /// Run-to-completion: time per layer per side, summed over workers.
    pub(crate) rtc_layer_time: Option<[Vec<Duration>; 2]>,
    pub(crate) rtc_counters: Option<[Vec<layer::LayerCounters>; 2]>,
    /// Run-to-completion: layer-lock counts per side, summed over workers.
    pub(crate) rtc_locks: Option<[rtc::LockCounts; 2]>,
    pub(crate) panicked: Vec<String>,
}

/// Runs the pipeline once. `stop` set to true (e.g. by Ctrl-C) ends the run
/// promptly with partial results and `interrupted: true`; so does the time
/// limit. Every thread has exited when this returns.
pub fn run(config: &PipelineConfig, stop: &AtomicBool) -> Result<PipelineResult, PipelineError> {
    config.validate()?;
    let handoff = measure_handoff(config.handoff_items);
    let buffers = config
        .pool_buffers
        .unwrap_or_else(|| config.default_pool_buffers());
    let pool = BufferPool::new(config.pool, buffers, config.buffer_size())?;
    let udp = match &config.link {
        LinkConfig::Udp {
            sender_addr,
            receiver_addr,
            ..
        } => Some(udp_pair(*sender_addr, *receiver_addr)?),
        LinkConfig::Memory { .. } => None,
    };
    let threads = config.thread_count();
    let ctx = Ctx::new(config, &pool, threads);
    let wall_start = Instant::now();
    let mut timed_out = false;
    let mut interrupted = false;
    let collected = match config.mode {
        Mode::LayerParallel => {
            parallel::run_parallel(&ctx, udp, stop, &mut timed_out, &mut interrupted)?
        }
        Mode::RunToCompletion { threads } => {
            rtc::run_rtc(&ctx, threads, udp, stop, &mut timed_out, &mut interrupted)?
        }
    };
    let _ = wall_start;
    if let Some(f) = ctx.failure() {
        return Err(PipelineError::Thread(f));
    }
    if !collected.panicked.is_empty() {
        return Err(PipelineError::Thread(format!(
            "panicked: {}",
            collected.panicked.join(", ")
        )));
    }
    let result = assemble(
        &ctx,
        &collected,
        handoff.ns_per_item,
        timed_out,
        interrupted,
    );
    drop(ctx);
    Ok(result)
}

/// Waits until the run ends (done, stopped, timed out, failed or a thread
/// exited early), then tells every thread to stop.
pub(crate) fn coordinate<F: Fn() -> bool>(
    ctx: &Ctx<'_>,
    stop: &AtomicBool,
    any_finished: F,
    timed_out: &mut bool,
    interrupted: &mut bool,
) {
    let deadline = ctx.cfg.time_limit.map(|t| Instant::now() + t);
    loop {
        if ctx.sender_closed.load(Ordering::SeqCst) && ctx.sink_done.load(Ordering::SeqCst) {
            break;
        }
        if stop.load(Ordering::SeqCst) {
            *interrupted = true;
            break;
        }
        if deadline.is_some_and(|d| Instant::now() >= d) {
            *timed_out = true;
            *interrupted = true;
            break;
        }
        if ctx.stopping() || any_finished() {
            break;
        }
        std::thread::park_timeout(Duration::from_millis(2));
    }
    ctx.shutdown.store(true, Ordering::SeqCst);
    ctx.wake_all();
}

pub(crate) fn spawn_err(name: &str, e: std::io::Error) -> PipelineError {
    thread_error(&format!("spawning thread {name}"), e)
}

/// The body of a line thread.
type LineFn<'a> = Box<dyn FnOnce() -> ThreadReport + Send + 'a>;

/// The sender's and the receiver's line threads for `ctx.cfg.link` (one
/// construction for both modes): `ends` are each side's queues to its bottom
/// layer(s), `ids` the two line threads' parker ids.
pub(crate) fn line_threads<'p>(
    ctx: &'p Ctx<'p>,
    udp: Option<(UdpSocket, UdpSocket)>,
    ends: [LayerEnds<'p>; 2],
    ids: [usize; 2],
) -> Result<(LineFn<'p>, LineFn<'p>), PipelineError> {
    let cfg = ctx.cfg;
    let [s_ends, r_ends] = ends;
    let [sid, rid] = ids;
    let (s_seed, r_seed) = (cfg.seed ^ 0x5e4d, cfg.seed ^ 0x4ece);
    Ok(match (&cfg.link, udp) {
        (
            LinkConfig::Memory {
                bandwidth_bit_s,
                latency,
                loss,
                reorder,
                duplicate,
            },
            _,
        ) => {
            let (a_tx, a_rx) = RingBuffer::new(WIRE_QUEUE);
            let (b_tx, b_rx) = RingBuffer::new(WIRE_QUEUE);
            let p = MemoryParams {
                bandwidth_bit_s: *bandwidth_bit_s,
                latency: *latency,
                loss: *loss,
                reorder: *reorder,
                duplicate: *duplicate,
                seed: s_seed,
            };
            let q = MemoryParams { seed: r_seed, ..p };
            (
                Box::new(move || {
                    line::memory_line(
                        ctx,
                        "sender line".into(),
                        Side::Sender,
                        sid,
                        rid,
                        ctx.cpu_for(sid),
                        s_ends,
                        a_tx,
                        b_rx,
                        p,
                    )
                }),
                Box::new(move || {
                    line::memory_line(
                        ctx,
                        "receiver line".into(),
                        Side::Receiver,
                        rid,
                        sid,
                        ctx.cpu_for(rid),
                        r_ends,
                        b_tx,
                        a_rx,
                        q,
                    )
                }),
            )
        }
        (LinkConfig::Udp { loss, .. }, Some((a, b))) => {
            let loss = *loss;
            (
                Box::new(move || {
                    line::udp_line(
                        ctx,
                        "sender line".into(),
                        Side::Sender,
                        sid,
                        ctx.cpu_for(sid),
                        s_ends,
                        a,
                        loss,
                        s_seed,
                    )
                }),
                Box::new(move || {
                    line::udp_line(
                        ctx,
                        "receiver line".into(),
                        Side::Receiver,
                        rid,
                        ctx.cpu_for(rid),
                        r_ends,
                        b,
                        loss,
                        r_seed,
                    )
                }),
            )
        }
        (LinkConfig::Udp { .. }, None) => {
            return Err(PipelineError::Thread("udp sockets missing".into()));
        }
    })
}

type ThreadFn<'a> = Box<dyn FnOnce() -> ThreadReport + Send + 'a>;

pub(crate) fn spawn_in<'scope, 'env>(
    s: &'scope std::thread::Scope<'scope, 'env>,
    handles: &mut Vec<(String, std::thread::ScopedJoinHandle<'scope, ThreadReport>)>,
    name: String,
    f: ThreadFn<'scope>,
) -> Result<(), PipelineError> {
    let h = std::thread::Builder::new()
        .name(short_name(&name))
        .spawn_scoped(s, f)
        .map_err(|e| spawn_err(&name, e))?;
    handles.push((name, h));
    Ok(())
}

pub(crate) fn short_name(name: &str) -> String {
    // Linux thread names are at most 15 bytes.
    let s = name
        .replace("sender ", "s-")
        .replace("receiver ", "r-")
        .replace("layer ", "L")
        .replace("worker ", "w");
    s.chars().take(15).collect()
}

#[cfg(test)]
mod line_alone_tests {
    use super::*;

    #[test]
    fn the_line_alone_carries_every_message() {
        for size in [1024, 32 * 1024] {
            let cfg = PipelineConfig {
                layers: 0,
                message_size: size,
                messages: 300,
                ..PipelineConfig::default()
            };
            assert!(cfg.is_line_alone());
            let r = run(&cfg, &AtomicBool::new(false)).expect("run");
            assert!(r.verified, "{size}: {:?}", r.errors);
            assert_eq!(r.messages_delivered, 300);
            assert!(r.per_layer.is_empty());
            assert_eq!(r.stages.len(), 4, "source, two lines, sink");
            assert!(r.projection.layers_only_mbit_s.is_none());
        }
    }

    #[test]
    fn no_layers_needs_a_lossless_memory_line_and_layer_parallel() {
        let lossy = PipelineConfig {
            layers: 0,
            link: LinkConfig::Memory {
                bandwidth_bit_s: None,
                latency: Duration::ZERO,
                loss: 0.01,
                reorder: 0.0,
                duplicate: 0.0,
            },
            ..PipelineConfig::default()
        };
        assert_eq!(lossy.validate(), Err(ConfigError::Layers(0)));
        let rtc = PipelineConfig {
            layers: 0,
            mode: Mode::RunToCompletion { threads: 1 },
            ..PipelineConfig::default()
        };
        assert_eq!(rtc.validate(), Err(ConfigError::Layers(0)));
    }
}
