use super::experiment::{LoadgenExperiment, LoadgenParams};
use super::values::{Rate, WireProtocol};
use super::LoadgenError;
use crate::sweep_file::Bytes;
use std::time::Duration;

const FILE: &str = r#"
kind = "loadgen"
name = "t"
title = "two engines, two sizes"
tables = ["latency", "memory", "shards"]
repetitions = 2

[server]
engines = ["poll", "epoll"]

[workload]
connections = [100, 2000]
active_ratios = ["1/4"]
rates = [2000]
duration = "1s"
shards = [1, 2]

[placement]
server_cpu = 1
writer_cpu = 0
reader_cpu = 1

[quick]
connections = [100]
engines = ["epoll"]
repetitions = 1
"#;

fn parse(text: &str) -> Result<LoadgenExperiment, LoadgenError> {
    LoadgenExperiment::from_toml(text, "t.toml")
}

#[test]
fn parses_into_typed_values() {
    assert!(crate::ExperimentKind::of_text(FILE, "f").ok() == Some(crate::ExperimentKind::Loadgen));
    let e = parse(FILE).unwrap();
    assert_eq!(e.workload.active_ratios[0].value, 0.25);
    assert_eq!(e.workload.rates, [Rate::PerSecond(2000)]);
    assert_eq!(e.workload.response_size, Bytes(10240));
    assert_eq!(e.workload.warmup.0, Duration::from_secs(1));
    assert_eq!(e.server.protocol, WireProtocol::Clb1);
    assert_eq!(e.placement.client_cpu_list().as_deref(), Some("0,1"));
    let plan = e.plan(false);
    assert_eq!(plan.len(), 2 * 2 * 2 * 2);
    assert_eq!(plan[0].id(), "poll-100c-1of4-2000rps-1sh-rep1");
    assert_eq!(plan[1].id(), "epoll-100c-1of4-2000rps-1sh-rep1");
    assert_eq!(plan[2].id(), "poll-100c-1of4-2000rps-2sh-rep1");
    let quick: Vec<String> = e.plan(true).iter().map(LoadgenParams::id).collect();
    assert_eq!(
        quick,
        [
            "epoll-100c-1of4-2000rps-1sh-rep1",
            "epoll-100c-1of4-2000rps-2sh-rep1"
        ]
    );
    let src = parse(&FILE.replace(
        "shards = [1, 2]",
        "shards = [1, 2]\nsource_addrs = [\"127.0.0.1\", \"127.0.0.2-127.0.0.5\"]",
    ))
    .unwrap();
    assert!(src
        .plan(false)
        .iter()
        .any(|p| p.id() == "epoll-2000c-1of4-2000rps-src127.0.0.2-127.0.0.5-2sh-rep2"));
}

#[test]
fn serializes_back_to_the_same_experiment() {
    let e = parse(FILE).unwrap();
    let json = serde_json::to_string(&e).unwrap();
    let back: LoadgenExperiment = serde_json::from_str(&json).unwrap();
    assert_eq!(back, e);
    assert!(back.same_measurement(&e));
}

fn error(text: &str) -> String {
    parse(text).unwrap_err().to_string()
}

#[test]
fn errors_name_the_file_and_field() {
    for (from, to, field) in [
        (
            "engines = [\"poll\", \"epoll\"]",
            "engines = [\"poll\", \"epol\"]",
            "server.engines[1]:",
        ),
        (
            "active_ratios = [\"1/4\"]",
            "active_ratios = [\"1/4\", \"2\"]",
            "workload.active_ratios[1]:",
        ),
        ("rates = [2000]", "rates = [\"fast\"]", "workload.rates[0]:"),
        (
            "duration = \"1s\"",
            "duration = \"soon\"",
            "workload.duration:",
        ),
        (
            "duration = \"1s\"",
            "duration = \"1s\"\nrate = 5",
            "workload.rate: unknown field",
        ),
        (
            "connections = [100, 2000]",
            "connections = [100]",
            "tables:",
        ),
        ("shards = [1, 2]", "shards = [2]", "tables:"),
        (
            "connections = [100, 2000]",
            "connections = [100, 0]",
            "workload.connections[1]:",
        ),
        ("writer_cpu = 0\n", "", "placement.reader_cpu:"),
        (
            "tables = [\"latency\", \"memory\", \"shards\"]",
            "tables = [\"speed\"]",
            "tables[0]:",
        ),
        (
            "rates = [2000]",
            "rates = [2000]\ndepth = 2",
            "workload.depth:",
        ),
        ("kind = \"loadgen\"", "kind = \"peers\"", "kind:"),
        ("repetitions = 1", "repetitions = 0", "quick.repetitions:"),
    ] {
        let text = FILE.replace(from, to);
        assert_ne!(text, FILE, "{from}");
        let e = error(&text);
        assert!(e.starts_with(&format!("t.toml: {field}")), "{to}: {e}");
    }
}

#[test]
fn io_is_an_axis_of_the_client_defaulting_to_epoll() {
    use super::values::ClientIo;
    let e = parse(FILE).unwrap();
    assert_eq!(e.workload.io, [ClientIo::Epoll]);
    assert!(e.plan(false).iter().all(|p| p.io == ClientIo::Epoll));
    let both = parse(&FILE.replace(
        "shards = [1, 2]",
        "shards = [1, 2]\nio = [\"epoll\", \"uring\"]",
    ))
    .unwrap();
    let plan = both.plan(false);
    assert_eq!(plan.len(), 2 * e.plan(false).len());
    // Alternating with the engines, inside a repetition; an epoll point
    // keeps the id it had before the axis existed.
    let ids: Vec<String> = plan.iter().take(4).map(LoadgenParams::id).collect();
    assert_eq!(
        ids,
        [
            "poll-100c-1of4-2000rps-1sh-rep1",
            "epoll-100c-1of4-2000rps-1sh-rep1",
            "poll-100c-1of4-2000rps-1sh-uring-rep1",
            "epoll-100c-1of4-2000rps-1sh-uring-rep1",
        ]
    );
    assert_eq!(plan[2].io, ClientIo::Uring);
    assert_eq!(plan[2].io.name(), "uring");
    // Parameters without the field (points written before it) read as epoll.
    let mut json = serde_json::to_value(&plan[1]).unwrap();
    json.as_object_mut().unwrap().remove("io");
    let old: LoadgenParams = serde_json::from_value(json).unwrap();
    assert_eq!(old, plan[1]);
    assert!(!both.same_measurement(&e));
}

#[test]
fn bad_io_values_name_the_file_and_key() {
    for (io, field) in [
        ("io = [\"epoll\", \"urin\"]", "workload.io[1]:"),
        ("io = []", "workload.io:"),
        ("io = \"uring\"", "workload.io:"),
    ] {
        let e = error(&FILE.replace("shards = [1, 2]", &format!("shards = [1, 2]\n{io}")));
        assert!(e.starts_with(&format!("t.toml: {field}")), "{io}: {e}");
    }
    let e = error(&FILE.replace("shards = [1, 2]", "shards = [1, 2]\nio = [\"urin\"]"));
    assert!(e.contains("epoll") && e.contains("uring"), "{e}");
}

#[test]
fn validity_is_read_and_bad_values_name_the_field() {
    let with = |section: &str| format!("{FILE}\n[validity]\n{section}\n");
    let e = parse(&with("completion = \"off\"\nschedule = 0.2\nattempts = 1")).unwrap();
    assert_eq!(e.validity.completion.0, None);
    assert_eq!(e.validity.schedule.0, Some(0.2));
    assert_eq!(e.validity.attempts, Some(1));
    // "none" is the only control a loadgen sweep takes, and the plan stays.
    let none = parse(&with("control = \"none\"")).unwrap();
    assert_eq!(none.plan(false), parse(FILE).unwrap().plan(false));
    assert!(none.same_measurement(&parse(FILE).unwrap()));
    for (section, field) in [
        ("foreign_cpu = 1.5", "validity.foreign_cpu"),
        ("schedule_abs_us = 0", "validity.schedule_abs_us"),
        ("attempts = 21", "validity.attempts"),
        ("control = \"epoll\"", "validity.control"),
        ("machine = \"yes\"", "validity.machine"),
    ] {
        let e = error(&with(section));
        assert!(
            e.starts_with(&format!("t.toml: {field}:")),
            "{section}: {e}"
        );
    }
}
