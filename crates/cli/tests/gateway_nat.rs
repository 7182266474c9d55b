//! `connlab gateway --mode nat` in network namespaces: clients with known
//! addresses land on the backend the policy says; the nftables table is
//! removed on exit and, after a kill, at the next start; bad flags are
//! refused. Needs root and `nft` (`.ci/run` installs nftables): skipped with
//! a message without.

use connlab_os::netns::{Topology, TopologySpec};
use serde_json::Value;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn connlab_bin() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_connlab"))
}

fn can_run() -> bool {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() == 0 };
    let nft = Command::new("nft").arg("--version").output().is_ok();
    if !(root && nft) {
        eprintln!("skipped: needs root and nft (root {root}, nft {nft})");
    }
    root && nft
}

const VIP: &str = "198.18.0.1:80";

/// A backend in `host` that answers every connection with its name.
fn backend(topo: &Topology, host: &'static str, port: u16) {
    let addr: SocketAddr = format!("{}:{port}", topo.host_addr(host).unwrap())
        .parse()
        .unwrap();
    let listener = topo
        .run_in(host, || TcpListener::bind(addr).unwrap())
        .unwrap();
    std::thread::spawn(move || {
        for mut s in listener.incoming().flatten() {
            let _ = s.write_all(host.as_bytes());
        }
    });
}

/// Connects `n` times from `host` to the VIP; the backend names that answered.
fn connect_from(topo: &Topology, host: &str, n: usize) -> Vec<String> {
    topo.run_in(host, || {
        (0..n)
            .map(|_| {
                let mut s =
                    TcpStream::connect_timeout(&VIP.parse().unwrap(), Duration::from_secs(5))
                        .expect("connect to the VIP");
                s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
                let mut name = String::new();
                s.read_to_string(&mut name).unwrap();
                name
            })
            .collect()
    })
    .unwrap()
}

/// Starts the gateway in `gw` and waits until it says it is ready.
fn start_gateway(topo: &Topology, policy: &str, stats: &Path) -> Child {
    let mut child = topo
        .command("gw", connlab_bin())
        .unwrap()
        .args(["gateway", "--mode", "nat", "--listen", VIP])
        .args([
            "--backend",
            "198.18.0.2:8080",
            "--backend",
            "198.18.0.3:8080",
        ])
        .args(["--policy", policy, "--masquerade", "--stats"])
        .arg(stats)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        assert!(Instant::now() < deadline, "the gateway never became ready");
        match lines.next() {
            Some(Ok(l)) if l.starts_with("gateway: nat mode") => break,
            Some(Ok(_)) => {}
            _ => {
                let out = child.wait_with_output().unwrap();
                panic!("gateway exited: {}", String::from_utf8_lossy(&out.stderr));
            }
        }
    }
    std::thread::spawn(move || for _ in lines {});
    child
}

fn stop(child: Child) -> std::process::Output {
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let start = Instant::now();
    let mut child = child;
    while child.try_wait().unwrap().is_none() {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "gateway did not stop"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

fn tables(topo: &Topology) -> Vec<String> {
    let out = topo
        .command("gw", "nft")
        .unwrap()
        .args(["list", "tables", "ip"])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.contains("connlab_gw_"))
        .map(str::to_string)
        .collect()
}

#[test]
fn clients_land_where_the_policy_says_and_the_table_goes_away() {
    if !can_run() {
        return;
    }
    // gw .1, b1 .2, b2 .3, c1 .4, c2 .5, c3 .6
    let topo =
        Topology::build(&TopologySpec::bridge(&["gw", "b1", "b2", "c1", "c2", "c3"])).unwrap();
    backend(&topo, "b1", 8080);
    backend(&topo, "b2", 8080);
    let dir = tempfile::tempdir().unwrap();
    let stats = dir.path().join("gw.json");

    // ip-mod: low byte mod 2, so .4 and .6 go to b1, .5 to b2; every time.
    let gw = start_gateway(&topo, "ip-mod", &stats);
    assert_eq!(tables(&topo).len(), 1);
    for (client, expect) in [("c1", "b1"), ("c2", "b2"), ("c3", "b1")] {
        let got = connect_from(&topo, client, 3);
        assert!(got.iter().all(|g| g == expect), "{client}: {got:?}");
    }
    let out = stop(gw);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let s: Value = serde_json::from_str(&std::fs::read_to_string(&stats).unwrap()).unwrap();
    eprintln!("gateway stats: {s}");
    assert_eq!(s["policy"], "ip-mod");
    assert_eq!(s["backends"][0]["connections"], 6, "{s}");
    assert_eq!(s["backends"][1]["connections"], 3, "{s}");
    assert!(s["backends"][0]["bytes_from"].as_u64().unwrap() > 0, "{s}");
    assert!(tables(&topo).is_empty(), "the table is removed on exit");

    // round-robin: one client's new connections alternate.
    let gw = start_gateway(&topo, "round-robin", &stats);
    let got = connect_from(&topo, "c1", 6);
    assert_eq!(got.iter().filter(|g| *g == "b1").count(), 3, "{got:?}");
    assert!(stop(gw).status.success());

    // A killed gateway leaves its table; the next start removes it.
    let mut gw = start_gateway(&topo, "ip-mod", &stats);
    gw.kill().unwrap();
    gw.wait().unwrap();
    let left = tables(&topo);
    assert_eq!(
        left.len(),
        1,
        "a killed gateway's table stays until the next start"
    );
    let gw = start_gateway(&topo, "ip-mod", &stats);
    let now = tables(&topo);
    assert_eq!(now.len(), 1);
    assert_ne!(now, left, "the stale table was swept");
    assert!(stop(gw).status.success());
    assert!(tables(&topo).is_empty());
}

#[test]
fn bad_flags_are_refused_with_exit_2() {
    for (args, says) in [
        (
            vec!["--backend", "198.18.0.2:80", "--policy", "maglev"],
            "proxy",
        ),
        (
            vec!["--backend", "198.18.0.2:80", "--mode", "proxy"],
            "not built yet",
        ),
        (vec!["--backend", "nowhere"], "--backend"),
        (vec!["--backend", "198.18.0.2:80,0"], "weight"),
        (
            vec!["--backend", "198.18.0.2:80", "--policy", "random"],
            "unknown policy",
        ),
        (vec![], "--backend"),
    ] {
        let out = Command::new(connlab_bin())
            .args(["gateway", "--listen", VIP])
            .args(&args)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}: {out:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(says), "{args:?}: {err}");
    }
}
