//! The two ways a proxied connection moves bytes (the research part, written
//! by hand): bounded user-space buffers (`Buf`) or a pair of pipes driven by
//! `splice(2)` (`PipeRelay`), behind one `Relay`.

use connlab_os::pipe::{splice, Pipe};
use mio::net::TcpStream;
use std::io::{self, Read, Write};
use std::os::fd::AsRawFd;

/// A bounded byte buffer between one reader and one writer.
pub(super) struct Buf {
    data: Box<[u8]>,
    start: usize,
    end: usize,
}

impl Buf {
    fn new(n: usize) -> Buf {
        Buf {
            data: vec![0; n].into_boxed_slice(),
            start: 0,
            end: 0,
        }
    }
    fn is_empty(&self) -> bool {
        self.start == self.end
    }
    fn is_full(&self) -> bool {
        self.end == self.data.len() && self.start == 0
    }
    /// One read from `src` into the free space; returns (bytes read, saw
    /// EOF). Clears `readable` on `EAGAIN`, and on a read shorter than the
    /// space unless the peer's end was already reported (`hup`).
    ///
    /// A short TCP read emptied the receive queue, and anything arriving
    /// after it raises a new edge, so the `EAGAIN` read that would prove it
    /// is one system call per message saved (HAProxy does the same). The
    /// exception is the end: a read stops short before a queued FIN and
    /// returns it on the next call, and that FIN's edge has already been
    /// reported. So once the peer's end was reported, reads go on until
    /// they return 0 (an earlier version cleared nothing on a short read at
    /// all after bulk relays stalled at the end; that stall was this case).
    fn fill(
        &mut self,
        src: &mut TcpStream,
        readable: &mut bool,
        hup: bool,
    ) -> io::Result<(usize, bool)> {
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
        } else if self.end == self.data.len() {
            // Room only at the front: move the unsent bytes down.
            self.data.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
        let space = self.data.len() - self.end;
        if space == 0 {
            return Ok((0, false));
        }
        loop {
            match src.read(&mut self.data[self.end..]) {
                Ok(0) => return Ok((0, true)),
                Ok(n) => {
                    self.end += n;
                    if n < space && !hup {
                        *readable = false;
                    }
                    return Ok((n, false));
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    *readable = false;
                    return Ok((0, false));
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }
    /// One write of the buffered bytes to `dst`; returns bytes written.
    /// Clears `writable` on a short write or `EAGAIN`.
    fn drain(&mut self, dst: &mut TcpStream, writable: &mut bool) -> io::Result<usize> {
        let len = self.end - self.start;
        loop {
            match dst.write(&self.data[self.start..self.end]) {
                Ok(n) => {
                    self.start += n;
                    if n < len {
                        *writable = false;
                    }
                    return Ok(n);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    *writable = false;
                    return Ok(0);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }
}

/// A pipe that carries one direction of a connection with `splice(2)`.
pub(super) struct PipeRelay {
    pipe: Pipe,
    /// Bytes in the pipe.
    len: usize,
    /// The pipe's capacity (`F_SETPIPE_SZ` rounds up to whole pages).
    cap: usize,
    /// A splice into the pipe found no room although `len < cap` (a pipe
    /// holds a bounded number of page slots, not bytes): full until drained.
    stalled: bool,
}

/// Pipes are made at least this large (16 page slots, Linux's default)
/// whatever the byte bound: every piece of a socket buffer spliced in takes
/// a slot of its own, and a pipe sized down to a 16 KiB bound (4 slots) ran
/// out of slots long before bytes, so a reply took several short splices.
const MIN_PIPE_BYTES: usize = 64 * 1024;

impl PipeRelay {
    /// A pipe of at least `cap` bytes (and at least [`MIN_PIPE_BYTES`]).
    fn new(cap: usize) -> io::Result<PipeRelay> {
        let pipe = Pipe::with_size(cap.max(MIN_PIPE_BYTES))?;
        // The pipe's whole capacity is the bound: it holds references to
        // the socket buffers' pages, not copies, and bounding it at the
        // 16 KiB a user-space buffer uses cut a 100 KiB reply into seven
        // fill-and-drain rounds, which cost 1.8x the CPU per byte of
        // bounding it at 64 KiB (BENCHMARKS.md, 2026-11-27).
        let cap = pipe.capacity();
        Ok(PipeRelay {
            pipe,
            len: 0,
            cap,
            stalled: false,
        })
    }

    /// Socket -> pipe. A short splice does not prove the socket drained (the
    /// pipe may be out of slots), so `readable` is cleared only by `EAGAIN`
    /// into an empty pipe.
    fn fill(&mut self, src: &TcpStream, readable: &mut bool) -> io::Result<(usize, bool)> {
        let space = self.cap.saturating_sub(self.len);
        if space == 0 || self.stalled {
            return Ok((0, false));
        }
        match splice(src.as_raw_fd(), self.pipe.write.as_raw_fd(), space, false) {
            Ok(0) => Ok((0, true)),
            Ok(n) => {
                self.len += n;
                Ok((n, false))
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                if self.len == 0 {
                    *readable = false;
                } else {
                    self.stalled = true;
                }
                Ok((0, false))
            }
            Err(e) => Err(e),
        }
    }

    /// Pipe -> socket; clears `writable` on a short splice or `EAGAIN`.
    fn drain(&mut self, dst: &TcpStream, writable: &mut bool) -> io::Result<usize> {
        match splice(self.pipe.read.as_raw_fd(), dst.as_raw_fd(), self.len, false) {
            Ok(n) => {
                if n < self.len {
                    *writable = false;
                }
                self.len -= n;
                if n > 0 {
                    self.stalled = false;
                }
                Ok(n)
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                *writable = false;
                Ok(0)
            }
            Err(e) => Err(e),
        }
    }
}

/// One direction of a relayed connection: a user-space buffer or a pipe.
pub(super) enum Relay {
    Copy(Buf),
    Splice(PipeRelay),
}

impl Relay {
    pub(super) fn new(bytes: usize, splice: bool) -> io::Result<Relay> {
        Ok(if splice {
            Relay::Splice(PipeRelay::new(bytes)?)
        } else {
            Relay::Copy(Buf::new(bytes))
        })
    }
    pub(super) fn is_empty(&self) -> bool {
        match self {
            Relay::Copy(b) => b.is_empty(),
            Relay::Splice(p) => p.len == 0,
        }
    }
    pub(super) fn is_full(&self) -> bool {
        match self {
            Relay::Copy(b) => b.is_full(),
            Relay::Splice(p) => p.len >= p.cap || p.stalled,
        }
    }
    pub(super) fn fill(
        &mut self,
        src: &mut TcpStream,
        readable: &mut bool,
        hup: bool,
    ) -> io::Result<(usize, bool)> {
        match self {
            Relay::Copy(b) => b.fill(src, readable, hup),
            Relay::Splice(p) => p.fill(src, readable),
        }
    }
    pub(super) fn drain(&mut self, dst: &mut TcpStream, writable: &mut bool) -> io::Result<usize> {
        match self {
            Relay::Copy(b) => b.drain(dst, writable),
            Relay::Splice(p) => p.drain(dst, writable),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    /// A 16 KiB `--buffer` bounded the pipe at 16 KiB, so a 100 KiB reply
    /// took seven fill-and-drain rounds; the pipe's capacity is the bound.
    #[test]
    fn a_splice_pipe_takes_its_whole_capacity_whatever_the_buffer() {
        let mut relay = Relay::new(16 * 1024, true).unwrap();
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let mut tx = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (rx, _) = listener.accept().unwrap();
        rx.set_nonblocking(true).unwrap();
        let mut rx = TcpStream::from_std(rx);
        // One send of 48 KiB: few socket buffer pieces, so pipe slots are
        // not what stops the splice.
        tx.write_all(&[7u8; 48 * 1024]).unwrap();
        let (mut readable, mut moved) = (true, 0);
        for _ in 0..64 {
            if moved == 48 * 1024 || !readable {
                break;
            }
            moved += relay.fill(&mut rx, &mut readable, false).unwrap().0;
        }
        assert_eq!(moved, 48 * 1024);
        assert!(!relay.is_full());
    }
}
