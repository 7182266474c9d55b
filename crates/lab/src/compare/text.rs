//! A comparison in words: the verdict sentences, ratios, lists and causes
//! as `connlab run` prints them.

use super::{causes, Better, Cause, Comparison, RowComparison, Standing};

/// A ratio in words: `1.9x`, `0.52x`.
pub fn ratio_text(r: f64) -> String {
    if !r.is_finite() {
        "-".into()
    } else if r >= 10.0 {
        format!("{r:.0}x")
    } else {
        format!("{r:.2}x")
    }
}

/// An interval's coverage in words: `95%`, `75%`.
pub fn coverage_text(c: f64) -> String {
    format!("{:.0}%", c * 100.0)
}

/// A list in words: `a`, `a and b`, `a, b and c`.
fn words(items: &[&str]) -> String {
    match items {
        [] => String::new(),
        [a] => (*a).to_string(),
        [rest @ .., last] => format!("{} and {last}", rest.join(", ")),
    }
}

fn bytes_text(b: f64) -> String {
    if b.abs() >= 1024.0 * 1024.0 {
        format!("{:.1} MiB", b / (1024.0 * 1024.0))
    } else {
        format!("{:.1} KiB", b / 1024.0)
    }
}

/// The verdict sentences of a comparison.
pub(super) fn verdict(c: &Comparison) -> Vec<String> {
    let Some(b) = c.best else {
        return vec!["no row was measured: nothing to compare".into()];
    };
    let best = &c.rows[b];
    let rounds = best.primary.map_or(0, |f| f.n);
    let mut out = Vec::new();
    let word = match c.better {
        Better::Lower => "lowest",
        Better::Higher => "highest",
    };
    let ties: Vec<&str> = c
        .rows
        .iter()
        .enumerate()
        .filter(|(i, r)| *i == b || r.standing == Standing::TiesBest)
        .map(|(_, r)| r.label.as_str())
        .collect();
    if ties.len() > 1 {
        out.push(format!(
            "{} tie for the {word} {} (over {rounds} repetitions, the interval of each one's per-round ratio to {} includes 1)",
            words(&ties),
            c.metric,
            best.label
        ));
    } else {
        out.push(format!("{} has the {word} {}", best.label, c.metric));
    }
    let differ: Vec<String> = c
        .rows
        .iter()
        .filter(|r| r.standing == Standing::Differs)
        .map(|r| {
            let ci = r.ratio_ci.map_or(String::new(), |(lo, hi)| {
                format!(
                    " ({} interval {}-{})",
                    coverage_text(r.ratio_ci_coverage.unwrap_or(c.confidence)),
                    ratio_text(lo),
                    ratio_text(hi)
                )
            });
            format!(
                "{} at {} {}{ci}",
                r.label,
                r.ratio_to_best.map_or("-".into(), ratio_text),
                possessive(&best.label)
            )
        })
        .collect();
    if !differ.is_empty() {
        out.push(format!(
            "these differ (their ratio intervals lie clear of 1): {}",
            differ.join("; ")
        ));
    }
    let unjudged: Vec<&str> = c
        .rows
        .iter()
        .filter(|r| r.standing == Standing::Unjudged)
        .map(|r| r.label.as_str())
        .collect();
    if !unjudged.is_empty() {
        out.push(format!(
            "{} cannot be judged: fewer than two valid rounds paired with the best (use --repetitions 3 or more)",
            words(&unjudged)
        ));
    }
    let missing: Vec<&str> = c
        .rows
        .iter()
        .filter(|r| r.standing == Standing::NotMeasured)
        .map(|r| r.label.as_str())
        .collect();
    if !missing.is_empty() {
        out.push(format!("{} gave no result", words(&missing)));
    }
    out.extend(explanations(c));
    out
}

/// What dominates each row's difference from the best, and what a tie
/// costs: the verdict's lines after its headline.
pub(super) fn explanations(c: &Comparison) -> Vec<String> {
    let Some(b) = c.best else {
        return Vec::new();
    };
    let best = &c.rows[b];
    let mut out = Vec::new();
    for r in &c.rows {
        if r.standing != Standing::Differs && r.standing != Standing::TiesBest {
            continue;
        }
        let mut parts: Vec<String> = r
            .causes
            .iter()
            .map(|k| cause_text(k, &r.label, &best.label))
            .collect();
        if r.standing == Standing::TiesBest {
            // A tie needs no explanation unless it costs more to reach.
            parts.retain(|p| !p.starts_with("no server work"));
            if parts.is_empty() {
                continue;
            }
            out.push(format!(
                "{} ties, but at a cost: {}",
                r.label,
                parts.join("; ")
            ));
        } else if !parts.is_empty() {
            out.push(format!(
                "what dominates for {}: {}",
                r.label,
                parts.join("; ")
            ));
        }
    }
    // The best may itself cost more than a row it ties with: name the
    // cheapest tie (least server CPU per request).
    let cheapest = c
        .rows
        .iter()
        .filter(|r| r.standing == Standing::TiesBest)
        .min_by(|a, b| {
            let cpu = |r: &RowComparison| r.cpu_us_per_request.map_or(f64::INFINITY, |f| f.median);
            cpu(a).total_cmp(&cpu(b))
        });
    if let Some(r) = cheapest {
        let parts: Vec<String> = causes(best, r)
            .iter()
            .filter(|k| !matches!(k, Cause::NotServerWork))
            .map(|k| cause_text(k, &best.label, &r.label))
            .collect();
        if !parts.is_empty() {
            out.push(format!(
                "{} is best, but at a cost against {}: {}",
                best.label,
                r.label,
                parts.join("; ")
            ));
        }
    }
    out
}

/// One sentence per row against the best, in ranking order: how much
/// faster the best was (or that the two tie, or why it cannot be said),
/// with the interval of the per-round ratio, whose coverage is named when
/// it falls short of the one asked.
pub(super) fn lines(c: &Comparison) -> Vec<String> {
    let Some(b) = c.best else {
        return Vec::new();
    };
    let best = &c.rows[b].label;
    let (verb, what) = match c.better {
        Better::Lower => ("answered", "faster than"),
        Better::Higher => ("served", "more requests per second than"),
    };
    c.ranking
        .iter()
        .filter(|i| **i != b)
        .map(|&i| {
            let r = &c.rows[i];
            // How many times better the best was: the ratio to the best
            // turned around where higher is better.
            let factor = |x: f64| match c.better {
                Better::Lower => x,
                Better::Higher => 1.0 / x,
            };
            let interval = r.ratio_ci.map(|(lo, hi)| {
                let (a, b) = (factor(lo), factor(hi));
                (a.min(b), a.max(b))
            });
            let times = r.ratio_to_best.map(factor);
            let bracket = match (times, interval) {
                (Some(t), Some((lo, hi))) => {
                    format!(
                        "{} [{}-{}]",
                        ratio_text(t),
                        short_ratio(lo),
                        short_ratio(hi)
                    )
                }
                _ => String::new(),
            };
            let coverage = r
                .ratio_ci_coverage
                .filter(|cov| *cov + 1e-9 < c.confidence)
                .map_or(String::new(), |cov| {
                    format!(
                        " ({} interval: {} paired rounds)",
                        coverage_text(cov),
                        r.paired_rounds
                    )
                });
            match r.standing {
                Standing::Differs => {
                    format!("{best} {verb} {bracket} {what} {}{coverage}", r.label)
                }
                Standing::TiesBest => format!(
                    "{} ties {best}: {bracket}, an interval that includes 1{coverage}",
                    r.label
                ),
                Standing::Unjudged => format!(
                    "{} against {best}: cannot be judged, fewer than two valid rounds paired",
                    r.label
                ),
                Standing::NotMeasured | Standing::Best => {
                    format!("{}: no valid run, nothing to compare", r.label)
                }
            }
        })
        .collect()
}

/// A ratio without its `x`, as an interval's end: `1.32`, `14`.
fn short_ratio(r: f64) -> String {
    ratio_text(r).trim_end_matches('x').to_string()
}

/// `label's`, or `label'` for a label ending in s (`threads'`).
fn possessive(label: &str) -> String {
    if label.ends_with('s') {
        format!("{label}'")
    } else {
        format!("{label}'s")
    }
}

/// One cause in words of row `row`, `reference` naming the row it is
/// measured against. Only the polling engines, which scan every descriptor
/// on each call, have their CPU per wake-up called a scan cost; another
/// row's (the processes engine's forks and context switches) is not.
fn cause_text(cause: &Cause, row: &str, reference: &str) -> String {
    let reference = possessive(reference);
    let scans = matches!(row, "select" | "poll");
    match cause {
        Cause::ScanCost {
            cpu_ratio,
            us_per_wakeup,
            best_us_per_wakeup,
        } => format!(
            "{}: {} {reference} server CPU per request with no more wake-ups, so {us_per_wakeup:.1} us of CPU per wake-up against {best_us_per_wakeup:.1} us",
            if scans { "scan cost" } else { "CPU per wake-up" },
            ratio_text(*cpu_ratio)
        ),
        Cause::WakeUps {
            per_request,
            best_per_request,
            cpu_ratio,
        } => {
            let cpu = if cpu_ratio.is_finite() && *cpu_ratio >= 1.0 {
                format!(
                    ", and {} {reference} server CPU per request",
                    ratio_text(*cpu_ratio)
                )
            } else {
                String::new()
            };
            format!("wake-ups: {per_request:.2} per request against {best_per_request:.2}{cpu}")
        }
        Cause::Memory { bytes, best_bytes } => format!(
            "memory per connection: {} against {}",
            bytes_text(*bytes),
            bytes_text(*best_bytes)
        ),
        Cause::NotServerWork => format!(
            "no server work: its CPU per request, wake-ups and memory per connection are close to {reference}, so the cause lies elsewhere (scheduling, the client, the network path)"
        ),
    }
}
