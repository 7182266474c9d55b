//! `connlab webset`: web file sets for the HTTP workload.

use crate::Exit;
use anyhow::{anyhow, Context};
use clap::{Args, Subcommand};
use connlab_webset::{generate, Manifest, Model, ModelOptions};
use std::path::PathBuf;
use std::process::ExitCode;

/// Subcommands of `connlab webset`.
#[derive(Args, Debug)]
pub(crate) struct WebsetArgs {
    #[command(subcommand)]
    command: WebsetCommand,
}

#[derive(Subcommand, Debug)]
enum WebsetCommand {
    /// Write a file set and DIR/manifest.csv, and print its size statistics.
    Generate(GenerateArgs),
    /// Print the size statistics of an existing manifest.
    Stats(StatsArgs),
}

/// Flags of `connlab webset generate`.
#[derive(Args, Debug)]
#[command(after_help = "\
Models:
  paper      the load-balancing paper's set: 861 files, 35 B to 729 KB, mean 9.6 KB
             (KB = 1,000 B): lognormal order statistics fitted to those three facts
             (see the connlab-webset docs); every file equally popular
  specweb96  SPECweb96: --directories of 36 files in four size classes (102 B to
             921 KB), requests 35/50/14/1% by class
  surge      SURGE: --files sizes from a lognormal body and a Pareto tail (cut at
             --max-size), Zipf popularity (--zipf)

The files are real files (serve DIR with nginx, e.g. `root DIR;`); manifest.csv has the
columns path,size_bytes,weight with paths relative to DIR. The same model, seed and
options give the same files.

Examples:
  connlab webset generate /srv/www --model paper
  connlab webset generate /srv/www --model surge --files 5000 --zipf 0.8 --seed 7")]
pub(crate) struct GenerateArgs {
    /// Directory to write (created if missing).
    dir: PathBuf,
    /// File-set model: paper, specweb96 or surge.
    #[arg(long, default_value = "paper")]
    model: Model,
    /// Seed of every random choice.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// specweb96: directories of 36 files.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    directories: u32,
    /// surge: number of files.
    #[arg(long, default_value_t = 2000, value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    files: u32,
    /// surge: Zipf exponent of popularity.
    #[arg(long, default_value_t = 1.0)]
    zipf: f64,
    /// surge: largest file, e.g. 10MiB or 10000000.
    #[arg(long, default_value = "10MiB", value_parser = crate::units::parse_size)]
    max_size: u64,
    /// Write into DIR even if it already holds a manifest.csv.
    #[arg(long)]
    force: bool,
}

/// Flags of `connlab webset stats`.
#[derive(Args, Debug)]
pub(crate) struct StatsArgs {
    /// A manifest.csv (or the directory holding it).
    manifest: PathBuf,
}

/// Runs a `webset` subcommand.
pub(crate) fn run(args: WebsetArgs) -> Result<ExitCode, Exit> {
    match args.command {
        WebsetCommand::Generate(a) => generate_set(a),
        WebsetCommand::Stats(a) => {
            let path = if a.manifest.is_dir() {
                a.manifest.join("manifest.csv")
            } else {
                a.manifest
            };
            let m = Manifest::read(&path).map_err(|e| Exit::usage(anyhow!("{e}")))?;
            print_stats(&m);
            Ok(ExitCode::SUCCESS)
        }
    }
}

fn generate_set(a: GenerateArgs) -> Result<ExitCode, Exit> {
    if !(a.zipf.is_finite() && (0.0..=10.0).contains(&a.zipf)) {
        return Err(Exit::usage(anyhow!(
            "--zipf {}: the exponent must be between 0 and 10",
            a.zipf
        )));
    }
    if a.dir.join("manifest.csv").exists() && !a.force {
        return Err(Exit::usage(anyhow!(
            "{} already holds a file set (manifest.csv); pass --force to overwrite it",
            a.dir.display()
        )));
    }
    let options = ModelOptions {
        seed: a.seed,
        directories: a.directories as usize,
        files: a.files as usize,
        zipf: a.zipf,
        max_size: a.max_size,
    };
    let m = generate(a.model, &options);
    m.write_files(&a.dir)
        .with_context(|| format!("writing the file set to {}", a.dir.display()))?;
    eprintln!(
        "connlab webset: {} files of model {} in {}",
        m.entries.len(),
        a.model.name(),
        a.dir.display()
    );
    print_stats(&m);
    Ok(ExitCode::SUCCESS)
}

/// Prints the statistics the issue and the paper quote, one per line, in
/// bytes (and KB = 1,000 bytes).
fn print_stats(m: &Manifest) {
    let Some(s) = m.stats() else { return };
    let kb = |b: f64| {
        if b < 1000.0 {
            format!("{b:.0} B")
        } else {
            format!("{b:.0} B ({:.1} KB)", b / 1000.0)
        }
    };
    println!("count   {}", s.count);
    println!("min     {}", kb(s.min as f64));
    println!("max     {}", kb(s.max as f64));
    println!("mean    {}", kb(s.mean));
    println!("median  {}", kb(s.median));
    println!("total   {}", kb(s.total as f64));
    println!("mean per request (by popularity)  {}", kb(s.weighted_mean));
}
