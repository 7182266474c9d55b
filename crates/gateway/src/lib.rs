//! `connlab-gateway`: the load-balancing gateway of the third paper.
//!
//! - [`policy`]: which backend a new client connection goes to (pure, no
//!   I/O): the paper's `ip-mod`, `source-hash`, `round-robin`,
//!   `least-connections` and `maglev`.
//!
//! - [`nat`]: `--mode nat`, the kernel balances (nftables DNAT); [`forward`]
//!   turns IPv4 forwarding on and always puts it back.
//!
//! - [`proxy`]: `--mode proxy`, a user-space L4 proxy with health checks.
//!
//! - [`run`]: one run of either, its options checked and its statistics.

#![warn(clippy::unwrap_used)]

pub mod forward;
pub mod nat;
pub mod policy;
pub mod proxy;
pub mod run;

pub use nat::{BackendCounters, NatError, NatRules};
pub use policy::{Backend, Balancer, BalancerError, PolicyKind};
pub use proxy::{ProxyBackendStats, ProxyConfig, ProxyIo, ProxyStats};
pub use run::{GatewayEvent, GatewayMode, GatewayOptions, GatewayRunError, GatewayStats};
