//! connlab's measurement vocabulary, free of I/O and of the clock: latency
//! histograms and their summaries, open-loop send schedules, the
//! `send_deviation` of the locality paper, the active ratio and the seeded
//! choice of active connections. The load generator takes the timestamps and
//! records `service_latency`, `corrected_latency` and `send_lag` (defined in
//! the design document's "Measurement definitions") into
//! [`LatencyHistogram`]s; [`SendDeviation`] computes `send_deviation` itself.
//! [`stats`] checks a run's own statistics (arrival distribution,
//! stationarity, independence, percentile intervals).

mod active;
mod deviation;
mod hash;
mod histogram;
mod ratio;
mod rng;
mod schedule;
mod shard;
pub mod stats;
pub mod units;
mod usl;

pub use active::choose_active;
pub use deviation::{DeviationHistogram, DeviationHistogramParts, DeviationSummary, SendDeviation};
pub use hash::splitmix64;
pub use histogram::{CdfPoint, DecodeError, LatencyHistogram, Summary};
pub use ratio::{ActiveRatio, RatioError};
pub use rng::SeededRng;
pub use schedule::{Arrival, Schedule, ScheduleError};
pub use shard::{Shard, ShardError, ShardSlice};
pub use usl::UslFit;
