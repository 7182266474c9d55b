//! The connlab reference server: one protocol core ([`connlab_proto`]) behind
//! I/O models that can be switched at run time (`--engine`). Everything but the
//! way connections are multiplexed is shared: the same connection driver,
//! the same read chunk, the same `recv`/`sendmsg` calls per request and the same
//! pre-filled response payload, so a difference in the measurements is a
//! difference between I/O models.

#![warn(clippy::unwrap_used)]

mod config;
mod connection;
mod counters;
mod deadline;
mod engine;
mod listener;
mod outbox;
mod payload;
mod profile;
mod server;
mod socket_io;
mod stats;

pub use config::{
    AcceptMode, EngineKind, ServerConfig, UringFeature, UringFeatures, DEFAULT_HEADER_TIMEOUT,
};
pub use profile::TimingSummary;
pub use server::{Server, ServerError};
pub use stats::{imbalance, RtSigStats, ServerStats, WorkerStats, STATS_SCHEMA};
