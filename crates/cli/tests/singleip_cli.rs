//! `connlab singleip` on loopback, through the real binary: a client reaches
//! an unmodified server through the single cluster address (io-server +
//! app-node processes); a client that stops reading does not stop the other
//! streams (checked by bytes moved, with the send limit on and off); a killed
//! node resets only its own streams; a wrong key is refused and counted; a
//! peer sending garbage or a frame before the handshake is refused without
//! crashing the io-server, which keeps serving the good node; bad flags exit 2.
//! The same in network namespaces (io-server, two node hosts, a client host):
//! reach, a killed node, garbage, a wrong key, a frame before the handshake,
//! an oversized frame from an authenticated node, and a stalled reader.
//! Every wait has a deadline and every child is killed when dropped.

use connlab_os::netns::{Topology, TopologySpec};
use connlab_proto::xfer::{Event as XferEvent, XferConfig, XferSession};
use connlab_testkit::net::{
    bulk_server, connect, echo_back, loopback_listener, named_echo_on, response_server,
};
use connlab_testkit::{
    connlab_bin, echo_server, pattern, read_json, require_root, round_trip, ChildGuard, Lines,
};
use serde_json::Value;
use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

const START_TIMEOUT: Duration = Duration::from_secs(20);

/// A `connlab` child killed on drop, with its banner line.
struct Proc {
    child: ChildGuard,
    banner: String,
}

impl Proc {
    /// Starts `connlab args...` and waits for its `singleip: ... ready` line.
    fn start(args: &[&str]) -> Proc {
        Proc::start_cmd(Command::new(connlab_bin()), args)
    }

    /// Starts `cmd` (a `connlab` command, e.g. in a namespace) with `args`.
    fn start_cmd(mut cmd: Command, args: &[&str]) -> Proc {
        cmd.args(args).stdout(Stdio::piped()).stderr(Stdio::piped());
        let mut child = ChildGuard::spawn(&mut cmd);
        let lines = Lines::read(child.child().stdout.take().unwrap());
        match lines.wait_for(START_TIMEOUT, |l| {
            l.starts_with("singleip:") && l.contains("ready")
        }) {
            Some(banner) => Proc { child, banner },
            None => {
                child.kill();
                panic!(
                    "connlab {args:?} printed no ready line: {}",
                    child.stderr_text()
                );
            }
        }
    }

    /// SIGINT, then the exit status and stderr (bounded wait).
    fn stop(mut self) -> (i32, String) {
        self.child.signal(libc::SIGINT);
        let status = self.child.wait_or_kill(START_TIMEOUT, "connlab");
        (status.code().unwrap_or(-1), self.child.stderr_text())
    }

    fn kill(mut self) {
        self.child.kill();
    }
}

fn temp_dir() -> tempfile::TempDir {
    tempfile::tempdir().unwrap()
}

fn key_file(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, bytes).unwrap();
    path
}

/// An io-server on loopback: (process, cluster address, node address).
fn io_server(key: &Path, extra: &[&str], stats: &Path) -> (Proc, SocketAddr, SocketAddr) {
    let mut args = vec![
        "singleip",
        "io-server",
        "--listen",
        "127.0.0.1:0",
        "--nodes",
        "127.0.0.1:0",
        "--key",
        key.to_str().unwrap(),
        "--stats",
        stats.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    let p = Proc::start(&args);
    // "singleip: io-server ready: cluster A, nodes B, ..."
    let cluster = p
        .banner
        .split("cluster ")
        .nth(1)
        .unwrap()
        .split(',')
        .next()
        .unwrap();
    let nodes = p
        .banner
        .split("nodes ")
        .nth(1)
        .unwrap()
        .split(',')
        .next()
        .unwrap();
    let (c, n) = (cluster.parse().unwrap(), nodes.parse().unwrap());
    (p, c, n)
}

fn app_node(nodes: SocketAddr, key: &Path, forward: SocketAddr, port: u16, id: &str) -> Proc {
    app_node_with(nodes, key, forward, port, id, &[])
}

/// [`app_node`] with more flags.
fn app_node_with(
    nodes: SocketAddr,
    key: &Path,
    forward: SocketAddr,
    port: u16,
    id: &str,
    extra: &[&str],
) -> Proc {
    let (nodes, port) = (nodes.to_string(), port.to_string());
    let forward = forward.to_string();
    let mut args = vec![
        "singleip",
        "app-node",
        "--io-server",
        &nodes,
        "--key",
        key.to_str().unwrap(),
        "--forward",
        &forward,
        "--port",
        &port,
        "--node-id",
        id,
    ];
    args.extend_from_slice(extra);
    Proc::start(&args)
}

/// Stops the io-server (SIGINT), checks it exited 0, and reads its `--stats`.
fn stop_io_server(server: Proc, stats: &Path) -> Value {
    let (code, err) = server.stop();
    assert_eq!(code, 0, "io-server: {err}");
    read_json(stats)
}

/// Checks a `--stats` document against its schema in `crates/singleip/schema/`.
fn assert_matches_schema(doc: &Value, schema_file: &str) {
    connlab_testkit::assert_matches_schema(doc, &format!("crates/singleip/schema/{schema_file}"));
}

/// A local server that writes its `name` byte, then echoes.
fn named_echo_server(name: u8) -> SocketAddr {
    named_echo_on(loopback_listener(), name)
}

/// Connects to `addr` and reads the one-byte name its server sends first
/// (`named_echo_on`): which node got the connection.
fn connect_named(addr: SocketAddr) -> (TcpStream, u8) {
    let mut s = connect(addr);
    let mut name = [0u8; 1];
    s.read_exact(&mut name).unwrap();
    (s, name[0])
}

/// After the node named `b'A'` was killed: its streams end (reset or end of
/// input, never a hang, never more bytes); the others still echo `size`
/// bytes.
fn check_streams_after_killing_a(conns: &mut [(TcpStream, u8)], size: usize, seed: u8) {
    for (s, name) in conns {
        if *name == b'A' {
            let mut buf = [0u8; 16];
            match s.read(&mut buf) {
                Ok(0) | Err(_) => {}
                Ok(n) => panic!("a stream of the killed node got {n} more bytes"),
            }
        } else {
            let data = pattern(size, seed);
            assert_eq!(echo_back(s, &data), data);
        }
    }
}

#[test]
fn client_reaches_an_unmodified_server_through_the_cluster_address() {
    client_reaches_an_unmodified_server(false);
}

#[test]
fn client_reaches_an_unmodified_server_with_a_splicing_node() {
    client_reaches_an_unmodified_server(true);
}

fn client_reaches_an_unmodified_server(splice: bool) {
    let dir = temp_dir();
    let key = key_file(dir.path(), "key", b"a shared key of 32 bytes, ok....");
    let stats = dir.path().join("io.json");
    let node_stats = dir.path().join("node.json");
    let (server, cluster, nodes) = io_server(&key, &[], &stats);
    let echo = echo_server();
    let mut extra = vec!["--stats", node_stats.to_str().unwrap()];
    if splice {
        extra.push("--splice");
    }
    let node = app_node_with(nodes, &key, echo, cluster.port(), "3", &extra);
    assert_eq!(node.banner.contains(", splice"), splice, "{}", node.banner);
    let clients: Vec<_> = (0..6u8)
        .map(|i| {
            std::thread::spawn(move || {
                let data = pattern(1 + i as usize * 150_000, i);
                assert_eq!(round_trip(cluster, &data), data, "client {i}");
                data.len() as u64
            })
        })
        .collect();
    let total: u64 = clients.into_iter().map(|c| c.join().unwrap()).sum();
    let (code, err) = node.stop();
    assert_eq!(code, 0, "app-node: {err}");
    let s = stop_io_server(server, &stats);
    assert_matches_schema(&s, "io-server-stats.schema.json");
    assert_eq!(s["schema"], "connlab.singleip.io-server.stats/1");
    assert_eq!(s["clients_accepted"], 6);
    assert_eq!(s["nodes_authenticated"], 1);
    assert_eq!(s["nodes"][0]["node_id"], 3);
    assert_eq!(s["nodes"][0]["version"], 2);
    assert_eq!(s["nodes"][0]["bytes_to_node"], total);
    assert_eq!(s["nodes"][0]["bytes_from_node"], total);
    let conns = s["connections"].as_array().unwrap();
    assert_eq!(conns.len(), 6);
    for c in conns {
        assert_eq!(c["end"], "closed", "{c}");
        assert_eq!(c["bytes_to_client"], c["bytes_from_client"], "{c}");
    }
    let n = read_json(&node_stats);
    assert_matches_schema(&n, "app-node-stats.schema.json");
    assert_eq!(n["streams"], 6);
    assert_eq!(n["splice"], splice);
    assert_eq!(n["version"], 2);
    assert_eq!(n["bytes_to_local"], total);
    assert_eq!(n["bytes_from_local"], total);
}

/// Issue 29: the I/O server at its descriptor limit sheds clients and
/// node connections that do not fit, neither spins nor wedges its queues,
/// and relays again once descriptors are free.
#[test]
fn the_io_server_sheds_at_the_descriptor_limit_and_recovers() {
    use connlab_testkit::limits;
    let dir = temp_dir();
    let key = key_file(dir.path(), "key", b"a shared key of 32 bytes, ok....");
    let stats = dir.path().join("io.json");
    let (server, cluster, nodes) = io_server(&key, &[], &stats);
    let echo = echo_server();
    let node = app_node(nodes, &key, echo, cluster.port(), "1");
    limits::lower_nofile(server.child.pid(), 64);
    // Each relayed client costs one descriptor: about 50 fit; node
    // connections are shed alike.
    let span = Duration::from_secs(2);
    let (_, spent) =
        limits::flood_and_hold(server.child.pid(), &[(cluster, 100), (nodes, 10)], span);
    assert!(
        spent < 0.2,
        "{spent:.2} CPU s in 2 s at the descriptor limit: the I/O server spins"
    );
    let Some(recovery) = limits::served_within(span, || limits::echoes(cluster)) else {
        panic!("no client relayed within 2 s of the flood's release");
    };
    limits::report("singleip io-server", spent, span, recovery);
    let (code, err) = node.stop();
    assert_eq!(code, 0, "app-node: {err}");
    let s = stop_io_server(server, &stats);
    assert!(s["shed"].as_u64().unwrap_or(0) >= 30, "{s}");
    assert!(s["fd_limit_episodes"].as_u64().unwrap_or(0) >= 1, "{s}");
    assert_eq!(s["nodes_authenticated"], 1, "{s}");
}

#[test]
fn max_version_1_on_either_side_relays_100_kib_responses_at_version_1() {
    const LEN: usize = 100 * 1024;
    let local = response_server(LEN);
    // (io-server flags, app-node flags, negotiated version)
    let cases: [(&[&str], &[&str], u64); 4] = [
        (&[], &[], 2),
        (&[], &["--max-version", "1"], 1),
        (&["--max-version", "1"], &[], 1),
        (&["--max-version", "2"], &["--max-version", "2"], 2),
    ];
    for (server_flags, node_flags, version) in cases {
        for splice in [false, true] {
            let case =
                format!("io-server {server_flags:?}, app-node {node_flags:?}, splice {splice}");
            let dir = temp_dir();
            let key = key_file(dir.path(), "key", b"a shared key of 32 bytes, ok....");
            let stats = dir.path().join("io.json");
            let node_stats = dir.path().join("node.json");
            let (server, cluster, nodes) = io_server(&key, server_flags, &stats);
            let mut extra = vec!["--stats", node_stats.to_str().unwrap()];
            extra.extend_from_slice(node_flags);
            if splice {
                extra.push("--splice");
            }
            let node = app_node_with(nodes, &key, local, cluster.port(), "5", &extra);
            fetch_responses(cluster, 2, LEN, &case);
            let (code, err) = node.stop();
            assert_eq!(code, 0, "{case}: app-node: {err}");
            assert!(
                err.contains(&format!("CLXF version {version}")),
                "{case}: {err}"
            );
            let (code, err) = server.stop();
            assert_eq!(code, 0, "{case}: io-server: {err}");
            assert!(
                err.contains(&format!("CLXF version {version}")),
                "{case}: {err}"
            );
            let s = read_json(&stats);
            assert_matches_schema(&s, "io-server-stats.schema.json");
            assert_eq!(s["nodes"][0]["version"], version, "{case}");
            assert_eq!(s["nodes"][0]["bytes_from_node"], 2 * LEN as u64, "{case}");
            let n = read_json(&node_stats);
            assert_matches_schema(&n, "app-node-stats.schema.json");
            assert_eq!(n["version"], version, "{case}");
            assert_eq!(n["splice"], splice, "{case}");
        }
    }
}

/// Asks the cluster address for `count` responses of [`response_server`]
/// (seeds 0, 1, ...) and checks each byte for byte.
fn fetch_responses(cluster: SocketAddr, count: u8, len: usize, case: &str) {
    for seed in 0..count {
        let mut s = connect(cluster);
        s.write_all(&[b'G', b'E', b'T', seed]).unwrap();
        let mut got = Vec::new();
        s.read_to_end(&mut got).unwrap();
        assert_eq!(got.len(), len, "{case}");
        assert!(got == pattern(len, seed), "{case}: bytes differ");
    }
}

#[test]
fn io_server_splice_relays_responses_byte_exact_and_says_so() {
    const LEN: usize = 1 << 20;
    let local = response_server(LEN);
    // (io-server flags, app-node flags)
    let cases: [(&[&str], &[&str]); 3] = [
        (&["--splice"], &[]),
        (&["--splice"], &["--splice"]),
        (&["--splice", "--max-version", "1"], &["--splice"]),
    ];
    for (server_flags, node_flags) in cases {
        let case = format!("io-server {server_flags:?}, app-node {node_flags:?}");
        let dir = temp_dir();
        let key = key_file(dir.path(), "key", b"a shared key of 32 bytes, ok....");
        let stats = dir.path().join("io.json");
        let (server, cluster, nodes) = io_server(&key, server_flags, &stats);
        assert!(server.banner.contains(", splice;"), "{}", server.banner);
        let node = app_node_with(nodes, &key, local, cluster.port(), "3", node_flags);
        fetch_responses(cluster, 3, LEN, &case);
        let (code, err) = node.stop();
        assert_eq!(code, 0, "{case}: app-node: {err}");
        let (code, err) = server.stop();
        assert_eq!(code, 0, "{case}: io-server: {err}");
        assert!(err.contains("B spliced to clients"), "{case}: {err}");
        let s = read_json(&stats);
        assert_matches_schema(&s, "io-server-stats.schema.json");
        assert_eq!(s["splice"], true, "{case}");
        assert!(s["spliced_bytes"].as_u64().unwrap() > 0, "{case}: {s}");
        assert_eq!(s["bad_frames"], 0, "{case}");
        assert_eq!(s["nodes"][0]["bytes_from_node"], 3 * LEN as u64, "{case}");
    }
    // Without the flag: off, and nothing spliced.
    let dir = temp_dir();
    let key = key_file(dir.path(), "key", b"a shared key of 32 bytes, ok....");
    let stats = dir.path().join("io.json");
    let (server, _, _) = io_server(&key, &[], &stats);
    assert!(!server.banner.contains("splice"), "{}", server.banner);
    let s = stop_io_server(server, &stats);
    assert_eq!(s["splice"], false);
    assert_eq!(s["spliced_bytes"], 0);
}

#[test]
fn a_client_that_stops_reading_does_not_stop_the_other_streams() {
    // More than the kernel can hold for one stalled client, even with
    // --send-limit off (tcp_wmem max 4 MiB here plus the receive buffer).
    const N: usize = 10_000_000;
    for (limit, splice) in [("16KiB", false), ("off", false), ("16KiB", true)] {
        let dir = temp_dir();
        let key = key_file(dir.path(), "key", b"0123456789abcdef0123456789abcdef");
        let stats = dir.path().join("io.json");
        let (server, cluster, nodes) = io_server(&key, &["--send-limit", limit], &stats);
        let bulk = bulk_server(N, 5);
        let flags: &[&str] = if splice { &["--splice"] } else { &[] };
        let _node = app_node_with(nodes, &key, bulk, cluster.port(), "1", flags);
        // The stalled client connects first and never reads a byte.
        let stalled = connect(cluster);
        let readers: Vec<_> = (0..5)
            .map(|_| {
                std::thread::spawn(move || {
                    let mut s = connect(cluster);
                    let mut got = Vec::new();
                    s.read_to_end(&mut got).unwrap();
                    got == pattern(N, 5)
                })
            })
            .collect();
        for (i, r) in readers.into_iter().enumerate() {
            assert!(
                r.join().unwrap(),
                "--send-limit {limit} splice {splice}: reader {i} got wrong bytes"
            );
        }
        drop(stalled);
        let s = stop_io_server(server, &stats);
        let full = s["connections"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|c| c["bytes_to_client"] == N as u64)
            .count();
        assert!(full >= 5, "--send-limit {limit} splice {splice}: {s}");
        // The stalled stream really stalled: the kernel buffers did not
        // absorb all its bytes, so credit had to stop its node.
        let stalled = s["connections"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|c| c["bytes_to_client"].as_u64().unwrap() < N as u64)
            .count();
        assert_eq!(stalled, 1, "--send-limit {limit} splice {splice}: {s}");
    }
}

#[test]
fn a_killed_node_resets_only_its_own_streams() {
    let dir = temp_dir();
    let key = key_file(dir.path(), "key", b"0123456789abcdef0123456789abcdef");
    let stats = dir.path().join("io.json");
    let (server, cluster, nodes) = io_server(&key, &[], &stats);
    let node_a = app_node(nodes, &key, named_echo_server(b'A'), cluster.port(), "1");
    let node_b = app_node(nodes, &key, named_echo_server(b'B'), cluster.port(), "2");
    // Round robin: the connections alternate between the nodes.
    let mut conns: Vec<(TcpStream, u8)> = (0..6).map(|_| connect_named(cluster)).collect();
    assert_eq!(conns.iter().filter(|c| c.1 == b'A').count(), 3);
    node_a.kill();
    check_streams_after_killing_a(&mut conns, 100_000, 7);
    // New clients go to the surviving node.
    for _ in 0..3 {
        assert_eq!(connect_named(cluster).1, b'B');
    }
    drop(conns);
    drop(node_b);
    let s = stop_io_server(server, &stats);
    let lost = s["connections"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["end"] == "node lost" && c["node_id"] == 1)
        .count();
    assert_eq!(lost, 3, "{s}");
}

#[test]
fn a_wrong_key_is_refused_and_counted() {
    let dir = temp_dir();
    let key = key_file(dir.path(), "key", b"0123456789abcdef0123456789abcdef");
    let wrong = key_file(dir.path(), "wrong", b"fedcba9876543210fedcba9876543210");
    let stats = dir.path().join("io.json");
    let (server, cluster, nodes) = io_server(&key, &[], &stats);
    let out = Command::new(connlab_bin())
        .args([
            "singleip",
            "app-node",
            "--io-server",
            &nodes.to_string(),
            "--key",
            wrong.to_str().unwrap(),
            "--forward",
            &echo_server().to_string(),
            "--port",
            &cluster.port().to_string(),
        ])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("proof does not match"), "{err}");
    let s = stop_io_server(server, &stats);
    assert_eq!(s["nodes_authenticated"], 0, "{s}");
    assert_eq!(s["nodes_refused"], 1, "{s}");
    // The node checks the server's proof first and refuses with GOAWAY
    // AUTH_FAILED; the server counts that as a wrong key.
    assert_eq!(s["auth_failures"], 1, "{s}");
    assert_eq!(s["nodes"][0]["auth_failures"], 1, "{s}");
}

#[test]
fn a_node_proof_made_with_a_wrong_key_is_counted_as_an_auth_failure() {
    // A raw node that sends HELLO, ignores the server's proof and answers
    // with a made-up AUTH.
    let dir = temp_dir();
    let key = key_file(dir.path(), "key", b"0123456789abcdef0123456789abcdef");
    let stats = dir.path().join("io.json");
    let (server, _cluster, nodes) = io_server(&key, &[], &stats);
    let mut s = connect(nodes);
    let mut hello = vec![0, 0, 0, 52, 0x01, 0, 0, 0, 0, 0, 0, 0];
    hello.extend_from_slice(b"CLXF");
    hello.extend_from_slice(&[0, 1, 0, 1, 0, 0, 0, 9, 0, 1, 0, 0, 0, 0, 4, 0]);
    hello.extend_from_slice(&[7u8; 32]);
    s.write_all(&hello).unwrap();
    let mut challenge = [0u8; 12 + 76];
    s.read_exact(&mut challenge).unwrap();
    assert_eq!(challenge[4], 0x02, "CHALLENGE expected");
    let mut auth = vec![0, 0, 0, 32, 0x03, 0, 0, 0, 0, 0, 0, 0];
    auth.extend_from_slice(&[0xAB; 32]);
    s.write_all(&auth).unwrap();
    // GOAWAY AUTH_FAILED (8), then the server closes.
    let mut rest = Vec::new();
    let _ = s.read_to_end(&mut rest);
    assert_eq!(rest.get(4), Some(&0x06), "GOAWAY expected: {rest:02x?}");
    assert_eq!(&rest[12..16], &[0, 0, 0, 8]);
    let st = stop_io_server(server, &stats);
    assert_eq!(st["auth_failures"], 1, "{st}");
    assert_eq!(st["nodes_refused"], 1, "{st}");
    assert_eq!(st["nodes"][0]["auth_failures"], 1, "{st}");
}

#[test]
fn bad_frames_from_a_node_are_refused_and_the_io_server_keeps_serving() {
    let dir = temp_dir();
    let key = key_file(dir.path(), "key", b"0123456789abcdef0123456789abcdef");
    let stats = dir.path().join("io.json");
    let (server, cluster, nodes) = io_server(&key, &[], &stats);
    let _node = app_node(nodes, &key, echo_server(), cluster.port(), "1");
    // Garbage; a DATA frame before the handshake; a truncated frame.
    let inputs: [&[u8]; 3] = [
        b"GET / HTTP/1.1\r\nHost: x\r\n\r\n",
        &[0, 0, 0, 4, 0x30, 0, 0, 0, 0, 0, 0, 2, 1, 2, 3, 4],
        &[0, 0, 0, 52, 0x01, 0, 0],
    ];
    for input in inputs {
        let mut s = connect(nodes);
        s.write_all(input).unwrap();
        if input.len() < 12 {
            s.shutdown(Shutdown::Write).unwrap();
        }
        let mut rest = Vec::new();
        let _ = s.read_to_end(&mut rest);
        // The good node still serves clients after each bad peer.
        let data = pattern(50_000, 3);
        assert_eq!(round_trip(cluster, &data), data);
    }
    let s = stop_io_server(server, &stats);
    assert_eq!(s["nodes_authenticated"], 1, "{s}");
    assert_eq!(s["nodes_refused"], 3, "{s}");
    assert_eq!(s["bad_frames"], 2, "{s}");
    assert_eq!(s["clients_accepted"], 3, "{s}");
}

#[test]
fn help_shows_examples_and_bad_flags_exit_2() {
    let out = Command::new(connlab_bin())
        .args(["singleip", "io-server", "--help"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let help = String::from_utf8_lossy(&out.stdout);
    assert!(
        help.contains("Example:") && help.contains("--send-limit") && help.contains("--splice"),
        "{help}"
    );
    let out = Command::new(connlab_bin())
        .args(["singleip", "app-node", "--help"])
        .output()
        .unwrap();
    let node_help = String::from_utf8_lossy(&out.stdout);
    assert!(
        node_help.contains("--splice")
            && node_help.contains("descriptors")
            && node_help.contains("--max-version"),
        "{node_help}"
    );
    // Issue 17: --help of every server-side command lists its limits.
    for flag in [
        "--max-pending-nodes",
        "--auth-timeout",
        "--node-read-budget",
        "--max-node-queue",
        "--max-frames-per-window",
        "--allow-connect",
        "--allow-listen",
        "--max-version",
        "64 KiB",
    ] {
        assert!(help.contains(flag), "{flag} missing from --help: {help}");
    }
    let dir = temp_dir();
    let long = key_file(dir.path(), "long", &vec![7u8; 64 * 1024 + 1]);
    let long = long.to_str().unwrap();
    let short = key_file(dir.path(), "short", b"too short");
    let good = key_file(dir.path(), "good", b"0123456789abcdef");
    let (short, good) = (short.to_str().unwrap(), good.to_str().unwrap());
    // io-server with a cluster and a node address, then the rest.
    fn io<'a>(rest: &[&'a str], key: &'a str) -> Vec<&'a str> {
        let mut v = vec!["singleip", "io-server", "--listen", "127.0.0.1:0"];
        v.extend(["--nodes", "127.0.0.1:0", "--key", key]);
        v.extend(rest);
        v
    }
    // app-node with an io-server, a key and a forward address, then the rest.
    let node = |rest: &[&'static str]| {
        let mut v = vec!["singleip", "app-node", "--io-server", "127.0.0.1:1"];
        v.extend(["--key", good, "--forward", "127.0.0.1:1"]);
        v.extend(rest.iter().copied());
        v
    };
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (
            vec!["singleip", "io-server", "--nodes", "127.0.0.1:0"],
            "--listen",
        ),
        (io(&[], short), "at least 16"),
        (io(&[], "/nonexistent/key"), "/nonexistent/key"),
        (io(&["--send-limit", "lots"], good), "--send-limit"),
        (io(&["--send-buffer", "1"], good), "--send-buffer"),
        (io(&["--send-buffer", "share:0.5"], good), "headroom"),
        (
            io(&["--send-limit", "off", "--send-buffer", "auto"], good),
            "--send-buffer",
        ),
        (io(&[], long), "larger than 65536 bytes"),
        (io(&["--allow-connect", "10.0.0.0/40"], good), "prefix"),
        (io(&["--allow-listen", "90-80"], good), "backwards"),
        (
            io(&["--max-pending-nodes", "0"], good),
            "--max-pending-nodes",
        ),
        (io(&["--auth-timeout", "0s"], good), "--auth-timeout"),
        (io(&["--node-read-budget", "1"], good), "--node-read-budget"),
        (io(&["--max-node-queue", "1KiB"], good), "--max-node-queue"),
        (node(&["--port", "0"]), "--port"),
        (node(&["--connect", "127.0.0.1:9000"]), "LOCAL=DEST"),
        (io(&["--max-version", "3"], good), "--max-version"),
        (io(&["--max-version", "0"], good), "1..=2"),
        (node(&["--max-version", "3"]), "1..=2"),
        (node(&["--max-version", "two"]), "--max-version"),
        // Issue 29: one address for clients and nodes is a usage error, not
        // "Address already in use".
        (
            vec![
                "singleip",
                "io-server",
                "--listen",
                "127.0.0.1:7311",
                "--nodes",
                "127.0.0.1:7311",
                "--key",
                good,
            ],
            "the same address",
        ),
        (
            io(&["--max-pending-per-source", "0"], good),
            "--max-pending-per-source",
        ),
    ];
    for (args, needle) in cases {
        let out = Command::new(connlab_bin()).args(&args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(needle), "{args:?}: {err}");
    }
}

#[test]
fn in_namespaces_clients_reach_two_nodes_a_killed_node_a_wrong_key_bad_frames_and_a_stalled_reader_cost_only_themselves(
) {
    require_root!("network namespaces");
    // io 198.18.0.1, n1 .2, n2 .3, client .4.
    let topo = Topology::build(&TopologySpec::bridge(&["io", "n1", "n2", "client"])).unwrap();
    let dir = temp_dir();
    let key = key_file(dir.path(), "key", b"0123456789abcdef0123456789abcdef");
    let stats = dir.path().join("io.json");
    let vip: SocketAddr = "198.18.0.1:80".parse().unwrap();
    let server = Proc::start_cmd(
        topo.command("io", connlab_bin()).unwrap(),
        &[
            "singleip",
            "io-server",
            "--listen",
            "198.18.0.1:80",
            "--nodes",
            "198.18.0.1:7000",
            "--key",
            key.to_str().unwrap(),
            "--stats",
            stats.to_str().unwrap(),
        ],
    );
    // Each node host runs an unmodified server on its own loopback.
    let mut nodes = Vec::new();
    for (host, name) in [("n1", b'A'), ("n2", b'B')] {
        let l = topo
            .run_in(host, || TcpListener::bind("127.0.0.1:0").unwrap())
            .unwrap();
        let local = named_echo_on(l, name);
        let id = if name == b'A' { "1" } else { "2" };
        nodes.push(Proc::start_cmd(
            topo.command(host, connlab_bin()).unwrap(),
            &[
                "singleip",
                "app-node",
                "--io-server",
                "198.18.0.1:7000",
                "--key",
                key.to_str().unwrap(),
                "--forward",
                &local.to_string(),
                "--port",
                "80",
                "--node-id",
                id,
            ],
        ));
    }
    let mut conns: Vec<(TcpStream, u8)> = topo
        .run_in("client", || (0..4).map(|_| connect_named(vip)).collect())
        .unwrap();
    let mut names: Vec<u8> = conns.iter().map(|c| c.1).collect();
    names.sort_unstable();
    assert_eq!(names, b"AABB");
    nodes.remove(0).kill();
    check_streams_after_killing_a(&mut conns, 200_000, 1);
    // Garbage on the node port from another host costs only that peer.
    topo.run_in("n1", || {
        let mut g = TcpStream::connect("198.18.0.1:7000").unwrap();
        g.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        let _ = g.write_all(&[0xff; 64]);
        let mut rest = Vec::new();
        let _ = g.read_to_end(&mut rest); // the io-server closes it
    })
    .unwrap();
    // A node with a wrong key, from another host: refused, counted, and the
    // node exits 1 saying why.
    let wrong = key_file(dir.path(), "wrong", b"fedcba9876543210fedcba9876543210");
    let out = topo
        .command("n1", connlab_bin())
        .unwrap()
        .args([
            "singleip",
            "app-node",
            "--io-server",
            "198.18.0.1:7000",
            "--key",
            wrong.to_str().unwrap(),
            "--forward",
            "127.0.0.1:9",
            "--port",
            "80",
        ])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("proof does not match"), "{err}");
    // Bad frames: a DATA frame before the handshake, and an oversized frame
    // from a node that authenticated. Each costs only its own connection.
    topo.run_in("n1", || {
        let mut s = TcpStream::connect("198.18.0.1:7000").unwrap();
        s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        let _ = s.write_all(&[0, 0, 0, 4, 0x30, 0, 0, 0, 0, 0, 0, 2, 1, 2, 3, 4]);
        let mut rest = Vec::new();
        let _ = s.read_to_end(&mut rest);
        assert_eq!(rest.get(4), Some(&0x06), "GOAWAY expected: {rest:02x?}");
        let mut s = TcpStream::connect("198.18.0.1:7000").unwrap();
        s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        let key = connlab_proto::xfer::AuthKey::new(b"0123456789abcdef0123456789abcdef").unwrap();
        let mut session = XferSession::node(XferConfig::new(key, [5; 32])).unwrap();
        let (mut out, mut buf) = (Vec::new(), [0u8; 4096]);
        let mut established = false;
        while !established {
            session.drain_output(&mut out);
            s.write_all(&out).unwrap();
            out.clear();
            let n = s.read(&mut buf).unwrap();
            assert!(n > 0, "the io-server closed during the handshake");
            session
                .feed(&buf[..n], &mut |e| {
                    established |= matches!(e, XferEvent::Established { .. })
                })
                .unwrap();
        }
        session.drain_output(&mut out);
        s.write_all(&out).unwrap();
        // A DATA header announcing 2 GiB on stream 1.
        s.write_all(&[0x7f, 0xff, 0xff, 0xff, 0x30, 0, 0, 0, 0, 0, 0, 1])
            .unwrap();
        let mut rest = Vec::new();
        let _ = s.read_to_end(&mut rest);
        // GOAWAY FRAME_SIZE (2).
        assert_eq!(rest.get(4), Some(&0x06), "GOAWAY expected: {rest:02x?}");
        assert_eq!(rest.get(12..16), Some(&[0, 0, 0, 2][..]), "{rest:02x?}");
    })
    .unwrap();
    // One client that never reads does not hold up the others (bytes moved,
    // not time): three streams echo 1 MB each through the surviving node.
    let (stalled, movers) = topo
        .run_in("client", || {
            let (stalled, _) = connect_named(vip);
            stalled
                .set_write_timeout(Some(Duration::from_secs(30)))
                .unwrap();
            let mut w = stalled.try_clone().unwrap();
            let stall_writer = std::thread::spawn(move || {
                // Fills every buffer on the way and then blocks (until the end).
                let _ = w.write_all(&pattern(8 << 20, 9));
            });
            let movers: Vec<_> = (0..3u8)
                .map(|i| {
                    let (mut s, _) = connect_named(vip);
                    std::thread::spawn(move || {
                        let data = pattern(1 << 20, 20 + i);
                        echo_back(&mut s, &data) == data
                    })
                })
                .collect();
            ((stalled, stall_writer), movers)
        })
        .unwrap();
    for (i, m) in movers.into_iter().enumerate() {
        assert!(
            m.join().unwrap(),
            "stream {i} beside a stalled reader: wrong bytes"
        );
    }
    let (stalled_sock, stall_writer) = stalled;
    let _ = stalled_sock.shutdown(Shutdown::Both);
    let _ = stall_writer.join();
    drop(conns);
    drop(nodes);
    let s = stop_io_server(server, &stats);
    // n1, n2 and the node that then sent an oversized frame.
    assert_eq!(s["nodes_authenticated"], 3, "{s}");
    // The garbage peer, the wrong key, the frame before the handshake.
    assert_eq!(s["nodes_refused"], 3, "{s}");
    assert_eq!(s["auth_failures"], 1, "{s}");
    // Garbage, the early DATA frame, the oversized frame.
    assert_eq!(s["bad_frames"], 3, "{s}");
    let ends: Vec<(&Value, &Value)> = s["connections"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (&c["node_id"], &c["end"]))
        .collect();
    assert_eq!(
        ends.iter()
            .filter(|(n, e)| *n == 1 && *e == "node lost")
            .count(),
        2,
        "{ends:?}"
    );
    topo.teardown().unwrap();
}

#[test]
fn a_taken_cluster_port_names_the_port_flag() {
    // Issue 17: the app-node failed with EADDRINUSE and no hint.
    let dir = temp_dir();
    let key = key_file(dir.path(), "key", b"0123456789abcdef-cli");
    let stats = dir.path().join("io.json");
    let (server, _cluster, nodes) = io_server(&key, &[], &stats);
    // A local server already holds the port on the cluster address's IP.
    let taken = TcpListener::bind("127.0.0.1:0").unwrap();
    let forward = taken.local_addr().unwrap();
    let mut node = ChildGuard::spawn(
        Command::new(connlab_bin())
            .args(["singleip", "app-node", "--io-server", &nodes.to_string()])
            .args([
                "--key",
                key.to_str().unwrap(),
                "--forward",
                &forward.to_string(),
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::piped()),
    );
    let code = node
        .wait_or_kill(START_TIMEOUT, "connlab")
        .code()
        .unwrap_or(-1);
    let err = node.stderr_text();
    assert_eq!(code, 1, "{err}");
    assert!(err.contains(&format!("port {}", forward.port())), "{err}");
    assert!(err.contains("--port"), "{err}");
    assert!(err.contains("--forward"), "{err}");
    let _ = stop_io_server(server, &stats);
}
