//! The fixtures the tests share (a locality sweep built from one real load
//! result, a loadgen sweep, a peers sweep), and readers of SVG plots.

use connlab_lab::validity::{Gate, Validity};
use connlab_lab::{
    ClientFigures, Experiment, LoadgenDir, LoadgenExperiment, LoadgenInfo, LoadgenParams,
    LoadgenPoint, PeerPoint, PeersDir, PeersExperiment, PeersInfo, PointResult, Role, RoleCpu,
    ServerFigures, SweepDir, SweepInfo, TopologyInfo, LOADGEN_POINT_SCHEMA, LOADGEN_SWEEP_SCHEMA,
    PEERS_SWEEP_SCHEMA, PEER_POINT_SCHEMA, POINT_SCHEMA,
};
use std::path::{Path, PathBuf};

pub(crate) const LOCALITY: &str = r#"
name = "fixture"
title = "Fixture: latency against connections"
[topology]
client_hosts = 2
[server]
engines = ["select", "epoll"]
cpu = "1"
[matrix]
connections = [400, 2000]
active_ratios = ["1"]
rates = [125, 500]
request_size = 128
response_size = "10KiB"
duration = "1s"
repetitions = 2
[paper]
table = "Table 3"
source = "fixture"
metric = "service_latency"
vary = "connections"
[[paper.cells]]
engine = "select"
connections = 400
active_ratio = "1"
rate_per_s = 125
mean_us = 1130.0
median_us = 1100.0
stddev_us = 146.0
[[paper.cells]]
engine = "select"
connections = 2000
active_ratio = "1"
rate_per_s = 125
mean_us = 5650.0
[[paper.cells]]
engine = "select"
connections = 400
active_ratio = "1"
rate_per_s = 2000
mean_us = 1500.0
[[paper.cells]]
engine = "select"
connections = 2000
active_ratio = "1"
rate_per_s = 2000
mean_us = 9000.0
[[paper.derived]]
table = "Table 5"
metric = "send_deviation"
pick = "largest_first_stat"
[[paper.derived.cells]]
engine = "select"
stddev_us = 7.08
median_us = -0.214
max_us = 337.0
[[paper.claims]]
text = "select grows with connections"
engines = ["select"]
from = 400
to = 2000
expect_min = 3.0
[[paper.claims]]
source = "Table 3"
text = "select grows to 10,000 connections"
engines = ["select"]
from = 400
to = 10000
paper_ratio = 18.0
expect_min = 5.0
[[paper.claims]]
text = "epoll stays flat"
engines = ["epoll"]
from = 400
to = 2000
expect_min = 0.8
expect_max = 1.25
[[paper.claims]]
source = "Figure 2"
text = "send deviation stays below 1 ms"
engines = ["select", "epoll"]
metric = "send_deviation"
statistic = "max"
expect_max = 1000.0
[[paper.claims]]
text = "select is slower than epoll at 2,000"
engines = ["select"]
versus = "epoll"
from = 2000
to = 2000
expect_min = 2.0
[[paper.claims]]
text = "a claim this setup cannot test"
engines = ["epoll"]
versus = "select"
unmeasurable = "needs 40,000 connections"
"#;

pub(crate) fn fixture(name: &str) -> serde_json::Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name);
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// A sweep of `toml` whose every planned point gets `stats(params)`:
/// (mean latency µs, send-deviation max µs, poll-call CPU µs).
pub(crate) fn sweep(
    toml: &str,
    stats: impl Fn(&connlab_lab::PointParams) -> (f64, f64, f64),
) -> SweepDir {
    let experiment = Experiment::from_toml(toml, "fixture.toml").unwrap();
    let load = fixture("load.json");
    let server = fixture("server.json");
    let plan = experiment.plan(false);
    let points = plan
        .iter()
        .map(|params| {
            let (mean, dev_max, poll) = stats(params);
            let mut l = load.clone();
            l["service_latency_us"]["mean"] = mean.into();
            l["service_latency_us"]["p50"] = (mean * 0.9).into();
            l["service_latency_us"]["stddev"] = (mean * 0.2).into();
            l["send_deviation_us"]["stddev"] = (dev_max / 40.0).into();
            l["send_deviation_us"]["median"] = (-0.1).into();
            l["send_deviation_us"]["max"] = dev_max.into();
            l["achieved_rate_per_s"] = (params.rate_per_s.max(1000.0) * 0.99).into();
            let mut s = server.clone();
            s["poll_call_cpu_us"] = serde_json::json!({"mean": poll, "p50": poll});
            s["poll_call_us"] = serde_json::json!({"mean": poll * 2.0, "p50": poll * 1.5});
            s["cycle_us"] = serde_json::json!({"mean": poll * 3.0, "p50": poll * 3.0});
            s["environment"]["cpu_affinity"] = "1".into();
            PointResult {
                schema: POINT_SCHEMA.into(),
                id: params.id(),
                params: params.clone(),
                shards: 2,
                load: serde_json::from_value(l).unwrap(),
                server: Some(s),
                warnings: Vec::new(),
                backend_cpu_share: Vec::new(),
                gateway_cpu_share: None,
                cpu_busy_share: Vec::new(),
                finished_unix_s: 1_795_000_000.0,
                checked: connlab_lab::validity::Checked {
                    validity: None,
                    machine: None,
                    window_cpu: None,
                },
                placement: None,
            }
        })
        .collect::<Vec<_>>();
    let (controls, points) = points.into_iter().partition(|p| p.params.control);
    let info = SweepInfo {
        schema: connlab_lab::SWEEP_SCHEMA.into(),
        name: experiment.name.clone(),
        title: experiment.title.clone(),
        reproduces: experiment.reproduces().map(str::to_string),
        quick: false,
        started_unix_s: 1_795_000_000.0,
        points_total: plan.len(),
        repetitions: None,
        connlab_version: "0.1.0".into(),
        environment: serde_json::from_value(load["environment"].clone()).unwrap(),
        topology: TopologyInfo {
            server_host: "server".into(),
            server_addr: "10.0.0.1".into(),
            client_hosts: vec!["client1".into(), "client2".into()],
            link_rate: None,
            link_rate_bps: None,
        },
        blocks: Vec::new(),
    };
    SweepDir {
        path: PathBuf::from("fixture"),
        info,
        experiment,
        points,
        controls,
    }
}

/// select grows 5x from 400 to 2,000; epoll stays flat; repetition 2 is
/// 10% slower than repetition 1.
pub(crate) fn locality() -> SweepDir {
    sweep(LOCALITY, |p| {
        let base = if p.engine == "select" {
            280.0 * p.connections as f64 / 400.0
        } else {
            200.0
        };
        let rep = if p.repetition == 2 { 1.1 } else { 1.0 };
        (base * rep, 300.0 * rep, 0.0)
    })
}

/// Tick labels of an SVG: numeric `<text>` elements grouped by the axis
/// they sit on (x labels share a y coordinate, y labels an x coordinate).
pub(crate) fn axis_ticks(svg: &str) -> (usize, usize) {
    let mut texts: Vec<(String, String, String)> = Vec::new();
    for part in svg.split("<text").skip(1) {
        let attr = |name: &str| {
            let key = format!(" {name}=\"");
            part.find(&key).map(|i| {
                let rest = &part[i + key.len()..];
                rest[..rest.find('"').unwrap()].to_string()
            })
        };
        let body = part[part.find('>').unwrap() + 1..part.find("</text>").unwrap()].trim();
        let numeric = body.replace([',', '-', '.', '−', '/'], "");
        if !numeric.is_empty() && numeric.chars().all(|c| c.is_ascii_digit()) {
            texts.push((
                attr("x").unwrap_or_default(),
                attr("y").unwrap_or_default(),
                body.to_string(),
            ));
        }
    }
    let most = |key: fn(&(String, String, String)) -> &String| {
        let mut best = 0;
        for t in &texts {
            best = best.max(texts.iter().filter(|u| key(u) == key(t)).count());
        }
        best
    };
    (most(|t| &t.1), most(|t| &t.0))
}

pub(crate) fn svgs(html: &str) -> Vec<&str> {
    html.split("<svg")
        .skip(1)
        .map(|s| &s[..s.find("</svg>").unwrap()])
        .collect()
}

/// The environment every fixture records: the one in `fixtures/load.json`.
pub(crate) fn environment() -> connlab_os::Environment {
    serde_json::from_value(fixture("load.json")["environment"].clone()).unwrap()
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
        checked: connlab_lab::validity::Checked {
            validity: Some(passed()),
            machine: None,
            window_cpu: None,
        },
    }
}

/// The record of a point that passed its gates at the first attempt.
pub(crate) fn passed() -> Validity {
    Validity::of(
        vec![
            Gate::at_least("completion", 1.0, 0.99, String::new()),
            Gate::at_most("steal", 0.001, 0.02, String::new()),
        ],
        1,
    )
}

/// The record of a point whose steal stayed at 7.3 % over three attempts.
pub(crate) fn stolen() -> Validity {
    Validity::of(
        vec![
            Gate::at_least("completion", 1.0, 0.99, String::new()),
            Gate::at_most("steal", 0.073, 0.02, String::new()),
        ],
        3,
    )
}

/// A loadgen sweep whose last point is missing.
pub(crate) fn loadgen() -> LoadgenDir {
    loadgen_of(LOADGEN)
}

/// The loadgen sweep with the second repetition of the one-process,
/// 100-connection point invalid (steal).
pub(crate) fn loadgen_with_an_invalid_point() -> LoadgenDir {
    let mut dir = loadgen();
    let p = dir
        .points
        .iter_mut()
        .find(|p| p.id == "epoll-100c-1of4-2000rps-1sh-rep2")
        .unwrap();
    p.checked.validity = Some(stolen());
    dir
}

/// The same sweep with the client on epoll and on io_uring.
pub(crate) fn loadgen_with_io() -> LoadgenDir {
    loadgen_of(&LOADGEN.replace(
        "duration = \"1s\"",
        "duration = \"1s\"\nio = [\"epoll\", \"uring\"]",
    ))
}

fn loadgen_of(text: &str) -> LoadgenDir {
    let experiment = LoadgenExperiment::from_toml(text, "fixture.toml").unwrap();
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
/// The A/A control (nginx-return at 128 B, measured twice per repetition)
/// comes out 4 % faster in repetition 1 and 2 % slower in repetition 2;
/// nginx-static's first 10 KiB point failed its steal gate; epoll's second
/// 128 B point passed at its second attempt.
pub(crate) fn peers() -> PeersDir {
    let experiment = PeersExperiment::from_toml(PEERS, "fixture.toml").unwrap();
    let plan = experiment.plan(false);
    let points = plan[..plan.len() - 1]
        .iter()
        .map(|p| {
            let control = match (p.control, p.repetition) {
                (false, _) => 1.0,
                (true, 1) => 1.04,
                (true, _) => 0.98,
            };
            let speed = match p.contender.as_str() {
                "epoll" => 1.5,
                "nginx-static" => 0.9,
                _ => 1.0,
            } * if p.repetition == 2 { 1.1 } else { 1.0 }
                * control;
            let validity = match p.id().as_str() {
                "nginx-static-10240B-rep1" => stolen(),
                "epoll-128B-rep2" => Validity {
                    attempts: 2,
                    ..passed()
                },
                _ => passed(),
            };
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
                server_cpus: vec![1],
                client_cpus: vec![0],
                client_busy: Some(0.9),
                client_limited: None,
                worker_connections: Vec::new(),
                imbalance: None,
                latency: None,
                checked: connlab_lab::validity::Checked {
                    validity: Some(validity),
                    machine: None,
                    window_cpu: None,
                },
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

const SCALING: &str = r#"
kind = "peers"
name = "scaling-fixture"
title = "Fixture: workers 1 to 16"
description = "A scaling sweep in small."
measure = "server"
baseline = "nginx-static"
repetitions = 3
[workload]
connections = 1000
body_sizes = [128]
duration = "10s"
[scaling]
workers = [1, 2, 4, 8, 16]
latency_rate = 20000
[placement]
server_cpus = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15]
client_cpus = [16, 17, 18, 19]
[client]
kind = "connlab-load"
[validity]
control = "none"
[[contender]]
name = "nginx-static"
kind = "nginx-static"
[[contender]]
name = "epoll"
kind = "connlab-serve"
engine = "epoll"
[[contender]]
name = "uring"
kind = "connlab-serve"
engine = "uring"
"#;

/// The USL parameters the scaling fixture's curves are made from:
/// (contender, λ, σ, κ).
pub(crate) const SCALING_CURVES: [(&str, f64, f64, f64); 3] = [
    ("nginx-static", 30_000.0, 0.04, 0.0010),
    ("epoll", 40_000.0, 0.05, 0.0020),
    ("uring", 42_000.0, 0.02, 0.0005),
];

/// A scaling sweep: three contenders at 1-16 workers, three repetitions,
/// each point exactly on its contender's USL curve (SCALING_CURVES) times
/// 0.98 / 1.0 / 1.02 by repetition; the 16-worker points of uring were
/// marked client-limited (the client kept its CPUs busy, and its latency
/// run missed its schedule), and epoll's
/// 8-worker point of repetition 2 failed its steal gate.
pub(crate) fn scaling() -> PeersDir {
    let experiment = PeersExperiment::from_toml(SCALING, "scaling.toml").unwrap();
    let plan = experiment.plan(false);
    let points = plan
        .iter()
        .map(|p| {
            let (_, lambda, sigma, kappa) = SCALING_CURVES
                .iter()
                .find(|c| c.0 == p.contender)
                .copied()
                .unwrap();
            let n = f64::from(p.workers.unwrap());
            let x = lambda * n / (1.0 + sigma * (n - 1.0) + kappa * n * (n - 1.0))
                * [0.98, 1.0, 1.02][p.repetition as usize - 1];
            let limited = p.contender == "uring" && n == 16.0;
            let validity = if p.contender == "epoll" && n == 8.0 && p.repetition == 2 {
                stolen()
            } else {
                passed()
            };
            let cpu_s = 10.0 * n * 0.95;
            let w = p.workers.unwrap() as usize;
            PeerPoint {
                schema: PEER_POINT_SCHEMA.into(),
                id: p.id(),
                params: p.clone(),
                measure: Role::Server,
                requests: (x * 10.0) as u64,
                requests_per_s: x,
                errors: 0,
                cpu: RoleCpu {
                    server_s: Some(cpu_s),
                    gateway_s: None,
                    client_s: Some(30.0),
                },
                measured_cpu_s: cpu_s,
                requests_per_cpu_s: x * 10.0 / cpu_s,
                wall_s: 10.0,
                commands: vec![(Role::Server, vec!["server".into(), p.contender.clone()])],
                finished_unix_s: 0.0,
                server_cpus: (0..w).collect(),
                client_cpus: vec![16, 17, 18, 19],
                client_busy: Some(if limited { 0.97 } else { 0.75 }),
                client_limited: limited
                    .then(|| "the client kept its CPUs 97 % busy (limit 90 %)".to_string()),
                worker_connections: if p.contender == "nginx-static" {
                    Vec::new()
                } else {
                    (0..w)
                        .map(|i| 1000 / w as u64 + (i % 2) as u64 * 10)
                        .collect()
                },
                imbalance: (p.contender != "nginx-static" && w > 1).then_some(1.1),
                latency: Some(connlab_lab::LatencyRun {
                    rate: 20_000.0,
                    achieved_rate_per_s: 19_990.0,
                    p50_us: 80.0,
                    p99_us: 400.0 / n.sqrt(),
                    // On schedule (a tenth of the 50 µs interval) but
                    // where the client limited the point.
                    send_lag_p99_us: if limited { 40.0 } else { 3.0 },
                    errors: 0,
                }),
                checked: connlab_lab::validity::Checked {
                    validity: Some(validity),
                    machine: None,
                    window_cpu: None,
                },
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
