//! `connlab merge`: one result from the shard results of one run.

use crate::cmd::output::print_summary;
use crate::Exit;
use clap::Args;
use connlab_loadgen::LoadResult;
use std::path::PathBuf;
use std::process::ExitCode;

/// Flags of `connlab merge`.
#[derive(Args, Debug)]
#[command(after_help = "\
Counts add, histograms add exactly (HdrHistogram), the send deviation pools over the
shards; the merged summaries are recomputed from the merged histograms. The result has
the schema of a single run, with a `merged` field naming the files.

Example:
  connlab merge shard1.json shard2.json --json merged.json")]
pub(crate) struct MergeArgs {
    /// Result files of `connlab load --shard i/N --json FILE`, every shard once.
    #[arg(required = true, value_name = "FILES")]
    files: Vec<PathBuf>,
    /// Write the merged result as JSON to FILE.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
}

/// Reads, merges, writes and summarises.
pub(crate) fn run(args: MergeArgs) -> Result<ExitCode, Exit> {
    let merged = merge_files(&args.files).map_err(Exit::usage)?;
    if let Some(path) = &args.json {
        crate::cmd::write_json("--json", path, &merged)?;
    }
    print_summary(&merged);
    Ok(ExitCode::SUCCESS)
}

/// Merges shard result files into one result.
pub(crate) fn merge_files(files: &[PathBuf]) -> anyhow::Result<LoadResult> {
    connlab_lab::run::merge_files(files)
}
