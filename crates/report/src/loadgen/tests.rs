//! The loadgen report on a small sweep built in code.

use super::*;
use connlab_lab::{
    ClientFigures, LoadgenExperiment, LoadgenInfo, ServerFigures, LOADGEN_POINT_SCHEMA,
};

const FILE: &str = r#"
kind = "loadgen"
name = "fixture"
title = "Fixture"
tables = ["latency", "memory", "shards", "pacing"]
repetitions = 2
[server]
engines = ["epoll"]
[workload]
connections = [100, 1100]
active_ratios = ["1/4"]
rates = [2000]
duration = "1s"
shards = [1, 2]
[placement]
server_cpu = 1
writer_cpu = 0
"#;

fn point(p: &LoadgenParams) -> LoadgenPoint {
    let rep = f64::from(p.repetition);
    let shards = f64::from(p.shards);
    let mut client: ClientFigures = serde_json::from_value(serde_json::json!({
        "established": p.connections, "failed_connections": 0, "setup_s": 0.1,
        "setup_rate_per_s": 1000.0, "measured_sent": 2000, "measured_completed": 2000,
        "errors": 0, "achieved_rate_per_s": 2000.0,
        "service_latency_us": {"count": 2000, "mean": 100.0, "stddev": 10.0, "min": 50.0,
            "p50": 90.0 * shards, "p90": 120.0, "p99": 200.0 + rep, "p999": 300.0,
            "p9999": 400.0, "max": 500.0},
        "send_lag_us": {"count": 2000, "mean": 10.0, "stddev": 1.0, "min": 1.0, "p50": 5.0,
            "p90": 8.0, "p99": 20.0 * rep, "p999": 30.0, "p9999": 40.0, "max": 50.0},
        "send_deviation_us": {"count": 2000, "stddev": 3.0, "median": 1.0, "max": 9.0},
        "cpu_s": 0.5, "max_rss_kib": 1000
    }))
    .unwrap();
    // 2 KiB more per connection on the client, 1 KiB on the server.
    client.max_rss_kib = 1000 + 2 * p.connections;
    LoadgenPoint {
        schema: LOADGEN_POINT_SCHEMA.into(),
        id: p.id(),
        params: p.clone(),
        client,
        server: ServerFigures {
            cpu_s: Some(0.2),
            max_rss_kib: Some(500 + p.connections),
        },
        commands: vec![vec!["connlab".into(), "serve".into()]],
        wall_s: 1.0,
        finished_unix_s: 0.0,
    }
}

fn fixture() -> LoadgenDir {
    let experiment = LoadgenExperiment::from_toml(FILE, "f.toml").unwrap();
    let plan = experiment.plan(false);
    // The last point is missing.
    let points = plan[..plan.len() - 1].iter().map(point).collect();
    LoadgenDir {
        info: LoadgenInfo {
            schema: "connlab.loadgen.sweep/1".into(),
            points_total: plan.len(),
            experiment,
            quick: false,
            environment: connlab_os::Environment::capture(),
            started_unix_s: 0.0,
        },
        points,
    }
}

#[test]
fn markdown_has_every_table_with_medians_and_spread() {
    let md = render_loadgen(&fixture(), Format::Markdown).unwrap();
    for s in [
        "## Service latency",
        "## Memory per connection",
        "## Shards against one process",
        "## Pacing",
        "| connections | client processes | reps | service mean (µs) |",
        "send lag p99.9 (µs)",
        // Send lag p99 is 20 and 40 over the two repetitions.
        "| 30 (20–40) |",
        "| 100 → 1,100 | 2 | 1 |",
        "2,048",
        "2 against 1",
        "| 2.00× |",
        "1 s measured after 1 s warm-up",
        "7 of 8, 2 repetitions",
        "server CPU 1, client writer CPU 0, client reader CPU 0",
        "Not measured yet: epoll-1100c-1of4-2000rps-2sh-rep2",
    ] {
        assert!(md.contains(s), "missing {s:?} in\n{md}");
    }
    assert!(!md.contains('?'), "{md}");
}

#[test]
fn numbers_read_well() {
    assert_eq!(num(19375.4), "19,375");
    assert_eq!(num(99.84), "99.84");
    assert_eq!(num(2.0), "2");
    assert_eq!(num(0.0042), "0.004");
    assert_eq!(num(0.0), "0");
    assert_eq!(cell(Spread::of(&[1.0, 3.0, 2.0]), "µs"), "2 (1–3)");
    assert_eq!(cell(Spread::of(&[1.5]), "×"), "1.50×");
    assert_eq!(cell(None, "µs"), "—");
}

#[test]
fn csv_is_long_form_with_every_column() {
    let text = render_loadgen(&fixture(), Format::Csv).unwrap();
    let mut r = csv::Reader::from_reader(text.as_bytes());
    let head: Vec<String> = r.headers().unwrap().iter().map(str::to_string).collect();
    assert_eq!(
        head,
        [
            "table",
            "engine",
            "connections",
            "active_ratio",
            "rate",
            "source_addrs",
            "shards",
            "metric",
            "unit",
            "repetitions",
            "median",
            "min",
            "max"
        ]
    );
    let rows: Vec<csv::StringRecord> = r.records().map(Result::unwrap).collect();
    let slope = rows
        .iter()
        .find(|r| &r[7] == "server_bytes_per_connection" && &r[6] == "1")
        .unwrap();
    assert_eq!(slope[10].parse::<f64>().unwrap(), 1024.0);
    assert!(rows
        .iter()
        .any(|r| &r[7] == "service_p50_us_ratio" && r[10].parse::<f64>().unwrap() == 2.0));
}

#[test]
fn html_is_a_page_of_tables() {
    let page = render_loadgen(&fixture(), Format::Html).unwrap();
    assert!(page.starts_with("<!DOCTYPE html>"));
    // Six tables, the commands and the points not measured.
    assert_eq!(page.matches("<h2>").count(), 8);
    assert!(page.contains("<th>send lag p50 (µs)</th>"));
}
