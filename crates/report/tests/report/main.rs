//! Reports of small results fixtures (no root, no timing), in one test
//! binary: the locality kind with two engines and two repetitions (the
//! paper's cells beside ours with ratios and verdicts, claims whose rows are
//! missing, every plot with labelled axes), projections, the gateway kind,
//! the peers kind's ratios on valid points against the A/A noise, and
//! snapshots of every format of the locality, loadgen and peers reports
//! and of every other page kind's HTML, and the plots' geometry.
//!
//! The points are built in code from one real load result
//! (`fixtures/load.json`, `fixtures/server.json`) with chosen statistics.

mod gateway;
mod geometry;
mod loadgen;
mod locality;
mod pages;
mod peers;
mod plots;
mod projection;
mod snapshots;
pub(crate) mod support;
