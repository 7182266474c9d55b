//! `epoll(7)`: one thread; the kernel keeps the interest set and returns only
//! ready descriptors, so the cost per wait does not grow with idle
//! connections. Level-triggered by default: interest is changed with
//! `EPOLL_CTL_MOD` only when a connection starts or stops needing to send.
//! Edge-triggered (`--edge-triggered`): every connection is registered once
//! for input and output, and each edge is drained until `EAGAIN`.

use super::reactor::{Interest, Reactor};
use super::{Engine, RunContext};
use crate::deadline::wait_ms;
use crate::profile::LoopTimer;
use std::io;
use std::os::fd::RawFd;

pub(super) struct Epoll {
    pub(super) edge_triggered: bool,
}

/// Events fetched per `epoll_wait`.
const MAX_EVENTS: usize = 1024;

impl Engine for Epoll {
    fn serve(&mut self, ctx: RunContext<'_>) -> io::Result<()> {
        let shutdown = ctx.shutdown;
        let exclusive = ctx.exclusive_accept;
        let mut timer = LoopTimer::new(ctx.profile);
        let mut reactor = Reactor::new(ctx);
        let ep = EpollFd::new()?;
        let listen_fd = reactor.listener.fd();
        // A listener shared by several loops wakes one of them per
        // connection; such a registration cannot be modified, only
        // removed and added again.
        let listen_events = if exclusive {
            (libc::EPOLLIN | libc::EPOLLEXCLUSIVE) as u32
        } else {
            libc::EPOLLIN as u32
        };
        ep.ctl(libc::EPOLL_CTL_ADD, listen_fd, listen_events)?;
        ep.ctl(
            libc::EPOLL_CTL_ADD,
            shutdown.wake_fd(),
            libc::EPOLLIN as u32,
        )?;
        let et = self.edge_triggered;
        let conn_events = if et {
            (libc::EPOLLIN | libc::EPOLLOUT | libc::EPOLLRDHUP | libc::EPOLLET) as u32
        } else {
            libc::EPOLLIN as u32
        };
        // Level-triggered: the interest each connection is registered with.
        let mut registered: Vec<u32> = Vec::new();
        let mut events = vec![libc::epoll_event { events: 0, u64: 0 }; MAX_EVENTS];
        // Whether the listener is in the set with EPOLLIN (left out for a
        // moment after an accept failed: it is level-triggered).
        let mut watching_listener = true;
        reactor.ready();
        while !shutdown.requested() {
            let accepting = reactor.accepting();
            if accepting != watching_listener {
                if exclusive {
                    let op = if accepting {
                        libc::EPOLL_CTL_ADD
                    } else {
                        libc::EPOLL_CTL_DEL
                    };
                    ep.ctl(op, listen_fd, listen_events)?;
                } else {
                    let events = if accepting { libc::EPOLLIN as u32 } else { 0 };
                    ep.ctl(libc::EPOLL_CTL_MOD, listen_fd, events)?;
                }
                watching_listener = accepting;
            }
            let mut mark = timer.begin();
            let wait = wait_ms(reactor.wait());
            // SAFETY: `events` has room for MAX_EVENTS entries.
            let n = unsafe {
                libc::epoll_wait(ep.0, events.as_mut_ptr(), MAX_EVENTS as libc::c_int, wait)
            };
            timer.called(&mut mark);
            reactor.tick();
            if n < 0 {
                let e = io::Error::last_os_error();
                if e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(e);
            }
            let mut accept = false;
            for ev in &events[..n as usize] {
                let fd = ev.u64 as RawFd;
                if fd == listen_fd {
                    accept = true;
                    continue;
                }
                if fd == shutdown.wake_fd() {
                    continue;
                }
                let bits = ev.events as libc::c_int;
                let readable = bits
                    & (libc::EPOLLIN | libc::EPOLLHUP | libc::EPOLLERR | libc::EPOLLRDHUP)
                    != 0;
                let writable = bits & libc::EPOLLOUT != 0;
                let interest = reactor.dispatch(fd, readable, writable, et);
                if let (false, Interest::Wait { read, write }) = (et, interest) {
                    let want = (if read { libc::EPOLLIN } else { 0 }
                        | if write { libc::EPOLLOUT } else { 0 })
                        as u32;
                    if registered[fd as usize] != want {
                        ep.ctl(libc::EPOLL_CTL_MOD, fd, want)?;
                        registered[fd as usize] = want;
                    }
                }
                // A closed descriptor leaves the epoll set by itself.
            }
            // A closed descriptor leaves the epoll set by itself.
            reactor.expire(|_| {});
            if accept {
                let mut failed = None;
                reactor.accept_pending(|fd| {
                    if let Err(e) = ep.ctl(libc::EPOLL_CTL_ADD, fd, conn_events) {
                        failed = Some(e);
                    }
                    if registered.len() <= fd as usize {
                        registered.resize(fd as usize + 1, 0);
                    }
                    registered[fd as usize] = conn_events;
                });
                if let Some(e) = failed {
                    return Err(e);
                }
            }
            timer.end(mark);
        }
        reactor.close_all();
        Ok(())
    }
}

/// An owned epoll instance.
struct EpollFd(RawFd);

impl EpollFd {
    fn new() -> io::Result<EpollFd> {
        // SAFETY: plain syscall; the result is checked.
        let fd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(EpollFd(fd))
    }

    fn ctl(&self, op: libc::c_int, fd: RawFd, events: u32) -> io::Result<()> {
        let mut ev = libc::epoll_event {
            events,
            u64: fd as u64,
        };
        // SAFETY: `ev` is a valid epoll_event; the epoll and target descriptors are open.
        if unsafe { libc::epoll_ctl(self.0, op, fd, &mut ev) } < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }
}

impl Drop for EpollFd {
    fn drop(&mut self) {
        // SAFETY: we own this descriptor and close it once.
        unsafe { libc::close(self.0) };
    }
}
