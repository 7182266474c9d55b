//! `connlab report`: tables and plots from a sweep's results directory.

use crate::Exit;
use anyhow::{anyhow, Context};
use clap::Args;
use connlab_lab::SweepDir;
use connlab_report::Format;
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
  connlab report results/locality-table3 --format csv -o table3.csv")]
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
}

/// Renders the report.
pub(crate) fn run(args: ReportArgs) -> Result<ExitCode, Exit> {
    if connlab_lab::SingleIpSweep::is_singleip_dir(&args.dir) {
        return singleip_report(&args);
    }
    if connlab_lab::PeersDir::info_path(&args.dir).exists() {
        return peers_report(&args);
    }
    if !args.baseline.is_empty() {
        return Err(Exit::usage(anyhow!(
            "--baseline: only for the results of a peers experiment (kind = \"peers\"); {} is not one",
            args.dir.display()
        )));
    }
    if connlab_lab::LoadgenDir::info_path(&args.dir).exists() {
        let dir = connlab_lab::LoadgenDir::open(&args.dir).map_err(|e| Exit::usage(e.into()))?;
        let text = connlab_report::render_loadgen(&dir, args.format).map_err(|e| anyhow!(e))?;
        let html = (args.format == Format::Html).then(|| args.dir.join("report.html"));
        write_output(args.output.clone().or(html), &text)?;
        return Ok(ExitCode::SUCCESS);
    }
    if args.dir.join("pipeline.json").exists() {
        return pipeline_report(&args);
    }
    if !SweepDir::info_path(&args.dir).exists() {
        return Err(Exit::usage(anyhow!(
            "{}: no sweep.json here; give the directory `connlab sweep --out DIR` wrote",
            args.dir.display()
        )));
    }
    let dir = SweepDir::open(&args.dir).map_err(|e| Exit::usage(e.into()))?;
    let text = connlab_report::render(&dir, args.format).map_err(|e| anyhow!(e))?;
    let output = args
        .output
        .clone()
        .or_else(|| (args.format == Format::Html).then(|| args.dir.join("report.html")));
    match output {
        Some(path) => {
            connlab_os::files::write_atomic(&path, &text)
                .with_context(|| format!("writing {}", path.display()))?;
            eprintln!(
                "connlab report: {} ({} of {} points) -> {}",
                dir.info.name,
                dir.points.len(),
                dir.info.points_total,
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

/// The report of a pipeline sweep (`DIR/pipeline.json`).
fn pipeline_report(args: &ReportArgs) -> Result<ExitCode, Exit> {
    let sweep = connlab_lab::PipelineSweep::open(&args.dir).map_err(|e| Exit::usage(e.into()))?;
    let text = connlab_report::render_pipeline(&sweep, args.format).map_err(|e| anyhow!(e))?;
    let output = args
        .output
        .clone()
        .or_else(|| (args.format == Format::Html).then(|| args.dir.join("report.html")));
    write_output(output, &text)?;
    if let Some(path) = &args.output {
        eprintln!(
            "connlab report: {} ({} of {} runs) -> {}",
            sweep.experiment.name,
            sweep.runs.len(),
            sweep.runs_total,
            path.display()
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// The report of a single-IP sweep (`kind = "singleip"`).
fn singleip_report(args: &ReportArgs) -> Result<ExitCode, Exit> {
    let sweep = connlab_lab::SingleIpSweep::open(&args.dir).map_err(|e| Exit::usage(e.into()))?;
    let text = connlab_report::render_singleip(&sweep, args.format).map_err(|e| anyhow!(e))?;
    let output = args
        .output
        .clone()
        .or_else(|| (args.format == Format::Html).then(|| args.dir.join("report.html")));
    if let Some(path) = &output {
        eprintln!(
            "connlab report: {} ({} of {} points) -> {}",
            sweep.experiment.name,
            sweep.points.len(),
            sweep.info.points_total,
            path.display()
        );
    }
    write_output(output, &text)?;
    Ok(ExitCode::SUCCESS)
}

/// Writes the report to `path`, or to standard output.
fn write_output(path: Option<PathBuf>, text: &str) -> Result<(), Exit> {
    match path {
        Some(path) => connlab_os::files::write_atomic(&path, text)
            .with_context(|| format!("writing {}", path.display()))?,
        None => {
            let mut out = std::io::stdout().lock();
            out.write_all(text.as_bytes())
                .and_then(|()| out.flush())
                .context("writing the report to standard output")?;
        }
    }
    Ok(())
}

/// The report of a peers sweep (`DIR/peers.json`).
fn peers_report(args: &ReportArgs) -> Result<ExitCode, Exit> {
    let mut dir = connlab_lab::PeersDir::open(&args.dir).map_err(|e| Exit::usage(e.into()))?;
    if !args.baseline.is_empty() {
        let exp = &dir.info.experiment;
        if let Some(unknown) = args
            .baseline
            .iter()
            .find(|b| exp.contender_named(b).is_none())
        {
            let names: Vec<&str> = exp.contender.iter().map(|c| c.name.as_str()).collect();
            return Err(Exit::usage(anyhow!(
                "--baseline {unknown:?}: no such contender in {} (contenders: {})",
                args.dir.display(),
                names.join(", ")
            )));
        }
        // The A/A control was the file's first baseline: it stays the
        // control (the plan's ids, and so the points not measured yet).
        let control = exp.control_contender().unwrap_or("none").to_string();
        dir.info.experiment.validity.control = Some(control);
        dir.info.experiment.baseline = connlab_lab::Baseline::Many(args.baseline.clone());
    }
    let text = connlab_report::render_peers(&dir, args.format).map_err(|e| anyhow!(e))?;
    let output = args
        .output
        .clone()
        .or_else(|| (args.format == Format::Html).then(|| args.dir.join("report.html")));
    if let Some(path) = &output {
        eprintln!(
            "connlab report: {} ({} of {} points) -> {}",
            dir.info.experiment.name,
            dir.points.len(),
            dir.info.points_total,
            path.display()
        );
    }
    write_output(output, &text)?;
    Ok(ExitCode::SUCCESS)
}
