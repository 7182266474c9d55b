//! A thread per connection with blocking sockets: the kernel's scheduler is
//! the multiplexer. Stacks are small (128 KiB, touched pages only) so that
//! 10,000 threads fit. At shutdown every live socket is shut down, which wakes
//! its thread out of a blocking `recv` or `sendmsg`.

use super::{wait_readable, Engine, RunContext};
use crate::connection::{Connection, READ_CHUNK};
use crate::listener::Accepted;
use std::collections::HashSet;
use std::io;
use std::os::fd::RawFd;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Mutex;
use std::time::Instant;

pub(super) struct Threads;

/// Stack per connection thread: the read chunk lives on it.
const STACK_BYTES: usize = 128 * 1024;

impl Engine for Threads {
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
        // Descriptors of live connections; a thread removes its own under the
        // lock before closing it, so shutdown never touches a reused number.
        let live: Mutex<HashSet<RawFd>> = Mutex::new(HashSet::new());
        let live = &live;
        std::thread::scope(|scope| -> io::Result<()> {
            let mut fds = [
                libc::pollfd {
                    fd: listener.fd(),
                    events: 0,
                    revents: 0,
                },
                libc::pollfd {
                    fd: shutdown.wake_fd(),
                    events: 0,
                    revents: 0,
                },
            ];
            let mut backoff = false;
            while !shutdown.requested() {
                wait_readable(&mut fds, std::mem::take(&mut backoff))?;
                counters.ran_here();
                loop {
                    match listener.accept(false) {
                        Accepted::Connection(fd) => {
                            let mut conn = Connection::new(fd, template, Instant::now());
                            let raw = conn.fd();
                            lock(live).insert(raw);
                            counters.opened();
                            let spawned = std::thread::Builder::new()
                                .stack_size(STACK_BYTES)
                                .spawn_scoped(scope, move || {
                                    let mut buf = [0u8; READ_CHUNK];
                                    conn.serve_blocking(&mut buf, counters);
                                    let mut set = lock(live);
                                    set.remove(&raw);
                                    drop(conn);
                                    counters.closed();
                                });
                            if spawned.is_err() {
                                // The closure (and the connection) were dropped: shed it.
                                lock(live).remove(&raw);
                                counters.closed();
                                counters.shed.fetch_add(1, Relaxed);
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
            for &fd in lock(live).iter() {
                // SAFETY: `fd` is open: its owner removes it from `live` under this lock before closing.
                unsafe { libc::shutdown(fd, libc::SHUT_RDWR) };
            }
            Ok(())
        })
    }
}

/// Locks the live set; a panicked connection thread cannot poison the count.
fn lock(live: &Mutex<HashSet<RawFd>>) -> std::sync::MutexGuard<'_, HashSet<RawFd>> {
    live.lock().unwrap_or_else(|p| p.into_inner())
}
