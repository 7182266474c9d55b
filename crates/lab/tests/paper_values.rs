//! Issue 30: the papers' numbers and definitions that the shipped experiment
//! files carry, pinned to what the papers say (`shared/seeds/`), so an edit
//! that drifts from the paper fails here and not in a reader's hands.

use connlab_lab::{Experiment, PipelineExperiment, SingleIpExperiment};
use std::path::PathBuf;

fn file(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../experiments")
        .join(name)
}

#[test]
fn table4_judges_the_non_polling_engines_with_the_papers_tolerance_per_rate() {
    let e = Experiment::from_file(&file("locality-table4.toml")).unwrap();
    let p = e.paper.unwrap();
    // Table 4's 45 cells and the 15 ratio-1 cells of Table 3.
    assert_eq!(p.cells.len(), 60);
    let non_polling = |rates: &[f64]| {
        p.claims.iter().find(|c| {
            c.engines == ["processes", "threads", "epoll"]
                && c.versus.is_none()
                && c.metric.is_none()
                && c.rates.as_deref() == Some(rates)
        })
    };
    let low = non_polling(&[125.0, 500.0]).expect("a claim at 125 and 500 req/s");
    assert_eq!((low.expect_min, low.expect_max), (Some(0.67), Some(1.1)));
    assert!(low.text.contains("0.90-0.99x"), "{}", low.text);
    let high = non_polling(&[2000.0]).expect("a claim at 2,000 req/s");
    assert_eq!((high.expect_min, high.expect_max), (None, Some(0.8)));
    assert!(high.text.contains("0.61-0.75x"), "{}", high.text);
    assert!(p.claims.iter().any(|c| c.text.contains("30-46x")));
}

#[test]
fn gateway_limit_keeps_table_2_as_context_and_cites_section_3_2() {
    let e = Experiment::from_file(&file("gateway-limit.toml")).unwrap();
    let p = e.paper.unwrap();
    let context: Vec<f64> = p
        .claims
        .iter()
        .filter(|c| c.expect_min.is_none() && c.expect_max.is_none() && c.unmeasurable.is_none())
        .filter_map(|c| c.paper_value)
        .collect();
    assert_eq!(context, [1826.42, 143.5617]);
    for c in p.claims.iter().filter(|c| c.text.contains("78 %")) {
        assert_eq!(c.source, "section 3.2", "{}", c.text);
    }
}

#[test]
fn pipeline_line_alone_rates_are_the_papers() {
    let e = PipelineExperiment::from_file(&file("pipeline-tables.toml")).unwrap();
    let line: Vec<f64> = e.paper.unwrap().line.iter().map(|l| l.mbit_s).collect();
    assert_eq!(line, [4.7, 35.8, 98.2]);
}

#[test]
fn singleip_table_3_round_trips_are_the_papers() {
    let e = SingleIpExperiment::from_file(&file("singleip-saps.toml")).unwrap();
    let paper: Vec<&str> = e
        .paper
        .claims
        .iter()
        .filter(|c| c.source == "Table 3")
        .filter_map(|c| c.paper.as_deref())
        .collect();
    for want in [
        "mean SAPS 217.6 µs, NAT 255.6 µs",
        "min SAPS 165 µs, NAT 210 µs",
        "max SAPS 243 µs, NAT 334 µs",
    ] {
        assert!(
            paper.iter().any(|p| p.contains(want)),
            "{want} missing: {paper:?}"
        );
    }
}

/// The definitions issue 30 brought to the papers', pinned so an edit that
/// drifts back fails here.
#[test]
fn the_papers_definitions_stay_in_the_shipped_files() {
    use connlab_lab::{Bottleneck, ClaimShape, LinkSpec, Metric, Over};

    // Polling paper, Figure 7: the gain at a small ratio is a change of
    // rtsig's ratio to poll from 4 % to 0.5 %; Figure 10: latency against
    // the cycle of the same run.
    let e = Experiment::from_file(&file("polling-cost.toml")).unwrap();
    let p = e.paper.unwrap();
    assert!(p.claims.iter().any(|c| c.shape()
        == ClaimShape::Change {
            versus: "poll",
            from: 0.04,
            to: 0.005
        }));
    assert!(p
        .claims
        .iter()
        .any(|c| c.versus_metric == Some(Metric::Cycle) && c.source == "Figure 10"));

    // Load-balancing paper, section 3.1: the peak is the highest rate
    // served, not bounded by a response time.
    let e = Experiment::from_file(&file("gateway-web.toml")).unwrap();
    let peaks: Vec<_> = e
        .paper
        .as_ref()
        .unwrap()
        .claims
        .iter()
        .filter(|c| c.over == Over::Peak)
        .collect();
    assert!(!peaks.is_empty());
    for c in peaks {
        assert_eq!(c.peak_within_us, None, "{}", c.text);
    }
    // Section 3.2: six load generators, the client address modulo the
    // servers, 48 Mbit/s per segment.
    let e = Experiment::from_file(&file("gateway-limit.toml")).unwrap();
    assert_eq!(e.topology.client_hosts, 6);
    assert_eq!(e.web.as_ref().unwrap().policy.as_str(), "ip-mod");
    assert!(e
        .paper
        .unwrap()
        .claims
        .iter()
        .any(|c| c.divide_by == Some(6.0) && c.paper_value == Some(48.0)));

    // Locality paper, Figure 2: 5 % beyond 10 us, 90 % near the median.
    let e = Experiment::from_file(&file("locality-table3.toml")).unwrap();
    let shares: Vec<Option<f64>> = e
        .paper
        .unwrap()
        .claims
        .iter()
        .filter(|c| c.metric == Some(Metric::SendShares))
        .map(|c| c.paper_value)
        .collect();
    assert_eq!(shares, [Some(0.05), Some(0.9)]);

    // Single-IP paper: GbE links for RTT and bandwidth; the front's
    // interface queue of 100 packets at 100 Mbit/s; NAT's 40-packet switch.
    let e = SingleIpExperiment::from_file(&file("singleip-saps.toml")).unwrap();
    let gbit = Some(1_000_000_000);
    assert_eq!(
        e.rtt
            .as_ref()
            .unwrap()
            .link_rate
            .as_ref()
            .and_then(|r| r.bps()),
        gbit
    );
    assert_eq!(
        e.bandwidth
            .as_ref()
            .unwrap()
            .link_rate
            .as_ref()
            .and_then(|r| r.bps()),
        gbit
    );
    let c = e.contention.as_ref().unwrap();
    assert_eq!(c.bottleneck, Bottleneck::Front);
    assert_eq!((c.queue, c.rate.0), (100, 100_000_000));
    assert_eq!(c.nat_switch_queue, Some(40));

    // Pipeline paper: the line paced per size at its line-alone rates.
    let e = PipelineExperiment::from_file(&file("pipeline-tables.toml")).unwrap();
    let rates: Vec<Option<u64>> = [1024, 8192, 32768]
        .iter()
        .map(|&s| e.line_rate(LinkSpec::MemoryPerSize, s))
        .collect();
    assert_eq!(rates, [Some(4_700_000), Some(35_800_000), Some(98_200_000)]);
}
