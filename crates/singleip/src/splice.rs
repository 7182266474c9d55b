//! [`SpliceOut`]: DATA frames toward a node connection whose payloads never
//! enter user space. A relay's socket is spliced (splice(2)) into a pipe,
//! the DATA headers for exactly the bytes in the pipe are counted on the
//! session, and each frame goes out as its 12-byte header (`send` with
//! `MSG_MORE`) followed by its payload spliced from the pipe to the
//! connection.
//!
//! The node connection is shared by every stream, so frames must never
//! interleave: a fill starts only when nothing else waits for the
//! connection (the caller's [`OutBuf`] empty), and once a frame has begun,
//! the rest of it and of the frames behind it in the pipe go before any
//! other byte ([`Wire::flush`] writes them ahead of the `OutBuf`). At most
//! one fill is in the pipe at a time, so one pipe serves the whole
//! connection: two descriptors per node connection, none per stream.

use crate::outbuf::{OutBuf, ReadData, MAX_FRAMES_PER_READ, MAX_READ};
use connlab_os::pipe::{splice, Pipe};
use connlab_proto::xfer::{StreamId, XferSession, HEADER_LEN};
use mio::net::TcpStream;
use std::io::{self, Write};
use std::os::fd::{AsRawFd, RawFd};

/// The pipe size asked for with `F_SETPIPE_SZ`. A TCP splice takes one pipe
/// slot per socket buffer fragment, so a pipe of 16 slots (the default
/// 64 KiB) may take far less than 64 KiB of small segments; 256 KiB (64
/// slots) lets one splice take a full read of [`MAX_READ`] bytes.
pub(crate) const PIPE_SIZE: usize = 256 * 1024;

/// `send(2)` with `MSG_MORE` (a payload follows), `EINTR` retried.
fn send_more(fd: RawFd, bytes: &[u8]) -> io::Result<usize> {
    loop {
        // SAFETY: pointer and length describe `bytes`.
        let n = unsafe {
            libc::send(
                fd,
                bytes.as_ptr().cast(),
                bytes.len(),
                libc::MSG_MORE | libc::MSG_NOSIGNAL | libc::MSG_DONTWAIT,
            )
        };
        if n >= 0 {
            return Ok(n as usize);
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// One DATA frame whose payload is in the pipe.
#[derive(Clone, Copy)]
struct Frame {
    header: [u8; HEADER_LEN],
    header_sent: usize,
    /// Payload bytes still in the pipe.
    left: usize,
}

/// The spliced frames of a node connection: the pipe and the frames whose
/// payloads it holds, in wire order.
pub(crate) struct SpliceOut {
    pipe: Pipe,
    frames: [Frame; MAX_FRAMES_PER_READ],
    /// Frames in `frames[next..count]` wait (the first maybe begun).
    next: usize,
    count: usize,
}

impl SpliceOut {
    /// A pipe for one node connection.
    pub(crate) fn new() -> io::Result<SpliceOut> {
        Ok(SpliceOut {
            pipe: Pipe::with_size(PIPE_SIZE)?,
            frames: [Frame {
                header: [0; HEADER_LEN],
                header_sent: 0,
                left: 0,
            }; MAX_FRAMES_PER_READ],
            next: 0,
            count: 0,
        })
    }

    /// Whether a frame is in the pipe (begun or not): nothing else may go to
    /// the connection until [`SpliceOut::flush`] has sent it all.
    pub(crate) fn busy(&self) -> bool {
        self.next < self.count
    }

    /// Splices at most `max` bytes (at most [`MAX_READ`]) from `src` into
    /// the pipe and counts DATA headers of `stream` for exactly those bytes,
    /// cut at the negotiated version's DATA limit (one frame per fill at
    /// version 2, up to four at version 1), credit consumed as by
    /// [`OutBuf::read_data`]. Only when not
    /// [`busy`](SpliceOut::busy). `WouldBlock` means `src` is drained; a
    /// short splice proves nothing (the pipe may have run out of slots).
    pub(crate) fn fill(
        &mut self,
        session: &mut XferSession,
        stream: StreamId,
        src: RawFd,
        max: usize,
    ) -> io::Result<ReadData> {
        debug_assert!(!self.busy());
        let want = max.min(MAX_READ);
        if want == 0 {
            return Ok(ReadData::Bytes(0));
        }
        let n = splice(src, self.pipe.write.as_raw_fd(), want, false)?.min(want);
        if n == 0 {
            return Ok(ReadData::Eof);
        }
        let slot = session.max_data_payload();
        let (mut left, mut count) = (n, 0);
        while left > 0 {
            let len = left.min(slot);
            match session.send_data_header(stream, len) {
                Ok(header) => {
                    self.frames[count] = Frame {
                        header,
                        header_sent: 0,
                        left: len,
                    };
                    count += 1;
                    left -= len;
                }
                Err(e) => {
                    // Nothing of this fill went out: drop what is in the
                    // pipe; the frames already counted went nowhere either.
                    self.discard()?;
                    return Err(io::Error::other(e.to_string()));
                }
            }
        }
        self.next = 0;
        self.count = count;
        Ok(ReadData::Bytes(n))
    }

    /// Empties the pipe (a fill whose frames could not be counted).
    fn discard(&mut self) -> io::Result<()> {
        let mut scratch = [0u8; 4096];
        loop {
            match self.pipe.read_out(&mut scratch) {
                Ok(0) => return Ok(()),
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                Err(e) => return Err(e),
            }
        }
    }

    /// Sends the frames in the pipe to `conn`, each header then its payload.
    /// `Ok(true)`: all sent; `Ok(false)`: the connection is full (`EAGAIN`),
    /// the rest waits for it to be writable.
    pub(crate) fn flush(&mut self, conn: RawFd) -> io::Result<bool> {
        while self.next < self.count {
            let last = self.next + 1 == self.count;
            let f = &mut self.frames[self.next];
            while f.header_sent < HEADER_LEN {
                match send_more(conn, &f.header[f.header_sent..]) {
                    Ok(k) => f.header_sent += k,
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
                    Err(e) => return Err(e),
                }
            }
            while f.left > 0 {
                match splice(self.pipe.read.as_raw_fd(), conn, f.left, !last) {
                    Ok(0) => {
                        return Err(io::Error::new(
                            io::ErrorKind::UnexpectedEof,
                            "the splice pipe ran dry inside a DATA frame",
                        ))
                    }
                    Ok(k) => f.left -= k.min(f.left),
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
                    Err(e) => return Err(e),
                }
            }
            self.next += 1;
        }
        self.next = 0;
        self.count = 0;
        Ok(true)
    }
}

/// The node connection's output side: the socket, the buffered frames
/// ([`OutBuf`]) and, with splice, the spliced frames, which go first.
pub(crate) struct Wire {
    pub(crate) sock: TcpStream,
    pub(crate) out: OutBuf,
    pub(crate) splice: Option<SpliceOut>,
    /// Cleared by a short write or `EAGAIN`, set by a writable event.
    pub(crate) writable: bool,
}

impl Wire {
    /// Whether nothing waits to be written.
    pub(crate) fn idle(&self) -> bool {
        self.out.is_empty() && !self.splice.as_ref().is_some_and(SpliceOut::busy)
    }

    /// Writes what waits while the socket takes it: spliced frames first
    /// (begun frames must finish before any other byte), then the `OutBuf`.
    pub(crate) fn flush(&mut self) -> io::Result<()> {
        while self.writable {
            if let Some(sp) = self.splice.as_mut().filter(|s| s.busy()) {
                if !sp.flush(self.sock.as_raw_fd())? {
                    self.writable = false;
                }
                continue;
            }
            if self.out.is_empty() {
                break;
            }
            match self.sock.write(self.out.pending()) {
                Ok(k) => {
                    self.out.consume(k);
                    if !self.out.is_empty() {
                        self.writable = false;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => self.writable = false,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// A last write on the way out (a GOAWAY, the closing frames), only if
    /// it cannot split a spliced frame.
    pub(crate) fn flush_once(&mut self, session: &mut XferSession) {
        self.out.take_session_output(session);
        self.writable = true;
        let _ = self.flush();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use connlab_proto::xfer::Event;
    use std::io::Read;

    /// A node and an I/O server session with two streams accepted.
    fn pair(window: u32) -> (XferSession, XferSession, StreamId, StreamId) {
        let (node, server, s) = crate::test_sessions::pair(window, 2);
        (node, server, s[0], s[1])
    }

    fn tcp_pair() -> (std::net::TcpStream, std::net::TcpStream) {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let a = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (b, _) = l.accept().unwrap();
        (a, b)
    }

    #[test]
    fn partial_splices_finish_their_frames_before_any_buffered_byte() {
        // Stream a's payloads are spliced through a connection with tiny
        // buffers that nobody reads for a while, so splices stop short;
        // stream b's bytes go through the OutBuf meanwhile. The peer must
        // decode both streams byte-exact (an interleaved frame would break
        // the framing or mix the streams).
        let (mut node, mut server, a, b) = pair(1 << 22);
        let (conn_peer, conn) = tcp_pair();
        socket2::SockRef::from(&conn)
            .set_send_buffer_size(4096)
            .unwrap();
        socket2::SockRef::from(&conn_peer)
            .set_recv_buffer_size(4096)
            .unwrap();
        conn.set_nonblocking(true).unwrap();
        let mut wire = Wire {
            sock: TcpStream::from_std(conn),
            out: OutBuf::new(),
            splice: Some(SpliceOut::new().unwrap()),
            writable: true,
        };
        let (mut src_w, src) = tcp_pair();
        src.set_nonblocking(true).unwrap();
        let body_a: Vec<u8> = (0..400_000u32).map(|i| (i % 251) as u8).collect();
        let body_b: Vec<u8> = (0..100_000u32).map(|i| (i % 241) as u8).collect();
        let writer = {
            let body = body_a.clone();
            std::thread::spawn(move || {
                src_w.write_all(&body).unwrap();
            })
        };
        let reader = std::thread::spawn(move || {
            let mut peer = conn_peer;
            let mut wire_bytes = Vec::new();
            peer.read_to_end(&mut wire_bytes).unwrap();
            wire_bytes
        });
        let (mut got_a, mut b_sent, mut short) = (0usize, 0usize, 0usize);
        let mut b_src = &body_b[..];
        while got_a < body_a.len() || !b_src.is_empty() {
            wire.writable = true;
            wire.flush().unwrap();
            if wire.idle() && got_a < body_a.len() {
                let sp = wire.splice.as_mut().unwrap();
                match sp.fill(&mut node, a, src.as_raw_fd(), 40_000) {
                    Ok(ReadData::Bytes(n)) => got_a += n,
                    Ok(ReadData::Eof) => panic!("early end"),
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                    Err(e) => panic!("{e}"),
                }
                wire.flush().unwrap();
                short += usize::from(!wire.idle());
            }
            if !b_src.is_empty() {
                // Buffered bytes of another stream, queued while a spliced
                // frame may be half sent.
                let n = wire.out.read_data(&mut node, b, &mut b_src, 7_000).unwrap();
                if let ReadData::Bytes(n) = n {
                    b_sent += n;
                }
            }
            std::thread::yield_now();
        }
        while !wire.idle() {
            wire.writable = true;
            wire.flush().unwrap();
            std::thread::yield_now();
        }
        writer.join().unwrap();
        drop(wire);
        let bytes = reader.join().unwrap();
        assert!(
            short > 0,
            "no splice stopped short: the test proves nothing"
        );
        assert_eq!(b_sent, body_b.len());
        let (mut da, mut db) = (Vec::new(), Vec::new());
        server
            .feed(&bytes, &mut |e| {
                if let Event::Data { stream, bytes } = e {
                    if stream == a {
                        da.extend_from_slice(&bytes);
                    } else if stream == b {
                        db.extend_from_slice(&bytes);
                    }
                }
            })
            .unwrap();
        assert!(da == body_a, "stream a corrupted ({} bytes)", da.len());
        assert!(db == body_b, "stream b corrupted ({} bytes)", db.len());
    }

    /// Fills `sp` from a pipe holding 60,000 bytes on stream `s` of `node`,
    /// flushes it to a connection and returns the DATA payload lengths the
    /// server decodes.
    fn fill_from_a_pipe(
        node: &mut XferSession,
        server: &mut XferSession,
        s: StreamId,
    ) -> Vec<usize> {
        let src = Pipe::with_size(PIPE_SIZE).unwrap();
        let body: Vec<u8> = (0..60_000u32).map(|i| (i % 239) as u8).collect();
        let mut w = std::fs::File::from(src.write.try_clone().unwrap());
        w.write_all(&body).unwrap();
        let mut sp = SpliceOut::new().unwrap();
        let got = sp.fill(node, s, src.read.as_raw_fd(), 1 << 20).unwrap();
        assert_eq!(got, ReadData::Bytes(60_000));
        let (mut peer, conn) = tcp_pair();
        assert!(sp.flush(conn.as_raw_fd()).unwrap());
        drop(conn);
        let mut bytes = Vec::new();
        peer.read_to_end(&mut bytes).unwrap();
        let (mut lens, mut data) = (Vec::new(), Vec::new());
        server
            .feed(&bytes, &mut |e| {
                if let Event::Data { bytes, .. } = e {
                    lens.push(bytes.len());
                    data.extend_from_slice(&bytes);
                }
            })
            .unwrap();
        assert!(data == body, "corrupted ({} bytes)", data.len());
        lens
    }

    #[test]
    fn a_fill_is_one_frame_at_version_2_and_16_kib_frames_at_version_1() {
        let (mut node, mut server, s) = crate::test_sessions::pair_at(1 << 20, 1, 2);
        assert_eq!(fill_from_a_pipe(&mut node, &mut server, s[0]), [60_000]);
        let (mut node, mut server, s) = crate::test_sessions::pair_at(1 << 20, 1, 1);
        assert_eq!(
            fill_from_a_pipe(&mut node, &mut server, s[0]),
            [16_384, 16_384, 16_384, 10_848]
        );
    }

    #[test]
    fn a_fill_stays_within_the_credit_and_ends_at_eof() {
        let (mut node, mut server, a, _b) = pair(5000);
        let (mut src_w, src) = tcp_pair();
        src.set_nonblocking(true).unwrap();
        src_w.write_all(&[3u8; 20_000]).unwrap();
        drop(src_w);
        let (mut peer, conn) = tcp_pair();
        let mut sp = SpliceOut::new().unwrap();
        let credit = node.send_credit(a).unwrap() as usize;
        // Wait until all bytes arrived, so the splice is not short.
        let mut got = ReadData::Bytes(0);
        while got == ReadData::Bytes(0) {
            got = match sp.fill(&mut node, a, src.as_raw_fd(), credit) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => ReadData::Bytes(0),
                other => other.unwrap(),
            };
        }
        assert_eq!(got, ReadData::Bytes(5000));
        assert_eq!(node.send_credit(a), Some(0));
        assert!(sp.flush(conn.as_raw_fd()).unwrap());
        assert!(!sp.busy());
        drop(conn);
        let mut bytes = Vec::new();
        peer.read_to_end(&mut bytes).unwrap();
        assert_eq!(bytes.len(), 5000 + HEADER_LEN);
        let mut n = 0;
        server
            .feed(&bytes, &mut |e| {
                if let Event::Data { bytes, .. } = e {
                    n += bytes.len();
                }
            })
            .unwrap();
        assert_eq!(n, 5000);
    }
}
