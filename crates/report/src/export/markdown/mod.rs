//! The Markdown exporter: GitHub-flavoured tables and lists.

use super::{Block, Cell, Exporter, List, Source, Table, Verdicts};
use crate::ReportError;
use std::fmt::Write as _;

/// The Markdown format: each block after a blank line.
pub(crate) struct Markdown;

/// One Markdown table row, without a line end; `|` inside a cell is
/// escaped and a line break becomes a space.
fn md_row(cells: &[String]) -> String {
    let mut s = String::from("|");
    for c in cells {
        let _ = write!(s, " {} |", c.replace('|', "\\|").replace('\n', " "));
    }
    s
}

/// A cell as Markdown text: the value (a link where it has one), its
/// spread in brackets, its remark and its verdict's words in parentheses
/// (bold is HTML's alone).
fn cell_text(c: &Cell) -> String {
    let mut s = match &c.link {
        Some(href) => format!("[{}]({href})", c.text),
        None => c.text.clone(),
    };
    if let Some(spread) = &c.spread {
        let _ = write!(s, " [{spread}]");
    }
    if let Some(small) = &c.small {
        let _ = write!(s, " ({small})");
    }
    if let Some((_, words)) = &c.judged {
        let _ = write!(s, " ({words})");
    }
    s
}

impl Markdown {
    fn table(m: &mut String, t: &Table) {
        let head = t.flat_head();
        let _ = writeln!(m, "\n{}", md_row(&head));
        let _ = writeln!(m, "{}", md_row(&vec!["---".to_string(); head.len()]));
        for r in &t.rows {
            let cells: Vec<String> = r.iter().map(cell_text).collect();
            let _ = writeln!(m, "{}", md_row(&cells));
        }
        if let (true, Some(e)) = (t.rows.is_empty(), &t.empty) {
            let _ = writeln!(m, "\n{}", e.markdown);
        }
    }

    /// Each claim a bullet with its verdict, each comparison a bullet
    /// under it naming its columns.
    fn verdicts(m: &mut String, v: &Verdicts) {
        m.push('\n');
        for c in &v.claims {
            let _ = writeln!(
                m,
                "- **{}: {}** ({}): **{}**",
                c.source,
                c.text.replace('\n', " "),
                c.detail,
                c.verdict.1
            );
            for row in &c.rows {
                let parts: Vec<String> = v
                    .head
                    .iter()
                    .zip(row)
                    .map(|(h, cell)| format!("{h}: {}", cell_text(cell)))
                    .collect();
                let _ = writeln!(m, "  - {}", parts.join("; "));
            }
        }
        let _ = writeln!(m, "\n{}", v.caption);
    }

    fn list(m: &mut String, l: &List) {
        m.push('\n');
        if let (true, Some(e)) = (l.items.is_empty(), l.empty) {
            let _ = writeln!(m, "{e}");
        }
        for item in &l.items {
            match &item.small {
                Some(s) => {
                    let _ = writeln!(m, "- {} {s}", item.text);
                }
                None => {
                    let _ = writeln!(m, "- {}", item.text);
                }
            }
        }
    }

    fn block(m: &mut String, b: &Block) {
        match b {
            Block::Heading(t) | Block::Anchor { title: t, .. } => {
                let _ = writeln!(m, "\n## {t}");
            }
            Block::Subheading { title, link } => {
                let _ = match link {
                    Some(href) => writeln!(m, "\n### [{title}]({href})"),
                    None => writeln!(m, "\n### {title}"),
                };
            }
            Block::Note(t) => {
                let _ = writeln!(m, "\n{t}");
            }
            Block::Facts { facts, .. } => {
                for (k, v) in facts {
                    let _ = writeln!(m, "- **{k}**: {v}");
                }
            }
            Block::Table(t) => Self::table(m, t),
            Block::Verdicts(v) => Self::verdicts(m, v),
            Block::List(l) => Self::list(m, l),
            Block::Figure { .. } => {}
            Block::Commands { label, lines } => {
                m.push('\n');
                if let Some(l) = label {
                    let _ = writeln!(m, "{l}:\n");
                }
                for (prefix, c) in lines {
                    match prefix {
                        Some(p) => {
                            let _ = writeln!(m, "    {p}: {c}");
                        }
                        None => {
                            let _ = writeln!(m, "    {c}");
                        }
                    }
                }
            }
            Block::Missing(ids) => {
                if !ids.is_empty() {
                    let _ = writeln!(m, "\nNot measured yet: {}", ids.join(", "));
                }
            }
            Block::Details { summary, blocks } => {
                let _ = writeln!(m, "\n<details>\n<summary>{summary}</summary>\n");
                for b in blocks {
                    Self::block(m, b);
                }
                m.push_str("\n</details>\n");
            }
        }
    }
}

impl Exporter for Markdown {
    fn names(&self) -> &'static [&'static str] {
        &["markdown", "md"]
    }

    fn extension(&self) -> &'static str {
        "md"
    }

    fn export(&self, report: &dyn Source) -> Result<String, ReportError> {
        let page = report.page()?;
        let mut m = format!("# {}\n\n", page.title);
        if !page.description.trim().is_empty() {
            let _ = writeln!(m, "{}\n", page.description.trim());
        }
        for b in &page.blocks {
            Self::block(&mut m, b);
        }
        // Blocks open with a blank line: one is enough after another.
        while m.contains("\n\n\n") {
            m = m.replace("\n\n\n", "\n\n");
        }
        Ok(m)
    }
}
