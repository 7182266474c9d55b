//! The kernel interface the library needs and `libc`/`nix` lack on x86_64:
//! `F_SETSIG`, `F_SETOWN_EX` and `struct f_owner_ex` (values from
//! `include/uapi/asm-generic/fcntl.h`), and the run-time `SIGRTMIN`.

use std::io;
use std::os::fd::RawFd;

/// `fcntl` command: the signal sent when I/O becomes possible (missing in `libc` on x86_64).
const F_SETSIG: libc::c_int = 10;
/// `fcntl` command: set the owner as a thread or process (missing in `libc` on x86_64).
const F_SETOWN_EX: libc::c_int = 15;
/// `f_owner_ex.type`: the owner is one thread.
const F_OWNER_TID: libc::c_int = 0;
/// `f_owner_ex.type`: the owner is the process (any thread may take the signal).
const F_OWNER_PID: libc::c_int = 1;

/// Who the kernel queues a descriptor's signals to.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Owner {
    /// One thread (`F_OWNER_TID`): only it can take them.
    Thread(libc::pid_t),
    /// The whole process (`F_OWNER_PID`): one thread takes each signal,
    /// whichever reads it first.
    Process,
}

/// `struct f_owner_ex` from `<linux/fcntl.h>`.
#[repr(C)]
struct FOwnerEx {
    kind: libc::c_int,
    pid: libc::pid_t,
}

/// The calling thread's kernel thread id.
pub(crate) fn gettid() -> libc::pid_t {
    // SAFETY: gettid has no preconditions.
    unsafe { libc::gettid() }
}

fn cvt(ret: libc::c_int, what: &str) -> io::Result<libc::c_int> {
    if ret < 0 {
        let e = io::Error::last_os_error();
        Err(io::Error::new(e.kind(), format!("{what}: {e}")))
    } else {
        Ok(ret)
    }
}

/// Makes `fd` non-blocking and has the kernel queue `signal` to `owner`
/// (with `si_fd` and `si_band`) whenever its readiness changes.
pub(crate) fn arm(fd: RawFd, signal: libc::c_int, owner: Owner) -> io::Result<()> {
    // SAFETY: plain fcntl call on a descriptor number; the kernel checks it.
    let rc = unsafe { libc::fcntl(fd, F_SETSIG, signal) };
    cvt(
        rc,
        "fcntl(F_SETSIG) (this kernel does not support real-time signal I/O?)",
    )?;
    let owner = match owner {
        Owner::Thread(tid) => FOwnerEx {
            kind: F_OWNER_TID,
            pid: tid,
        },
        Owner::Process => FOwnerEx {
            kind: F_OWNER_PID,
            // SAFETY: getpid has no preconditions.
            pid: unsafe { libc::getpid() },
        },
    };
    // SAFETY: `owner` is a valid f_owner_ex for the duration of the call.
    let rc = unsafe { libc::fcntl(fd, F_SETOWN_EX, &owner as *const FOwnerEx) };
    cvt(rc, "fcntl(F_SETOWN_EX)")?;
    // SAFETY: plain fcntl call.
    let flags = cvt(unsafe { libc::fcntl(fd, libc::F_GETFL) }, "fcntl(F_GETFL)")?;
    // SAFETY: plain fcntl call.
    let rc = unsafe { libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK | libc::O_ASYNC) };
    cvt(rc, "fcntl(F_SETFL, O_ASYNC)")?;
    Ok(())
}

/// Stops signal generation for `fd` (clears `O_ASYNC`). Once this returns,
/// the kernel queues no new signal for the descriptor.
pub(crate) fn disarm(fd: RawFd) {
    // SAFETY: plain fcntl calls on a descriptor number; the kernel checks it.
    unsafe {
        let flags = libc::fcntl(fd, libc::F_GETFL);
        if flags >= 0 {
            libc::fcntl(fd, libc::F_SETFL, flags & !libc::O_ASYNC);
        }
    }
}

/// The signal set of the library: its real-time signal and `SIGIO`, which
/// the kernel sends instead when the real-time queue is full.
pub(crate) fn signal_set(signal: libc::c_int) -> libc::sigset_t {
    // SAFETY: sigemptyset/sigaddset initialise and fill a local sigset_t.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, signal);
        libc::sigaddset(&mut set, libc::SIGIO);
        set
    }
}

/// Blocks `set` in the calling thread (threads it spawns later inherit the mask).
pub(crate) fn block(set: &libc::sigset_t) -> io::Result<()> {
    // SAFETY: `set` is an initialised sigset_t; the old mask is not wanted.
    let rc = unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, set, std::ptr::null_mut()) };
    if rc != 0 {
        return Err(io::Error::from_raw_os_error(rc));
    }
    Ok(())
}

/// A non-blocking, close-on-exec signalfd for `set`.
pub(crate) fn signalfd(set: &libc::sigset_t) -> io::Result<RawFd> {
    // SAFETY: `set` is an initialised sigset_t.
    cvt(
        unsafe { libc::signalfd(-1, set, libc::SFD_NONBLOCK | libc::SFD_CLOEXEC) },
        "signalfd",
    )
}

/// A non-blocking eventfd (wakes the signal thread to stop).
pub(crate) fn eventfd() -> io::Result<RawFd> {
    // SAFETY: no pointers involved.
    cvt(
        unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) },
        "eventfd",
    )
}

/// Adds one to an eventfd.
pub(crate) fn eventfd_signal(fd: RawFd) {
    let one: u64 = 1;
    // SAFETY: writes 8 bytes from a local u64.
    unsafe { libc::write(fd, (&one as *const u64).cast(), 8) };
}

/// Closes a descriptor, ignoring errors (nothing useful can be done with them).
pub(crate) fn close(fd: RawFd) {
    // SAFETY: the caller owns `fd` and never uses the number again.
    unsafe { libc::close(fd) };
}

/// Converts a `-1`-on-error return of a byte-count call.
pub(crate) fn size_result(ret: isize) -> io::Result<usize> {
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret as usize)
    }
}
