//! Helpers shared by the library's integration tests: loopback TCP pairs
//! whose server side is handed to the library.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::fd::{IntoRawFd, RawFd};
use std::time::{Duration, Instant};

/// A listener on an ephemeral loopback port, as a raw descriptor.
pub(crate) fn listener() -> (RawFd, std::net::SocketAddr) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    (l.into_raw_fd(), addr)
}

/// A connected pair: the client as a std stream, the server side raw.
pub(crate) fn pair() -> (TcpStream, RawFd) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
    let (s, _) = l.accept().unwrap();
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    (c, s.into_raw_fd())
}

/// Polls `cond` every millisecond until it holds; false after `limit`.
pub(crate) fn eventually(limit: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + limit;
    while Instant::now() < end {
        if cond() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    cond()
}

/// Whether descriptor number `fd` is open in this process.
pub(crate) fn is_open(fd: RawFd) -> bool {
    // SAFETY: F_GETFD only queries the descriptor table.
    unsafe { libc::fcntl(fd, libc::F_GETFD) >= 0 }
}

/// Writes `msg` and reads the same number of bytes back.
pub(crate) fn round_trip(c: &mut TcpStream, msg: &[u8]) -> Vec<u8> {
    c.write_all(msg).unwrap();
    let mut back = vec![0u8; msg.len()];
    c.read_exact(&mut back).unwrap();
    back
}

/// One `pollfd` per descriptor, each waiting for `events`.
pub(crate) fn pollfds(fds: &[RawFd], events: libc::c_short) -> Vec<libc::pollfd> {
    fds.iter()
        .map(|&fd| libc::pollfd {
            fd,
            events,
            revents: 0,
        })
        .collect()
}
