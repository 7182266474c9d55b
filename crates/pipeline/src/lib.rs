//! connlab System 5: a layer-parallel protocol pipeline and the
//! run-to-completion baseline it argues against.
//!
//! A stack of 1 to 16 connection-oriented, TP4-like layers ([`layer`]) runs
//! on each side of a line ([`LinkConfig`]). In [`Mode::LayerParallel`] every
//! layer of every side has a thread of its own and PDUs pass by pointer (a
//! [`pool::Buf`] handle) through lock-free rtrb SPSC queues; in
//! [`Mode::RunToCompletion`] `threads` workers per side carry each message
//! through all layers, each layer's state under a mutex. Both modes use the
//! same protocol entity and one global buffer pool ([`pool`]) whose common
//! allocation path takes no lock.
//!
//! [`run`] sends `messages` deterministic messages ([`content`]) and verifies
//! at the receiver that every one arrived exactly once, in order, intact;
//! it measures each thread's CPU time and busy time, queue occupancy and
//! retransmissions, and projects the throughput the pipeline would reach
//! with one core per layer thread ([`PipelineResult::projected_throughput_mbit_s`]).
//! [`measure_handoff`] and [`measure_pool`] are the microbenchmarks.

pub mod content;
pub mod header;
pub mod layer;
pub mod pool;
pub mod projection;

mod bench;
mod idle;
mod line;
mod parallel;
mod rtc;
mod runtime;
mod sync;

use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use rtrb::RingBuffer;

pub use bench::{
    measure_handoff, measure_pool, HandoffCost, PoolCost, HANDOFF_QUEUE, POOL_BENCH_BUFFERS,
    POOL_BENCH_HELD,
};
pub use idle::IdleConfig;
pub use pool::{Buf, BufferPool, LockFreePool, MutexPool, PoolKind};
pub use projection::{project, Bound, Projection, ProjectionInput, StageCost, StageRole};

use crate::header::HEADER_LEN;
use crate::layer::{Layer, Role};
use crate::line::{LayerEnds, MemoryParams};
use crate::runtime::{Ctx, Sink, Source, ThreadReport};

/// Most layers per side.
pub const MAX_LAYERS: usize = 16;
/// Smallest message (the message index takes 8 bytes).
pub const MIN_MESSAGE_SIZE: usize = 8;
/// Largest message on the memory link.
pub const MAX_MESSAGE_SIZE: usize = 16 << 20;
/// Largest UDP payload (one datagram per frame).
pub const MAX_UDP_PAYLOAD: usize = 65_507;
/// Largest window.
pub const MAX_WINDOW: u32 = 4096;
/// Most run-to-completion workers per side.
pub const MAX_RTC_THREADS: usize = 64;
/// The paper's line: 800 Mbit/s (HIPPI).
pub const HIPPI_BIT_S: u64 = 800_000_000;

/// How the layers are driven.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Mode {
    /// One thread per layer per side, SPSC queues between them.
    LayerParallel,
    /// `threads` workers per side, each carrying messages through every layer.
    RunToCompletion {
        /// Workers per side (1..=64).
        threads: usize,
    },
}

impl Mode {
    /// `"layer-parallel"` or `"run-to-completion"`.
    pub fn name(&self) -> &'static str {
        match self {
            Mode::LayerParallel => "layer-parallel",
            Mode::RunToCompletion { .. } => "run-to-completion",
        }
    }
}

/// The line under the bottom layers.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum LinkConfig {
    /// An in-process wire between the two line threads.
    Memory {
        /// Line rate; `None` = unlimited.
        bandwidth_bit_s: Option<u64>,
        /// One-way latency added after transmission.
        latency: Duration,
        /// Probability a frame is lost.
        loss: f64,
        /// Probability a frame is held back and sent after the next one.
        reorder: f64,
        /// Probability a frame is delivered twice.
        duplicate: f64,
    },
    /// Real UDP sockets, one datagram per frame.
    Udp {
        /// Address of the sending side's socket (port 0 = any).
        sender_addr: SocketAddr,
        /// Address of the receiving side's socket (port 0 = any).
        receiver_addr: SocketAddr,
        /// Probability a frame is dropped before `send` (seeded).
        loss: f64,
    },
}

impl Default for LinkConfig {
    fn default() -> Self {
        LinkConfig::memory(Some(HIPPI_BIT_S))
    }
}

impl LinkConfig {
    /// A perfect memory link with this bandwidth (`None` = unlimited).
    pub fn memory(bandwidth_bit_s: Option<u64>) -> Self {
        LinkConfig::Memory {
            bandwidth_bit_s,
            latency: Duration::ZERO,
            loss: 0.0,
            reorder: 0.0,
            duplicate: 0.0,
        }
    }

    /// Two UDP sockets on 127.0.0.1 with kernel-chosen ports.
    pub fn udp_loopback() -> Self {
        let any = SocketAddr::from(([127, 0, 0, 1], 0));
        LinkConfig::Udp {
            sender_addr: any,
            receiver_addr: any,
            loss: 0.0,
        }
    }

    /// A short description, e.g. `memory 800 Mbit/s` or `udp`.
    pub fn describe(&self) -> String {
        match self {
            LinkConfig::Memory {
                bandwidth_bit_s,
                latency,
                loss,
                reorder,
                duplicate,
            } => {
                let mut s = match bandwidth_bit_s {
                    Some(b) => format!("memory {} Mbit/s", *b as f64 / 1e6),
                    None => "memory unlimited".to_string(),
                };
                if !latency.is_zero() {
                    s += &format!(" latency {latency:?}");
                }
                for (name, p) in [
                    ("loss", loss),
                    ("reorder", reorder),
                    ("duplicate", duplicate),
                ] {
                    if *p > 0.0 {
                        s += &format!(" {name} {p}");
                    }
                }
                s
            }
            LinkConfig::Udp { loss, .. } => {
                if *loss > 0.0 {
                    format!("udp loss {loss}")
                } else {
                    "udp".to_string()
                }
            }
        }
    }
}

/// Everything a run needs. Build with `PipelineConfig { layers: 5,
/// ..PipelineConfig::default() }`.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct PipelineConfig {
    /// Layers per side, 1..=16.
    pub layers: usize,
    /// User bytes per message, >= 8.
    pub message_size: usize,
    /// Messages to send, >= 1.
    pub messages: u64,
    /// Window per layer, DT PDUs (1..=4096).
    pub window: u32,
    /// Threading mode.
    pub mode: Mode,
    /// The line.
    pub link: LinkConfig,
    /// Seed of message contents and line impairments.
    pub seed: u64,
    /// CPU per thread, cycled if shorter. Order, layer-parallel: source,
    /// sender layers top..bottom, sender line, receiver line, receiver layers
    /// bottom..top, sink. Run-to-completion: sender workers, sender line,
    /// receiver line, receiver workers.
    pub cpu_map: Option<Vec<usize>>,
    /// Retransmission (and CR/DR retry) timeout.
    pub retransmit_timeout: Duration,
    /// Stop and report partial results after this long.
    pub time_limit: Option<Duration>,
    /// Slots per SPSC queue.
    pub queue_capacity: usize,
    /// Each layer checksums its whole SDU (TP4's optional checksum): the
    /// per-byte work of a layer. Off: header checksum only.
    pub payload_checksum: bool,
    /// What idle threads do.
    pub idle: IdleConfig,
    /// Pool algorithm.
    pub pool: PoolKind,
    /// Buffers in the pool; `None` = enough for every queue and window.
    pub pool_buffers: Option<usize>,
    /// Items for the hand-off measurement made at the start of each run
    /// (0 = skip; the projection then uses 0 ns).
    pub handoff_items: u64,
}

impl Default for PipelineConfig {
    fn default() -> Self {
        PipelineConfig {
            layers: 5,
            message_size: 8192,
            messages: 10_000,
            window: 32,
            mode: Mode::LayerParallel,
            link: LinkConfig::default(),
            seed: 1,
            cpu_map: None,
            retransmit_timeout: Duration::from_millis(20),
            time_limit: Some(Duration::from_secs(60)),
            queue_capacity: 64,
            payload_checksum: true,
            idle: IdleConfig::default(),
            pool: PoolKind::LockFree,
            pool_buffers: None,
            handoff_items: if cfg!(debug_assertions) {
                20_000
            } else {
                200_000
            },
        }
    }
}

/// A configuration value out of range; the message names the field.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum ConfigError {
    /// `layers` outside 1..=16 (0, the line alone, only layer-parallel
    /// over a lossless memory line).
    #[error("layers must be between 1 and {MAX_LAYERS} (0, the line alone: layer-parallel over a memory line without loss, reordering or duplication), got {0}")]
    Layers(usize),
    /// `message_size` too small or too large.
    #[error("message_size must be between {MIN_MESSAGE_SIZE} and {max} bytes for this link and layer count, got {got}")]
    MessageSize {
        /// Requested size.
        got: usize,
        /// Largest allowed.
        max: usize,
    },
    /// `messages` is zero.
    #[error("messages must be at least 1")]
    Messages,
    /// `window` outside 1..=4096.
    #[error("window must be between 1 and {MAX_WINDOW}, got {0}")]
    Window(u32),
    /// Run-to-completion threads outside 1..=64.
    #[error("run-to-completion threads must be between 1 and {MAX_RTC_THREADS}, got {0}")]
    Threads(usize),
    /// A probability outside [0, 1) or not finite.
    #[error("link {name} probability must be in [0, 1), got {value}")]
    Probability {
        /// Which probability.
        name: &'static str,
        /// The value.
        value: f64,
    },
    /// Zero bandwidth.
    #[error("link bandwidth must be positive (use None for unlimited)")]
    Bandwidth,
    /// Latency above 10 s.
    #[error("link latency must be at most 10 s, got {0:?}")]
    Latency(Duration),
    /// Retransmit timeout zero or above 60 s.
    #[error("retransmit_timeout must be between 1 us and 60 s, got {0:?}")]
    RetransmitTimeout(Duration),
    /// Zero time limit.
    #[error("time_limit must be positive")]
    TimeLimit,
    /// An empty cpu map or an implausible CPU number.
    #[error("cpu_map must be non-empty with CPUs below 1024: {0}")]
    CpuMap(String),
    /// Queue capacity outside 2..=65536.
    #[error("queue_capacity must be between 2 and 65536, got {0}")]
    QueueCapacity(usize),
    /// Pool too small or too large.
    #[error("pool_buffers must be between 16 and {max}, got {got}")]
    PoolBuffers {
        /// Requested.
        got: usize,
        /// Largest allowed for this buffer size.
        max: usize,
    },
    /// UDP addresses of different families or equal non-zero ports.
    #[error("udp addresses: {0}")]
    UdpAddresses(String),
}

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

/// One layer of one side.
#[derive(serde::Serialize, serde::Deserialize, Clone, Debug, PartialEq)]
pub struct LayerStats {
    /// `"sender"` or `"receiver"`.
    pub side: String,
    /// Layer number, 1 = bottom.
    pub layer: usize,
    /// Layer-parallel: CPU seconds of the layer's thread (includes idle
    /// polling: spins and yields). Run-to-completion: seconds the workers
    /// spent inside this layer, lock waits included (wall clock).
    pub cpu_s: f64,
    /// DT PDUs this layer sent (sender) or delivered up (receiver).
    pub messages: u64,
    /// `cpu_s` per message, ns.
    pub cpu_ns_per_message: f64,
    /// DT retransmissions.
    pub retransmissions: u64,
    /// Mean occupancy of the queue into this layer (from above on the sending
    /// side, from below on the receiving side), sampled every 20 us while the
    /// thread runs. 0 in run-to-completion mode.
    pub queue_occupancy_mean: f64,
    /// Largest sampled occupancy.
    pub queue_occupancy_max: u64,
    /// CPU the thread was pinned to.
    pub cpu: Option<usize>,
    /// Seconds of rounds that did work (wall clock, each round capped at 4x
    /// the median per-item cost so a round the scheduler interrupted does not
    /// count other threads' work); layer-parallel only, otherwise the time
    /// inside the entity.
    pub busy_s: f64,
    /// `busy_s` per message, ns: the stage cost the projection uses.
    pub busy_ns_per_message: f64,
    /// The same without the cap, ns per message (for comparison).
    #[serde(default)]
    pub busy_raw_ns_per_message: f64,
    /// Retransmission timer expiries.
    pub timeouts: u64,
    /// Duplicate DT dropped.
    pub duplicates: u64,
    /// DT buffered out of order.
    pub out_of_order: u64,
    /// PDUs rejected by header or checksum checks.
    pub rejected: u64,
    /// Most DT unacknowledged at once (never above the window).
    pub max_outstanding: u64,
    /// Retransmissions that had to copy the PDU.
    pub retransmit_copies: u64,
}

/// Any thread of the run (layers, source, sink, lines, workers).
#[derive(serde::Serialize, serde::Deserialize, Clone, Debug, PartialEq)]
pub struct StageStats {
    /// E.g. `"sender layer 3"`, `"receiver line"`, `"sender worker 0"`.
    pub name: String,
    /// `"sender"` or `"receiver"`.
    pub side: String,
    /// Thread CPU seconds.
    pub cpu_s: f64,
    /// Seconds of rounds that did work (capped like [`LayerStats::busy_s`]).
    pub busy_s: f64,
    /// Messages (layers, source, sink) or frames (lines) handled.
    pub messages: u64,
    /// `busy_s` per message, ns.
    pub busy_ns_per_message: f64,
    /// The same without the cap, ns per message.
    #[serde(default)]
    pub busy_raw_ns_per_message: f64,
    /// Timed working rounds behind `busy_s`.
    #[serde(default)]
    pub busy_rounds: u64,
    /// `sched_yield` calls while idle.
    pub yields: u64,
    /// Parks while idle.
    pub parks: u64,
    /// Lines: frames dropped (loss).
    pub dropped: u64,
    /// Lines: frames duplicated.
    pub duplicated: u64,
    /// Lines: frames reordered.
    pub reordered: u64,
    /// CPU the thread was pinned to.
    pub cpu: Option<usize>,
}

/// The result of one run.
#[derive(serde::Serialize, serde::Deserialize, Clone, Debug, PartialEq)]
pub struct PipelineResult {
    /// Layers per side.
    pub layers: usize,
    /// User bytes per message.
    pub message_size: usize,
    /// [`Mode::name`].
    pub mode: String,
    /// [`LinkConfig::describe`].
    pub link: String,
    /// Messages generated by the source.
    pub messages_sent: u64,
    /// Messages delivered to the sink.
    pub messages_delivered: u64,
    /// User bytes delivered.
    pub bytes_delivered: u64,
    /// Every message arrived exactly once, in order, intact, and the stream
    /// checksums agree.
    pub verified: bool,
    /// The receiver's stream checksum (16 hex digits).
    pub stream_checksum: String,
    /// Seconds from the first message sent to the last delivered.
    pub elapsed_s: f64,
    /// User data delivered per second, Mbit/s.
    pub throughput_mbit_s: f64,
    /// Messages delivered per second.
    pub messages_per_s: f64,
    /// DT retransmissions, all layers and sides.
    pub retransmissions: u64,
    /// Sender layers 1..n, then receiver layers 1..n.
    pub per_layer: Vec<LayerStats>,
    /// Measured SPSC hop cost used for the projection, ns.
    pub handoff_ns: f64,
    /// Throughput with one core per layer thread (layer-parallel) or per
    /// worker (run-to-completion), Mbit/s, bounded by the line rate only:
    /// the layer stages alone. [`PipelineResult::projection`] is the
    /// figure bounded by every stage, the line and the CPU share.
    pub projected_throughput_mbit_s: f64,
    /// What bounds the projection, e.g. `"receiver layer 1"` or `"line"`.
    pub projected_bottleneck: String,
    /// Stopped by `stop` or the time limit before the end.
    pub interrupted: bool,
    /// The sender's stream checksum.
    pub sender_checksum: String,
    /// Stopped by the time limit.
    pub timed_out: bool,
    /// The projection counting the source, sink and line threads too.
    pub projected_with_endpoints_mbit_s: f64,
    /// What bounds that projection.
    pub projected_with_endpoints_bottleneck: String,
    /// Every thread.
    pub stages: Vec<StageStats>,
    /// Up to 8 verification failures.
    pub errors: Vec<String>,
    /// Pool algorithm and size.
    pub pool: String,
    /// The projection to one core per thread bounded by the stages the
    /// layers leave out (source, sink, lines), the line rate and the CPU
    /// share, or the reason there is none ([`projection`]).
    #[serde(default = "unrecorded_projection")]
    pub projection: Projection,
}

fn unrecorded_projection() -> Projection {
    Projection::none("recorded before bounded projections existed")
}

impl PipelineResult {
    /// A verified result with the given throughput and projection and no
    /// per-thread detail, for report fixtures and tests (no run needed).
    pub fn synthetic(
        layers: usize,
        message_size: usize,
        mode: Mode,
        throughput_mbit_s: f64,
        projection: Projection,
    ) -> PipelineResult {
        PipelineResult {
            layers,
            message_size,
            mode: mode.name().to_string(),
            link: "synthetic".into(),
            messages_sent: 500,
            messages_delivered: 500,
            bytes_delivered: 500 * message_size as u64,
            verified: true,
            stream_checksum: String::new(),
            elapsed_s: 1.0,
            throughput_mbit_s,
            messages_per_s: throughput_mbit_s * 1e6 / 8.0 / message_size.max(1) as f64,
            retransmissions: 0,
            per_layer: Vec::new(),
            handoff_ns: 0.0,
            projected_throughput_mbit_s: projection.layers_only_mbit_s.unwrap_or(0.0),
            projected_bottleneck: String::new(),
            interrupted: false,
            sender_checksum: String::new(),
            timed_out: false,
            projected_with_endpoints_mbit_s: projection.mbit_s.unwrap_or(0.0),
            projected_with_endpoints_bottleneck: projection.bound.clone(),
            stages: Vec::new(),
            errors: Vec::new(),
            pool: String::new(),
            projection,
        }
    }
}

/// Relative capacity as the paper defines it: protocol work done per unit
/// time with `layers` layers, relative to one layer: `throughput * layers /
/// base_throughput` (`base_throughput` = the 1-layer throughput). Efficiency
/// is this divided by `layers`. 0 if `base_throughput` is not positive.
pub fn relative_capacity(throughput: f64, layers: usize, base_throughput: f64) -> f64 {
    if base_throughput > 0.0 {
        throughput * layers as f64 / base_throughput
    } else {
        0.0
    }
}

fn check_probability(name: &'static str, value: f64) -> Result<(), ConfigError> {
    if value.is_finite() && (0.0..1.0).contains(&value) {
        Ok(())
    } else {
        Err(ConfigError::Probability { name, value })
    }
}

impl PipelineConfig {
    /// Checks every field; the error names the field and the allowed range.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if !(1..=MAX_LAYERS).contains(&self.layers) && !self.is_line_alone() {
            return Err(ConfigError::Layers(self.layers));
        }
        let max_msg = match self.link {
            LinkConfig::Memory { .. } => MAX_MESSAGE_SIZE,
            LinkConfig::Udp { .. } => MAX_UDP_PAYLOAD - self.layers * HEADER_LEN,
        };
        if self.message_size < MIN_MESSAGE_SIZE || self.message_size > max_msg {
            return Err(ConfigError::MessageSize {
                got: self.message_size,
                max: max_msg,
            });
        }
        if self.messages == 0 {
            return Err(ConfigError::Messages);
        }
        if !(1..=MAX_WINDOW).contains(&self.window) {
            return Err(ConfigError::Window(self.window));
        }
        if let Mode::RunToCompletion { threads } = self.mode {
            if !(1..=MAX_RTC_THREADS).contains(&threads) {
                return Err(ConfigError::Threads(threads));
            }
        }
        match &self.link {
            LinkConfig::Memory {
                bandwidth_bit_s,
                latency,
                loss,
                reorder,
                duplicate,
            } => {
                if *bandwidth_bit_s == Some(0) {
                    return Err(ConfigError::Bandwidth);
                }
                if *latency > Duration::from_secs(10) {
                    return Err(ConfigError::Latency(*latency));
                }
                check_probability("loss", *loss)?;
                check_probability("reorder", *reorder)?;
                check_probability("duplicate", *duplicate)?;
            }
            LinkConfig::Udp {
                sender_addr,
                receiver_addr,
                loss,
            } => {
                check_probability("loss", *loss)?;
                if sender_addr.is_ipv4() != receiver_addr.is_ipv4() {
                    return Err(ConfigError::UdpAddresses(
                        "sender and receiver must be the same address family".into(),
                    ));
                }
                if sender_addr == receiver_addr && sender_addr.port() != 0 {
                    return Err(ConfigError::UdpAddresses(format!(
                        "sender and receiver are both {sender_addr}"
                    )));
                }
            }
        }
        if self.retransmit_timeout < Duration::from_micros(1)
            || self.retransmit_timeout > Duration::from_secs(60)
        {
            return Err(ConfigError::RetransmitTimeout(self.retransmit_timeout));
        }
        if self.time_limit.is_some_and(|t| t.is_zero()) {
            return Err(ConfigError::TimeLimit);
        }
        if let Some(map) = &self.cpu_map {
            if map.is_empty() {
                return Err(ConfigError::CpuMap("empty".into()));
            }
            if let Some(c) = map.iter().find(|&&c| c >= 1024) {
                return Err(ConfigError::CpuMap(format!("CPU {c}")));
            }
        }
        if !(2..=65_536).contains(&self.queue_capacity) {
            return Err(ConfigError::QueueCapacity(self.queue_capacity));
        }
        let buf = self.buffer_size();
        let max = (pool::MAX_REGION / buf).min(1 << 24);
        if let Some(n) = self.pool_buffers {
            if !(16..=max).contains(&n) {
                return Err(ConfigError::PoolBuffers { got: n, max });
            }
        } else if self.default_pool_buffers() > max {
            return Err(ConfigError::PoolBuffers {
                got: self.default_pool_buffers(),
                max,
            });
        }
        Ok(())
    }

    /// Bytes per pool buffer: a header per layer plus the message.
    pub fn buffer_size(&self) -> usize {
        self.layers
            .saturating_mul(HEADER_LEN)
            .saturating_add(self.message_size)
    }

    /// Zero layers, layer-parallel, over a lossless memory line: the source
    /// hands messages straight to the sending line thread and the receiving
    /// line thread to the sink (the paper's line-alone figure). Nothing
    /// acknowledges or retransmits, so the line must not lose frames.
    pub fn is_line_alone(&self) -> bool {
        self.layers == 0
            && self.mode == Mode::LayerParallel
            && matches!(
                self.link,
                LinkConfig::Memory {
                    loss,
                    reorder,
                    duplicate,
                    ..
                } if loss == 0.0 && reorder == 0.0 && duplicate == 0.0
            )
    }

    /// The pool size used when `pool_buffers` is `None`: every queue full,
    /// every window full on both sides, the wire queues and some slack.
    pub fn default_pool_buffers(&self) -> usize {
        let n = self.layers;
        let w = self.window as usize;
        let threads = match self.mode {
            Mode::LayerParallel => n,
            Mode::RunToCompletion { threads } => threads,
        };
        let queues = 4 * n + 6 + 2 * threads;
        2 * n * w + queues * self.queue_capacity + 2 * WIRE_QUEUE + 256
    }
}

/// Slots of each direction of the memory wire.
const WIRE_QUEUE: usize = 256;

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
struct Collected {
    threads: Vec<ThreadReport>,
    /// Run-to-completion: time per layer per side, summed over workers.
    rtc_layer_time: Option<[Vec<Duration>; 2]>,
    rtc_counters: Option<[Vec<layer::LayerCounters>; 2]>,
    panicked: Vec<String>,
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
    let threads = match config.mode {
        Mode::LayerParallel => parallel::thread_count(config.layers),
        Mode::RunToCompletion { threads } => rtc::thread_count(threads),
    };
    let ctx = Ctx::new(config, &pool, threads);
    let wall_start = Instant::now();
    let mut timed_out = false;
    let mut interrupted = false;
    let collected = match config.mode {
        Mode::LayerParallel => run_parallel(&ctx, udp, stop, &mut timed_out, &mut interrupted)?,
        Mode::RunToCompletion { threads } => {
            run_rtc(&ctx, threads, udp, stop, &mut timed_out, &mut interrupted)?
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
fn coordinate<F: Fn() -> bool>(
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

fn spawn_err(name: &str, e: std::io::Error) -> PipelineError {
    thread_error(&format!("spawning thread {name}"), e)
}

/// The body of a line thread.
type LineFn<'a> = Box<dyn FnOnce() -> ThreadReport + Send + 'a>;

/// The sender's and the receiver's line threads for `ctx.cfg.link` (one
/// construction for both modes): `ends` are each side's queues to its bottom
/// layer(s), `ids` the two line threads' parker ids.
fn line_threads<'p>(
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
                        "sender",
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
                        "receiver",
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
                        "sender",
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
                        "receiver",
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

fn run_parallel<'p>(
    ctx: &'p Ctx<'p>,
    udp: Option<(UdpSocket, UdpSocket)>,
    stop: &AtomicBool,
    timed_out: &mut bool,
    interrupted: &mut bool,
) -> Result<Collected, PipelineError> {
    let cfg = ctx.cfg;
    let n = cfg.layers;
    if n == 0 {
        // The line alone: no connection to open or close.
        ctx.sender_open.store(true, Ordering::SeqCst);
        ctx.sender_closed.store(true, Ordering::SeqCst);
    }
    let w = parallel::wire(ctx);
    let mut collected = Collected::default();
    let spawned: Result<(), PipelineError> = std::thread::scope(|s| {
        let mut handles = Vec::new();
        let mut spawn = |name: String, f: Box<dyn FnOnce() -> ThreadReport + Send + 'p>| {
            spawn_in(s, &mut handles, name, f)
        };
        let result = (|| {
            let source_tx = w.source_tx;
            spawn(
                "sender source".into(),
                Box::new(move || {
                    parallel::run_source(
                        ctx,
                        ctx.cpu_for(parallel::SOURCE),
                        parallel::sender_id(n, n),
                        source_tx,
                    )
                }),
            )?;
            for t in w.layers {
                let name = t.name.clone();
                spawn(name, Box::new(move || parallel::run_layer(ctx, t)))?;
            }
            let (sf, rf) = line_threads(
                ctx,
                udp,
                [w.sender_line, w.receiver_line],
                [parallel::sender_line_id(n), parallel::receiver_line_id(n)],
            )?;
            spawn("sender line".into(), sf)?;
            spawn("receiver line".into(), rf)?;
            let sink_rx = w.sink_rx;
            let sink = parallel::sink_id(n);
            spawn(
                "receiver sink".into(),
                Box::new(move || {
                    parallel::run_sink(
                        ctx,
                        ctx.cpu_for(sink),
                        sink,
                        parallel::receiver_id(n, n),
                        sink_rx,
                    )
                }),
            )?;
            Ok(())
        })();
        if result.is_ok() {
            coordinate(
                ctx,
                stop,
                || handles.iter().any(|(_, h)| h.is_finished()),
                timed_out,
                interrupted,
            );
        } else {
            ctx.shutdown.store(true, Ordering::SeqCst);
            ctx.wake_all();
        }
        for (name, h) in handles {
            match h.join() {
                Ok(r) => collected.threads.push(r),
                Err(_) => collected.panicked.push(name),
            }
        }
        result
    });
    spawned?;
    Ok(collected)
}

type ThreadFn<'a> = Box<dyn FnOnce() -> ThreadReport + Send + 'a>;

fn spawn_in<'scope, 'env>(
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

fn short_name(name: &str) -> String {
    // Linux thread names are at most 15 bytes.
    let s = name
        .replace("sender ", "s-")
        .replace("receiver ", "r-")
        .replace("layer ", "L")
        .replace("worker ", "w");
    s.chars().take(15).collect()
}

fn run_rtc<'p>(
    ctx: &'p Ctx<'p>,
    k: usize,
    udp: Option<(UdpSocket, UdpSocket)>,
    stop: &AtomicBool,
    timed_out: &mut bool,
    interrupted: &mut bool,
) -> Result<Collected, PipelineError> {
    let cfg = ctx.cfg;
    let n = cfg.layers;
    let make_side = |initiator: bool| rtc::SideState {
        layers: (1..=n)
            .map(|l| {
                Mutex::new(Layer::new(
                    parallel::layer_config(cfg, l),
                    if initiator {
                        Role::Initiator
                    } else {
                        Role::Responder
                    },
                    ctx.pool,
                ))
            })
            .collect(),
        source: Mutex::new(Source::new(cfg)),
        sink: Mutex::new(Sink::new(cfg)),
        released: AtomicBool::new(false),
        initiator,
    };
    let sender = make_side(true);
    let receiver = make_side(false);
    let cap = cfg.queue_capacity;
    let mut workers = Vec::new();
    let mut ends = [
        LayerEnds {
            from_layers: Vec::new(),
            to_layers: Vec::new(),
            layer_parkers: Vec::new(),
        },
        LayerEnds {
            from_layers: Vec::new(),
            to_layers: Vec::new(),
            layer_parkers: Vec::new(),
        },
    ];
    for (si, side) in ["sender", "receiver"].into_iter().enumerate() {
        for w in 0..k {
            let (down_tx, down_rx) = RingBuffer::new(cap);
            let (up_tx, up_rx) = RingBuffer::new(cap);
            let me = if si == 0 {
                rtc::sender_worker_id(w)
            } else {
                rtc::receiver_worker_id(k, w)
            };
            ends[si].from_layers.push(down_rx);
            ends[si].to_layers.push(up_tx);
            ends[si].layer_parkers.push(me);
            workers.push((
                si,
                rtc::Worker {
                    name: format!("{side} worker {w}"),
                    side,
                    me,
                    line: if si == 0 {
                        rtc::sender_line_id(k)
                    } else {
                        rtc::receiver_line_id(k)
                    },
                    cpu: ctx.cpu_for(me),
                    to_line: down_tx,
                    from_line: up_rx,
                },
            ));
        }
    }
    let [s_ends, r_ends] = ends;
    let mut collected = Collected::default();
    let mut layer_time = [vec![Duration::ZERO; n], vec![Duration::ZERO; n]];
    let spawned: Result<(), PipelineError> = std::thread::scope(|s| {
        let mut worker_handles = Vec::new();
        let mut line_handles = Vec::new();
        let fail_spawn = |e: PipelineError| {
            ctx.shutdown.store(true, Ordering::SeqCst);
            ctx.wake_all();
            e
        };
        let result = (|| {
            for (si, w) in workers {
                let side = if si == 0 { &sender } else { &receiver };
                let name = w.name.clone();
                let h = std::thread::Builder::new()
                    .name(short_name(&name))
                    .spawn_scoped(s, move || rtc::run_worker(ctx, side, w))
                    .map_err(|e| fail_spawn(spawn_err(&name, e)))?;
                worker_handles.push((name, si, h));
            }
            let (sf, rf) = line_threads(
                ctx,
                udp,
                [s_ends, r_ends],
                [rtc::sender_line_id(k), rtc::receiver_line_id(k)],
            )
            .map_err(fail_spawn)?;
            for (name, f) in [("sender line", sf), ("receiver line", rf)] {
                let h = std::thread::Builder::new()
                    .name(short_name(name))
                    .spawn_scoped(s, f)
                    .map_err(|e| fail_spawn(spawn_err(name, e)))?;
                line_handles.push((name.to_string(), h));
            }
            Ok(())
        })();
        if result.is_ok() {
            coordinate(
                ctx,
                stop,
                || {
                    worker_handles.iter().any(|(_, _, h)| h.is_finished())
                        || line_handles.iter().any(|(_, h)| h.is_finished())
                },
                timed_out,
                interrupted,
            );
        }
        for (name, si, h) in worker_handles {
            match h.join() {
                Ok(r) => {
                    for (acc, t) in layer_time[si].iter_mut().zip(&r.layer_time) {
                        *acc += *t;
                    }
                    // The sink runs under the top layer's lock: not layer work.
                    if let Some(top) = layer_time[si].last_mut() {
                        *top = top.saturating_sub(r.sink_time);
                    }
                    collected.threads.push(r.thread);
                }
                Err(_) => collected.panicked.push(name),
            }
        }
        for (name, h) in line_handles {
            match h.join() {
                Ok(r) => collected.threads.push(r),
                Err(_) => collected.panicked.push(name),
            }
        }
        result
    });
    spawned?;
    let counters = |side: &rtc::SideState<'_>| -> Vec<layer::LayerCounters> {
        side.layers
            .iter()
            .map(|l| l.lock().unwrap_or_else(|e| e.into_inner()).counters())
            .collect()
    };
    collected.rtc_counters = Some([counters(&sender), counters(&receiver)]);
    collected.rtc_layer_time = Some(layer_time);
    let src = sender
        .source
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .totals();
    *ctx.source.lock().unwrap_or_else(|e| e.into_inner()) = Some(src);
    let sink = std::mem::replace(
        &mut *receiver.sink.lock().unwrap_or_else(|e| e.into_inner()),
        Sink::new(cfg),
    );
    *ctx.sink.lock().unwrap_or_else(|e| e.into_inner()) = sink;
    Ok(collected)
}

fn per_message_ns(seconds: f64, messages: u64) -> f64 {
    if messages == 0 {
        0.0
    } else {
        seconds * 1e9 / messages as f64
    }
}

fn layer_stats(
    side: &str,
    layer: usize,
    cpu_s: f64,
    busy: (f64, f64),
    c: &layer::LayerCounters,
    occupancy: (f64, u64),
    cpu: Option<usize>,
) -> LayerStats {
    let messages = if side == "sender" {
        c.data_sent
    } else {
        c.data_delivered
    };
    LayerStats {
        side: side.to_string(),
        layer,
        cpu_s,
        messages,
        cpu_ns_per_message: per_message_ns(cpu_s, messages),
        retransmissions: c.retransmissions,
        queue_occupancy_mean: occupancy.0,
        queue_occupancy_max: occupancy.1,
        cpu,
        busy_s: busy.0,
        busy_ns_per_message: per_message_ns(busy.0, messages),
        busy_raw_ns_per_message: per_message_ns(busy.1, messages),
        timeouts: c.timeouts,
        duplicates: c.duplicates,
        out_of_order: c.out_of_order,
        rejected: c.rejected,
        max_outstanding: c.max_outstanding,
        retransmit_copies: c.retransmit_copies,
    }
}

/// Messages per second the line can carry (user messages with all headers;
/// acknowledgements travel the other direction). `None` if unlimited.
fn line_rate(cfg: &PipelineConfig) -> Option<f64> {
    match cfg.link {
        LinkConfig::Memory {
            bandwidth_bit_s: Some(b),
            ..
        } => Some(b as f64 / (cfg.buffer_size() as f64 * 8.0)),
        _ => None,
    }
}

fn assemble(
    ctx: &Ctx<'_>,
    collected: &Collected,
    handoff_ns: f64,
    timed_out: bool,
    interrupted: bool,
) -> PipelineResult {
    let cfg = ctx.cfg;
    let n = cfg.layers;
    let sink = ctx.sink.lock().unwrap_or_else(|e| e.into_inner());
    let source = *ctx.source.lock().unwrap_or_else(|e| e.into_inner());
    let (sent, sender_ck) = source.map_or((0, String::new()), |s| (s.sent, s.checksum.hex()));
    let elapsed_s = match (ctx.first_send.get(), sink.last) {
        (Some(a), Some(b)) if b > *a => (b - *a).as_secs_f64(),
        _ => 0.0,
    };
    let mut per_layer = Vec::with_capacity(2 * n);
    match (&collected.rtc_counters, &collected.rtc_layer_time) {
        (Some(counters), Some(times)) => {
            for (si, side) in ["sender", "receiver"].into_iter().enumerate() {
                for l in 0..n {
                    let t = times[si][l].as_secs_f64();
                    per_layer.push(layer_stats(
                        side,
                        l + 1,
                        t,
                        (t, t),
                        &counters[si][l],
                        (0.0, 0),
                        None,
                    ));
                }
            }
        }
        _ => {
            for side in ["sender", "receiver"] {
                for l in 1..=n {
                    if let Some(r) = collected
                        .threads
                        .iter()
                        .find(|r| r.side == side && r.layer == Some(l))
                    {
                        let c = r.counters.unwrap_or_default();
                        per_layer.push(layer_stats(
                            side,
                            l,
                            r.cpu_s,
                            (r.busy_s, r.busy_raw_s),
                            &c,
                            (r.occupancy_mean, r.occupancy_max),
                            r.cpu,
                        ));
                    }
                }
            }
        }
    }
    let stages: Vec<StageStats> = collected
        .threads
        .iter()
        .map(|r| StageStats {
            name: r.name.clone(),
            side: r.side.to_string(),
            cpu_s: r.cpu_s,
            busy_s: r.busy_s,
            messages: r.messages,
            busy_ns_per_message: per_message_ns(r.busy_s, r.messages),
            busy_raw_ns_per_message: per_message_ns(r.busy_raw_s, r.messages),
            busy_rounds: r.busy_rounds,
            yields: r.yields,
            parks: r.parks,
            dropped: r.dropped,
            duplicated: r.duplicated,
            reordered: r.reordered,
            cpu: r.cpu,
        })
        .collect();
    let delivered = sink.delivered;
    let (proj, bottleneck, proj_all, bottleneck_all) =
        project_layers(cfg, &per_layer, collected, delivered, handoff_ns);
    let verified = !interrupted
        && delivered == cfg.messages
        && sent == cfg.messages
        && sink.bad == 0
        && sink.checksum.hex() == sender_ck;
    let retransmissions = per_layer.iter().map(|l| l.retransmissions).sum();
    let rate = |x: f64| if elapsed_s > 0.0 { x / elapsed_s } else { 0.0 };
    let throughput_mbit_s = rate(sink.bytes as f64 * 8.0 / 1e6);
    let projection = project(&projection_input(
        cfg,
        collected,
        delivered,
        handoff_ns,
        throughput_mbit_s,
        verified,
    ));
    PipelineResult {
        layers: n,
        message_size: cfg.message_size,
        mode: cfg.mode.name().to_string(),
        link: cfg.link.describe(),
        messages_sent: sent,
        messages_delivered: delivered,
        bytes_delivered: sink.bytes,
        verified,
        stream_checksum: sink.checksum.hex(),
        elapsed_s,
        throughput_mbit_s,
        messages_per_s: rate(delivered as f64),
        retransmissions,
        per_layer,
        handoff_ns,
        projected_throughput_mbit_s: proj,
        projected_bottleneck: bottleneck,
        interrupted,
        sender_checksum: sender_ck,
        timed_out,
        projected_with_endpoints_mbit_s: proj_all,
        projected_with_endpoints_bottleneck: bottleneck_all,
        stages,
        errors: sink.errors.clone(),
        pool: format!(
            "{:?} {} x {} B",
            ctx.pool.kind(),
            ctx.pool.capacity(),
            ctx.pool.buffer_size()
        ),
        projection,
    }
}

/// CPUs the run's threads could use: the distinct CPUs of the map, or the
/// process's affinity.
fn run_cpus(cfg: &PipelineConfig) -> usize {
    match &cfg.cpu_map {
        Some(map) if !map.is_empty() => {
            let mut m = map.clone();
            m.sort_unstable();
            m.dedup();
            m.len()
        }
        _ => std::thread::available_parallelism().map_or(1, |n| n.get()),
    }
}

/// The stage costs of a run, per delivered message, for [`project`].
fn projection_input(
    cfg: &PipelineConfig,
    collected: &Collected,
    delivered: u64,
    handoff_ns: f64,
    measured_mbit_s: f64,
    verified: bool,
) -> ProjectionInput {
    let per = |s: f64, n: u64| per_message_ns(s, n);
    let mut stages = Vec::new();
    match cfg.mode {
        Mode::LayerParallel => {
            for r in collected.threads.iter().filter(|r| r.layer.is_some()) {
                stages.push(StageCost {
                    name: r.name.clone(),
                    role: StageRole::Layers,
                    ns_per_message: per(r.busy_s, r.messages),
                    raw_ns_per_message: per(r.busy_raw_s, r.messages),
                    rounds: r.busy_rounds,
                });
            }
        }
        Mode::RunToCompletion { threads } => {
            // The workers generate and check messages too: their whole busy
            // time, shared over the side's workers.
            for side in ["sender", "receiver"] {
                let workers: Vec<&ThreadReport> = collected
                    .threads
                    .iter()
                    .filter(|r| r.side == side && r.name.contains("worker"))
                    .collect();
                let sum = |f: fn(&ThreadReport) -> f64| workers.iter().map(|r| f(r)).sum::<f64>();
                let share = threads.max(1) as f64;
                stages.push(StageCost {
                    name: format!("{side} workers"),
                    role: StageRole::Layers,
                    ns_per_message: per(sum(|r| r.busy_s), delivered) / share,
                    raw_ns_per_message: per(sum(|r| r.busy_raw_s), delivered) / share,
                    rounds: workers.iter().map(|r| r.busy_rounds).sum(),
                });
            }
        }
    }
    for r in &collected.threads {
        let role = if r.name.contains("source") {
            StageRole::Source
        } else if r.name.contains("sink") {
            StageRole::Sink
        } else if r.name.contains("line") {
            StageRole::Line
        } else {
            continue;
        };
        // Lines handle data frames and acknowledgements: charged per message.
        stages.push(StageCost {
            name: r.name.clone(),
            role,
            ns_per_message: per(r.busy_s, delivered),
            raw_ns_per_message: per(r.busy_raw_s, delivered),
            rounds: r.busy_rounds,
        });
    }
    ProjectionInput {
        stages,
        handoff_ns,
        message_size: cfg.message_size,
        line_messages_per_s: line_rate(cfg),
        measured_mbit_s,
        threads: collected.threads.len(),
        cpus: run_cpus(cfg),
        verified,
    }
}

/// Projection with one core per thread. Layer-parallel: each layer stage
/// costs its busy ns per message plus one SPSC hand-off; the slowest stage
/// bounds the message rate. Run-to-completion: each side's workers share the
/// per-message cost of all that side's layers (time inside the entities per
/// delivered message), divided over `threads` cores; the endpoint projection
/// uses the workers' whole busy time (message generation and checking too).
/// Both are bounded by the line rate. The second projection also counts
/// source, sink and line threads.
fn project_layers(
    cfg: &PipelineConfig,
    per_layer: &[LayerStats],
    collected: &Collected,
    delivered: u64,
    handoff_ns: f64,
) -> (f64, String, f64, String) {
    let mut stages: Vec<(String, f64)> = Vec::new();
    match cfg.mode {
        Mode::LayerParallel => {
            for l in per_layer {
                if l.messages > 0 {
                    stages.push((
                        format!("{} layer {}", l.side, l.layer),
                        l.busy_ns_per_message + handoff_ns,
                    ));
                }
            }
        }
        Mode::RunToCompletion { threads } => {
            // Layer work only (time inside the entities, sink excluded), as
            // the layer-parallel projection counts layer threads only.
            for side in ["sender", "receiver"] {
                let busy: f64 = per_layer
                    .iter()
                    .filter(|l| l.side == side)
                    .map(|l| l.busy_s)
                    .sum();
                if delivered > 0 {
                    stages.push((
                        format!("{side} workers"),
                        busy * 1e9 / delivered as f64 / threads as f64,
                    ));
                }
            }
        }
    }
    let mut endpoint_stages = match cfg.mode {
        Mode::LayerParallel => stages.clone(),
        Mode::RunToCompletion { threads } => ["sender", "receiver"]
            .into_iter()
            .filter(|_| delivered > 0)
            .map(|side| {
                let busy: f64 = collected
                    .threads
                    .iter()
                    .filter(|r| r.side == side && r.name.contains("worker"))
                    .map(|r| r.busy_s)
                    .sum();
                (
                    format!("{side} workers"),
                    busy * 1e9 / delivered as f64 / threads as f64,
                )
            })
            .collect(),
    };
    for r in &collected.threads {
        let is_endpoint =
            r.name.contains("source") || r.name.contains("sink") || r.name.contains("line");
        if is_endpoint && delivered > 0 {
            // Lines handle data frames and acks: charge their busy time per message.
            endpoint_stages.push((
                r.name.clone(),
                r.busy_s * 1e9 / delivered as f64 + handoff_ns,
            ));
        }
    }
    let bound = |stages: &[(String, f64)]| -> (f64, String) {
        let worst = stages
            .iter()
            .filter(|s| s.1 > 0.0)
            .max_by(|a, b| a.1.total_cmp(&b.1));
        let mut rate = worst.map_or(f64::INFINITY, |w| 1e9 / w.1);
        let mut name = worst.map_or_else(|| "none".to_string(), |w| w.0.clone());
        if let Some(line) = line_rate(cfg) {
            if line < rate {
                rate = line;
                name = "line".to_string();
            }
        }
        if !rate.is_finite() {
            return (0.0, name);
        }
        (rate * cfg.message_size as f64 * 8.0 / 1e6, name)
    };
    let (a, an) = bound(&stages);
    let (b, bn) = bound(&endpoint_stages);
    (a, an, b, bn)
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
