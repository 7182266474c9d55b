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
        fair_window_s: 0.2,
        fair_jain: 0.95,
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

#[test]
fn validity_limits_are_read_and_a_bad_value_names_its_field() {
    let e = SingleIpExperiment::from_toml(FILE, "t.toml").unwrap();
    assert_eq!(e.validity, crate::validity::ValidityLimits::default());
    let with = |section: &str| FILE.replace("[quick]", &format!("[validity]\n{section}\n[quick]"));
    let e =
        SingleIpExperiment::from_toml(&with("attempts = 1\nsteal = \"off\""), "t.toml").unwrap();
    assert_eq!(e.validity.attempts, Some(1));
    assert_eq!(e.validity.steal, crate::validity::Limit(None));
    for (text, field) in [
        ("steal = 2", "validity.steal"),
        ("attempts = 0", "validity.attempts"),
        ("control = \"io16k\"", "validity.control"),
        ("stael = 0.1", "stael"),
    ] {
        let err = SingleIpExperiment::from_toml(&with(text), "t.toml")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains(field) && err.contains("t.toml"),
            "{text}: {err}"
        );
    }
}

mod validity {
    use super::FILE;
    use crate::validity::{Gate, Validity};
    use crate::{
        judge, summarise_rtt, Check, ExpKind, LinkInfo, PlacementInfo, SingleIpExperiment,
        SingleIpMetric, SingleIpPoint, SingleIpRecord, SingleIpSweep, SingleIpSweepInfo, System,
        Verdict, SINGLEIP_POINT_SCHEMA, SINGLEIP_SWEEP_SCHEMA,
    };

    /// An RTT point of `system` at repetition `rep` whose round trips
    /// average `mean`, with `validity`.
    fn point(system: System, rep: u32, mean: f64, validity: Option<Validity>) -> SingleIpRecord {
        let point = SingleIpPoint {
            experiment: ExpKind::Rtt,
            system,
            param: 4,
            repetition: rep,
        };
        SingleIpRecord {
            schema: SINGLEIP_POINT_SCHEMA.into(),
            id: point.id(),
            point,
            placement: PlacementInfo {
                clients: 0,
                linkem: 0,
                front: 1,
                nodes: 1,
                front_rps: 1,
            },
            link: LinkInfo {
                delay_us: 0,
                rate_bps: None,
                queue_packets: None,
                bottleneck: None,
                switch_queue_packets: None,
            },
            congestion_control: "reno".into(),
            rtt: summarise_rtt(&[mean - 1.0, mean, mean + 1.0]),
            transfers: Vec::new(),
            contention: None,
            cpu: None,
            warnings: Vec::new(),
            finished_unix_s: 0.0,
            checked: crate::validity::Checked {
                validity,
                machine: None,
                window_cpu: None,
            },
        }
    }

    fn steal(share: f64) -> Option<Validity> {
        Some(Validity::of(
            vec![Gate::at_most("steal", share, 0.02, String::new())],
            3,
        ))
    }

    fn sweep(points: Vec<SingleIpRecord>) -> SingleIpSweep {
        let experiment = SingleIpExperiment::from_toml(FILE, "t.toml").unwrap();
        SingleIpSweep {
            path: "t".into(),
            info: SingleIpSweepInfo {
                schema: SINGLEIP_SWEEP_SCHEMA.into(),
                name: "t".into(),
                quick: false,
                started_unix_s: 0.0,
                points_total: points.len(),
                connlab_version: "test".into(),
                environment: connlab_os::Environment::capture(),
                placement: points[0].placement.clone(),
            },
            experiment,
            points,
        }
    }

    const ORDER: Check = Check::Order {
        metric: SingleIpMetric::RttMeanUs,
        param: None,
        lower: System::Io16k,
        higher: System::Nat,
    };

    #[test]
    fn a_claim_on_invalid_points_cannot_be_judged_and_says_why() {
        let mut points: Vec<SingleIpRecord> = (1..=3)
            .map(|r| point(System::Io16k, r, 100.0, steal(0.01)))
            .collect();
        points.extend((1..=3).map(|r| point(System::Nat, r, 200.0, steal(0.05 + 0.01 * r as f64))));
        let s = sweep(points);
        let j = judge(&s, &ORDER);
        assert_eq!(
            j.verdict,
            Verdict::CannotJudge(
                "no valid point of nat for RTT mean (µs): steal 8 % > 2 % at 3 of 3 points".into()
            ),
            "{}",
            j.detail
        );
        assert_eq!(j.verdict.csv_key(), "cannot_judge_here");
        // The same for a claim on one system's values.
        let at_least = Check::AtLeast {
            metric: SingleIpMetric::RttMeanUs,
            param: None,
            systems: vec![System::Io16k, System::Nat],
            value: 1.0,
        };
        assert!(matches!(
            judge(&s, &at_least).verdict,
            Verdict::CannotJudge(_)
        ));
        let similar = Check::Similar {
            metric: SingleIpMetric::RttMeanUs,
            param: None,
            systems: vec![System::Io16k, System::Nat],
            tolerance: 0.5,
        };
        assert!(matches!(
            judge(&s, &similar).verdict,
            Verdict::CannotJudge(_)
        ));
    }

    #[test]
    fn numbers_are_judged_within_their_bounds_and_ratios_over_every_pairing() {
        let s = sweep(vec![
            point(System::Io16k, 1, 100.0, None),
            point(System::Nat, 1, 240.0, None),
            point(System::Io16k, 2, 110.0, None),
            point(System::Nat, 2, 260.0, None),
        ]);
        let within = |min: f64, max: f64| Check::Within {
            metric: SingleIpMetric::RttMeanUs,
            param: None,
            systems: vec![System::Io16k],
            min,
            max,
        };
        assert_eq!(judge(&s, &within(90.0, 120.0)).verdict, Verdict::Holds);
        assert!(matches!(
            judge(&s, &within(90.0, 105.0)).verdict,
            Verdict::DoesNotHold { .. }
        ));
        // nat / io16k: 240/110 = 2.18 to 260/100 = 2.6.
        let ratio = |min: f64, max: f64| Check::Ratio {
            metric: SingleIpMetric::RttMeanUs,
            param: None,
            over: System::Nat,
            under: System::Io16k,
            min,
            max,
        };
        let j = judge(&s, &ratio(2.0, 3.0));
        assert_eq!(j.verdict, Verdict::Holds, "{}", j.detail);
        assert!(j.detail.contains("2.18-2.6x"), "{}", j.detail);
        assert!(matches!(
            judge(&s, &ratio(2.3, 3.0)).verdict,
            Verdict::DoesNotHold { .. }
        ));
    }

    #[test]
    fn claims_rest_on_valid_points_and_note_those_left_out() {
        // Repetition 2 of nat measured 50 µs on a stolen CPU: left out, the
        // order holds on the rest.
        let s = sweep(vec![
            point(System::Io16k, 1, 100.0, steal(0.0)),
            point(System::Nat, 1, 200.0, steal(0.0)),
            point(System::Io16k, 2, 100.0, steal(0.0)),
            point(System::Nat, 2, 50.0, steal(0.3)),
            point(System::Io16k, 3, 100.0, None),
            point(System::Nat, 3, 200.0, None),
        ]);
        let j = judge(&s, &ORDER);
        assert_eq!(j.verdict, Verdict::Holds, "{}", j.detail);
        assert!(
            j.detail.ends_with("(1 invalid point left out)"),
            "{}",
            j.detail
        );
        assert_eq!(
            s.values(SingleIpMetric::RttMeanUs, System::Nat, None).len(),
            2
        );
        // Two systems per repetition pair by repetition, valid ones only.
        let pairs = s.paired(SingleIpMetric::RttMeanUs, System::Io16k, System::Nat, None);
        let reps: Vec<u32> = pairs.iter().map(|p| p.0).collect();
        assert_eq!(reps, vec![1, 3]);
        assert!(pairs.iter().all(|p| p.1 == 100.0 && p.2 == 200.0));
    }

    #[test]
    fn a_point_written_before_validity_existed_reads_as_valid() {
        let r = point(System::Io16k, 1, 100.0, steal(0.01));
        let mut json = serde_json::to_value(&r).unwrap();
        assert_eq!(json["validity"]["gates"][0]["name"], "steal");
        for key in ["validity", "machine", "window_cpu"] {
            json.as_object_mut().unwrap().remove(key);
        }
        let old: SingleIpRecord = serde_json::from_value(json).unwrap();
        assert!(old.checked.validity.is_none() && old.checked.is_valid());
        let text = serde_json::to_string(&old).unwrap();
        assert!(!text.contains("validity"), "{text}");
    }
}

// ------------------------------------------------------------------ issue 30

/// `FILE` with `[rtt]`'s and `[bandwidth]`'s `link_rate` and more
/// `[contention]` fields.
fn with_links(rtt: &str, bandwidth: &str, contention: &str) -> String {
    FILE.replace(
        "round_trips = 100\n",
        &format!("round_trips = 100\n{rtt}\n"),
    )
    .replace(
        "bytes_per_point = \"1MB\"\n",
        &format!("bytes_per_point = \"1MB\"\n{bandwidth}\n"),
    )
    .replace(
        "background_after_small = \"4s\"\n",
        &format!("background_after_small = \"4s\"\n{contention}\n"),
    )
}

#[test]
fn link_rates_of_rtt_and_bandwidth_are_read_and_checked() {
    let e = SingleIpExperiment::from_toml(FILE, "t.toml").unwrap();
    assert_eq!(e.rtt.unwrap().link_rate_bps(), None);
    let text = with_links("link_rate = \"1gbit\"", "link_rate = \"100mbit\"", "");
    let e = SingleIpExperiment::from_toml(&text, "t.toml").unwrap();
    assert_eq!(e.rtt.unwrap().link_rate_bps(), Some(1_000_000_000));
    assert_eq!(e.bandwidth.unwrap().link_rate_bps(), Some(100_000_000));
    let text = with_links("link_rate = \"none\"", "", "");
    let e = SingleIpExperiment::from_toml(&text, "t.toml").unwrap();
    assert_eq!(e.rtt.unwrap().link_rate_bps(), None);
    for (rtt, bandwidth, field, value) in [
        ("link_rate = \"fast\"", "", "rtt.link_rate", "fast"),
        (
            "link_rate = \"500kbit\"",
            "",
            "rtt.link_rate",
            "\"500kbit\"",
        ),
        (
            "",
            "link_rate = \"20gbit\"",
            "bandwidth.link_rate",
            "\"20gbit\"",
        ),
        ("", "link_rate = 1000", "bandwidth.link_rate", "1000"),
    ] {
        let err = SingleIpExperiment::from_toml(&with_links(rtt, bandwidth, ""), "t.toml")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("t.toml") && err.contains(field) && err.contains(value),
            "{rtt}{bandwidth}: {err}"
        );
    }
}

#[test]
fn the_front_bottleneck_and_the_nat_switch_queue_are_read_and_checked() {
    use super::experiment::Bottleneck;
    let text = with_links("", "", "bottleneck = \"front\"\nnat_switch_queue = 40");
    let c = SingleIpExperiment::from_toml(&text, "t.toml")
        .unwrap()
        .contention
        .unwrap();
    assert_eq!(
        (c.bottleneck, c.nat_switch_queue),
        (Bottleneck::Front, Some(40))
    );
    let c = SingleIpExperiment::from_toml(FILE, "t.toml")
        .unwrap()
        .contention
        .unwrap();
    assert_eq!(
        (c.bottleneck, c.nat_switch_queue),
        (Bottleneck::Emulator, None)
    );
    for (line, field) in [
        ("nat_switch_queue = 0", "contention.nat_switch_queue"),
        ("bottleneck = \"switch\"", "switch"),
        ("nat_switch_queue = -1", "nat_switch_queue"),
    ] {
        let err = SingleIpExperiment::from_toml(&with_links("", "", line), "t.toml")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains(field) && err.contains("t.toml"),
            "{line}: {err}"
        );
    }
}

#[test]
fn the_shipped_file_has_the_issue_30_links_and_rows() {
    use super::claims::{Check, SingleIpMetric};
    use super::experiment::{Bottleneck, System};
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../experiments/singleip-saps.toml");
    let e = SingleIpExperiment::from_file(&path).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(e.rtt.as_ref().unwrap().link_rate_bps(), Some(1_000_000_000));
    assert_eq!(
        e.bandwidth.as_ref().unwrap().link_rate_bps(),
        Some(1_000_000_000)
    );
    let c = e.contention.as_ref().unwrap();
    assert_eq!(
        (c.bottleneck, c.rate.0, c.queue, c.nat_switch_queue),
        (Bottleneck::Front, 100_000_000, 100, Some(40))
    );
    // 100 full-size packets at 100 Mbit/s: the paper's 12 ms.
    let full_ms = f64::from(c.queue) * 1514.0 * 8.0 / c.rate.0 as f64 * 1e3;
    assert!((full_ms - 12.0).abs() < 0.5, "{full_ms}");
    let claim = |id: &str| {
        e.paper
            .claims
            .iter()
            .find(|c| c.id == id)
            .unwrap_or_else(|| panic!("no claim {id}"))
    };
    assert!(matches!(
        claim("fig12-nat-unfair-duration").check,
        Check::Within { metric: SingleIpMetric::FairAfterS, ref systems, .. } if systems == &[System::Nat]
    ));
    assert!(matches!(
        claim("pseudo-delay-12ms").check,
        Check::Within { metric: SingleIpMetric::QueuePeakMs, ref systems, .. } if systems == &[System::IoOff]
    ));
    let fig12: Vec<_> = e
        .paper
        .values
        .iter()
        .filter(|v| v.source == "Figure 12")
        .collect();
    assert_eq!(fig12.len(), 1);
    assert_eq!(fig12[0].metric, Some(SingleIpMetric::FairAfterS));
    let pseudo: Vec<(f64, Option<SingleIpMetric>)> = e
        .paper
        .values
        .iter()
        .filter(|v| v.source == "Section 2.2.1")
        .map(|v| (v.value, v.metric))
        .collect();
    assert_eq!(
        pseudo,
        [
            (1000.0, Some(SingleIpMetric::QueuePeakPackets)),
            (1_500_000.0, Some(SingleIpMetric::QueuePeakBytes)),
            (12.0, Some(SingleIpMetric::QueuePeakMs)),
        ]
    );
    // Table 3's maxima and Figure 9's numbers are there once each.
    for id in [
        "table3-saps-max-lower",
        "fig9-no-limit-delay",
        "fig9-no-limit-ratio",
    ] {
        assert_eq!(e.paper.claims.iter().filter(|c| c.id == id).count(), 1);
    }
}

/// Three 100 MB-class streams from `epoch` 100.0 with these per-bin byte
/// counts (bins of 0.1 s).
fn three_streams(bins: [Vec<u64>; 3]) -> Vec<(String, ProbeTransfer)> {
    let names = ["fg", "bg1", "bg2"];
    bins.into_iter()
        .zip(names)
        .map(|(bins, name)| {
            let size = 1000;
            (
                name.to_string(),
                ProbeTransfer {
                    size,
                    got: size,
                    t0: 100.0,
                    t_conn: 100.001,
                    t_first: Some(100.002),
                    t_last: Some(100.0 + bins.len() as f64 * 0.1),
                    bins,
                },
            )
        })
        .collect()
}

fn setup() -> ContentionSetup {
    ContentionSetup {
        background: 1000,
        bin_s: 0.1,
        early_window_s: 0.5,
        rate_bps: 100_000_000,
        delay_ms: 1.0,
        client_addrs: ["1.0.0.1".into(), "1.0.0.2".into(), "1.0.0.3".into()],
        timeline_every: 1,
        fair_window_s: 0.5,
        fair_jain: 0.95,
    }
}

#[test]
fn fair_after_is_the_start_of_the_first_fair_window() {
    // Unequal (4:1:1) for 16 bins, equal after: the first window of five
    // bins with Jain >= 0.95 starts at bin 15 (1.5 s after the start).
    let uneven = |a: u64| -> Vec<u64> { (0..30).map(|k| if k < 16 { a } else { 10 }).collect() };
    let s = three_streams([uneven(20), uneven(5), uneven(5)]);
    let c = analyse_contention(&setup(), 100.0, &s, None).unwrap();
    assert!((c.fair_after_s.unwrap() - 1.5).abs() < 1e-9, "{c:?}");
    // Never fair: the whole overlap.
    let s = three_streams([vec![20; 30], vec![5; 30], vec![5; 30]]);
    let c = analyse_contention(&setup(), 100.0, &s, None).unwrap();
    assert!((c.fair_after_s.unwrap() - 3.0).abs() < 1e-9, "{c:?}");
    // Fair from the first whole bin.
    let s = three_streams([vec![10; 30], vec![10; 30], vec![10; 30]]);
    let c = analyse_contention(&setup(), 100.0, &s, None).unwrap();
    assert!((c.fair_after_s.unwrap() - 0.1).abs() < 1e-9, "{c:?}");
}

#[test]
fn host_queue_samples_give_the_pseudo_delay() {
    use super::contention::{apply_host_queue, summarise_host_queue};
    use super::records::QueueSample;
    let names = vec!["switch port".to_string(), "front eth0".to_string()];
    let s = |t_s: f64, sw: u64, front: u64, drops: u64| QueueSample {
        t_s,
        bytes: vec![sw, front],
        packets: vec![sw / 1514, front / 1514],
        drops: vec![drops, 0],
    };
    let samples = vec![
        s(10.000, 0, 0, 3),
        s(10.005, 1514 * 40, 1514 * 60, 5),
        s(10.010, 1514 * 20, 0, 7),
        s(10.015, 0, 1514 * 10, 9),
        // A torn reading is left out.
        QueueSample {
            t_s: 10.02,
            bytes: vec![1 << 40],
            packets: vec![],
            drops: vec![],
        },
    ];
    let q = summarise_host_queue(&names, &samples, 100_000_000, Some((10.004, 10.011))).unwrap();
    assert_eq!(q.samples, 4);
    assert!((q.period_ms - 5.0).abs() < 1e-6);
    // 100 full-size packets together: 151,400 bytes, 12.1 ms at 100 Mbit/s.
    assert_eq!(q.peak_bytes, 151_400);
    assert!((q.peak_full_packets - 100.0).abs() < 1e-9);
    assert!((q.peak_ms - 12.112).abs() < 1e-9);
    assert_eq!(
        (
            q.queues[0].peak_packets,
            q.queues[0].drops,
            q.queues[1].drops
        ),
        (40, 6, 0)
    );
    assert!((q.queues[1].peak_ms - 1514.0 * 60.0 * 8.0 / 1e5).abs() < 1e-9);
    // The foreground ran during the second and third samples.
    let fg = q.fg_median_ms.unwrap();
    assert!((fg - (12.112 + 1514.0 * 20.0 * 8.0 / 1e5) / 2.0).abs() < 1e-9);
    let streams = three_streams([vec![10; 30], vec![10; 30], vec![10; 30]]);
    let mut c = analyse_contention(&setup(), 100.0, &streams, None).unwrap();
    c.drops = 1;
    apply_host_queue(&mut c, q.clone(), true);
    assert_eq!(c.queue_ms_fg_median, q.fg_median_ms);
    assert_eq!(c.queue_ms_median, Some(q.median_ms));
    assert_eq!(c.drops, 7);
    assert!(summarise_host_queue(&names, &[], 100_000_000, None).is_none());
}

mod new_rows {
    use crate::{
        apply_host_queue, judge, summarise_host_queue, ContentionResult, ExpKind, LinkInfo,
        PlacementInfo, QueueSample, SingleIpExperiment, SingleIpMetric, SingleIpPoint,
        SingleIpRecord, SingleIpSweep, SingleIpSweepInfo, System, Verdict, SINGLEIP_POINT_SCHEMA,
        SINGLEIP_SWEEP_SCHEMA,
    };
    use std::path::Path;

    /// A 100 MB contention point of `system` whose streams first share
    /// fairly after `fair_after_s` and whose host queue peaked at `peak`
    /// bytes (at 100 Mbit/s).
    fn point(system: System, rep: u32, fair_after_s: f64, peak: u64) -> SingleIpRecord {
        let point = SingleIpPoint {
            experiment: ExpKind::Contention,
            system,
            param: 100_000_000,
            repetition: rep,
        };
        let mut c = ContentionResult {
            bin_s: 0.1,
            streams: Vec::new(),
            fg_completion_ms: None,
            fg_connect_ms: 0.0,
            jain_overlap: None,
            jain_early: None,
            jain_bin_median: None,
            overlap_s: None,
            link_utilisation: None,
            queue_ms_median: None,
            queue_ms_p95: None,
            queue_ms_fg_median: None,
            drops: 0,
            timeline: Vec::new(),
            timeline_every: 1,
            fair_after_s: Some(fair_after_s),
            host_queue: None,
        };
        let samples = [0, peak].map(|b| QueueSample {
            t_s: 0.0,
            bytes: vec![b],
            packets: vec![b / 1514],
            drops: vec![0],
        });
        let q = summarise_host_queue(&["front eth0".into()], &samples, 100_000_000, None);
        apply_host_queue(&mut c, q.unwrap(), true);
        SingleIpRecord {
            schema: SINGLEIP_POINT_SCHEMA.into(),
            id: point.id(),
            point,
            placement: PlacementInfo {
                clients: 0,
                linkem: 0,
                front: 1,
                nodes: 1,
                front_rps: 1,
            },
            link: LinkInfo {
                delay_us: 1000,
                rate_bps: Some(100_000_000),
                queue_packets: Some(100),
                bottleneck: None,
                switch_queue_packets: None,
            },
            congestion_control: "reno".into(),
            rtt: None,
            transfers: Vec::new(),
            contention: Some(c),
            cpu: None,
            warnings: Vec::new(),
            finished_unix_s: 0.0,
            checked: crate::validity::Checked {
                validity: None,
                machine: None,
                window_cpu: None,
            },
        }
    }

    fn judged(points: Vec<SingleIpRecord>) -> Vec<(String, Verdict, String)> {
        let path =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../experiments/singleip-saps.toml");
        let experiment = SingleIpExperiment::from_file(&path).unwrap();
        let s = SingleIpSweep {
            path: "t".into(),
            info: SingleIpSweepInfo {
                schema: SINGLEIP_SWEEP_SCHEMA.into(),
                name: "t".into(),
                quick: false,
                started_unix_s: 0.0,
                points_total: points.len(),
                connlab_version: "test".into(),
                environment: connlab_os::Environment::capture(),
                placement: points[0].placement.clone(),
            },
            experiment,
            points,
        };
        ["fig12-nat-unfair-duration", "pseudo-delay-12ms"]
            .iter()
            .map(|id| {
                let c = s.experiment.paper.claims.iter().find(|c| c.id == *id);
                let j = judge(&s, &c.unwrap().check);
                (id.to_string(), j.verdict, j.detail)
            })
            .collect()
    }

    #[test]
    fn the_new_rows_are_judged_from_the_measured_figures() {
        // NAT fair after 1.5-1.9 s, the front queue without the limit at
        // 95-100 full-size packets (11.5-12.1 ms): both hold.
        let pts = vec![
            point(System::Nat, 1, 1.5, 0),
            point(System::Nat, 2, 1.9, 0),
            point(System::IoOff, 1, 0.2, 1514 * 100),
            point(System::IoOff, 2, 0.2, 1514 * 95),
        ];
        for (id, v, detail) in judged(pts) {
            assert!(matches!(v, Verdict::Holds), "{id}: {v:?} {detail}");
        }
        // NAT fair at once and the queue kept short (TCP small queues):
        // neither holds, and the details give our figures.
        let pts = vec![
            point(System::Nat, 1, 0.1, 0),
            point(System::IoOff, 1, 0.1, 1514 * 20),
        ];
        let j = judged(pts);
        assert!(
            j.iter()
                .all(|(_, v, _)| matches!(v, Verdict::DoesNotHold { .. })),
            "{j:?}"
        );
        assert!(j[0].2.contains("nat 0.1"), "{}", j[0].2);
        assert!(j[1].2.contains("iooff 2.42"), "{}", j[1].2);
        // Without contention points: cannot be measured.
        let pts = vec![point(System::Io16k, 1, 0.1, 0)];
        for (id, v, _) in judged(pts) {
            assert!(matches!(v, Verdict::CannotMeasure(_)), "{id}: {v:?}");
        }
        // The metrics read the fields.
        let p = point(System::IoOff, 1, 0.7, 1514 * 50);
        assert_eq!(SingleIpMetric::FairAfterS.of(&p), Some(0.7));
        assert_eq!(SingleIpMetric::QueuePeakBytes.of(&p), Some(75_700.0));
        assert_eq!(SingleIpMetric::QueuePeakPackets.of(&p), Some(50.0));
    }
}
