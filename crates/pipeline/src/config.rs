//! What a run is asked to do: the mode, the line, every parameter, their
//! limits and the checks on them.

use std::net::SocketAddr;
use std::time::Duration;

use crate::header::HEADER_LEN;
use crate::idle::IdleConfig;
use crate::pool::{self, PoolKind};

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

/// Slots of each direction of the memory wire.
pub(crate) const WIRE_QUEUE: usize = 256;

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

    /// Threads a run of this configuration starts: layer-parallel, one per
    /// layer per side plus the source, the sink and the two line threads
    /// (`2 * layers + 4`); run-to-completion, the workers of both sides and
    /// the two line threads (`2 * threads + 2`).
    pub fn thread_count(&self) -> usize {
        match self.mode {
            Mode::LayerParallel => crate::parallel::thread_count(self.layers),
            Mode::RunToCompletion { threads } => crate::rtc::thread_count(threads),
        }
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
