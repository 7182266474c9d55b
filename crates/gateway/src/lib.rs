//! `connlab-gateway`: the load-balancing gateway of the third paper.
//!
//! - [`policy`]: which backend a new client connection goes to (pure, no
//!   I/O): the paper's `ip-mod`, `source-hash`, `round-robin`,
//!   `least-connections` and `maglev`.
//!
//! The NAT mode (nftables) and the user-space proxy mode build on these
//! policies (see the issue tracker for their status).

pub mod policy;

pub use policy::{Backend, Balancer, BalancerError, PolicyKind};
