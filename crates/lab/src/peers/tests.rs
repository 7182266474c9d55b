use super::experiment::{PeerParams, PeersExperiment, ProcessKind, Role};
use super::PeersError;
use crate::sweep_file::Bytes;
use connlab_server::EngineKind;
use std::time::Duration;

const FILE: &str = r#"
kind = "peers"
name = "t"
title = "two engines"
measure = "server"
baseline = "poll"
repetitions = 2

[workload]
connections = 10
body_sizes = [128, "10KiB"]
duration = "1s"

[placement]
server_cpu = 1
client_cpu = 0

[client]
kind = "connlab-load"

[[contender]]
name = "poll"
kind = "connlab-serve"
engine = "poll"

[[contender]]
name = "epoll"
kind = "connlab-serve"
engine = "epoll"
body_sizes = [128]
"#;

fn parse(text: &str) -> Result<PeersExperiment, PeersError> {
    PeersExperiment::from_toml(text, "t.toml")
}

#[test]
fn parses_into_typed_values() {
    assert_eq!(
        crate::ExperimentKind::of_text(FILE, "t.toml").unwrap(),
        crate::ExperimentKind::Peers
    );
    let e = parse(FILE).unwrap();
    assert_eq!(e.workload.body_sizes, vec![Bytes(128), Bytes(10240)]);
    assert_eq!(e.workload.duration.0, Duration::from_secs(1));
    assert_eq!(e.contender[1].engine, Some(EngineKind::Epoll));
    assert_eq!(e.contender_role(), Role::Server);
    let ids: Vec<String> = e.plan(false).iter().map(PeerParams::id).collect();
    // The baseline's A/A control closes every repetition and body size.
    assert_eq!(
        ids,
        [
            "poll-128B-rep1",
            "epoll-128B-rep1",
            "poll-128B-rep1-aa",
            "poll-10240B-rep1",
            "poll-10240B-rep1-aa",
            "poll-128B-rep2",
            "epoll-128B-rep2",
            "poll-128B-rep2-aa",
            "poll-10240B-rep2",
            "poll-10240B-rep2-aa"
        ]
    );
    assert_eq!(e.baselines_at(10240), ["poll"]);
    let two =
        parse(&FILE.replace("baseline = \"poll\"", "baseline = [\"epoll\", \"poll\"]")).unwrap();
    assert_eq!(two.baselines_at(128), ["epoll", "poll"]);
    assert_eq!(two.baselines_at(10240), ["poll"]);
    let s = e.setup(&e.contender[1]).unwrap();
    assert_eq!(s.client.kind, ProcessKind::ConnlabLoad);
    assert_eq!(s.server.engine, Some(EngineKind::Epoll));
    assert!(s.gateway.is_none());
}

#[test]
fn serializes_back_to_the_same_experiment() {
    let e = parse(FILE).unwrap();
    let json = serde_json::to_string(&e).unwrap();
    let back: PeersExperiment = serde_json::from_str(&json).unwrap();
    assert_eq!(back, e);
}

fn error(text: &str) -> String {
    parse(text).unwrap_err().to_string()
}

#[test]
fn errors_name_the_file_and_field() {
    let e = error(&FILE.replace("engine = \"epoll\"", "engine = \"epol\""));
    assert!(e.starts_with("t.toml: contender[1].engine:"), "{e}");
    assert!(
        e.contains("unknown variant `epol`, expected one of `processes`, `threads`"),
        "{e}"
    );
    let e = error(&FILE.replacen("kind = \"connlab-serve\"", "kind = \"nginx\"", 2));
    assert!(e.starts_with("t.toml: contender[0].kind:"), "{e}");
    let e = error(&FILE.replace(
        "kind = \"connlab-serve\"\nengine = \"epoll\"",
        "kind = \"wrk\"",
    ));
    assert!(e.starts_with("t.toml: contender[1].kind:"), "{e}");
    let e = error(&FILE.replace("connections = 10", "connections = 10\nrate = 5"));
    assert!(e.starts_with("t.toml: workload.rate: unknown field"), "{e}");
    let e = error(&FILE.replace("duration = \"1s\"", "duration = \"soon\""));
    assert!(e.starts_with("t.toml: workload.duration:"), "{e}");
    let e = error(&FILE.replace("baseline = \"poll\"", "baseline = \"nginx\""));
    assert!(e.starts_with("t.toml: baseline:"), "{e}");
    let e = error(&FILE.replace("body_sizes = [128]", "body_sizes = [64]"));
    assert!(e.starts_with("t.toml: contender[1].body_sizes:"), "{e}");
    let e = error(&FILE.replace("[client]\nkind = \"connlab-load\"", ""));
    assert!(e.starts_with("t.toml: client: missing"), "{e}");
    let e = error(&FILE.replace("engine = \"poll\"", "engine = \"poll\"\nsplice = true"));
    assert!(e.starts_with("t.toml: contender[0].splice:"), "{e}");
    let e = error(&FILE.replace("kind = \"peers\"", "kind = \"sweep\""));
    assert!(e.starts_with("t.toml: kind:"), "{e}");
}

#[test]
fn a_connlab_load_process_takes_an_io_path() {
    use crate::ClientIo;
    let e = parse(&FILE.replace(
        "[client]\nkind = \"connlab-load\"",
        "[client]\nkind = \"connlab-load\"\nio = \"uring\"",
    ))
    .unwrap();
    assert_eq!(e.client.as_ref().unwrap().io, Some(ClientIo::Uring));
    assert_eq!(parse(FILE).unwrap().client.unwrap().io, None);
    let e = error(&FILE.replace("engine = \"poll\"", "engine = \"poll\"\nio = \"uring\""));
    assert!(e.starts_with("t.toml: contender[0].io:"), "{e}");
    let e = error(&FILE.replace(
        "[client]\nkind = \"connlab-load\"",
        "[client]\nkind = \"connlab-load\"\nio = \"urin\"",
    ));
    assert!(e.starts_with("t.toml: client.io:"), "{e}");
}

#[test]
fn a_gateway_contender_takes_the_uring_relay() {
    use crate::ClientIo;
    let text = include_str!("../../../../experiments/peers-gateway-vs-haproxy.toml");
    let e = parse(text).unwrap();
    let uring = e.contender_named("proxy-uring").unwrap();
    assert_eq!(uring.process().io, Some(ClientIo::Uring));
    assert_eq!(e.contender_named("proxy").unwrap().io, None);
    // The splice relay runs on epoll: it cannot also be the uring relay.
    let e = error(&text.replace("io = \"uring\"", "io = \"uring\"\nsplice = true"));
    assert!(e.starts_with("t.toml: contender[4].io:"), "{e}");
}

#[test]
fn a_singleip_relay_contender_may_splice_and_other_kinds_may_not() {
    let text = include_str!("../../../../experiments/peers-relay-vs-haproxy.toml");
    let e = parse(text).unwrap();
    let spliced = e.contender_named("relay-splice").unwrap();
    assert_eq!(spliced.kind, ProcessKind::SingleipRelay);
    assert!(spliced.process().splice);
    assert!(!e.contender_named("relay").unwrap().process().splice);
    // HAProxy may splice too (its peer when connlab splices).
    let spliced = e.contender_named("haproxy-splice").unwrap();
    assert_eq!(spliced.kind, ProcessKind::Haproxy);
    assert!(spliced.process().splice);
    // A client may not.
    let client = "[client]\nkind = \"connlab-load\"";
    assert!(text.contains(client));
    let e = error(&text.replace(client, &format!("{client}\nsplice = true")));
    assert!(e.contains("splice"), "{e}");
    assert!(e.contains("singleip-relay"), "{e}");
}

#[test]
fn profile_is_off_unless_the_file_turns_it_on() {
    assert!(!parse(FILE).unwrap().profile);
    let on = parse(&FILE.replace("repetitions = 2", "repetitions = 2\nprofile = true")).unwrap();
    assert!(on.profile);
    // Turning it on changes no point of the plan; the profiles come one per
    // contender and body size.
    assert_eq!(on.plan(false), parse(FILE).unwrap().plan(false));
    let ids: Vec<String> = on
        .profile_plan(false)
        .iter()
        .map(PeerParams::profile_id)
        .collect();
    assert_eq!(ids, ["poll-128B", "epoll-128B", "poll-10240B"]);
    let json = serde_json::to_string(&on).unwrap();
    assert_eq!(serde_json::from_str::<PeersExperiment>(&json).unwrap(), on);
    let e = error(&FILE.replace("repetitions = 2", "repetitions = 2\nprofile = \"yes\""));
    assert!(e.starts_with("t.toml: profile:"), "{e}");
    assert!(e.contains("bool"), "{e}");
}

#[test]
fn extra_arguments_go_to_connlab_programs_and_the_relay_node_only() {
    let e = parse(&FILE.replace(
        "engine = \"poll\"",
        "engine = \"poll\"\nargs = [\"--max-connections\", \"500\"]",
    ))
    .unwrap();
    let poll = e.contender_named("poll").unwrap().process();
    assert_eq!(poll.args, ["--max-connections", "500"]);
    assert!(poll.node_args.is_empty());
    // node_args belong to the single-IP relay's app node alone.
    let e = error(&FILE.replace(
        "engine = \"poll\"",
        "engine = \"poll\"\nnode_args = [\"-v\"]",
    ));
    assert!(e.starts_with("t.toml: contender[0].node_args:"), "{e}");
    // Programs connlab does not own take their settings elsewhere.
    let relay = include_str!("../../../../experiments/peers-relay-vs-haproxy.toml");
    let haproxy = "name = \"haproxy\"\nkind = \"haproxy\"";
    assert!(relay.contains(haproxy));
    let e = error(&relay.replace(haproxy, &format!("{haproxy}\nargs = [\"-V\"]")));
    assert!(e.contains("].args: only for connlab's own programs"), "{e}");
    let e = error(&FILE.replace("engine = \"poll\"", "engine = \"poll\"\nargs = [\"\"]"));
    assert!(
        e.starts_with("t.toml: contender[0].args[0]: an empty argument"),
        "{e}"
    );
}

#[test]
fn the_plan_measures_the_control_last_in_each_repetition_and_size() {
    let e = parse(FILE).unwrap();
    assert_eq!(e.control_contender(), Some("poll"));
    let plan = e.plan(false);
    let controls: Vec<&PeerParams> = plan.iter().filter(|p| p.control).collect();
    assert_eq!(controls.len(), 4, "one per repetition and body size");
    assert!(controls.iter().all(|p| p.contender == "poll"));
    // Each control follows the contenders of its repetition and size.
    for (i, p) in plan.iter().enumerate().filter(|(_, p)| p.control) {
        let next = plan.get(i + 1);
        assert!(
            next.is_none_or(|n| (n.repetition, n.body_bytes) != (p.repetition, p.body_bytes)),
            "{} is not last in its cell",
            p.id()
        );
    }
    let ids: std::collections::HashSet<String> = plan.iter().map(PeerParams::id).collect();
    assert_eq!(ids.len(), plan.len(), "ids are unique");
    // The profiles leave the control out.
    assert!(e.profile_plan(false).iter().all(|p| !p.control));

    // Another contender as the control: only at the sizes it runs at.
    let epoll = parse(&FILE.replace(
        "repetitions = 2",
        "repetitions = 2\n[validity]\ncontrol = \"epoll\"",
    ))
    .unwrap();
    let ids: Vec<String> = epoll.plan(false).iter().map(PeerParams::id).collect();
    assert_eq!(
        ids[..4],
        [
            "poll-128B-rep1",
            "epoll-128B-rep1",
            "epoll-128B-rep1-aa",
            "poll-10240B-rep1"
        ]
    );
    // No control.
    let none = parse(&FILE.replace(
        "repetitions = 2",
        "repetitions = 2\n[validity]\ncontrol = \"none\"",
    ))
    .unwrap();
    assert_eq!(none.control_contender(), None);
    assert_eq!(none.plan(false).len(), 6);
    assert!(none.plan(false).iter().all(|p| !p.control));
}

#[test]
fn a_point_file_without_control_reads_as_no_control() {
    let p: PeerParams =
        serde_json::from_str(r#"{"contender": "poll", "body_bytes": 128, "repetition": 1}"#)
            .unwrap();
    assert!(!p.control);
    assert_eq!(p.id(), "poll-128B-rep1");
    let json = serde_json::to_string(&p).unwrap();
    assert!(!json.contains("control"), "{json}");
}

#[test]
fn validity_is_read_and_bad_values_name_the_field() {
    let with = |section: &str| {
        FILE.replace(
            "repetitions = 2",
            &format!("repetitions = 2\n[validity]\n{section}"),
        )
    };
    let e = parse(&with("steal = 0.05\nattempts = 2\nforeign_cpu = \"off\"")).unwrap();
    assert_eq!(e.validity.steal.0, Some(0.05));
    assert_eq!(e.validity.foreign_cpu.0, None);
    assert_eq!(e.validity.attempts, Some(2));
    assert_eq!(
        parse(FILE).unwrap().validity,
        crate::validity::ValidityLimits::default()
    );
    for (section, field) in [
        ("steal = 2", "validity.steal"),
        ("steal = \"lots\"", "validity.steal"),
        ("attempts = 0", "validity.attempts"),
        ("control = \"nginx\"", "validity.control"),
        ("stael = 0.1", "validity.stael"),
    ] {
        let e = error(&with(section));
        assert!(e.starts_with(&format!("t.toml: {field}")), "{section}: {e}");
    }
    let e = error(&with("control = \"nginx\""));
    assert!(e.contains("poll, epoll"), "{e}");
}
