//! `connlab serve`: the reference server.

use crate::units::{parse_duration, parse_size_u32};
use crate::Exit;
use anyhow::Context;
use clap::Args;
use connlab_os::{CpuList, Shutdown};
use connlab_proto::http1::FileSizes;
use connlab_proto::Protocol;
use connlab_server::{EngineKind, Server, ServerConfig, ServerStats, UringFeatures};
use std::io::Write;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

/// Flags of `connlab serve`.
#[derive(Args, Debug)]
#[command(after_help = after_help())]
pub(crate) struct ServeArgs {
    /// I/O model: processes, threads, select, poll, epoll, uring, rtsig.
    #[arg(long, default_value = "epoll")]
    engine: EngineKind,
    /// Use edge-triggered epoll (only with --engine epoll).
    #[arg(long)]
    edge_triggered: bool,
    /// io_uring features of --engine uring: a comma list of names is the
    /// whole set; one starting with `-NAME`/`+NAME` changes the default (all
    /// but sqpoll); `none`, `all`, `default` reset. Names: multishot-accept,
    /// multishot-recv, buf-ring, ring-send, defer-taskrun, fixed-files,
    /// sqpoll. Without the flag, $CONNLAB_URING_FEATURES if set.
    #[arg(long, value_name = "LIST", allow_hyphen_values = true)]
    uring_features: Option<UringFeatures>,
    /// Address to listen on (port 0 picks a free port).
    #[arg(long, default_value = "127.0.0.1:7070")]
    listen: SocketAddr,
    /// Wire format: clb1 or http (see shared/protocol.md).
    #[arg(long, default_value = "clb1")]
    protocol: Protocol,
    /// Largest request/response (CLB1 req_len, resp_len; HTTP /bytes/N), e.g. 16MiB.
    #[arg(long, value_parser = parse_size_u32, default_value = "16MiB")]
    max_message: u32,
    /// listen(2) backlog (the kernel caps it at net.core.somaxconn).
    #[arg(long, default_value_t = 4096, value_parser = clap::value_parser!(i32).range(1..))]
    backlog: i32,
    /// Pin the server (and its threads and children) to these CPUs, e.g. 0 or 0-1;
    /// with --workers, worker i runs on the i-th CPU of the list.
    #[arg(long, value_name = "LIST")]
    cpu: Option<CpuList>,
    /// Event loops, one thread each (select, poll, epoll, uring, rtsig): --stats
    /// then gives each loop's connections, requests, CPU and wake-ups, and
    /// the imbalance (most connections in one loop over the mean).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=1024))]
    workers: u16,
    /// How several loops accept: reuseport (a listener each, SO_REUSEPORT;
    /// the kernel hashes connections to them) or shared (one listener all
    /// watch; epoll wakes one loop per connection with EPOLLEXCLUSIVE, rtsig
    /// has one loop take each of its signals).
    #[arg(long, default_value = "reuseport", value_name = "reuseport|shared")]
    accept: connlab_server::AcceptMode,
    /// Time every polling call and server cycle (select, poll, epoll) and
    /// write `poll_call_us` and `cycle_us` into --stats (with --workers, the
    /// first loop's).
    #[arg(long)]
    profile_poll: bool,
    /// Close a connection whose request head is not complete this long after
    /// its first byte (like nginx's client_header_timeout); `off` for none.
    #[arg(long, value_name = "DUR", default_value = "60s")]
    header_timeout: Timeout,
    /// Close a connection after this long with no byte moved either way;
    /// off by default, as the locality experiments keep idle connections open.
    #[arg(long, value_name = "DUR", default_value = "off")]
    idle_timeout: Timeout,
    /// Write statistics as JSON to FILE at shutdown.
    #[arg(long, value_name = "FILE")]
    stats: Option<PathBuf>,
    /// HTTP: also serve the paths of a web file set (manifest.csv of
    /// `connlab webset generate`, or its directory), each with the size its
    /// manifest gives, so `connlab load --manifest` runs against this server.
    #[arg(long, value_name = "DIR")]
    manifest: Option<PathBuf>,
}

/// The end of `connlab serve --help`: the engines, described by
/// [`EngineKind::describe`], then the limits and the lifecycle.
fn after_help() -> String {
    let mut text = String::from("Engines:\n");
    for engine in EngineKind::ALL {
        text.push_str(&help_item(engine.name(), engine.describe()));
    }
    text.push_str(AFTER_ENGINES);
    text
}

/// The help's text after the engine list.
const AFTER_ENGINES: &str = "
Limits (every engine; each hit is counted in --stats):
  --header-timeout  60s  a request head (CLB1 header, HTTP request line and
                         headers) must be complete this long after its first
                         byte, or the connection is closed (header_timeouts)
  --idle-timeout    off  close a connection after this long with no byte moved
                         either way (idle_timeouts); off by default because the
                         locality experiments keep idle connections open
  --max-message   16MiB  a larger CLB1 req_len/resp_len closes the connection
                         (protocol_errors); a larger HTTP /bytes/N gets 404

Prints `listening on IP:PORT` on stdout when ready. SIGINT/SIGTERM stop it;
it then writes --stats (JSON) and a summary table on stderr, and exits 0.";

/// Width the engine descriptions wrap at, in columns.
const HELP_WIDTH: usize = 80;

/// One `  name       text` entry, `text` wrapped at [`HELP_WIDTH`] under itself.
fn help_item(name: &str, text: &str) -> String {
    const INDENT: usize = 13;
    let mut out = format!("  {name:<width$}", width = INDENT - 3);
    let mut column = INDENT - 1;
    for word in text.split_whitespace() {
        if column > INDENT - 1 && column + 1 + word.len() > HELP_WIDTH {
            out.push('\n');
            out.push_str(&" ".repeat(INDENT - 1));
            column = INDENT - 1;
        }
        out.push(' ');
        out.push_str(word);
        column += 1 + word.len();
    }
    out.push('\n');
    out
}

/// A timeout flag's value: a duration, or none (`off` or `0`).
#[derive(Clone, Copy, Debug)]
struct Timeout(Option<Duration>);

impl std::str::FromStr for Timeout {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        if s.trim() == "off" {
            return Ok(Timeout(None));
        }
        let d = parse_duration(s).map_err(|e| format!("{e} (or `off`)"))?;
        Ok(Timeout((!d.is_zero()).then_some(d)))
    }
}

/// The environment variable `--uring-features` defaults to.
const URING_FEATURES_ENV: &str = "CONNLAB_URING_FEATURES";

/// `--uring-features`, else the environment's, else the default set.
fn uring_features(args: &ServeArgs) -> Result<UringFeatures, Exit> {
    if let Some(features) = args.uring_features {
        return Ok(features);
    }
    match std::env::var(URING_FEATURES_ENV) {
        Ok(list) => list
            .parse()
            .map_err(|e| Exit::usage(anyhow::anyhow!("${URING_FEATURES_ENV}: {e}"))),
        Err(_) => Ok(UringFeatures::default()),
    }
}

/// Runs the server until SIGINT/SIGTERM.
pub(crate) fn run(args: ServeArgs) -> Result<ExitCode, Exit> {
    crate::cmd::check_output("--stats", args.stats.as_deref())?;
    if args.edge_triggered && args.engine != EngineKind::Epoll {
        return Err(Exit::usage(anyhow::anyhow!(
            "--edge-triggered needs --engine epoll (got --engine {})",
            args.engine
        )));
    }
    if args.uring_features.is_some() && args.engine != EngineKind::Uring {
        return Err(Exit::usage(anyhow::anyhow!(
            "--uring-features needs --engine uring (got --engine {})",
            args.engine
        )));
    }
    let mut config = ServerConfig::new(args.engine, args.listen, args.protocol);
    config.edge_triggered = args.edge_triggered;
    if args.engine == EngineKind::Uring {
        config.uring_features = uring_features(&args)?;
    }
    config.max_message = args.max_message;
    config.backlog = args.backlog;
    config.cpus = args.cpu;
    config.workers = usize::from(args.workers);
    config.accept = args.accept;
    config.profile_poll = args.profile_poll;
    if let Some(path) = &args.manifest {
        config.files = Some(file_sizes(path, args.protocol, args.max_message)?);
    }
    config.header_timeout = args.header_timeout.0;
    config.idle_timeout = args.idle_timeout.0;
    let shutdown = Shutdown::on_termination_signals().context("installing signal handlers")?;
    let server = match Server::bind(config) {
        Ok(s) => s,
        Err(e @ connlab_server::ServerError::Config(_)) => return Err(Exit::usage(e.into())),
        Err(e) => return Err(anyhow::Error::new(e).context("starting the server").into()),
    };
    let nofile = server.nofile();
    if nofile.raised() {
        eprintln!(
            "connlab: open-files limit raised from {} to {} (at most ~{} connections)",
            nofile.soft_before,
            nofile.soft,
            nofile.soft.saturating_sub(16)
        );
    }
    {
        let mut out = std::io::stdout().lock();
        // A closed stdout only loses the banner; the server still runs.
        let _ = writeln!(out, "listening on {}", server.local_addr());
        let _ = out.flush();
    }
    let stats = server.run(&shutdown).context("serving")?;
    if let Some(path) = &args.stats {
        crate::cmd::write_json("--stats", path, &stats)?;
    }
    print_table(&stats);
    Ok(ExitCode::SUCCESS)
}

/// The path-to-size table of `--manifest`, kept for the whole process.
fn file_sizes(
    path: &Path,
    protocol: Protocol,
    max_message: u32,
) -> Result<&'static FileSizes, Exit> {
    if protocol != Protocol::Http {
        return Err(Exit::usage(anyhow::anyhow!(
            "--manifest needs --protocol http"
        )));
    }
    let file = connlab_loadgen::manifest_file(path);
    let manifest = connlab_webset::Manifest::read(&file)
        .map_err(|e| Exit::usage(anyhow::anyhow!("--manifest {e}")))?;
    if let Some(big) = manifest
        .entries
        .iter()
        .find(|e| e.size_bytes > u64::from(max_message))
    {
        return Err(Exit::usage(anyhow::anyhow!(
            "--manifest {}: {} is {} bytes, above --max-message {max_message}; raise --max-message",
            file.display(),
            big.path,
            big.size_bytes
        )));
    }
    let table = FileSizes::new(
        manifest
            .entries
            .iter()
            .map(|e| (format!("/{}", e.path), e.size_bytes)),
    );
    // One table for the life of the server: every connection's session refers to it.
    Ok(Box::leak(Box::new(table)))
}

fn limit(seconds: Option<f64>) -> String {
    seconds.map_or_else(|| "off".to_string(), |s| format!("{s} s"))
}

fn print_table(s: &ServerStats) {
    let errors: u64 = s.protocol_errors.values().sum();
    let mut t = format!(
        "\nconnlab serve: engine {}{}, protocol {}, {:.1} s\n",
        s.engine,
        if s.edge_triggered {
            " (edge-triggered)"
        } else {
            ""
        },
        s.protocol,
        s.wall_s
    );
    for (name, value) in [
        ("connections accepted", s.connections_accepted.to_string()),
        ("connections peak", s.connections_peak.to_string()),
        (
            "connections shed (fd limit)",
            format!(
                "{} in {} episode(s) at the limit",
                s.connections_shed, s.fd_limit_episodes
            ),
        ),
        ("requests", s.requests.to_string()),
        ("protocol errors", errors.to_string()),
        (
            "header / idle timeouts",
            format!(
                "{} / {} (limits {} / {})",
                s.header_timeouts,
                s.idle_timeouts,
                limit(s.header_timeout_s),
                limit(s.idle_timeout_s)
            ),
        ),
        (
            "bytes in / out",
            format!("{} / {}", s.bytes_in, s.bytes_out),
        ),
        (
            "cpu user / sys",
            format!("{:.3} s / {:.3} s", s.cpu_user_s, s.cpu_sys_s),
        ),
        (
            "requests per cpu second",
            format!("{:.0}", s.requests_per_cpu_s),
        ),
        (
            "cpus used / allowed",
            format!("{} / {}", cpu_list(&s.cpus_used), cpu_list(&s.cpus_allowed)),
        ),
    ] {
        t.push_str(&format!("  {name:<28} {value}\n"));
    }
    for (kind, n) in s.protocol_errors.iter().filter(|(_, n)| **n > 0) {
        t.push_str(&format!("    {kind:<26} {n}\n"));
    }
    if s.connections_shed > 0 {
        t.push_str(&format!(
            "  warning: {} connections were shed at the open-files limit ({}); this run needed more descriptors\n",
            s.connections_shed, s.nofile.soft
        ));
    }
    eprint!("{t}");
}

/// `0,2,3` (`-` for none).
fn cpu_list(cpus: &[usize]) -> String {
    if cpus.is_empty() {
        return "-".into();
    }
    cpus.iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn help_lists_every_engine_with_its_description() {
        let help = after_help();
        for engine in EngineKind::ALL {
            let first_word = engine.describe().split_whitespace().next().unwrap_or("");
            assert!(
                help.contains(&format!("  {:<10} {first_word}", engine.name())),
                "{help}"
            );
        }
        assert!(help.lines().all(|l| l.len() <= HELP_WIDTH), "{help}");
        assert!(help.contains("Limits (every engine;"), "{help}");
    }

    #[test]
    fn help_items_wrap_under_their_text() {
        let item = help_item("poll", &"word ".repeat(30));
        let lines: Vec<&str> = item.lines().collect();
        assert!(lines.len() > 1, "{item}");
        assert!(lines[0].starts_with("  poll       word"), "{item}");
        assert!(
            lines[1..]
                .iter()
                .all(|l| l.starts_with("             word")),
            "{item}"
        );
    }
}
