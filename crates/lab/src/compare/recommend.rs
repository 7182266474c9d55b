//! What to use, and how sure that is: the recommendation `connlab run`
//! ends with. The confidence starts high and each shortfall of the runs
//! lowers it one step (high, medium, low), saying why: fewer than five
//! repetitions (the intervals cannot reach 95 %), a run whose client missed
//! its send schedule (its latency holds client delay), runs left out for
//! failing their gates, and a best row that no other row was judged
//! against.

use super::{text::ratio_text, Better, Comparison, Standing};
use serde::{Deserialize, Serialize};

/// Fewer repetitions than this lower the confidence: with five, the
/// median's interval covers 94 % at most, with fewer far less.
pub const FULL_REPETITIONS: u32 = 5;

/// How sure a recommendation is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Confidence {
    /// At least two shortfalls, or nothing could be compared.
    Low,
    /// One shortfall.
    Medium,
    /// Enough repetitions, every run on schedule and valid.
    High,
}

impl Confidence {
    /// `low`, `medium` or `high`.
    pub fn name(self) -> &'static str {
        match self {
            Confidence::Low => "low",
            Confidence::Medium => "medium",
            Confidence::High => "high",
        }
    }

    fn lower(self) -> Confidence {
        match self {
            Confidence::High => Confidence::Medium,
            _ => Confidence::Low,
        }
    }
}

/// How the runs behind a comparison went, as far as the confidence cares.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Caveats {
    /// Repetitions asked for (rounds).
    pub repetitions: u32,
    /// Runs made, retries included.
    pub runs: usize,
    /// Runs whose client missed its send schedule.
    pub schedule_misses: usize,
    /// Runs left out of the comparison (invalid, failed or interrupted).
    pub left_out: usize,
}

/// What to use and how sure that is.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Recommendation {
    /// The recommendation in one sentence.
    pub text: String,
    /// How sure it is.
    pub confidence: Confidence,
    /// Why it is not higher (empty when high).
    pub reasons: Vec<String>,
}

impl Recommendation {
    /// `recommendation: ... (confidence medium: ...)`, one line.
    pub fn line(&self) -> String {
        let why = if self.reasons.is_empty() {
            String::new()
        } else {
            format!(": {}", self.reasons.join("; "))
        };
        format!(
            "recommendation: {} (confidence {}{why})",
            self.text,
            self.confidence.name()
        )
    }
}

/// The recommendation of `c`, its confidence lowered by `caveats`.
pub fn recommend(c: &Comparison, caveats: &Caveats) -> Recommendation {
    let Some(b) = c.best else {
        return Recommendation {
            text: "none: no row has a valid run".into(),
            confidence: Confidence::Low,
            reasons: vec!["nothing was measured validly".into()],
        };
    };
    let best = &c.rows[b];
    let word = match c.better {
        Better::Lower => "lowest",
        Better::Higher => "highest",
    };
    let ties: Vec<&str> = c
        .ranking
        .iter()
        .map(|&i| &c.rows[i])
        .filter(|r| r.standing == Standing::TiesBest)
        .map(|r| r.label.as_str())
        .collect();
    let text = if ties.is_empty() {
        let runner_up = c
            .ranking
            .iter()
            .map(|&i| &c.rows[i])
            .find(|r| r.standing == Standing::Differs);
        match runner_up.and_then(|r| r.ratio_to_best.map(|x| (r, x))) {
            Some((r, x)) => {
                let x = match c.better {
                    Better::Lower => x,
                    Better::Higher => 1.0 / x,
                };
                format!(
                    "{}: the {word} {}, {} better than the next, {}",
                    best.label,
                    c.metric,
                    ratio_text(x),
                    r.label
                )
            }
            None => format!("{}: the {word} {}", best.label, c.metric),
        }
    } else {
        // Among rows that tie, the cheapest in server CPU is the pick.
        let cheapest = std::iter::once(best)
            .chain(c.rows.iter().filter(|r| r.standing == Standing::TiesBest))
            .min_by(|x, y| {
                let cpu = |r: &super::RowComparison| {
                    r.cpu_us_per_request.map_or(f64::INFINITY, |f| f.median)
                };
                cpu(x).total_cmp(&cpu(y))
            })
            .unwrap_or(best);
        let mut all = vec![best.label.as_str()];
        all.extend(ties);
        let cost = if cheapest.cpu_us_per_request.is_some() {
            format!("; {} uses the least server CPU per request", cheapest.label)
        } else {
            String::new()
        };
        format!(
            "{} (they tie for the {word} {}){cost}",
            all.join(" or "),
            c.metric
        )
    };
    let mut confidence = Confidence::High;
    let mut reasons = Vec::new();
    if caveats.repetitions < FULL_REPETITIONS {
        confidence = confidence.lower();
        reasons.push(format!(
            "{} repetitions, fewer than {FULL_REPETITIONS}, so the intervals cover less than 95 %",
            caveats.repetitions
        ));
    }
    if caveats.schedule_misses > 0 {
        confidence = confidence.lower();
        reasons.push(format!(
            "the client missed its send schedule in {} of {} runs, so their latency holds client delay",
            caveats.schedule_misses, caveats.runs
        ));
    }
    if caveats.left_out > 0 {
        confidence = confidence.lower();
        reasons.push(format!(
            "{} of {} runs failed their gates and were left out",
            caveats.left_out, caveats.runs
        ));
    }
    let judged = c
        .rows
        .iter()
        .any(|r| matches!(r.standing, Standing::Differs | Standing::TiesBest));
    if !judged {
        confidence = Confidence::Low;
        reasons.push("no other row could be judged against it".into());
    }
    Recommendation {
        text,
        confidence,
        reasons,
    }
}
