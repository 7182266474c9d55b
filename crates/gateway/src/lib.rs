//! `connlab-gateway`: the load-balancing gateway of the third paper.
//!
//! - [`policy`]: which backend a new client connection goes to (pure, no
//!   I/O): the paper's `ip-mod`, `source-hash`, `round-robin`,
//!   `least-connections` and `maglev`.
//!
//! - [`nat`]: `--mode nat`, the kernel balances (nftables DNAT).
//!
//! The user-space proxy mode is not built yet.

pub mod nat;
pub mod policy;

pub use nat::{BackendCounters, NatError, NatRules};
pub use policy::{Backend, Balancer, BalancerError, PolicyKind};
