//! [`OutBuf`]: the bytes waiting for a node connection (the I/O server's
//! toward a node, the node's toward the I/O server), laid out as they go on
//! the wire. DATA frames are built in place: a relay reads its socket
//! straight into the payload slots behind reserved frame headers (one
//! `readv` of up to 64 KiB: four 16 KiB payloads at version 1, one payload
//! at version 2, whose DATA may carry 256 KiB) and the headers are filled in
//! afterwards, so a relayed byte is never copied in user space on its way
//! to the node connection; the session's own frames (CREDIT, FIN, ACCEPT,
//! ...) are appended in order before each DATA frame.

#[cfg(doc)]
use connlab_proto::xfer::MAX_DATA_PAYLOAD_V2;
use connlab_proto::xfer::{StreamId, XferSession, HEADER_LEN, MAX_PAYLOAD};
use std::io::{self, IoSliceMut, Read};

/// Payload slots one read fills at most: 4 x 16 KiB at version 1 (at
/// version 2 one slot takes a whole read).
pub(crate) const MAX_FRAMES_PER_READ: usize = 4;

/// Bytes a read asks for at most: 64 KiB whatever the version, so a buffer
/// never grows to a version 2 payload's [`MAX_DATA_PAYLOAD_V2`] for a read.
pub(crate) const MAX_READ: usize = MAX_FRAMES_PER_READ * MAX_PAYLOAD;

/// Output toward a node connection: `buf[head..tail]` waits to be written.
/// `buf` only grows and stays initialized, so building a frame in place
/// costs no clearing.
#[derive(Default)]
pub(crate) struct OutBuf {
    buf: Vec<u8>,
    head: usize,
    tail: usize,
    /// The session's output, drained here first (keeps its allocation).
    session_out: Vec<u8>,
}

/// What [`OutBuf::read_data`] got from the socket.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum ReadData {
    /// This many payload bytes, framed and queued.
    Bytes(usize),
    /// End of input.
    Eof,
}

impl OutBuf {
    /// An empty buffer.
    pub(crate) fn new() -> OutBuf {
        OutBuf::default()
    }

    /// The bytes waiting to be written.
    pub(crate) fn pending(&self) -> &[u8] {
        &self.buf[self.head..self.tail]
    }

    /// How many bytes wait.
    pub(crate) fn len(&self) -> usize {
        self.tail - self.head
    }

    /// Whether nothing waits.
    pub(crate) fn is_empty(&self) -> bool {
        self.head == self.tail
    }

    /// Drops `n` written bytes from the front.
    pub(crate) fn consume(&mut self, n: usize) {
        self.head = (self.head + n).min(self.tail);
        if self.head == self.tail {
            self.head = 0;
            self.tail = 0;
        }
    }

    /// Appends `bytes`.
    pub(crate) fn extend(&mut self, bytes: &[u8]) {
        let at = self.reserve(bytes.len());
        self.buf[at..at + bytes.len()].copy_from_slice(bytes);
        self.tail += bytes.len();
    }

    /// Appends whatever the session has queued.
    pub(crate) fn take_session_output(&mut self, session: &mut XferSession) {
        if !session.has_output() {
            return;
        }
        let mut out = std::mem::take(&mut self.session_out);
        session.drain_output(&mut out);
        self.extend(&out);
        out.clear();
        self.session_out = out;
    }

    /// Makes `need` bytes room after `tail`, moving the waiting bytes to the
    /// front or growing the buffer (zeroed once) if needed; returns `tail`.
    fn reserve(&mut self, need: usize) -> usize {
        if self.tail + need <= self.buf.len() {
            return self.tail;
        }
        if self.head > 0 {
            self.buf.copy_within(self.head..self.tail, 0);
            self.tail -= self.head;
            self.head = 0;
        }
        if self.tail + need > self.buf.len() {
            let grown = (self.tail + need).max(self.buf.len() * 2).max(MAX_READ * 2);
            self.buf.resize(grown, 0);
        }
        self.tail
    }

    /// Reads at most `max` bytes (at most [`MAX_READ`]) from `src` straight
    /// into DATA frames of `stream`, after the session's queued output: one
    /// `readv` into payload slots of the negotiated version's DATA limit
    /// ([`XferSession::max_data_payload`]) with a header's room before
    /// each, the headers written once the length is known (the
    /// payloads end up back to back with their headers, as on the wire).
    /// The caller passes `max` within the stream's credit.
    pub(crate) fn read_data(
        &mut self,
        session: &mut XferSession,
        stream: StreamId,
        src: &mut impl Read,
        max: usize,
    ) -> io::Result<ReadData> {
        let want = max.min(MAX_READ);
        if want == 0 {
            return Ok(ReadData::Bytes(0));
        }
        self.take_session_output(session);
        let slot = session.max_data_payload();
        let frames = want.div_ceil(slot);
        let at = self.reserve(want + frames * HEADER_LEN);
        let n = {
            let mut slices: [IoSliceMut<'_>; MAX_FRAMES_PER_READ] =
                std::array::from_fn(|_| IoSliceMut::new(&mut []));
            let mut rest = &mut self.buf[at..];
            let mut left = want;
            let mut used = 0;
            while left > 0 {
                let len = left.min(slot);
                let (_header, after) = rest.split_at_mut(HEADER_LEN);
                let (payload, after) = after.split_at_mut(len);
                slices[used] = IoSliceMut::new(payload);
                used += 1;
                left -= len;
                rest = after;
            }
            src.read_vectored(&mut slices[..used])?
        };
        if n == 0 {
            return Ok(ReadData::Eof);
        }
        // Only the last slot can be short, so the frames are contiguous.
        let mut pos = at;
        let mut left = n.min(want);
        while left > 0 {
            let len = left.min(slot);
            let header = session
                .send_data_header(stream, len)
                .map_err(|e| io::Error::other(e.to_string()))?;
            self.buf[pos..pos + HEADER_LEN].copy_from_slice(&header);
            pos += HEADER_LEN + len;
            left -= len;
        }
        self.tail = pos;
        Ok(ReadData::Bytes(n))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use connlab_proto::xfer::Event;

    /// A node and an I/O server session with stream `s` accepted, wired
    /// back to back in memory.
    fn pair(window: u32) -> (XferSession, XferSession, StreamId) {
        let (node, server, s) = crate::test_sessions::pair(window, 1);
        (node, server, s[0])
    }

    /// The DATA payloads `to` decodes from `bytes`, concatenated, and the
    /// number of DATA frames.
    fn payloads(to: &mut XferSession, bytes: &[u8]) -> (Vec<u8>, usize, Vec<Event>) {
        let mut events = Vec::new();
        to.feed(bytes, &mut |e| events.push(e)).unwrap();
        let mut data = Vec::new();
        let mut frames = 0;
        let mut other = Vec::new();
        for e in events {
            match e {
                Event::Data { bytes, .. } => {
                    data.extend_from_slice(&bytes);
                    frames += 1;
                }
                e => other.push(e),
            }
        }
        (data, frames, other)
    }

    #[test]
    fn a_read_becomes_back_to_back_frames_the_peer_decodes() {
        let (mut node, mut server, s) = {
            let (node, server, s) = crate::test_sessions::pair_at(1 << 20, 1, 1);
            (node, server, s[0])
        };
        let body: Vec<u8> = (0..40_000u32).map(|i| (i % 251) as u8).collect();
        let mut out = OutBuf::new();
        let mut src = &body[..];
        assert_eq!(
            out.read_data(&mut node, s, &mut src, 1 << 20).unwrap(),
            ReadData::Bytes(40_000)
        );
        // Version 1: 16 KiB + 16 KiB + the rest: three headers, nothing else.
        assert_eq!(out.len(), 40_000 + 3 * HEADER_LEN);
        assert_eq!(node.send_credit(s), Some((1 << 20) - 40_000));
        let (data, frames, _) = payloads(&mut server, out.pending());
        assert_eq!(frames, 3);
        assert_eq!(data, body);
        assert_eq!(
            out.read_data(&mut node, s, &mut src, 100).unwrap(),
            ReadData::Eof
        );
    }

    #[test]
    fn at_version_2_a_read_of_64_kib_is_one_frame() {
        let (mut node, mut server, s) = pair(1 << 20);
        assert_eq!(node.max_data_payload(), 256 * 1024);
        let body: Vec<u8> = (0..100_000u32).map(|i| (i % 251) as u8).collect();
        let mut out = OutBuf::new();
        let mut src = &body[..];
        // A read takes at most MAX_READ (64 KiB): one frame, then the rest.
        assert_eq!(
            out.read_data(&mut node, s, &mut src, 1 << 20).unwrap(),
            ReadData::Bytes(MAX_READ)
        );
        assert_eq!(out.len(), MAX_READ + HEADER_LEN);
        assert_eq!(
            out.read_data(&mut node, s, &mut src, 1 << 20).unwrap(),
            ReadData::Bytes(100_000 - MAX_READ)
        );
        assert_eq!(out.len(), 100_000 + 2 * HEADER_LEN);
        let (data, frames, _) = payloads(&mut server, out.pending());
        assert_eq!(frames, 2);
        assert_eq!(data, body);
    }

    #[test]
    fn a_read_stays_within_the_credit_given() {
        let (mut node, mut server, s) = pair(1000);
        let body = vec![9u8; 5000];
        let mut out = OutBuf::new();
        let mut src = &body[..];
        let credit = node.send_credit(s).unwrap() as usize;
        assert_eq!(
            out.read_data(&mut node, s, &mut src, credit).unwrap(),
            ReadData::Bytes(1000)
        );
        assert_eq!(node.send_credit(s), Some(0));
        let (data, frames, _) = payloads(&mut server, out.pending());
        assert_eq!((data.len(), frames), (1000, 1));
    }

    #[test]
    fn session_frames_queued_before_a_read_go_out_before_its_data() {
        let (mut node, mut server, s) = pair(1 << 16);
        let mut out = OutBuf::new();
        node.grant(s, 100).unwrap();
        let mut src = &b"hello"[..];
        out.read_data(&mut node, s, &mut src, 1 << 16).unwrap();
        node.finish(s).unwrap();
        out.take_session_output(&mut node);
        let mut events = Vec::new();
        server.feed(out.pending(), &mut |e| events.push(e)).unwrap();
        let kinds: Vec<String> = events
            .iter()
            .map(|e| {
                format!("{e:?}")
                    .split([' ', '{'])
                    .next()
                    .unwrap_or("")
                    .to_string()
            })
            .collect();
        assert_eq!(kinds, ["Credit", "Data", "Fin"], "{events:?}");
    }

    #[test]
    fn partly_written_output_is_kept_in_order_across_later_reads() {
        let (mut node, mut server, s) = pair(1 << 20);
        let body: Vec<u8> = (0..300_000u32).map(|i| (i % 253) as u8).collect();
        let mut src = &body[..];
        let mut out = OutBuf::new();
        let mut wire = Vec::new();
        // Read in big steps, write out in odd small ones, so the buffer
        // compacts and grows with bytes waiting.
        loop {
            match out.read_data(&mut node, s, &mut src, 50_000).unwrap() {
                ReadData::Eof => break,
                ReadData::Bytes(_) => {}
            }
            let k = out.len().min(7_777);
            wire.extend_from_slice(&out.pending()[..k]);
            out.consume(k);
        }
        wire.extend_from_slice(out.pending());
        out.consume(out.len());
        assert!(out.is_empty());
        let (data, _, _) = payloads(&mut server, &wire);
        assert_eq!(data, body);
    }
}
