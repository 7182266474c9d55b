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
