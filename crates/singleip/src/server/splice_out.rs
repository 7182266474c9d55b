//! `--splice` toward clients: DATA payloads from a node connection go to
//! their client socket by splice(2) (node socket -> pipe -> client socket)
//! instead of through user memory.
//!
//! This is the research part of the I/O server, a hand-written relay: the
//! copy path (`nodes.rs` reading the node connection in bulk into the
//! session, `Relay::pump_out` writing the queue) is what the server does
//! without the flag and stays unchanged.
//!
//! - The node connection is read so that frame boundaries are known: each
//!   read ends at the end of the current frame plus the next header
//!   ([`XferSession::until_next_payload`](connlab_proto::xfer::XferSession::until_next_payload)), so every DATA header is decoded
//!   before any of its payload is read.
//! - A DATA payload of at least [`SPLICE_MIN`] bytes whose client is open,
//!   writable and has nothing queued in user space is taken out of the
//!   session ([`XferSession::take_pending_data`](connlab_proto::xfer::XferSession::take_pending_data)): every check (unknown or
//!   closed stream, beyond credit) and all accounting happen then, before a
//!   byte is spliced. Anything else takes the copy path.
//! - The payload is spliced from the node socket into the node's pipe, as
//!   much as is there (the rest continues when the node socket is readable
//!   again), and from the pipe to the client socket. Whatever the client
//!   socket does not take at once is read from the pipe into the stream's
//!   user-space queue, the copy path's, so the pipe is empty again before
//!   the next bytes: a slow client never stalls the node connection the
//!   other streams share. Credit goes back as bytes reach the client
//!   socket, as on the copy path.
//! - The spliced bytes bypass the DRR writer's turn order (they are
//!   written as they arrive, as much as the socket takes); a stream with
//!   queued bytes goes through the writer as before.

use super::Server;
use connlab_os::pipe::{splice, Pipe};
use connlab_proto::xfer::{ErrorCode, Event, StreamId};
use std::io;
use std::os::fd::AsRawFd;
use std::time::Instant;

/// The smallest DATA payload worth splicing: below it, the copy is cheaper
/// than the extra system calls.
pub(super) const SPLICE_MIN: usize = 4096;

/// The pipe size asked for: one version 2 DATA payload (256 KiB), so a
/// payload that has arrived goes in one splice.
const PIPE_SIZE: usize = connlab_proto::xfer::MAX_DATA_PAYLOAD_V2;

/// One node connection's pipe and the payload being spliced through it.
pub(super) struct NodeSplice {
    pipe: Pipe,
    /// The pipe's capacity in bytes (what one splice may move).
    cap: usize,
    /// The stream of the payload taken out of the session, if any.
    stream: Option<StreamId>,
}

impl NodeSplice {
    fn new() -> io::Result<NodeSplice> {
        let pipe = Pipe::with_size(PIPE_SIZE)?;
        let cap = pipe.capacity();
        Ok(NodeSplice {
            pipe,
            cap,
            stream: None,
        })
    }
}

/// What [`Server::splice_step`] leaves the node's read loop to do.
pub(super) enum SpliceStep {
    /// Read (copy path) at most this many bytes.
    Read(usize),
    /// Something was done: go round the loop again.
    Again,
    /// The node socket has nothing more now.
    Stop,
    /// The node is gone.
    Gone,
}

/// Reads exactly `len` bytes (all in the pipe) out of `pipe`.
fn read_pipe(pipe: &Pipe, len: usize) -> io::Result<Vec<u8>> {
    let mut buf = vec![0u8; len];
    let mut got = 0;
    while got < len {
        match pipe.read_out(&mut buf[got..])? {
            0 => {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "the pipe ran dry",
                ))
            }
            n => got += n,
        }
    }
    Ok(buf)
}

impl Server<'_> {
    /// In splice mode, before each read of node `n`: moves the taken
    /// payload's bytes if one is under way, else takes a pending DATA
    /// payload worth splicing, else says how much the copy path may read.
    pub(super) fn splice_step(
        &mut self,
        n: usize,
        events: &mut Vec<Event>,
        budget: &mut usize,
    ) -> SpliceStep {
        let Some(node) = self.nodes.get_mut(n).and_then(Option::as_mut) else {
            return SpliceStep::Gone;
        };
        if node.session.taken_remaining() > 0 {
            if !node.readable || *budget == 0 {
                // The read loop stops (or defers) as it would for a read.
                return SpliceStep::Read(usize::MAX);
            }
            return self.splice_payload(n, budget);
        }
        let Some((stream, len)) = node.session.pending_data() else {
            return SpliceStep::Read(node.session.until_next_payload());
        };
        let client_ready = node
            .streams
            .get(&stream.0)
            .and_then(|&slot| self.clients.get(slot))
            .and_then(Option::as_ref)
            .is_some_and(|c| {
                let r = &c.relay;
                r.writable && !r.connecting && !r.write_shut && r.queued() == 0
            });
        if len < SPLICE_MIN || !client_ready {
            return SpliceStep::Read(node.session.until_next_payload());
        }
        if node.splice.is_none() {
            match NodeSplice::new() {
                Ok(sp) => node.splice = Some(sp),
                // No pipe (descriptor limit): this payload is copied.
                Err(_) => return SpliceStep::Read(node.session.until_next_payload()),
            }
        }
        let result = node.session.take_pending_data(&mut |e| events.push(e));
        let now = node.last_input;
        for event in events.drain(..) {
            self.on_event(n, event, now);
        }
        match result {
            Ok(Some((stream, _))) => {
                self.stats.spliced_payloads += 1;
                if let Some(sp) = self
                    .nodes
                    .get_mut(n)
                    .and_then(Option::as_mut)
                    .and_then(|node| node.splice.as_mut())
                {
                    sp.stream = Some(stream);
                }
                SpliceStep::Again
            }
            // Refused (a stream error, reported) or ignored: the payload is
            // read and dropped on the copy path.
            Ok(None) => match self.nodes.get_mut(n).and_then(Option::as_mut) {
                Some(node) => SpliceStep::Read(node.session.until_next_payload()),
                None => SpliceStep::Gone,
            },
            Err(error) => {
                self.connection_error(n, &error);
                SpliceStep::Gone
            }
        }
    }

    /// Splices what has arrived of the taken payload into the pipe and on
    /// to its client; what the client does not take goes to its queue.
    fn splice_payload(&mut self, n: usize, budget: &mut usize) -> SpliceStep {
        let Some(node) = self.nodes.get_mut(n).and_then(Option::as_mut) else {
            return SpliceStep::Gone;
        };
        let Some(sp) = node.splice.as_mut() else {
            return SpliceStep::Gone;
        };
        let want = node.session.taken_remaining().min(sp.cap).min(*budget);
        let moved = match splice(
            node.sock.as_raw_fd(),
            sp.pipe.write.as_raw_fd(),
            want,
            false,
        ) {
            Ok(0) => {
                let end = match node.session.finish_input() {
                    Ok(()) => "node closed the connection".to_string(),
                    Err(e) => format!("node closed the connection: {e}"),
                };
                self.drop_node(n, end);
                return SpliceStep::Gone;
            }
            Ok(k) => k,
            // Readiness is cleared only by EAGAIN: a short splice may just
            // have filled the pipe's slots.
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                node.readable = false;
                return SpliceStep::Stop;
            }
            Err(e) => {
                self.drop_node(n, format!("splicing from the node: {e}"));
                return SpliceStep::Gone;
            }
        };
        node.last_input = Instant::now();
        *budget -= moved;
        node.session.consume_taken(moved);
        let stream = sp.stream;
        if node.session.taken_remaining() == 0 {
            sp.stream = None;
        }
        // Without a stream (never so) the bytes are read and dropped.
        self.deliver_from_pipe(n, stream.unwrap_or(StreamId::CONNECTION), moved)
    }

    /// Moves the `len` bytes in node `n`'s pipe to `stream`'s client: by
    /// splice while the socket takes them and nothing is queued, the rest
    /// into the queue; dropped if the client is gone. The pipe is empty
    /// afterwards.
    fn deliver_from_pipe(&mut self, n: usize, stream: StreamId, len: usize) -> SpliceStep {
        let Some(node) = self.nodes.get_mut(n).and_then(Option::as_mut) else {
            return SpliceStep::Gone;
        };
        let Some(sp) = node.splice.as_ref() else {
            return SpliceStep::Gone;
        };
        let slot = node.streams.get(&stream.0).copied();
        let mut left = len;
        let mut client_failed = false;
        if let Some(c) = slot
            .and_then(|s| self.clients.get_mut(s))
            .and_then(Option::as_mut)
        {
            let r = &mut c.relay;
            if r.writable && !r.connecting && !r.write_shut && r.queued() == 0 {
                match splice(sp.pipe.read.as_raw_fd(), r.sock.as_raw_fd(), left, false) {
                    Ok(m) => {
                        left -= m;
                        if m > 0 {
                            r.stats.bytes_to_client += m as u64;
                            self.stats.spliced_bytes += m as u64;
                            // The stream may be closed already (both FINs).
                            let _ = node.session.release(stream, m as u32);
                            if let Some(sizer) = self.sizer.as_mut() {
                                sizer.sent_since = true;
                            }
                        }
                        if left > 0 {
                            r.writable = false;
                            r.blocked += 1;
                        }
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                        r.writable = false;
                        r.blocked += 1;
                    }
                    Err(_) => client_failed = true,
                }
            }
        }
        if left > 0 {
            let bytes = match read_pipe(&sp.pipe, left) {
                Ok(b) => b,
                Err(e) => {
                    // The pipe lost track of the stream: nothing to resync.
                    self.drop_node(n, format!("reading the splice pipe: {e}"));
                    return SpliceStep::Gone;
                }
            };
            if let Some(s) = slot.filter(|_| !client_failed) {
                if let Some(c) = self.clients.get_mut(s).and_then(Option::as_mut) {
                    self.stats.splice_spilled_bytes += left as u64;
                    if c.relay
                        .push(bytes, Instant::now(), self.config.max_frames_per_window)
                    {
                        self.stats.frames_merged += 1;
                    }
                    if c.relay.writable {
                        self.fq.activate(s);
                    }
                }
            }
        }
        if client_failed {
            if let Some(s) = slot {
                self.drop_client(
                    s,
                    "reset by client",
                    Some(ErrorCode::CONNECTION_RESET),
                    true,
                );
            }
        }
        SpliceStep::Again
    }
}
