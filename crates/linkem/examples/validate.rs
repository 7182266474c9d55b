//! Runs the validation once with fixed settings and prints it as debug output.
use connlab_linkem::validate::{run, ValidationSpec};
use connlab_linkem::{EmulatorOptions, LinkConfig, Loss};
use std::time::Duration;

fn main() {
    let d: u64 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(1000);
    let offload = std::env::args().nth(2).is_none_or(|a| a != "nooffload");
    let link = LinkConfig {
        delay: Duration::from_micros(d),
        loss: Loss::Bernoulli { p: 0.01 },
        ..LinkConfig::default()
    };
    let bulk = LinkConfig {
        delay: Duration::from_millis(1),
        ..LinkConfig::default()
    };
    let spec = ValidationSpec {
        links: [
            link.clone(),
            LinkConfig {
                loss: Loss::None,
                seed: 2,
                ..link
            },
        ],
        options: EmulatorOptions::default(),
        offload,
        rtt_probes: 200,
        loss_datagrams: 20_000,
        bulk_links: Some([bulk.clone(), bulk]),
        bulk_duration: Duration::from_secs(3),
    };
    let stop = connlab_os::Shutdown::new().unwrap();
    println!("{:#?}", run(&spec, &stop));
}
