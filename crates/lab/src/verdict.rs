//! A claim's verdict, one type for every kind: the pipeline's and the
//! single-IP kind's own checks give it, and the report renders it (its
//! claim tables and the `connlab reproduce` index).

use serde::{Deserialize, Serialize};

/// Whether a claim holds.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Verdict {
    /// Every value it speaks of is within its bounds across our spread.
    Holds,
    /// Some value is outside; `median_holds` says whether the medians alone
    /// would have held (false where a kind does not tell).
    DoesNotHold {
        /// The medians lie within the bounds.
        median_holds: bool,
    },
    /// The claim cannot be measured on this run (a setting or feature this
    /// machine lacks), and why.
    CannotMeasure(String),
    /// The points exist, but this machine's noise could have decided the
    /// verdict: the points failed their validity gates, or the effect lies
    /// within the A/A noise of the claim's bound. Says which, with figures.
    CannotJudge(String),
    /// The experiment file gives no bounds to judge against.
    NotJudged,
}

impl Verdict {
    /// Does not hold, the medians saying nothing more.
    pub const FAILS: Verdict = Verdict::DoesNotHold {
        median_holds: false,
    };

    /// The verdict alone: `holds`, `does not hold`, `cannot be judged
    /// here`, `cannot be measured here`, `not judged`.
    pub fn word(&self) -> &'static str {
        match self {
            Verdict::Holds => "holds",
            Verdict::DoesNotHold { .. } => "does not hold",
            Verdict::CannotJudge(_) => "cannot be judged here",
            Verdict::CannotMeasure(_) => "cannot be measured here",
            Verdict::NotJudged => "not judged",
        }
    }

    /// The verdict as one word for CSV files: `holds`, `does_not_hold`,
    /// `cannot_judge_here`, `cannot_measure`, `not_judged`.
    pub fn csv_key(&self) -> &'static str {
        match self {
            Verdict::Holds => "holds",
            Verdict::DoesNotHold { .. } => "does_not_hold",
            Verdict::CannotJudge(_) => "cannot_judge_here",
            Verdict::CannotMeasure(_) => "cannot_measure",
            Verdict::NotJudged => "not_judged",
        }
    }

    /// The verdict with what qualifies it: `holds`, `does not hold`,
    /// `cannot be measured here: WHY`, ...
    pub fn text(&self) -> String {
        match self {
            Verdict::Holds => "holds".into(),
            Verdict::DoesNotHold {
                median_holds: false,
            } => "does not hold".into(),
            Verdict::DoesNotHold { median_holds: true } => {
                "does not hold across the spread (the medians do)".into()
            }
            Verdict::CannotJudge(why) => format!("cannot be judged here: {why}"),
            Verdict::CannotMeasure(why) => format!("cannot be measured here: {why}"),
            Verdict::NotJudged => "not judged: the experiment file gives no bounds".into(),
        }
    }

    /// A CSS class / machine key: `holds`, `fails`, `noisy`,
    /// `unmeasurable`, `unjudged`.
    pub fn key(&self) -> &'static str {
        match self {
            Verdict::Holds => "holds",
            Verdict::DoesNotHold { .. } => "fails",
            Verdict::CannotJudge(_) => "noisy",
            Verdict::CannotMeasure(_) => "unmeasurable",
            Verdict::NotJudged => "unjudged",
        }
    }
}

/// A verdict with what it rests on.
#[derive(Clone, Debug, PartialEq)]
pub struct Judgement {
    /// The verdict.
    pub verdict: Verdict,
    /// The values compared, or why there are none (then the same text as
    /// the verdict's reason).
    pub detail: String,
}

impl Judgement {
    /// Holds, on these values.
    pub fn holds(detail: String) -> Judgement {
        Judgement {
            verdict: Verdict::Holds,
            detail,
        }
    }

    /// Does not hold, on these values.
    pub fn does_not_hold(detail: String) -> Judgement {
        Judgement {
            verdict: Verdict::FAILS,
            detail,
        }
    }

    /// Cannot be judged here (the machine's noise), and why.
    pub fn cannot_judge(why: String) -> Judgement {
        Judgement {
            verdict: Verdict::CannotJudge(why.clone()),
            detail: why,
        }
    }

    /// Cannot be measured here, and why.
    pub fn cannot_measure(why: String) -> Judgement {
        Judgement {
            verdict: Verdict::CannotMeasure(why.clone()),
            detail: why,
        }
    }

    /// The same judgement with ` (NOTE)` after its detail (and its reason).
    pub fn noted(self, note: &str) -> Judgement {
        let verdict = match self.verdict {
            Verdict::CannotMeasure(why) => Verdict::CannotMeasure(format!("{why} ({note})")),
            Verdict::CannotJudge(why) => Verdict::CannotJudge(format!("{why} ({note})")),
            other => other,
        };
        Judgement {
            verdict,
            detail: format!("{} ({note})", self.detail),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn texts_and_keys() {
        assert_eq!(Verdict::Holds.text(), "holds");
        assert_eq!(Verdict::FAILS.text(), "does not hold");
        assert_eq!(
            Verdict::DoesNotHold { median_holds: true }.word(),
            "does not hold"
        );
        let why = Verdict::CannotMeasure("no points".into());
        assert_eq!(why.word(), "cannot be measured here");
        assert_eq!(why.text(), "cannot be measured here: no points");
        assert_eq!(why.key(), "unmeasurable");
        assert_eq!(Verdict::NotJudged.key(), "unjudged");
        let noisy = Verdict::CannotJudge("steal 7.3 % > 2 % at 4 of 6 points".into());
        assert_eq!(noisy.csv_key(), "cannot_judge_here");
        assert_eq!(
            noisy.text(),
            "cannot be judged here: steal 7.3 % > 2 % at 4 of 6 points"
        );
        assert_eq!(Verdict::FAILS.csv_key(), "does_not_hold");
    }

    #[test]
    fn a_note_reaches_the_reason_too() {
        let j = Judgement::cannot_measure("no points".into()).noted("at 1 KiB");
        assert_eq!(j.detail, "no points (at 1 KiB)");
        assert_eq!(j.verdict, Verdict::CannotMeasure(j.detail.clone()));
        let j = Judgement::holds("a < b".into()).noted("n");
        assert_eq!(
            (j.verdict, j.detail.as_str()),
            (Verdict::Holds, "a < b (n)")
        );
    }
}
