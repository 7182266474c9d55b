//! Hostile clients of the soak, raw sockets against the front ends:
//! slowloris (partial HTTP heads, one more header line now and then),
//! garbage (random bytes, then read whatever comes back) and never-read
//! (pipelined requests for large responses, never reading one byte). Each
//! kind runs in its own thread until told to stop, and counts what happened.

use serde::Serialize;
use std::collections::BTreeMap;
use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

/// Counters of one kind of hostile client.
#[derive(Default)]
struct Counters {
    connects: AtomicU64,
    connect_failed: AtomicU64,
    closed_by_peer: AtomicU64,
    bytes_sent: AtomicU64,
    replies: AtomicU64,
    no_reply: AtomicU64,
}

/// What one kind of hostile client did (against one target, or in total).
#[derive(Serialize, Clone, Debug, Default)]
pub(super) struct HostileCounts {
    /// Connections opened.
    pub(super) connects: u64,
    /// Connects that failed (refused, timed out: a front end stopped or down).
    pub(super) connect_failed: u64,
    /// Connections the far end closed or reset (a timeout or limit at work).
    pub(super) closed_by_peer: u64,
    /// Bytes written.
    pub(super) bytes_sent: u64,
    /// garbage: connections that got bytes back (an error reply).
    pub(super) replies: u64,
    /// garbage: connections neither answered nor closed within 3 s.
    pub(super) no_reply: u64,
}

impl HostileCounts {
    fn add(&mut self, o: &HostileCounts) {
        self.connects += o.connects;
        self.connect_failed += o.connect_failed;
        self.closed_by_peer += o.closed_by_peer;
        self.bytes_sent += o.bytes_sent;
        self.replies += o.replies;
        self.no_reply += o.no_reply;
    }
}

/// One kind of hostile client: its totals and its counts per target.
#[derive(Serialize, Clone, Debug, Default)]
pub(super) struct HostileSummary {
    #[serde(flatten)]
    pub(super) total: HostileCounts,
    /// Per target (gateway, singleip, singleip-nodes).
    pub(super) by_target: BTreeMap<String, HostileCounts>,
}

impl Counters {
    fn counts(&self) -> HostileCounts {
        HostileCounts {
            connects: self.connects.load(Relaxed),
            connect_failed: self.connect_failed.load(Relaxed),
            closed_by_peer: self.closed_by_peer.load(Relaxed),
            bytes_sent: self.bytes_sent.load(Relaxed),
            replies: self.replies.load(Relaxed),
            no_reply: self.no_reply.load(Relaxed),
        }
    }
}

/// Which hostile client.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Slowloris,
    Garbage,
    NeverRead,
}

/// All hostile clients of one fault phase: a thread per kind and target.
pub(super) struct Hostile {
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
    counters: Vec<(Kind, String, Arc<Counters>)>,
}

/// Their counts at the end.
#[derive(Serialize, Clone, Debug, Default)]
pub(super) struct HostileReport {
    /// Partial HTTP heads, a header line every 500 ms.
    pub(super) slowloris: HostileSummary,
    /// Random bytes (HTTP front ends and the single-IP node port).
    pub(super) garbage: HostileSummary,
    /// Pipelined GETs of 1 MiB responses, never read.
    pub(super) never_read: HostileSummary,
}

/// How many connections each kind holds per target.
#[derive(Clone, Copy)]
pub(super) struct Sizes {
    /// Slowloris connections per HTTP target.
    pub(super) slowloris: usize,
    /// Never-reading connections per HTTP target.
    pub(super) never_read: usize,
    /// How long a never-reading connection is held before it is replaced.
    pub(super) never_read_hold: Duration,
}

impl Hostile {
    /// Starts the clients, one thread per kind and target: slowloris and
    /// never-read against each of `http`, garbage against each of `http`
    /// and `raw` (non-HTTP ports). Targets are (name, address).
    pub(super) fn start(
        http: &[(String, SocketAddr)],
        raw: &[(String, SocketAddr)],
        sizes: Sizes,
    ) -> Hostile {
        let stop = Arc::new(AtomicBool::new(false));
        let mut threads = Vec::new();
        let mut counters = Vec::new();
        let mut add = |kind: Kind, (name, target): &(String, SocketAddr), seed: u64| {
            let c = Arc::new(Counters::default());
            counters.push((kind, name.clone(), c.clone()));
            let (stop, target) = (stop.clone(), *target);
            threads.push(std::thread::spawn(move || match kind {
                Kind::Slowloris => run_slowloris(&[target], sizes.slowloris, &stop, &c),
                Kind::Garbage => run_garbage(target, seed, &stop, &c),
                Kind::NeverRead => run_never_read(
                    &[target],
                    sizes.never_read,
                    sizes.never_read_hold,
                    &stop,
                    &c,
                ),
            }));
        };
        for (i, t) in http.iter().enumerate() {
            add(Kind::Slowloris, t, 0);
            add(Kind::NeverRead, t, 0);
            add(Kind::Garbage, t, i as u64);
        }
        for (i, t) in raw.iter().enumerate() {
            add(Kind::Garbage, t, (http.len() + i) as u64);
        }
        Hostile {
            stop,
            threads,
            counters,
        }
    }

    /// Counts so far.
    pub(super) fn report(&self) -> HostileReport {
        let summary = |kind: Kind| {
            let mut s = HostileSummary::default();
            for (k, name, c) in &self.counters {
                if *k == kind {
                    let counts = c.counts();
                    s.total.add(&counts);
                    s.by_target.insert(name.clone(), counts);
                }
            }
            s
        };
        HostileReport {
            slowloris: summary(Kind::Slowloris),
            garbage: summary(Kind::Garbage),
            never_read: summary(Kind::NeverRead),
        }
    }

    /// Stops every client (each thread checks at least every 500 ms) and
    /// returns the counts.
    pub(super) fn stop(mut self) -> HostileReport {
        self.stop.store(true, Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
        self.report()
    }
}

impl Drop for Hostile {
    fn drop(&mut self) {
        self.stop.store(true, Relaxed);
    }
}

fn connect(target: SocketAddr, c: &Counters) -> Option<TcpStream> {
    match TcpStream::connect_timeout(&target, CONNECT_TIMEOUT) {
        Ok(s) => {
            c.connects.fetch_add(1, Relaxed);
            Some(s)
        }
        Err(_) => {
            c.connect_failed.fetch_add(1, Relaxed);
            None
        }
    }
}

/// Sleeps `d` in steps, returning early (false) once `stop` is set.
fn nap(d: Duration, stop: &AtomicBool) -> bool {
    let end = Instant::now() + d;
    while Instant::now() < end {
        if stop.load(Relaxed) {
            return false;
        }
        std::thread::sleep(Duration::from_millis(50).min(end - Instant::now()));
    }
    !stop.load(Relaxed)
}

/// Has the peer closed or reset `s` (non-blocking check)?
fn peer_closed(s: &mut TcpStream) -> bool {
    let mut buf = [0u8; 4096];
    loop {
        match s.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => continue,
            Err(e) if e.kind() == ErrorKind::WouldBlock => return false,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(_) => return true,
        }
    }
}

fn run_slowloris(targets: &[SocketAddr], per_target: usize, stop: &AtomicBool, c: &Counters) {
    let mut conns: Vec<(SocketAddr, Option<TcpStream>)> = targets
        .iter()
        .flat_map(|t| std::iter::repeat_n(*t, per_target))
        .map(|t| (t, None))
        .collect();
    let mut line = 0u64;
    while !stop.load(Relaxed) {
        for (target, slot) in conns.iter_mut() {
            if stop.load(Relaxed) {
                break;
            }
            match slot {
                None => {
                    if let Some(s) = connect(*target, c) {
                        let _ = s.set_nonblocking(true);
                        let head = b"GET /bytes/16 HTTP/1.1\r\nHost: soak\r\n";
                        let mut s = s;
                        if s.write_all(head).is_ok() {
                            c.bytes_sent.fetch_add(head.len() as u64, Relaxed);
                            *slot = Some(s);
                        }
                    }
                }
                Some(s) => {
                    line += 1;
                    let more = format!("X-Soak-{line}: a\r\n");
                    let wrote = s.write(more.as_bytes());
                    if let Ok(n) = wrote {
                        c.bytes_sent.fetch_add(n as u64, Relaxed);
                    }
                    let dead = match wrote {
                        Err(e) if e.kind() != ErrorKind::WouldBlock => true,
                        _ => peer_closed(s),
                    };
                    if dead {
                        c.closed_by_peer.fetch_add(1, Relaxed);
                        *slot = None;
                    }
                }
            }
        }
        nap(Duration::from_millis(500), stop);
    }
}

fn run_garbage(target: SocketAddr, seed: u64, stop: &AtomicBool, c: &Counters) {
    let mut rng = connlab_measure::SeededRng::new(seed);
    while !stop.load(Relaxed) {
        let Some(mut s) = connect(target, c) else {
            nap(Duration::from_millis(100), stop);
            continue;
        };
        let len = 64 + rng.below(4000) as usize;
        let bytes: Vec<u8> = (0..len).map(|_| rng.next_u64() as u8).collect();
        if s.write_all(&bytes).is_ok() {
            c.bytes_sent.fetch_add(len as u64, Relaxed);
        }
        // Whatever comes back within 3 s: an error reply, a close, a reset.
        let _ = s.set_read_timeout(Some(Duration::from_millis(250)));
        let end = Instant::now() + Duration::from_secs(3);
        let mut buf = [0u8; 4096];
        let mut answered = false;
        let outcome = loop {
            if Instant::now() >= end || stop.load(Relaxed) {
                break None;
            }
            match s.read(&mut buf) {
                Ok(0) => break Some(true),
                Ok(_) => answered = true,
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(_) => break Some(true),
            }
        };
        if answered {
            c.replies.fetch_add(1, Relaxed);
        }
        match outcome {
            Some(_) => {
                c.closed_by_peer.fetch_add(1, Relaxed);
            }
            None if !answered && !stop.load(Relaxed) => {
                c.no_reply.fetch_add(1, Relaxed);
            }
            None => {}
        }
        drop(s);
        nap(Duration::from_millis(50), stop);
    }
}

/// A never-reading connection: the socket, when it was opened, and the
/// bytes of the current request written so far.
type Held = (TcpStream, Instant, usize);

fn run_never_read(
    targets: &[SocketAddr],
    per_target: usize,
    hold: Duration,
    stop: &AtomicBool,
    c: &Counters,
) {
    let request = b"GET /bytes/1048576 HTTP/1.1\r\nHost: soak\r\n\r\n";
    let mut conns: Vec<(SocketAddr, Option<Held>)> = targets
        .iter()
        .flat_map(|t| std::iter::repeat_n(*t, per_target))
        .map(|t| (t, None))
        .collect();
    while !stop.load(Relaxed) {
        for (target, slot) in conns.iter_mut() {
            if stop.load(Relaxed) {
                break;
            }
            if slot.as_ref().is_some_and(|(_, at, _)| at.elapsed() >= hold) {
                // Held long enough: close it without reading and open another.
                *slot = None;
            }
            match slot {
                None => {
                    if let Some(s) = connect(*target, c) {
                        let _ = s.set_nonblocking(true);
                        *slot = Some((s, Instant::now(), 0));
                    }
                }
                Some((s, _, done)) => {
                    // Keep asking until the send buffer is full; never read.
                    let mut dead = false;
                    for _ in 0..64 {
                        // Whole requests only: resume a partly written one.
                        match s.write(&request[*done..]) {
                            Ok(n) => {
                                c.bytes_sent.fetch_add(n as u64, Relaxed);
                                *done = (*done + n) % request.len();
                            }
                            Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                            Err(e) if e.kind() == ErrorKind::Interrupted => {}
                            Err(_) => {
                                dead = true;
                                break;
                            }
                        }
                    }
                    if dead {
                        c.closed_by_peer.fetch_add(1, Relaxed);
                        *slot = None;
                    }
                }
            }
        }
        nap(Duration::from_millis(500), stop);
    }
}
