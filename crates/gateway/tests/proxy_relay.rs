//! The proxy relays every byte both ways, in order, and passes half-closes
//! on, with user-space buffers and with `--splice` pipes, on loopback; an
//! idle connection is reset after the idle timeout, and a connection that
//! streams in bulk does not hold up another's small request.

use connlab_gateway::{proxy, Backend, Balancer, PolicyKind, ProxyConfig};
use connlab_testkit::net::{loopback_listener, serve_each};
use connlab_testkit::{echo_server as echo_backend, pattern};
use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::mpsc;
use std::time::Duration;

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

/// A proxy in a thread: its address, and a stop that returns its stats.
struct Running {
    vip: SocketAddr,
    stop: Box<dyn FnOnce() -> proxy::ProxyStats>,
}

fn start_proxy(backend: SocketAddr, adjust: impl FnOnce(&mut ProxyConfig)) -> Running {
    let balancer = Balancer::new(
        PolicyKind::RoundRobin,
        vec![Backend {
            addr: backend,
            weight: 1,
        }],
    )
    .unwrap();
    let mut config = ProxyConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        ..ProxyConfig::default()
    };
    adjust(&mut config);
    let (stop_r, stop_w) = std::io::pipe().unwrap();
    let (addr_tx, addr_rx) = mpsc::channel();
    let stopped = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let stop_flag = stopped.clone();
    let thread = std::thread::spawn(move || {
        proxy::run(
            &config,
            balancer,
            stop_r.as_raw_fd(),
            || stop_flag.load(std::sync::atomic::Ordering::Relaxed),
            |a| addr_tx.send(a).unwrap(),
        )
    });
    let vip = addr_rx.recv_timeout(Duration::from_secs(10)).unwrap();
    Running {
        vip,
        stop: Box::new(move || {
            stopped.store(true, std::sync::atomic::Ordering::Relaxed);
            drop(stop_w);
            thread.join().unwrap().unwrap()
        }),
    }
}

#[test]
fn an_idle_connection_is_reset_after_the_idle_timeout() {
    // Issue 17: the proxy had no idle timeout; a silent client held its
    // connection (and the backend's) forever.
    let proxy = start_proxy(echo_backend(), |c| {
        c.idle_timeout = Duration::from_millis(300)
    });
    let mut idle = TcpStream::connect(proxy.vip).unwrap();
    idle.set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let mut buf = [0u8; 16];
    let outcome = idle.read(&mut buf).map_err(|e| e.kind());
    assert!(
        matches!(outcome, Ok(0) | Err(std::io::ErrorKind::ConnectionReset)),
        "the idle connection was not ended: {outcome:?}"
    );
    // A busy connection is not idle: it still relays.
    let mut busy = TcpStream::connect(proxy.vip).unwrap();
    busy.set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    busy.write_all(b"ping").unwrap();
    let mut back = [0u8; 4];
    busy.read_exact(&mut back).unwrap();
    assert_eq!(&back, b"ping");
    let stats = (proxy.stop)();
    assert!(stats.idle_closed >= 1, "{stats:?}");
}

/// A backend: a connection whose first byte is `S` gets an endless stream
/// (until the peer goes); any other first byte is echoed with the rest.
fn stream_or_echo_backend() -> SocketAddr {
    let listener = loopback_listener();
    let addr = listener.local_addr().unwrap();
    serve_each(listener, |mut conn| {
        let mut first = [0u8; 1];
        if conn.read_exact(&mut first).is_err() {
            return;
        }
        if first[0] == b'S' {
            let chunk = vec![b's'; 64 * 1024];
            while conn.write_all(&chunk).is_ok() {}
            return;
        }
        let mut out = conn.try_clone().unwrap();
        let _ = out.write_all(&first);
        let _ = std::io::copy(&mut conn, &mut out);
        let _ = out.shutdown(Shutdown::Write);
    });
    addr
}

#[test]
fn a_streaming_pair_does_not_starve_another_pairs_small_request() {
    // Issue 17: `pump` moved bytes for one pair until nothing could move,
    // so a pair whose backend and client keep up never gave up its turn.
    let proxy = start_proxy(stream_or_echo_backend(), |c| c.turn_budget = 4 * 1024);
    let mut bulk = TcpStream::connect(proxy.vip).unwrap();
    bulk.set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    bulk.write_all(b"S").unwrap();
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (started_tx, started_rx) = mpsc::channel();
    let reader = {
        let done = done.clone();
        std::thread::spawn(move || {
            let mut buf = vec![0u8; 256 * 1024];
            let mut total = 0u64;
            let mut told = false;
            while !done.load(std::sync::atomic::Ordering::Relaxed) {
                match bulk.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => total += n as u64,
                }
                if !told && total > 4 << 20 {
                    told = true;
                    let _ = started_tx.send(());
                }
            }
            total
        })
    };
    // The bulk stream is well under way (several budgets) ...
    started_rx.recv_timeout(Duration::from_secs(30)).unwrap();
    // ... and a small request still gets its answer.
    let mut small = TcpStream::connect(proxy.vip).unwrap();
    small
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    small.write_all(b"Ehello").unwrap();
    small.shutdown(Shutdown::Write).unwrap();
    let mut back = Vec::new();
    small.read_to_end(&mut back).unwrap();
    done.store(true, std::sync::atomic::Ordering::Relaxed);
    let streamed = reader.join().unwrap();
    let stats = (proxy.stop)();
    assert_eq!(back, b"Ehello");
    assert!(streamed > 4 << 20);
    assert!(stats.turn_budget_hits > 0, "{stats:?}");
}
