//! The plots' geometry, computed from the SVG elements plotters writes
//! (not from pixels), over every figure the fixtures produce: no legend
//! box covers a plotted point (a circle or a polyline's vertex drawn
//! before the legend), no text is smaller than 12 px, and every figure
//! is exported as its own SVG.

use crate::pages::every_page;
use crate::projection::polling_toml;
use crate::support::sweep;
use connlab_report::{figures_of, render, Format};

/// The value of attribute `name` in the tag `tag`.
fn attr(tag: &str, name: &str) -> Option<String> {
    let key = format!(" {name}=\"");
    let start = tag.find(&key)? + key.len();
    let end = tag[start..].find('"')?;
    Some(tag[start..start + end].to_string())
}

fn num(tag: &str, name: &str) -> f64 {
    attr(tag, name)
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("{name} in {tag}"))
}

/// The opening tags of `element` in `svg` with their byte offsets.
fn tags<'a>(svg: &'a str, element: &str) -> Vec<(usize, &'a str)> {
    let open = format!("<{element} ");
    svg.match_indices(&open)
        .map(|(i, _)| (i, &svg[i..i + svg[i..].find('>').unwrap_or(0) + 1]))
        .collect()
}

/// A rectangle: (left, top, right, bottom).
type Rect = (f64, f64, f64, f64);

/// The legend boxes: rectangles outlined in the legend's grey.
fn legends(svg: &str) -> Vec<(usize, Rect)> {
    tags(svg, "rect")
        .into_iter()
        .filter(|(_, t)| {
            attr(t, "stroke").as_deref() == Some("#AAAAAA")
                && attr(t, "fill").as_deref() == Some("none")
        })
        .map(|(i, t)| {
            let (x, y) = (num(t, "x"), num(t, "y"));
            (i, (x, y, x + num(t, "width"), y + num(t, "height")))
        })
        .collect()
}

/// Every plotted point drawn before `before`: circle centres (with their
/// radius) and polyline vertices (radius 0).
fn points(svg: &str, before: usize) -> Vec<(f64, f64, f64)> {
    let mut out: Vec<(f64, f64, f64)> = tags(svg, "circle")
        .into_iter()
        .filter(|(i, _)| *i < before)
        .map(|(_, t)| (num(t, "cx"), num(t, "cy"), num(t, "r")))
        .collect();
    for (_, t) in tags(svg, "polyline")
        .into_iter()
        .filter(|(i, _)| *i < before)
    {
        for xy in attr(t, "points").unwrap_or_default().split_whitespace() {
            let (x, y) = xy.split_once(',').unwrap();
            out.push((x.parse().unwrap(), y.parse().unwrap(), 0.0));
        }
    }
    out
}

/// Whether a point of radius r touches the rectangle.
fn covers((l, t, r, b): Rect, (x, y, radius): (f64, f64, f64)) -> bool {
    x + radius > l && x - radius < r && y + radius > t && y - radius < b
}

/// The legend boxes of `svg` that cover a point drawn before them.
fn covered(svg: &str) -> Vec<(Rect, (f64, f64, f64))> {
    let mut out = Vec::new();
    for (at, rect) in legends(svg) {
        for p in points(svg, at) {
            if covers(rect, p) {
                out.push((rect, p));
            }
        }
    }
    out
}

/// Every figure of every fixture page, with the page it is on.
fn every_figure() -> Vec<(String, String)> {
    let mut pages = every_page();
    // The polling kind with its projection drawn.
    let polling = sweep(&polling_toml(), |p| {
        (100.0, 0.0, p.connections as f64 / 100.0)
    });
    pages.push(("polling", render(&polling, Format::HTML).unwrap()));
    pages
        .into_iter()
        .flat_map(|(kind, html)| {
            figures_of(&html)
                .into_iter()
                .map(move |f| (format!("{kind} {}", f.name), f.svg))
        })
        .collect()
}

#[test]
fn no_legend_covers_a_plotted_point() {
    let figures = every_figure();
    assert!(figures.len() >= 15, "{} figures", figures.len());
    let mut with_legend = 0;
    for (name, svg) in &figures {
        with_legend += usize::from(!legends(svg).is_empty());
        let bad = covered(svg);
        assert!(bad.is_empty(), "{name}: legend covers {bad:?}");
    }
    assert!(with_legend >= 10, "{with_legend} figures with a legend");
}

#[test]
fn a_legend_over_the_data_is_caught() {
    // The check itself: a legend box drawn over a point fails.
    let svg = r##"<svg><circle cx="50" cy="50" r="4" fill="#000"/><polyline fill="none" points="10,10 60,60 90,90 "/><rect x="40" y="40" width="30" height="30" opacity="1" fill="none" stroke="#AAAAAA"/><circle cx="55" cy="55" r="4"/></svg>"##;
    let bad = covered(svg);
    assert_eq!(bad.len(), 2, "{bad:?}");
    let outside = svg.replace("x=\"40\" y=\"40\"", "x=\"200\" y=\"40\"");
    assert!(covered(&outside).is_empty());
}

#[test]
fn no_text_is_smaller_than_12_px() {
    for (name, svg) in every_figure() {
        for (_, t) in tags(&svg, "text") {
            let size = num(t, "font-size");
            assert!(size >= 12.0, "{name}: font-size {size} in {t}");
        }
    }
}

#[test]
fn figures_are_as_wide_as_the_text() {
    for (kind, html) in every_page() {
        for svg in html.split("<svg").skip(1) {
            assert!(
                svg.starts_with(" style=\"width:100%"),
                "{kind}: {}",
                &svg[..80.min(svg.len())]
            );
        }
    }
    for (name, svg) in every_figure() {
        assert!(svg.starts_with("<?xml"), "{name}");
        assert!(!svg.contains("width:100%"), "{name}: exported at its size");
        assert!(num(&svg, "width") >= 960.0, "{name}");
    }
}
