//! Projections to settings of the paper this machine cannot run.

use crate::support::{sweep, LOCALITY};
use connlab_lab::SweepDir;
use connlab_report::{render, Format};
use std::path::Path;

/// The polling paper's projection to 40,000 connections.
pub(crate) const PROJECTION: &str = r#"
[paper.projection]
along = "connections"
to = [40000]
why = "Only 20,000 descriptors here."
"#;

/// The polling-cost kind in small: the locality fixture's engines at
/// 1,000, 5,000 and 10,000 connections, closed loop, CPU per poll call,
/// with [`PROJECTION`] in place of the paper's cells and claims.
pub(crate) fn polling_toml() -> String {
    let poll = LOCALITY
        .replace(
            "metric = \"service_latency\"\nvary",
            "metric = \"poll_call\"\nvary",
        )
        .replace("rates = [125, 500]", "rates = [\"max\"]")
        .replace(
            "connections = [400, 2000]",
            "connections = [1000, 5000, 10000]",
        )
        .replace(
            "[matrix]",
            "[client]\nactive_policy = \"rotating\"\ndepth = 1\n[matrix]",
        );
    poll[..poll.find("[[paper.cells]]").unwrap()].to_string() + PROJECTION
}

/// The polling-cost kind in small, projected to 40,000 connections:
/// select's CPU per call grows in proportion (10, 50, 100 µs at 1,000,
/// 5,000 and 10,000 connections: 400 µs at 40,000), epoll's falls (no
/// projection).
fn polling_projected() -> SweepDir {
    sweep(&polling_toml(), |p| {
        let poll = if p.engine == "select" {
            p.connections as f64 / 100.0
        } else {
            20.0 - p.connections as f64 / 1000.0
        };
        (100.0, 0.0, poll)
    })
}

#[test]
fn projections_are_in_every_format() {
    let dir = polling_projected();
    let html = render(&dir, Format::HTML).unwrap();
    let _ = std::fs::write(
        Path::new(env!("CARGO_TARGET_TMPDIR")).join("report-polling-projected.html"),
        &html,
    );
    assert!(html.contains("Projection to the paper's 40,000 conns"));
    assert!(html.contains("40,000 conns: 400 µs"), "select projected");
    assert!(html.contains("no projection: our values fall"), "epoll not");

    let md = render(&dir, Format::MARKDOWN).unwrap();
    let section = &md[md
        .find("## Projection to the paper's 40,000 conns")
        .expect("markdown section")..];
    let section = &section[..section.find("\n## ").unwrap_or(section.len())];
    let select = section
        .lines()
        .find(|l| l.starts_with("| select |"))
        .expect("select row");
    assert!(
        select.contains("10,000 conns: 100 µs"),
        "measured beside: {select}"
    );
    assert!(
        select.contains("40,000 conns: 400 µs"),
        "projected: {select}"
    );
    assert!(select.contains("| 1.00 |"), "R²: {select}");
    assert!(
        select.contains("1,000 conns: 10 µs;") && !section.contains(".0 µs"),
        "no trailing .0: {section}"
    );
    let epoll = section
        .lines()
        .find(|l| l.starts_with("| epoll |"))
        .expect("epoll row");
    assert!(epoll.contains("no projection: our values fall"), "{epoll}");
    assert!(section.contains("Only 20,000 descriptors here."), "why");

    let csv = render(&dir, Format::CSV).unwrap();
    let mut reader = csv::Reader::from_reader(csv.as_bytes());
    let headers = reader.headers().unwrap().clone();
    let col = |name: &str| headers.iter().position(|h| h == name).unwrap();
    let rows: Vec<csv::StringRecord> = reader.records().map(Result::unwrap).collect();
    assert!(rows.iter().all(|r| r.len() == headers.len()), "rectangular");
    let projection = |engine: &str| {
        rows.iter()
            .find(|r| &r[col("kind")] == "projection" && &r[col("engine")] == engine)
            .unwrap_or_else(|| panic!("{engine} projection row"))
    };
    let select = projection("select");
    assert_eq!(&select[col("projection_along")], "connections");
    assert_eq!(&select[col("projected_to")], "40000.0");
    let projected: f64 = select[col("projected_us")].parse().unwrap();
    assert!((projected - 400.0).abs() < 1e-6, "{projected}");
    let r2: f64 = select[col("projection_r2")].parse().unwrap();
    assert!(r2 > 0.999, "{r2}");
    assert_eq!(&select[col("no_projection")], "");
    assert_eq!(
        &select[col("projection_measured")],
        "1000:10;5000:50;10000:100"
    );
    assert_eq!(&select[col("stored_unit")], "us");
    let epoll = projection("epoll");
    assert_eq!(&epoll[col("projected_us")], "");
    assert!(epoll[col("no_projection")].contains("fall"));
}
