//! A quick sanity measurement: layers 1, 5 and 11 at 8 KiB over the memory
//! link (unlimited and 800 Mbit/s) in both modes, then the pool benchmark.
//! Run with `cargo run --release -p connlab-pipeline --example sanity [messages]`.

use std::sync::atomic::AtomicBool;

use connlab_pipeline::{measure_pool, run, LinkConfig, Mode, PipelineConfig, HIPPI_BIT_S};

fn main() {
    let messages: u64 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(20_000);
    let stop = AtomicBool::new(false);
    println!(
        "{:<18} {:>6} {:<22} {:>9} {:>9} {:>9} {:>7} {:<24} verified",
        "mode", "layers", "link", "Mbit/s", "proj", "proj+end", "rexmit", "bottleneck"
    );
    for mode in [Mode::LayerParallel, Mode::RunToCompletion { threads: 1 }] {
        for bw in [None, Some(HIPPI_BIT_S)] {
            for layers in [1, 5, 11] {
                let cfg = PipelineConfig {
                    layers,
                    message_size: 8192,
                    messages,
                    mode,
                    link: LinkConfig::memory(bw),
                    ..PipelineConfig::default()
                };
                match run(&cfg, &stop) {
                    Ok(r) => println!(
                        "{:<18} {:>6} {:<22} {:>9.0} {:>9.0} {:>9.0} {:>7} {:<24} {}",
                        r.mode,
                        r.layers,
                        r.link,
                        r.throughput_mbit_s,
                        r.projected_throughput_mbit_s,
                        r.projected_with_endpoints_mbit_s,
                        r.retransmissions,
                        r.projected_bottleneck,
                        r.verified
                    ),
                    Err(e) => println!("{mode:?} layers {layers}: error {e}"),
                }
                if std::env::var_os("SANITY_VERBOSE").is_some() {
                    if let Ok(r) = run(&cfg, &stop) {
                        for l in &r.per_layer {
                            println!(
                                "    {} L{}: busy {:.0} ns/msg cpu {:.0} ns/msg occ {:.1}/{} rexmit {}",
                                l.side, l.layer, l.busy_ns_per_message, l.cpu_ns_per_message,
                                l.queue_occupancy_mean, l.queue_occupancy_max, l.retransmissions
                            );
                        }
                        for s in &r.stages {
                            println!(
                                "    {}: cpu {:.3}s busy {:.3}s msgs {} yields {} parks {}",
                                s.name, s.cpu_s, s.busy_s, s.messages, s.yields, s.parks
                            );
                        }
                    }
                }
            }
        }
    }
    let ops = if cfg!(debug_assertions) {
        20_000
    } else {
        2_000_000
    };
    let p = measure_pool(2, ops);
    println!(
        "pool, 2 threads x {} ops: lock-free {:.1} ns/op, mutex {:.1} ns/op, ratio {:.2}, verified {}",
        p.ops_per_thread, p.lock_free_ns_per_op, p.mutex_ns_per_op, p.ratio, p.verified
    );
}
