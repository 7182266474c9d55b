//! Opening every connection before measuring: non-blocking `connect` with a
//! bounded number in flight, spread round-robin over the source addresses.

use crate::workload::Progress;
use connlab_os::Shutdown;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};

/// Connects in flight at once (well under the default SYN backlog).
const IN_FLIGHT: usize = 256;
/// A connect that has not finished after this long fails.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// `IP_BIND_ADDRESS_NO_PORT` (linux/in.h): lets many connections share a
/// source address without reserving a port at bind time.
const IP_BIND_ADDRESS_NO_PORT: libc::c_int = 24;

/// The outcome of opening the connection set.
pub(crate) struct Opened {
    pub(crate) fds: Vec<OwnedFd>,
    pub(crate) failed: u64,
    pub(crate) first_error: Option<String>,
    pub(crate) elapsed: Duration,
    pub(crate) hit_fd_limit: bool,
}

pub(crate) fn open_all(
    target: SocketAddr,
    n: usize,
    source_addrs: &[IpAddr],
    progress: &Progress,
    shutdown: &Shutdown,
) -> io::Result<Opened> {
    let started = Instant::now();
    // SAFETY: plain syscall; the result is checked.
    let ep = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
    if ep < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: epoll_create1 returned a new descriptor we own.
    let ep = unsafe { OwnedFd::from_raw_fd(ep) };
    let mut out = Opened {
        fds: Vec::with_capacity(n),
        failed: 0,
        first_error: None,
        elapsed: Duration::ZERO,
        hit_fd_limit: false,
    };
    let mut waiting: Vec<Option<OwnedFd>> = Vec::new();
    let mut in_flight = 0usize;
    let mut next = 0usize;
    let mut last_progress = Instant::now();
    let mut events = vec![libc::epoll_event { events: 0, u64: 0 }; IN_FLIGHT];
    while (next < n || in_flight > 0) && !shutdown.requested() {
        while next < n && in_flight < IN_FLIGHT && !out.hit_fd_limit {
            let source =
                (!source_addrs.is_empty()).then(|| source_addrs[next % source_addrs.len()]);
            next += 1;
            match start_connect(target, source) {
                Ok((fd, true)) => {
                    out.fds.push(fd);
                    progress.established.fetch_add(1, Relaxed);
                }
                Ok((fd, false)) => {
                    let raw = fd.as_raw_fd();
                    let mut ev = libc::epoll_event {
                        events: libc::EPOLLOUT as u32,
                        u64: raw as u64,
                    };
                    // SAFETY: valid epoll and socket descriptors, valid event.
                    if unsafe { libc::epoll_ctl(ep.as_raw_fd(), libc::EPOLL_CTL_ADD, raw, &mut ev) }
                        < 0
                    {
                        fail(&mut out, io::Error::last_os_error());
                        continue;
                    }
                    if waiting.len() <= raw as usize {
                        waiting.resize_with(raw as usize + 1, || None);
                    }
                    waiting[raw as usize] = Some(fd);
                    in_flight += 1;
                }
                Err(e) => {
                    if e.raw_os_error() == Some(libc::EMFILE) {
                        out.hit_fd_limit = true;
                        out.failed += (n - next) as u64;
                    }
                    fail(&mut out, e);
                }
            }
        }
        if in_flight == 0 {
            if out.hit_fd_limit {
                break;
            }
            continue;
        }
        // SAFETY: `events` has room for IN_FLIGHT entries.
        let k = unsafe {
            libc::epoll_wait(
                ep.as_raw_fd(),
                events.as_mut_ptr(),
                IN_FLIGHT as libc::c_int,
                100,
            )
        };
        if k < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        if k > 0 {
            last_progress = Instant::now();
        }
        for ev in &events[..k.max(0) as usize] {
            let raw = ev.u64 as RawFd;
            let Some(fd) = waiting.get_mut(raw as usize).and_then(Option::take) else {
                continue;
            };
            in_flight -= 1;
            // SAFETY: removing a registered descriptor; the event argument may be null.
            unsafe {
                libc::epoll_ctl(
                    ep.as_raw_fd(),
                    libc::EPOLL_CTL_DEL,
                    raw,
                    std::ptr::null_mut(),
                )
            };
            match socket_error(raw) {
                None => {
                    out.fds.push(fd);
                    progress.established.fetch_add(1, Relaxed);
                }
                Some(e) => fail(&mut out, e),
            }
        }
        if last_progress.elapsed() > CONNECT_TIMEOUT {
            for slot in waiting.iter_mut() {
                if slot.take().is_some() {
                    in_flight -= 1;
                    fail(
                        &mut out,
                        io::Error::new(io::ErrorKind::TimedOut, "connect timed out"),
                    );
                }
            }
        }
    }
    out.elapsed = started.elapsed();
    Ok(out)
}

fn fail(out: &mut Opened, e: io::Error) {
    out.failed += 1;
    if out.first_error.is_none() {
        out.first_error = Some(e.to_string());
    }
}

/// Creates a non-blocking socket and starts connecting; true when already connected.
fn start_connect(target: SocketAddr, source: Option<IpAddr>) -> io::Result<(OwnedFd, bool)> {
    let domain = if target.is_ipv4() {
        libc::AF_INET
    } else {
        libc::AF_INET6
    };
    // SAFETY: plain syscall; the result is checked.
    let fd = unsafe {
        libc::socket(
            domain,
            libc::SOCK_STREAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
            0,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: socket() returned a new descriptor we own.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    set_int(fd.as_raw_fd(), libc::IPPROTO_TCP, libc::TCP_NODELAY, 1);
    if let Some(src) = source {
        set_int(fd.as_raw_fd(), libc::IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, 1);
        let (addr, len) = sockaddr(SocketAddr::new(src, 0));
        // SAFETY: `addr` is a valid sockaddr of `len` bytes.
        if unsafe {
            libc::bind(
                fd.as_raw_fd(),
                (&addr as *const libc::sockaddr_storage).cast(),
                len,
            )
        } < 0
        {
            return Err(io::Error::last_os_error());
        }
    }
    let (addr, len) = sockaddr(target);
    // SAFETY: `addr` is a valid sockaddr of `len` bytes.
    let r = unsafe {
        libc::connect(
            fd.as_raw_fd(),
            (&addr as *const libc::sockaddr_storage).cast(),
            len,
        )
    };
    if r == 0 {
        return Ok((fd, true));
    }
    let e = io::Error::last_os_error();
    if e.raw_os_error() == Some(libc::EINPROGRESS) {
        Ok((fd, false))
    } else {
        Err(e)
    }
}

fn socket_error(fd: RawFd) -> Option<io::Error> {
    let mut err: libc::c_int = 0;
    let mut len = size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: valid socket, option buffer and length.
    let r = unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_ERROR,
            (&mut err as *mut libc::c_int).cast(),
            &mut len,
        )
    };
    if r < 0 {
        return Some(io::Error::last_os_error());
    }
    (err != 0).then(|| io::Error::from_raw_os_error(err))
}

/// Sets an integer socket option; failure only loses the option.
fn set_int(fd: RawFd, level: libc::c_int, name: libc::c_int, value: usize) {
    let _ = connlab_os::tcp::set_int(fd, level, name, value);
}

fn sockaddr(addr: SocketAddr) -> (libc::sockaddr_storage, libc::socklen_t) {
    // SAFETY: all-zero is a valid sockaddr_storage.
    let mut storage: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    let len = match addr {
        SocketAddr::V4(a) => {
            let sin = libc::sockaddr_in {
                sin_family: libc::AF_INET as libc::sa_family_t,
                sin_port: a.port().to_be(),
                sin_addr: libc::in_addr {
                    s_addr: u32::from_ne_bytes(a.ip().octets()),
                },
                sin_zero: [0; 8],
            };
            // SAFETY: sockaddr_storage is larger than and aligned for sockaddr_in.
            unsafe { std::ptr::write((&mut storage as *mut libc::sockaddr_storage).cast(), sin) };
            size_of::<libc::sockaddr_in>()
        }
        SocketAddr::V6(a) => {
            let sin6 = libc::sockaddr_in6 {
                sin6_family: libc::AF_INET6 as libc::sa_family_t,
                sin6_port: a.port().to_be(),
                sin6_flowinfo: a.flowinfo(),
                sin6_addr: libc::in6_addr {
                    s6_addr: a.ip().octets(),
                },
                sin6_scope_id: a.scope_id(),
            };
            // SAFETY: sockaddr_storage is larger than and aligned for sockaddr_in6.
            unsafe { std::ptr::write((&mut storage as *mut libc::sockaddr_storage).cast(), sin6) };
            size_of::<libc::sockaddr_in6>()
        }
    };
    (storage, len as libc::socklen_t)
}
