//! The bytes of a pair: receives into the buffer ring, each buffer sent on
//! to the other socket as it is, back-pressure, and the end of a direction.

use super::*;

impl Relay<'_> {
    /// Queues the receive of direction `dir` unless one is in flight, the
    /// source ended, or the direction holds its limit.
    pub(super) fn arm_recv(&mut self, slot: usize, dir: usize) -> io::Result<()> {
        let limit = self.limit;
        let multishot = self.features.multishot_recv;
        let Some(p) = self.pairs[slot].as_mut() else {
            return Ok(());
        };
        let d = &p.dirs[dir];
        if p.closed
            || p.connecting
            || d.recv != Recv::Idle
            || d.eof
            || d.starved
            || d.held >= limit
            || d.queue.len() >= MAX_HELD_CHUNKS
        {
            return Ok(());
        }
        p.dirs[dir].recv = Recv::Armed;
        p.ops += 1;
        let fd = types::Fd(p.raw[dir]);
        let entry = if multishot {
            opcode::RecvMulti::new(fd, GROUP).build()
        } else {
            opcode::Recv::new(fd, std::ptr::null_mut(), CHUNK as u32)
                .buf_group(GROUP)
                .build()
                .flags(squeue::Flags::BUFFER_SELECT)
        };
        let entry = entry.user_data(tag(RECV, dir, 0, p.generation, slot));
        self.push(&entry)
    }

    pub(super) fn cancel(&mut self, data: u64) -> io::Result<()> {
        let entry = opcode::AsyncCancel::new(data)
            .build()
            .user_data(tag(CANCEL, 0, 0, 0, 0));
        self.push(&entry)
    }

    pub(super) fn received(&mut self, t: Tag, res: i32, flags: u32) -> io::Result<()> {
        let bid = cqueue::buffer_select(flags);
        let last = !cqueue::more(flags);
        let limit = self.limit;
        let now = self.now;
        let Some(p) = self.pair(t) else {
            if let Some(bid) = bid {
                self.buffers.give_back(bid);
            }
            return Ok(());
        };
        let generation = p.generation;
        if last {
            p.dirs[t.dir].recv = Recv::Idle;
        }
        if p.closed {
            if let Some(bid) = bid {
                self.buffers.give_back(bid);
            }
            if last {
                self.op_done(t.slot);
            }
            return Ok(());
        }
        let mut fail = false;
        let mut pause = false;
        let mut grow = false;
        match (res, bid) {
            (n, Some(bid)) if n > 0 => {
                let d = &mut p.dirs[t.dir];
                d.queue.push_back(Chunk {
                    bid,
                    start: 0,
                    end: (n as usize).min(CHUNK),
                });
                d.held += n as usize;
                pause =
                    d.recv == Recv::Armed && (d.held >= limit || d.queue.len() >= MAX_HELD_CHUNKS);
                if pause {
                    d.recv = Recv::Cancelling;
                }
                p.last_active = now;
            }
            (0, None) => {
                p.dirs[t.dir].eof = true;
                p.last_active = now;
            }
            (n, bid) if n >= 0 => {
                // Bytes without a buffer, or a buffer without bytes:
                // nothing to send; the buffer goes back.
                if let Some(bid) = bid {
                    self.buffers.give_back(bid);
                }
            }
            (e, _) if e == -libc::ENOBUFS => {
                if !std::mem::replace(&mut p.dirs[t.dir].starved, true) {
                    self.starved.push((t.slot, generation, t.dir));
                }
                grow = true;
            }
            (e, _) if e == -libc::ECANCELED => {}
            (e, _) if e == -libc::EINVAL && self.features.multishot_recv => {
                return Err(io::Error::other(
                    "--io uring: this kernel's io_uring refused a multishot receive (Linux 6.0)",
                ));
            }
            // A reset or another error on this socket: this pair only.
            _ => fail = true,
        }
        if pause {
            self.cancel(tag(RECV, t.dir, 0, generation, t.slot))?;
        }
        self.grow |= grow;
        if last {
            self.op_done(t.slot);
        }
        if fail {
            self.close(t.slot, true);
            return Ok(());
        }
        self.send(t.slot, t.dir)?;
        self.maybe_shut(t.slot, t.dir);
        self.arm_recv(t.slot, t.dir)
    }

    /// Queues the send of direction `dir`'s first chunk unless one is in
    /// flight.
    pub(super) fn send(&mut self, slot: usize, dir: usize) -> io::Result<()> {
        let Some(p) = self.pairs[slot].as_mut() else {
            return Ok(());
        };
        let d = &mut p.dirs[dir];
        if p.closed || d.sending {
            return Ok(());
        }
        let Some(c) = d.queue.front().copied() else {
            return Ok(());
        };
        let at = self.buffers.at(c.bid, c.start)?;
        d.sending = true;
        p.ops += 1;
        let entry = opcode::Send::new(types::Fd(p.raw[1 - dir]), at, (c.end - c.start) as u32)
            .flags(libc::MSG_WAITALL | libc::MSG_NOSIGNAL)
            .build()
            .user_data(tag(SEND, dir, c.bid, p.generation, slot));
        self.push(&entry)
    }

    pub(super) fn sent(&mut self, t: Tag, res: i32) -> io::Result<()> {
        let now = self.now;
        let Some(p) = self.pair(t) else {
            self.buffers.give_back(t.bid);
            return Ok(());
        };
        p.dirs[t.dir].sending = false;
        if p.closed {
            // `close` gave back every chunk but this one.
            self.buffers.give_back(t.bid);
            self.op_done(t.slot);
            return Ok(());
        }
        let idx = p.backend_idx;
        let d = &mut p.dirs[t.dir];
        let mut finished = None;
        let mut moved = 0;
        let ok = res >= 0 && d.queue.front().is_some_and(|c| c.bid == t.bid);
        if ok {
            if let Some(c) = d.queue.front_mut() {
                moved = (res as usize).min(c.end - c.start);
                c.start += moved;
                d.held -= moved;
                if c.start == c.end {
                    finished = d.queue.pop_front().map(|c| c.bid);
                }
            }
            p.last_active = now;
        }
        let s = &mut self.stats.backends[idx];
        if t.dir == 0 {
            s.bytes_to += moved as u64;
        } else {
            s.bytes_from += moved as u64;
        }
        if let Some(bid) = finished {
            self.buffers.give_back(bid);
        }
        self.op_done(t.slot);
        if !ok {
            // The destination reset or went away: this pair only.
            self.close(t.slot, true);
            return Ok(());
        }
        self.send(t.slot, t.dir)?;
        self.maybe_shut(t.slot, t.dir);
        self.arm_recv(t.slot, t.dir)
    }

    /// Passes direction `dir`'s end on once everything before it was sent;
    /// closes the pair when both directions are done.
    pub(super) fn maybe_shut(&mut self, slot: usize, dir: usize) {
        let Some(p) = self.pairs[slot].as_mut() else {
            return;
        };
        let d = &mut p.dirs[dir];
        if p.closed || !d.eof || d.shut || d.sending || !d.queue.is_empty() {
            return;
        }
        d.shut = true;
        // SAFETY: shutdown(2) on the pair's open socket.
        unsafe { libc::shutdown(p.raw[1 - dir], libc::SHUT_WR) };
        if p.dirs[0].shut && p.dirs[1].shut {
            self.close(slot, false);
        }
    }
}
