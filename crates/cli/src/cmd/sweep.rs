//! `connlab sweep`: runs an experiment file point by point.

use crate::Exit;
use clap::Args;
use std::path::PathBuf;
use std::process::ExitCode;

/// Flags of `connlab sweep`.
#[derive(Args, Debug)]
pub(crate) struct SweepArgs {
    /// The experiment file (TOML), e.g. experiments/locality-table3.toml.
    file: PathBuf,
}

/// Runs the sweep.
pub(crate) fn run(args: SweepArgs) -> Result<ExitCode, Exit> {
    Err(Exit::usage(anyhow::anyhow!(
        "connlab sweep {}: not built yet",
        args.file.display()
    )))
}
