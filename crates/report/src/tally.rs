//! Warnings as a page shows them: grouped by kind (their text with the
//! numbers blanked, as the lab's run tally groups `connlab run`'s), each
//! kind said once with its count and the range of its numbers, its
//! instances folded under it sorted by value (numerically: 1.8, 2.1, 11.4
//! ms, not as text), and routine notes (a shard that woke late and caught
//! up in the warm-up) set apart, folded, from the warnings that matter.

use crate::export::{Block, Item, List};
use connlab_lab::warning_text::{pieces, shape, value_index, Piece};

/// Texts of notes that are routine, not a problem: a kind whose text
/// holds one of these is listed apart, folded.
const ROUTINE: &[&str] = &["caught up"];

/// One warning and the points (or runs) that raised it.
struct Instance {
    text: String,
    pieces: Vec<Piece>,
    points: Vec<String>,
}

impl Instance {
    fn value(&self) -> Option<f64> {
        let numbers: Vec<f64> = self
            .pieces
            .iter()
            .filter_map(|p| match p {
                Piece::Number(_, v) => Some(*v),
                Piece::Text(_) => None,
            })
            .collect();
        value_index(&self.pieces).and_then(|i| numbers.get(i).copied())
    }
}

/// Warnings of one shape.
struct Kind {
    shape: String,
    instances: Vec<Instance>,
}

impl Kind {
    /// The kind in one text: each number that differs between instances
    /// as its range, `lo–hi` (lowest and highest by value).
    fn text(&self) -> String {
        let Some(first) = self.instances.first() else {
            return String::new();
        };
        let mut k = 0;
        let mut out = String::new();
        for p in &first.pieces {
            match p {
                Piece::Text(t) => out.push_str(t),
                Piece::Number(..) => {
                    let values: Vec<(&str, f64)> = self
                        .instances
                        .iter()
                        .filter_map(|i| {
                            i.pieces
                                .iter()
                                .filter_map(|p| match p {
                                    Piece::Number(s, v) => Some((s.as_str(), *v)),
                                    Piece::Text(_) => None,
                                })
                                .nth(k)
                        })
                        .collect();
                    let lo = values.iter().min_by(|a, b| a.1.total_cmp(&b.1));
                    let hi = values.iter().max_by(|a, b| a.1.total_cmp(&b.1));
                    match (lo, hi) {
                        (Some(lo), Some(hi)) if lo.0 != hi.0 => {
                            out.push_str(&format!("{}–{}", lo.0, hi.0));
                        }
                        (Some(one), _) => out.push_str(one.0),
                        _ => out.push('#'),
                    }
                    k += 1;
                }
            }
        }
        out
    }

    /// Points (or runs) that raised any of the kind, distinct.
    fn points(&self) -> usize {
        crate::distinct(self.instances.iter().flat_map(|i| i.points.iter().cloned())).len()
    }

    /// Times raised: once per point that raised each instance.
    fn count(&self) -> usize {
        self.instances.iter().map(|i| i.points.len().max(1)).sum()
    }

    fn routine(&self) -> bool {
        ROUTINE.iter().any(|r| self.shape.contains(r))
    }

    /// The kind's blocks: one line when it was raised once, else its
    /// counted line folding every instance, largest value first.
    fn blocks(mut self) -> Vec<Block> {
        let count = self.count();
        let points = self.points();
        let text = self.text();
        self.instances.sort_by(|a, b| match (a.value(), b.value()) {
            (Some(x), Some(y)) => y.total_cmp(&x),
            (Some(_), None) => std::cmp::Ordering::Less,
            (None, Some(_)) => std::cmp::Ordering::Greater,
            (None, None) => std::cmp::Ordering::Equal,
        });
        let item = |i: &Instance| Item {
            text: i.text.clone(),
            small: (!i.points.is_empty()).then(|| format!("({})", i.points.join(", "))),
        };
        if self.instances.len() == 1 && count <= 1 {
            return vec![Block::List(List {
                class: Some("warnings"),
                items: self.instances.iter().map(item).collect(),
                ..List::default()
            })];
        }
        let times = if count == 1 {
            "once".into()
        } else {
            format!("{count} times")
        };
        let on = if points == 0 {
            String::new()
        } else {
            format!(" on {points} point{}", if points == 1 { "" } else { "s" })
        };
        let order =
            if self.instances.len() > 1 && self.instances.iter().any(|i| i.value().is_some()) {
                ", largest value first"
            } else {
                ""
            };
        vec![Block::Details {
            summary: format!("{text} — {times}{on}{order}"),
            blocks: vec![Block::List(List {
                class: Some("warnings"),
                items: self.instances.iter().map(item).collect(),
                ..List::default()
            })],
        }]
    }
}

/// Groups `(warning, points that raised it)` by kind, in order of first
/// appearance.
fn kinds(warnings: impl IntoIterator<Item = (String, Vec<String>)>) -> Vec<Kind> {
    let mut kinds: Vec<Kind> = Vec::new();
    for (text, points) in warnings {
        let pieces = pieces(&text);
        let shape = shape(&text);
        let instance = Instance {
            text,
            pieces,
            points,
        };
        match kinds.iter_mut().find(|k| k.shape == shape) {
            Some(k) => k.instances.push(instance),
            None => kinds.push(Kind {
                shape,
                instances: vec![instance],
            }),
        }
    }
    kinds
}

/// The warnings section: a heading, a line that counts them, each kind of
/// real warning once (most raised first) with its instances folded, then
/// the routine notes in one folded group. `points` names what raised them
/// (`points`, `runs`).
pub(crate) fn blocks(
    warnings: impl IntoIterator<Item = (String, Vec<String>)>,
    what: &str,
) -> Vec<Block> {
    let mut blocks = vec![Block::Heading("Warnings".into())];
    blocks.extend(body(warnings, what));
    blocks
}

/// [`blocks`] without the heading.
pub(crate) fn body(
    warnings: impl IntoIterator<Item = (String, Vec<String>)>,
    what: &str,
) -> Vec<Block> {
    let (mut routine, mut real): (Vec<Kind>, Vec<Kind>) =
        kinds(warnings).into_iter().partition(Kind::routine);
    real.sort_by_key(|k| std::cmp::Reverse(k.count()));
    routine.sort_by_key(|k| std::cmp::Reverse(k.count()));
    let count = |ks: &[Kind]| ks.iter().map(Kind::count).sum::<usize>();
    let (n_real, n_routine) = (count(&real), count(&routine));
    let mut blocks = Vec::new();
    if n_real + n_routine == 0 {
        blocks.push(Block::Note("None.".into()));
        return blocks;
    }
    let mut line = format!(
        "{n_real} warning{} of {} kind{}",
        if n_real == 1 { "" } else { "s" },
        real.len(),
        if real.len() == 1 { "" } else { "s" }
    );
    if n_routine > 0 {
        line.push_str(&format!(
            ", and {n_routine} routine note{} (not problems, folded below)",
            if n_routine == 1 { "" } else { "s" }
        ));
    }
    line.push_str(&format!(
        ". Each kind is said once with the range of its numbers and how many {what} raised it; unfold it for every instance."
    ));
    blocks.push(Block::Note(line));
    for k in real {
        blocks.extend(k.blocks());
    }
    if !routine.is_empty() {
        blocks.push(Block::Details {
            summary: format!(
                "Routine notes: {n_routine} (a shard that woke late and caught up in the warm-up, and the like)"
            ),
            blocks: routine.into_iter().flat_map(Kind::blocks).collect(),
        });
    }
    blocks
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::export::{render_blocks, Format};

    fn woke(ms: &str, point: &str) -> (String, Vec<String>) {
        (
            format!("shard 1/2: this shard woke {ms} ms after --start-at; its schedule kept the common start and its first sends (in the warm-up) caught up"),
            vec![point.to_string()],
        )
    }

    #[test]
    fn a_kind_is_counted_ranged_and_sorted_by_value_not_text() {
        let lag = |us: &str, p: &str| {
            (
                format!("shard 1/2: send lag p99 {us} us is above a tenth"),
                vec![p.to_string()],
            )
        };
        let w = vec![
            lag("1.8", "a"),
            lag("11.4", "b"),
            lag("19.1", "c"),
            lag("2.1", "d"),
            ("3 request errors".to_string(), vec!["e".to_string()]),
            woke("5", "a"),
            woke("12", "b"),
        ];
        let h = render_blocks(blocks(w, "points"), Format::HTML);
        assert!(
            h.contains("<summary>shard 1/2: send lag p99 1.8–19.1 us is above a tenth — 4 times on 4 points, largest value first</summary>"),
            "{h}"
        );
        let order: Vec<usize> = ["19.1 us", "11.4 us", "2.1 us", "1.8 us"]
            .iter()
            .map(|v| h.find(v).unwrap_or(usize::MAX))
            .collect();
        assert!(order.windows(2).all(|w| w[0] < w[1]), "{order:?} {h}");
        assert!(
            h.contains("<li>3 request errors <small>(e)</small></li>"),
            "{h}"
        );
        // Routine notes come last, folded apart.
        let routine = h.find("<summary>Routine notes: 2").unwrap_or(0);
        assert!(
            routine > h.find("request errors").unwrap_or(usize::MAX),
            "{h}"
        );
        assert!(h.contains("woke 5–12 ms"), "{h}");
        assert!(
            h.contains("5 warnings of 2 kinds, and 2 routine notes"),
            "{h}"
        );
    }

    #[test]
    fn no_warnings_says_none() {
        let m = render_blocks(blocks(Vec::new(), "points"), Format::MARKDOWN);
        assert!(m.contains("## Warnings\n\nNone.\n"), "{m}");
    }
}
