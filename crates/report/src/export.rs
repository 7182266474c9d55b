//! One trait for every output format, after hyperfine's exporters: a report
//! kind says what it shows ([`Report`]: a [`Page`] of blocks for HTML and
//! Markdown, serde rows for CSV), and an [`Exporter`] per format says how
//! ([`HtmlExporter`], [`MarkdownExporter`], [`CsvExporter`]).

use crate::{Format, ReportError};
use html_escape::encode_text as esc;
use serde::Serialize;
use std::fmt::Write as _;

/// A report kind: the blocks of its page and the rows of its CSV.
pub(crate) trait Report {
    /// One CSV line, in long form; its field names are the header.
    type Row: Serialize;

    /// The page in `format` (HTML or Markdown): a report may leave out what
    /// a format cannot carry, such as plots in Markdown.
    fn page(&self, format: Format) -> Result<Page, ReportError>;

    /// The CSV rows.
    fn rows(&self) -> Result<Vec<Self::Row>, ReportError>;
}

/// Writes a report in one format.
pub(crate) trait Exporter {
    /// The report as text.
    fn export<R: Report + ?Sized>(&self, report: &R) -> Result<String, ReportError>;
}

/// Renders `report` with the exporter of `format`.
pub(crate) fn export<R: Report + ?Sized>(
    report: &R,
    format: Format,
) -> Result<String, ReportError> {
    match format {
        Format::Html => HtmlExporter.export(report),
        Format::Markdown => MarkdownExporter.export(report),
        Format::Csv => CsvExporter.export(report),
    }
}

/// A page: its title, description and blocks in order.
pub(crate) struct Page {
    /// The `<title>`, `<h1>` and `#` heading.
    pub(crate) title: String,
    /// Prose under the title; empty for none.
    pub(crate) description: String,
    /// The page's inline CSS.
    pub(crate) style: &'static str,
    /// Whether the HTML head asks for the device's width.
    pub(crate) viewport: bool,
    /// The content.
    pub(crate) blocks: Vec<Block>,
}

/// A piece of a page.
pub(crate) enum Block {
    /// A section heading.
    Heading(String),
    /// A paragraph of prose.
    Note(String),
    /// (name, value) facts: a two-column table in HTML, a list in Markdown.
    Facts(Vec<(String, String)>),
    /// A table.
    Table(Table),
    /// A figure: an SVG plot and its caption (HTML only).
    Figure {
        /// The SVG document.
        svg: String,
        /// The caption, as text.
        caption: String,
    },
    /// Command lines: an HTML list, an indented block in Markdown. The
    /// label, when there is one, introduces the list.
    Commands {
        /// What the commands belong to.
        label: Option<String>,
        /// (prefix such as a role, command line) pairs.
        lines: Vec<(Option<String>, String)>,
    },
    /// Ids of the points not measured yet (nothing when there are none).
    Missing(Vec<String>),
    /// HTML the report wrote itself (the Markdown exporter skips it).
    Html(String),
    /// Markdown the report wrote itself (the HTML exporter skips it).
    Markdown(String),
}

/// A table of text cells.
pub(crate) struct Table {
    /// Column headings.
    pub(crate) head: Vec<String>,
    /// Rows of cells, as wide as the head.
    pub(crate) rows: Vec<Vec<Cell>>,
    /// Leading columns that are labels (left-aligned in HTML).
    pub(crate) labels: usize,
    /// Leading columns HTML leaves out because the heading above the table
    /// already says them (Markdown keeps them).
    pub(crate) html_skip: usize,
    /// What to say in place of rows when there are none (nothing if `None`).
    pub(crate) empty: Option<Empty>,
}

/// What a table says when it has no rows: HTML and Markdown wordings.
pub(crate) struct Empty {
    /// HTML: a note under the table.
    pub(crate) html: &'static str,
    /// Markdown: a line under the table.
    pub(crate) markdown: &'static str,
}

/// One table cell.
pub(crate) struct Cell {
    /// The text.
    pub(crate) text: String,
    /// Bold.
    pub(crate) strong: bool,
}

impl From<String> for Cell {
    fn from(text: String) -> Cell {
        Cell {
            text,
            strong: false,
        }
    }
}

/// One Markdown table row, without a line end; `|` inside a cell is
/// escaped and a line break becomes a space.
pub(crate) fn md_row(cells: &[String]) -> String {
    let mut s = String::from("|");
    for c in cells {
        let _ = write!(s, " {} |", c.replace('|', "\\|").replace('\n', " "));
    }
    s
}

/// The HTML format.
pub(crate) struct HtmlExporter;

impl HtmlExporter {
    /// The head of a page with its inline style, the title and the
    /// description.
    pub(crate) fn start(title: &str, description: &str, style: &str, viewport: bool) -> String {
        let mut h = String::new();
        let _ = write!(
            h,
            "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n{}<title>{t}</title>\n<style>{style}</style>\n</head>\n<body>\n<h1>{t}</h1>\n",
            if viewport {
                "<meta name=\"viewport\" content=\"width=device-width\">\n"
            } else {
                ""
            },
            t = esc(title),
        );
        if !description.trim().is_empty() {
            let _ = writeln!(h, "<p class=\"note\">{}</p>", esc(description.trim()));
        }
        h
    }

    fn table(h: &mut String, t: &Table) {
        let label = |i: usize| {
            if i < t.html_skip + t.labels {
                " class=\"label\""
            } else {
                ""
            }
        };
        h.push_str("<div class=\"scroll\"><table>\n<thead><tr>\n");
        for (i, c) in t.head.iter().enumerate().skip(t.html_skip) {
            let _ = write!(h, "<th{}>{}</th>", label(i), esc(c));
        }
        h.push_str("</tr></thead>\n<tbody>\n");
        for r in &t.rows {
            h.push_str("<tr>");
            for (i, c) in r.iter().enumerate().skip(t.html_skip) {
                if c.strong {
                    let _ = write!(h, "<td{}><strong>{}</strong></td>", label(i), esc(&c.text));
                } else {
                    let _ = write!(h, "<td{}>{}</td>", label(i), esc(&c.text));
                }
            }
            h.push_str("</tr>\n");
        }
        h.push_str("</tbody></table></div>\n");
        if let (true, Some(e)) = (t.rows.is_empty(), &t.empty) {
            let _ = writeln!(h, "<p class=\"note\">{}</p>", esc(e.html));
        }
    }

    fn block(h: &mut String, b: &Block) {
        match b {
            Block::Heading(t) => {
                let _ = writeln!(h, "<h2>{}</h2>", esc(t));
            }
            Block::Note(t) => {
                let _ = writeln!(h, "<p class=\"note\">{}</p>", esc(t));
            }
            Block::Facts(facts) => {
                h.push_str("<table>\n");
                for (k, v) in facts {
                    let _ = writeln!(
                        h,
                        "<tr><th class=\"label\">{}</th><td class=\"label\">{}</td></tr>",
                        esc(k),
                        esc(v)
                    );
                }
                h.push_str("</table>\n");
            }
            Block::Table(t) => Self::table(h, t),
            Block::Figure { svg, caption } => {
                let _ = writeln!(
                    h,
                    "<figure class=\"plot\">{svg}<figcaption>{}</figcaption></figure>",
                    esc(caption)
                );
            }
            Block::Commands { label, lines } => {
                match label {
                    Some(l) => {
                        let _ = writeln!(h, "<p class=\"note\">{}:</p><ul>", esc(l));
                    }
                    None => h.push_str("<ul>\n"),
                }
                for (prefix, c) in lines {
                    let prefix = prefix.as_ref().map(|p| format!("{}: ", esc(p)));
                    let _ = writeln!(
                        h,
                        "<li>{}<code>{}</code></li>",
                        prefix.unwrap_or_default(),
                        esc(c)
                    );
                }
                h.push_str("</ul>\n");
            }
            Block::Html(text) => h.push_str(text),
            Block::Markdown(_) => {}
            Block::Missing(ids) => {
                if !ids.is_empty() {
                    let _ = writeln!(
                        h,
                        "<h2>Not measured yet</h2>\n<p class=\"note\">{}</p>",
                        esc(&ids.join(", "))
                    );
                }
            }
        }
    }
}

impl Exporter for HtmlExporter {
    fn export<R: Report + ?Sized>(&self, report: &R) -> Result<String, ReportError> {
        let page = report.page(Format::Html)?;
        let mut h = Self::start(&page.title, &page.description, page.style, page.viewport);
        for b in &page.blocks {
            Self::block(&mut h, b);
        }
        h.push_str("</body>\n</html>\n");
        Ok(h)
    }
}

/// The Markdown format: each block after a blank line.
pub(crate) struct MarkdownExporter;

impl MarkdownExporter {
    fn block(m: &mut String, b: &Block) {
        match b {
            Block::Heading(t) => {
                let _ = writeln!(m, "\n## {t}");
            }
            Block::Note(t) => {
                let _ = writeln!(m, "\n{t}");
            }
            Block::Facts(facts) => {
                for (k, v) in facts {
                    let _ = writeln!(m, "- **{k}**: {v}");
                }
            }
            Block::Table(t) => {
                let _ = writeln!(m, "\n{}", md_row(&t.head));
                let _ = writeln!(m, "{}", md_row(&vec!["---".to_string(); t.head.len()]));
                for r in &t.rows {
                    let cells: Vec<String> = r.iter().map(|c| c.text.clone()).collect();
                    let _ = writeln!(m, "{}", md_row(&cells));
                }
                if let (true, Some(e)) = (t.rows.is_empty(), &t.empty) {
                    let _ = writeln!(m, "\n{}", e.markdown);
                }
            }
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
            Block::Markdown(text) => m.push_str(text),
            Block::Html(_) => {}
            Block::Missing(ids) => {
                if !ids.is_empty() {
                    let _ = writeln!(m, "\nNot measured yet: {}", ids.join(", "));
                }
            }
        }
    }
}

impl Exporter for MarkdownExporter {
    fn export<R: Report + ?Sized>(&self, report: &R) -> Result<String, ReportError> {
        let page = report.page(Format::Markdown)?;
        let mut m = format!("# {}\n\n", page.title);
        if !page.description.trim().is_empty() {
            let _ = writeln!(m, "{}\n", page.description.trim());
        }
        for b in &page.blocks {
            Self::block(&mut m, b);
        }
        Ok(m)
    }
}

/// The CSV format: a header from the row type's field names, then a line
/// per row, quoted where a field needs it.
pub(crate) struct CsvExporter;

impl CsvExporter {
    /// `rows` as CSV text.
    pub(crate) fn write<T: Serialize>(
        rows: impl IntoIterator<Item = T>,
    ) -> Result<String, ReportError> {
        let err = |e: csv::Error| ReportError::Csv(e.to_string());
        let mut w = csv::Writer::from_writer(Vec::new());
        for r in rows {
            w.serialize(r).map_err(err)?;
        }
        let bytes = w
            .into_inner()
            .map_err(|e| ReportError::Csv(e.to_string()))?;
        String::from_utf8(bytes).map_err(|e| ReportError::Csv(e.to_string()))
    }
}

impl Exporter for CsvExporter {
    fn export<R: Report + ?Sized>(&self, report: &R) -> Result<String, ReportError> {
        Self::write(report.rows()?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A report of fixed blocks and two CSV rows.
    struct Fixed;

    #[derive(Serialize)]
    struct Row {
        name: &'static str,
        value: Option<f64>,
    }

    impl Report for Fixed {
        type Row = Row;

        fn page(&self, _: Format) -> Result<Page, ReportError> {
            Ok(Page {
                title: "T <1>".into(),
                description: "About it.".into(),
                style: "p{}",
                viewport: false,
                blocks: vec![
                    Block::Heading("Section".into()),
                    Block::Table(Table {
                        head: vec!["size".into(), "name".into(), "a|b".into()],
                        rows: vec![vec![
                            "1 KiB".to_string().into(),
                            "x".to_string().into(),
                            Cell {
                                text: "2".into(),
                                strong: true,
                            },
                        ]],
                        labels: 1,
                        html_skip: 1,
                        empty: None,
                    }),
                    Block::Missing(Vec::new()),
                    Block::Missing(vec!["p1".into(), "p2".into()]),
                    Block::Html("<hr>\n".into()),
                    Block::Markdown("---\n".into()),
                ],
            })
        }

        fn rows(&self) -> Result<Vec<Row>, ReportError> {
            Ok(vec![
                Row {
                    name: "a, \"b\"",
                    value: Some(1.5),
                },
                Row {
                    name: "c",
                    value: None,
                },
            ])
        }
    }

    #[test]
    fn html_escapes_skips_lead_columns_and_marks_labels() {
        let h = export(&Fixed, Format::Html).unwrap();
        assert!(h.starts_with("<!DOCTYPE html>"));
        assert!(h.contains("<title>T &lt;1&gt;</title>"));
        assert!(h.contains("<p class=\"note\">About it.</p>\n<h2>Section</h2>"));
        // The size column is left out; the name is a label; 2 is bold.
        assert!(!h.contains("1 KiB"));
        assert!(h.contains("<th class=\"label\">name</th><th>a|b</th>"));
        assert!(h.contains("<td class=\"label\">x</td><td><strong>2</strong></td>"));
        assert_eq!(h.matches("Not measured yet").count(), 1);
        assert!(h.contains("<hr>") && !h.contains("---"));
        assert!(h.ends_with("</body>\n</html>\n"));
    }

    #[test]
    fn markdown_keeps_every_column_and_escapes_pipes() {
        let m = export(&Fixed, Format::Markdown).unwrap();
        assert!(m.starts_with("# T <1>\n\nAbout it.\n\n"));
        assert!(m.contains("| size | name | a\\|b |\n| --- | --- | --- |\n| 1 KiB | x | 2 |\n"));
        assert!(m.contains("\nNot measured yet: p1, p2\n"));
        assert!(m.contains("---\n") && !m.contains("<hr>"));
    }

    #[test]
    fn csv_has_a_header_and_quotes_where_needed() {
        let c = export(&Fixed, Format::Csv).unwrap();
        assert_eq!(c, "name,value\n\"a, \"\"b\"\"\",1.5\nc,\n");
    }
}
