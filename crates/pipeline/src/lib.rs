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

#![warn(clippy::unwrap_used)]

pub mod content;
pub mod header;
pub mod layer;
pub mod pool;
pub mod projection;

mod bench;
mod config;
mod idle;
mod line;
mod parallel;
mod results;
mod rtc;
mod run;
mod run_projection;
mod runtime;
mod sync;

pub use bench::{
    measure_handoff, measure_pool, HandoffCost, PoolCost, HANDOFF_QUEUE, POOL_BENCH_BUFFERS,
    POOL_BENCH_HELD,
};
pub use config::{
    ConfigError, LinkConfig, Mode, PipelineConfig, HIPPI_BIT_S, MAX_LAYERS, MAX_MESSAGE_SIZE,
    MAX_RTC_THREADS, MAX_UDP_PAYLOAD, MAX_WINDOW, MIN_MESSAGE_SIZE,
};
pub use idle::IdleConfig;
pub use pool::{Buf, BufferPool, LockFreePool, MutexPool, PoolKind};
pub use projection::{project, Bound, Projection, ProjectionInput, StageCost, StageRole};
pub use results::{relative_capacity, LayerStats, PipelineResult, Side, StageStats};
pub use run::run;
pub use runtime::PipelineError;
