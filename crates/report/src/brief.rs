//! The brief table of the locality report: per engine and labelled claim,
//! the paper's number, ours with its spread and ours over the paper's.

use crate::claims::{self, ClaimCheck, ClaimResult, Verdict};
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
