//! The I/O models. Each file holds one kernel interface (mio/HAProxy style);
//! all of them drive the same [`Connection`](crate::connection::Connection)
//! and accept through the same [`Listener`](crate::listener::Listener).
//! Hand-written on purpose: these loops are what System 1 measures.

mod epoll;
mod poll;
mod pollfds;
mod processes;
mod reactor;
mod rtsig;
mod select;
mod threads;
mod uring;

use crate::config::{EngineKind, ServerConfig};
use crate::connection::SessionTemplate;
use crate::counters::Counters;
use crate::listener::Listener;
use connlab_os::Shutdown;
use std::io;

/// Everything an engine needs to serve until shutdown.
pub(crate) struct RunContext<'a> {
    pub(crate) listener: Listener,
    pub(crate) counters: &'a Counters,
    pub(crate) shutdown: &'a Shutdown,
    pub(crate) template: SessionTemplate,
    /// Where the event loops time their calls (`--profile-poll`).
    pub(crate) profile: Option<&'a std::sync::Mutex<crate::profile::PollProfile>>,
    /// The listener is shared with other loops (`--accept shared`): epoll
    /// registers it with `EPOLLEXCLUSIVE`, so one loop wakes per connection;
    /// rtsig arms it with the process as signal owner, so one loop's
    /// signal thread takes each of its signals.
    pub(crate) exclusive_accept: bool,
    /// `--workers`: where the loop waits, once its own descriptors (epoll
    /// instance, ring, signal thread) exist, until every loop's do.
    pub(crate) start: Option<&'a StartGate>,
}

/// Holds the loops of a run back from accepting until all are set up.
/// A loop that accepted first could fill the descriptor table before
/// another loop had made its epoll instance or ring, which then failed
/// with `EMFILE` and stopped the whole run (issue 33, a flood at start).
#[derive(Debug)]
pub(crate) struct StartGate {
    loops: usize,
    /// Loops set up so far, and whether one ended before it was.
    state: std::sync::Mutex<(usize, bool)>,
    cond: std::sync::Condvar,
}

impl StartGate {
    /// A gate for `loops` loops.
    pub(crate) fn new(loops: usize) -> StartGate {
        StartGate {
            loops,
            state: std::sync::Mutex::new((0, false)),
            cond: std::sync::Condvar::new(),
        }
    }

    /// This loop is set up: waits until every loop is, or one ended.
    pub(crate) fn arrive(&self) {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        state.0 += 1;
        self.cond.notify_all();
        while state.0 < self.loops && !state.1 {
            state = self.cond.wait(state).unwrap_or_else(|p| p.into_inner());
        }
    }

    /// A loop ended (failed, or stopped before it was set up): nobody
    /// waits for it any more.
    pub(crate) fn release(&self) {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        state.1 = true;
        self.cond.notify_all();
    }
}

/// An I/O model: serves connections from `ctx.listener` until `ctx.shutdown` trips.
pub(crate) trait Engine {
    fn serve(&mut self, ctx: RunContext<'_>) -> io::Result<()>;
}

/// The engine a configuration asks for.
pub(crate) fn build(config: &ServerConfig) -> Box<dyn Engine> {
    match config.engine {
        EngineKind::Processes => Box::new(processes::Processes),
        EngineKind::Threads => Box::new(threads::Threads),
        EngineKind::Select => Box::new(select::Select),
        EngineKind::Poll => Box::new(poll::Poll),
        EngineKind::Epoll => Box::new(epoll::Epoll {
            edge_triggered: config.edge_triggered,
        }),
        EngineKind::Uring => Box::new(uring::Uring {
            features: config.uring_features,
        }),
        EngineKind::Rtsig => Box::new(rtsig::RtSigEngine),
    }
}

/// Waits until `fds` has a readable descriptor (or the call is interrupted);
/// used by the blocking engines' accept loops.
/// `backoff`: leave the listener (slot 0) out and wait at most
/// [`ACCEPT_BACKOFF`](crate::listener::ACCEPT_BACKOFF), after an accept
/// failed.
fn wait_readable(fds: &mut [libc::pollfd], backoff: bool) -> io::Result<()> {
    for p in fds.iter_mut() {
        p.events = libc::POLLIN;
        p.revents = 0;
    }
    let mut timeout = -1;
    if backoff {
        fds[0].events = 0;
        timeout = crate::listener::ACCEPT_BACKOFF.as_millis() as libc::c_int;
    }
    // SAFETY: `fds` is a valid slice of pollfd for the duration of the call.
    let n = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, timeout) };
    if n < 0 {
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
    Ok(())
}
