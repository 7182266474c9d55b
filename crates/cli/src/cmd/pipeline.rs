//! `connlab pipeline`: one run of the layer-parallel protocol pipeline (or
//! its run-to-completion baseline), with the one-layer baseline that
//! relative capacity needs; `--costs` measures the SPSC hand-off and the
//! buffer pool against a mutex instead.

use crate::Exit;
use anyhow::{anyhow, Context};
use clap::{Args, ValueEnum};
use connlab_lab::pipeline_one::{run_one, OneRun};
use connlab_os::Shutdown;
use connlab_pipeline::{LinkConfig, Mode, PipelineConfig, PoolKind};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

/// Flags of `connlab pipeline`.
#[derive(Args, Debug)]
#[command(after_help = "\
Each side of the line runs a stack of --layers connection-oriented layers (TP4-like:
sequence numbers, cumulative acknowledgements, a sliding window, retransmission on
timeout, connect and release). layer-parallel gives every layer of every side its own
thread and passes buffer handles between them through SPSC queues (rtrb);
run-to-completion carries each message through every layer on --rtc-threads workers
per side, each layer's state under a mutex. Both use one global buffer pool.

The sender's messages are generated from --seed; the receiver checks every byte, the
order and a checksum of the whole stream: `verified` is true only if all agree.

Relative capacity = throughput x layers / throughput at one layer (same settings);
efficiency = relative capacity / layers (the paper's definitions). Unless --layers is 1
or --baseline gives the one-layer throughput, a one-layer run with the same settings
runs first. Measured and projected figures are reported side by side: the projection
is the throughput with one core per layer thread, bounded by the slowest stage's busy
time per message plus one queue hand-off (and by the line rate).

Examples:
  connlab pipeline --layers 5 --message-size 8KiB --messages 20000
  connlab pipeline --layers 11 --mode run-to-completion --bandwidth unlimited --json r.json
  connlab pipeline --layers 3 --loss 0.01 --messages 5000
  connlab pipeline --link udp --layers 3
  connlab pipeline --costs")]
pub(crate) struct PipelineArgs {
    /// Layers per side (1-16).
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..=16))]
    layers: u32,
    /// User bytes per message, e.g. 1KiB, 8KiB, 32KiB.
    #[arg(long, default_value = "8KiB", value_parser = crate::units::parse_size)]
    message_size: u64,
    /// Messages to send.
    #[arg(long, default_value_t = 10_000, value_parser = clap::value_parser!(u64).range(1..))]
    messages: u64,
    /// Window of every layer, in PDUs (1-4096).
    #[arg(long, default_value_t = 32)]
    window: u32,
    /// How the layers are driven.
    #[arg(long, value_enum, default_value = "layer-parallel")]
    mode: ModeArg,
    /// run-to-completion: workers per side.
    #[arg(long, default_value_t = 1)]
    rtc_threads: usize,
    /// The line: an in-process wire (memory) or UDP sockets.
    #[arg(long, value_enum, default_value = "memory")]
    link: LinkArg,
    /// memory: line rate, e.g. 800mbit (the paper's HIPPI), 10gbit, or unlimited.
    #[arg(long, default_value = "800mbit")]
    bandwidth: Bandwidth,
    /// memory: one-way latency added after transmission, e.g. 50us.
    #[arg(long, default_value = "0s", value_parser = crate::units::parse_duration)]
    latency: Duration,
    /// Probability a frame is lost (0 to 0.5); retransmission then does real work.
    #[arg(long, default_value_t = 0.0, value_parser = parse_probability)]
    loss: f64,
    /// memory: probability a frame is held back behind the next one.
    #[arg(long, default_value_t = 0.0, value_parser = parse_probability)]
    reorder: f64,
    /// memory: probability a frame is delivered twice.
    #[arg(long, default_value_t = 0.0, value_parser = parse_probability)]
    duplicate: f64,
    /// udp: the sending side's socket address (port 0: any).
    #[arg(long, default_value = "127.0.0.1:0")]
    udp_sender: SocketAddr,
    /// udp: the receiving side's socket address (port 0: any).
    #[arg(long, default_value = "127.0.0.1:0")]
    udp_receiver: SocketAddr,
    /// CPUs for the threads in order, cycled (e.g. 0,1). layer-parallel order: source,
    /// sender layers top..bottom, sender line, receiver line, receiver layers
    /// bottom..top, sink. Default: not pinned.
    #[arg(long, value_name = "LIST")]
    cpu_map: Option<String>,
    /// Seed of the message contents and of the line's impairments.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Retransmission timeout of every layer.
    #[arg(long, default_value = "20ms", value_parser = crate::units::parse_duration)]
    rto: Duration,
    /// Stop and report what was delivered after this long.
    #[arg(long, default_value = "120s", value_parser = crate::units::parse_duration)]
    time_limit: Duration,
    /// Layers check only their headers, not the whole SDU (less per-byte work).
    #[arg(long)]
    no_payload_checksum: bool,
    /// Buffer-pool algorithm: lock-free (the paper's) or mutex (the baseline).
    #[arg(long, value_enum, default_value = "lock-free")]
    pool: PoolArg,
    /// The one-layer throughput in Mbit/s for relative capacity, instead of measuring it.
    #[arg(long, value_name = "MBIT_S")]
    baseline: Option<f64>,
    /// Measure the SPSC hand-off and the pool (lock-free vs mutex, two threads) instead of a run.
    #[arg(long)]
    costs: bool,
    /// Write the result as JSON to FILE (schema connlab.pipeline/1).
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum ModeArg {
    LayerParallel,
    RunToCompletion,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum LinkArg {
    Memory,
    Udp,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum PoolArg {
    LockFree,
    Mutex,
}

/// A line rate in bit/s; `None` is unlimited.
#[derive(Clone, Copy, Debug)]
struct Bandwidth(Option<u64>);

impl std::str::FromStr for Bandwidth {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        connlab_lab::parse_link_rate(s).map(Bandwidth)
    }
}

fn parse_probability(s: &str) -> Result<f64, String> {
    let p: f64 = s
        .trim()
        .parse()
        .map_err(|_| format!("{s:?} is not a number"))?;
    if (0.0..=0.5).contains(&p) {
        Ok(p)
    } else {
        Err(format!("{s}: a probability between 0 and 0.5"))
    }
}

/// Turns the flags into a library configuration (validated).
fn config(args: &PipelineArgs) -> Result<PipelineConfig, Exit> {
    let usage = |e: String| Exit::usage(anyhow!(e));
    let cpu_map = match &args.cpu_map {
        Some(text) => Some(
            text.parse::<connlab_os::CpuList>()
                .map_err(|e| usage(format!("--cpu-map {text:?}: {e}")))?
                .cpus()
                .to_vec(),
        ),
        None => None,
    };
    let link = match args.link {
        LinkArg::Memory => LinkConfig::Memory {
            bandwidth_bit_s: args.bandwidth.0,
            latency: args.latency,
            loss: args.loss,
            reorder: args.reorder,
            duplicate: args.duplicate,
        },
        LinkArg::Udp => {
            if args.reorder > 0.0 || args.duplicate > 0.0 {
                return Err(usage(
                    "--reorder and --duplicate apply to --link memory".into(),
                ));
            }
            LinkConfig::Udp {
                sender_addr: args.udp_sender,
                receiver_addr: args.udp_receiver,
                loss: args.loss,
            }
        }
    };
    let c = PipelineConfig {
        layers: args.layers as usize,
        message_size: usize::try_from(args.message_size).unwrap_or(usize::MAX),
        messages: args.messages,
        window: args.window,
        mode: match args.mode {
            ModeArg::LayerParallel => Mode::LayerParallel,
            ModeArg::RunToCompletion => Mode::RunToCompletion {
                threads: args.rtc_threads,
            },
        },
        link,
        seed: args.seed,
        cpu_map,
        retransmit_timeout: args.rto,
        time_limit: Some(args.time_limit),
        payload_checksum: !args.no_payload_checksum,
        pool: match args.pool {
            PoolArg::LockFree => PoolKind::LockFree,
            PoolArg::Mutex => PoolKind::Mutex,
        },
        ..PipelineConfig::default()
    };
    c.validate().map_err(|e| usage(e.to_string()))?;
    Ok(c)
}

/// Runs `connlab pipeline`.
pub(crate) fn run(args: PipelineArgs) -> Result<ExitCode, Exit> {
    crate::cmd::check_output("--json", args.json.as_deref())?;
    if args.costs {
        return costs(&args);
    }
    let cfg = config(&args)?;
    let shutdown = Shutdown::on_termination_signals().context("installing signal handlers")?;
    let stop = connlab_lab::run::stop_flag(&shutdown);
    eprintln!(
        "connlab pipeline: {}, {} layer{}, {} B x {} messages, {}, window {}",
        cfg.mode.name(),
        cfg.layers,
        if cfg.layers == 1 { "" } else { "s" },
        cfg.message_size,
        cfg.messages,
        cfg.link.describe(),
        cfg.window
    );
    let Some(one) = run_one(&cfg, args.baseline, &stop, &mut |n| eprintln!("{n}"))? else {
        return Ok(ExitCode::from(130));
    };
    print_summary(&one);
    if let Some(path) = &args.json {
        crate::cmd::write_json("--json", path, &one.document())?;
    }
    if one.result.interrupted && stop.load(Relaxed) {
        return Ok(ExitCode::from(130));
    }
    match one.failure() {
        Some(why) => Err(anyhow!(why).into()),
        None => Ok(ExitCode::SUCCESS),
    }
}

fn opt(v: Option<f64>, digits: usize) -> String {
    v.map_or("—".into(), |v| format!("{v:.digits$}"))
}

fn print_summary(one: &OneRun) {
    let (r, rc, eff, base) = (
        &one.result,
        one.relative_capacity,
        one.efficiency,
        one.baseline,
    );
    println!(
        "delivered {} of {} messages, {} (stream checksum {})",
        r.messages_delivered,
        r.messages_sent,
        if r.verified {
            "verified"
        } else {
            "NOT VERIFIED"
        },
        r.stream_checksum
    );
    println!(
        "measured:  {:.1} Mbit/s, {:.0} messages/s in {:.3} s; relative capacity {} (one layer: {} Mbit/s), efficiency {}",
        r.throughput_mbit_s,
        r.messages_per_s,
        r.elapsed_s,
        opt(rc, 2),
        opt(base, 1),
        opt(eff, 2)
    );
    let p = &r.projection;
    match p.value() {
        Ok(v) => println!(
            "projected: {v:.1} Mbit/s with one core per thread (bound: {}; the layer stages alone: {} Mbit/s); {}",
            p.bound,
            opt(p.layers_only_mbit_s, 1),
            match &one.projected {
                Ok((rc, eff)) => format!("relative capacity {rc:.2}, efficiency {eff:.2}"),
                Err(why) => why.clone(),
            }
        ),
        Err(why) => println!("projected: no projection ({why})"),
    }
    println!(
        "retransmissions {}, SPSC hand-off {:.1} ns, pool {}",
        r.retransmissions, r.handoff_ns, r.pool
    );
    println!("side      layer  CPU ns/msg  busy ns/msg (raw)  queue mean/max  retx");
    for l in &r.per_layer {
        println!(
            "{:<9} {:>5}  {:>10.0}  {:>11.0} ({:>5.0})  {:>9.1}/{:<4}  {}",
            l.side,
            l.layer,
            l.cpu_ns_per_message,
            l.busy_ns_per_message,
            l.busy_raw_ns_per_message,
            l.queue_occupancy_mean,
            l.queue_occupancy_max,
            l.retransmissions
        );
    }
}

/// `--costs`: the SPSC hand-off and the pool against a mutex, two threads.
fn costs(args: &PipelineArgs) -> Result<ExitCode, Exit> {
    let costs = connlab_lab::pipeline_one::costs();
    let (handoff, pool) = (&costs.handoff, &costs.pool);
    println!(
        "SPSC hand-off (rtrb, two threads): {:.1} ns per item over {} items{}",
        handoff.ns_per_item,
        handoff.items,
        if handoff.verified {
            ""
        } else {
            " NOT VERIFIED"
        }
    );
    println!(
        "buffer pool, {} threads: lock-free {:.1} ns, mutex {:.1} ns per allocate+release: lock-free {:.2}x cheaper{}",
        pool.threads,
        pool.lock_free_ns_per_op,
        pool.mutex_ns_per_op,
        pool.ratio,
        if pool.verified { "" } else { " NOT VERIFIED" }
    );
    if let Some(path) = &args.json {
        crate::cmd::write_json("--json", path, &costs)?;
    }
    if !(handoff.verified && pool.verified) {
        return Err(anyhow!("a microbenchmark failed its own check").into());
    }
    Ok(ExitCode::SUCCESS)
}
