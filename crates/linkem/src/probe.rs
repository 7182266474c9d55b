//! Measurements through an emulated link, on sockets the caller created in
//! the hosts' namespaces: UDP echo round trips, one-way UDP loss, TCP bulk
//! throughput.

use crate::LinkemError;
use serde::Serialize;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Round-trip times of a UDP echo run, microseconds.
#[derive(Clone, Debug, Default, Serialize)]
pub struct RttSummary {
    /// Probes sent.
    pub sent: u64,
    /// Probes answered in time.
    pub answered: u64,
    /// Smallest.
    pub min_us: f64,
    /// Median.
    pub p50_us: f64,
    /// Mean.
    pub mean_us: f64,
    /// 90th percentile.
    pub p90_us: f64,
    /// 99th percentile.
    pub p99_us: f64,
    /// Largest.
    pub max_us: f64,
}

fn udp_err(what: &str) -> impl Fn(std::io::Error) -> LinkemError + '_ {
    move |e| LinkemError::io(what, e)
}

/// Echoes every datagram on `sock` back to its sender until `stop` is set.
pub fn udp_echo(sock: &UdpSocket, stop: &AtomicBool) -> Result<u64, LinkemError> {
    sock.set_read_timeout(Some(Duration::from_millis(50)))
        .map_err(udp_err("setting the echo timeout"))?;
    let mut buf = [0u8; 2048];
    let mut n = 0;
    while !stop.load(Ordering::Relaxed) {
        match sock.recv_from(&mut buf) {
            Ok((len, from)) => {
                let _ = sock.send_to(&buf[..len], from);
                n += 1;
            }
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            Err(e) => return Err(LinkemError::io("echo receive", e)),
        }
    }
    Ok(n)
}

/// Sends `count` probes of `size` bytes to an echo at `to`, one at a time
/// `interval` apart, each waiting up to `timeout` for its answer.
pub fn udp_rtt(
    sock: &UdpSocket,
    to: SocketAddr,
    count: u64,
    size: usize,
    interval: Duration,
    timeout: Duration,
) -> Result<RttSummary, LinkemError> {
    let mut out = vec![0u8; size.max(8)];
    let mut buf = [0u8; 2048];
    let mut rtts = Vec::with_capacity(count as usize);
    for seq in 0..count {
        out[..8].copy_from_slice(&seq.to_be_bytes());
        let t0 = Instant::now();
        sock.send_to(&out, to).map_err(udp_err("probe send"))?;
        let deadline = t0 + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            sock.set_read_timeout(Some(left))
                .map_err(udp_err("setting the probe timeout"))?;
            match sock.recv_from(&mut buf) {
                Ok((len, _)) if len >= 8 && buf[..8] == seq.to_be_bytes() => {
                    rtts.push(t0.elapsed().as_nanos() as f64 / 1000.0);
                    break;
                }
                // A late answer to an earlier probe.
                Ok(_) => {}
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) =>
                {
                    break
                }
                Err(e) => return Err(LinkemError::io("probe receive", e)),
            }
        }
        let next = t0 + interval;
        if let Some(d) = next.checked_duration_since(Instant::now()) {
            std::thread::sleep(d);
        }
    }
    Ok(summarize(count, rtts))
}

fn summarize(sent: u64, mut v: Vec<f64>) -> RttSummary {
    if v.is_empty() {
        return RttSummary {
            sent,
            ..RttSummary::default()
        };
    }
    v.sort_by(f64::total_cmp);
    let q = |p: f64| v[(((v.len() as f64) * p).ceil() as usize).clamp(1, v.len()) - 1];
    RttSummary {
        sent,
        answered: v.len() as u64,
        min_us: v[0],
        p50_us: q(0.5),
        mean_us: v.iter().sum::<f64>() / v.len() as f64,
        p90_us: q(0.9),
        p99_us: q(0.99),
        max_us: v[v.len() - 1],
    }
}

/// A one-way UDP loss run.
#[derive(Clone, Debug, Default, Serialize)]
pub struct LossRun {
    /// Datagrams sent.
    pub sent: u64,
    /// Datagrams received.
    pub received: u64,
    /// Datagrams received out of order (sequence below the highest seen).
    pub reordered: u64,
    /// `1 - received / sent`.
    pub loss: f64,
    /// Datagrams the receiving socket dropped because its buffer was full
    /// (the receiver was late; loss outside the link model); `None` when the
    /// kernel does not report it.
    pub dropped_at_receiver: Option<u64>,
}

/// The receive buffer asked for the loss run's receiver: about 10,000
/// datagrams, so a receiving thread that waits tens of milliseconds for a CPU
/// loses nothing.
const LOSS_RCVBUF_BYTES: libc::c_int = 8 << 20;

/// Raises `sock`'s receive buffer to `bytes`, past `rmem_max` when allowed
/// (root); best effort: a smaller buffer only risks drops the run reports.
fn raise_receive_buffer(sock: &UdpSocket, bytes: libc::c_int) {
    use std::os::fd::AsRawFd;
    for opt in [libc::SO_RCVBUFFORCE, libc::SO_RCVBUF] {
        // SAFETY: a valid socket descriptor and a pointer to a c_int of the
        // length given.
        let rc = unsafe {
            libc::setsockopt(
                sock.as_raw_fd(),
                libc::SOL_SOCKET,
                opt,
                (&bytes as *const libc::c_int).cast(),
                size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        if rc == 0 {
            return;
        }
    }
}

/// Packets `sock` dropped so far (the kernel's `sk_drops`, from `SO_MEMINFO`).
fn socket_drops(sock: &UdpSocket) -> Option<u64> {
    use std::os::fd::AsRawFd;
    let mut info = [0u32; libc::SK_MEMINFO_DROPS as usize + 1];
    let mut len = size_of_val(&info) as libc::socklen_t;
    // SAFETY: a valid socket descriptor; the kernel writes at most `len`
    // bytes into `info` and stores the length written in `len`.
    let rc = unsafe {
        libc::getsockopt(
            sock.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_MEMINFO,
            info.as_mut_ptr().cast(),
            &mut len,
        )
    };
    let needed = (libc::SK_MEMINFO_DROPS as usize + 1) * size_of::<u32>();
    (rc == 0 && len as usize >= needed).then(|| info[libc::SK_MEMINFO_DROPS as usize] as u64)
}

/// Sends `count` numbered datagrams from `tx` to `rx` (bound where `to`
/// points), `per_ms` per millisecond, and counts what arrives.
pub fn udp_loss(
    tx: &UdpSocket,
    rx: &UdpSocket,
    to: SocketAddr,
    count: u64,
    per_ms: u64,
) -> Result<LossRun, LinkemError> {
    let done = AtomicBool::new(false);
    raise_receive_buffer(rx, LOSS_RCVBUF_BYTES);
    let drops_before = socket_drops(rx);
    let (received, reordered) = std::thread::scope(|s| {
        let receiver = s.spawn(|| -> Result<(u64, u64), LinkemError> {
            rx.set_read_timeout(Some(Duration::from_millis(50)))
                .map_err(udp_err("setting the receive timeout"))?;
            let mut buf = [0u8; 2048];
            let (mut got, mut reordered, mut highest) = (0u64, 0u64, None::<u64>);
            let mut quiet_since = None::<Instant>;
            loop {
                match rx.recv_from(&mut buf) {
                    Ok((len, _)) if len >= 8 => {
                        let mut seq = [0u8; 8];
                        seq.copy_from_slice(&buf[..8]);
                        let seq = u64::from_be_bytes(seq);
                        got += 1;
                        if highest.is_some_and(|h| seq < h) {
                            reordered += 1;
                        }
                        highest = highest.max(Some(seq));
                        quiet_since = None;
                    }
                    Ok(_) => {}
                    Err(e)
                        if matches!(
                            e.kind(),
                            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                        ) =>
                    {
                        // After the sender is done, stop once 500 ms pass quietly.
                        if done.load(Ordering::Relaxed) {
                            let q = *quiet_since.get_or_insert_with(Instant::now);
                            if q.elapsed() > Duration::from_millis(500) {
                                return Ok((got, reordered));
                            }
                        }
                    }
                    Err(e) => return Err(LinkemError::io("loss receive", e)),
                }
            }
        });
        let sent = (|| -> Result<(), LinkemError> {
            let mut buf = [0u8; 64];
            let start = Instant::now();
            for seq in 0..count {
                buf[..8].copy_from_slice(&seq.to_be_bytes());
                tx.send_to(&buf, to).map_err(udp_err("loss send"))?;
                if per_ms > 0 && (seq + 1) % per_ms == 0 {
                    let next = start + Duration::from_millis((seq + 1) / per_ms);
                    if let Some(d) = next.checked_duration_since(Instant::now()) {
                        std::thread::sleep(d);
                    }
                }
            }
            Ok(())
        })();
        done.store(true, Ordering::Relaxed);
        let r = receiver
            .join()
            .unwrap_or_else(|p| std::panic::resume_unwind(p));
        sent.and(r)
    })?;
    Ok(LossRun {
        sent: count,
        received,
        reordered,
        loss: 1.0 - received as f64 / count.max(1) as f64,
        dropped_at_receiver: drops_before
            .zip(socket_drops(rx))
            .map(|(b, a)| a.saturating_sub(b)),
    })
}

/// A TCP bulk transfer.
#[derive(Clone, Debug, Default, Serialize)]
pub struct BulkRun {
    /// Bytes received in the measured interval.
    pub bytes: u64,
    /// Length of the measured interval.
    pub seconds: f64,
    /// Goodput over the measured interval.
    pub gbit_s: f64,
}

/// Sends as fast as TCP allows on `tx` for `warmup + duration` while
/// `rx_listener`'s accepted connection counts bytes; goodput is measured
/// after `warmup` (slow start excluded). `tx` must already be connected to
/// the listener.
pub fn tcp_bulk(
    tx: TcpStream,
    rx_listener: &TcpListener,
    warmup: Duration,
    duration: Duration,
) -> Result<BulkRun, LinkemError> {
    let (mut rx, _) = rx_listener
        .accept()
        .map_err(|e| LinkemError::io("accepting the bulk connection", e))?;
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        let sender = s.spawn(|| {
            let mut tx = tx;
            let chunk = vec![0x5au8; 256 * 1024];
            while !stop.load(Ordering::Relaxed) {
                if tx.write_all(&chunk).is_err() {
                    break;
                }
            }
            let _ = tx.shutdown(std::net::Shutdown::Write);
        });
        let mut buf = vec![0u8; 256 * 1024];
        let start = Instant::now();
        let measure_from = start + warmup;
        let end = measure_from + duration;
        let mut bytes = 0u64;
        let mut measuring = None::<Instant>;
        rx.set_read_timeout(Some(Duration::from_millis(200)))
            .map_err(|e| LinkemError::io("setting the bulk timeout", e))?;
        loop {
            let now = Instant::now();
            if now >= end {
                break;
            }
            if measuring.is_none() && now >= measure_from {
                measuring = Some(now);
            }
            match rx.read(&mut buf) {
                Ok(0) => break,
                Ok(n) if measuring.is_some() => bytes += n as u64,
                Ok(_) => {}
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) => {}
                Err(e) => {
                    stop.store(true, Ordering::Relaxed);
                    return Err(LinkemError::io("bulk receive", e));
                }
            }
        }
        let seconds = measuring.map_or(0.0, |t| t.elapsed().as_secs_f64());
        stop.store(true, Ordering::Relaxed);
        // Unblock a sender stuck in write: close our end.
        let _ = rx.shutdown(std::net::Shutdown::Both);
        let _ = sender.join();
        Ok(BulkRun {
            bytes,
            seconds,
            gbit_s: if seconds > 0.0 {
                bytes as f64 * 8.0 / seconds / 1e9
            } else {
                0.0
            },
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles() {
        let s = summarize(10, (1..=10).map(f64::from).collect());
        assert_eq!(s.answered, 10);
        assert_eq!(s.min_us, 1.0);
        assert_eq!(s.p50_us, 5.0);
        assert_eq!(s.p90_us, 9.0);
        assert_eq!(s.max_us, 10.0);
        assert_eq!(summarize(3, vec![]).answered, 0);
    }

    #[test]
    fn loopback_echo_and_loss_and_bulk() {
        let echo = UdpSocket::bind("127.0.0.1:0").unwrap();
        let addr = echo.local_addr().unwrap();
        let stop = AtomicBool::new(false);
        std::thread::scope(|s| {
            s.spawn(|| udp_echo(&echo, &stop).unwrap());
            let c = UdpSocket::bind("127.0.0.1:0").unwrap();
            let r = udp_rtt(&c, addr, 5, 64, Duration::ZERO, Duration::from_secs(1)).unwrap();
            stop.store(true, Ordering::Relaxed);
            assert_eq!(r.answered, 5);
        });
        let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let l = udp_loss(&tx, &rx, rx.local_addr().unwrap(), 200, 50).unwrap();
        assert_eq!(l.received, 200);
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let tx = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let b = tcp_bulk(
            tx,
            &listener,
            Duration::from_millis(50),
            Duration::from_millis(200),
        )
        .unwrap();
        assert!(b.bytes > 0 && b.gbit_s > 0.0);
    }
}
