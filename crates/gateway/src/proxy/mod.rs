//! `--mode proxy`: a user-space L4 proxy. One event loop (mio, edge-
//! triggered epoll) accepts client connections on the virtual address, picks
//! a backend by the policy, connects to it and relays both ways through two
//! bounded buffers per connection (so memory per connection is fixed), with
//! half-closes passed on. A health thread connects to every backend each
//! interval: a backend that fails is taken out of rotation and its
//! connections are reset (no client waits on a dead backend beyond the
//! interval); it is put back when a check succeeds. A refused connect is
//! retried on the next healthy backend.
//!
//! Two limits keep one connection from costing the others: a connection
//! with no bytes moving either way for `idle_timeout` is reset, and each
//! connection moves at most `turn_budget` bytes per event-loop turn before
//! the others get theirs (a connection with more to move is served again
//! next turn).
//!
//! With `splice` on, each direction is a pipe instead of a user buffer:
//! bytes move socket -> pipe -> socket by `splice(2)` and never enter user
//! space (zero copy where the kernel can share pages; on loopback it still
//! copies once into the pipe). It costs two pipes (four descriptors) per
//! connection, each holding up to its capacity (`buffer` rounded up to
//! whole pages, at least 64 KiB) of page references. Whether it helps is
//! measured, not assumed (BENCHMARKS.md).
//!
//! With [`ProxyIo::Uring`] the relay runs on io_uring instead of epoll (see
//! [`uring`]'s documentation): no readiness events, and a received buffer is
//! sent on as it is.

mod relay;
pub mod uring;

use crate::policy::Balancer;
use connlab_os::reserve::{is_descriptor_limit, FdReserve, LimitEpisodes, Shed};
use mio::net::{TcpListener, TcpStream};
use mio::unix::SourceFd;
use mio::{Events, Interest, Poll, Token, Waker};
use relay::Relay;
use std::io;
use std::net::{Shutdown as Half, SocketAddr};
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

const LISTENER: Token = Token(0);
const WAKER: Token = Token(1);
const STOP: Token = Token(2);
/// Tokens of connection `slot`: client 3 + 2*slot, backend 4 + 2*slot.
const FIRST: usize = 3;

/// How the proxy runs.
#[derive(Clone, Debug)]
pub struct ProxyConfig {
    /// Where clients connect.
    pub listen: SocketAddr,
    /// Bytes buffered per direction per connection (splice: the pipe's
    /// size, at least 64 KiB; io_uring: bytes a direction may hold received
    /// and not yet sent before its receive pauses).
    pub buffer: usize,
    /// Time between health checks of each backend.
    pub health_interval: Duration,
    /// Connect timeout of a health check.
    pub health_timeout: Duration,
    /// Consecutive failed checks that take a backend out.
    pub health_fails: u32,
    /// How bytes move: epoll with user-space buffers, epoll with
    /// `splice(2)` pipes, or io_uring.
    pub io: ProxyIo,
    /// A connection with no bytes moving either way this long is reset.
    pub idle_timeout: Duration,
    /// Bytes one connection may move (both directions together) per
    /// event-loop turn before the other connections get their turn.
    pub turn_budget: usize,
    /// io_uring only: once a completion is in, wait up to this long for
    /// more (up to [`uring::BATCH`]) before handling them, so the loop
    /// wakes less often; zero handles completions as soon as one is in.
    pub uring_min_wait: Duration,
}

impl ProxyConfig {
    /// Default [`ProxyConfig::idle_timeout`]: 300 s.
    pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(300);
    /// Default [`ProxyConfig::turn_budget`]: 256 KiB.
    pub const DEFAULT_TURN_BUDGET: usize = 256 * 1024;
    /// The shortest [`ProxyConfig::health_interval`]: checks more often
    /// than this are a connect storm against the backends, not a health
    /// check.
    pub const MIN_HEALTH_INTERVAL: Duration = Duration::from_millis(10);
    /// The shortest [`ProxyConfig::health_timeout`]: a connect cannot
    /// finish in less, even on loopback, so every backend would read dead.
    pub const MIN_HEALTH_TIMEOUT: Duration = Duration::from_millis(1);

    /// Checks the settings that would make the proxy harm its backends or
    /// its clients: the health interval and timeout (at least
    /// [`MIN_HEALTH_INTERVAL`](Self::MIN_HEALTH_INTERVAL) and
    /// [`MIN_HEALTH_TIMEOUT`](Self::MIN_HEALTH_TIMEOUT), the timeout no
    /// longer than the interval), a buffer and a turn budget above zero.
    ///
    /// # Errors
    ///
    /// A message naming the setting, its value and the bound.
    pub fn validate(&self) -> Result<(), String> {
        if self.health_interval < Self::MIN_HEALTH_INTERVAL {
            return Err(format!(
                "health interval {:?} is below {:?}: that many checks are a connect storm \
                 against the backends",
                self.health_interval,
                Self::MIN_HEALTH_INTERVAL
            ));
        }
        if self.health_timeout < Self::MIN_HEALTH_TIMEOUT {
            return Err(format!(
                "health timeout {:?} is below {:?}: no connect finishes that fast, so every \
                 backend would be taken out",
                self.health_timeout,
                Self::MIN_HEALTH_TIMEOUT
            ));
        }
        if self.health_timeout > self.health_interval {
            return Err(format!(
                "health timeout {:?} is longer than the health interval {:?}",
                self.health_timeout, self.health_interval
            ));
        }
        if self.buffer == 0 {
            return Err("buffer must be at least 1 byte".into());
        }
        if self.turn_budget == 0 {
            return Err("turn budget must be at least 1 byte".into());
        }
        Ok(())
    }
}

impl Default for ProxyConfig {
    fn default() -> ProxyConfig {
        ProxyConfig {
            listen: SocketAddr::from(([127, 0, 0, 1], 8080)),
            buffer: 16 * 1024,
            health_interval: Duration::from_secs(1),
            health_timeout: Duration::from_millis(500),
            health_fails: 1,
            io: ProxyIo::Copy,
            idle_timeout: ProxyConfig::DEFAULT_IDLE_TIMEOUT,
            turn_budget: ProxyConfig::DEFAULT_TURN_BUDGET,
            uring_min_wait: Duration::ZERO,
        }
    }
}

/// How the proxy moves bytes between a client and its backend.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ProxyIo {
    /// Edge-triggered epoll; `read`/`write` through a bounded user-space
    /// buffer per direction.
    #[default]
    Copy,
    /// Edge-triggered epoll; `splice(2)` through a pipe per direction.
    Splice,
    /// io_uring: multishot receives into a provided-buffer ring, each
    /// buffer sent on as it is ([`uring`]).
    Uring,
}

impl ProxyIo {
    /// Every mode, in the order the names list them.
    pub const ALL: [ProxyIo; 3] = [ProxyIo::Copy, ProxyIo::Splice, ProxyIo::Uring];

    /// The name the command line and the experiment files use.
    pub fn name(self) -> &'static str {
        match self {
            ProxyIo::Copy => "copy",
            ProxyIo::Splice => "splice",
            ProxyIo::Uring => "uring",
        }
    }
}

impl std::str::FromStr for ProxyIo {
    type Err = String;

    fn from_str(s: &str) -> Result<ProxyIo, String> {
        ProxyIo::ALL
            .into_iter()
            .find(|m| m.name() == s)
            .ok_or_else(|| format!("unknown proxy I/O mode {s:?} (copy, splice, uring)"))
    }
}

/// What the proxy did with one backend.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ProxyBackendStats {
    /// Connections relayed to it.
    pub connections: u64,
    /// Bytes from clients to it.
    pub bytes_to: u64,
    /// Bytes from it to clients.
    pub bytes_from: u64,
    /// Connects that failed (then retried elsewhere).
    pub connect_errors: u64,
    /// Connections reset because the backend failed a health check.
    pub reset_unhealthy: u64,
    /// Times it was taken out of rotation.
    pub went_down: u64,
    /// In rotation at the end.
    pub healthy: bool,
}

/// What the proxy did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProxyStats {
    /// Client connections accepted.
    pub accepted: u64,
    /// Client connections closed at once because no backend was healthy.
    pub no_backend: u64,
    /// Client connections reset because their relay could not be set up
    /// (`--splice` pipes failing other than at the descriptor limit, which
    /// counts as `shed`; io_uring out of slots).
    pub no_relay: u64,
    /// Connections reset after `idle_timeout` with no bytes moving.
    pub idle_closed: u64,
    /// Times a connection's turn ended at `turn_budget` with more to move
    /// (epoll modes; io_uring bounds each pair by its bytes in flight).
    pub turn_budget_hits: u64,
    /// Client connections accepted and reset at once because the gateway
    /// had no descriptor left for them (epoll modes).
    pub shed: u64,
    /// Stretches of time at the descriptor limit (each began with a shed
    /// client after a relayed one).
    pub fd_limit_episodes: u64,
    /// Per backend, in the order given.
    pub backends: Vec<ProxyBackendStats>,
    /// Whether the proxy is at its descriptor limit now.
    pub(crate) limit: LimitEpisodes,
}

impl ProxyStats {
    /// A client was shed at the descriptor limit.
    pub(crate) fn shed_one(&mut self) {
        self.limit.shed(&mut self.shed, &mut self.fd_limit_episodes);
    }
}

/// One relayed connection.
struct Pair {
    client: TcpStream,
    backend: TcpStream,
    backend_idx: usize,
    connected: bool,
    tries: usize,
    up: Relay,
    down: Relay,
    client_eof: bool,
    backend_eof: bool,
    up_shut: bool,
    down_shut: bool,
    /// Edge-triggered readiness as last reported and not yet used up:
    /// client readable/writable, backend readable/writable.
    ready: [bool; 4],
    /// The client's / backend's end (or an error) was reported by an event:
    /// reads of that socket go on until they return 0.
    hup: [bool; 2],
    /// When bytes last moved (or the connection was accepted).
    last_active: Instant,
    /// Its turn ended at the budget: it is in the loop's backlog.
    in_backlog: bool,
}

/// Runs the proxy until `stop_fd` becomes readable (a shutdown pipe), then
/// returns its statistics. `ready` is called once the listener is bound.
pub fn run(
    config: &ProxyConfig,
    mut balancer: Balancer,
    stop_fd: RawFd,
    stop: impl Fn() -> bool,
    ready: impl FnOnce(SocketAddr),
) -> io::Result<ProxyStats> {
    config.validate().map_err(io::Error::other)?;
    if config.io == ProxyIo::Uring {
        return uring::run(config, balancer, stop_fd, stop, ready);
    }
    let splice = config.io == ProxyIo::Splice;
    let mut poll = Poll::new()?;
    let std_listener = std::net::TcpListener::bind(config.listen)
        .map_err(|e| io::Error::new(e.kind(), format!("bind {}: {e}", config.listen)))?;
    std_listener.set_nonblocking(true)?;
    let mut listener = TcpListener::from_std(std_listener);
    poll.registry()
        .register(&mut listener, LISTENER, Interest::READABLE)?;
    poll.registry()
        .register(&mut SourceFd(&stop_fd), STOP, Interest::READABLE)?;
    let waker = Arc::new(Waker::new(poll.registry(), WAKER)?);
    let n = balancer.backends().len();
    let healthy: Arc<Vec<AtomicBool>> = Arc::new((0..n).map(|_| AtomicBool::new(true)).collect());
    let done = Arc::new(AtomicBool::new(false));
    let checker = {
        let (healthy, done, waker) = (healthy.clone(), done.clone(), waker.clone());
        let addrs: Vec<SocketAddr> = balancer.backends().iter().map(|b| b.addr).collect();
        let c = config.clone();
        std::thread::Builder::new()
            .name("gateway-health".into())
            .spawn(move || health_loop(&addrs, &healthy, &done, &|| drop(waker.wake()), &c))?
    };
    ready(listener.local_addr()?);
    let mut stats = ProxyStats {
        backends: vec![
            ProxyBackendStats {
                healthy: true,
                ..Default::default()
            };
            n
        ],
        ..Default::default()
    };
    let mut pairs: Vec<Option<Pair>> = Vec::new();
    let mut free: Vec<usize> = Vec::new();
    let mut backlog: Vec<usize> = Vec::new();
    let mut events = Events::with_capacity(1024);
    let tick = Duration::from_secs(1)
        .min(config.idle_timeout / 4)
        .max(Duration::from_millis(10));
    let mut next_sweep = Instant::now() + tick;
    let mut reserve = FdReserve::new();
    // The listener is edge-triggered: a queue left unread at the
    // descriptor limit never signals again, so the loop retries it itself.
    let mut accept_again = false;
    while !stop() {
        let timeout = if !backlog.is_empty() {
            Duration::ZERO
        } else if accept_again {
            ACCEPT_RETRY.min(next_sweep.saturating_duration_since(Instant::now()))
        } else {
            next_sweep.saturating_duration_since(Instant::now())
        };
        if let Err(e) = poll.poll(&mut events, Some(timeout)) {
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        // New clients first: the listener said so, or it stopped at the
        // descriptor limit last time.
        if accept_again || events.iter().any(|e| e.token() == LISTENER) {
            accept_again = accept_all(
                &listener,
                &mut reserve,
                &mut poll,
                &mut balancer,
                &mut pairs,
                &mut free,
                &mut stats,
                config,
                splice,
            );
        }
        for event in &events {
            match event.token() {
                LISTENER => {}
                WAKER => {
                    // Health changed: sync the balancer, reset connections
                    // to backends that went down.
                    for i in 0..n {
                        let h = healthy[i].load(Relaxed);
                        if h == balancer.is_healthy(i) {
                            continue;
                        }
                        balancer.set_healthy(i, h);
                        stats.backends[i].healthy = h;
                        if !h {
                            stats.backends[i].went_down += 1;
                            for slot in 0..pairs.len() {
                                if pairs[slot].as_ref().is_some_and(|p| p.backend_idx == i) {
                                    stats.backends[i].reset_unhealthy += 1;
                                    close(
                                        &mut poll,
                                        &mut pairs,
                                        &mut free,
                                        slot,
                                        &mut balancer,
                                        true,
                                    );
                                }
                            }
                        }
                    }
                }
                STOP => {}
                Token(t) => {
                    let slot = (t - FIRST) / 2;
                    let side = (t - FIRST) % 2 * 2;
                    if let Some(p) = pairs.get_mut(slot).and_then(Option::as_mut) {
                        let gone = event.is_error() || event.is_read_closed();
                        p.hup[side / 2] |= gone;
                        p.ready[side] |= event.is_readable() || gone;
                        p.ready[side + 1] |= event.is_writable() || gone || event.is_write_closed();
                    }
                    pump(
                        &mut poll,
                        &mut pairs,
                        &mut free,
                        slot,
                        &mut balancer,
                        &mut stats,
                        config.turn_budget,
                        &mut backlog,
                    );
                }
            }
        }
        // Connections whose last turn ended at the budget go on, after the
        // ones that had events.
        for slot in std::mem::take(&mut backlog) {
            if let Some(p) = pairs.get_mut(slot).and_then(Option::as_mut) {
                p.in_backlog = false;
                pump(
                    &mut poll,
                    &mut pairs,
                    &mut free,
                    slot,
                    &mut balancer,
                    &mut stats,
                    config.turn_budget,
                    &mut backlog,
                );
            }
        }
        let now = Instant::now();
        if now >= next_sweep {
            next_sweep = now + tick;
            for slot in 0..pairs.len() {
                let idle = pairs[slot].as_ref().is_some_and(|p| {
                    now.saturating_duration_since(p.last_active) >= config.idle_timeout
                });
                if idle {
                    stats.idle_closed += 1;
                    close(&mut poll, &mut pairs, &mut free, slot, &mut balancer, true);
                }
            }
        }
    }
    done.store(true, Relaxed);
    for slot in 0..pairs.len() {
        if pairs[slot].is_some() {
            close(&mut poll, &mut pairs, &mut free, slot, &mut balancer, false);
        }
    }
    let _ = checker.join();
    Ok(stats)
}

/// How soon the loop tries the listener again after it stopped at the
/// descriptor limit without draining the queue.
const ACCEPT_RETRY: Duration = Duration::from_millis(10);

/// Accepts every pending connection; `true` when it stopped at the
/// descriptor limit with connections possibly still queued (the caller
/// tries again soon).
#[allow(clippy::too_many_arguments)]
fn accept_all(
    listener: &TcpListener,
    reserve: &mut FdReserve,
    poll: &mut Poll,
    balancer: &mut Balancer,
    pairs: &mut Vec<Option<Pair>>,
    free: &mut Vec<usize>,
    stats: &mut ProxyStats,
    config: &ProxyConfig,
    splice: bool,
) -> bool {
    loop {
        let (client, client_addr) = match listener.accept() {
            Ok(c) => c,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return false,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) if is_descriptor_limit(&e) => match reserve.shed(|| {
                let (client, _) = listener.accept()?;
                reset(&client);
                Ok(())
            }) {
                Shed::One => {
                    stats.shed_one();
                    continue;
                }
                Shed::Empty => return false,
                Shed::Stuck => return true,
            },
            // Other accept errors (ENOBUFS, ENOMEM): try again soon.
            Err(_) => return true,
        };
        stats.accepted += 1;
        let _ = client.set_nodelay(true);
        let Some(idx) = balancer.pick(client_addr.ip()) else {
            stats.no_backend += 1;
            reset(&client);
            continue;
        };
        let backend = match connect(balancer.backends()[idx].addr) {
            Ok(b) => b,
            // Out of descriptors for the backend socket: the proxy's limit,
            // not the backend's fault. Shed this client.
            Err(e) if is_descriptor_limit(&e) => {
                stats.shed_one();
                reset(&client);
                continue;
            }
            Err(_) => {
                stats.backends[idx].connect_errors += 1;
                reset(&client);
                continue;
            }
        };
        let (up, down) = match Relay::new(config.buffer, splice)
            .and_then(|up| Ok((up, Relay::new(config.buffer, splice)?)))
        {
            Ok(relays) => relays,
            // Out of descriptors for the pipes: shed, as at accept.
            Err(e) if is_descriptor_limit(&e) => {
                stats.shed_one();
                reset(&client);
                continue;
            }
            Err(_) => {
                // The pipes failed otherwise: this client only.
                stats.no_relay += 1;
                reset(&client);
                continue;
            }
        };
        let slot = free.pop().unwrap_or_else(|| {
            pairs.push(None);
            pairs.len() - 1
        });
        let mut pair = Pair {
            client,
            backend,
            backend_idx: idx,
            connected: false,
            tries: 1,
            up,
            down,
            client_eof: false,
            backend_eof: false,
            up_shut: false,
            down_shut: false,
            ready: [true; 4],
            hup: [false; 2],
            last_active: Instant::now(),
            in_backlog: false,
        };
        let both = Interest::READABLE | Interest::WRITABLE;
        if poll
            .registry()
            .register(&mut pair.client, Token(FIRST + 2 * slot), both)
            .and_then(|()| {
                poll.registry()
                    .register(&mut pair.backend, Token(FIRST + 2 * slot + 1), both)
            })
            .is_err()
        {
            reset(&pair.client);
            free.push(slot);
            continue;
        }
        balancer.opened(idx);
        stats.backends[idx].connections += 1;
        stats.limit.served();
        pairs[slot] = Some(pair);
    }
}

fn connect(addr: SocketAddr) -> io::Result<TcpStream> {
    let s = TcpStream::connect(addr)?;
    let _ = s.set_nodelay(true);
    Ok(s)
}

/// Closes with a reset (linger 0), so the peer sees an error, not an end.
fn reset(s: &TcpStream) {
    let _ = socket2::SockRef::from(s).set_linger(Some(Duration::ZERO));
}

fn close(
    poll: &mut Poll,
    pairs: &mut [Option<Pair>],
    free: &mut Vec<usize>,
    slot: usize,
    balancer: &mut Balancer,
    with_reset: bool,
) {
    if let Some(mut p) = pairs[slot].take() {
        if with_reset {
            reset(&p.client);
            reset(&p.backend);
        }
        let _ = poll.registry().deregister(&mut p.client);
        let _ = poll.registry().deregister(&mut p.backend);
        balancer.closed(p.backend_idx);
        free.push(slot);
    }
}

/// Moves what can move in both directions, calling only sockets reported
/// ready and not yet found drained, up to `budget` bytes (then the pair goes
/// into `backlog` for the next turn); closes the pair when done or failed.
#[allow(clippy::too_many_arguments)]
fn pump(
    poll: &mut Poll,
    pairs: &mut [Option<Pair>],
    free: &mut Vec<usize>,
    slot: usize,
    balancer: &mut Balancer,
    stats: &mut ProxyStats,
    budget: usize,
    backlog: &mut Vec<usize>,
) {
    let Some(p) = pairs.get_mut(slot).and_then(Option::as_mut) else {
        return;
    };
    if !p.connected {
        let failed = match (p.backend.take_error(), p.backend.peer_addr()) {
            (Ok(None), Ok(_)) => false,
            (Ok(None), Err(e)) if e.kind() == io::ErrorKind::NotConnected => return,
            _ => true,
        };
        if failed {
            if !retry(poll, p, slot, balancer, stats) {
                close(poll, pairs, free, slot, balancer, true);
            }
            return;
        }
        p.connected = true;
    }
    let b = p.backend_idx;
    let mut spent = 0usize;
    let eof_before = (p.client_eof, p.backend_eof);
    let result = (|| -> io::Result<bool> {
        let [cr, cw, br, bw] = &mut p.ready;
        loop {
            if spent >= budget.max(1) {
                // More may be left and no new edge will say so: go on next
                // turn, after the other connections.
                stats.turn_budget_hits += 1;
                if !p.in_backlog {
                    p.in_backlog = true;
                    backlog.push(slot);
                }
                break;
            }
            let mut moved = false;
            if *cr && !p.client_eof && !p.up.is_full() {
                let (n, eof) = p.up.fill(&mut p.client, cr, p.hup[0])?;
                p.client_eof = eof;
                moved |= n > 0 || eof;
            }
            if *bw && !p.up.is_empty() {
                let n = p.up.drain(&mut p.backend, bw)?;
                stats.backends[b].bytes_to += n as u64;
                spent += n;
                moved |= n > 0;
            }
            if *br && !p.backend_eof && !p.down.is_full() {
                let (n, eof) = p.down.fill(&mut p.backend, br, p.hup[1])?;
                p.backend_eof = eof;
                moved |= n > 0 || eof;
            }
            if *cw && !p.down.is_empty() {
                let n = p.down.drain(&mut p.client, cw)?;
                stats.backends[b].bytes_from += n as u64;
                spent += n;
                moved |= n > 0;
            }
            if !moved {
                break;
            }
        }
        if p.client_eof && p.up.is_empty() && !p.up_shut {
            let _ = p.backend.shutdown(Half::Write);
            p.up_shut = true;
        }
        if p.backend_eof && p.down.is_empty() && !p.down_shut {
            let _ = p.client.shutdown(Half::Write);
            p.down_shut = true;
        }
        Ok(p.up_shut && p.down_shut)
    })();
    if spent > 0 || (p.client_eof, p.backend_eof) != eof_before {
        p.last_active = Instant::now();
    }
    match result {
        Ok(false) => {}
        Ok(true) => close(poll, pairs, free, slot, balancer, false),
        Err(_) => close(poll, pairs, free, slot, balancer, true),
    }
}

/// The backend connect failed: count it and move the pair to the next
/// healthy backend (each tried at most once). False when none is left (the
/// caller resets the client).
fn retry(
    poll: &mut Poll,
    p: &mut Pair,
    slot: usize,
    balancer: &mut Balancer,
    stats: &mut ProxyStats,
) -> bool {
    let n = balancer.backends().len();
    let old = p.backend_idx;
    stats.backends[old].connect_errors += 1;
    stats.backends[old].connections -= 1;
    let _ = poll.registry().deregister(&mut p.backend);
    while p.tries < n {
        let idx = (old + p.tries) % n;
        p.tries += 1;
        if !balancer.is_healthy(idx) {
            continue;
        }
        let mut s = match connect(balancer.backends()[idx].addr) {
            Ok(s) => s,
            // The proxy's own limit: every other backend would fail the
            // same way. Shed the client (the caller resets it).
            Err(e) if is_descriptor_limit(&e) => {
                stats.shed_one();
                return false;
            }
            Err(_) => {
                stats.backends[idx].connect_errors += 1;
                continue;
            }
        };
        let token = Token(FIRST + 2 * slot + 1);
        if poll
            .registry()
            .register(&mut s, token, Interest::READABLE | Interest::WRITABLE)
            .is_ok()
        {
            balancer.closed(old);
            balancer.opened(idx);
            stats.backends[idx].connections += 1;
            p.backend = s;
            p.backend_idx = idx;
            p.ready[2] = true;
            p.ready[3] = true;
            p.hup[1] = false;
            return true;
        }
    }
    false
}

/// Checks every backend each interval until `done`, storing the verdicts
/// in `healthy` and calling `wake` when one changed.
fn health_loop(
    addrs: &[SocketAddr],
    healthy: &[AtomicBool],
    done: &AtomicBool,
    wake: &dyn Fn(),
    c: &ProxyConfig,
) {
    let mut fails = vec![0u32; addrs.len()];
    while !done.load(Relaxed) {
        let mut changed = false;
        for (i, addr) in addrs.iter().enumerate() {
            let ok = match std::net::TcpStream::connect_timeout(addr, c.health_timeout) {
                Ok(_) => true,
                // The gateway's own descriptor limit says nothing of the
                // backend: no verdict this round (it took backends out and
                // reset every relayed session).
                Err(e) if is_descriptor_limit(&e) => continue,
                Err(_) => false,
            };
            fails[i] = if ok { 0 } else { fails[i] + 1 };
            let up = fails[i] < c.health_fails.max(1);
            if healthy[i].swap(up, Relaxed) != up {
                changed = true;
            }
        }
        if changed {
            wake();
        }
        let mut slept = Duration::ZERO;
        while slept < c.health_interval && !done.load(Relaxed) {
            let step = Duration::from_millis(50).min(c.health_interval - slept);
            std::thread::sleep(step);
            slept += step;
        }
    }
}

#[cfg(test)]
mod config_tests {
    use super::*;

    #[test]
    fn settings_that_would_harm_backends_or_clients_are_refused() {
        assert!(ProxyConfig::default().validate().is_ok());
        let with = |f: &dyn Fn(&mut ProxyConfig)| {
            let mut c = ProxyConfig::default();
            f(&mut c);
            c.validate().unwrap_err()
        };
        assert!(with(&|c| c.health_interval = Duration::ZERO).contains("connect storm"));
        assert!(with(&|c| c.health_timeout = Duration::ZERO).contains("every"));
        assert!(with(&|c| c.health_timeout = Duration::from_secs(5)).contains("longer"));
        assert!(with(&|c| c.buffer = 0).contains("buffer"));
        assert!(with(&|c| c.turn_budget = 0).contains("turn budget"));
    }
}
