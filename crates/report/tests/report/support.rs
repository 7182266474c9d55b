//! The sweep fixtures the tests share, and readers of SVG plots.

use connlab_lab::{Experiment, PointResult, SweepDir, SweepInfo, TopologyInfo, POINT_SCHEMA};
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
            }
        })
        .collect::<Vec<_>>();
    let info = SweepInfo {
        schema: connlab_lab::SWEEP_SCHEMA.into(),
        name: experiment.name.clone(),
        title: experiment.title.clone(),
        reproduces: experiment.reproduces().map(str::to_string),
        quick: false,
        started_unix_s: 1_795_000_000.0,
        points_total: plan.len(),
        connlab_version: "0.1.0".into(),
        environment: serde_json::from_value(load["environment"].clone()).unwrap(),
        topology: TopologyInfo {
            server_host: "server".into(),
            server_addr: "10.0.0.1".into(),
            client_hosts: vec!["client1".into(), "client2".into()],
            link_rate: None,
            link_rate_bps: None,
        },
    };
    SweepDir {
        path: PathBuf::from("fixture"),
        info,
        experiment,
        points,
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
