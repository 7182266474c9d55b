//! The summary page of `connlab soak` (`DIR/soak.md`): in brief the
//! verdict, the failed checks and the p99 factors, then the requests of
//! each load class per phase, the faults, the hostile
//! clients, the peak memory and the checks. The soak fills a
//! [`SoakSummary`]; this module only lays it out.

use crate::export::{self, Block, Cell, Item, List, Page, Report, Table};
use crate::{Format, ReportError};
use connlab_lab::soak::SoakSummary;
use serde::Serialize;

/// Renders the soak's summary page.
pub fn render_soak(summary: &SoakSummary, format: Format) -> Result<String, ReportError> {
    export::export(&Soak(summary), format)
}

/// The soak's page as a report.
struct Soak<'a>(&'a SoakSummary);

/// The columns of the phases table (and of the CSV rows).
const HEAD: [&str; 7] = [
    "class",
    "phase",
    "sent",
    "completed",
    "errored",
    "p99 us",
    "max us",
];

/// One CSV row: one phase of one load class.
#[derive(Serialize)]
pub(crate) struct SoakRow {
    class: String,
    phase: String,
    sent: String,
    completed: String,
    errored: String,
    p99_us: String,
    max_us: String,
}

impl Report for Soak<'_> {
    type Row = SoakRow;

    fn page(&self, _: Format) -> Result<Page, ReportError> {
        let s = self.0;
        let mut items: Vec<Item> = s
            .factors
            .iter()
            .map(|(class, f)| Item::from(format!("{class}: healthy p99 / fault-free p99 = {f}")))
            .collect();
        items.extend(s.facts.iter().map(|(k, v)| Item::from(format!("{k}: {v}"))));
        let verdict = if s.passed { "PASSED" } else { "FAILED" };
        Ok(Page {
            title: "Fault soak".into(),
            description: s.setup.clone(),
            style: "".into(),
            viewport: true,
            blocks: crate::brief::section(
                vec![
                    Block::Note(format!("{} {verdict}", s.checks)),
                    Block::List(List {
                        items: s.failures.iter().cloned().map(Item::from).collect(),
                        ..List::default()
                    }),
                    Block::List(List {
                        items,
                        ..List::default()
                    }),
                ],
                &[],
                "check",
                None,
            )
            .into_iter()
            .chain([
                Block::Heading("Phases".into()),
                Block::Table(Table {
                    head: HEAD.map(String::from).to_vec(),
                    rows: s
                        .phases
                        .iter()
                        .map(|p| p.iter().map(|c| Cell::from(c.as_str())).collect())
                        .collect(),
                    labels: 2,
                    ..Table::default()
                }),
            ])
            .collect(),
        })
    }

    fn rows(&self) -> Result<Vec<SoakRow>, ReportError> {
        Ok(self
            .0
            .phases
            .iter()
            .map(
                |[class, phase, sent, completed, errored, p99_us, max_us]| SoakRow {
                    class: class.clone(),
                    phase: phase.clone(),
                    sent: sent.clone(),
                    completed: completed.clone(),
                    errored: errored.clone(),
                    p99_us: p99_us.clone(),
                    max_us: max_us.clone(),
                },
            )
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn summary(passed: bool) -> SoakSummary {
        SoakSummary {
            setup: "2 fault-free and 4 fault segments of 4 s, 100 req/s per class, gateway `--io copy`; wall 30 s.".into(),
            phases: vec![[
                "gateway", "fault-free", "400", "399", "1", "100", "250",
            ]
            .map(String::from)],
            factors: vec![("gateway".into(), "3.00".into())],
            facts: vec![("faults fired".into(), "kill 2".into())],
            checks: "Checks: no crash true, p99 reported only.".into(),
            passed,
            failures: if passed {
                Vec::new()
            } else {
                vec!["crash: gw-backend-1".into()]
            },
        }
    }

    #[test]
    fn markdown_has_the_phases_the_factors_and_the_verdict() {
        let m = render_soak(&summary(true), Format::MARKDOWN).unwrap();
        assert!(
            m.starts_with("# Fault soak\n\n2 fault-free and 4 fault segments"),
            "{m}"
        );
        assert!(
            m.contains("| class | phase | sent | completed | errored | p99 us | max us |"),
            "{m}"
        );
        assert!(
            m.contains("| gateway | fault-free | 400 | 399 | 1 | 100 | 250 |"),
            "{m}"
        );
        assert!(
            m.contains("- gateway: healthy p99 / fault-free p99 = 3.00\n- faults fired: kill 2\n"),
            "{m}"
        );
        assert!(
            m.contains("\nChecks: no crash true, p99 reported only. PASSED\n"),
            "{m}"
        );
        let failed = render_soak(&summary(false), Format::MARKDOWN).unwrap();
        assert!(failed.contains("FAILED") && failed.contains("- crash: gw-backend-1\n"));
    }

    #[test]
    fn every_format_renders_it() {
        let h = render_soak(&summary(true), Format::HTML).unwrap();
        assert!(h.contains("<td class=\"label\">gateway</td>"), "{h}");
        let c = render_soak(&summary(true), Format::CSV).unwrap();
        assert_eq!(
            c,
            "class,phase,sent,completed,errored,p99_us,max_us\ngateway,fault-free,400,399,1,100,250\n"
        );
    }
}
