//! Runs one configuration and prints the whole result as JSON. Arguments:
//! `layers message_size messages mode(lp|rtc) bandwidth_mbit(0 = unlimited)
//! idle(park|spin|yield)`.

use std::sync::atomic::AtomicBool;

use connlab_pipeline::{run, IdleConfig, LinkConfig, Mode, PipelineConfig};

fn main() {
    let a: Vec<String> = std::env::args().collect();
    let get = |i: usize, d: u64| a.get(i).and_then(|s| s.parse().ok()).unwrap_or(d);
    let mode = match a.get(4).map(String::as_str) {
        Some("rtc") => Mode::RunToCompletion { threads: 1 },
        _ => Mode::LayerParallel,
    };
    let bw = get(5, 0);
    let cfg = PipelineConfig {
        layers: get(1, 5) as usize,
        message_size: get(2, 8192) as usize,
        messages: get(3, 5000),
        mode,
        link: LinkConfig::memory(if bw == 0 { None } else { Some(bw * 1_000_000) }),
        idle: match a.get(6).map(String::as_str) {
            Some("spin") => IdleConfig::busy_spin(),
            Some("yield") => IdleConfig::spin_yield(),
            _ => IdleConfig::default(),
        },
        ..PipelineConfig::default()
    };
    match run(&cfg, &AtomicBool::new(false)) {
        Ok(r) => match serde_json::to_string_pretty(&r) {
            Ok(s) => println!("{s}"),
            Err(e) => eprintln!("{e}"),
        },
        Err(e) => eprintln!("error: {e}"),
    }
}
