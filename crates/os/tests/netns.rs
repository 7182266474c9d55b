//! Network-namespace topologies: build, reach, rate-limit, tear down, and
//! clean up after a run that was killed. Checks configuration, never timing.
//! Needs root: without it each test fails under `CI=true` and is skipped,
//! saying so, elsewhere.

use connlab_os::netns::{sweep_stale, NetnsError, Topology, TopologySpec};
use connlab_testkit::require_root;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Ipv4Addr, SocketAddrV4, TcpListener, TcpStream};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn namespaces() -> String {
    let out = Command::new("ip").args(["netns", "list"]).output().unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A listener in host `a`, a connection from host `b`, one byte each way.
fn connect_across(topo: &Topology, a: &str, b: &str) {
    let addr = topo.host_addr(a).unwrap();
    let listener = topo
        .run_in(a, || TcpListener::bind(SocketAddrV4::new(addr, 0)).unwrap())
        .unwrap();
    let port = listener.local_addr().unwrap().port();
    let server = std::thread::spawn(move || {
        let (mut s, peer) = listener.accept().unwrap();
        let mut byte = [0u8];
        s.read_exact(&mut byte).unwrap();
        s.write_all(&byte).unwrap();
        peer
    });
    let mut echo = [0u8];
    topo.run_in(b, || {
        let mut c = TcpStream::connect_timeout(
            &SocketAddrV4::new(addr, port).into(),
            Duration::from_secs(5),
        )
        .unwrap();
        c.write_all(&[42]).unwrap();
        c.read_exact(&mut echo).unwrap();
    })
    .unwrap();
    assert_eq!(echo, [42]);
    let peer = server.join().unwrap();
    assert_eq!(
        peer.ip(),
        topo.host_addr(b).unwrap(),
        "the peer is host {b}"
    );
}

#[test]
fn bridge_hosts_reach_each_other_and_teardown_removes_them() {
    require_root!("network namespaces");
    let topo = Topology::build(&TopologySpec::bridge(&["srv", "c1", "c2"])).unwrap();
    assert_eq!(topo.host_addr("srv"), Some(Ipv4Addr::new(198, 18, 0, 1)));
    assert_eq!(topo.host_addr("c2"), Some(Ipv4Addr::new(198, 18, 0, 3)));
    let names: Vec<String> = ["srv", "c1", "c2"]
        .iter()
        .map(|h| topo.namespace(h).unwrap().to_string())
        .collect();
    let listed = namespaces();
    for n in &names {
        assert!(listed.contains(n.as_str()), "{n} in {listed}");
    }
    connect_across(&topo, "srv", "c1");
    connect_across(&topo, "srv", "c2");
    connect_across(&topo, "c1", "c2");
    // Nothing was added to the caller's namespace.
    let out = Command::new("ip").args(["-o", "addr"]).output().unwrap();
    assert!(!String::from_utf8_lossy(&out.stdout).contains("198.18.0."));
    topo.teardown().unwrap();
    let listed = namespaces();
    for n in &names {
        assert!(!listed.contains(n.as_str()), "{n} still in {listed}");
    }
}

#[test]
fn drop_removes_the_namespaces() {
    require_root!("network namespaces");
    let topo = Topology::build(&TopologySpec::bridge(&["a", "b"])).unwrap();
    let name = topo.namespace("a").unwrap().to_string();
    drop(topo);
    assert!(!namespaces().contains(&name));
}

#[test]
fn point_to_point_hosts_connect() {
    require_root!("network namespaces");
    let topo = Topology::build(&TopologySpec::point_to_point("left", "right")).unwrap();
    connect_across(&topo, "left", "right");
}

#[test]
fn link_rate_installs_tbf_on_both_ends() {
    require_root!("network namespaces");
    let topo = Topology::build(&TopologySpec::bridge(&["a", "b"]).with_link_rate(Some(10_000_000)))
        .unwrap();
    let ns = topo.namespace("a").unwrap();
    let out = Command::new("tc")
        .args(["-n", ns, "qdisc", "show", "dev", "eth0"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("tbf") && text.contains("10Mbit"), "{text}");
    let switch = ns.rsplit_once('-').unwrap().0.to_string() + "-sw";
    let out = Command::new("tc")
        .args(["-n", &switch, "qdisc", "show", "dev", "p0"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("tbf") && text.contains("10Mbit"), "{text}");
    connect_across(&topo, "a", "b");
}

#[test]
fn bad_specs_and_unknown_hosts_are_refused() {
    for spec in [
        TopologySpec::bridge(&[]),
        TopologySpec::bridge(&["UPPER"]),
        TopologySpec::bridge(&["a", "a"]),
        TopologySpec::bridge(&["sw"]),
        TopologySpec::bridge(&["averyverylonghostname"]),
        TopologySpec {
            layout: connlab_os::netns::Layout::PointToPoint,
            ..TopologySpec::bridge(&["a", "b", "c"])
        },
    ] {
        let err = Topology::build(&spec).unwrap_err();
        assert!(matches!(err, NetnsError::BadSpec(_)), "{spec:?}: {err}");
    }
    require_root!("network namespaces");
    let topo = Topology::build(&TopologySpec::bridge(&["a"])).unwrap();
    assert!(matches!(
        topo.command("nope", "true"),
        Err(NetnsError::UnknownHost(_))
    ));
    assert_eq!(topo.host_addr("nope"), None);
    // A command runs inside the host: it sees eth0 with the host's address.
    let out = topo
        .command("a", "ip")
        .unwrap()
        .args(["-o", "addr", "show", "dev", "eth0"])
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&out.stdout).contains("198.18.0.1/24"));
}

/// The child half of `namespaces_of_a_killed_run_are_swept`.
#[test]
fn child_builds_and_waits() {
    if std::env::var_os("CONNLAB_NETNS_CHILD").is_none() {
        return;
    }
    let topo = Topology::build(&TopologySpec::bridge(&["x", "y"])).unwrap();
    println!("NS={}", topo.namespace("x").unwrap());
    println!("NS={}", topo.namespace("y").unwrap());
    println!("READY");
    std::io::stdout().flush().unwrap();
    std::thread::sleep(Duration::from_secs(60));
}

#[test]
fn namespaces_of_a_killed_run_are_swept() {
    require_root!("network namespaces");
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "netns::child_builds_and_waits",
            "--nocapture",
            "--test-threads",
            "1",
        ])
        .env("CONNLAB_NETNS_CHILD", "1")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut names = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    for line in BufReader::new(child.stdout.take().unwrap()).lines() {
        let line = line.unwrap();
        // libtest may put its own "test name ... " before the first line.
        if let Some((_, n)) = line.split_once("NS=") {
            names.push(n.trim().to_string());
        }
        if line.contains("READY") || Instant::now() > deadline {
            break;
        }
    }
    assert_eq!(names.len(), 2, "the child built its topology");
    child.kill().unwrap();
    child.wait().unwrap();
    let listed = namespaces();
    assert!(
        listed.contains(&names[0]),
        "a killed run leaves its namespaces"
    );
    // (A parallel test's build may sweep them first; either way they go.)
    sweep_stale().unwrap();
    let listed = namespaces();
    for n in &names {
        assert!(!listed.contains(n.as_str()), "{n} still in {listed}");
    }
}
