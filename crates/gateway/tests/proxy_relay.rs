//! The proxy relays every byte both ways, in order, and passes half-closes
//! on, with user-space buffers and with `--splice` pipes, on loopback.

use connlab_gateway::{proxy, Backend, Balancer, PolicyKind, ProxyConfig};
use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::mpsc;
use std::time::Duration;

/// A backend that echoes each connection until the client's end of file,
/// then closes its side.
fn echo_backend() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { return };
            std::thread::spawn(move || {
                let mut out = conn.try_clone().unwrap();
                let _ = std::io::copy(&mut conn, &mut out);
                let _ = out.shutdown(Shutdown::Write);
            });
        }
    });
    addr
}

fn pattern(len: usize, salt: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(salt))
        .collect()
}

fn relay_both_ways(splice: bool) {
    let backend = echo_backend();
    let balancer = Balancer::new(
        PolicyKind::RoundRobin,
        vec![Backend {
            addr: backend,
            weight: 1,
        }],
    )
    .unwrap();
    let config = ProxyConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        buffer: 16 * 1024,
        splice,
        ..ProxyConfig::default()
    };
    let (stop_r, stop_w) = std::io::pipe().unwrap();
    let (addr_tx, addr_rx) = mpsc::channel();
    let stopped = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let stop_flag = stopped.clone();
    let proxy = std::thread::spawn(move || {
        proxy::run(
            &config,
            balancer,
            stop_r.as_raw_fd(),
            || stop_flag.load(std::sync::atomic::Ordering::Relaxed),
            |a| addr_tx.send(a).unwrap(),
        )
    });
    let vip = addr_rx.recv_timeout(Duration::from_secs(10)).unwrap();
    // Four connections at once, 2 MiB each way.
    let clients: Vec<_> = (0..4u8)
        .map(|salt| {
            std::thread::spawn(move || {
                let data = pattern(2 << 20, salt);
                let mut c = TcpStream::connect(vip).unwrap();
                c.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
                let mut w = c.try_clone().unwrap();
                let sent = data.clone();
                let writer = std::thread::spawn(move || {
                    w.write_all(&sent).unwrap();
                    w.shutdown(Shutdown::Write).unwrap();
                });
                let mut back = Vec::new();
                c.read_to_end(&mut back).unwrap();
                writer.join().unwrap();
                assert!(back == data, "connection {salt}: {} bytes back", back.len());
            })
        })
        .collect();
    let outcomes: Vec<_> = clients.into_iter().map(|c| c.join()).collect();
    // Stop the proxy before judging, so a failure still ends the test.
    stopped.store(true, std::sync::atomic::Ordering::Relaxed);
    drop(stop_w); // end of file on the stop pipe wakes the loop
    let stats = proxy.join().unwrap().unwrap();
    for (i, o) in outcomes.into_iter().enumerate() {
        assert!(o.is_ok(), "client {i} failed (see its panic above)");
    }
    assert_eq!(stats.accepted, 4);
    assert_eq!(stats.no_relay, 0);
    assert_eq!(stats.backends[0].bytes_to, 4 * (2 << 20));
    assert_eq!(stats.backends[0].bytes_from, 4 * (2 << 20));
}

#[test]
fn relays_every_byte_through_user_buffers() {
    relay_both_ways(false);
}

#[test]
fn relays_every_byte_through_splice_pipes() {
    relay_both_ways(true);
}
