//! `connlab-rtsig`: a `poll`/`select` API whose readiness table is kept by
//! POSIX real-time signals and by the results of non-blocking I/O, after
//! the RT-signal polling paper. Usable on its own, without the rest of
//! connlab.
//!
//! Every descriptor the library watches is armed with `F_SETSIG` and
//! `O_ASYNC`, owned (`F_SETOWN_EX`, `F_OWNER_TID`) by one signal thread the
//! library starts. That thread reads the queued signals from a signalfd and
//! sets bits in the [readiness table](Ready); the application's reads and
//! writes, made through the library, clear them when they come up short or
//! fail with `EAGAIN`. [`RtSig::poll`] and [`RtSig::select`] then answer from
//! the table without asking the kernel about every descriptor, which is
//! what makes them cheap when few of many connections are active.
//!
//! - **Deferred close**: [`RtSig::close`] disarms and shuts the socket down,
//!   then parks the number until the signal thread has seen the queue empty;
//!   a timer thread closes parked descriptors about every 100 ms. A reused
//!   descriptor number therefore never receives a stale event.
//! - **Overflow**: when the real-time queue is full the kernel sends a plain
//!   `SIGIO`; the library then marks every descriptor readable and writable,
//!   aggregating overflows within [`Options::overflow_delay`].
//! - **Blocking calls** ([`RtSig::read_blocking`], [`RtSig::write_blocking`],
//!   [`RtSig::accept_blocking`]) wait on a per-descriptor condition.
//!
//! The signals go to the library's own thread only, so other threads need
//! not block them; [`block_signals`] blocks them anyway for programs that
//! want belt and braces.
//!
//! ```no_run
//! use connlab_rtsig::RtSig;
//! # fn main() -> std::io::Result<()> {
//! let rt = RtSig::new()?;
//! let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
//! let lfd = std::os::fd::IntoRawFd::into_raw_fd(listener);
//! rt.register(lfd, connlab_rtsig::Ready::ACCEPTED)?;
//! let mut fds = vec![libc::pollfd { fd: lfd, events: libc::POLLIN, revents: 0 }];
//! let mut buf = [0u8; 4096];
//! loop {
//!     rt.poll(&mut fds, None)?;
//!     let mut i = 1;
//!     while i < fds.len() {
//!         if fds[i].revents & libc::POLLIN != 0 {
//!             match rt.read(fds[i].fd, &mut buf) {
//!                 Ok(0) | Err(_) => { rt.close(fds[i].fd)?; fds.swap_remove(i); continue; }
//!                 Ok(n) => { let _ = rt.write(fds[i].fd, &buf[..n]); }
//!             }
//!         }
//!         i += 1;
//!     }
//!     if fds[0].revents & libc::POLLIN != 0 {
//!         while let Ok(fd) = rt.accept(lfd) {
//!             fds.push(libc::pollfd { fd, events: libc::POLLIN, revents: 0 });
//!         }
//!     }
//! }
//! # }
//! ```

mod sys;
mod table;

pub use table::Ready;

use std::io;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use table::{Table, WatchError};

/// How the library is set up.
#[derive(Clone, Debug)]
pub struct Options {
    /// The real-time signal used, as an offset from `SIGRTMIN` (computed at
    /// run time: glibc reserves the first few). Default 0.
    pub signal_offset: i32,
    /// Overflows within this delay of the last recovery are handled by one
    /// later recovery (the paper: 1 s). Default 1 s.
    pub overflow_delay: Duration,
    /// How often the timer thread closes parked descriptors. Default 100 ms.
    pub close_interval: Duration,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            signal_offset: 0,
            overflow_delay: Duration::from_secs(1),
            close_interval: Duration::from_millis(100),
        }
    }
}

/// What the library has done so far.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Real-time signals read from the queue.
    pub signals: u64,
    /// Overflow notifications (plain `SIGIO`) received.
    pub overflows: u64,
    /// Times every descriptor was marked ready because of overflows.
    pub recoveries: u64,
    /// Descriptors closed by the timer thread after being parked.
    pub closed: u64,
    /// Descriptors watched now.
    pub watched: usize,
    /// Descriptors parked now (closed by the application, not yet released).
    pub parked: usize,
}

struct Shared {
    table: Mutex<Table>,
    /// Wakes threads waiting in `poll`/`select`.
    poll_cond: Condvar,
    /// Wakes the timer thread at shutdown.
    timer_cond: Condvar,
    signal: libc::c_int,
    /// Thread id of the signal thread (the owner of every armed descriptor).
    tid: libc::pid_t,
    stop: AtomicBool,
    /// Eventfd that wakes the signal thread to stop.
    stop_fd: RawFd,
    signals: AtomicU64,
    overflows: AtomicU64,
    recoveries: AtomicU64,
    closed: AtomicU64,
}

/// The RT-signal poller: a readiness table, the signal thread that keeps it
/// and the timer thread that releases closed descriptors. Share it between
/// threads by reference (`&RtSig` is `Send`); dropping it stops both
/// threads, closes parked descriptors and disarms the watched ones (which
/// stay open).
pub struct RtSig {
    shared: Arc<Shared>,
    threads: Vec<JoinHandle<()>>,
}

/// Blocks the library's signals (the real-time one for `options` and
/// `SIGIO`) in the calling thread and in the threads it spawns afterwards.
/// Not required: the kernel directs the signals to the library's own thread.
pub fn block_signals(options: &Options) -> io::Result<()> {
    sys::block(&sys::signal_set(rt_signal(options)?))
}

fn rt_signal(options: &Options) -> io::Result<libc::c_int> {
    let sig = libc::SIGRTMIN() + options.signal_offset;
    if options.signal_offset < 0 || sig > libc::SIGRTMAX() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "signal_offset {} is outside SIGRTMIN..=SIGRTMAX ({}..={})",
                options.signal_offset,
                libc::SIGRTMIN(),
                libc::SIGRTMAX()
            ),
        ));
    }
    Ok(sig)
}

fn lock(shared: &Shared) -> MutexGuard<'_, Table> {
    // A panic while holding the lock cannot leave the table half-updated in
    // a way that matters more than losing the whole process; keep going.
    shared.table.lock().unwrap_or_else(|p| p.into_inner())
}

impl RtSig {
    /// Starts the library with default [`Options`].
    pub fn new() -> io::Result<RtSig> {
        RtSig::with_options(Options::default())
    }

    /// Starts the library: the signal thread (signalfd on the real-time
    /// signal and `SIGIO`) and the timer thread.
    pub fn with_options(options: Options) -> io::Result<RtSig> {
        let signal = rt_signal(&options)?;
        let set = sys::signal_set(signal);
        let delay = options.overflow_delay;
        // The signal thread reports its kernel thread id (every armed
        // descriptor names it as owner), then waits for the shared state.
        let (id_tx, id_rx) = std::sync::mpsc::channel::<io::Result<libc::pid_t>>();
        let (shared_tx, shared_rx) = std::sync::mpsc::channel::<Arc<Shared>>();
        let signal_thread = std::thread::Builder::new()
            .name("rtsig-signals".into())
            .spawn(move || {
                let sfd = match sys::block(&set).and_then(|()| sys::signalfd(&set)) {
                    Ok(sfd) => sfd,
                    Err(e) => {
                        let _ = id_tx.send(Err(e));
                        return;
                    }
                };
                let _ = id_tx.send(Ok(sys::gettid()));
                if let Ok(shared) = shared_rx.recv() {
                    signal_loop(&shared, sfd, delay);
                }
                sys::close(sfd);
            })
            .map_err(|e| io::Error::new(e.kind(), format!("rtsig: spawn: {e}")))?;
        let tid = match id_rx.recv() {
            Ok(Ok(tid)) => tid,
            Ok(Err(e)) => {
                let _ = signal_thread.join();
                return Err(e);
            }
            Err(_) => return Err(io::Error::other("rtsig: the signal thread died at start")),
        };
        let stop_fd = match sys::eventfd() {
            Ok(fd) => fd,
            Err(e) => {
                drop(shared_tx);
                let _ = signal_thread.join();
                return Err(e);
            }
        };
        let shared = Arc::new(Shared {
            table: Mutex::new(Table::default()),
            poll_cond: Condvar::new(),
            timer_cond: Condvar::new(),
            signal,
            tid,
            stop: AtomicBool::new(false),
            stop_fd,
            signals: AtomicU64::new(0),
            overflows: AtomicU64::new(0),
            recoveries: AtomicU64::new(0),
            closed: AtomicU64::new(0),
        });
        let _ = shared_tx.send(shared.clone());
        let mut rt = RtSig {
            shared: shared.clone(),
            threads: vec![signal_thread],
        };
        let interval = options.close_interval;
        let timer = std::thread::Builder::new()
            .name("rtsig-timer".into())
            .spawn(move || timer_loop(&shared, interval))
            .map_err(|e| io::Error::new(e.kind(), format!("rtsig: spawn: {e}")))?;
        rt.threads.push(timer);
        Ok(rt)
    }
}

fn not_watched(fd: RawFd) -> io::Error {
    io::Error::new(
        io::ErrorKind::NotFound,
        format!("rtsig: descriptor {fd} is not registered"),
    )
}

impl RtSig {
    /// The real-time signal number in use.
    pub fn signal(&self) -> libc::c_int {
        self.shared.signal
    }

    /// Counters and table sizes.
    pub fn stats(&self) -> Stats {
        let (watched, parked) = lock(&self.shared).counts();
        Stats {
            signals: self.shared.signals.load(Relaxed),
            overflows: self.shared.overflows.load(Relaxed),
            recoveries: self.shared.recoveries.load(Relaxed),
            closed: self.shared.closed.load(Relaxed),
            watched,
            parked,
        }
    }

    /// What the table believes about `fd` (None when not registered).
    pub fn readiness(&self, fd: RawFd) -> Option<Ready> {
        lock(&self.shared).ready(fd)
    }

    /// Watches an existing descriptor (socket, pipe, ...) from `initial`:
    /// makes it non-blocking and arms its signals. Use [`Ready::ACCEPTED`]
    /// for a listener that may already have connections waiting.
    pub fn register(&self, fd: RawFd, initial: Ready) -> io::Result<()> {
        let mut table = lock(&self.shared);
        self.watch_locked(&mut table, fd, initial)
    }

    fn watch_locked(&self, table: &mut Table, fd: RawFd, initial: Ready) -> io::Result<()> {
        match table.watch(fd, initial) {
            Ok(()) => {}
            Err(WatchError::Invalid) => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("rtsig: descriptor {fd} is negative"),
                ))
            }
            Err(WatchError::Watched) => {
                return Err(io::Error::new(
                    io::ErrorKind::AlreadyExists,
                    format!("rtsig: descriptor {fd} is already registered"),
                ))
            }
            Err(WatchError::Parked) => {
                return Err(io::Error::new(
                    io::ErrorKind::AlreadyExists,
                    format!(
                        "rtsig: descriptor {fd} was closed through rtsig and is not released yet"
                    ),
                ))
            }
        }
        if let Err(e) = sys::arm(fd, self.shared.signal, self.shared.tid) {
            table.forget(fd);
            return Err(e);
        }
        Ok(())
    }

    /// Stops watching `fd` without closing it (its signals are disarmed).
    pub fn deregister(&self, fd: RawFd) -> io::Result<()> {
        let mut table = lock(&self.shared);
        if !table.is_watched(fd) {
            return Err(not_watched(fd));
        }
        sys::disarm(fd);
        table.forget(fd);
        Ok(())
    }

    /// `socket(2)`: a non-blocking socket, watched, initially writable and
    /// not readable.
    pub fn socket(
        &self,
        domain: libc::c_int,
        ty: libc::c_int,
        protocol: libc::c_int,
    ) -> io::Result<RawFd> {
        // SAFETY: no pointers involved.
        let fd = unsafe {
            libc::socket(
                domain,
                ty | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
                protocol,
            )
        };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        if let Err(e) = self.register(fd, Ready::NEW_SOCKET) {
            sys::close(fd);
            return Err(e);
        }
        Ok(fd)
    }

    /// Non-blocking `accept(2)` on a watched listener: `EAGAIN` clears the
    /// listener's readable bit; an accepted socket is watched from
    /// [`Ready::ACCEPTED`] before the call returns.
    pub fn accept(&self, listener: RawFd) -> io::Result<RawFd> {
        let mut table = lock(&self.shared);
        self.accept_locked(&mut table, listener)
    }

    fn accept_locked(&self, table: &mut Table, listener: RawFd) -> io::Result<RawFd> {
        if !table.is_watched(listener) {
            return Err(not_watched(listener));
        }
        // SAFETY: null address pointers are allowed.
        let fd = unsafe {
            libc::accept4(
                listener,
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
            )
        };
        let result = if fd < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(1)
        };
        table.after_input(listener, 1, &result);
        result?;
        if let Err(e) = self.watch_locked(table, fd, Ready::ACCEPTED) {
            sys::close(fd);
            return Err(e);
        }
        Ok(fd)
    }

    /// Runs a non-blocking input call on `fd` (for example `recv` or
    /// `recvmsg`) that asked for `requested` bytes, and updates the table
    /// from its result under the same lock: a short count or `EAGAIN`
    /// clears readable. `op` must not block and must not call the library.
    pub fn input<F>(&self, fd: RawFd, requested: usize, op: F) -> io::Result<usize>
    where
        F: FnOnce() -> io::Result<usize>,
    {
        let mut table = lock(&self.shared);
        let result = op();
        table.after_input(fd, requested, &result);
        result
    }

    /// Runs a non-blocking output call on `fd` (for example `sendmsg`) that
    /// offered `requested` bytes, and updates the table from its result
    /// under the same lock: a short count or `EAGAIN` clears writable.
    /// `op` must not block and must not call the library.
    pub fn output<F>(&self, fd: RawFd, requested: usize, op: F) -> io::Result<usize>
    where
        F: FnOnce() -> io::Result<usize>,
    {
        let mut table = lock(&self.shared);
        let result = op();
        table.after_output(fd, requested, &result);
        result
    }

    /// Non-blocking `read(2)` through the table.
    pub fn read(&self, fd: RawFd, buf: &mut [u8]) -> io::Result<usize> {
        self.input(fd, buf.len(), || raw_read(fd, buf))
    }

    /// Non-blocking `write(2)` through the table (`send` with `MSG_NOSIGNAL`
    /// on sockets, so a closed peer is an error, not `SIGPIPE`).
    pub fn write(&self, fd: RawFd, buf: &[u8]) -> io::Result<usize> {
        self.output(fd, buf.len(), || raw_write(fd, buf))
    }

    /// Deferred `close(2)`: disarms `fd`, shuts the socket down (the peer
    /// sees end of file at once) and parks the number; the timer thread
    /// closes it once the signal queue holds no event for it. Descriptors
    /// the library does not watch are closed at once.
    pub fn close(&self, fd: RawFd) -> io::Result<()> {
        let mut table = lock(&self.shared);
        if !table.is_watched(fd) {
            drop(table);
            if fd < 0 {
                return Err(not_watched(fd));
            }
            sys::close(fd);
            return Ok(());
        }
        // Disarm first: once O_ASYNC is clear no new signal names `fd`, and
        // the shutdown below cannot queue one either.
        sys::disarm(fd);
        // SAFETY: plain syscall on a descriptor the caller owns; errors
        // (not a socket, not connected) are expected and ignored.
        unsafe { libc::shutdown(fd, libc::SHUT_RDWR) };
        table.park(fd);
        Ok(())
    }

    /// `poll(2)` answered from the readiness table: fills each entry's
    /// `revents` (`POLLNVAL` for descriptors not registered, nothing for
    /// negative ones) and returns how many have events. Waits until one
    /// has, or `timeout` passes (`None`: forever; zero: do not wait).
    pub fn poll(&self, fds: &mut [libc::pollfd], timeout: Option<Duration>) -> io::Result<usize> {
        let deadline = timeout.map(|t| Instant::now() + t);
        let mut table = lock(&self.shared);
        loop {
            let n = table.scan(fds);
            if n > 0 {
                return Ok(n);
            }
            match self.wait_poll(table, deadline) {
                Some(t) => table = t,
                None => return Ok(0),
            }
        }
    }

    /// Waits on the poll condition; None when the deadline has passed.
    fn wait_poll<'a>(
        &'a self,
        mut table: MutexGuard<'a, Table>,
        deadline: Option<Instant>,
    ) -> Option<MutexGuard<'a, Table>> {
        table.poll_waiters += 1;
        let mut table = match deadline {
            None => self
                .shared
                .poll_cond
                .wait(table)
                .unwrap_or_else(|p| p.into_inner()),
            Some(d) => {
                let now = Instant::now();
                if now >= d {
                    table.poll_waiters -= 1;
                    return None;
                }
                self.shared
                    .poll_cond
                    .wait_timeout(table, d - now)
                    .unwrap_or_else(|p| p.into_inner())
                    .0
            }
        };
        table.poll_waiters -= 1;
        Some(table)
    }

    /// `select(2)` answered from the readiness table, over descriptors
    /// `0..nfds`. On return each set holds the ready descriptors; a pending
    /// error shows as readable and writable (as on Linux) and is cleared.
    /// The exception set is always returned empty (urgent data is not
    /// tracked). A descriptor in a set but not registered is `EBADF`.
    pub fn select(
        &self,
        nfds: usize,
        mut readfds: Option<&mut FdSet>,
        mut writefds: Option<&mut FdSet>,
        exceptfds: Option<&mut FdSet>,
        timeout: Option<Duration>,
    ) -> io::Result<usize> {
        if nfds > FdSet::CAPACITY {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "rtsig: select nfds {nfds} exceeds FD_SETSIZE {}",
                    FdSet::CAPACITY
                ),
            ));
        }
        let want_r = readfds.as_deref().copied();
        let want_w = writefds.as_deref().copied();
        if let Some(e) = exceptfds {
            e.clear();
        }
        let deadline = timeout.map(|t| Instant::now() + t);
        let mut table = lock(&self.shared);
        loop {
            let mut got_r = FdSet::new();
            let mut got_w = FdSet::new();
            let mut n = 0;
            for fd in 0..nfds as RawFd {
                let r = want_r.is_some_and(|s| s.contains(fd));
                let w = want_w.is_some_and(|s| s.contains(fd));
                if !r && !w {
                    continue;
                }
                let Some((is_r, is_w)) = table.select_one(fd, r, w) else {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidInput,
                        format!("rtsig: select: descriptor {fd} is not registered (EBADF)"),
                    ));
                };
                if is_r {
                    got_r.insert(fd);
                    n += 1;
                }
                if is_w {
                    got_w.insert(fd);
                    n += 1;
                }
            }
            if n > 0 || deadline.is_some_and(|d| Instant::now() >= d) {
                if let Some(s) = readfds.as_deref_mut() {
                    *s = got_r;
                }
                if let Some(s) = writefds.as_deref_mut() {
                    *s = got_w;
                }
                return Ok(n);
            }
            match self.wait_poll(table, deadline) {
                Some(t) => table = t,
                None => {
                    if let Some(s) = readfds.as_deref_mut() {
                        s.clear();
                    }
                    if let Some(s) = writefds.as_deref_mut() {
                        s.clear();
                    }
                    return Ok(0);
                }
            }
        }
    }

    /// Waits on `fd`'s condition until `is_ready` holds, then runs `op`
    /// under the lock; repeats while `op` says `EAGAIN`.
    fn blocking<T>(
        &self,
        fd: RawFd,
        is_ready: impl Fn(Ready) -> bool,
        mut op: impl FnMut(&mut Table) -> io::Result<T>,
    ) -> io::Result<T> {
        let mut table = lock(&self.shared);
        loop {
            let Some(ready) = table.ready(fd) else {
                return Err(not_watched(fd));
            };
            if is_ready(ready) {
                match op(&mut table) {
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    other => return other,
                }
                continue;
            }
            let Some(cond) = table.wait_on(fd) else {
                return Err(not_watched(fd));
            };
            table = cond.wait(table).unwrap_or_else(|p| p.into_inner());
            table.done_waiting(fd);
        }
    }

    /// Blocking `read(2)`: waits on `fd`'s condition until the table says
    /// readable, then reads (non-blocking) what is there.
    pub fn read_blocking(&self, fd: RawFd, buf: &mut [u8]) -> io::Result<usize> {
        let len = buf.len();
        self.blocking(
            fd,
            |r| r.readable,
            |table| {
                let result = raw_read(fd, buf);
                table.after_input(fd, len, &result);
                result
            },
        )
    }

    /// Blocking write of all of `buf`: writes what the socket takes and
    /// waits on `fd`'s condition for room for the rest.
    pub fn write_blocking(&self, fd: RawFd, buf: &[u8]) -> io::Result<usize> {
        let mut done = 0;
        while done < buf.len() {
            let rest = &buf[done..];
            done += self.blocking(
                fd,
                |r| r.writable,
                |table| {
                    let result = raw_write(fd, rest);
                    table.after_output(fd, rest.len(), &result);
                    result
                },
            )?;
        }
        Ok(done)
    }

    /// Blocking `accept(2)`: waits on the listener's condition until a
    /// connection is there; the new socket is watched.
    pub fn accept_blocking(&self, listener: RawFd) -> io::Result<RawFd> {
        self.blocking(
            listener,
            |r| r.readable,
            |table| self.accept_locked(table, listener),
        )
    }
}

fn raw_read(fd: RawFd, buf: &mut [u8]) -> io::Result<usize> {
    // SAFETY: `buf` is valid for writes of `buf.len()` bytes.
    sys::size_result(unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) })
}

fn raw_write(fd: RawFd, buf: &[u8]) -> io::Result<usize> {
    // SAFETY: `buf` is valid for reads of `buf.len()` bytes.
    let r = unsafe { libc::send(fd, buf.as_ptr().cast(), buf.len(), libc::MSG_NOSIGNAL) };
    match sys::size_result(r) {
        Err(e) if e.raw_os_error() == Some(libc::ENOTSOCK) => {
            // SAFETY: as above.
            sys::size_result(unsafe { libc::write(fd, buf.as_ptr().cast(), buf.len()) })
        }
        other => other,
    }
}

impl Drop for RtSig {
    fn drop(&mut self) {
        {
            let _table = lock(&self.shared);
            self.shared.stop.store(true, Relaxed);
            self.shared.timer_cond.notify_all();
        }
        sys::eventfd_signal(self.shared.stop_fd);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
        let mut table = lock(&self.shared);
        for fd in table.watched_fds() {
            sys::disarm(fd);
            table.forget(fd);
        }
        for fd in table.take_all_parked() {
            sys::close(fd);
        }
        self.shared.poll_cond.notify_all();
        sys::close(self.shared.stop_fd);
    }
}

/// A `select` descriptor set (`fd_set`): descriptors `0..FD_SETSIZE`.
#[derive(Clone, Copy)]
pub struct FdSet(libc::fd_set);

impl Default for FdSet {
    fn default() -> FdSet {
        FdSet::new()
    }
}

impl FdSet {
    /// Descriptors a set can hold (`FD_SETSIZE`).
    pub const CAPACITY: usize = libc::FD_SETSIZE;

    /// An empty set.
    pub fn new() -> FdSet {
        // SAFETY: an all-zero fd_set is an empty set (what FD_ZERO writes).
        FdSet(unsafe { std::mem::zeroed() })
    }

    fn in_range(fd: RawFd) -> bool {
        fd >= 0 && (fd as usize) < Self::CAPACITY
    }

    /// Adds `fd`; false (and nothing changed) when it is outside the set's range.
    pub fn insert(&mut self, fd: RawFd) -> bool {
        if !Self::in_range(fd) {
            return false;
        }
        // SAFETY: `fd` is inside 0..FD_SETSIZE.
        unsafe { libc::FD_SET(fd, &mut self.0) };
        true
    }

    /// Removes `fd`.
    pub fn remove(&mut self, fd: RawFd) {
        if Self::in_range(fd) {
            // SAFETY: `fd` is inside 0..FD_SETSIZE.
            unsafe { libc::FD_CLR(fd, &mut self.0) };
        }
    }

    /// Whether `fd` is in the set.
    pub fn contains(&self, fd: RawFd) -> bool {
        // SAFETY: `fd` is inside 0..FD_SETSIZE.
        Self::in_range(fd) && unsafe { libc::FD_ISSET(fd, &self.0) }
    }

    /// Empties the set.
    pub fn clear(&mut self) {
        *self = FdSet::new();
    }
}

/// The signal thread: reads queued signals from the signalfd in batches
/// and applies them to the table; on overflow marks everything ready (at
/// most once per `delay`); records when the queue was seen empty so parked
/// descriptors can be released.
fn signal_loop(shared: &Shared, sfd: RawFd, delay: Duration) {
    const BATCH: usize = 64;
    const RECORD: usize = size_of::<libc::signalfd_siginfo>();
    /// Longest sleep, so parks made while the thread sleeps are released.
    const TICK: Duration = Duration::from_millis(50);
    // SAFETY: signalfd_siginfo is plain data; all-zero is valid.
    let mut records: [libc::signalfd_siginfo; BATCH] = unsafe { std::mem::zeroed() };
    let mut last_recovery: Option<Instant> = None;
    let mut recovery_due: Option<Instant> = None;
    let recover = |table: &mut Table| {
        table.mark_all();
        shared.recoveries.fetch_add(1, Relaxed);
        shared.poll_cond.notify_all();
    };
    while !shared.stop.load(Relaxed) {
        let seq = lock(shared).park_seq();
        // SAFETY: `records` is valid for writes of its full size.
        let n = unsafe { libc::read(sfd, records.as_mut_ptr().cast(), size_of_val(&records)) };
        if n > 0 {
            // Every record of the read counts (several per read).
            let count = n as usize / RECORD;
            let mut table = lock(shared);
            let mut woke = false;
            let mut overflow = false;
            for r in &records[..count] {
                if r.ssi_signo as libc::c_int == shared.signal {
                    shared.signals.fetch_add(1, Relaxed);
                    woke |= table.on_signal(r.ssi_fd, r.ssi_band);
                } else if r.ssi_signo as libc::c_int == libc::SIGIO {
                    shared.overflows.fetch_add(1, Relaxed);
                    overflow = true;
                }
            }
            if overflow {
                let now = Instant::now();
                match last_recovery {
                    Some(t) if now < t + delay => {
                        recovery_due.get_or_insert(t + delay);
                    }
                    _ => {
                        recover(&mut table);
                        last_recovery = Some(now);
                        recovery_due = None;
                    }
                }
            }
            if woke && table.poll_waiters > 0 {
                shared.poll_cond.notify_all();
            }
            continue;
        }
        let e = io::Error::last_os_error();
        if e.kind() == io::ErrorKind::Interrupted {
            continue;
        }
        // The queue is empty: no event can name a descriptor parked up to `seq`.
        let now = Instant::now();
        {
            let mut table = lock(shared);
            table.drained(seq);
            if recovery_due.is_some_and(|due| now >= due) {
                recover(&mut table);
                last_recovery = Some(now);
                recovery_due = None;
            }
            if table.has_undrained() {
                continue;
            }
        }
        let mut wait = TICK;
        if let Some(due) = recovery_due {
            wait = wait.min(due.saturating_duration_since(now));
        }
        let mut fds = [
            libc::pollfd {
                fd: sfd,
                events: libc::POLLIN,
                revents: 0,
            },
            libc::pollfd {
                fd: shared.stop_fd,
                events: libc::POLLIN,
                revents: 0,
            },
        ];
        // SAFETY: `fds` is a valid pollfd array for the call.
        unsafe { libc::poll(fds.as_mut_ptr(), 2, wait.as_millis().max(1) as libc::c_int) };
    }
}

/// The timer thread: about every `interval`, closes the parked descriptors
/// the signal thread has cleared.
fn timer_loop(shared: &Shared, interval: Duration) {
    let mut table = lock(shared);
    while !shared.stop.load(Relaxed) {
        table = shared
            .timer_cond
            .wait_timeout(table, interval)
            .unwrap_or_else(|p| p.into_inner())
            .0;
        let fds = table.take_closable();
        if fds.is_empty() {
            continue;
        }
        // The numbers are free in the table but still open: close them
        // outside the lock; nobody can be handed these numbers before.
        drop(table);
        for &fd in &fds {
            sys::close(fd);
        }
        shared.closed.fetch_add(fds.len() as u64, Relaxed);
        table = lock(shared);
    }
}
