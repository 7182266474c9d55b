//! Every figure of a rendered page as its own SVG file (`connlab report
//! --figures DIR`): the figures are taken from the HTML page the report
//! wrote, so every report kind exports them the same way, and the files
//! hold exactly what the page shows.

use std::path::{Path, PathBuf};

/// One figure of a page.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PageFigure {
    /// A file name without extension: its place on the page and its title,
    /// `03-mean-service-latency-against-total-connections`.
    pub name: String,
    /// The plot's title (the first text of the SVG), empty if none.
    pub title: String,
    /// The SVG document at its own size (the page's full-width style left
    /// out).
    pub svg: String,
}

/// The SVG figures of an HTML page, in page order.
pub fn figures_of(html: &str) -> Vec<PageFigure> {
    let mut out = Vec::new();
    let mut rest = html;
    while let Some(start) = rest.find("<svg") {
        let Some(len) = rest[start..].find("</svg>") else {
            break;
        };
        let svg = &rest[start..start + len + "</svg>".len()];
        rest = &rest[start + len + "</svg>".len()..];
        let title = first_text(svg);
        let slug = slug(&title);
        let n = out.len() + 1;
        out.push(PageFigure {
            name: if slug.is_empty() {
                format!("{n:02}-figure")
            } else {
                format!("{n:02}-{slug}")
            },
            title,
            svg: format!(
                "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n{}\n",
                svg.replacen(&format!(" {}", crate::plots::FULL_WIDTH), "", 1)
            ),
        });
    }
    out
}

/// Writes `figures` into `dir` (made if missing) as `NAME.svg`; returns
/// the files written.
pub fn write_figures(figures: &[PageFigure], dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir)?;
    figures
        .iter()
        .map(|f| {
            let path = dir.join(format!("{}.svg", f.name));
            std::fs::write(&path, &f.svg)?;
            Ok(path)
        })
        .collect()
}

/// The text of the first `<text>` element, entities decoded.
fn first_text(svg: &str) -> String {
    let Some(open) = svg.find("<text") else {
        return String::new();
    };
    let body = &svg[open..];
    let (Some(gt), Some(end)) = (body.find('>'), body.find("</text>")) else {
        return String::new();
    };
    if gt >= end {
        return String::new();
    }
    body[gt + 1..end]
        .trim()
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&amp;", "&")
}

/// Lower-case letters and digits joined by `-`, at most 60 characters.
fn slug(title: &str) -> String {
    let mut s = String::new();
    for c in title.chars() {
        if c.is_ascii_alphanumeric() {
            s.push(c.to_ascii_lowercase());
        } else if !s.is_empty() && !s.ends_with('-') {
            s.push('-');
        }
        if s.len() >= 60 {
            break;
        }
    }
    s.trim_end_matches('-').to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn figures_are_named_by_place_and_title() {
        let html = format!(
            "<p>x</p><figure><svg {} width=\"960\"><text x=\"1\">CDF of send deviation (ratio 1/4 · 125 req/s)</text></svg></figure><svg></svg>",
            crate::plots::FULL_WIDTH
        );
        let f = figures_of(&html);
        assert_eq!(f.len(), 2);
        assert_eq!(f[0].name, "01-cdf-of-send-deviation-ratio-1-4-125-req-s");
        assert!(!f[0].svg.contains("width:100%"), "{}", f[0].svg);
        assert!(f[0].svg.starts_with("<?xml"));
        assert_eq!(f[1].name, "02-figure");
        let dir = std::env::temp_dir().join(format!("connlab-figures-{}", std::process::id()));
        let written = write_figures(&f, &dir).unwrap();
        assert_eq!(written.len(), 2);
        assert!(written[0].exists());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
