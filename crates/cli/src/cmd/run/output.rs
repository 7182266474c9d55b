//! What `connlab run` writes at the end besides its result (which
//! `connlab_report::run_result` renders): the HTML page with `--out`
//! (`runs/*.json` and `comparison.json` are the library's), and the flags
//! that choose the result's format and colour.

use crate::Exit;
use anyhow::Context;
use connlab_lab::run::compare_run::CompareOutcome;
use connlab_os::files::write_atomic;
use connlab_report::run_result::{ColorChoice as Colour, RunFormat};
use std::path::Path;

/// `--format`: what the result looks like on stdout.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Format {
    /// A table with the comparisons and the recommendation.
    Text,
    /// The comparison, its table, the baseline and the failures.
    Json,
    /// A GitHub-flavoured table with the comparisons.
    Markdown,
    /// The table, one row per server.
    Csv,
}

impl From<Format> for RunFormat {
    fn from(f: Format) -> RunFormat {
        match f {
            Format::Text => RunFormat::Text,
            Format::Json => RunFormat::Json,
            Format::Markdown => RunFormat::Markdown,
            Format::Csv => RunFormat::Csv,
        }
    }
}

/// `--color`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum ColorChoice {
    /// On a terminal, unless `NO_COLOR` is set.
    Auto,
    /// Always.
    Always,
    /// Never.
    Never,
}

impl From<ColorChoice> for Colour {
    fn from(c: ColorChoice) -> Colour {
        match c {
            ColorChoice::Auto => Colour::Auto,
            ColorChoice::Always => Colour::Always,
            ColorChoice::Never => Colour::Never,
        }
    }
}

/// Writes `DIR/comparison.json` and `DIR/index.html`.
pub(super) fn write_page(dir: &Path, o: &CompareOutcome) -> Result<(), Exit> {
    o.write_comparison(dir)?;
    let command = std::env::args().collect::<Vec<_>>().join(" ");
    let page = connlab_report::compare_run::run_page(o, command);
    let html = connlab_report::run::render_run(&page).context("rendering the page")?;
    let path = dir.join("index.html");
    write_atomic(&path, html).with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}
