//! The uring engine with each optional io_uring feature switched off in
//! turn (and none of them, and sqpoll on): partial writes of a
//! 16 MiB response read after a pause, pipelining, half-close and bad
//! input must behave the same whatever the engine uses. The full
//! per-engine suite (`crates/cli/tests/serve_engines.rs`) runs under any
//! set with `CONNLAB_URING_FEATURES`.

use connlab_os::Shutdown;
use connlab_proto::Protocol;
use connlab_server::{EngineKind, Server, ServerConfig, UringFeature, UringFeatures};
use std::io::{Read, Write};
use std::net::{Shutdown as Half, TcpStream};
use std::time::Duration;

const MIB: u32 = 1024 * 1024;

/// A CLB1 request (shared/protocol.md): magic, req_len, resp_len, seq, body.
fn request(req_len: u32, resp_len: u32, seq: u32) -> Vec<u8> {
    let mut r = b"CLB1".to_vec();
    r.extend_from_slice(&req_len.to_be_bytes());
    r.extend_from_slice(&resp_len.to_be_bytes());
    r.extend_from_slice(&seq.to_be_bytes());
    r.resize(req_len as usize, b'r');
    r
}

/// Reads one response: its header repeats the request's, its length is resp_len.
fn expect_response(conn: &mut TcpStream, req_len: u32, resp_len: u32, seq: u32, set: &str) {
    let mut head = [0u8; 16];
    conn.read_exact(&mut head)
        .unwrap_or_else(|e| panic!("[{set}] response {seq} header: {e}"));
    assert_eq!(
        head[..],
        request(req_len, resp_len, seq)[..16],
        "[{set}] response {seq} header"
    );
    let mut left = u64::from(resp_len) - 16;
    let mut buf = vec![0u8; 64 * 1024];
    while left > 0 {
        let want = buf.len().min(left as usize);
        let n = conn
            .read(&mut buf[..want])
            .unwrap_or_else(|e| panic!("[{set}] response {seq}, {left} bytes left: {e}"));
        assert!(
            n > 0,
            "[{set}] EOF with {left} bytes of response {seq} left"
        );
        left -= n as u64;
    }
}

/// The server closes the connection without sending more.
fn expect_eof(conn: &mut TcpStream, set: &str) {
    let mut rest = Vec::new();
    match conn.read_to_end(&mut rest) {
        Ok(_) => assert!(
            rest.is_empty(),
            "[{set}] {} bytes after the end",
            rest.len()
        ),
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {}
        Err(e) => panic!("[{set}] expected the server to close: {e}"),
    }
}

fn exercise(features: UringFeatures) {
    let set = features.to_string();
    let mut config = ServerConfig::new(
        EngineKind::Uring,
        "127.0.0.1:0".parse().expect("address"),
        Protocol::Clb1,
    );
    config.uring_features = features;
    let server = Server::bind(config).expect("bind");
    let addr = server.local_addr();
    let shutdown = Shutdown::new().expect("shutdown latch");
    let latch = &shutdown;
    let stats = std::thread::scope(|s| {
        let running = s.spawn(move || server.run(latch));
        let connect = || {
            let c = TcpStream::connect(addr).expect("connect");
            c.set_read_timeout(Some(Duration::from_secs(20)))
                .expect("read timeout");
            c
        };
        // A 16 MiB response not read for a while: the socket fills, the
        // server's sends are short and continue where the kernel stopped.
        let mut big = connect();
        big.write_all(&request(64, 16 * MIB, 1)).expect("send");
        big.write_all(&request(32, 100, 2)).expect("send");
        std::thread::sleep(Duration::from_millis(50));
        expect_response(&mut big, 64, 16 * MIB, 1, &set);
        expect_response(&mut big, 32, 100, 2, &set);
        // Pipelined requests, then a half-close: every answer, then EOF.
        let mut half = connect();
        let batch: Vec<u8> = (0..40)
            .flat_map(|i| request(16 + i, 16 + 97 * i, i))
            .collect();
        half.write_all(&batch).expect("send");
        half.shutdown(Half::Write).expect("half-close");
        for i in 0..40 {
            expect_response(&mut half, 16 + i, 16 + 97 * i, i, &set);
        }
        expect_eof(&mut half, &set);
        // Bad input costs only its connection.
        let mut bad = connect();
        bad.write_all(b"NOPE, not a CLB1 header at all")
            .expect("send");
        expect_eof(&mut bad, &set);
        let mut after = connect();
        after.write_all(&request(16, 16, 9)).expect("send");
        expect_response(&mut after, 16, 16, 9, &set);
        shutdown.trigger();
        running.join().expect("server thread")
    })
    .unwrap_or_else(|e| panic!("[{set}] server: {e}"));
    assert_eq!(stats.requests, 2 + 40 + 1, "[{set}] requests counted");
}

#[test]
fn every_feature_set_serves_the_same() {
    let mut sets = vec![
        UringFeatures::default(),
        UringFeatures::NONE,
        UringFeatures::default().with(UringFeature::Sqpoll, true),
    ];
    for f in UringFeature::ALL {
        sets.push(UringFeatures::default().with(f, false));
    }
    for set in sets {
        exercise(set);
    }
}
