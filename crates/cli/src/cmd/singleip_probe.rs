//! `connlab singleip probe` (hidden): the flags of the processes a
//! single-IP sweep runs inside its namespaces (`connlab_lab::probe`).
//! Results go to `--json` as `connlab_lab::ProbeRtt` / a list of
//! `ProbeTransfer`.

use crate::Exit;
use anyhow::{anyhow, Context};
use clap::{Args, Subcommand};
use connlab_lab::probe;
use std::io::Write;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Flags of `connlab singleip probe`.
#[derive(Args, Debug)]
pub(crate) struct ProbeArgs {
    #[command(subcommand)]
    command: ProbeCommand,
}

#[derive(Subcommand, Debug)]
enum ProbeCommand {
    /// Echo and bulk server (a thread per connection).
    Serve {
        /// Where to listen.
        #[arg(long)]
        listen: SocketAddr,
    },
    /// 4-byte round trips on one connection.
    Rtt {
        /// The server (through the front end).
        #[arg(long)]
        target: SocketAddr,
        /// Measured round trips.
        #[arg(long)]
        count: u32,
        /// Round trips before measuring.
        #[arg(long, default_value_t = 50)]
        warmup: u32,
        /// Result file.
        #[arg(long)]
        json: PathBuf,
    },
    /// Transfers of --size bytes, one after another.
    Get {
        /// The server (through the front end).
        #[arg(long)]
        target: SocketAddr,
        /// Bytes per transfer.
        #[arg(long)]
        size: u64,
        /// Transfers.
        #[arg(long, default_value_t = 1)]
        count: u32,
        /// Start at this Unix time (seconds).
        #[arg(long)]
        start_at: Option<f64>,
        /// Stop receiving at this Unix time.
        #[arg(long)]
        stop_at: Option<f64>,
        /// Count bytes per bin from this Unix time.
        #[arg(long)]
        epoch: Option<f64>,
        /// Bin width, seconds.
        #[arg(long, default_value_t = 0.1)]
        bin: f64,
        /// Result file.
        #[arg(long)]
        json: PathBuf,
    },
}

/// Runs `connlab singleip probe`.
pub(crate) fn run(args: ProbeArgs) -> Result<ExitCode, Exit> {
    match args.command {
        ProbeCommand::Serve { listen } => {
            probe::serve(listen, || {
                println!("probe server ready on {listen}");
                let _ = std::io::stdout().flush();
            })?;
            Ok(ExitCode::SUCCESS)
        }
        ProbeCommand::Rtt {
            target,
            count,
            warmup,
            json,
        } => write(&json, &probe::rtt(target, count, warmup)?),
        ProbeCommand::Get {
            target,
            size,
            count,
            start_at,
            stop_at,
            epoch,
            bin,
            json,
        } => {
            if bin.is_nan() || bin <= 0.0 {
                return Err(Exit::usage(anyhow!("--bin {bin}: a positive number")));
            }
            let out = probe::transfers(target, size, count, start_at, stop_at, epoch, bin)?;
            write(&json, &out)
        }
    }
}

fn write<T: serde::Serialize>(path: &Path, value: &T) -> Result<ExitCode, Exit> {
    let text = serde_json::to_string(value).context("encoding the result")?;
    connlab_os::files::write_atomic(path, text)
        .with_context(|| format!("writing --json {}", path.display()))?;
    Ok(ExitCode::SUCCESS)
}
