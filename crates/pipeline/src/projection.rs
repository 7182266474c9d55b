//! The throughput a run would reach with one core per thread, kept
//! physical.
//!
//! A run on this machine shares a few CPUs among `2 * layers + 4` threads
//! (layer-parallel) or the workers, lines, source and sink
//! (run-to-completion). Each stage's busy time per message says how fast it
//! could go on a core of its own; the slowest stage bounds the pipeline.
//! Taken alone the layer stages promise rates no real run can reach, so
//! [`project`] bounds the projection by everything a run needs besides the
//! layers:
//!
//! * the application source and sink and both line threads, each at its own
//!   busy time per message (plus one hand-off);
//! * the line's rate, when it has one;
//! * the CPU share: one core per thread can add at most `threads / CPUs`
//!   times the CPU the measured run had, so the projection never exceeds
//!   the measured rate times that factor.
//!
//! It never goes below the measured rate either (more cores do not slow a
//! run down). It gives no projection at all when the data cannot carry one:
//! an unverified run, too few timed rounds in the stage that sets the bound,
//! or a bounding stage whose time came mostly from rounds the scheduler
//! interrupted (see `BusyMeter`).

use serde::{Deserialize, Serialize};

/// Fewest timed rounds the bounding stage needs for its cost to count.
pub const MIN_BUSY_ROUNDS: u64 = 20;

/// Largest raw / capped busy-time ratio of the bounding stage: above it,
/// more than three quarters of the stage's measured time came from rounds
/// the scheduler interrupted, and the capped figure is a guess.
pub const MAX_PREEMPTION_RATIO: f64 = 4.0;

/// What a stage does in the run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum StageRole {
    /// A layer thread (layer-parallel) or one side's workers
    /// (run-to-completion, generation and checking included).
    Layers,
    /// The application source.
    Source,
    /// The application sink.
    Sink,
    /// A line thread.
    Line,
}

/// One stage's cost as the projection reads it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StageCost {
    /// E.g. `"receiver layer 2"`, `"sender workers"`, `"sender source"`.
    pub name: String,
    /// What it does.
    pub role: StageRole,
    /// Busy ns per delivered message, capped against preemption; for
    /// run-to-completion workers already divided over the workers.
    pub ns_per_message: f64,
    /// The same without the cap.
    pub raw_ns_per_message: f64,
    /// Timed rounds behind the figure.
    pub rounds: u64,
}

/// Everything [`project`] needs from a run.
#[derive(Clone, Debug, PartialEq)]
pub struct ProjectionInput {
    /// Every stage.
    pub stages: Vec<StageCost>,
    /// One SPSC hand-off, ns (added to every stage's cost).
    pub handoff_ns: f64,
    /// User bytes per message.
    pub message_size: usize,
    /// Messages per second the line carries; `None`: unlimited.
    pub line_messages_per_s: Option<f64>,
    /// The run's measured throughput, Mbit/s.
    pub measured_mbit_s: f64,
    /// Threads of the run.
    pub threads: usize,
    /// CPUs the run could use.
    pub cpus: usize,
    /// Whether the run delivered every message intact.
    pub verified: bool,
}

/// One candidate bound.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Bound {
    /// A stage name, `"line"` or `"CPU share"`.
    pub what: String,
    /// The rate it allows, Mbit/s of user data.
    pub mbit_s: f64,
}

/// A bounded projection.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Projection {
    /// Mbit/s with one core per thread; `None`: no projection (see
    /// `unsupported`).
    pub mbit_s: Option<f64>,
    /// What sets it: a stage, `"line"`, `"CPU share"` or `"measured"`.
    pub bound: String,
    /// Why there is no projection.
    pub unsupported: Option<String>,
    /// The layer stages alone (unbounded), Mbit/s.
    pub layers_only_mbit_s: Option<f64>,
    /// Every bound considered, slowest first.
    pub bounds: Vec<Bound>,
    /// Threads and CPUs of the CPU-share bound.
    pub threads: usize,
    /// CPUs the run could use.
    pub cpus: usize,
}

impl Projection {
    /// No projection, with the reason.
    pub fn none(reason: impl Into<String>) -> Projection {
        Projection {
            unsupported: Some(reason.into()),
            ..Projection::default()
        }
    }

    /// The projected rate, or the reason there is none.
    pub fn value(&self) -> Result<f64, &str> {
        match (self.mbit_s, &self.unsupported) {
            (Some(v), _) => Ok(v),
            (None, Some(r)) => Err(r.as_str()),
            (None, None) => Err("no projection recorded"),
        }
    }
}

fn mbit_s(messages_per_s: f64, message_size: usize) -> f64 {
    messages_per_s * message_size as f64 * 8.0 / 1e6
}

/// Projects a run to one core per thread, bounded as the module says.
pub fn project(input: &ProjectionInput) -> Projection {
    let none = |reason: String| Projection {
        threads: input.threads,
        cpus: input.cpus,
        ..Projection::none(reason)
    };
    if !input.verified {
        return none("the run did not deliver every message intact".into());
    }
    if !input.measured_mbit_s.is_finite() || input.measured_mbit_s <= 0.0 || input.message_size == 0
    {
        return none("the run measured no throughput".into());
    }
    let stage_rate = |s: &StageCost| {
        let ns = s.ns_per_message + input.handoff_ns;
        (ns > 0.0).then(|| mbit_s(1e9 / ns, input.message_size))
    };
    let layers_only = input
        .stages
        .iter()
        .filter(|s| s.role == StageRole::Layers)
        .filter_map(stage_rate)
        .min_by(f64::total_cmp);
    let mut bounds: Vec<(Bound, Option<&StageCost>)> = input
        .stages
        .iter()
        .filter_map(|s| {
            stage_rate(s).map(|v| {
                (
                    Bound {
                        what: s.name.clone(),
                        mbit_s: v,
                    },
                    Some(s),
                )
            })
        })
        .collect();
    if let Some(rate) = input.line_messages_per_s {
        bounds.push((
            Bound {
                what: "line".into(),
                mbit_s: mbit_s(rate, input.message_size),
            },
            None,
        ));
    }
    let cpus = input.cpus.clamp(1, input.threads.max(1));
    bounds.push((
        Bound {
            what: "CPU share".into(),
            mbit_s: input.measured_mbit_s * input.threads.max(1) as f64 / cpus as f64,
        },
        None,
    ));
    bounds.sort_by(|a, b| a.0.mbit_s.total_cmp(&b.0.mbit_s));
    let (first, stage) = &bounds[0];
    let mut projection = Projection {
        mbit_s: Some(first.mbit_s),
        bound: first.what.clone(),
        unsupported: None,
        layers_only_mbit_s: layers_only,
        bounds: bounds.iter().map(|b| b.0.clone()).collect(),
        threads: input.threads,
        cpus: input.cpus,
    };
    if let Some(s) = stage {
        if s.rounds < MIN_BUSY_ROUNDS {
            return Projection {
                mbit_s: None,
                unsupported: Some(format!(
                    "too few busy samples: {} was timed in {} rounds (at least {MIN_BUSY_ROUNDS} needed)",
                    s.name, s.rounds
                )),
                ..projection
            };
        }
        if s.ns_per_message > 0.0 && s.raw_ns_per_message / s.ns_per_message > MAX_PREEMPTION_RATIO
        {
            return Projection {
                mbit_s: None,
                unsupported: Some(format!(
                    "stage timings dominated by preemption: {} spent {:.0} ns per message in timed rounds, of which the preemption cap kept only {:.0} ns",
                    s.name, s.raw_ns_per_message, s.ns_per_message
                )),
                ..projection
            };
        }
    }
    if first.mbit_s < input.measured_mbit_s {
        projection.mbit_s = Some(input.measured_mbit_s);
        projection.bound = "measured".into();
    }
    projection
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stage(name: &str, role: StageRole, ns: f64, raw: f64, rounds: u64) -> StageCost {
        StageCost {
            name: name.into(),
            role,
            ns_per_message: ns,
            raw_ns_per_message: raw,
            rounds,
        }
    }

    /// One layer that alone would carry 8 KiB messages at ~65 Gbit/s, a
    /// source and sink ten times slower, an unlimited line, six threads on
    /// two CPUs: the projection is the sink's rate, not the layer's.
    fn one_layer(measured: f64) -> ProjectionInput {
        ProjectionInput {
            stages: vec![
                stage("sender source", StageRole::Source, 9_000.0, 9_100.0, 500),
                stage("sender layer 1", StageRole::Layers, 900.0, 1_000.0, 400),
                stage("receiver layer 1", StageRole::Layers, 1_000.0, 1_100.0, 400),
                stage("sender line", StageRole::Line, 200.0, 300.0, 400),
                stage("receiver line", StageRole::Line, 300.0, 400.0, 400),
                stage("receiver sink", StageRole::Sink, 10_000.0, 10_000.0, 500),
            ],
            handoff_ns: 0.0,
            message_size: 8192,
            line_messages_per_s: None,
            measured_mbit_s: measured,
            threads: 6,
            cpus: 2,
            verified: true,
        }
    }

    #[test]
    fn the_slowest_left_out_stage_bounds_the_layers() {
        let p = project(&one_layer(3_000.0));
        let layers = p.layers_only_mbit_s.unwrap();
        assert!((layers - 65_536.0).abs() < 1e-6, "{layers}");
        assert_eq!(p.bound, "receiver sink");
        let sink = 8192.0 * 8.0 / 10_000.0 * 1e3;
        assert!((p.mbit_s.unwrap() - sink).abs() < 1e-6, "{p:?}");
        assert!(p.mbit_s.unwrap() < layers);
        assert_eq!(p.bounds.len(), 7);
        assert!(p.bounds.windows(2).all(|w| w[0].mbit_s <= w[1].mbit_s));
    }

    #[test]
    fn never_above_the_line_nor_the_cpu_share() {
        // A line of 1,000 messages/s: 65.5 Mbit/s at 8 KiB.
        let mut input = one_layer(50.0);
        input.line_messages_per_s = Some(1_000.0);
        let p = project(&input);
        assert_eq!(p.bound, "line");
        assert!((p.mbit_s.unwrap() - 65.536).abs() < 1e-9);
        // Without the line, a slow measured run caps the projection at
        // threads / CPUs times what it measured: 50 * 6 / 2.
        input.line_messages_per_s = None;
        let p = project(&input);
        assert_eq!(p.bound, "CPU share");
        assert!((p.mbit_s.unwrap() - 150.0).abs() < 1e-9);
        // Fewer threads than CPUs: the factor is 1.
        input.cpus = 64;
        let p = project(&input);
        assert!((p.mbit_s.unwrap() - 50.0).abs() < 1e-9, "{p:?}");
    }

    #[test]
    fn never_below_the_measured_rate() {
        // Measured faster than every bound (a burst over the paced line).
        let mut input = one_layer(7_000.0);
        input.line_messages_per_s = Some(100_000.0);
        let p = project(&input);
        assert_eq!(p.bound, "measured");
        assert_eq!(p.mbit_s, Some(7_000.0));
    }

    #[test]
    fn no_projection_when_the_data_cannot_carry_one() {
        let mut input = one_layer(3_000.0);
        input.stages[5].rounds = 5;
        let p = project(&input);
        assert_eq!(p.mbit_s, None);
        let why = p.value().unwrap_err();
        assert!(why.contains("too few busy samples"), "{why}");
        assert!(why.contains("receiver sink"), "{why}");

        let mut input = one_layer(3_000.0);
        input.stages[5].raw_ns_per_message = 50_000.0;
        let why = project(&input).unsupported.unwrap();
        assert!(why.contains("preemption"), "{why}");

        let mut input = one_layer(3_000.0);
        input.verified = false;
        assert!(project(&input).mbit_s.is_none());
        let mut input = one_layer(0.0);
        input.verified = true;
        assert!(project(&input).mbit_s.is_none());
        // A preempted stage that does not set the bound does not matter.
        let mut input = one_layer(3_000.0);
        input.stages[1].raw_ns_per_message = 90_000.0;
        input.stages[1].rounds = 1;
        assert!(project(&input).mbit_s.is_some());
    }

    #[test]
    fn the_line_and_cpu_bounds_need_no_samples() {
        let mut input = one_layer(0.5);
        for s in &mut input.stages {
            s.rounds = 0;
        }
        input.line_messages_per_s = Some(10.0);
        let p = project(&input);
        assert_eq!(p.bound, "line");
        assert!(p.mbit_s.is_some());
    }
}
