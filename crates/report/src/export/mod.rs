//! One trait for every output format, after hyperfine's exporters: a report
//! kind says what it shows ([`Report`]: a [`Page`] of blocks, and serde rows
//! for the formats of rows), and an [`Exporter`] per format says how.
//!
//! # Adding a format
//!
//! A format is one folder and one line:
//!
//! 1. a folder `export/NAME/` whose `mod.rs` holds a unit struct
//!    implementing [`Exporter`]: the names `--format` accepts, the file
//!    extension, what its pages carry ([`Exporter::figures`],
//!    [`Exporter::detail`]) and [`Exporter::export`], which asks the
//!    [`Source`] for the page (a format of pages) or for the [`Rows`] (a
//!    format of rows, already turned into text cells through serde);
//! 2. its `mod NAME;` and one entry in [`EXPORTERS`].
//!
//! No report changes: reports ask the [`Format`] what it carries
//! (`format.figures()`, `format.detail()`), never which format it is, and
//! `--format`, its error message and `connlab reproduce`'s index files
//! all come from [`EXPORTERS`].

use crate::ReportError;
use serde::Serialize;
use std::borrow::Cow;

mod csv;
mod html;
mod markdown;

/// Every format, in the order `--format`'s error lists them: adding a
/// format is its folder and one line here (see the [module](self) doc).
pub(crate) const EXPORTERS: &[&dyn Exporter] = &[&html::Html, &markdown::Markdown, &csv::Csv];

/// A report kind: the blocks of its page and the rows of its CSV.
pub(crate) trait Report {
    /// One row, in long form; its field names are the columns.
    type Row: Serialize;

    /// The page in `format`: a report leaves out what the format does not
    /// carry (figures unless [`Format::figures`], the detail unless
    /// [`Format::detail`]).
    fn page(&self, format: Format) -> Result<Page, ReportError>;

    /// The rows.
    fn rows(&self) -> Result<Vec<Self::Row>, ReportError>;
}

/// A report bound to a format, as an exporter sees it: it asks for the
/// page or for the rows, whichever it writes (only that one is built).
pub(crate) trait Source {
    /// The page, as the report lays it out for this format.
    fn page(&self) -> Result<Page, ReportError>;

    /// The rows as text cells.
    fn rows(&self) -> Result<Rows, ReportError>;
}

/// One output format. Object-safe: the registry [`EXPORTERS`] holds each
/// as `&dyn Exporter`, and a [`Format`] is one of them.
pub(crate) trait Exporter: Sync {
    /// The names `--format` accepts; the first is the format's name.
    fn names(&self) -> &'static [&'static str];

    /// The extension of its files, without the dot.
    fn extension(&self) -> &'static str;

    /// Whether its pages carry figures (SVG plots): reports draw none
    /// otherwise.
    fn figures(&self) -> bool {
        false
    }

    /// Whether its pages carry the detail beside the summary (reading
    /// notes, command lines, every point's row), or only the summary.
    fn detail(&self) -> bool {
        false
    }

    /// The report as text.
    fn export(&self, report: &dyn Source) -> Result<String, ReportError>;
}

/// An output format: one of the report crate's registered exporters,
/// parsed from its name (`html`, `markdown` or `md`, `csv`).
#[derive(Clone, Copy)]
pub struct Format(&'static dyn Exporter);

impl Format {
    /// One self-contained HTML page.
    pub const HTML: Format = Format(&html::Html);
    /// GitHub-flavoured Markdown tables.
    pub const MARKDOWN: Format = Format(&markdown::Markdown);
    /// The rows in long form.
    pub const CSV: Format = Format(&csv::Csv);

    /// Every format, in the registry's order.
    pub fn all() -> impl Iterator<Item = Format> {
        EXPORTERS.iter().map(|e| Format(*e))
    }

    /// The format's name (`html`, `markdown`, `csv`).
    pub fn name(self) -> &'static str {
        self.0.names().first().copied().unwrap_or("")
    }

    /// The extension of its files, without the dot (`html`, `md`, `csv`).
    pub fn extension(self) -> &'static str {
        self.0.extension()
    }

    /// Whether its pages carry figures (SVG plots).
    pub fn figures(self) -> bool {
        self.0.figures()
    }

    /// Whether its pages carry the detail beside the summary.
    pub fn detail(self) -> bool {
        self.0.detail()
    }

    /// The format of `exporters` answering to `name`; the error lists
    /// their names.
    fn find(exporters: &[&'static dyn Exporter], name: &str) -> Result<Format, String> {
        exporters
            .iter()
            .find(|e| e.names().contains(&name))
            .map(|e| Format(*e))
            .ok_or_else(|| {
                let names: Vec<&str> = exporters
                    .iter()
                    .filter_map(|e| e.names().first().copied())
                    .collect();
                let expected = match names.split_last() {
                    Some((last, [])) => (*last).to_string(),
                    Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
                    None => "nothing".into(),
                };
                format!("unknown format {name:?}; expected {expected}")
            })
    }
}

impl PartialEq for Format {
    fn eq(&self, other: &Format) -> bool {
        self.name() == other.name()
    }
}

impl Eq for Format {}

impl std::fmt::Debug for Format {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Format({})", self.name())
    }
}

impl std::fmt::Display for Format {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Format {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Format::find(EXPORTERS, s)
    }
}

/// A report's rows as text cells: each row through serde (the CSV
/// writer's field names and values), so an exporter of rows needs no
/// report's row type.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Rows {
    /// The column names; empty when there are no rows.
    pub(crate) head: Vec<String>,
    /// The rows, each a cell per column.
    pub(crate) rows: Vec<Vec<String>>,
}

impl Rows {
    /// `rows` as text cells.
    pub(crate) fn of<T: Serialize>(rows: impl IntoIterator<Item = T>) -> Result<Rows, ReportError> {
        let err = |e: ::csv::Error| ReportError::Csv(e.to_string());
        let mut w = ::csv::Writer::from_writer(Vec::new());
        for r in rows {
            w.serialize(r).map_err(err)?;
        }
        let bytes = w
            .into_inner()
            .map_err(|e| ReportError::Csv(e.to_string()))?;
        let mut r = ::csv::ReaderBuilder::new()
            .flexible(true)
            .from_reader(bytes.as_slice());
        let head = r.headers().map_err(err)?.iter().map(String::from).collect();
        let rows = r
            .records()
            .map(|rec| rec.map(|rec| rec.iter().map(String::from).collect()))
            .collect::<Result<_, _>>()
            .map_err(err)?;
        Ok(Rows { head, rows })
    }
}

/// A report bound to the format it is rendered in.
struct Bound<'a, R: ?Sized> {
    report: &'a R,
    format: Format,
}

impl<R: Report + ?Sized> Source for Bound<'_, R> {
    fn page(&self) -> Result<Page, ReportError> {
        let mut page = self.report.page(self.format)?;
        page.drop_empty_columns();
        Ok(page)
    }

    fn rows(&self) -> Result<Rows, ReportError> {
        Rows::of(self.report.rows()?)
    }
}

/// Renders `report` with the exporter of `format`.
pub(crate) fn export<R: Report + ?Sized>(
    report: &R,
    format: Format,
) -> Result<String, ReportError> {
    format.0.export(&Bound { report, format })
}

/// A page: its title, description and blocks in order.
pub(crate) struct Page {
    /// The `<title>`, `<h1>` and `#` heading.
    pub(crate) title: String,
    /// Prose under the title; empty for none.
    pub(crate) description: String,
    /// The page's inline CSS.
    pub(crate) style: Cow<'static, str>,
    /// Whether the HTML head asks for the device's width.
    pub(crate) viewport: bool,
    /// The content.
    pub(crate) blocks: Vec<Block>,
}

/// A piece of a page.
pub(crate) enum Block {
    /// A section heading.
    Heading(String),
    /// A section heading other pages can link to (`#id` in HTML).
    Anchor {
        /// The heading.
        title: String,
        /// Its HTML id.
        id: String,
    },
    /// A heading under a section's, linking to `link` when there is one.
    Subheading {
        /// The heading.
        title: String,
        /// Where it links to.
        link: Option<String>,
    },
    /// A paragraph of prose.
    Note(String),
    /// (name, value) facts: a two-column table in HTML, a list in Markdown.
    Facts {
        /// The HTML id of the table, if any.
        id: Option<&'static str>,
        /// The facts in order.
        facts: Vec<(String, String)>,
    },
    /// A table.
    Table(Table),
    /// Claims, each a header line with its verdict over the comparisons
    /// it rests on.
    Verdicts(Verdicts),
    /// A bulleted list.
    List(List),
    /// A figure: an SVG plot and its caption (formats without figures skip
    /// it; reports need not draw it for them).
    Figure {
        /// The HTML id, if any.
        id: Option<String>,
        /// The SVG document.
        svg: String,
        /// The caption, as text (none when empty).
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
    /// Blocks folded under a summary line: `<details>` in HTML and in
    /// Markdown (which GitHub folds too).
    Details {
        /// The line shown while folded.
        summary: String,
        /// What unfolds.
        blocks: Vec<Block>,
    },
}

impl Page {
    /// Leaves out every table column that says nothing: `—`, `-` or
    /// nothing in every row (see [`Table::drop_empty_columns`]).
    pub(crate) fn drop_empty_columns(&mut self) {
        fn each(blocks: &mut [Block]) {
            for b in blocks {
                match b {
                    Block::Table(t) => t.drop_empty_columns(),
                    Block::Details { blocks, .. } => each(blocks),
                    _ => {}
                }
            }
        }
        each(&mut self.blocks);
    }
}

/// A table of text cells.
#[derive(Default)]
pub(crate) struct Table {
    /// The HTML id, if any.
    pub(crate) id: Option<String>,
    /// The HTML class, if any (`brief`).
    pub(crate) class: Option<&'static str>,
    /// Column headings; with `groups`, the leading columns only.
    pub(crate) head: Vec<String>,
    /// Column groups after `head`, each a heading over its own columns
    /// (two header rows in HTML; `group: column` headings in Markdown).
    pub(crate) groups: Vec<Group>,
    /// Rows of cells, as wide as the head and the groups' columns.
    pub(crate) rows: Vec<Vec<Cell>>,
    /// Leading columns that are labels (left-aligned in HTML).
    pub(crate) labels: usize,
    /// Further columns of text, by index (left-aligned in HTML too).
    pub(crate) text_columns: Vec<usize>,
    /// Leading columns HTML leaves out because the heading above the table
    /// already says them (Markdown keeps them).
    pub(crate) html_skip: usize,
    /// Whether HTML spans equal first cells of consecutive rows into one
    /// (and marks each span's first row); Markdown repeats them.
    pub(crate) merge_first: bool,
    /// HTML folds the table under this summary line (Markdown shows it).
    pub(crate) folded: Option<String>,
    /// What to say in place of rows when there are none (nothing if `None`).
    pub(crate) empty: Option<Empty>,
}

/// Columns under one heading.
pub(crate) struct Group {
    /// The heading over the columns.
    pub(crate) title: String,
    /// A smaller line under the heading (its sources), if any.
    pub(crate) small: Option<String>,
    /// The columns.
    pub(crate) columns: Vec<String>,
}

impl Cell {
    /// Whether the cell says nothing: no text but `—`, `-` or blanks, and
    /// nothing under or around it.
    pub(crate) fn is_blank(&self) -> bool {
        matches!(self.text.trim(), "" | "—" | "-" | "–")
            && self.spread.is_none()
            && self.small.is_none()
            && self.link.is_none()
    }
}

impl Table {
    /// Leaves out the columns whose every row [is blank](Cell::is_blank)
    /// (a table without rows keeps its columns): from the head or its
    /// group (a group left without columns goes), keeping `labels`,
    /// `text_columns` and `html_skip` on the same columns.
    pub(crate) fn drop_empty_columns(&mut self) {
        if self.rows.is_empty() {
            return;
        }
        let width = self.head.len() + self.groups.iter().map(|g| g.columns.len()).sum::<usize>();
        let blank: Vec<bool> = (0..width)
            .map(|i| {
                self.rows
                    .iter()
                    .all(|r| r.get(i).is_none_or(Cell::is_blank))
            })
            .collect();
        if !blank.contains(&true) {
            return;
        }
        let kept_before = |i: usize| (0..i.min(width)).filter(|j| !blank[*j]).count();
        self.labels = kept_before(self.html_skip + self.labels) - kept_before(self.html_skip);
        self.html_skip = kept_before(self.html_skip);
        self.text_columns = self
            .text_columns
            .iter()
            .filter(|i| !blank.get(**i).copied().unwrap_or(false))
            .map(|i| kept_before(*i))
            .collect();
        let mut i = 0;
        self.head.retain(|_| {
            i += 1;
            !blank[i - 1]
        });
        for g in &mut self.groups {
            g.columns.retain(|_| {
                i += 1;
                !blank[i - 1]
            });
        }
        self.groups.retain(|g| !g.columns.is_empty());
        for r in &mut self.rows {
            let mut i = 0;
            r.retain(|_| {
                i += 1;
                !blank.get(i - 1).copied().unwrap_or(false)
            });
        }
    }

    /// Every column heading as Markdown prints it: the head, then each
    /// group's columns as `group: column`.
    pub(crate) fn flat_head(&self) -> Vec<String> {
        let mut head = self.head.clone();
        for g in &self.groups {
            let title = match &g.small {
                Some(s) => format!("{} ({s})", g.title),
                None => g.title.clone(),
            };
            head.extend(g.columns.iter().map(|c| format!("{title}: {c}")));
        }
        head
    }
}

/// What a table says when it has no rows: HTML and Markdown wordings.
pub(crate) struct Empty {
    /// HTML: a note under the table.
    pub(crate) html: &'static str,
    /// Markdown: a line under the table.
    pub(crate) markdown: &'static str,
}

/// How a cell is shown beside its text.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum Tone {
    /// Plain.
    #[default]
    Plain,
    /// The paper's value (grey italics in HTML).
    Paper,
    /// A ratio of ours to the paper's.
    Vs,
    /// A verdict, by its key (`holds`, `fails`): coloured in HTML.
    Verdict(&'static str),
}

impl Tone {
    fn class(self) -> Option<&'static str> {
        match self {
            Tone::Plain => None,
            Tone::Paper => Some("paper"),
            Tone::Vs => Some("vs"),
            Tone::Verdict(key) => Some(key),
        }
    }
}

/// One table cell.
#[derive(Clone, Debug, Default)]
pub(crate) struct Cell {
    /// The text.
    pub(crate) text: String,
    /// Bold.
    pub(crate) strong: bool,
    /// How it is shown.
    pub(crate) tone: Tone,
    /// Kept on one line in HTML.
    pub(crate) nowrap: bool,
    /// The spread under the value: a small line in HTML, `[spread]` in
    /// Markdown.
    pub(crate) spread: Option<String>,
    /// A remark under the text: small in HTML, `(remark)` in Markdown.
    pub(crate) small: Option<String>,
    /// A verdict on the value, by key and in words: HTML colours the cell,
    /// Markdown says the words after it.
    pub(crate) judged: Option<(&'static str, String)>,
    /// Where the text links to.
    pub(crate) link: Option<String>,
}

impl From<String> for Cell {
    fn from(text: String) -> Cell {
        Cell {
            text,
            ..Cell::default()
        }
    }
}

impl From<&str> for Cell {
    fn from(text: &str) -> Cell {
        Cell::from(text.to_string())
    }
}

impl Cell {
    /// The same cell in `tone`.
    pub(crate) fn tone(self, tone: Tone) -> Cell {
        Cell { tone, ..self }
    }

    /// The same cell kept on one line.
    pub(crate) fn nowrap(self) -> Cell {
        Cell {
            nowrap: true,
            ..self
        }
    }

    /// The same cell in bold when `strong`.
    pub(crate) fn strong(self, strong: bool) -> Cell {
        Cell { strong, ..self }
    }

    /// The same cell with a spread under it.
    pub(crate) fn spread(self, spread: Option<String>) -> Cell {
        Cell { spread, ..self }
    }

    /// The same cell with a remark under it.
    pub(crate) fn small(self, small: Option<String>) -> Cell {
        Cell { small, ..self }
    }

    /// The same cell judged: coloured by `key`, said in `words`.
    pub(crate) fn judged(self, key: &'static str, words: String) -> Cell {
        Cell {
            judged: Some((key, words)),
            ..self
        }
    }

    /// The same cell linking to `href`.
    pub(crate) fn link(self, href: Option<String>) -> Cell {
        Cell { link: href, ..self }
    }
}

/// A bulleted list.
#[derive(Default)]
pub(crate) struct List {
    /// The HTML id, if any.
    pub(crate) id: Option<&'static str>,
    /// The HTML class, if any.
    pub(crate) class: Option<&'static str>,
    /// The items.
    pub(crate) items: Vec<Item>,
    /// What the list says when it has no items (nothing if `None`).
    pub(crate) empty: Option<&'static str>,
}

/// One list item.
pub(crate) struct Item {
    /// The text.
    pub(crate) text: String,
    /// A smaller remark after it, if any.
    pub(crate) small: Option<String>,
}

impl From<String> for Item {
    fn from(text: String) -> Item {
        Item { text, small: None }
    }
}

/// Claims with their verdicts, each over the comparisons it rests on: one
/// table in HTML (a header row per claim), a nested list in Markdown.
pub(crate) struct Verdicts {
    /// The HTML id, if any.
    pub(crate) id: Option<&'static str>,
    /// The columns of a comparison; the last is its verdict.
    pub(crate) head: Vec<String>,
    /// Leading columns that are labels.
    pub(crate) labels: usize,
    /// The claims.
    pub(crate) claims: Vec<Claim>,
    /// What the table shows and how it judges.
    pub(crate) caption: String,
}

/// One claim of a [`Verdicts`] block.
pub(crate) struct Claim {
    /// Where the claim is from (bold).
    pub(crate) source: String,
    /// The claim.
    pub(crate) text: String,
    /// What it compares, in a smaller line.
    pub(crate) detail: String,
    /// The claim's verdict: key and words.
    pub(crate) verdict: (&'static str, String),
    /// Its comparisons, each as wide as the head.
    pub(crate) rows: Vec<Vec<Cell>>,
}

/// `blocks` on a bare page in `format` (HTML or Markdown), for tests of
/// the sections that make them.
#[cfg(test)]
pub(crate) fn render_blocks(blocks: Vec<Block>, format: Format) -> String {
    struct Bare(std::cell::RefCell<Vec<Block>>);
    impl Report for Bare {
        type Row = ();
        fn page(&self, _: Format) -> Result<Page, ReportError> {
            Ok(Page {
                title: String::new(),
                description: String::new(),
                style: "".into(),
                viewport: false,
                blocks: self.0.take(),
            })
        }
        fn rows(&self) -> Result<Vec<()>, ReportError> {
            Ok(Vec::new())
        }
    }
    export(&Bare(std::cell::RefCell::new(blocks)), format).unwrap_or_default()
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
                style: "p{}".into(),
                viewport: false,
                blocks: vec![
                    Block::Heading("Section".into()),
                    Block::Table(Table {
                        head: vec!["size".into(), "name".into(), "a|b".into()],
                        rows: vec![vec![
                            "1 KiB".to_string().into(),
                            "x".to_string().into(),
                            Cell::from("2").strong(true),
                        ]],
                        labels: 1,
                        html_skip: 1,
                        ..Table::default()
                    }),
                    Block::Missing(Vec::new()),
                    Block::Missing(vec!["p1".into(), "p2".into()]),
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

    /// A format of rows made in a test: `name=value` pairs, a line per row.
    struct Pairs;

    impl Exporter for Pairs {
        fn names(&self) -> &'static [&'static str] {
            &["pairs", "kv"]
        }

        fn extension(&self) -> &'static str {
            "txt"
        }

        fn export(&self, report: &dyn Source) -> Result<String, ReportError> {
            let rows = report.rows()?;
            Ok(rows
                .rows
                .iter()
                .map(|r| {
                    let pairs: Vec<String> = rows
                        .head
                        .iter()
                        .zip(r)
                        .map(|(h, v)| format!("{h}={v}"))
                        .collect();
                    pairs.join(" ") + "\n"
                })
                .collect())
        }
    }

    /// A format of pages made in a test: the title and the headings.
    struct Outline;

    impl Exporter for Outline {
        fn names(&self) -> &'static [&'static str] {
            &["outline"]
        }

        fn extension(&self) -> &'static str {
            "txt"
        }

        fn figures(&self) -> bool {
            true
        }

        fn export(&self, report: &dyn Source) -> Result<String, ReportError> {
            let page = report.page()?;
            let mut out = page.title.clone();
            for b in &page.blocks {
                if let Block::Heading(t) | Block::Anchor { title: t, .. } = b {
                    out += &format!(" / {t}");
                }
            }
            Ok(out)
        }
    }

    /// Adding a format is its exporter and one line in the registry: the
    /// registry below is [`EXPORTERS`] and those two lines; the reports,
    /// the parsing and the error message need nothing else.
    #[test]
    fn a_format_is_its_exporter_and_one_registry_line() {
        let registry: Vec<&'static dyn Exporter> = EXPORTERS
            .iter()
            .copied()
            .chain([&Pairs as &dyn Exporter, &Outline])
            .collect();
        assert!("kv".parse::<Format>().is_err(), "not in EXPORTERS");
        let pairs = Format::find(&registry, "kv").unwrap();
        assert_eq!((pairs.name(), pairs.extension()), ("pairs", "txt"));
        assert!(!pairs.figures() && !pairs.detail());
        assert_eq!(
            export(&Fixed, pairs).unwrap(),
            "name=a, \"b\" value=1.5\nname=c value=\n"
        );
        let outline = Format::find(&registry, "outline").unwrap();
        assert_eq!(export(&Fixed, outline).unwrap(), "T <1> / Section");
        assert_eq!(
            Format::find(&registry, "json").unwrap_err(),
            "unknown format \"json\"; expected html, markdown, csv, pairs or outline"
        );
    }

    #[test]
    fn the_registry_parses_every_name() {
        let names: Vec<&str> = Format::all().map(Format::name).collect();
        assert_eq!(names, ["html", "markdown", "csv"]);
        for f in Format::all() {
            assert_eq!(f.name().parse::<Format>(), Ok(f));
        }
        assert_eq!("md".parse::<Format>(), Ok(Format::MARKDOWN));
        assert_eq!(Format::MARKDOWN.extension(), "md");
        assert!(Format::HTML.figures() && Format::HTML.detail());
        assert!(!Format::MARKDOWN.figures() && !Format::CSV.detail());
        assert_eq!(
            "pdf".parse::<Format>().unwrap_err(),
            "unknown format \"pdf\"; expected html, markdown or csv"
        );
    }

    #[test]
    fn rows_without_any_make_no_csv_at_all() {
        assert_eq!(Rows::of(Vec::<Row>::new()).unwrap(), Rows::default());
        struct Empty;
        impl Report for Empty {
            type Row = Row;
            fn page(&self, _: Format) -> Result<Page, ReportError> {
                Fixed.page(Format::HTML)
            }
            fn rows(&self) -> Result<Vec<Row>, ReportError> {
                Ok(Vec::new())
            }
        }
        assert_eq!(export(&Empty, Format::CSV).unwrap(), "");
    }

    #[test]
    fn html_escapes_skips_lead_columns_and_marks_labels() {
        let h = export(&Fixed, Format::HTML).unwrap();
        assert!(h.starts_with("<!DOCTYPE html>"));
        assert!(h.contains("<title>T &lt;1&gt;</title>"));
        assert!(h.contains("<p class=\"note\">About it.</p>\n<h2>Section</h2>"));
        // The size column is left out; the name is a label; 2 is bold.
        assert!(!h.contains("1 KiB"));
        assert!(h.contains("<th class=\"label\">name</th><th>a|b</th>"));
        assert!(h.contains("<td class=\"label\">x</td><td><strong>2</strong></td>"));
        assert_eq!(h.matches("Not measured yet").count(), 1);
        assert!(h.ends_with("</body>\n</html>\n"));
    }

    #[test]
    fn markdown_keeps_every_column_and_escapes_pipes() {
        let m = export(&Fixed, Format::MARKDOWN).unwrap();
        assert!(m.starts_with("# T <1>\n\nAbout it.\n\n"));
        assert!(m.contains("| size | name | a\\|b |\n| --- | --- | --- |\n| 1 KiB | x | 2 |\n"));
        assert!(m.contains("\nNot measured yet: p1, p2\n"));
    }

    #[test]
    fn csv_has_a_header_and_quotes_where_needed() {
        let c = export(&Fixed, Format::CSV).unwrap();
        assert_eq!(c, "name,value\n\"a, \"\"b\"\"\",1.5\nc,\n");
    }

    /// A grouped table with merged first cells, a verdicts block and a
    /// list, in both formats.
    fn model_blocks() -> Vec<Block> {
        let row = |setting: &str, engine: &str| {
            vec![
                Cell::from(setting),
                Cell::from(engine),
                Cell::from("1.1").tone(Tone::Paper).nowrap(),
                Cell::from("0.29")
                    .spread(Some("0.28–0.31".into()))
                    .judged("holds", "holds".into()),
                Cell::from("a.json").link(Some("runs/a.json".into())),
            ]
        };
        vec![
            Block::Anchor {
                title: "Section".into(),
                id: "sec".into(),
            },
            Block::Table(Table {
                id: Some("t".into()),
                class: Some("brief"),
                head: vec!["setting".into(), "engine".into()],
                groups: vec![
                    Group {
                        title: "mean".into(),
                        small: Some("Table 3".into()),
                        columns: vec!["paper".into(), "ours".into()],
                    },
                    Group {
                        title: "run".into(),
                        small: None,
                        columns: vec!["JSON".into()],
                    },
                ],
                rows: vec![
                    row("400", "select"),
                    row("400", "epoll"),
                    row("2,000", "select"),
                ],
                labels: 2,
                merge_first: true,
                ..Table::default()
            }),
            Block::Verdicts(Verdicts {
                id: Some("claims"),
                head: vec!["engine".into(), "ours".into(), "verdict".into()],
                labels: 1,
                claims: vec![Claim {
                    source: "Table 3".into(),
                    text: "select grows".into(),
                    detail: "ratio of the mean".into(),
                    verdict: ("fails", "does not hold".into()),
                    rows: vec![vec![
                        Cell::from("select").small(Some("context".into())),
                        Cell::from("5.0×"),
                        Cell::from("does not hold").tone(Tone::Verdict("fails")),
                    ]],
                }],
                caption: "How it is judged.".into(),
            }),
            Block::List(List {
                id: Some("warnings"),
                items: vec![Item {
                    text: "w".into(),
                    small: Some("(1: p1)".into()),
                }],
                ..List::default()
            }),
            Block::List(List {
                empty: Some("none"),
                ..List::default()
            }),
        ]
    }

    #[test]
    fn html_groups_merges_judges_and_links() {
        let h = render_blocks(model_blocks(), Format::HTML);
        assert!(h.contains("<h2 id=\"sec\">Section</h2>"), "{h}");
        assert!(h.contains("<table id=\"t\" class=\"brief\">"), "{h}");
        assert!(
            h.contains("<th class=\"label\" rowspan=\"2\">setting</th>"),
            "{h}"
        );
        assert!(
            h.contains(
                "<th colspan=\"2\">mean<br><small>Table 3</small></th><th colspan=\"1\">run</th>"
            ),
            "{h}"
        );
        // 400 spans its two rows; 2,000 starts a span of one.
        assert!(
            h.contains("<tr class=\"first\"><td class=\"label\" rowspan=\"2\">400</td>"),
            "{h}"
        );
        assert!(h.contains("<tr><td class=\"label\">epoll</td>"), "{h}");
        assert!(
            h.contains("<tr class=\"first\"><td class=\"label\">2,000</td>"),
            "{h}"
        );
        assert!(h.contains("<td class=\"paper nowrap\">1.1</td>"), "{h}");
        assert!(
            h.contains("<td class=\"holds\">0.29<span class=\"spread\">0.28–0.31</span></td>"),
            "{h}"
        );
        assert!(h.contains("<a href=\"runs/a.json\">a.json</a>"), "{h}");
        assert!(h.contains("<tr class=\"claim first\"><td colspan=\"2\"><strong>Table 3</strong> · select grows<br><small>ratio of the mean</small></td><td class=\"fails\">does not hold</td></tr>"), "{h}");
        assert!(
            h.contains("<td class=\"label\">select<br><small>context</small></td>"),
            "{h}"
        );
        assert!(h.contains("<caption>How it is judged.</caption>"), "{h}");
        assert!(
            h.contains("<ul id=\"warnings\">\n<li>w <small>(1: p1)</small></li>"),
            "{h}"
        );
        assert!(h.contains("<li>none</li>"), "{h}");
    }

    #[test]
    fn markdown_flattens_groups_and_says_verdicts_in_words() {
        let m = render_blocks(model_blocks(), Format::MARKDOWN);
        assert!(m.contains("\n## Section\n"), "{m}");
        assert!(
            m.contains(
                "| setting | engine | mean (Table 3): paper | mean (Table 3): ours | run: JSON |"
            ),
            "{m}"
        );
        assert!(
            m.contains("| 400 | epoll | 1.1 | 0.29 [0.28–0.31] (holds) | [a.json](runs/a.json) |"),
            "{m}"
        );
        assert!(m.contains("- **Table 3: select grows** (ratio of the mean): **does not hold**\n  - engine: select (context); ours: 5.0×; verdict: does not hold\n"), "{m}");
        assert!(m.contains("\nHow it is judged.\n"), "{m}");
        assert!(m.contains("- w (1: p1)\n"), "{m}");
        assert!(m.contains("\nnone\n"), "{m}");
        assert!(!m.contains("\n\n\n"), "{m}");
    }
}
