//! The validity section every report shows: how many points passed their
//! gates, each invalid point with the gates it failed (no verdict rests on
//! them), and the A/A control's noise floor.

use crate::claims::Noise;
use crate::export::{Block, Cell, Table};
use connlab_lab::validity::{failures_by_gate, Validity, GATE_NAMES};
use std::fmt::Write as _;

/// The points of a report as their gates left them.
#[derive(Clone, Debug, Default)]
pub(crate) struct Summary {
    /// Points with a validity record.
    pub(crate) checked: usize,
    /// Points measured before gates existed.
    pub(crate) unchecked: usize,
    /// The invalid points: id and record.
    pub(crate) invalid: Vec<(String, Validity)>,
    /// Invalid points per gate.
    pub(crate) by_gate: Vec<(String, usize)>,
    /// Valid points that took more than one attempt.
    pub(crate) retried: usize,
    /// The gates the records hold, in [`GATE_NAMES`] order.
    pub(crate) gates_seen: Vec<&'static str>,
    /// What the kind measures one by one: `runs` for pipeline sweeps
    /// (empty: `points`).
    pub(crate) unit: &'static str,
}

impl Summary {
    /// Sums up `(id, record)` pairs.
    pub(crate) fn of<'a>(
        points: impl IntoIterator<Item = (&'a str, Option<&'a Validity>)>,
    ) -> Summary {
        let mut s = Summary::default();
        let mut checked: Vec<&Validity> = Vec::new();
        for (id, v) in points {
            match v {
                None => s.unchecked += 1,
                Some(v) => {
                    checked.push(v);
                    if !v.valid {
                        s.invalid.push((id.to_string(), v.clone()));
                    } else if v.attempts > 1 {
                        s.retried += 1;
                    }
                }
            }
        }
        s.checked = checked.len();
        s.gates_seen = GATE_NAMES
            .into_iter()
            .filter(|g| checked.iter().any(|v| v.gates.iter().any(|x| x.name == *g)))
            .collect();
        s.by_gate = failures_by_gate(checked);
        s
    }

    /// The same, saying `unit` (`runs`) where it says points.
    pub(crate) fn of_unit(self, unit: &'static str) -> Summary {
        Summary { unit, ..self }
    }

    fn unit(&self) -> &'static str {
        if self.unit.is_empty() {
            "points"
        } else {
            self.unit
        }
    }

    /// The section's opening sentence; `tail` says what becomes of the
    /// invalid points (`a claim resting on them says "cannot be judged
    /// here"`).
    fn sentence(&self, tail: &str) -> String {
        let unit = self.unit();
        let one = unit.trim_end_matches('s');
        let mut out = if self.checked == 0 {
            format!("No {one} recorded validity gates (measured before they existed): every {one} is judged as measured.")
        } else {
            format!(
                "{} of {} {unit} passed every gate ({}){}.",
                self.checked - self.invalid.len(),
                self.checked,
                self.gates_seen.join(", "),
                if self.retried > 0 {
                    format!(", {} of them after measuring again", self.retried)
                } else {
                    String::new()
                }
            )
        };
        if !self.invalid.is_empty() {
            let gates: Vec<String> = self
                .by_gate
                .iter()
                .map(|(g, n)| format!("{g} {n}"))
                .collect();
            let _ = write!(
                out,
                " {} failed ({unit} per gate: {}); they are listed below, and {tail}.",
                self.invalid.len(),
                gates.join(", ")
            );
        }
        if self.checked > 0 && self.unchecked > 0 {
            let _ = write!(
                out,
                " {} measured before gates existed.",
                if self.unchecked == 1 {
                    format!("1 {one} was")
                } else {
                    format!("{} {unit} were", self.unchecked)
                }
            );
        }
        out
    }
}

/// The noise floor in a sentence, for `what` (`mean service latency`).
fn floor_sentence(noise: Option<&Noise>, what: &str) -> String {
    match noise {
        Some(n) => format!(
            "A/A control: {} measured twice in every round at every setting. The second measurement's {what} differs from the first by at most {} in {} (ratios {}): the machine's own noise. A comparison whose effect lies within it of a claim's bound cannot be judged here.",
            n.engine,
            n.short(),
            if n.n < 10 {
                format!("every one of its {} pairs", n.n)
            } else {
                format!("90 % of its {} pairs", n.n)
            },
            ratio_range(&n.ratios)
        ),
        None => "No A/A control was measured (validity.control = \"none\", or results from before it existed): verdicts rest on the intervals alone.".into(),
    }
}

fn ratio_range(r: &[f64]) -> String {
    let lo = r.iter().copied().reduce(f64::min);
    let hi = r.iter().copied().reduce(f64::max);
    match (lo, hi) {
        (Some(lo), Some(hi)) => format!("{lo:.3}–{hi:.3}"),
        _ => "none".into(),
    }
}

/// What the validity section says of a kind without an A/A control
/// (single-IP, pipeline).
pub(crate) const NO_CONTROL: &str = "This kind measures no A/A control: a comparison rests on its valid points alone, and says \"cannot be judged here\" where one side has none.";

/// What becomes of the invalid points of a report with claims.
const CLAIMS_TAIL: &str = "a claim resting on them says \"cannot be judged here\"";

/// The section's blocks; `what` names the statistic of the noise floor.
pub(crate) fn blocks(s: &Summary, noise: Option<&Noise>, what: &str) -> Vec<Block> {
    blocks_for(s, Some((noise, what)), CLAIMS_TAIL)
}

/// The section's blocks with `floor` (what stands for the noise floor:
/// [`NO_CONTROL`] for kinds without one) under the opening sentence.
pub(crate) fn blocks_with(s: &Summary, floor: &str) -> Vec<Block> {
    section(s, Some(floor.to_string()), CLAIMS_TAIL)
}

/// The section's blocks: `floor` is the A/A control's noise and what it is
/// of (`None`: a kind without a control says nothing of one), `tail` what
/// becomes of the invalid points.
pub(crate) fn blocks_for(
    s: &Summary,
    floor: Option<(Option<&Noise>, &str)>,
    tail: &str,
) -> Vec<Block> {
    section(s, floor.map(|(n, w)| floor_sentence(n, w)), tail)
}

fn section(s: &Summary, floor: Option<String>, tail: &str) -> Vec<Block> {
    let unit = s.unit();
    let mut blocks = vec![
        Block::Anchor {
            title: format!("Validity of the {unit}"),
            id: "validity".into(),
        },
        Block::Note(s.sentence(tail)),
    ];
    if let Some(floor) = floor {
        blocks.push(Block::Note(floor));
    }
    if !s.invalid.is_empty() {
        let one = unit.trim_end_matches('s');
        blocks.push(Block::Table(Table {
            id: Some("invalid".into()),
            head: vec![
                format!("invalid {one}"),
                "attempts".into(),
                "gates failed".into(),
            ],
            rows: s
                .invalid
                .iter()
                .map(|(id, v)| {
                    vec![
                        Cell::from(id.as_str()),
                        Cell::from(v.attempts.to_string()),
                        Cell::from(v.failure_text()),
                    ]
                })
                .collect(),
            labels: 1,
            text_columns: vec![2],
            ..Table::default()
        }));
    }
    blocks
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::export::render_blocks;
    use crate::Format;
    use connlab_lab::validity::Gate;

    #[test]
    fn the_section_lists_invalid_points_with_their_gates() {
        let ok = Validity::of(vec![Gate::at_most("steal", 0.01, 0.02, String::new())], 2);
        let bad = Validity::of(vec![Gate::at_most("steal", 0.073, 0.02, String::new())], 3);
        let s = Summary::of([("a", Some(&ok)), ("b", Some(&bad)), ("c", None)]);
        assert_eq!((s.checked, s.unchecked, s.retried), (2, 1, 1));
        let h = render_blocks(blocks(&s, None, "mean service latency"), Format::HTML);
        assert!(h.contains("1 of 2 points passed every gate"), "{h}");
        assert!(h.contains("steal 1"), "{h}");
        assert!(
            h.contains(
                "<td class=\"label\">b</td><td>3</td><td class=\"label\">steal 7.3 % &gt; 2 %</td>"
            ),
            "{h}"
        );
        let m = render_blocks(blocks(&s, None, "mean service latency"), Format::MARKDOWN);
        assert!(m.contains("| b | 3 | steal 7.3 % > 2 % |"), "{m}");
        assert!(m.contains("No A/A control"), "{m}");
        assert!(m.contains("passed every gate (steal)"), "{m}");
    }

    #[test]
    fn a_kind_without_a_control_says_so_in_its_own_unit() {
        let bad = Validity::of(
            vec![Gate::at_least("completion", 0.0, 1.0, String::new())],
            1,
        );
        let s = Summary::of([("r1", Some(&bad)), ("r2", None)]).of_unit("runs");
        let h = render_blocks(blocks_with(&s, NO_CONTROL), Format::HTML);
        assert!(h.contains("Validity of the runs"), "{h}");
        assert!(
            h.contains("0 of 1 runs passed every gate (completion)"),
            "{h}"
        );
        assert!(h.contains("1 run was measured before gates existed"), "{h}");
        assert!(h.contains("<th class=\"label\">invalid run</th>"), "{h}");
        assert!(h.contains("measures no A/A control"), "{h}");
        let m = render_blocks(blocks_with(&s, NO_CONTROL), Format::MARKDOWN);
        assert!(m.contains("| r1 | 1 | completion 0 % < 100 % |"), "{m}");
    }

    #[test]
    fn a_kind_without_a_control_or_claims_says_nothing_of_them() {
        let bad = Validity::of(vec![Gate::at_most("steal", 0.073, 0.02, String::new())], 3);
        let s = Summary::of([("b", Some(&bad))]);
        // A kind without a control says nothing of one, nor of claims.
        let m = render_blocks(blocks_for(&s, None, "they are left out"), Format::MARKDOWN);
        assert!(m.contains("| b | 3 | steal 7.3 % > 2 % |"), "{m}");
        assert!(m.contains("listed below, and they are left out."), "{m}");
        assert!(!m.contains("A/A") && !m.contains("claim"), "{m}");
        let h = render_blocks(blocks_for(&s, None, "they are left out"), Format::HTML);
        assert!(
            h.contains("<table id=\"invalid\">") && !h.contains("A/A"),
            "{h}"
        );
    }
}
