//! The listening socket and the accept path shared by every engine, including
//! the answer to running out of descriptors: a reserve descriptor is given up
//! to accept and immediately close the connection that does not fit, so an
//! `EMFILE` neither stops the accept loop nor leaves a level-triggered listener
//! spinning a core.
//!
//! With several loops (`--workers`) the reserves form one pool for the
//! process ([`Reserves`], one descriptor per loop) and the descriptor a
//! loop gives up must reach its own accept: every accept of the process
//! holds the pool's lock for reading, a shed holds it for writing, so no
//! other loop's accept can take the descriptor in between (which left
//! the shedding loop without a reserve for good, its queue stuck, and its
//! accept failing every back-off; issue 33). A loop can shed with any
//! reserve of the pool, so one lost to a descriptor taken outside the
//! lock (io_uring's in-kernel accepts) does not stop it either.

use connlab_os::reserve::{FdReserve, Shed};
use socket2::{Domain, Socket, Type};
use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::{Arc, RwLock};

/// What one accept attempt produced.
pub(crate) enum Accepted {
    /// A new connection, TCP_NODELAY set.
    Connection(OwnedFd),
    /// Nothing is pending.
    WouldBlock,
    /// The descriptor limit was reached: the connection was accepted and
    /// closed. `episode_began`: the accept before this one succeeded (or
    /// none came before), so a new stretch at the limit starts here.
    Shed { episode_began: bool },
    /// An accept failure such as ENOBUFS, or the limit held so hard that
    /// not even the reserve could be had (counted; the caller stops
    /// accepting for [`ACCEPT_BACKOFF`] instead of asking again at once).
    Failed,
}

/// How long an engine stops watching the listener after
/// [`Accepted::Failed`]: a level-triggered listener with a connection
/// queued would otherwise wake the loop at once, again and again.
pub(crate) const ACCEPT_BACKOFF: std::time::Duration = std::time::Duration::from_millis(10);

/// The reserve descriptors of every loop of a server, and the lock that
/// keeps other accepts out while one loop sheds with them.
#[derive(Debug)]
pub(crate) struct Reserves(RwLock<Vec<FdReserve>>);

impl Reserves {
    /// `count` reserve descriptors (one per loop), opened now.
    pub(crate) fn new(count: usize) -> Arc<Reserves> {
        Arc::new(Reserves(RwLock::new(
            (0..count.max(1)).map(|_| FdReserve::new()).collect(),
        )))
    }
}

/// A non-blocking listening TCP socket.
pub(crate) struct Listener {
    /// Shared by the loops of `--accept shared`, under one descriptor number.
    socket: Arc<Socket>,
    /// Shared by all the loops of the server.
    reserves: Arc<Reserves>,
    /// A connection was shed and none accepted since: the descriptor
    /// limit is (still) in force.
    at_limit: bool,
}

impl Listener {
    /// Binds `addr`; `reuse_port` sets `SO_REUSEPORT` first, so several
    /// listeners of this process can share the address (one per loop).
    /// `reserves`: the server's pool, shared by all its listeners.
    pub(crate) fn bind(
        addr: SocketAddr,
        backlog: i32,
        reuse_port: bool,
        reserves: &Arc<Reserves>,
    ) -> io::Result<Listener> {
        let socket = Socket::new(Domain::for_address(addr), Type::STREAM.cloexec(), None)?;
        socket.set_reuse_address(true)?;
        if reuse_port {
            socket.set_reuse_port(true)?;
        }
        socket.bind(&addr.into())?;
        socket.listen(backlog)?;
        socket.set_nonblocking(true)?;
        Ok(Listener {
            socket: Arc::new(socket),
            reserves: Arc::clone(reserves),
            at_limit: false,
        })
    }

    pub(crate) fn local_addr(&self) -> io::Result<SocketAddr> {
        self.socket
            .local_addr()?
            .as_socket()
            .ok_or_else(|| io::Error::other("listening socket has no IP address"))
    }

    /// Another handle on the same listening socket, under the same
    /// descriptor number (closed when the last handle goes), for a loop
    /// that shares it. One number for all loops matters to `--engine
    /// rtsig`, whose signals name the descriptor the kernel was first given.
    pub(crate) fn share(&self) -> Listener {
        Listener {
            socket: Arc::clone(&self.socket),
            reserves: Arc::clone(&self.reserves),
            at_limit: false,
        }
    }

    pub(crate) fn fd(&self) -> RawFd {
        self.socket.as_raw_fd()
    }

    /// Accepts one connection; `nonblocking` sets O_NONBLOCK on it.
    pub(crate) fn accept(&mut self, nonblocking: bool) -> Accepted {
        loop {
            match self.accept_raw(nonblocking) {
                Ok(fd) => {
                    self.at_limit = false;
                    return Accepted::Connection(fd);
                }
                Err(e) => match e.raw_os_error() {
                    Some(libc::EAGAIN) => return Accepted::WouldBlock,
                    Some(libc::EINTR) | Some(libc::ECONNABORTED) => continue,
                    Some(libc::EMFILE) | Some(libc::ENFILE) => return self.shed(nonblocking),
                    _ => return Accepted::Failed,
                },
            }
        }
    }

    fn accept_raw(&self, nonblocking: bool) -> io::Result<OwnedFd> {
        // Read: loops accept side by side, but not while one sheds.
        let _gate = self.reserves.0.read().unwrap_or_else(|p| p.into_inner());
        accept_on(self.fd(), nonblocking)
    }

    /// Sheds one pending connection with a reserve descriptor of the pool
    /// ([`FdReserve`]: the connection is closed before the reserve is taken
    /// back; reopening first left the reserve gone for good and a
    /// level-triggered listener waking the loop forever, issue 29). A held
    /// reserve is used first; one lost earlier is reopened if a descriptor
    /// is free again.
    fn shed(&mut self, nonblocking: bool) -> Accepted {
        let fd = self.fd();
        let mut pool = self.reserves.0.write().unwrap_or_else(|p| p.into_inner());
        let pick = pool.iter().position(FdReserve::is_held).unwrap_or(0);
        let mut outcome = Shed::Stuck;
        if let Some(reserve) = pool.get_mut(pick) {
            outcome = reserve.shed(|| accept_on(fd, nonblocking).map(drop));
        }
        match outcome {
            Shed::One => Accepted::Shed {
                episode_began: !std::mem::replace(&mut self.at_limit, true),
            },
            Shed::Empty => Accepted::WouldBlock,
            Shed::Stuck => Accepted::Failed,
        }
    }
}

/// Accepts one connection on listener `fd` (TCP_NODELAY set).
fn accept_on(fd: RawFd, nonblocking: bool) -> io::Result<OwnedFd> {
    let flags = libc::SOCK_CLOEXEC | if nonblocking { libc::SOCK_NONBLOCK } else { 0 };
    // SAFETY: accept4 with null address pointers is valid; the result is checked.
    let fd = unsafe { libc::accept4(fd, std::ptr::null_mut(), std::ptr::null_mut(), flags) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: accept4 returned a new descriptor that nothing else owns.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    set_nodelay(fd.as_raw_fd());
    Ok(fd)
}

/// TCP_NODELAY on an accepted connection, as every engine serves it. A
/// failure only costs latency.
pub(crate) fn set_nodelay(fd: RawFd) {
    let one: libc::c_int = 1;
    // SAFETY: valid socket, option pointer and length.
    unsafe {
        libc::setsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_NODELAY,
            (&one as *const libc::c_int).cast(),
            size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
}
