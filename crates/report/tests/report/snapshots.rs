//! Snapshots (`insta`) of every format of three report kinds on small
//! fixtures: the locality kind, a loadgen sweep and a peers sweep. A change
//! to any output shows up as a snapshot diff to review.

use crate::support::{fixture, locality};
use connlab_lab::{
    ClientFigures, LoadgenDir, LoadgenExperiment, LoadgenInfo, LoadgenParams, LoadgenPoint,
    PeerPoint, PeersDir, PeersExperiment, PeersInfo, Role, RoleCpu, ServerFigures,
    LOADGEN_POINT_SCHEMA, LOADGEN_SWEEP_SCHEMA, PEERS_SWEEP_SCHEMA, PEER_POINT_SCHEMA,
};
use connlab_report::{render, render_loadgen, render_peers, Format};

/// The environment every fixture records: the one in `fixtures/load.json`.
fn environment() -> connlab_os::Environment {
    serde_json::from_value(fixture("load.json")["environment"].clone()).unwrap()
}

/// An HTML page with each SVG plot's body left out (the plots have tests
/// of their own), so the snapshot stays readable.
fn without_svg(html: &str) -> String {
    let mut out = String::new();
    let mut rest = html;
    while let Some(start) = rest.find("<svg") {
        out.push_str(&rest[..start]);
        out.push_str("<svg>…</svg>");
        let end = rest[start..]
            .find("</svg>")
            .map_or(rest.len(), |e| start + e + 6);
        rest = &rest[end..];
    }
    out.push_str(rest);
    out
}

#[test]
fn locality_in_every_format() {
    let dir = locality();
    insta::assert_snapshot!(
        "locality_html",
        without_svg(&render(&dir, Format::Html).unwrap())
    );
    insta::assert_snapshot!("locality_markdown", render(&dir, Format::Markdown).unwrap());
    insta::assert_snapshot!("locality_csv", render(&dir, Format::Csv).unwrap());
}

const LOADGEN: &str = r#"
kind = "loadgen"
name = "fixture"
title = "Fixture"
description = "A loadgen sweep in small."
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

/// One loadgen point: latency grows with the shards, send lag with the
/// repetition; 2 KiB more client memory per connection, 1 KiB server.
fn loadgen_point(p: &LoadgenParams) -> LoadgenPoint {
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
        commands: vec![vec![
            "connlab".into(),
            "serve".into(),
            "--engine".into(),
            "epoll".into(),
        ]],
        wall_s: 1.0,
        finished_unix_s: 0.0,
    }
}

/// A loadgen sweep whose last point is missing.
fn loadgen() -> LoadgenDir {
    let experiment = LoadgenExperiment::from_toml(LOADGEN, "fixture.toml").unwrap();
    let plan = experiment.plan(false);
    let points = plan[..plan.len() - 1].iter().map(loadgen_point).collect();
    LoadgenDir {
        info: LoadgenInfo {
            schema: LOADGEN_SWEEP_SCHEMA.into(),
            points_total: plan.len(),
            experiment,
            quick: false,
            environment: environment(),
            started_unix_s: 0.0,
        },
        points,
    }
}

#[test]
fn loadgen_in_every_format() {
    let dir = loadgen();
    insta::assert_snapshot!("loadgen_html", render_loadgen(&dir, Format::Html).unwrap());
    insta::assert_snapshot!(
        "loadgen_markdown",
        render_loadgen(&dir, Format::Markdown).unwrap()
    );
    insta::assert_snapshot!("loadgen_csv", render_loadgen(&dir, Format::Csv).unwrap());
}

const PEERS: &str = r#"
kind = "peers"
name = "fixture"
title = "Fixture: serve against nginx"
description = "A peers sweep in small."
measure = "server"
baseline = ["nginx-return", "nginx-static"]
repetitions = 2
[workload]
connections = 100
body_sizes = [128, "10KiB"]
duration = "10s"
[placement]
server_cpu = 1
client_cpu = 0
[client]
kind = "wrk"
threads = 1
[[contender]]
name = "nginx-return"
kind = "nginx-return"
body_sizes = [128]
[[contender]]
name = "nginx-static"
kind = "nginx-static"
[[contender]]
name = "epoll"
kind = "connlab-serve"
engine = "epoll"
"#;

/// A peers sweep: epoll answers 1.5 times nginx's requests per CPU second,
/// repetition 2 is 10 % faster than repetition 1, the last point missing.
fn peers() -> PeersDir {
    let experiment = PeersExperiment::from_toml(PEERS, "fixture.toml").unwrap();
    let plan = experiment.plan(false);
    let points = plan[..plan.len() - 1]
        .iter()
        .map(|p| {
            let speed = match p.contender.as_str() {
                "epoll" => 1.5,
                "nginx-static" => 0.9,
                _ => 1.0,
            } * if p.repetition == 2 { 1.1 } else { 1.0 };
            let requests_per_cpu_s = 40_000.0 * speed;
            PeerPoint {
                schema: PEER_POINT_SCHEMA.into(),
                id: p.id(),
                params: p.clone(),
                measure: Role::Server,
                requests: 200_000,
                requests_per_s: 20_000.0 * speed,
                errors: u64::from(p.repetition == 2 && p.contender == "epoll"),
                cpu: RoleCpu {
                    server_s: Some(200_000.0 / requests_per_cpu_s),
                    gateway_s: None,
                    client_s: Some(9.0),
                },
                measured_cpu_s: 200_000.0 / requests_per_cpu_s,
                requests_per_cpu_s,
                wall_s: 10.0,
                commands: vec![
                    (Role::Server, vec!["server".into(), p.contender.clone()]),
                    (Role::Client, vec!["wrk".into(), "-c100".into()]),
                ],
                finished_unix_s: 0.0,
            }
        })
        .collect();
    PeersDir {
        info: PeersInfo {
            schema: PEERS_SWEEP_SCHEMA.into(),
            experiment,
            quick: false,
            environment: environment(),
            peer_versions: vec![("nginx".into(), "nginx/1.22.1".into())],
            started_unix_s: 0.0,
            points_total: plan.len(),
        },
        points,
    }
}

#[test]
fn peers_in_every_format() {
    let dir = peers();
    insta::assert_snapshot!(
        "peers_html",
        without_svg(&render_peers(&dir, Format::Html).unwrap())
    );
    insta::assert_snapshot!(
        "peers_markdown",
        render_peers(&dir, Format::Markdown).unwrap()
    );
    insta::assert_snapshot!("peers_csv", render_peers(&dir, Format::Csv).unwrap());
}
