//! The proxy relays every byte both ways, in order, and passes half-closes
//! on, with user-space buffers, with `--splice` pipes and on io_uring, on
//! loopback; an
//! idle connection is reset after the idle timeout, and a connection that
//! streams in bulk does not hold up another's small request. Each relay
//! mode passes on a message and its end arriving together, keeps many
//! small round trips going on one connection, and holds a backend's bulk
//! reply while the client does not read (back-pressure) without losing any.

use connlab_gateway::{proxy, Backend, Balancer, PolicyKind, ProxyConfig, ProxyIo};
use connlab_testkit::net::{bulk_server, loopback_listener, serve_each};
use connlab_testkit::{echo_server as echo_backend, pattern};
use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::mpsc;
use std::time::Duration;

fn relay_both_ways(io: ProxyIo) {
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
        io,
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
    relay_both_ways(ProxyIo::Copy);
}

#[test]
fn relays_every_byte_through_splice_pipes() {
    relay_both_ways(ProxyIo::Splice);
}

#[test]
fn relays_every_byte_through_io_uring() {
    relay_both_ways(ProxyIo::Uring);
}

/// A proxy in a thread: its address, and a stop that returns its stats.
struct Running {
    vip: SocketAddr,
    stop: Box<dyn FnOnce() -> proxy::ProxyStats>,
}

fn start_proxy(backend: SocketAddr, adjust: impl FnOnce(&mut ProxyConfig)) -> Running {
    start_proxy_on(&[backend], adjust)
}

/// A proxy in a thread in front of `backends`, round robin.
fn start_proxy_on(backends: &[SocketAddr], adjust: impl FnOnce(&mut ProxyConfig)) -> Running {
    let balancer = Balancer::new(
        PolicyKind::RoundRobin,
        backends
            .iter()
            .map(|&addr| Backend { addr, weight: 1 })
            .collect(),
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

fn idle_reset(io: ProxyIo) {
    // Issue 17: the proxy had no idle timeout; a silent client held its
    // connection (and the backend's) forever.
    let proxy = start_proxy(echo_backend(), |c| {
        c.idle_timeout = Duration::from_millis(300);
        c.io = io;
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

#[test]
fn an_idle_connection_is_reset_after_the_idle_timeout() {
    idle_reset(ProxyIo::Copy);
}

#[test]
fn an_idle_connection_is_reset_after_the_idle_timeout_on_io_uring() {
    idle_reset(ProxyIo::Uring);
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

fn streaming_and_small(io: ProxyIo) {
    // Issue 17: `pump` moved bytes for one pair until nothing could move,
    // so a pair whose backend and client keep up never gave up its turn.
    let proxy = start_proxy(stream_or_echo_backend(), |c| {
        c.turn_budget = 4 * 1024;
        c.io = io;
    });
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
    if io != ProxyIo::Uring {
        // io_uring has no turns: a pair is bounded by its bytes in flight.
        assert!(stats.turn_budget_hits > 0, "{stats:?}");
    }
}

#[test]
fn a_streaming_pair_does_not_starve_another_pairs_small_request() {
    streaming_and_small(ProxyIo::Copy);
}

#[test]
fn a_streaming_pair_does_not_starve_another_pairs_small_request_on_io_uring() {
    streaming_and_small(ProxyIo::Uring);
}

/// A backend that reads a request to its end, then answers `got N` and
/// closes at once, so the answer and the end reach the proxy together.
fn count_then_close_backend() -> SocketAddr {
    let listener = loopback_listener();
    let addr = listener.local_addr().unwrap();
    serve_each(listener, |mut conn| {
        let mut got = Vec::new();
        if conn.read_to_end(&mut got).is_ok() {
            let _ = conn.write_all(format!("got {}", got.len()).as_bytes());
        }
    });
    addr
}

fn message_and_end_together(io: ProxyIo) {
    // A short read is taken to mean "drained"; a FIN queued behind the
    // data is read only by the next call, so the relay must not stop
    // reading there (it would never see that end and the pair would hang).
    let proxy = start_proxy(count_then_close_backend(), |c| c.io = io);
    for i in 0..100usize {
        let mut c = TcpStream::connect(proxy.vip).unwrap();
        c.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        let msg = pattern(1 + i * 37, i as u8);
        c.write_all(&msg).unwrap();
        c.shutdown(Shutdown::Write).unwrap();
        let mut back = Vec::new();
        c.read_to_end(&mut back).unwrap();
        assert_eq!(
            back,
            format!("got {}", msg.len()).as_bytes(),
            "connection {i}"
        );
    }
    let stats = (proxy.stop)();
    assert_eq!(stats.accepted, 100);
}

#[test]
fn a_message_and_its_end_arriving_together_pass_through_user_buffers() {
    message_and_end_together(ProxyIo::Copy);
}

#[test]
fn a_message_and_its_end_arriving_together_pass_through_splice_pipes() {
    message_and_end_together(ProxyIo::Splice);
}

#[test]
fn a_message_and_its_end_arriving_together_pass_through_io_uring() {
    message_and_end_together(ProxyIo::Uring);
}

fn many_round_trips(io: ProxyIo) {
    many_round_trips_with(io, Duration::ZERO);
}

fn many_round_trips_with(io: ProxyIo, uring_min_wait: Duration) {
    let proxy = start_proxy(echo_backend(), |c| {
        c.io = io;
        c.uring_min_wait = uring_min_wait;
    });
    let mut c = TcpStream::connect(proxy.vip).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    c.set_nodelay(true).unwrap();
    for i in 0..2000usize {
        let msg = pattern(1 + i % 300, i as u8);
        c.write_all(&msg).unwrap();
        let mut back = vec![0u8; msg.len()];
        c.read_exact(&mut back).unwrap();
        assert!(back == msg, "round trip {i}");
    }
    c.shutdown(Shutdown::Write).unwrap();
    let mut rest = Vec::new();
    c.read_to_end(&mut rest).unwrap();
    assert!(rest.is_empty());
    (proxy.stop)();
}

#[test]
fn many_small_round_trips_through_user_buffers() {
    many_round_trips(ProxyIo::Copy);
}

#[test]
fn many_small_round_trips_through_splice_pipes() {
    many_round_trips(ProxyIo::Splice);
}

#[test]
fn many_small_round_trips_through_io_uring() {
    many_round_trips(ProxyIo::Uring);
}

#[test]
fn many_small_round_trips_through_io_uring_with_a_batch_wait() {
    // One request at a time never fills a batch: each turn ends at the
    // minimum wait, and every round trip still completes.
    many_round_trips_with(ProxyIo::Uring, Duration::from_micros(50));
}

fn held_reply(io: ProxyIo) {
    // The backend sends 8 MiB and half-closes at once; the client reads
    // nothing for a while, so the proxy's buffer and both sockets fill up.
    let n = 8 << 20;
    let proxy = start_proxy(bulk_server(n, 7), |c| c.io = io);
    let mut c = TcpStream::connect(proxy.vip).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let mut back = Vec::new();
    c.read_to_end(&mut back).unwrap();
    assert!(back == pattern(n, 7), "{} bytes back", back.len());
    drop(c);
    let stats = (proxy.stop)();
    assert_eq!(stats.backends[0].bytes_from, n as u64);
}

#[test]
fn a_held_bulk_reply_arrives_whole_through_user_buffers() {
    held_reply(ProxyIo::Copy);
}

#[test]
fn a_held_bulk_reply_arrives_whole_through_splice_pipes() {
    held_reply(ProxyIo::Splice);
}

#[test]
fn a_held_bulk_reply_arrives_whole_through_io_uring() {
    held_reply(ProxyIo::Uring);
}

/// An address nothing listens on: connects to it are refused.
fn refusing_address() -> SocketAddr {
    let l = loopback_listener();
    let addr = l.local_addr().unwrap();
    drop(l);
    addr
}

fn refused_backend(io: ProxyIo) {
    // One of two backends refuses: every connection still gets its echo
    // (a refused connect is retried on the other one).
    let dead = refusing_address();
    let proxy = start_proxy_on(&[dead, echo_backend()], |c| {
        c.io = io;
        // No health check takes the dead one out first: every second
        // connection meets the refusal itself.
        c.health_interval = Duration::from_secs(3600);
        c.health_fails = 100;
    });
    for i in 0..10u8 {
        let mut c = TcpStream::connect(proxy.vip).unwrap();
        c.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        let msg = pattern(1000, i);
        c.write_all(&msg).unwrap();
        c.shutdown(Shutdown::Write).unwrap();
        let mut back = Vec::new();
        c.read_to_end(&mut back).unwrap();
        assert!(back == msg, "connection {i}: {} bytes back", back.len());
    }
    let stats = (proxy.stop)();
    assert_eq!(stats.accepted, 10);
    assert!(stats.backends[0].connect_errors >= 1, "{stats:?}");
    assert_eq!(stats.backends[1].connections, 10, "{stats:?}");
}

#[test]
fn a_refused_connect_is_retried_on_the_next_backend_through_user_buffers() {
    refused_backend(ProxyIo::Copy);
}

#[test]
fn a_refused_connect_is_retried_on_the_next_backend_on_io_uring() {
    refused_backend(ProxyIo::Uring);
}

fn only_backend_refuses(io: ProxyIo) {
    // The only backend refuses: the client's connection is ended (reset),
    // and the proxy goes on serving.
    let proxy = start_proxy_on(&[refusing_address()], |c| {
        c.io = io;
        c.health_interval = Duration::from_secs(3600);
        c.health_fails = 100;
    });
    for _ in 0..3 {
        let mut c = match TcpStream::connect(proxy.vip) {
            Ok(c) => c,
            // The proxy accepts and resets at once; on a busy machine the
            // reset can reach the socket before connect(2) returns, which
            // then reports it (CI saw this): the same outcome.
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => continue,
            Err(e) => panic!("connecting to the proxy: {e}"),
        };
        c.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        let mut buf = [0u8; 16];
        let outcome = c.read(&mut buf).map_err(|e| e.kind());
        assert!(
            matches!(outcome, Ok(0) | Err(std::io::ErrorKind::ConnectionReset)),
            "{outcome:?}"
        );
    }
    let stats = (proxy.stop)();
    assert_eq!(stats.accepted, 3);
    assert_eq!(stats.backends[0].connect_errors, 3, "{stats:?}");
}

#[test]
fn a_client_is_reset_when_its_only_backend_refuses_through_user_buffers() {
    only_backend_refuses(ProxyIo::Copy);
}

#[test]
fn a_client_is_reset_when_its_only_backend_refuses_on_io_uring() {
    only_backend_refuses(ProxyIo::Uring);
}

fn many_connections(io: ProxyIo) {
    // 300 connections open at once, each with a few round trips, then a
    // half-close answered by the backend's end.
    let proxy = start_proxy(echo_backend(), |c| c.io = io);
    let vip = proxy.vip;
    let mut conns: Vec<TcpStream> = (0..300)
        .map(|_| {
            let c = TcpStream::connect(vip).unwrap();
            c.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
            c
        })
        .collect();
    for round in 0..3usize {
        for (i, c) in conns.iter_mut().enumerate() {
            c.write_all(&pattern(100 + i, (i + round) as u8)).unwrap();
        }
        for (i, c) in conns.iter_mut().enumerate() {
            let mut back = vec![0u8; 100 + i];
            c.read_exact(&mut back).unwrap();
            assert!(back == pattern(100 + i, (i + round) as u8), "conn {i}");
        }
    }
    for c in &conns {
        c.shutdown(Shutdown::Write).unwrap();
    }
    for (i, c) in conns.iter_mut().enumerate() {
        let mut rest = Vec::new();
        c.read_to_end(&mut rest).unwrap();
        assert!(rest.is_empty(), "conn {i}");
    }
    let stats = (proxy.stop)();
    assert_eq!(stats.accepted, 300);
    let each: u64 = (0..300u64).map(|i| 3 * (100 + i)).sum();
    assert_eq!(stats.backends[0].bytes_to, each);
    assert_eq!(stats.backends[0].bytes_from, each);
}

#[test]
fn many_connections_at_once_through_user_buffers() {
    many_connections(ProxyIo::Copy);
}

#[test]
fn many_connections_at_once_on_io_uring() {
    many_connections(ProxyIo::Uring);
}

/// A backend that reads one byte and then closes with a reset.
fn resetting_backend() -> SocketAddr {
    let listener = loopback_listener();
    let addr = listener.local_addr().unwrap();
    serve_each(listener, |mut conn| {
        let mut one = [0u8; 1];
        let _ = conn.read_exact(&mut one);
        let _ = socket2::SockRef::from(&conn).set_linger(Some(Duration::ZERO));
    });
    addr
}

fn backend_reset(io: ProxyIo) {
    // The backend resets: the client sees its connection end (as a reset,
    // or an end when the reset comes while nothing is pending), never a hang.
    let proxy = start_proxy(resetting_backend(), |c| c.io = io);
    let mut c = TcpStream::connect(proxy.vip).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    c.write_all(b"x").unwrap();
    let mut buf = [0u8; 16];
    let outcome = c.read(&mut buf).map_err(|e| e.kind());
    assert!(
        matches!(outcome, Ok(0) | Err(std::io::ErrorKind::ConnectionReset)),
        "{outcome:?}"
    );
    // The proxy still serves others.
    (proxy.stop)();
}

#[test]
fn a_backend_reset_ends_the_client_connection_through_user_buffers() {
    backend_reset(ProxyIo::Copy);
}

#[test]
fn a_backend_reset_ends_the_client_connection_on_io_uring() {
    backend_reset(ProxyIo::Uring);
}

fn many_held_replies(io: ProxyIo) {
    // 40 clients each get 256 KiB they read only after a while, with 64 KiB
    // held per direction: together more than the io_uring relay's first
    // buffers, so receives run out of buffers and must come back.
    let n = 256 << 10;
    let proxy = start_proxy(bulk_server(n, 3), |c| {
        c.io = io;
        c.buffer = 64 << 10;
    });
    let conns: Vec<TcpStream> = (0..40)
        .map(|_| {
            let c = TcpStream::connect(proxy.vip).unwrap();
            c.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
            c
        })
        .collect();
    std::thread::sleep(Duration::from_millis(300));
    let readers: Vec<_> = conns
        .into_iter()
        .map(|mut c| {
            std::thread::spawn(move || {
                let mut back = Vec::new();
                c.read_to_end(&mut back).map(|_| back)
            })
        })
        .collect();
    let backs: Vec<_> = readers.into_iter().map(|r| r.join().unwrap()).collect();
    let stats = (proxy.stop)();
    for (i, back) in backs.into_iter().enumerate() {
        let back = back.unwrap();
        assert!(
            back == pattern(n, 3),
            "connection {i}: {} bytes",
            back.len()
        );
    }
    assert_eq!(stats.backends[0].bytes_from, 40 * n as u64);
}

#[test]
fn many_held_replies_arrive_whole_through_user_buffers() {
    many_held_replies(ProxyIo::Copy);
}

#[test]
fn many_held_replies_arrive_whole_on_io_uring() {
    many_held_replies(ProxyIo::Uring);
}
