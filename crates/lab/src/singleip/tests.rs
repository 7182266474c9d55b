use super::claims::fmt_num;
use super::contention::{analyse_contention, ContentionSetup};
use super::experiment::SingleIpExperiment;
use super::records::{jain, summarise_rtt, ProbeTransfer};
use super::values::{bytes_label, parse_bytes};
use std::path::Path;

const FILE: &str = r#"
kind = "singleip"
name = "t"
title = "t"
repetitions = 2
[rtt]
systems = ["io16k", "nat"]
round_trips = 100
[bandwidth]
systems = ["io16k"]
sizes = ["1KB", 100000]
transfers = 5
bytes_per_point = "1MB"
[contention]
systems = ["io16k", "iooff"]
rate = "100mbit"
queue = 1000
delay = "1ms"
background = "100MB"
foreground = ["100KB"]
foreground_delay = "3s"
background_after_small = "4s"
[quick]
repetitions = 1
round_trips = 10
[[paper.claims]]
id = "c"
source = "Table 3"
claim = "x"
check = { kind = "order", metric = "rtt_mean_us", lower = "io16k", higher = "nat" }
"#;

#[test]
fn parses_and_plans_with_stable_ids() {
    assert_eq!(
        crate::ExperimentKind::of_text(FILE, "t.toml").unwrap(),
        crate::ExperimentKind::Singleip
    );
    let e = SingleIpExperiment::from_toml(FILE, "t.toml").unwrap();
    let plan = e.plan(false);
    assert_eq!(plan.len(), 2 * (2 + 2 + 2));
    assert_eq!(plan[0].id(), "rtt-io16k-4B-rep1");
    assert_eq!(plan[2].id(), "bandwidth-io16k-1KB-rep1");
    assert_eq!(plan[4].id(), "contention-io16k-100KB-rep1");
    assert_eq!(e.plan(true).len(), 6);
    assert_eq!(e.effective(true).rtt.unwrap().round_trips, 10);
    let b = e.bandwidth.unwrap();
    assert_eq!(b.transfers_of(1000), 5);
    assert_eq!(b.transfers_of(1_000_000), 1);
    assert_eq!(e.contention.unwrap().rate.0, 100_000_000);
}

#[test]
fn the_shipped_file_parses() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../experiments/singleip-saps.toml");
    let e = SingleIpExperiment::from_file(&path).unwrap_or_else(|e| panic!("{e}"));
    let (quick, full) = (e.plan(true), e.plan(false));
    assert!(!quick.is_empty() && quick.len() < full.len());
    assert_eq!(
        e.paper
            .values
            .iter()
            .filter(|v| v.source == "Table 3")
            .count(),
        7
    );
    assert!(e.paper.claims.len() >= 10);
}

#[test]
fn errors_name_the_field() {
    let bad = FILE.replace("round_trips = 100", "round_trip = 100");
    let err = SingleIpExperiment::from_toml(&bad, "t.toml")
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("round_trip") && err.contains("t.toml"),
        "{err}"
    );
    let bad = FILE.replace("\"io16k\", \"nat\"", "\"io16k\", \"lvs\"");
    let err = SingleIpExperiment::from_toml(&bad, "t.toml")
        .unwrap_err()
        .to_string();
    assert!(err.contains("lvs"), "{err}");
    let bad = FILE.replace("\"100mbit\"", "\"fast\"");
    let err = SingleIpExperiment::from_toml(&bad, "t.toml")
        .unwrap_err()
        .to_string();
    assert!(err.contains("rate"), "{err}");
    let bad = FILE.replace("repetitions = 2", "repetitions = 0");
    let err = SingleIpExperiment::from_toml(&bad, "t.toml")
        .unwrap_err()
        .to_string();
    assert!(err.contains("repetitions"), "{err}");
}

#[test]
fn sizes_and_labels() {
    assert_eq!(parse_bytes("100KB").unwrap(), 100_000);
    assert_eq!(parse_bytes("16KiB").unwrap(), 16_384);
    assert!(parse_bytes("3 apples").is_err());
    assert_eq!(bytes_label(100_000_000), "100MB");
    assert_eq!(bytes_label(4), "4B");
    assert_eq!(fmt_num(217.6), "218");
    assert_eq!(fmt_num(2.5), "2.5");
    assert_eq!(fmt_num(10.0), "10");
}

#[test]
fn jain_and_rtt_summary() {
    assert_eq!(jain(&[1.0, 1.0, 1.0]), Some(1.0));
    assert!((jain(&[1.0, 0.0]).unwrap() - 0.5).abs() < 1e-12);
    let r = summarise_rtt(&[100.0, 300.0, 200.0]).unwrap();
    assert_eq!(
        (r.min_us, r.p50_us, r.max_us, r.mean_us),
        (100.0, 200.0, 300.0, 200.0)
    );
}

#[test]
fn contention_from_streams_and_a_log() {
    let t = |size, t0, bins: Vec<u64>| ProbeTransfer {
        size,
        got: size,
        t0,
        t_conn: t0 + 0.001,
        t_first: Some(t0 + 0.002),
        t_last: Some(t0 + bins.len() as f64 * 0.1),
        bins,
    };
    let setup = ContentionSetup {
        background: 1000,
        bin_s: 0.1,
        early_window_s: 0.2,
        rate_bps: 240,
        delay_ms: 1.0,
        client_addrs: ["1.0.0.1".into(), "1.0.0.2".into(), "1.0.0.3".into()],
        timeline_every: 1,
    };
    let streams = vec![
        ("fg".to_string(), t(1000, 100.0, vec![10; 10])),
        ("bg1".to_string(), t(1000, 100.0, vec![10; 10])),
        ("bg2".to_string(), t(1000, 100.0, vec![10; 10])),
    ];
    let log = format!(
        "{}\nlr,1,0,,,sent,60,1,1.0.0.2,2.0.0.1,6,1,80,0,0,S,0\n\
         rl,1,500000,500000,1500000,sent,60,1,2.0.0.1,1.0.0.1,6,80,9,5,0,F.,0\n\
         rl,1,600000,600000,1600000,sent,60,1,2.0.0.1,1.0.0.1,6,80,1,499,0,S.,0\n\
         rl,1,700000,700000,1700000,sent,60,1,2.0.0.1,1.0.0.2,6,80,1,899,0,S.,0\n\
         rl,1,1000000,2000000,3500000,sent,1500,1,2.0.0.1,1.0.0.1,6,80,1,500,0,.,1448\n\
         rl,2,2000000,,,queue,1500,1,2.0.0.1,1.0.0.2,6,80,1,900,0,.,1448\n",
        "direction,index,arrival_ns,scheduled_ns,departure_ns,fate,bytes,segments,src,dst,protocol,sport,dport,seq,ack,flags,payload_len"
    );
    let mut reader = std::io::Cursor::new(log.into_bytes());
    let c = analyse_contention(&setup, 100.0, &streams, Some(&mut reader)).unwrap();
    assert_eq!(c.jain_overlap, Some(1.0));
    assert_eq!(c.drops, 1);
    assert_eq!(c.timeline.len(), 2);
    assert_eq!((c.timeline[0].seq, c.timeline[1].seq), (1, 1));
    assert!((c.queue_ms_fg_median.unwrap() - 1.5).abs() < 1e-9);
    assert!(c.link_utilisation.unwrap() > 0.9);
}
