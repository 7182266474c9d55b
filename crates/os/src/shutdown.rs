//! A shutdown request that event loops can wait on: SIGINT/SIGTERM (or a call
//! to [`Shutdown::trigger`]) set a flag and make a pipe readable, so a loop
//! blocked in `select`/`poll`/`epoll_wait` wakes up at once.

use crate::OsError;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::Arc;

/// A one-way "please stop" latch with a wake-up descriptor.
#[derive(Clone)]
pub struct Shutdown {
    inner: Arc<Inner>,
}

struct Inner {
    flag: Arc<AtomicBool>,
    signal: Arc<AtomicI32>,
    read_end: OwnedFd,
    write_end: OwnedFd,
}

impl Shutdown {
    /// A latch not yet connected to any signal.
    pub fn new() -> Result<Self, OsError> {
        let (read_end, write_end) =
            nix::unistd::pipe2(nix::fcntl::OFlag::O_NONBLOCK | nix::fcntl::OFlag::O_CLOEXEC)
                .map_err(|e| OsError::Sys {
                    call: "pipe2",
                    source: e.into(),
                })?;
        Ok(Shutdown {
            inner: Arc::new(Inner {
                flag: Arc::new(AtomicBool::new(false)),
                signal: Arc::new(AtomicI32::new(0)),
                read_end,
                write_end,
            }),
        })
    }

    /// A latch that SIGINT and SIGTERM trip.
    pub fn on_termination_signals() -> Result<Self, OsError> {
        let s = Shutdown::new()?;
        for sig in [libc::SIGINT, libc::SIGTERM] {
            let fail = |e: std::io::Error| OsError::Sys {
                call: "sigaction",
                source: e,
            };
            signal_hook::flag::register(sig, Arc::clone(&s.inner.flag)).map_err(fail)?;
            let signal = Arc::clone(&s.inner.signal);
            // SAFETY: the action only stores into an atomic, which is async-signal-safe.
            unsafe {
                signal_hook::low_level::register(sig, move || signal.store(sig, Ordering::SeqCst))
            }
            .map_err(fail)?;
            let write = s.inner.write_end.try_clone().map_err(|e| OsError::Sys {
                call: "dup",
                source: e,
            })?;
            signal_hook::low_level::pipe::register(sig, write).map_err(fail)?;
        }
        Ok(s)
    }

    /// Trips the latch from code (tests, a parent thread).
    pub fn trigger(&self) {
        self.inner.flag.store(true, Ordering::SeqCst);
        // A full pipe already wakes the reader, so the write result does not matter.
        let _ = nix::unistd::write(&self.inner.write_end, &[1]);
    }

    /// True once a stop was asked for.
    pub fn requested(&self) -> bool {
        self.inner.flag.load(Ordering::SeqCst)
    }

    /// The signal that tripped the latch, if one did.
    pub fn signal(&self) -> Option<i32> {
        match self.inner.signal.load(Ordering::SeqCst) {
            0 => None,
            s => Some(s),
        }
    }

    /// Waits until the latch trips or `timeout` passes; returns whether a
    /// stop was asked for.
    pub fn wait(&self, timeout: std::time::Duration) -> bool {
        if !self.requested() {
            let mut p = libc::pollfd {
                fd: self.wake_fd(),
                events: libc::POLLIN,
                revents: 0,
            };
            let ms = timeout.as_millis().min(i32::MAX as u128) as libc::c_int;
            // SAFETY: one valid pollfd for the duration of the call.
            unsafe { libc::poll(&mut p, 1, ms) };
        }
        self.requested()
    }

    /// A descriptor that becomes readable when the latch trips; add it to any
    /// readiness set. It stays readable afterwards.
    pub fn wake_fd(&self) -> RawFd {
        self.inner.read_end.as_raw_fd()
    }
}
