//! End-to-end runs of both modes over the memory and UDP links. Every run has
//! a time limit; no assertion depends on timing.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use connlab_pipeline::{run, LinkConfig, Mode, PipelineConfig, PipelineResult};

fn base(layers: usize, mode: Mode, seed: u64) -> PipelineConfig {
    PipelineConfig {
        layers,
        message_size: 500,
        messages: 300,
        window: 8,
        mode,
        link: LinkConfig::memory(None),
        seed,
        retransmit_timeout: Duration::from_millis(5),
        time_limit: Some(Duration::from_secs(30)),
        queue_capacity: 16,
        handoff_items: 1000,
        ..PipelineConfig::default()
    }
}

fn lossy() -> LinkConfig {
    LinkConfig::Memory {
        bandwidth_bit_s: None,
        latency: Duration::from_micros(20),
        loss: 0.03,
        reorder: 0.05,
        duplicate: 0.03,
    }
}

fn run_ok(cfg: &PipelineConfig) -> PipelineResult {
    let stop = AtomicBool::new(false);
    match run(cfg, &stop) {
        Ok(r) => r,
        Err(e) => panic!("run failed: {e} ({cfg:?})"),
    }
}

fn assert_complete(r: &PipelineResult, cfg: &PipelineConfig) {
    assert!(
        r.verified,
        "not verified: {} of {} delivered, errors {:?}, interrupted {}, {:?} {} layers seed {}",
        r.messages_delivered, cfg.messages, r.errors, r.interrupted, cfg.mode, cfg.layers, cfg.seed
    );
    assert_eq!(r.messages_delivered, cfg.messages);
    assert_eq!(r.bytes_delivered, cfg.messages * cfg.message_size as u64);
    assert_eq!(r.stream_checksum, r.sender_checksum);
    assert!(!r.interrupted);
    assert_eq!(r.per_layer.len(), 2 * cfg.layers);
    for l in &r.per_layer {
        assert!(
            l.max_outstanding <= u64::from(cfg.window),
            "{} layer {} had {} outstanding, window {}",
            l.side,
            l.layer,
            l.max_outstanding,
            cfg.window
        );
    }
}

const MODES: [Mode; 2] = [Mode::LayerParallel, Mode::RunToCompletion { threads: 1 }];

#[test]
fn delivers_in_order_exactly_once_under_loss_reorder_and_duplication() {
    for mode in MODES {
        for layers in [1, 5] {
            // The link draws its impairments per PDU in arrival order, and
            // with a thread per layer that order depends on scheduling: a
            // run whose losses all hit acknowledgements retransmits nothing.
            // So retransmissions are required of the three seeds together.
            let mut retransmissions = 0;
            for seed in [1, 2, 3] {
                let cfg = PipelineConfig {
                    link: lossy(),
                    ..base(layers, mode, seed)
                };
                let r = run_ok(&cfg);
                assert_complete(&r, &cfg);
                retransmissions += r.retransmissions;
                let dups: u64 = r.stages.iter().map(|s| s.duplicated).sum();
                let reordered: u64 = r.stages.iter().map(|s| s.reordered).sum();
                assert!(dups > 0 && reordered > 0, "impairments were applied");
            }
            assert!(
                retransmissions > 0,
                "{mode:?}, {layers} layers: loss should cause retransmissions"
            );
        }
    }
}

#[test]
fn both_modes_deliver_the_same_stream() {
    let a = run_ok(&base(3, Mode::LayerParallel, 42));
    let b = run_ok(&base(3, Mode::RunToCompletion { threads: 1 }, 42));
    let c = run_ok(&base(3, Mode::RunToCompletion { threads: 2 }, 42));
    for r in [&a, &b, &c] {
        assert!(r.verified, "{:?}", r.errors);
    }
    assert_eq!(a.stream_checksum, b.stream_checksum);
    assert_eq!(a.stream_checksum, c.stream_checksum);
    let other_seed = run_ok(&base(3, Mode::LayerParallel, 43));
    assert_ne!(a.stream_checksum, other_seed.stream_checksum);
}

#[test]
fn bandwidth_limited_link_and_message_sizes() {
    for (size, layers) in [(8, 2), (32 * 1024, 3)] {
        let cfg = PipelineConfig {
            message_size: size,
            messages: 100,
            link: LinkConfig::memory(Some(800_000_000)),
            ..base(layers, Mode::LayerParallel, 7)
        };
        let r = run_ok(&cfg);
        assert_complete(&r, &cfg);
        assert!(r.projected_throughput_mbit_s > 0.0);
        assert!(r.projected_throughput_mbit_s <= 800.0 + 1e-6);
    }
}

#[test]
fn udp_loopback_run_verifies() {
    for mode in MODES {
        let cfg = PipelineConfig {
            link: LinkConfig::Udp {
                sender_addr: "127.0.0.1:0".parse().expect("addr"),
                receiver_addr: "127.0.0.1:0".parse().expect("addr"),
                loss: 0.02,
            },
            message_size: 4096,
            ..base(3, mode, 5)
        };
        let r = run_ok(&cfg);
        assert_complete(&r, &cfg);
        assert!(r.link.starts_with("udp"));
    }
}

#[test]
fn stop_flag_ends_the_run_with_partial_results() {
    for mode in MODES {
        let cfg = PipelineConfig {
            messages: u64::MAX / 2,
            link: LinkConfig::memory(Some(100_000_000)),
            ..base(2, mode, 9)
        };
        let stop = AtomicBool::new(false);
        let r = std::thread::scope(|s| {
            s.spawn(|| {
                std::thread::sleep(Duration::from_millis(200));
                stop.store(true, Ordering::SeqCst);
            });
            run(&cfg, &stop)
        })
        .expect("run");
        assert!(r.interrupted);
        assert!(!r.timed_out);
        assert!(!r.verified);
        assert!(r.messages_delivered < cfg.messages);
    }
}

#[test]
fn time_limit_ends_the_run() {
    let cfg = PipelineConfig {
        messages: u64::MAX / 2,
        time_limit: Some(Duration::from_millis(200)),
        ..base(1, Mode::LayerParallel, 9)
    };
    let r = run_ok(&cfg);
    assert!(r.interrupted && r.timed_out && !r.verified);
}

#[test]
fn pinned_run_verifies_and_bad_cpu_is_an_error() {
    let cfg = PipelineConfig {
        cpu_map: Some(vec![0]),
        ..base(2, Mode::LayerParallel, 3)
    };
    let r = run_ok(&cfg);
    assert!(r.verified);
    assert!(r.per_layer.iter().all(|l| l.cpu == Some(0)));
    let bad = PipelineConfig {
        cpu_map: Some(vec![1000]),
        ..base(2, Mode::RunToCompletion { threads: 1 }, 3)
    };
    let err = run(&bad, &AtomicBool::new(false)).expect_err("CPU 1000 does not exist");
    assert!(err.to_string().contains("1000"), "{err}");
}

#[test]
fn result_round_trips_through_json() {
    let r = run_ok(&base(1, Mode::LayerParallel, 1));
    let json = serde_json::to_string(&r).expect("serialise");
    let back: PipelineResult = serde_json::from_str(&json).expect("deserialise");
    assert_eq!(back.stream_checksum, r.stream_checksum);
    assert_eq!(back.per_layer.len(), 2);
}

#[test]
fn bad_config_values_are_errors() {
    let ok = base(2, Mode::LayerParallel, 1);
    assert!(ok.validate().is_ok());
    let bad: Vec<PipelineConfig> = vec![
        // No layers is the line alone: layer-parallel over a lossless
        // memory line only.
        PipelineConfig {
            layers: 0,
            mode: Mode::RunToCompletion { threads: 1 },
            ..ok.clone()
        },
        PipelineConfig {
            layers: 17,
            ..ok.clone()
        },
        PipelineConfig {
            message_size: 7,
            ..ok.clone()
        },
        PipelineConfig {
            messages: 0,
            ..ok.clone()
        },
        PipelineConfig {
            window: 0,
            ..ok.clone()
        },
        PipelineConfig {
            window: 1 << 20,
            ..ok.clone()
        },
        PipelineConfig {
            mode: Mode::RunToCompletion { threads: 0 },
            ..ok.clone()
        },
        PipelineConfig {
            retransmit_timeout: Duration::ZERO,
            ..ok.clone()
        },
        PipelineConfig {
            time_limit: Some(Duration::ZERO),
            ..ok.clone()
        },
        PipelineConfig {
            cpu_map: Some(vec![]),
            ..ok.clone()
        },
        PipelineConfig {
            queue_capacity: 1,
            ..ok.clone()
        },
        PipelineConfig {
            pool_buffers: Some(3),
            ..ok.clone()
        },
        PipelineConfig {
            link: LinkConfig::memory(Some(0)),
            ..ok.clone()
        },
        PipelineConfig {
            link: LinkConfig::Memory {
                bandwidth_bit_s: None,
                latency: Duration::ZERO,
                loss: 1.0,
                reorder: 0.0,
                duplicate: 0.0,
            },
            ..ok.clone()
        },
        PipelineConfig {
            link: LinkConfig::Memory {
                bandwidth_bit_s: None,
                latency: Duration::ZERO,
                loss: 0.0,
                reorder: f64::NAN,
                duplicate: 0.0,
            },
            ..ok.clone()
        },
        PipelineConfig {
            link: LinkConfig::udp_loopback(),
            message_size: 65_500,
            ..ok.clone()
        },
        PipelineConfig {
            link: LinkConfig::Udp {
                sender_addr: "127.0.0.1:9000".parse().expect("addr"),
                receiver_addr: "127.0.0.1:9000".parse().expect("addr"),
                loss: 0.0,
            },
            ..ok.clone()
        },
    ];
    for cfg in bad {
        let e = cfg.validate().expect_err("must be rejected");
        assert!(!e.to_string().is_empty());
        let err = run(&cfg, &AtomicBool::new(false)).expect_err("run must refuse too");
        assert!(
            matches!(err, connlab_pipeline::PipelineError::Config(_)),
            "{err}"
        );
    }
}

#[test]
fn shared_state_workers_deliver_byte_exact_and_count_their_locks() {
    // Several run-to-completion workers per side share every layer's state
    // under its lock: the stream must still arrive once, in order, intact,
    // and every acquisition of a layer lock is counted.
    let layer_parallel = run_ok(&PipelineConfig {
        message_size: 1024,
        ..base(3, Mode::LayerParallel, 9)
    });
    assert_eq!(layer_parallel.lock_contention(), None, "no layer lock");
    for workers in [2, 3] {
        let cfg = PipelineConfig {
            message_size: 1024,
            ..base(3, Mode::RunToCompletion { threads: workers }, 9)
        };
        assert_eq!(cfg.thread_count(), 2 * workers + 2);
        let r = run_ok(&cfg);
        assert_complete(&r, &cfg);
        assert_eq!(r.stream_checksum, layer_parallel.stream_checksum);
        let workers_seen = r
            .stages
            .iter()
            .filter(|s| s.name.contains("worker"))
            .count();
        assert_eq!(workers_seen, 2 * workers);
        for l in &r.per_layer {
            assert!(
                l.lock_acquisitions >= l.messages,
                "{} layer {}: {} acquisitions for {} messages",
                l.side,
                l.layer,
                l.lock_acquisitions,
                l.messages
            );
            assert!(l.lock_contended <= l.lock_acquisitions);
        }
        let share = r.lock_contention().expect("locks were taken");
        assert!((0.0..=1.0).contains(&share), "{share}");
    }
}
