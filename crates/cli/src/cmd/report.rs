//! `connlab report`: tables and plots from a sweep's results directory.
//! (Placeholder while the report crate is written; replaced whole.)

use crate::Exit;
use clap::Args;
use std::path::PathBuf;
use std::process::ExitCode;

/// Flags of `connlab report`.
#[derive(Args, Debug)]
pub(crate) struct ReportArgs {
    /// The results directory written by `connlab sweep --out DIR`.
    dir: PathBuf,
}

/// Renders the report.
pub(crate) fn run(args: ReportArgs) -> Result<ExitCode, Exit> {
    Err(Exit::usage(anyhow::anyhow!(
        "connlab report {}: not built yet",
        args.dir.display()
    )))
}
