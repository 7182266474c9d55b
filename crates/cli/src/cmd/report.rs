//! `connlab report`: tables and plots from a sweep's results directory; the
//! registry of kinds opens it and the kind renders it.

use crate::Exit;
use anyhow::{anyhow, Context};
use clap::Args;
use connlab_kinds::{Format, Registry, ReportOptions};
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

/// Flags of `connlab report`.
#[derive(Args, Debug)]
#[command(after_help = "\
HTML (the default) is one self-contained file: the paper's table beside ours (a row per
setting and engine; paper | ours | ours/paper for each statistic, ours the median over
repetitions with their lowest-highest spread), the paper's derived tables (Table 5 from the
same points), each claim of the paper with the rows it compares and a verdict (holds, does
not hold, cannot be measured here) judged across the spread, SVG plots with the paper's
values on the same axes, the environment and every warning. Markdown carries the same;
CSV is long form (kind = cell, derived or claim; one row per statistic or comparison).

Examples:
  connlab report results/locality-table3 -o table3.html
  connlab report results/locality-table3 --format markdown > table3.md
  connlab report results/locality-table3 --format csv -o table3.csv
  connlab report results/locality-table3 --figures figures/   (each plot also as its own SVG)")]
pub(crate) struct ReportArgs {
    /// The results directory written by `connlab sweep --out DIR`.
    dir: PathBuf,
    /// Output file [default: DIR/report.html for html, standard output otherwise].
    #[arg(short = 'o', long, value_name = "FILE")]
    output: Option<PathBuf>,
    /// html, markdown or csv.
    #[arg(long, default_value = "html")]
    format: Format,
    /// Peers experiments: divide by these contenders instead of the file's
    /// `baseline` (comma-separated, in order of preference).
    #[arg(long, value_delimiter = ',', value_name = "NAME")]
    baseline: Vec<String>,
    /// Also write every figure of the page as its own SVG file into DIR
    /// (made if missing), named by its place and title.
    #[arg(long, value_name = "DIR")]
    figures: Option<PathBuf>,
}

/// Renders the report of a results directory of any kind.
pub(crate) fn run(args: ReportArgs) -> Result<ExitCode, Exit> {
    let options = ReportOptions {
        baseline: args.baseline.clone(),
    };
    let results = Registry::builtin()
        .open(&args.dir, &options)
        .map_err(|e| Exit::usage(anyhow!(e)))?;
    let text = results.render(args.format).map_err(|e| anyhow!(e))?;
    if let Some(dir) = &args.figures {
        let html = if args.format == Format::HTML {
            text.clone()
        } else {
            results.render(Format::HTML).map_err(|e| anyhow!(e))?
        };
        let written = connlab_report::write_figures(&connlab_report::figures_of(&html), dir)
            .with_context(|| format!("writing the figures into {}", dir.display()))?;
        eprintln!(
            "connlab report: {} figures -> {}",
            written.len(),
            dir.display()
        );
    }
    let output = args
        .output
        .clone()
        .or_else(|| (args.format == Format::HTML).then(|| args.dir.join("report.html")));
    match output {
        Some(path) => {
            connlab_os::files::write_atomic(&path, &text)
                .with_context(|| format!("writing {}", path.display()))?;
            eprintln!(
                "connlab report: {} ({}) -> {}",
                results.name(),
                results.done(),
                path.display()
            );
        }
        None => {
            let mut out = std::io::stdout().lock();
            out.write_all(text.as_bytes())
                .and_then(|()| out.flush())
                .context("writing the report to standard output")?;
        }
    }
    Ok(ExitCode::SUCCESS)
}
