//! `--connection-per-request`: HTTP without keep-alive, as the clients of
//! the load-balancing paper's era: each of `connections` workers repeats
//! connect, `GET` with `Connection: close`, read the response, close; so a
//! gateway, conntrack or NAT sees one flow per request. Closed loop by
//! default; with a rate, each worker paces its share on a fixed schedule
//! (starting late when the previous request ran over). Service latency
//! runs from the connect to the end of the response: the connection set-up
//! is part of each request's cost here.
//!
//! The workers fill the same outcome structures as the keep-alive driver,
//! so the result has the same schema. Each keeps its own latency windows
//! (added up at the end) and a share of the latency sample (concatenated
//! worker by worker, then thinned to the cap).

use crate::checks::{thin, Systematic, Windows, LATENCY_SAMPLES};
use crate::connect::Opened;
use crate::reader::ReaderOutcome;
use crate::request::{class_histograms, size_class};
use crate::workload::{Progress, Rate, Workload};
use crate::writer::WriterOutcome;
use connlab_measure::LatencyHistogram;
use connlab_os::{CpuTimes, Shutdown};
use connlab_proto::{encode_http_get, ClientSession, Protocol};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};

/// What one worker measured.
struct WorkerOut {
    rd: ReaderOutcome,
    sent: u64,
    measured_sent: u64,
    bytes_sent: u64,
}

/// Runs the workers; returns the outcomes the result is assembled from and
/// the wall time.
pub(crate) fn run(
    w: &Workload,
    shutdown: &Shutdown,
    progress: &Progress,
) -> (Opened, WriterOutcome, ReaderOutcome, CpuTimes, Duration) {
    let workers = w.connections.max(1);
    let cpu0 = CpuTimes::self_and_children();
    let start = Instant::now();
    progress.measuring.store(true, Relaxed);
    let outs: Vec<WorkerOut> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..workers)
            .map(|i| s.spawn(move || worker(w, i, workers, start, shutdown, progress)))
            .collect();
        handles.into_iter().filter_map(|h| h.join().ok()).collect()
    });
    let wall = start.elapsed();
    let mut rd = ReaderOutcome::default();
    if w.files.is_some() {
        rd.classes = class_histograms();
    }
    let mut wr = WriterOutcome {
        send_lag: LatencyHistogram::new(),
        deviation: None,
        ..WriterOutcome::default()
    };
    let mut samples = Vec::new();
    for o in outs {
        rd.windows.add(&o.rd.windows);
        samples.extend(o.rd.latency_sample.into_values());
        rd.service.merge(&o.rd.service);
        rd.corrected.merge(&o.rd.corrected);
        for (a, b) in rd.classes.iter_mut().zip(&o.rd.classes) {
            a.merge(b);
        }
        rd.completed += o.rd.completed;
        rd.measured_completed += o.rd.measured_completed;
        rd.bytes_received += o.rd.bytes_received;
        for (k, v) in o.rd.errors {
            *rd.errors.entry(k).or_default() += v;
        }
        for (k, v) in o.rd.warmup_errors {
            *rd.warmup_errors.entry(k).or_default() += v;
        }
        wr.sent += o.sent;
        wr.measured_sent += o.measured_sent;
        wr.bytes_sent += o.bytes_sent;
    }
    rd.latency_sample = Systematic::from_values(thin(samples, LATENCY_SAMPLES));
    rd.closed_loop_sent = 0;
    rd.interrupted = shutdown.requested();
    rd.cpu = CpuTimes::self_and_children().since(&cpu0);
    let opened = Opened {
        fds: Vec::new(),
        failed: 0,
        first_error: None,
        elapsed: Duration::ZERO,
        hit_fd_limit: false,
    };
    (
        opened,
        wr,
        rd,
        CpuTimes::self_and_children().since(&cpu0),
        wall,
    )
}

fn worker(
    w: &Workload,
    index: usize,
    workers: usize,
    start: Instant,
    shutdown: &Shutdown,
    progress: &Progress,
) -> WorkerOut {
    let mut out = WorkerOut {
        rd: ReaderOutcome::default(),
        sent: 0,
        measured_sent: 0,
        bytes_sent: 0,
    };
    if w.files.is_some() {
        out.rd.classes = class_histograms();
    }
    let end = w.warmup + w.duration;
    out.rd.windows = Windows::new(w.warmup.as_nanos() as u64, end.as_nanos() as u64);
    let expected = match w.rate {
        Rate::PerSecond(r) => (r / workers as f64 * w.duration.as_secs_f64()) as u64,
        Rate::Max { .. } => 0,
    };
    out.rd.latency_sample = Systematic::new(LATENCY_SAMPLES.div_ceil(workers).max(16), expected);
    // Open loop: this worker's share of the rate, phases spread over workers.
    let interval = match w.rate {
        Rate::PerSecond(r) => Some(Duration::from_secs_f64(workers as f64 / r)),
        Rate::Max { .. } => None,
    };
    let phase = interval.map_or(Duration::ZERO, |i| i.mul_f64(index as f64 / workers as f64));
    let salt = u64::from(w.shard.index) << 40;
    let mut buf = vec![0u8; 64 * 1024];
    let mut request = Vec::with_capacity(256);
    let mut k: u64 = 0;
    loop {
        let scheduled = match interval {
            Some(i) => phase + i.mul_f64(k as f64),
            None => start.elapsed(),
        };
        if scheduled >= end || shutdown.requested() {
            break;
        }
        if let Some(wait) = scheduled.checked_sub(start.elapsed()) {
            std::thread::sleep(wait);
        }
        let seq = (index as u64 + k * workers as u64) as u32;
        k += 1;
        let (path, class) = match &w.files {
            Some(f) => {
                let i = f.mix.entry(seq, salt);
                (f.mix.path(i), Some(size_class(f.mix.size(i))))
            }
            None => (w.path.as_str(), None),
        };
        request.clear();
        encode_http_get(path, false, &mut request);
        let measured = scheduled >= w.warmup;
        out.sent += 1;
        out.measured_sent += u64::from(measured);
        progress.sent.fetch_add(1, Relaxed);
        let t0 = start.elapsed();
        let source =
            (!w.source_addrs.is_empty()).then(|| w.source_addrs[index % w.source_addrs.len()]);
        match one_request(w, source, &request, &mut buf) {
            Ok(received) => {
                let done = start.elapsed();
                out.bytes_sent += request.len() as u64;
                out.rd.bytes_received += received;
                out.rd.completed += 1;
                progress.completed.fetch_add(1, Relaxed);
                if measured {
                    let service = done.saturating_sub(t0).as_nanos() as u64;
                    out.rd.service.record(service);
                    out.rd
                        .corrected
                        .record(done.saturating_sub(scheduled).as_nanos() as u64);
                    out.rd.measured_completed += 1;
                    out.rd.windows.record(scheduled.as_nanos() as u64, service);
                    out.rd.latency_sample.offer(service as f64 / 1e3);
                    if let Some(c) = class {
                        out.rd.classes[c].record(service);
                    }
                }
            }
            Err(kind) => {
                let window = if measured {
                    &mut out.rd.errors
                } else {
                    &mut out.rd.warmup_errors
                };
                *window.entry(kind).or_default() += 1;
                progress.errors.fetch_add(1, Relaxed);
            }
        }
    }
    out
}

/// One connect, request, response, close; the bytes received, or the kind
/// of error.
fn one_request(
    w: &Workload,
    source: Option<std::net::IpAddr>,
    request: &[u8],
    buf: &mut [u8],
) -> Result<u64, &'static str> {
    // EADDRNOTAVAIL: every local port is taken (mostly by TIME_WAIT).
    let kind = |e: std::io::Error| {
        if e.raw_os_error() == Some(libc::EADDRNOTAVAIL) {
            "no_local_port"
        } else {
            "connect_failed"
        }
    };
    let mut s: TcpStream = match source {
        None => TcpStream::connect_timeout(&w.target, Duration::from_secs(5)).map_err(kind)?,
        Some(ip) => {
            let sock = socket2::Socket::new(
                socket2::Domain::for_address(w.target),
                socket2::Type::STREAM,
                None,
            )
            .map_err(kind)?;
            sock.bind(&std::net::SocketAddr::new(ip, 0).into())
                .map_err(kind)?;
            sock.connect_timeout(&w.target.into(), Duration::from_secs(5))
                .map_err(kind)?;
            sock.into()
        }
    };
    let _ = s.set_nodelay(true);
    let _ = s.set_read_timeout(Some(w.drain_timeout.max(Duration::from_secs(1))));
    s.write_all(request).map_err(|_| "send_failed")?;
    let mut session = ClientSession::new(Protocol::Http, u32::MAX);
    let mut received = 0u64;
    let mut done = None;
    while done.is_none() {
        let n = match s.read(buf) {
            Ok(0) => {
                session.finish().map_err(|_| "protocol")?;
                return Err("unexpected_response");
            }
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                return Err("timeout")
            }
            Err(_) => return Err("reset"),
        };
        received += n as u64;
        session
            .feed(&buf[..n], &mut |r| done = Some(r.status))
            .map_err(|_| "protocol")?;
    }
    match done.flatten() {
        Some(200) => Ok(received),
        _ => Err("http_status"),
    }
}
