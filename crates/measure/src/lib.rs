//! connlab's measurement vocabulary, free of I/O: latency histograms and their
//! summaries, open-loop send schedules, the send-timing deviation of the
//! locality paper, the active ratio and the seeded choice of active
//! connections. The definitions of `service_latency`, `corrected_latency`,
//! `send_lag` and `send_deviation` (see `shared/design.md`) live here.

mod active;
mod deviation;
mod histogram;
mod ratio;
mod schedule;

pub use active::choose_active;
pub use deviation::{DeviationSummary, SendDeviation};
pub use histogram::{CdfPoint, LatencyHistogram, Summary};
pub use ratio::{ActiveRatio, RatioError};
pub use schedule::{Arrival, Schedule, ScheduleError};
