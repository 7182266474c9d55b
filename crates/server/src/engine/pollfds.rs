//! The `pollfd` array of the `poll` and `rtsig` engines and the pass over it
//! after each wait. The two loops differ only in how the array's `revents`
//! are filled: by `poll(2)` or by connlab-rtsig's readiness table.

use super::reactor::{Interest, Reactor};
use crate::socket_io::SocketIo;
use std::os::fd::RawFd;

/// Slot 0 holds the listener, slot 1 the shutdown pipe.
const LISTENER: usize = 0;
/// The first connection's slot.
const FIRST_CONN: usize = 2;

/// A new array: the listener and the shutdown pipe, both read-watched.
pub(super) fn new(listener: RawFd, wake: RawFd) -> Vec<libc::pollfd> {
    vec![entry(listener), entry(wake)]
}

/// A read-watched entry for `fd`.
pub(super) fn entry(fd: RawFd) -> libc::pollfd {
    libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    }
}

/// Watches the listener only while the reactor accepts: it sits out a
/// moment after an accept failed.
pub(super) fn watch_listener<I: SocketIo>(fds: &mut [libc::pollfd], reactor: &mut Reactor<'_, I>) {
    fds[LISTENER].events = if reactor.accepting() { libc::POLLIN } else { 0 };
}

/// Whether the last wait reported the listener ready.
pub(super) fn listener_ready(fds: &[libc::pollfd]) -> bool {
    fds[LISTENER].revents != 0
}

/// Serves every connection the last wait reported ready, updating or
/// removing its entry, then closes the connections past their timeouts and
/// removes theirs.
pub(super) fn serve_ready<I: SocketIo>(fds: &mut Vec<libc::pollfd>, reactor: &mut Reactor<'_, I>) {
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
        drop_closed(fds, reactor);
    }
}

/// The `events` of a connection waiting to read, write, or both.
fn events(read: bool, write: bool) -> libc::c_short {
    (if read { libc::POLLIN } else { 0 }) | (if write { libc::POLLOUT } else { 0 })
}

/// Removes the entries of connections the reactor closed (timeouts).
fn drop_closed<I: SocketIo>(fds: &mut Vec<libc::pollfd>, reactor: &Reactor<'_, I>) {
    let mut i = FIRST_CONN;
    while i < fds.len() {
        if reactor.is_open(fds[i].fd) {
            i += 1;
        } else {
            fds.swap_remove(i);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_ask_for_what_the_connection_waits_on() {
        assert_eq!(events(false, false), 0);
        assert_eq!(events(true, false), libc::POLLIN);
        assert_eq!(events(false, true), libc::POLLOUT);
        assert_eq!(events(true, true), libc::POLLIN | libc::POLLOUT);
    }

    #[test]
    fn a_new_array_watches_the_listener_and_the_pipe() {
        let fds = new(3, 4);
        assert_eq!(fds.len(), FIRST_CONN);
        assert_eq!((fds[LISTENER].fd, fds[1].fd), (3, 4));
        assert!(fds
            .iter()
            .all(|p| p.events == libc::POLLIN && p.revents == 0));
        assert!(!listener_ready(&fds));
    }
}
