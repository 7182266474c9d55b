//! `poll(2)`: one thread, one persistent `pollfd` array. The kernel scans the
//! whole array on every call and so does the loop that reads `revents`: the
//! per-call cost grows with the number of connections, which is what the
//! locality paper measured.

use super::reactor::{Interest, Reactor};
use super::{Engine, RunContext};
use crate::deadline::wait_ms;
use crate::profile::LoopTimer;
use crate::socket_io::SocketIo;
use std::io;
use std::os::fd::RawFd;

pub(super) struct Poll;

/// Slots 0 and 1 of the array hold the listener and the shutdown pipe.
const FIRST_CONN: usize = 2;

impl Engine for Poll {
    fn serve(&mut self, ctx: RunContext<'_>) -> io::Result<()> {
        let shutdown = ctx.shutdown;
        let mut timer = LoopTimer::new(ctx.profile);
        let mut reactor = Reactor::new(ctx);
        let entry = |fd: RawFd| libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        };
        let mut fds = vec![entry(reactor.listener.fd()), entry(shutdown.wake_fd())];
        while !shutdown.requested() {
            // The listener sits out a moment after an accept failed.
            fds[0].events = if reactor.accepting() { libc::POLLIN } else { 0 };
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
            let mut i = FIRST_CONN;
            while i < fds.len() {
                let revents = fds[i].revents;
                if revents == 0 {
                    i += 1;
                    continue;
                }
                let readable = revents & (libc::POLLIN | libc::POLLHUP | libc::POLLERR) != 0;
                let writable = revents & libc::POLLOUT != 0;
                match reactor.dispatch(fds[i].fd, readable, writable, false) {
                    Interest::Closed => {
                        fds.swap_remove(i);
                    }
                    Interest::Wait { read, write } => {
                        fds[i].events = events(read, write);
                        fds[i].revents = 0;
                        i += 1;
                    }
                }
            }
            let mut expired = false;
            reactor.expire(|_| expired = true);
            if expired {
                drop_closed(&mut fds, &reactor);
            }
            if fds[0].revents != 0 {
                reactor.accept_pending(|fd| fds.push(entry(fd)));
            }
            timer.end(mark);
        }
        reactor.close_all();
        Ok(())
    }
}

fn events(read: bool, write: bool) -> libc::c_short {
    (if read { libc::POLLIN } else { 0 }) | (if write { libc::POLLOUT } else { 0 })
}

/// Removes the entries of connections the reactor closed (timeouts).
pub(super) fn drop_closed<I: SocketIo>(fds: &mut Vec<libc::pollfd>, reactor: &Reactor<'_, I>) {
    let mut i = FIRST_CONN;
    while i < fds.len() {
        if reactor.is_open(fds[i].fd) {
            i += 1;
        } else {
            fds.swap_remove(i);
        }
    }
}
