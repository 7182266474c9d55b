//! Snapshots (`insta`) of every format of three report kinds on small
//! fixtures (the locality kind, a loadgen sweep and a peers sweep) and of
//! the HTML page of every other kind (gateway, pipeline, single-IP, the
//! reproduce index, the `connlab run` page, soak). A change to any output
//! shows up as a snapshot diff to review.

use crate::pages::every_page;
use crate::support::{loadgen, locality, peers, scaling};
use connlab_report::{render, render_loadgen, render_peers, Format};

/// An HTML page with each SVG plot's body left out (the plots have tests
/// of their own), so the snapshot stays readable.
fn without_svg(html: &str) -> String {
    let mut out = String::new();
    let mut rest = html;
    while let Some(start) = rest.find("<svg") {
        out.push_str(&rest[..start]);
        out.push_str("<svg>…</svg>");
        let end = rest[start..]
            .find("</svg>")
            .map_or(rest.len(), |e| start + e + 6);
        rest = &rest[end..];
    }
    out.push_str(rest);
    out
}

#[test]
fn locality_in_every_format() {
    let dir = locality();
    insta::assert_snapshot!(
        "locality_html",
        without_svg(&render(&dir, Format::HTML).unwrap())
    );
    insta::assert_snapshot!("locality_markdown", render(&dir, Format::MARKDOWN).unwrap());
    insta::assert_snapshot!("locality_csv", render(&dir, Format::CSV).unwrap());
}

#[test]
fn loadgen_in_every_format() {
    let dir = loadgen();
    insta::assert_snapshot!("loadgen_html", render_loadgen(&dir, Format::HTML).unwrap());
    insta::assert_snapshot!(
        "loadgen_markdown",
        render_loadgen(&dir, Format::MARKDOWN).unwrap()
    );
    insta::assert_snapshot!("loadgen_csv", render_loadgen(&dir, Format::CSV).unwrap());
}

#[test]
fn peers_in_every_format() {
    let dir = peers();
    insta::assert_snapshot!(
        "peers_html",
        without_svg(&render_peers(&dir, Format::HTML).unwrap())
    );
    insta::assert_snapshot!(
        "peers_markdown",
        render_peers(&dir, Format::MARKDOWN).unwrap()
    );
    insta::assert_snapshot!("peers_csv", render_peers(&dir, Format::CSV).unwrap());
}

/// A scaling sweep (issue 33): the workers axis, the speedup, the USL
/// fit and the client-limited points, in HTML and CSV.
#[test]
fn scaling_in_html_and_csv() {
    let dir = scaling();
    insta::assert_snapshot!(
        "scaling_html",
        without_svg(&render_peers(&dir, Format::HTML).unwrap())
    );
    insta::assert_snapshot!("scaling_csv", render_peers(&dir, Format::CSV).unwrap());
}

#[test]
fn every_other_page_kind_in_html() {
    for (kind, html) in every_page() {
        if ["locality", "loadgen", "peers", "scaling"].contains(&kind) {
            continue;
        }
        // Machine-made paths and the temporary directory differ per run.
        let html = without_svg(&html).replace(&std::env::temp_dir().display().to_string(), "TMP");
        insta::assert_snapshot!(format!("{kind}_html"), html);
    }
}
