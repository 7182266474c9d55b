//! The HTML exporter: one self-contained page, inline CSS and SVG.

use super::{Block, Cell, Exporter, List, Page, Source, Table, Verdicts};
use crate::ReportError;
use html_escape::{encode_double_quoted_attribute as attr, encode_text as esc};
use std::fmt::Write as _;

/// The HTML format: the whole page, figures and detail included.
pub(crate) struct Html;

/// What every page's own style builds on: a page as wide as a 1,400 px
/// screen allows, and tables that wrap their cells and, when still too
/// wide, scroll inside their own box instead of being cut at the edge.
pub(crate) const BASE_STYLE: &str = "
body{max-width:min(1320px,calc(100vw - 2rem))!important;box-sizing:border-box}
div.scroll{overflow-x:auto;max-width:100%}
div.scroll>table{max-width:none}
td,th{overflow-wrap:break-word}
details{margin:.4rem 0}details>summary{cursor:pointer}
details>details,details>ul{margin-left:1rem}
td.holds{color:#17652a;font-weight:600}td.fails{color:#a31515;font-weight:600}
td.noisy,td.unmeasurable,td.unjudged{color:#6b5900}td.decided{font-weight:600}
table.verdicts td{text-align:left}
";

/// ` id="…"` or nothing.
fn id_attr(id: Option<&str>) -> String {
    id.map(|i| format!(" id=\"{}\"", attr(i)))
        .unwrap_or_default()
}

/// ` class="…"` of the classes given, or nothing.
fn class_attr(classes: &[Option<&str>]) -> String {
    let classes: Vec<&str> = classes.iter().flatten().copied().collect();
    if classes.is_empty() {
        String::new()
    } else {
        format!(" class=\"{}\"", classes.join(" "))
    }
}

impl Html {
    /// The head of a page with its inline style, the title and the
    /// description.
    pub(crate) fn start(title: &str, description: &str, style: &str, viewport: bool) -> String {
        let mut h = String::new();
        let _ = write!(
            h,
            "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n{}<title>{t}</title>\n<style>{BASE_STYLE}{style}</style>\n</head>\n<body>\n<h1>{t}</h1>\n",
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

    /// One `<td>`; `label` when its column is a label.
    fn cell(h: &mut String, c: &Cell, label: bool, extra: &str) {
        let classes = class_attr(&[
            label.then_some("label"),
            c.tone.class(),
            c.nowrap.then_some("nowrap"),
            c.judged.as_ref().map(|j| j.0),
        ]);
        let mut text = match &c.link {
            Some(href) => format!("<a href=\"{}\">{}</a>", attr(href), esc(&c.text)),
            None => esc(&c.text).to_string(),
        };
        if c.strong {
            text = format!("<strong>{text}</strong>");
        }
        let _ = write!(h, "<td{classes}{extra}>{text}");
        if let Some(s) = &c.spread {
            let _ = write!(h, "<span class=\"spread\">{}</span>", esc(s));
        }
        if let Some(s) = &c.small {
            let _ = write!(h, "<br><small>{}</small>", esc(s));
        }
        h.push_str("</td>");
    }

    fn head(h: &mut String, t: &Table, label: impl Fn(usize) -> bool) {
        if t.groups.is_empty() {
            h.push_str("<thead><tr>\n");
            for (i, c) in t.head.iter().enumerate().skip(t.html_skip) {
                let _ = write!(
                    h,
                    "<th{}>{}</th>",
                    class_attr(&[label(i).then_some("label")]),
                    esc(c)
                );
            }
            h.push_str("</tr></thead>\n");
            return;
        }
        h.push_str("<thead>\n<tr>");
        for (i, c) in t.head.iter().enumerate().skip(t.html_skip) {
            let _ = write!(
                h,
                "<th{} rowspan=\"2\">{}</th>",
                class_attr(&[label(i).then_some("label")]),
                esc(c)
            );
        }
        for g in &t.groups {
            let _ = write!(h, "<th colspan=\"{}\">{}", g.columns.len(), esc(&g.title));
            if let Some(s) = &g.small {
                let _ = write!(h, "<br><small>{}</small>", esc(s));
            }
            h.push_str("</th>");
        }
        h.push_str("</tr>\n<tr>");
        for c in t.groups.iter().flat_map(|g| &g.columns) {
            let _ = write!(h, "<th>{}</th>", esc(c));
        }
        h.push_str("</tr>\n</thead>\n");
    }

    fn table(h: &mut String, t: &Table) {
        let label = |i: usize| i < t.html_skip + t.labels || t.text_columns.contains(&i);
        if let Some(summary) = &t.folded {
            let _ = writeln!(h, "<details>\n<summary>{}</summary>", esc(summary));
        }
        let _ = writeln!(
            h,
            "<div class=\"scroll\"><table{}{}>",
            id_attr(t.id.as_deref()),
            class_attr(&[t.class])
        );
        Self::head(h, t, label);
        h.push_str("<tbody>\n");
        for (r, row) in t.rows.iter().enumerate() {
            // The first cell shown spans the rows that repeat it.
            let first = t.html_skip;
            let same = |a: &Vec<Cell>, b: &Vec<Cell>| {
                a.get(first).map(|c| &c.text) == b.get(first).map(|c| &c.text)
            };
            let merged = t.merge_first && r > 0 && same(&t.rows[r - 1], row);
            let span = if t.merge_first && !merged {
                t.rows[r..].iter().take_while(|x| same(x, row)).count()
            } else {
                1
            };
            h.push_str(if t.merge_first && !merged {
                "<tr class=\"first\">"
            } else {
                "<tr>"
            });
            for (i, c) in row.iter().enumerate().skip(first) {
                if i == first && merged {
                    continue;
                }
                let extra = if i == first && span > 1 {
                    format!(" rowspan=\"{span}\"")
                } else {
                    String::new()
                };
                Self::cell(h, c, label(i), &extra);
            }
            h.push_str("</tr>\n");
        }
        h.push_str("</tbody></table></div>\n");
        if t.folded.is_some() {
            h.push_str("</details>\n");
        }
        if let (true, Some(e)) = (t.rows.is_empty(), &t.empty) {
            let _ = writeln!(h, "<p class=\"note\">{}</p>", esc(e.html));
        }
    }

    fn verdicts(h: &mut String, v: &Verdicts) {
        let _ = write!(
            h,
            "<div class=\"scroll\">\n<table{}>\n<thead><tr>",
            id_attr(v.id)
        );
        let last = v.head.len().saturating_sub(1);
        for (i, c) in v.head.iter().enumerate() {
            let label = i < v.labels || i == last;
            let _ = write!(
                h,
                "<th{}>{}</th>",
                class_attr(&[label.then_some("label")]),
                esc(c)
            );
        }
        h.push_str("</tr></thead>\n<tbody>\n");
        for c in &v.claims {
            let _ = writeln!(
                h,
                "<tr class=\"claim first\"><td colspan=\"{}\"><strong>{}</strong> · {}<br><small>{}</small></td><td class=\"{}\">{}</td></tr>",
                last,
                esc(&c.source),
                esc(&c.text),
                esc(&c.detail),
                c.verdict.0,
                esc(&c.verdict.1)
            );
            for row in &c.rows {
                h.push_str("<tr>");
                for (i, cell) in row.iter().enumerate() {
                    Self::cell(h, cell, i < v.labels, "");
                }
                h.push_str("</tr>\n");
            }
        }
        let _ = writeln!(
            h,
            "</tbody>\n<caption>{}</caption>\n</table>\n</div>",
            esc(&v.caption)
        );
    }

    fn list(h: &mut String, l: &List) {
        let _ = writeln!(h, "<ul{}{}>", id_attr(l.id), class_attr(&[l.class]));
        if let (true, Some(e)) = (l.items.is_empty(), l.empty) {
            let _ = writeln!(h, "<li>{}</li>", esc(e));
        }
        for item in &l.items {
            let small = item
                .small
                .as_ref()
                .map(|s| format!(" <small>{}</small>", esc(s)))
                .unwrap_or_default();
            let _ = writeln!(h, "<li>{}{small}</li>", esc(&item.text));
        }
        h.push_str("</ul>\n");
    }

    fn block(h: &mut String, b: &Block) {
        match b {
            Block::Heading(t) => {
                let _ = writeln!(h, "<h2>{}</h2>", esc(t));
            }
            Block::Anchor { title, id } => {
                let _ = writeln!(h, "<h2{}>{}</h2>", id_attr(Some(id)), esc(title));
            }
            Block::Subheading { title, link } => {
                let _ = match link {
                    Some(href) => {
                        writeln!(h, "<h3><a href=\"{}\">{}</a></h3>", attr(href), esc(title))
                    }
                    None => writeln!(h, "<h3>{}</h3>", esc(title)),
                };
            }
            Block::Note(t) => {
                let _ = writeln!(h, "<p class=\"note\">{}</p>", esc(t));
            }
            Block::Facts { id, facts } => {
                let _ = writeln!(h, "<table{}>", id_attr(*id));
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
            Block::Verdicts(v) => Self::verdicts(h, v),
            Block::List(l) => Self::list(h, l),
            Block::Figure { id, svg, caption } => {
                let caption = if caption.is_empty() {
                    String::new()
                } else {
                    format!("<figcaption>{}</figcaption>\n", esc(caption))
                };
                let _ = writeln!(
                    h,
                    "<figure class=\"plot\"{}>\n{svg}\n{caption}</figure>",
                    id_attr(id.as_deref()),
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
            Block::Missing(ids) => {
                if !ids.is_empty() {
                    let _ = writeln!(
                        h,
                        "<h2>Not measured yet</h2>\n<p class=\"note\">{}</p>",
                        esc(&ids.join(", "))
                    );
                }
            }
            Block::Details { summary, blocks } => {
                let _ = writeln!(h, "<details>\n<summary>{}</summary>", esc(summary));
                for b in blocks {
                    Self::block(h, b);
                }
                h.push_str("</details>\n");
            }
        }
    }
}

impl Exporter for Html {
    fn names(&self) -> &'static [&'static str] {
        &["html"]
    }

    fn extension(&self) -> &'static str {
        "html"
    }

    fn figures(&self) -> bool {
        true
    }

    fn detail(&self) -> bool {
        true
    }

    fn export(&self, report: &dyn Source) -> Result<String, ReportError> {
        let page: Page = report.page()?;
        let mut h = Self::start(&page.title, &page.description, &page.style, page.viewport);
        for b in &page.blocks {
            Self::block(&mut h, b);
        }
        h.push_str("</body>\n</html>\n");
        Ok(h)
    }
}
