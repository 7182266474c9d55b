//! A process per connection: the parent accepts and forks; the child serves
//! the connection with blocking I/O and exits; the parent reaps on SIGCHLD.
//! Counters live in shared memory, so every child's work is counted, and the
//! children's CPU time reaches the parent through `RUSAGE_CHILDREN` once they
//! are reaped.

use super::{wait_readable, Engine, RunContext};
use crate::connection::{Connection, READ_CHUNK};
use crate::listener::Accepted;
use std::collections::HashSet;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicI32, Ordering::Relaxed};
use std::time::{Duration, Instant};

pub(super) struct Processes;

/// How long shutdown waits for children to exit after SIGTERM.
const REAP_DEADLINE: Duration = Duration::from_secs(5);

impl Engine for Processes {
    fn serve(&mut self, ctx: RunContext<'_>) -> io::Result<()> {
        let RunContext {
            mut listener,
            counters,
            shutdown,
            template,
            // No polling call to time: a blocked thread or process per connection.
            profile: _,
            // One accept loop: nothing shares the listener.
            exclusive_accept: _,
            // Never with --workers.
            start: _,
        } = ctx;
        let (chld_read, chld_write) =
            nix::unistd::pipe2(nix::fcntl::OFlag::O_NONBLOCK | nix::fcntl::OFlag::O_CLOEXEC)?;
        let sig_id = signal_hook::low_level::pipe::register(libc::SIGCHLD, chld_write)?;
        let mut children: HashSet<libc::pid_t> = HashSet::new();
        let mut fds =
            [listener.fd(), shutdown.wake_fd(), chld_read.as_raw_fd()].map(|fd| libc::pollfd {
                fd,
                events: 0,
                revents: 0,
            });
        let mut backoff = false;
        while !shutdown.requested() {
            wait_readable(&mut fds, std::mem::take(&mut backoff))?;
            counters.ran_here();
            if fds[2].revents != 0 {
                drain(&chld_read);
                reap(&mut children, false);
            }
            if fds[0].revents == 0 {
                continue;
            }
            loop {
                match listener.accept(false) {
                    Accepted::Connection(fd) => {
                        counters.opened();
                        // SAFETY: the parent is single-threaded here (no engine threads), so the
                        // child may run ordinary Rust code; it leaves through _exit.
                        match unsafe { libc::fork() } {
                            0 => {
                                CHILD_CONNECTION.store(fd.as_raw_fd(), Relaxed);
                                let handler = end_child_connection as extern "C" fn(libc::c_int);
                                // SAFETY: the handler only calls shutdown(2), which is async-signal-safe.
                                unsafe {
                                    libc::signal(libc::SIGINT, handler as libc::sighandler_t);
                                    libc::signal(libc::SIGTERM, handler as libc::sighandler_t);
                                }
                                drop(listener);
                                let mut conn = Connection::new(fd, template, Instant::now());
                                let mut buf = vec![0u8; READ_CHUNK];
                                conn.serve_blocking(&mut buf, counters);
                                drop(conn);
                                counters.closed();
                                // SAFETY: _exit ends the child without running the parent's destructors.
                                unsafe { libc::_exit(0) }
                            }
                            pid if pid > 0 => {
                                children.insert(pid);
                                drop(fd);
                            }
                            _ => {
                                drop(fd);
                                counters.closed();
                                counters.shed.fetch_add(1, Relaxed);
                            }
                        }
                    }
                    Accepted::WouldBlock => break,
                    Accepted::Shed { episode_began } => {
                        counters.shed_one(episode_began);
                    }
                    Accepted::Failed => {
                        counters.accept_errors.fetch_add(1, Relaxed);
                        backoff = true;
                        break;
                    }
                }
            }
        }
        drop(listener);
        for &pid in &children {
            // SAFETY: signalling our own child.
            unsafe { libc::kill(pid, libc::SIGTERM) };
        }
        let deadline = Instant::now() + REAP_DEADLINE;
        while !children.is_empty() && Instant::now() < deadline {
            reap(&mut children, false);
            std::thread::sleep(Duration::from_millis(5));
        }
        for &pid in &children {
            // SAFETY: signalling our own child that ignored SIGTERM.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
        reap(&mut children, true);
        signal_hook::low_level::unregister(sig_id);
        Ok(())
    }
}

/// The connection a child serves, for its termination handler.
static CHILD_CONNECTION: AtomicI32 = AtomicI32::new(-1);

/// A child's SIGTERM/SIGINT handler: shutting the socket down makes the blocked
/// `recv`/`sendmsg` return, so the child still adds its last bytes to the
/// shared counters and exits through the normal path instead of dying mid-way.
extern "C" fn end_child_connection(_signal: libc::c_int) {
    let fd = CHILD_CONNECTION.load(Relaxed);
    if fd >= 0 {
        // SAFETY: shutdown(2) is async-signal-safe; `fd` is the child's open connection.
        unsafe { libc::shutdown(fd, libc::SHUT_RDWR) };
    }
}

/// Empties the SIGCHLD pipe.
fn drain(fd: &OwnedFd) {
    let mut buf = [0u8; 64];
    while matches!(nix::unistd::read(fd.as_raw_fd(), &mut buf), Ok(n) if n > 0) {}
}

/// Reaps exited children (all of them, waiting, when `block`).
fn reap(children: &mut HashSet<libc::pid_t>, block: bool) {
    while !children.is_empty() {
        let mut status = 0;
        let flags = if block { 0 } else { libc::WNOHANG };
        // SAFETY: waiting for any child with a valid status pointer.
        let pid = unsafe { libc::waitpid(-1, &mut status, flags) };
        if pid <= 0 {
            break;
        }
        children.remove(&pid);
    }
}
