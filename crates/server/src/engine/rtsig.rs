//! `--engine rtsig`: the `poll` engine's loop with `poll(2)` replaced by
//! [`connlab_rtsig::RtSig::poll`], which answers from a readiness table kept
//! by real-time signals and by the results of the loop's own non-blocking
//! calls (routed through the library by [`SocketIo`]). The loop itself is the
//! same as `poll.rs` (both pass over the array with `pollfds.rs`), so the two
//! differ only in how readiness is learnt: what the RT-signal polling paper
//! measured.
//!
//! With `--workers N` every loop has its own [`RtSig`]: its connections are
//! armed for its own signal thread (`F_SETOWN_EX`, `F_OWNER_TID`), so a loop
//! learns only its own connections' readiness and handles its own queue
//! overflow (`SIGIO`); the signals are blocked in every thread of the run.

use super::reactor::Reactor;
use super::{pollfds, Engine, RunContext};
use crate::profile::LoopTimer;
use crate::socket_io::SocketIo;
use connlab_rtsig::{Ready, RtSig};
use std::io;
use std::os::fd::{IntoRawFd, OwnedFd, RawFd};
use std::sync::atomic::Ordering::Relaxed;

pub(super) struct RtSigEngine;

/// The connection calls, run through the library under its table lock.
struct Through<'r>(&'r RtSig);

impl SocketIo for Through<'_> {
    fn input(
        &self,
        fd: RawFd,
        requested: usize,
        op: impl FnOnce() -> io::Result<usize>,
    ) -> io::Result<usize> {
        self.0.input(fd, requested, op)
    }

    fn output(
        &self,
        fd: RawFd,
        requested: usize,
        op: impl FnOnce() -> io::Result<usize>,
    ) -> io::Result<usize> {
        self.0.output(fd, requested, op)
    }

    fn release(&self, fd: OwnedFd) {
        // Deferred close: shut down now, the number is released later.
        let _ = self.0.close(fd.into_raw_fd());
    }
}

impl Engine for RtSigEngine {
    fn serve(&mut self, ctx: RunContext<'_>) -> io::Result<()> {
        let rt =
            RtSig::new().map_err(|e| io::Error::new(e.kind(), format!("--engine rtsig: {e}")))?;
        let shutdown = ctx.shutdown;
        let lfd = ctx.listener.fd();
        let wake = shutdown.wake_fd();
        // Connections may already be waiting: the listener starts readable.
        // One listener shared by several loops (`--accept shared`) can have
        // only one signal owner: the process, so each of its signals wakes
        // the one loop whose signal thread takes it.
        if ctx.exclusive_accept {
            rt.register_shared(lfd, Ready::ACCEPTED)?;
        } else {
            rt.register(lfd, Ready::ACCEPTED)?;
        }
        rt.register(wake, Ready::NONE)?;
        let mut timer = LoopTimer::new(ctx.profile);
        let mut reactor = Reactor::with_io(ctx, Through(&rt));
        let mut fds = pollfds::new(lfd, wake);
        let mut refused = Vec::new();
        reactor.ready();
        while !shutdown.requested() {
            pollfds::watch_listener(&mut fds, &mut reactor);
            let mut mark = timer.begin();
            rt.poll(&mut fds, reactor.wait())?;
            timer.called(&mut mark);
            reactor.tick();
            pollfds::serve_ready(&mut fds, &mut reactor);
            if pollfds::listener_ready(&fds) {
                reactor.accept_pending(|fd| match rt.register(fd, Ready::ACCEPTED) {
                    Ok(()) => fds.push(pollfds::entry(fd)),
                    Err(_) => refused.push(fd),
                });
                for fd in refused.drain(..) {
                    reactor.abort(fd);
                }
            }
            timer.end(mark);
        }
        reactor.close_all();
        let counters = &reactor.counters.rtsig;
        let stats = rt.stats();
        counters.signals.store(stats.signals, Relaxed);
        counters.overflows.store(stats.overflows, Relaxed);
        counters.recoveries.store(stats.recoveries, Relaxed);
        counters.used.store(true, Relaxed);
        let _ = rt.deregister(lfd);
        let _ = rt.deregister(wake);
        Ok(())
    }
}
