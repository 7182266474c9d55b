//! What a page says first. Every page opens with an "In brief" section
//! ([`section`]): the verdicts, each with its figures (the paper's, ours,
//! the interval), then the key plot. The locality report adds its brief
//! table: per engine and labelled claim, the paper's number, ours with its
//! spread and ours over the paper's.

use crate::claims::{self, ClaimCheck, ClaimResult, Verdict};
use crate::export::{Block, Cell, Table, Tone};
use crate::table::Spread;
use crate::{claim_spread, distinct};

/// The brief table's columns: the labelled claims grouped by label (claims
/// sharing a label split its engines between them), in order of first
/// appearance.
pub(crate) fn brief_columns(claims: &[ClaimResult]) -> Vec<(String, Vec<&ClaimResult>)> {
    let mut out: Vec<(String, Vec<&ClaimResult>)> = Vec::new();
    for c in claims {
        let Some(l) = &c.label else { continue };
        match out.iter_mut().find(|(x, _)| x == l) {
            Some((_, group)) => group.push(c),
            None => out.push((l.clone(), vec![c])),
        }
    }
    out
}

/// The engines of the brief table's rows, in the experiment's order.
pub(crate) fn brief_engines<'e>(
    columns: &[(String, Vec<&ClaimResult>)],
    engines: &'e [String],
) -> Vec<&'e String> {
    engines
        .iter()
        .filter(|e| {
            columns
                .iter()
                .flat_map(|c| &c.1)
                .any(|c| c.checks.iter().any(|k| k.subject == **e))
        })
        .collect()
}

/// A column's cell for an engine: from the first claim of the group that
/// compares it.
pub(crate) fn brief_of(group: &[&ClaimResult], engine: &str) -> Option<BriefCell> {
    group
        .iter()
        .find(|c| c.checks.iter().any(|k| k.subject == engine))
        .map(|c| brief_cell(c, engine))
}

/// One cell of the brief table.
pub(crate) struct BriefCell {
    pub(crate) paper: String,
    pub(crate) ours: String,
    pub(crate) spread: Option<String>,
    pub(crate) ours_over_paper: Option<f64>,
    pub(crate) verdict: Verdict,
}

/// A claim's checks of one engine, summarised.
pub(crate) fn brief_cell(c: &ClaimResult, engine: &str) -> BriefCell {
    let checks: Vec<&ClaimCheck> = c.checks.iter().filter(|k| k.subject == engine).collect();
    let paper: Vec<String> = distinct(checks.iter().filter_map(|k| c.paper_text(k)));
    let paper_num = checks.iter().find_map(|k| k.paper);
    let ours = Spread::of(checks.iter().filter_map(|k| k.ours));
    let lo = checks
        .iter()
        .filter_map(|k| k.spread.map(|s| s.0))
        .reduce(f64::min);
    let hi = checks
        .iter()
        .filter_map(|k| k.spread.map(|s| s.1))
        .reduce(f64::max);
    let verdict = if checks.is_empty() {
        Verdict::NotJudged
    } else if let Verdict::CannotMeasure(why) = &c.verdict {
        if checks
            .iter()
            .all(|k| k.verdict == Verdict::CannotMeasure(why.clone()))
        {
            c.verdict.clone()
        } else {
            claims::overall_of(&checks)
        }
    } else {
        claims::overall_of(&checks)
    };
    let median = ours.as_ref().map(Spread::median);
    BriefCell {
        paper: match paper.len() {
            0 => "—".into(),
            1 => paper[0].clone(),
            _ => paper.join(" / "),
        },
        ours: median.map_or("—".into(), |m| c.format(m)),
        spread: lo.zip(hi).and_then(|(lo, hi)| {
            let s = claim_spread(c, lo, hi);
            (Some(&s) != median.map(|m| c.format(m)).as_ref()).then_some(s)
        }),
        ours_over_paper: median
            .zip(paper_num)
            .filter(|(o, p)| *p != 0.0 && o.signum() == p.signum())
            .map(|(o, p)| o / p),
        verdict,
    }
}

/// One verdict of a page's "In brief" section: a claim (or a comparison),
/// the paper's figure, ours, its interval and the verdict.
pub(crate) struct Headline {
    /// Where the claim is from (`Table 3`, `section 5.2`, `128 B body`).
    pub(crate) source: String,
    /// The claim in a sentence.
    pub(crate) text: String,
    /// The paper's figure (`—` where there is none).
    pub(crate) paper: String,
    /// Ours.
    pub(crate) ours: String,
    /// The interval of ours (`—` where there is none).
    pub(crate) interval: String,
    /// The verdict's CSS key (`holds`, `fails`, `noisy`, ...).
    pub(crate) key: &'static str,
    /// The verdict in a word or three (`holds`, `higher`).
    pub(crate) word: String,
    /// Why it could not be judged or measured, if so.
    pub(crate) why: Option<String>,
}

impl Headline {
    /// A headline judged by a claim's verdict.
    pub(crate) fn judged(
        source: String,
        text: String,
        paper: String,
        ours: String,
        interval: String,
        verdict: &Verdict,
    ) -> Headline {
        Headline {
            source,
            text,
            paper,
            ours,
            interval,
            key: verdict.key(),
            word: verdict.word().to_string(),
            why: match verdict {
                Verdict::CannotJudge(w) | Verdict::CannotMeasure(w) => Some(w.clone()),
                _ => None,
            },
        }
    }

    /// A claim of a sweep, its figures over its comparisons.
    pub(crate) fn of_claim(c: &ClaimResult) -> Headline {
        let (paper, ours, interval) = crate::verdicts::claim_figures(c);
        Headline::judged(
            c.source.clone(),
            c.text.clone(),
            paper,
            ours,
            interval.unwrap_or_else(|| "—".into()),
            &c.verdict,
        )
    }

    /// A claim as the reproduce index shows it.
    pub(crate) fn of_row(r: &crate::ClaimRow) -> Headline {
        Headline::judged(
            r.source.clone(),
            r.text.clone(),
            r.paper.clone(),
            r.ours.clone(),
            "—".into(),
            &r.verdict,
        )
    }
}

/// `3 claims: 2 hold, 1 does not hold`: the headlines counted by verdict,
/// the claims' verdicts in the order holds, does not hold, cannot be
/// judged, cannot be measured, not judged, other words after them.
pub(crate) fn tally_sentence(headlines: &[Headline], what: &str) -> String {
    // Each verdict's word, and its plural.
    let known = [
        ("holds", "hold"),
        ("does not hold", "do not hold"),
        ("cannot be judged here", "cannot be judged here"),
        ("cannot be measured here", "cannot be measured here"),
        ("not judged", "not judged"),
    ];
    let mut words: Vec<&str> = known.iter().map(|(w, _)| *w).collect();
    for h in headlines {
        if !words.contains(&h.word.as_str()) {
            words.push(&h.word);
        }
    }
    let parts: Vec<String> = words
        .iter()
        .filter_map(|w| {
            let n = headlines.iter().filter(|h| h.word == *w).count();
            let many = known
                .iter()
                .find(|(one, _)| one == w)
                .map_or(*w, |(_, many)| *many);
            (n > 0).then(|| format!("{n} {}", if n == 1 { w } else { many }))
        })
        .collect();
    format!(
        "Of {} {what}{}: {}.",
        headlines.len(),
        if headlines.len() == 1 { "" } else { "s" },
        parts.join(", ")
    )
}

/// The cell kept on one line when it is short (a figure, not a
/// sentence).
fn short(c: Cell) -> Cell {
    if c.text.chars().count() <= 24 {
        c.nowrap()
    } else {
        c
    }
}

/// The verdicts table of an "In brief" section: a row per headline.
pub(crate) fn verdicts_table(headlines: &[Headline]) -> Table {
    let rows = headlines
        .iter()
        .map(|h| {
            vec![
                Cell::from(h.source.as_str()).nowrap(),
                Cell::from(h.text.as_str()),
                short(Cell::from(h.paper.as_str()).tone(Tone::Paper)),
                short(Cell::from(h.ours.as_str())),
                short(Cell::from(h.interval.as_str())),
                Cell::from(h.word.as_str())
                    .tone(Tone::Verdict(h.key))
                    .small(h.why.clone()),
            ]
        })
        .collect();
    Table {
        id: Some("in-brief-verdicts".into()),
        class: Some("verdicts"),
        head: ["source", "claim", "paper", "ours", "interval", "verdict"]
            .map(String::from)
            .to_vec(),
        rows,
        labels: 2,
        text_columns: vec![5],
        ..Table::default()
    }
}

/// A page's "In brief" section: its heading, `lead` (a sentence or two,
/// when there is one), the verdicts with their figures (counted as
/// `what`s: `claim`, `comparison`), and the key plot
/// (when the format carries figures and the page has one).
pub(crate) fn section(
    lead: Vec<Block>,
    headlines: &[Headline],
    what: &str,
    plot: Option<Block>,
) -> Vec<Block> {
    let mut blocks = vec![Block::Anchor {
        title: "In brief".into(),
        id: "in-brief".into(),
    }];
    blocks.extend(lead);
    if !headlines.is_empty() {
        blocks.push(Block::Note(tally_sentence(headlines, what)));
        blocks.push(Block::Table(verdicts_table(headlines)));
    }
    blocks.extend(plot);
    blocks
}
