//! The text of a warning, taken apart: its words and its numbers, so that
//! warnings of one kind (the same text with other numbers) are grouped and
//! counted once, and their instances sorted by value. `connlab run`'s tally
//! ([`crate::tally`]) and the pages' warning lists share it.

/// Units a number may carry; the first number with one is a warning's
/// value (the one its instances are sorted by).
const UNITS: &[&str] = &["ms", "us", "µs", "s", "%", "x", "×", "KiB", "MiB", "B"];

/// A piece of a warning's text: words, or a number with its value.
#[derive(Clone, Debug, PartialEq)]
pub enum Piece {
    /// Words (and anything not a number).
    Text(String),
    /// A number as written, and its value.
    Number(String, f64),
}

/// `text` cut into words and numbers. A number is a run of digits (with
/// `,` grouping and one `.`) not glued to a letter before it: `p99` and
/// `http2` are words.
pub fn pieces(text: &str) -> Vec<Piece> {
    let chars: Vec<char> = text.chars().collect();
    let mut out: Vec<Piece> = Vec::new();
    let mut word = String::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let glued = i > 0 && (chars[i - 1].is_alphanumeric() || chars[i - 1] == '_');
        if c.is_ascii_digit() && !glued {
            let mut j = i;
            while j < chars.len()
                && (chars[j].is_ascii_digit()
                    || (matches!(chars[j], ',' | '.')
                        && chars.get(j + 1).is_some_and(char::is_ascii_digit)))
            {
                j += 1;
            }
            let s: String = chars[i..j].iter().collect();
            // A minus sign right before makes it negative.
            let negative = word.ends_with('-') && {
                let before = word.chars().rev().nth(1);
                before.is_none_or(|b| b == ' ' || b == '(')
            };
            if negative {
                word.pop();
            }
            if !word.is_empty() {
                out.push(Piece::Text(std::mem::take(&mut word)));
            }
            let v: f64 = s.replace(',', "").parse().unwrap_or(f64::NAN);
            let s = if negative { format!("-{s}") } else { s };
            out.push(Piece::Number(s, if negative { -v } else { v }));
            i = j;
        } else {
            word.push(c);
            i += 1;
        }
    }
    if !word.is_empty() {
        out.push(Piece::Text(word));
    }
    out
}

/// The shape of a warning: its text with every number blanked.
pub fn shape(text: &str) -> String {
    pieces(text)
        .iter()
        .map(|p| match p {
            Piece::Text(t) => t.as_str(),
            Piece::Number(..) => "#",
        })
        .collect()
}

/// The index, among a warning's numbers, of its value: the first that
/// carries a unit, else the first (none without numbers).
pub fn value_index(p: &[Piece]) -> Option<usize> {
    let numbers: Vec<usize> = (0..p.len())
        .filter(|i| matches!(p[*i], Piece::Number(..)))
        .collect();
    let with_unit = numbers.iter().position(|i| match p.get(i + 1) {
        Some(Piece::Text(t)) => {
            let t = t.trim_start();
            UNITS.iter().any(|u| {
                t.strip_prefix(u)
                    .is_some_and(|rest| !rest.starts_with(char::is_alphanumeric))
            })
        }
        _ => false,
    });
    with_unit.or(if numbers.is_empty() { None } else { Some(0) })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_blanked_but_words_with_digits_kept() {
        assert_eq!(
            shape("shard 1/4: send lag p99 1,234.5 us above 100 us"),
            "shard #/#: send lag p99 # us above # us"
        );
        assert_eq!(shape("ratio -0.5 x"), "ratio # x");
        assert_eq!(shape("http2 ok"), "http2 ok");
    }

    #[test]
    fn the_value_is_the_first_number_with_a_unit() {
        let p = pieces("shard 2/4 woke 12.5 ms late");
        let i = value_index(&p).unwrap();
        let numbers: Vec<f64> = p
            .iter()
            .filter_map(|x| match x {
                Piece::Number(_, v) => Some(*v),
                Piece::Text(_) => None,
            })
            .collect();
        assert_eq!(numbers[i], 12.5);
    }
}
