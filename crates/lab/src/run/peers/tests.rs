use super::commands::cpu_mask_bits;
use super::output::parse_wrk;

#[test]
fn reads_wrk_summaries() {
    let text = "Running 1s test @ http://127.0.0.1:1/bytes/128\n  1 threads and 10 connections\n\
                \x20 95213 requests in 1.00s, 24.87MB read\n\
                \x20 Socket errors: connect 0, read 2, write 0, timeout 1\n\
                \x20 Non-2xx or 3xx responses: 4\nRequests/sec:  95102.31\nTransfer/sec:     24.84MB\n";
    let o = parse_wrk(text).unwrap();
    assert_eq!(o.requests, 95213);
    assert_eq!(o.errors, 7);
    assert!((o.requests_per_s - 95102.31).abs() < 1e-6);
    assert!(parse_wrk("nothing").is_err());
}

#[test]
fn nginx_masks_count_from_the_right() {
    assert_eq!(cpu_mask_bits(0), "1");
    assert_eq!(cpu_mask_bits(1), "10");
}

#[test]
fn a_connlab_load_client_gets_its_io_path() {
    use crate::{PeersExperiment, Process, ProcessKind};
    let text = "kind = \"peers\"\nname = \"t\"\ntitle = \"t\"\nmeasure = \"client\"\n\
                baseline = \"a\"\n[workload]\nconnections = 10\nbody_sizes = [128]\n\
                duration = \"1s\"\n[server]\nkind = \"nginx-return\"\n\
                [[contender]]\nname = \"a\"\nkind = \"connlab-load\"\n\
                [[contender]]\nname = \"b\"\nkind = \"connlab-load\"\nio = \"uring\"\n";
    let exp = PeersExperiment::from_toml(text, "t.toml").unwrap();
    let stop = std::sync::atomic::AtomicBool::new(false);
    let ctx = super::PointCtx {
        exp: &exp,
        exe: std::path::Path::new("connlab"),
        tmp: std::path::Path::new("/tmp"),
        logs: "/tmp/logs".into(),
        duration: std::time::Duration::from_secs(1),
        stop: &stop,
    };
    let args = |p: &Process| {
        let addr = std::net::SocketAddr::from(([127, 0, 0, 1], 9));
        let cmd = super::commands::client_command(&ctx, p, addr, 128, "c.json".as_ref());
        cmd.get_args()
            .map(|a| a.to_string_lossy().into_owned())
            .collect::<Vec<_>>()
            .join(" ")
    };
    let (a, b) = (exp.contender[0].process(), exp.contender[1].process());
    assert_eq!(b.kind, ProcessKind::ConnlabLoad);
    assert!(!args(&a).contains("--io"), "{}", args(&a));
    assert!(args(&b).contains("--io uring"), "{}", args(&b));
}

#[test]
fn a_connlab_gateway_contender_gets_its_relay() {
    let text = include_str!("../../../../../experiments/peers-gateway-vs-haproxy.toml");
    let args = |name: &str| gateway_lines(text, name)[0].1.clone();
    assert!(!args("proxy").contains("--io"), "{}", args("proxy"));
    assert!(
        args("proxy-splice").ends_with("--splice"),
        "{}",
        args("proxy-splice")
    );
    assert!(
        args("proxy-uring").ends_with("--io uring"),
        "{}",
        args("proxy-uring")
    );
}

#[test]
fn a_splicing_haproxy_contender_splices_both_directions() {
    let exp = crate::PeersExperiment::from_toml(RELAY, "t.toml").unwrap();
    let config = |name: &str| {
        let p = exp.contender_named(name).unwrap().process();
        let listen = std::net::SocketAddr::from(([127, 0, 0, 1], 8080));
        let backend = std::net::SocketAddr::from(([127, 0, 0, 1], 9090));
        super::commands::haproxy_config(&p, listen, backend)
    };
    let plain = config("haproxy");
    assert!(!plain.contains("splice"), "{plain}");
    assert!(plain.contains("bind 127.0.0.1:8080"), "{plain}");
    assert!(plain.contains("server s0 127.0.0.1:9090"), "{plain}");
    let spliced = config("haproxy-splice");
    for line in [
        "option splice-request",
        "option splice-response",
        "maxpipes 500",
    ] {
        assert!(spliced.lines().any(|l| l.trim() == line), "{spliced}");
    }
}

/// The gateway command lines of contender `name` of peers file `text`,
/// each with the name of its log.
fn gateway_lines(text: &str, name: &str) -> Vec<(&'static str, String)> {
    let exp = crate::PeersExperiment::from_toml(text, "t.toml").unwrap();
    // Tests run at once: each call gets a directory of its own.
    static CALLS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let call = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let logs = std::env::temp_dir().join(format!(
        "connlab-gateway-cmds-{}-{call}",
        std::process::id()
    ));
    std::fs::create_dir_all(&logs).unwrap();
    let stop = std::sync::atomic::AtomicBool::new(false);
    let ctx = super::PointCtx {
        exp: &exp,
        exe: std::path::Path::new("connlab"),
        tmp: std::path::Path::new("/tmp"),
        logs: logs.clone(),
        duration: std::time::Duration::from_secs(1),
        stop: &stop,
    };
    let p = exp.contender_named(name).unwrap().process();
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], 9));
    let lines = super::commands::gateway_commands(&ctx, &p, addr, addr)
        .unwrap()
        .iter()
        .map(|(what, cmd, _)| {
            let args: Vec<String> = cmd
                .get_args()
                .map(|a| a.to_string_lossy().into_owned())
                .collect();
            (*what, args.join(" "))
        })
        .collect();
    let _ = std::fs::remove_dir_all(&logs);
    lines
}

const RELAY: &str = include_str!("../../../../../experiments/peers-relay-vs-haproxy.toml");

#[test]
fn a_splicing_singleip_relay_passes_splice_to_its_node_only() {
    let plain = gateway_lines(RELAY, "relay");
    let spliced = gateway_lines(RELAY, "relay-splice");
    assert!(
        plain.iter().all(|(_, a)| !a.contains("--splice")),
        "{plain:?}"
    );
    assert_eq!(spliced[1].0, "app-node");
    assert!(spliced[1].1.ends_with("--splice"), "{spliced:?}");
    assert!(!spliced[0].1.contains("--splice"), "{spliced:?}");
}

#[test]
fn extra_arguments_end_the_command_they_belong_to() {
    let text = RELAY.replace(
        "name = \"relay\"\nkind = \"singleip-relay\"",
        "name = \"relay\"\nkind = \"singleip-relay\"\n\
         args = [\"--max-version\", \"1\"]\nnode_args = [\"--max-version\", \"2\"]",
    );
    let lines = gateway_lines(&text, "relay");
    assert!(lines[0].1.starts_with("singleip io-server"), "{lines:?}");
    assert!(lines[0].1.ends_with("--max-version 1"), "{lines:?}");
    assert_eq!(lines[1].0, "app-node");
    assert!(lines[1].1.ends_with("--max-version 2"), "{lines:?}");
}

/// A measured attempt of `FILE`-like point with these figures.
fn attempt(
    requests: u64,
    errors: u64,
    window: Option<crate::validity::WindowCpu>,
) -> super::Measured {
    use crate::{PeerParams, PeerPoint, Role, RoleCpu};
    super::Measured {
        point: PeerPoint {
            schema: crate::PEER_POINT_SCHEMA.into(),
            id: "a-128B-rep1".into(),
            params: PeerParams {
                contender: "a".into(),
                body_bytes: 128,
                repetition: 1,
                workers: None,
                control: false,
            },
            measure: Role::Server,
            requests,
            requests_per_s: requests as f64,
            errors,
            cpu: RoleCpu::default(),
            measured_cpu_s: 1.0,
            requests_per_cpu_s: requests as f64,
            wall_s: 1.0,
            commands: Vec::new(),
            finished_unix_s: 0.0,
            server_cpus: Vec::new(),
            client_cpus: Vec::new(),
            client_busy: None,
            client_limited: None,
            worker_connections: Vec::new(),
            imbalance: None,
            latency: None,
            checked: crate::validity::Checked {
                validity: None,
                machine: Some(fingerprint("AMD EPYC")),
                window_cpu: window,
            },
        },
        load: None,
    }
}

fn fingerprint(model: &str) -> crate::validity::Fingerprint {
    crate::validity::Fingerprint {
        cpu_model: model.into(),
        cpu_count: 2,
        kernel: "Linux 6.18".into(),
        clock_source: "tsc".into(),
    }
}

#[test]
fn a_closed_loop_client_is_judged_on_its_errors_and_the_roles_cpus() {
    use crate::validity::{gates, ValidityLimits, WindowCpu};
    let limits = ValidityLimits::default();
    let window = WindowCpu {
        cpus: vec![0, 1],
        seconds: 1.0,
        steal_share: 0.001,
        foreign_share: 0.2,
        ..WindowCpu::default()
    };
    // wrk: no arrival or stationarity check of its own, so no such gate.
    let m = attempt(1000, 50, Some(window));
    let g = gates(&limits, &super::evidence(&m, &fingerprint("AMD EPYC")));
    let names: Vec<&str> = g.iter().map(|g| g.name.as_str()).collect();
    assert_eq!(names, ["completion", "steal", "foreign_cpu", "machine"]);
    let failed: Vec<&str> = g
        .iter()
        .filter(|g| !g.passed)
        .map(|g| g.name.as_str())
        .collect();
    // 1000 of 1050 completed (95 %), and a fifth of the CPUs foreign.
    assert_eq!(failed, ["completion", "foreign_cpu"]);
    assert!(g[0].detail.contains("1000 of 1050"), "{:?}", g[0]);
    // Another machine than the sweep's.
    let g = gates(
        &limits,
        &super::evidence(&attempt(10, 0, None), &fingerprint("Intel")),
    );
    let failed: Vec<&str> = g
        .iter()
        .filter(|g| !g.passed)
        .map(|g| g.name.as_str())
        .collect();
    assert_eq!(failed, ["machine"]);
}

#[test]
fn the_cpus_watched_are_those_of_the_roles_or_all() {
    let text = include_str!("../../../../../experiments/peers-gateway-vs-haproxy.toml");
    let exp = crate::PeersExperiment::from_toml(text, "t.toml").unwrap();
    let setup = exp.setup(&exp.contender[0]).unwrap();
    let pl = &exp.placement;
    let mut want: Vec<usize> = [pl.server_cpu, pl.gateway_cpu, pl.client_cpu]
        .into_iter()
        .map(Option::unwrap)
        .collect();
    want.sort_unstable();
    want.dedup();
    assert_eq!(super::pinned_cpus(&exp, &setup, None), want);
    let mut loose = exp.clone();
    loose.placement.client_cpu = None;
    assert!(
        super::pinned_cpus(&loose, &setup, None).is_empty(),
        "all CPUs"
    );
}

#[test]
fn a_client_sharing_the_servers_cpus_or_kept_busy_is_named() {
    use super::client_limit;
    assert_eq!(client_limit(&[1], &[0], Some(0.5), 0.9), None);
    assert_eq!(
        client_limit(&[1, 0], &[0], Some(0.5), 0.9).as_deref(),
        Some("the client shares CPU 0 with the server")
    );
    let busy = client_limit(&[1], &[0], Some(0.95), 0.9).unwrap();
    assert!(busy.contains("95 % busy"), "{busy}");
    assert!(client_limit(&[], &[0], None, 0.9)
        .unwrap()
        .contains("not both pinned"));
}

#[test]
fn a_workers_axis_multiplies_the_plan_and_pins_the_first_cpus() {
    let text = include_str!("../../../../../experiments/scaling.toml");
    let exp = crate::PeersExperiment::from_toml(text, "scaling.toml").unwrap();
    let plan = exp.plan(false);
    // 5 repetitions x 2 worker counts x (3 contenders + the A/A control).
    assert_eq!(plan.len(), 40);
    assert_eq!(plan[4].id(), "nginx-static-w2-128B-rep1");
    assert_eq!(exp.placement.server_cpus_at(Some(1)), [1]);
    assert_eq!(exp.placement.server_cpus_at(Some(2)), [1, 0]);
    let setup = exp.setup(&exp.contender[1]).unwrap();
    assert_eq!(super::pinned_cpus(&exp, &setup, Some(1)), [0, 1]);
    // Too few CPUs for the workers, a decreasing axis, a client axis: refused.
    for (edit, field) in [
        ("server_cpus = [1, 0]", "server_cpus = [1]"),
        ("workers = [1, 2]", "workers = [2, 1]"),
        (
            "kind = \"connlab-load\"",
            "kind = \"connlab-load\"\nthreads = 0",
        ),
    ] {
        let bad = text.replace(edit, field);
        assert!(
            crate::PeersExperiment::from_toml(&bad, "bad.toml").is_err(),
            "{field}"
        );
    }
}
