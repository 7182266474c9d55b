//! [`Relay`]: one stream of a node connection bound to one TCP socket, the
//! part the I/O server (client sockets) and the forwarding node (local
//! server sockets) share. Bytes from the session wait in a bounded queue of
//! DATA payloads (bounded by the credit this end grants) and credit is
//! returned as they reach the socket; bytes from the socket are read only as
//! far as the peer's credit allows, so a stalled reader stops its own stream
//! and nothing else.
//!
//! Readiness is edge-triggered (mio): `readable` is cleared by `EAGAIN`, and
//! by a read shorter than asked for unless an event already reported the
//! peer's end (`hup`): a short TCP read emptied the receive queue and
//! anything arriving later raises a new edge, but a read stops before a
//! queued FIN whose edge was already reported, so after that reads go on
//! until they return 0 (the gateway's relays stalled on that case).
//! `writable` is cleared by a short write or `EAGAIN`.

use connlab_proto::xfer::{StreamId, XferSession};
use mio::net::TcpStream;
use std::collections::VecDeque;
use std::io::{self, IoSlice, Write};
use std::net::Shutdown;
use std::time::{Duration, Instant};

use crate::outbuf::{OutBuf, ReadData, MAX_READ};
use crate::splice::Wire;
use crate::stats::ConnStats;
use std::os::fd::AsRawFd;

/// Payloads written in one `writev`: with 16 KiB DATA payloads (version 1),
/// up to 256 KiB per system call; with version 2's larger payloads, more.
const MAX_IOV: usize = 16;

/// A DATA payload waiting for the socket.
struct Chunk {
    bytes: Vec<u8>,
    written: usize,
    arrived: Instant,
}

/// One stream's socket and its queue toward it.
pub(crate) struct Relay {
    pub(crate) sock: TcpStream,
    pub(crate) stream: StreamId,
    pub(crate) readable: bool,
    pub(crate) writable: bool,
    /// An event reported the socket's read side closed (or an error): a
    /// short read no longer proves it drained.
    pub(crate) hup: bool,
    /// Connecting (CONNECT on the server, the local connect on the node):
    /// nothing is read or written until it completes.
    pub(crate) connecting: bool,
    queue: VecDeque<Chunk>,
    queued: usize,
    /// The socket reported end of input; FIN sent on the stream.
    pub(crate) read_eof: bool,
    /// The peer's FIN arrived: shut the socket's write side once drained.
    pub(crate) fin_in: bool,
    pub(crate) write_shut: bool,
    /// Times a write found the socket full (short write or `EAGAIN`): a
    /// socket held by its send buffer, which rate-share sizing attends to.
    pub(crate) blocked: u64,
    /// Queued to be pumped once the node connection is idle (splice).
    pub(crate) wire_waiting: bool,
    pub(crate) stats: ConnStats,
}

/// A socket error on a relay: the stream is reset.
pub(crate) struct Failed;

/// What [`Relay::pump_in_splice`] did.
pub(crate) struct SpliceIn {
    /// Bytes moved to the node connection.
    pub(crate) moved: usize,
    /// Stopped because the node connection is full: pump again once idle.
    pub(crate) waiting: bool,
}

/// Why [`Relay::pump_in_splice`] failed.
pub(crate) enum SpliceFailed {
    /// The relay's socket (or its stream): the stream is reset.
    Local,
    /// The node connection: the session is lost.
    Wire(io::Error),
}

impl Relay {
    pub(crate) fn new(sock: TcpStream, stream: StreamId, connecting: bool) -> Relay {
        Relay {
            sock,
            stream,
            readable: true,
            writable: true,
            hup: false,
            connecting,
            queue: VecDeque::new(),
            queued: 0,
            read_eof: false,
            fin_in: false,
            write_shut: false,
            blocked: 0,
            wire_waiting: false,
            stats: ConnStats {
                stream: stream.0,
                end: "open".into(),
                ..ConnStats::default()
            },
        }
    }

    /// Bytes waiting for the socket.
    pub(crate) fn queued(&self) -> usize {
        self.queued
    }

    /// Whether both directions are finished: the relay can go.
    pub(crate) fn done(&self) -> bool {
        self.read_eof && self.write_shut
    }

    /// Whether the stream is over for the client even if the relay has not
    /// seen all of it yet: everything toward the client written and its
    /// write side shut, and the client's end (EOF, no byte before it)
    /// already arrived, looked at now if not yet read. A node lost then
    /// costs the stream nothing: its hangup and the client's end were
    /// merely handled in the other order.
    pub(crate) fn ended_by_client(&self) -> bool {
        if !self.write_shut || self.queued > 0 {
            return false;
        }
        self.read_eof || matches!(self.sock.peek(&mut [0u8; 1]), Ok(0))
    }

    /// A DATA payload from the session. With `max_chunks` payloads queued
    /// already it is appended to the last one instead (true returned), so
    /// a peer sending many small frames within its credit cannot make the
    /// queue hold a record per byte.
    pub(crate) fn push(&mut self, bytes: Vec<u8>, now: Instant, max_chunks: usize) -> bool {
        if bytes.is_empty() {
            return false;
        }
        self.queued += bytes.len();
        self.stats.queued_max_bytes = self.stats.queued_max_bytes.max(self.queued as u64);
        if self.queue.len() >= max_chunks.max(1) {
            if let Some(last) = self.queue.back_mut() {
                last.bytes.extend_from_slice(&bytes);
                return true;
            }
        }
        self.queue.push_back(Chunk {
            bytes,
            written: 0,
            arrived: now,
        });
        false
    }

    /// DATA payloads queued (merged ones count once).
    #[cfg(test)]
    pub(crate) fn chunks(&self) -> usize {
        self.queue.len()
    }

    /// Reads from the socket into DATA frames in `out` (built in place, see
    /// [`OutBuf::read_data`]) as far as the stream's credit allows. Returns
    /// the bytes moved; on end of input queues FIN.
    pub(crate) fn pump_in(
        &mut self,
        session: &mut XferSession,
        out: &mut OutBuf,
    ) -> Result<usize, Failed> {
        let mut moved = 0;
        while self.readable && !self.read_eof && !self.connecting {
            let credit = session.send_credit(self.stream).unwrap_or(0) as usize;
            if credit == 0 {
                break;
            }
            let want = credit.min(MAX_READ);
            match out.read_data(session, self.stream, &mut self.sock, want) {
                Ok(ReadData::Eof) => {
                    self.read_eof = true;
                    // The stream may already be gone (reset crossing); then
                    // there is nobody to tell.
                    let _ = session.finish(self.stream);
                }
                Ok(ReadData::Bytes(n)) => {
                    if n < want && !self.hup {
                        // Drained: no EAGAIN read to prove it.
                        self.readable = false;
                    }
                    self.stats.bytes_from_client += n as u64;
                    moved += n;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => self.readable = false,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                // A socket error, or the stream is gone (reset crossing).
                Err(_) => return Err(Failed),
            }
        }
        Ok(moved)
    }

    /// [`Relay::pump_in`] with splice: the socket's bytes go through the
    /// wire's pipe to the node connection ([`SpliceOut`]) as far as the
    /// stream's credit allows, each fill only once nothing else waits for
    /// the connection. Returns the bytes moved and whether the relay stopped
    /// for the connection (readable, credit left, the connection full): it
    /// must be pumped again once the wire is idle. Readiness is cleared only
    /// by `EAGAIN` (a short splice may just have filled the pipe's slots).
    pub(crate) fn pump_in_splice(
        &mut self,
        session: &mut XferSession,
        wire: &mut Wire,
    ) -> Result<SpliceIn, SpliceFailed> {
        let mut moved = 0;
        while self.readable && !self.read_eof && !self.connecting {
            let credit = session.send_credit(self.stream).unwrap_or(0) as usize;
            if credit == 0 {
                break;
            }
            wire.out.take_session_output(session);
            if !wire.idle() {
                wire.flush().map_err(SpliceFailed::Wire)?;
                if !wire.idle() {
                    return Ok(SpliceIn {
                        moved,
                        waiting: true,
                    });
                }
            }
            let Some(sp) = wire.splice.as_mut() else {
                break;
            };
            match sp.fill(session, self.stream, self.sock.as_raw_fd(), credit) {
                Ok(ReadData::Eof) => {
                    self.read_eof = true;
                    let _ = session.finish(self.stream);
                }
                Ok(ReadData::Bytes(n)) => {
                    self.stats.bytes_from_client += n as u64;
                    moved += n;
                    wire.flush().map_err(SpliceFailed::Wire)?;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => self.readable = false,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => return Err(SpliceFailed::Local),
            }
        }
        Ok(SpliceIn {
            moved,
            waiting: false,
        })
    }

    /// Writes at most `limit` queued bytes to the socket and releases them on
    /// the session (credit back to the peer). Shuts the socket's write side
    /// once the peer's FIN arrived and the queue is empty.
    pub(crate) fn pump_out(
        &mut self,
        session: &mut XferSession,
        limit: u64,
        now: Instant,
    ) -> Result<usize, Failed> {
        let mut written = 0usize;
        while self.writable && !self.connecting && (written as u64) < limit {
            if self.queue.is_empty() {
                break;
            }
            // Up to MAX_IOV queued payloads in one writev, within `limit`.
            let mut room = usize::try_from(limit - written as u64).unwrap_or(usize::MAX);
            // On the stack: no allocation per write.
            let mut slices = [IoSlice::new(&[]); MAX_IOV];
            let (mut used, mut want) = (0, 0);
            for chunk in self.queue.iter().take(MAX_IOV) {
                if room == 0 {
                    break;
                }
                let rest = &chunk.bytes[chunk.written..];
                let take = rest.len().min(room);
                slices[used] = IoSlice::new(&rest[..take]);
                used += 1;
                want += take;
                room -= take;
            }
            match self.sock.write_vectored(&slices[..used]) {
                Ok(n) => {
                    written += n;
                    if n < want {
                        self.writable = false;
                        self.blocked += 1;
                    }
                    self.advance(n, now, session);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    self.writable = false;
                    self.blocked += 1;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => return Err(Failed),
            }
        }
        if written > 0 {
            self.queued -= written;
            self.stats.bytes_to_client += written as u64;
            // The stream may have closed already (both FINs went by): the
            // credit has nobody to go to.
            let _ = session.release(self.stream, written as u32);
        }
        if self.queue.is_empty() && self.fin_in && !self.write_shut && !self.connecting {
            let _ = self.sock.shutdown(Shutdown::Write);
            self.write_shut = true;
        }
        Ok(written)
    }

    /// Drops `n` written bytes from the front of the queue, recording the
    /// queueing time of every payload fully written and giving its buffer
    /// back to the session for the next payload.
    fn advance(&mut self, mut n: usize, now: Instant, session: &mut XferSession) {
        while n > 0 {
            let Some(chunk) = self.queue.front_mut() else {
                return;
            };
            let left = chunk.bytes.len() - chunk.written;
            if n < left {
                chunk.written += n;
                return;
            }
            n -= left;
            let wait = now.saturating_duration_since(chunk.arrived);
            if let Some(done) = self.queue.pop_front() {
                session.recycle(done.bytes);
            }
            self.record_wait(wait);
        }
    }

    fn record_wait(&mut self, wait: Duration) {
        let us = u64::try_from(wait.as_micros()).unwrap_or(u64::MAX);
        self.stats.queued_chunks += 1;
        self.stats.queue_wait_us_total = self.stats.queue_wait_us_total.saturating_add(us);
        self.stats.queue_wait_us_max = self.stats.queue_wait_us_max.max(us);
    }

    /// Closes with a reset (linger 0), so the peer sees an error, not an end.
    pub(crate) fn abort(&self) {
        let _ = socket2::SockRef::from(&self.sock).set_linger(Some(Duration::ZERO));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    fn relay() -> (Relay, std::net::TcpStream) {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let a = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (b, _) = l.accept().unwrap();
        b.set_nonblocking(true).unwrap();
        (Relay::new(TcpStream::from_std(b), StreamId(2), false), a)
    }

    #[test]
    fn a_stream_ends_by_the_client_once_written_shut_and_its_end_arrived() {
        // The client's end arrived (a blocking peek waits for it on a
        // clone of the socket), everything toward it written and shut.
        let (mut r, peer) = relay();
        assert!(!r.ended_by_client(), "write side still open");
        r.write_shut = true;
        drop(peer);
        let probe = wait_readable(&r);
        assert_eq!(probe, 0);
        assert!(r.ended_by_client());
        // Bytes still queued toward it: not ended.
        r.push(vec![1], Instant::now(), 8);
        assert!(!r.ended_by_client());
        // A client that sent a byte before its end: not ended either (the
        // byte was for the node).
        let (mut r, mut peer) = relay();
        r.write_shut = true;
        peer.write_all(b"x").unwrap();
        drop(peer);
        assert_eq!(wait_readable(&r), 1);
        assert!(!r.ended_by_client());
    }

    /// Waits (blocking, on a duplicate of the relay's socket) until the
    /// socket has a byte or its end; what a peek then sees.
    fn wait_readable(r: &Relay) -> usize {
        use std::os::fd::{AsFd, OwnedFd};
        let fd: OwnedFd = r.sock.as_fd().try_clone_to_owned().unwrap();
        let dup = std::net::TcpStream::from(fd);
        dup.set_nonblocking(false).unwrap();
        let n = dup.peek(&mut [0u8; 1]).unwrap();
        // The duplicate shares the file status flags: make it non-blocking
        // again for the relay.
        dup.set_nonblocking(true).unwrap();
        n
    }

    #[test]
    fn tiny_payloads_beyond_the_frame_cap_are_merged_not_queued_one_by_one() {
        // Issue 17: credit counts payload bytes, so a 64 KiB window of
        // 1-byte DATA frames made 65,536 queue records (each a Vec and a
        // time stamp) per stream.
        let (mut r, _peer) = relay();
        let now = Instant::now();
        let mut merged = 0;
        for i in 0..65_536u32 {
            merged += usize::from(r.push(vec![i as u8], now, 1024));
        }
        assert_eq!(r.chunks(), 1024);
        assert_eq!(merged, 65_536 - 1024);
        assert_eq!(r.queued(), 65_536);
    }

    #[test]
    fn merged_payloads_reach_the_socket_in_order() {
        let (mut r, mut peer) = relay();
        let now = Instant::now();
        for i in 0..10u8 {
            r.push(vec![i; 3], now, 2);
        }
        let key = connlab_proto::xfer::AuthKey::new(&[1; 16]).unwrap();
        let config = connlab_proto::xfer::XferConfig::new(key, [0; 32]);
        let mut session = XferSession::server(config).unwrap();
        r.pump_out(&mut session, u64::MAX, now).ok().unwrap();
        let mut got = vec![0u8; 30];
        peer.read_exact(&mut got).unwrap();
        let want: Vec<u8> = (0..10u8).flat_map(|i| [i; 3]).collect();
        assert_eq!(got, want);
    }

    #[test]
    fn a_full_client_socket_holds_the_queue_and_it_drains_in_order() {
        let (mut r, mut peer) = relay();
        // Small buffers both ends, so 2 MiB cannot fit in them.
        socket2::SockRef::from(&r.sock)
            .set_send_buffer_size(16 * 1024)
            .unwrap();
        socket2::SockRef::from(&peer)
            .set_recv_buffer_size(16 * 1024)
            .unwrap();
        let now = Instant::now();
        let chunks = 128usize;
        for i in 0..chunks {
            r.push(vec![i as u8; 16 * 1024], now, 1024);
        }
        let total = chunks * 16 * 1024;
        let key = connlab_proto::xfer::AuthKey::new(&[1; 16]).unwrap();
        let config = connlab_proto::xfer::XferConfig::new(key, [0; 32]);
        let mut session = XferSession::server(config).unwrap();
        // Nobody reads: the socket fills, the rest waits in the queue.
        let mut sent = 0;
        while r.writable && r.queued() > 0 {
            sent += r.pump_out(&mut session, u64::MAX, now).ok().unwrap();
        }
        assert!(r.blocked > 0);
        assert!(sent < total, "2 MiB fitted in 16 KiB socket buffers");
        assert_eq!(r.queued(), total - sent);
        let reader = std::thread::spawn(move || {
            let mut got = vec![0u8; total];
            peer.read_exact(&mut got).unwrap();
            got
        });
        while r.queued() > 0 {
            // What an edge would report once the reader made room.
            r.writable = true;
            r.pump_out(&mut session, u64::MAX, now).ok().unwrap();
            std::thread::yield_now();
        }
        let got = reader.join().unwrap();
        let want: Vec<u8> = (0..chunks).flat_map(|i| vec![i as u8; 16 * 1024]).collect();
        assert!(got == want, "bytes out of order");
        assert_eq!(r.chunks(), 0);
    }
}
