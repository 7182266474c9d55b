//! `select(2)` beyond 1024 descriptors. glibc's `fd_set` is a fixed array of
//! FD_SETSIZE (1024) bits, but the kernel reads exactly `nfds` bits from
//! whatever memory it is given. So this engine keeps its own bitmaps as
//! `Vec<u64>` of `(max_fd / 64) + 1` words (the same bit layout as `fd_set` on
//! x86_64: bit `fd % 64` of word `fd / 64`) and passes them to `libc::select`
//! cast to `*mut fd_set`, as the papers' 10,000-connection runs did. Master
//! sets are kept up to date and copied before each call, because `select`
//! overwrites its arguments.

use super::reactor::{Interest, Reactor};
use super::{Engine, RunContext};
use crate::profile::LoopTimer;
use std::io;
use std::os::fd::RawFd;

pub(super) struct Select;

/// A descriptor bitmap that grows with the highest descriptor.
#[derive(Default, Clone)]
struct FdBits(Vec<u64>);

impl FdBits {
    fn set(&mut self, fd: RawFd, on: bool) {
        let (word, bit) = (fd as usize / 64, fd as usize % 64);
        if self.0.len() <= word {
            self.0.resize(word + 1, 0);
        }
        if on {
            self.0[word] |= 1 << bit;
        } else {
            self.0[word] &= !(1 << bit);
        }
    }

    fn copy_from(&mut self, other: &FdBits, words: usize) {
        self.0.clear();
        self.0
            .extend_from_slice(&other.0[..words.min(other.0.len())]);
        self.0.resize(words, 0);
    }

    fn as_fd_set(&mut self) -> *mut libc::fd_set {
        self.0.as_mut_ptr().cast()
    }
}

impl Engine for Select {
    fn serve(&mut self, ctx: RunContext<'_>) -> io::Result<()> {
        let shutdown = ctx.shutdown;
        let mut timer = LoopTimer::new(ctx.profile);
        let mut reactor = Reactor::new(ctx);
        let (listen_fd, wake_fd) = (reactor.listener.fd(), shutdown.wake_fd());
        let (mut want_r, mut want_w) = (FdBits::default(), FdBits::default());
        want_r.set(listen_fd, true);
        want_r.set(wake_fd, true);
        let mut max_fd = listen_fd.max(wake_fd);
        let (mut rd, mut wr) = (FdBits::default(), FdBits::default());
        reactor.ready();
        while !shutdown.requested() {
            // The listener sits out a moment after an accept failed.
            want_r.set(listen_fd, reactor.accepting());
            let words = max_fd as usize / 64 + 1;
            rd.copy_from(&want_r, words);
            wr.copy_from(&want_w, words);
            let mut tv = reactor.wait().map(|d| libc::timeval {
                tv_sec: libc::time_t::try_from(d.as_secs()).unwrap_or(libc::time_t::MAX),
                // Rounded up so the loop does not wake just before the deadline.
                tv_usec: libc::suseconds_t::from(d.subsec_nanos().div_ceil(1000)),
            });
            let tv_ptr = tv
                .as_mut()
                .map_or(std::ptr::null_mut(), |tv| tv as *mut libc::timeval);
            let mut mark = timer.begin();
            // SAFETY: both bitmaps hold at least `max_fd + 1` bits, which is all
            // the kernel reads or writes for nfds = max_fd + 1; `tv_ptr` is null
            // or points to `tv`, alive across the call.
            let n = unsafe {
                libc::select(
                    max_fd + 1,
                    rd.as_fd_set(),
                    wr.as_fd_set(),
                    std::ptr::null_mut(),
                    tv_ptr,
                )
            };
            timer.called(&mut mark);
            reactor.tick();
            if n < 0 {
                let e = io::Error::last_os_error();
                if e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(e);
            }
            let mut accept = false;
            let mut recompute_max = false;
            for w in 0..words {
                let (r_word, w_word) = (rd.0[w], wr.0[w]);
                let mut bits = r_word | w_word;
                while bits != 0 {
                    let b = bits.trailing_zeros();
                    bits &= bits - 1;
                    let fd = (w * 64 + b as usize) as RawFd;
                    if fd == listen_fd {
                        accept = true;
                        continue;
                    }
                    if fd == wake_fd {
                        continue;
                    }
                    let readable = r_word & (1 << b) != 0;
                    let writable = w_word & (1 << b) != 0;
                    let (r, w) = match reactor.dispatch(fd, readable, writable, false) {
                        Interest::Closed => {
                            recompute_max |= fd == max_fd;
                            (false, false)
                        }
                        Interest::Wait { read, write } => (read, write),
                    };
                    want_r.set(fd, r);
                    want_w.set(fd, w);
                }
            }
            reactor.expire(|fd| {
                want_r.set(fd, false);
                want_w.set(fd, false);
                recompute_max |= fd == max_fd;
            });
            if recompute_max {
                max_fd = reactor
                    .open_fds()
                    .chain([listen_fd, wake_fd])
                    .max()
                    .unwrap_or(listen_fd);
            }
            if accept {
                reactor.accept_pending(|fd| {
                    want_r.set(fd, true);
                    max_fd = max_fd.max(fd);
                });
            }
            timer.end(mark);
        }
        reactor.close_all();
        Ok(())
    }
}
