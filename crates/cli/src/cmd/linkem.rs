//! `connlab linkem`: the user-space link emulator. `run` forwards between two
//! interfaces of the current (router) namespace with delay, jitter, loss and
//! a rate limit; `lab` builds `left - router - right` namespaces and checks
//! the emulator against its configuration.

use crate::Exit;
use anyhow::{anyhow, Context};
use clap::{Args, Subcommand};
use connlab_linkem::config::{parse_loss, parse_rate};
use connlab_linkem::emulator::{self, Report};
use connlab_linkem::validate::{self, Validation, ValidationSpec};
use connlab_linkem::{
    EmulatorOptions, LinkConfig, LinkemError, Loss, QueueLimit, Router, RouterSpec,
};
use connlab_measure::units::{parse_duration, parse_size};
use connlab_os::Shutdown;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

/// Flags of `connlab linkem`.
#[derive(Args, Debug)]
pub(crate) struct LinkemArgs {
    #[command(subcommand)]
    command: LinkemCommand,
}

#[derive(Subcommand, Debug)]
enum LinkemCommand {
    /// Emulate the links through this namespace's router until Ctrl-C (or --duration).
    #[command(after_help = "\
Run it in the router's network namespace (ip netns exec ROUTER connlab linkem run ...).
Packets arriving on --left are routed (ip rule iif LEFT) into TUN device lk0, those on
--right into lk1; each is held per its direction's model and written back, and the
kernel forwards it out of the other interface. ip_forward is turned on and rp_filter
off while it runs; rules and settings are undone on exit. Needs root and /dev/net/tun.

On exit (Ctrl-C, SIGTERM or --duration) the statistics go to stderr and --stats, and
the --log CSV is complete: one line per packet (direction lr/rl, index, arrival,
scheduled and departure times in ns since start, fate, bytes, segments, IPv4
addresses, protocol, ports, TCP seq/ack/flags, payload length).

Example:
  ip netns exec r connlab linkem run --left veth-l --right veth-r --delay 5ms --loss 1% --rate 100mbit --log pkts.csv")]
    Run(RunArgs),
    /// Build left - router - right namespaces and validate the emulator (RTT, loss, throughput).
    #[command(after_help = "\
Phases: the UDP echo RTT with kernel forwarding (the unemulated baseline), through the
emulator with zero delay, and through the configured links; then a one-way UDP loss
run left to right; then a TCP bulk transfer left to right through links of
--bulk-delay each way (2 ms RTT by default) and the configured rate. The namespaces
(connlab-<pid>-lk<n>-*) are removed at the end, and by the next run if this one is
killed. Needs root and /dev/net/tun.

Placement matters at small delays: spread over CPUs, each direction pays a cross-CPU
wake-up of the forwarding thread (about 100 us on the reference VM, +5.9% at 2 ms);
on one CPU, as experiments/singleip-saps.toml places linkem and its clients, the 2 ms RTT
measured +1.6-2.1% over the kernel baseline (BENCHMARKS.md).

Example:
  taskset -c 0 connlab linkem lab --delay 1ms --loss 1% --json lab.json")]
    Lab(LabArgs),
}

/// What the links do (both directions unless overridden with --reverse-*).
#[derive(Args, Debug)]
struct LinkArgs {
    /// One-way delay (e.g. 1ms, 250us).
    #[arg(long, default_value = "0", value_parser = parse_duration)]
    delay: Duration,
    /// Jitter: uniform in [-J, +J] around the delay (packets stay in order unless --reorder).
    #[arg(long, default_value = "0", value_parser = parse_duration)]
    jitter: Duration,
    /// Let jitter reorder packets.
    #[arg(long)]
    reorder: bool,
    /// Loss: a probability (0.01 or 1%) or Gilbert-Elliott ge:P_GB,P_BG,LOSS_GOOD,LOSS_BAD.
    #[arg(long, default_value = "0", value_parser = parse_loss)]
    loss: Loss,
    /// Rate limit (e.g. 1gbit, 100mbit); unlimited if absent.
    #[arg(long, value_parser = parse_rate)]
    rate: Option<u64>,
    /// Queue in front of the rate limiter, in packets.
    #[arg(long, default_value_t = 1000, conflicts_with = "queue_bytes")]
    queue: u64,
    /// Queue in front of the rate limiter, in bytes (e.g. 256KiB) instead of packets.
    #[arg(long, value_parser = parse_size)]
    queue_bytes: Option<u64>,
    /// Seed of loss and jitter (right to left uses SEED+1).
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Right-to-left delay, if it differs.
    #[arg(long, value_parser = parse_duration)]
    reverse_delay: Option<Duration>,
    /// Right-to-left jitter, if it differs.
    #[arg(long, value_parser = parse_duration)]
    reverse_jitter: Option<Duration>,
    /// Right-to-left loss, if it differs.
    #[arg(long, value_parser = parse_loss)]
    reverse_loss: Option<Loss>,
    /// Right-to-left rate, if it differs.
    #[arg(long, value_parser = parse_rate)]
    reverse_rate: Option<u64>,
    /// Spin (instead of sleeping) this long before each departure: timers here fire 25-100 us late.
    #[arg(long, default_value = "50us", value_parser = parse_duration)]
    spin: Duration,
    /// No GSO offload on the TUN devices: one read per wire packet (slower; exact per-segment loss and logs).
    #[arg(long)]
    no_offload: bool,
}

impl LinkArgs {
    fn links(&self) -> Result<[LinkConfig; 2], Exit> {
        let lr = LinkConfig {
            delay: self.delay,
            jitter: self.jitter,
            allow_reorder: self.reorder,
            loss: self.loss,
            rate_bit_s: self.rate,
            queue_limit: match self.queue_bytes {
                Some(b) => QueueLimit::Bytes(b),
                None => QueueLimit::Packets(self.queue),
            },
            seed: self.seed,
        };
        let rl = LinkConfig {
            delay: self.reverse_delay.unwrap_or(lr.delay),
            jitter: self.reverse_jitter.unwrap_or(lr.jitter),
            loss: self.reverse_loss.unwrap_or(lr.loss),
            rate_bit_s: self.reverse_rate.or(lr.rate_bit_s),
            seed: self.seed.wrapping_add(1),
            ..lr.clone()
        };
        for c in [&lr, &rl] {
            c.validate().map_err(|e| Exit::usage(anyhow!("{e}")))?;
        }
        Ok([lr, rl])
    }
}

#[derive(Args, Debug)]
struct RunArgs {
    /// Interface towards the left hosts.
    #[arg(long, value_name = "IFACE")]
    left: String,
    /// Interface towards the right hosts.
    #[arg(long, value_name = "IFACE")]
    right: String,
    #[command(flatten)]
    link: LinkArgs,
    /// Write the per-packet CSV log to FILE.
    #[arg(long, value_name = "FILE")]
    log: Option<PathBuf>,
    /// Write the statistics as JSON to FILE on exit.
    #[arg(long, value_name = "FILE")]
    stats: Option<PathBuf>,
    /// Stop after this long.
    #[arg(long, value_parser = parse_duration)]
    duration: Option<Duration>,
    /// Routing tables of the two rules.
    #[arg(long, num_args = 2, value_names = ["LR", "RL"], default_values_t = [7201u32, 7202])]
    tables: Vec<u32>,
}

#[derive(Args, Debug)]
struct LabArgs {
    #[command(flatten)]
    link: LinkArgs,
    /// Write the per-packet CSV log of the emulated phase to FILE.
    #[arg(long, value_name = "FILE")]
    log: Option<PathBuf>,
    /// Write the results as JSON to FILE.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
    /// UDP echo probes per RTT phase.
    #[arg(long, default_value_t = 200)]
    probes: u64,
    /// Datagrams of the one-way loss run (0: skip).
    #[arg(long, default_value_t = 20_000)]
    loss_datagrams: u64,
    /// One-way delay of the bulk phase's links.
    #[arg(long, default_value = "1ms", value_parser = parse_duration)]
    bulk_delay: Duration,
    /// Measured length of the TCP bulk transfer (0: skip it).
    #[arg(long, default_value = "3s", value_parser = parse_duration)]
    bulk_duration: Duration,
}

/// Runs `connlab linkem`.
pub(crate) fn run(args: LinkemArgs) -> Result<ExitCode, Exit> {
    match args.command {
        LinkemCommand::Run(a) => run_router(a),
        LinkemCommand::Lab(a) => run_lab(a),
    }
}

/// Setup errors (no root, no TUN, bad interface) are the user's to fix: exit 2.
fn setup_error(e: LinkemError) -> Exit {
    match e {
        LinkemError::NeedsRoot | LinkemError::NoTun | LinkemError::BadConfig(_) => {
            Exit::usage(anyhow!(e))
        }
        other => Exit::from(anyhow!(other)),
    }
}

fn options(link: &LinkArgs, log: Option<PathBuf>) -> EmulatorOptions {
    EmulatorOptions {
        log,
        spin: link.spin,
        ..EmulatorOptions::default()
    }
}

fn run_router(a: RunArgs) -> Result<ExitCode, Exit> {
    crate::cmd::check_output("--stats", a.stats.as_deref())?;
    crate::cmd::check_output("--log", a.log.as_deref())?;
    let links = a.link.links()?;
    let shutdown = Shutdown::on_termination_signals().context("installing signal handlers")?;
    let mut spec = RouterSpec::new(&a.left, &a.right);
    spec.offload = !a.link.no_offload;
    spec.tables = [a.tables[0], a.tables[1]];
    let router = Router::setup(&spec).map_err(setup_error)?;
    if let Some(d) = a.duration {
        let s = shutdown.clone();
        std::thread::spawn(move || {
            std::thread::sleep(d);
            s.trigger();
        });
    }
    eprintln!(
        "connlab linkem: forwarding {} <-> {} through {}/{} (Ctrl-C stops)",
        a.left,
        a.right,
        router.tuns()[0].name(),
        router.tuns()[1].name()
    );
    let report = emulator::run(
        router.tuns(),
        links.clone(),
        &options(&a.link, a.log),
        &shutdown,
    )
    .map_err(setup_error)?;
    drop(router);
    eprint!("{}", report_text(&report));
    if let Some(path) = &a.stats {
        let doc = serde_json::json!({
            "schema": "connlab.linkem.stats/1",
            "links": { "left_to_right": links[0], "right_to_left": links[1] },
            "report": report,
        });
        crate::cmd::write_json("--stats", path, &doc)?;
    }
    Ok(ExitCode::SUCCESS)
}

fn report_text(r: &Report) -> String {
    let mut s = format!("elapsed {:.1} s", r.elapsed_s);
    if let Some(n) = r.log_lines {
        s += &format!(", {n} log lines");
    }
    s.push('\n');
    for (name, d) in [
        ("left->right", &r.left_to_right),
        ("right->left", &r.right_to_left),
    ] {
        s += &format!(
            "  {name}: {} packets in, {} forwarded ({} segments, {} bytes), dropped: {} loss, {} queue, {} overflow, {}; {} write errors; late p50 {} us p99 {} us\n",
            d.model.offered_packets,
            d.forwarded_packets,
            d.forwarded_segments,
            d.forwarded_bytes,
            d.model.dropped_loss,
            d.model.dropped_queue,
            d.dropped_overflow,
            d.dropped_at_tun.map_or_else(
                || "TUN drops not readable".to_string(),
                |n| format!("{n} at the TUN")
            ),
            d.write_errors,
            d.lateness.p50_us,
            d.lateness.p99_us,
        );
    }
    s
}

fn run_lab(a: LabArgs) -> Result<ExitCode, Exit> {
    crate::cmd::check_output("--json", a.json.as_deref())?;
    crate::cmd::check_output("--log", a.log.as_deref())?;
    let links = a.link.links()?;
    let bulk_links = (!a.bulk_duration.is_zero()).then(|| {
        links.clone().map(|c| LinkConfig {
            delay: a.bulk_delay,
            jitter: Duration::ZERO,
            loss: Loss::None,
            ..c
        })
    });
    let spec = ValidationSpec {
        links,
        options: options(&a.link, a.log.clone()),
        offload: !a.link.no_offload,
        rtt_probes: a.probes.max(1),
        loss_datagrams: a.loss_datagrams,
        bulk_links,
        bulk_duration: a.bulk_duration,
    };
    let shutdown = Shutdown::on_termination_signals().context("installing signal handlers")?;
    let v = validate::run(&spec, &shutdown).map_err(setup_error)?;
    print!("{}", lab_text(&v));
    if let Some(path) = &a.json {
        let doc = serde_json::json!({
            "schema": "connlab.linkem.lab/1",
            "links": { "left_to_right": spec.links[0], "right_to_left": spec.links[1] },
            "offload": spec.offload,
            "validation": v,
        });
        crate::cmd::write_json("--json", path, &doc)?;
    }
    Ok(if v.interrupted {
        ExitCode::from(130)
    } else {
        ExitCode::SUCCESS
    })
}

fn lab_text(v: &Validation) -> String {
    let rtt = |name: &str, r: &connlab_linkem::probe::RttSummary| {
        format!(
            "  {name:<22} p50 {:>8.1} us  min {:>8.1}  p90 {:>8.1}  p99 {:>8.1}  ({}/{} answered)\n",
            r.p50_us, r.min_us, r.p90_us, r.p99_us, r.answered, r.sent
        )
    };
    let mut s = String::from("UDP echo RTT (64 B):\n");
    s += &rtt("kernel forwarding", &v.kernel_rtt);
    if let Some(z) = &v.zero_rtt {
        s += &rtt("emulator, no delay", &z.result);
    }
    if let Some(e) = &v.emulated_rtt {
        s += &rtt("emulator, configured", &e.result);
        if let (Some(k), Some(z)) = (v.rtt_error_vs_kernel_pct, v.rtt_error_vs_zero_pct) {
            s += &format!(
                "  configured RTT {:.1} us; (p50 - baseline p50 - configured) / configured: {k:+.2}% (kernel baseline), {z:+.2}% (emulator baseline)\n",
                v.configured_rtt_us
            );
        }
    }
    if let Some(l) = &v.loss {
        let d = &l.emulator.left_to_right.model;
        s += &format!(
            "One-way UDP loss (left->right): {}/{} lost = {:.4} (configured {:.4} +- {:.4} at 99%); emulator dropped {} of {} by loss; {} reordered\n",
            l.result.sent - l.result.received,
            l.result.sent,
            l.result.loss,
            v.configured_loss,
            v.loss_bound_99,
            d.dropped_loss,
            d.offered_packets,
            l.result.reordered
        );
        let at_tun = l.emulator.left_to_right.dropped_at_tun.unwrap_or(0);
        let at_receiver = l.result.dropped_at_receiver.unwrap_or(0);
        if at_tun + at_receiver > 0 {
            s += &format!(
                "  warning: {} packets lost outside the link model ({at_tun} at the TUN queue, {at_receiver} at the receiving socket): the host was too busy, so the measured loss overstates the model's\n",
                at_tun + at_receiver
            );
        }
    }
    if let Some(b) = &v.bulk {
        s += &format!(
            "TCP bulk left->right at {:.1} ms configured RTT: {:.2} Gbit/s over {:.1} s; departures late p50 {} us p99 {} us\n",
            v.bulk_rtt_us.unwrap_or(0.0) / 1000.0,
            b.result.gbit_s,
            b.result.seconds,
            b.emulator.left_to_right.lateness.p50_us,
            b.emulator.left_to_right.lateness.p99_us,
        );
    }
    if v.interrupted {
        s += "interrupted: later phases skipped\n";
    }
    s
}
