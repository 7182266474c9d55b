//! The `connlab` binary: parses the command line, runs one subcommand, and maps
//! the outcome to an exit code. All work happens in the library crates.

mod cmd;
use connlab_measure::units;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};
use std::process::ExitCode;

/// Exit codes, as listed in `--help` and the README.
const AFTER_HELP: &str = "\
Exit codes:
  0    the run completed and its results are written
  1    the run failed (setup error, peer died before any result, results not
       writable, or `load`: more than --max-error-ratio of the requests failed)
  2    bad command line or configuration
  3    `run`: a --fail-if condition held for some row
  4    `run`: a row regressed past --max-regression against --baseline
  130  interrupted by Ctrl-C after the results measured so far were written";

/// connlab: measure and build high-concurrency network servers.
#[derive(Parser, Debug)]
#[command(name = "connlab", version, about, after_help = AFTER_HELP)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// The main job: start a server per engine on loopback, load it, compare.
    Run(cmd::run::RunArgs),
    /// Generate load with communication locality against a server.
    Load(cmd::load::LoadArgs),
    /// Run the reference server with a chosen I/O model (engine).
    Serve(cmd::serve::ServeArgs),
    /// Merge the results of `connlab load --shard i/N` into one result.
    Merge(cmd::merge::MergeArgs),
    /// Run an experiment file: every point, server and client shards in namespaces.
    Sweep(cmd::sweep::SweepArgs),
    /// Tables and plots (HTML, Markdown, CSV) from a sweep's results directory.
    Report(cmd::report::ReportArgs),
    /// Every paper's experiments, their reports and one index of claims and verdicts.
    Reproduce(cmd::reproduce::ReproduceArgs),
    /// What this machine can judge: CPUs, limits, steal, A/A noise, each experiment.
    Doctor(cmd::doctor::DoctorArgs),
    /// Load-balancing gateway in front of N backends (nftables NAT or user-space proxy).
    Gateway(cmd::gateway::GatewayArgs),
    /// Run a command (a backend) under a CPU quota (cgroup cpu controller).
    Cap(cmd::cap::CapArgs),
    /// Web file sets for the HTTP workload (generate, stats).
    Webset(cmd::webset::WebsetArgs),
    /// Layer-parallel protocol pipeline against run-to-completion (one run, or --costs).
    Pipeline(cmd::pipeline::PipelineArgs),
    /// User-space link emulator: a router adding delay, jitter, loss and a rate limit.
    Linkem(cmd::linkem::LinkemArgs),
    /// Single-IP cluster front end: I/O server and application nodes.
    Singleip(cmd::singleip::SingleIpArgs),
    /// Fault soak: load through the gateway and single-IP front end while faults fire.
    Soak(cmd::soak::SoakArgs),
}

/// A failure that carries its own exit code.
#[derive(Debug)]
pub(crate) struct Exit {
    code: u8,
    error: anyhow::Error,
}

impl Exit {
    /// A bad command line or configuration (exit 2).
    pub(crate) fn usage(error: anyhow::Error) -> Exit {
        Exit { code: 2, error }
    }
}

impl From<anyhow::Error> for Exit {
    fn from(error: anyhow::Error) -> Exit {
        Exit { code: 1, error }
    }
}

fn main() -> ExitCode {
    // `run` shares `load`'s workload flags but has the paper's defaults.
    let command = Cli::command().mut_subcommand("run", cmd::run::with_run_defaults);
    let matches = command.get_matches();
    let cli = match Cli::from_arg_matches(&matches) {
        Ok(cli) => cli,
        Err(e) => e.exit(),
    };
    let result = match cli.command {
        Command::Run(args) => cmd::run::run(args),
        Command::Load(args) => cmd::load::run(args),
        Command::Serve(args) => cmd::serve::run(args),
        Command::Merge(args) => cmd::merge::run(args),
        Command::Sweep(args) => cmd::sweep::run(args),
        Command::Report(args) => cmd::report::run(args),
        Command::Reproduce(args) => cmd::reproduce::run(args),
        Command::Doctor(args) => cmd::doctor::run(args),
        Command::Webset(args) => cmd::webset::run(args),
        Command::Gateway(args) => cmd::gateway::run(args),
        Command::Cap(args) => cmd::cap::run(args),
        Command::Pipeline(args) => cmd::pipeline::run(args),
        Command::Linkem(args) => cmd::linkem::run(args),
        Command::Singleip(args) => cmd::singleip::run(args),
        Command::Soak(args) => cmd::soak::run(args),
    };
    match result {
        Ok(code) => code,
        Err(Exit { code, error }) => {
            eprintln!("connlab: error: {}", chain_text(&error));
            ExitCode::from(code)
        }
    }
}

/// An error and its causes joined by `: `, leaving out a cause the message
/// before it already ends with (errors that print their source, as
/// `path: reason` does, would otherwise say the reason twice).
fn chain_text(error: &anyhow::Error) -> String {
    let mut text = error.to_string();
    for cause in error.chain().skip(1) {
        let cause = cause.to_string();
        if !text.ends_with(&cause) {
            text = format!("{text}: {cause}");
        }
    }
    text
}
