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
//! want belt and braces. The exception is a descriptor several instances
//! watch at once ([`RtSig::register_shared`]): its signals go to the
//! process, so every thread must block them.
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
mod threads;
mod wait;

pub use table::Ready;
pub use wait::FdSet;

use std::io;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Duration;
use table::{Table, WatchError};
use threads::{signal_loop, timer_loop};

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

    /// Watches a descriptor that several [`RtSig`] instances of this
    /// process watch at once under the same number (a listening socket
    /// that several event loops accept from), from `initial`.
    ///
    /// The signal owner belongs to the open file, not to an instance, so
    /// such a descriptor cannot name one signal thread: it is armed with
    /// the process as owner (`F_OWNER_PID`), and each of its signals is
    /// taken by the one instance whose signal thread reads it first (the
    /// others are not woken, like `EPOLLEXCLUSIVE`); an overflow `SIGIO`
    /// for it likewise recovers one instance. Every thread of the process
    /// must then block the signals ([`block_signals`]): a process-directed
    /// signal goes to any thread that does not, where its default action
    /// ends the process.
    pub fn register_shared(&self, fd: RawFd, initial: Ready) -> io::Result<()> {
        let mut table = lock(&self.shared);
        self.watch_as(&mut table, fd, initial, sys::Owner::Process)
    }

    fn watch_locked(&self, table: &mut Table, fd: RawFd, initial: Ready) -> io::Result<()> {
        self.watch_as(table, fd, initial, sys::Owner::Thread(self.shared.tid))
    }

    fn watch_as(
        &self,
        table: &mut Table,
        fd: RawFd,
        initial: Ready,
        owner: sys::Owner,
    ) -> io::Result<()> {
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
        if let Err(e) = sys::arm(fd, self.shared.signal, owner) {
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
