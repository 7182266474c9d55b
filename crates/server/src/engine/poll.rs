//! `poll(2)`: one thread, one persistent `pollfd` array. The kernel scans the
//! whole array on every call and so does the loop that reads `revents`: the
//! per-call cost grows with the number of connections, which is what the
//! locality paper measured.

use super::reactor::Reactor;
use super::{pollfds, Engine, RunContext};
use crate::deadline::wait_ms;
use crate::profile::LoopTimer;
use std::io;

pub(super) struct Poll;

impl Engine for Poll {
    fn serve(&mut self, ctx: RunContext<'_>) -> io::Result<()> {
        let shutdown = ctx.shutdown;
        let mut timer = LoopTimer::new(ctx.profile);
        let mut reactor = Reactor::new(ctx);
        let mut fds = pollfds::new(reactor.listener.fd(), shutdown.wake_fd());
        reactor.ready();
        while !shutdown.requested() {
            pollfds::watch_listener(&mut fds, &mut reactor);
            let mut mark = timer.begin();
            let wait = wait_ms(reactor.wait());
            // SAFETY: `fds` is a valid array of pollfd for the duration of the call.
            let n = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, wait) };
            timer.called(&mut mark);
            reactor.tick();
            if n < 0 {
                let e = io::Error::last_os_error();
                if e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(e);
            }
            pollfds::serve_ready(&mut fds, &mut reactor);
            if pollfds::listener_ready(&fds) {
                reactor.accept_pending(|fd| fds.push(pollfds::entry(fd)));
            }
            timer.end(mark);
        }
        reactor.close_all();
        Ok(())
    }
}
