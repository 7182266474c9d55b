//! The index page of `connlab reproduce`: one section per paper, one link per
//! experiment report, and one row per table, figure and claim with the
//! paper's value, ours and the verdict. Every experiment kind turns its own
//! checks into [`ClaimRow`]s; this module only lays them out.

use crate::export::{self, Block, Cell, Page, Report, Table, Tone};
use crate::{Format, ReportError, Verdict};
use serde::{Deserialize, Serialize};

/// CSS class of a verdict on the index.
fn class(v: &Verdict) -> &'static str {
    match v {
        Verdict::Holds => "holds",
        Verdict::DoesNotHold { .. } => "fails",
        Verdict::CannotJudge(_) => "noisy",
        Verdict::CannotMeasure(_) => "unmeasured",
        Verdict::NotJudged => "compared",
    }
}

/// The claims of an index counted by verdict (tables aside).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Tally {
    /// Hold.
    pub holds: usize,
    /// Do not hold (on valid points, beyond the machine's noise).
    pub fails: usize,
    /// Cannot be judged here: invalid points, or within the noise.
    pub cannot_judge: usize,
    /// Cannot be measured here.
    pub cannot_measure: usize,
    /// Context rows without bounds.
    pub not_judged: usize,
}

impl Tally {
    /// `13 claims hold, 2 do not, 20 cannot be judged here, 7 cannot be
    /// measured here`.
    pub fn sentence(&self) -> String {
        format!(
            "{} claims hold, {} do not, {} cannot be judged here, {} cannot be measured here",
            self.holds, self.fails, self.cannot_judge, self.cannot_measure
        )
    }
}

/// One row of the index: a table, a figure or a claim of a paper.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ClaimRow {
    /// Where in the paper: `Table 3`, `Figure 6`, `section 5.2`.
    pub source: String,
    /// The claim or the table in our words.
    pub text: String,
    /// The paper's value, as text (`18.0x`, `217.6 us`, or `shape only`).
    pub paper: String,
    /// Ours, as text (`19.1x [17-21x]`).
    pub ours: String,
    /// The verdict (its text says why when the claim cannot be measured).
    pub verdict: Verdict,
    /// What the verdict rests on: the bounds, the rows compared.
    pub reason: String,
    /// A table compared cell by cell rather than a claim: absolute values
    /// from other hardware, shown and not judged.
    pub table: bool,
}

impl ClaimRow {
    /// The verdict as the index prints it.
    pub fn verdict_text(&self) -> String {
        if self.table {
            "compared cell by cell, not judged".into()
        } else {
            self.verdict.text()
        }
    }
}

/// One experiment of a paper on the index.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct IndexExperiment {
    /// The experiment's name (its results directory).
    pub name: String,
    /// Its title.
    pub title: String,
    /// Link to its report, relative to the index page.
    pub report: String,
    /// How far it ran: `45 of 45 points`, or the failure.
    pub status: String,
    /// Whether the sweep finished without error.
    pub ok: bool,
    /// Its tables, figures and claims.
    pub rows: Vec<ClaimRow>,
    /// Its points that failed a validity gate, counted per gate.
    pub invalid_by_gate: Vec<(String, usize)>,
    /// Its invalid points, of how many checked.
    pub invalid_points: (usize, usize),
    /// Its A/A control's noise floor in words, if it measured one.
    pub noise_floor: Option<String>,
}

impl IndexExperiment {
    /// `; 3 of 40 points invalid (...); A/A floor ±4.1 %`, empty when there
    /// is nothing to say.
    fn validity_note(&self) -> String {
        let mut parts = Vec::new();
        let v = self.validity_text();
        if !v.is_empty() {
            parts.push(v);
        }
        if let Some(f) = &self.noise_floor {
            parts.push(format!("A/A noise floor {f}"));
        }
        parts.iter().map(|p| format!("; {p}")).collect()
    }

    /// `3 of 40 points invalid (steal 2, foreign_cpu 1)`, or empty when
    /// every point passed.
    pub fn validity_text(&self) -> String {
        let (bad, all) = self.invalid_points;
        if bad == 0 {
            return if all > 0 {
                format!("all {all} points valid")
            } else {
                String::new()
            };
        }
        let gates: Vec<String> = self
            .invalid_by_gate
            .iter()
            .map(|(g, n)| format!("{g} {n}"))
            .collect();
        format!("{bad} of {all} points invalid ({})", gates.join(", "))
    }
}

/// One paper on the index.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct IndexPaper {
    /// Anchor id.
    pub id: String,
    /// Subject.
    pub title: String,
    /// Where the paper is.
    pub source: String,
    /// The connlab system.
    pub system: String,
    /// Its experiments.
    pub experiments: Vec<IndexExperiment>,
}

/// The whole index.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Index {
    /// Page title.
    pub title: String,
    /// What the page shows.
    pub description: String,
    /// Facts about the run: (name, value).
    pub facts: Vec<(String, String)>,
    /// The papers.
    pub papers: Vec<IndexPaper>,
}

impl Index {
    /// Counts of the claims' verdicts (tables aside).
    pub fn tally(&self) -> Tally {
        let mut t = Tally::default();
        for r in self.rows().filter(|r| !r.table) {
            match r.verdict {
                Verdict::Holds => t.holds += 1,
                Verdict::DoesNotHold { .. } => t.fails += 1,
                Verdict::CannotJudge(_) => t.cannot_judge += 1,
                Verdict::CannotMeasure(_) => t.cannot_measure += 1,
                Verdict::NotJudged => t.not_judged += 1,
            }
        }
        t
    }

    /// Invalid points of every experiment, counted per gate.
    pub fn invalid_by_gate(&self) -> Vec<(String, usize)> {
        let mut out: Vec<(String, usize)> = Vec::new();
        for e in self.papers.iter().flat_map(|p| p.experiments.iter()) {
            for (g, n) in &e.invalid_by_gate {
                match out.iter_mut().find(|(h, _)| h == g) {
                    Some(c) => c.1 += n,
                    None => out.push((g.clone(), *n)),
                }
            }
        }
        out
    }

    /// The points behind the verdicts: how many failed a gate, per gate.
    fn validity_sentence(&self) -> String {
        let (bad, all) = self
            .papers
            .iter()
            .flat_map(|p| p.experiments.iter())
            .fold((0, 0), |(b, a), e| {
                (b + e.invalid_points.0, a + e.invalid_points.1)
            });
        if all == 0 {
            return "No point recorded validity gates.".into();
        }
        if bad == 0 {
            return format!("All {all} points passed their validity gates.");
        }
        let gates: Vec<String> = self
            .invalid_by_gate()
            .iter()
            .map(|(g, n)| format!("{g} {n}"))
            .collect();
        format!(
            "{bad} of {all} points failed a validity gate (points per gate: {}); claims resting on them say \"cannot be judged here\".",
            gates.join(", ")
        )
    }

    fn rows(&self) -> impl Iterator<Item = &ClaimRow> {
        self.papers
            .iter()
            .flat_map(|p| p.experiments.iter().flat_map(|e| e.rows.iter()))
    }

    /// Renders the index (HTML, Markdown, or CSV with one row per claim).
    /// Nothing here can fail (every format is written to memory); were it
    /// to, the text is the error's.
    pub fn render(&self, format: Format) -> String {
        export::export(self, format).unwrap_or_else(|e| e.to_string())
    }

    /// In brief, a row per experiment: its report, how far it ran and its
    /// claims counted by verdict.
    fn experiments_table(&self) -> Block {
        let rows = self
            .papers
            .iter()
            .flat_map(|p| p.experiments.iter())
            .map(|e| {
                let count = |f: fn(&Verdict) -> bool| {
                    let n = e.rows.iter().filter(|r| !r.table && f(&r.verdict)).count();
                    Cell::from(if n == 0 {
                        "—".to_string()
                    } else {
                        n.to_string()
                    })
                };
                vec![
                    Cell::from(e.title.as_str()).link(Some(e.report.clone())),
                    Cell::from(e.status.as_str()),
                    count(|v| matches!(v, Verdict::Holds)).tone(Tone::Verdict("holds")),
                    count(|v| matches!(v, Verdict::DoesNotHold { .. }))
                        .tone(Tone::Verdict("fails")),
                    count(|v| matches!(v, Verdict::CannotJudge(_))).tone(Tone::Verdict("noisy")),
                    count(|v| matches!(v, Verdict::CannotMeasure(_)))
                        .tone(Tone::Verdict("unmeasured")),
                ]
            })
            .collect();
        Block::Table(Table {
            id: Some("experiments".into()),
            head: [
                "experiment",
                "ran",
                "hold",
                "do not hold",
                "cannot be judged here",
                "cannot be measured here",
            ]
            .map(String::from)
            .to_vec(),
            rows,
            labels: 2,
            ..Table::default()
        })
    }

    /// The blocks under the title and description: the tally, the
    /// validity, the facts, then per paper its experiments, each a linked
    /// heading over its claims.
    fn blocks(&self) -> Vec<Block> {
        let mut blocks = crate::brief::section(
            vec![
                Block::Note(format!("{}.", self.tally().sentence())),
                Block::Note(self.validity_sentence()),
                self.experiments_table(),
            ],
            &[],
            "claim",
            None,
        );
        blocks.push(Block::Heading("The run".into()));
        blocks.push(Block::Facts {
            id: Some("facts"),
            facts: self.facts.clone(),
        });
        for p in &self.papers {
            blocks.push(Block::Anchor {
                title: p.title.clone(),
                id: p.id.clone(),
            });
            blocks.push(Block::Note(format!("{} · paper: {}", p.system, p.source)));
            for e in &p.experiments {
                blocks.push(Block::Subheading {
                    title: e.title.clone(),
                    link: Some(e.report.clone()),
                });
                blocks.push(Block::Note(format!(
                    "{}: {}{}",
                    e.name,
                    e.status,
                    e.validity_note()
                )));
                if e.rows.is_empty() {
                    blocks.push(Block::Note("No claims checked.".into()));
                    continue;
                }
                blocks.push(Block::Table(Table {
                    class: Some("claims"),
                    head: ["where", "claim", "paper", "ours", "verdict"]
                        .map(String::from)
                        .to_vec(),
                    rows: e.rows.iter().map(claim_cells).collect(),
                    labels: 2,
                    text_columns: vec![4],
                    ..Table::default()
                }));
            }
        }
        blocks
    }
}

/// A claim's cells: where, the claim, the paper's value, ours, and the
/// verdict coloured by its class with what it rests on under it.
fn claim_cells(r: &ClaimRow) -> Vec<Cell> {
    let class = if r.table {
        "compared"
    } else {
        class(&r.verdict)
    };
    vec![
        Cell::from(r.source.as_str()),
        Cell::from(r.text.as_str()),
        Cell::from(r.paper.as_str()),
        Cell::from(r.ours.as_str()),
        Cell::from(r.verdict_text())
            .tone(Tone::Verdict(class))
            .small((!r.reason.is_empty()).then(|| r.reason.clone())),
    ]
}

/// One CSV row: a claim of an experiment of a paper.
#[derive(Serialize)]
pub(crate) struct IndexRow {
    paper: String,
    experiment: String,
    source: String,
    claim: String,
    paper_value: String,
    ours: String,
    verdict: &'static str,
    reason: String,
}

impl Report for Index {
    type Row = IndexRow;

    fn page(&self, _: Format) -> Result<Page, ReportError> {
        Ok(Page {
            title: self.title.clone(),
            description: self.description.clone(),
            style: format!("{}{INDEX_STYLE}", crate::locality::STYLE).into(),
            viewport: false,
            blocks: self.blocks(),
        })
    }

    fn rows(&self) -> Result<Vec<IndexRow>, ReportError> {
        let mut out = Vec::new();
        for p in &self.papers {
            for e in &p.experiments {
                for r in &e.rows {
                    out.push(IndexRow {
                        paper: p.id.clone(),
                        experiment: e.name.clone(),
                        source: r.source.clone(),
                        claim: r.text.clone(),
                        paper_value: r.paper.clone(),
                        ours: r.ours.clone(),
                        verdict: if r.table {
                            "table"
                        } else {
                            r.verdict.csv_key()
                        },
                        reason: r.reason.clone(),
                    });
                }
            }
        }
        Ok(out)
    }
}

/// The index's own CSS after the reports': the claims' column widths and
/// the verdicts' colours.
const INDEX_STYLE: &str = "
table.claims{width:100%;table-layout:fixed}
table.claims td,table.claims th{overflow-wrap:anywhere}
table.claims th:nth-child(1){width:9%}table.claims th:nth-child(2){width:40%}
table.claims th:nth-child(3){width:13%}table.claims th:nth-child(4){width:17%}
table.claims th:nth-child(5){width:21%}
table.claims td.holds{color:#1a7f37;font-weight:600}
table.claims td.fails{color:#b42318;font-weight:600}
table.claims td.unmeasured,table.claims td.compared{color:#777;font-weight:normal}
table.claims td.noisy{color:#9a6700;font-weight:normal}
";

#[cfg(test)]
mod tests {
    use super::*;

    fn index() -> Index {
        let row = |verdict, reason: &str| ClaimRow {
            source: "Table 3".into(),
            text: "select grows <fast>".into(),
            paper: "18.0x".into(),
            ours: "19.1x [17-21x]".into(),
            verdict,
            reason: reason.into(),
            table: false,
        };
        Index {
            title: "T".into(),
            description: "D".into(),
            facts: vec![("matrix".into(), "quick".into())],
            papers: vec![IndexPaper {
                id: "locality".into(),
                title: "Locality".into(),
                source: "000".into(),
                system: "serve".into(),
                experiments: vec![IndexExperiment {
                    name: "locality-table3".into(),
                    title: "Table 3".into(),
                    report: "locality-table3/report.html".into(),
                    status: "15 of 15 points".into(),
                    ok: true,
                    rows: vec![
                        row(Verdict::Holds, "≥ 5×"),
                        row(
                            Verdict::CannotMeasure("rows 10,000 not in this run".into()),
                            "",
                        ),
                        row(
                            Verdict::CannotJudge("steal 7.3 % > 2 % at 4 of 6 points".into()),
                            "≥ 5×",
                        ),
                    ],
                    invalid_by_gate: vec![("steal".into(), 4)],
                    invalid_points: (4, 15),
                    noise_floor: Some("±4.1 %".into()),
                }],
            }],
        }
    }

    #[test]
    fn every_format_carries_every_row_and_verdict() {
        let i = index();
        assert_eq!(
            i.tally(),
            Tally {
                holds: 1,
                cannot_measure: 1,
                cannot_judge: 1,
                ..Tally::default()
            }
        );
        assert_eq!(i.invalid_by_gate(), vec![("steal".to_string(), 4)]);
        let h = i.render(Format::HTML);
        assert!(h.contains("href=\"locality-table3/report.html\""));
        assert!(h.contains("select grows &lt;fast&gt;"));
        assert!(h.contains("cannot be measured here: rows 10,000 not in this run"));
        let m = i.render(Format::MARKDOWN);
        assert!(
            m.contains("| Table 3 | select grows <fast> | 18.0x | 19.1x [17-21x] | holds (≥ 5×) |")
        );
        let c = i.render(Format::CSV);
        let mut r = csv::Reader::from_reader(c.as_bytes());
        let rows: Vec<csv::StringRecord> = r.records().map(Result::unwrap).collect();
        assert_eq!(rows.len(), 3);
        assert_eq!(&rows[1][6], "cannot_measure");
        assert_eq!(&rows[2][6], "cannot_judge_here");
        assert!(h.contains("4 of 15 points invalid (steal 4)"), "{h}");
        assert!(h.contains("1 cannot be judged here"), "{h}");
        assert!(m.contains("4 of 15 points failed a validity gate (points per gate: steal 4)"));
    }

    #[test]
    fn every_format_is_as_before() {
        let i = index();
        insta::assert_snapshot!("index_html", i.render(Format::HTML));
        insta::assert_snapshot!("index_markdown", i.render(Format::MARKDOWN));
        insta::assert_snapshot!("index_csv", i.render(Format::CSV));
    }
}
