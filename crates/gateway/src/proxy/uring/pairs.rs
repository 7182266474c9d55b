//! The life of a relayed pair: accepting the client, connecting its
//! backend (and moving on to the next one when a connect fails), and
//! closing the pair once its operations are cancelled.

use super::*;

impl Relay<'_> {
    pub(super) fn accepted(&mut self, res: i32, flags: u32) -> io::Result<()> {
        if !cqueue::more(flags) {
            self.accept_armed = false;
        }
        if res >= 0 {
            // SAFETY: the kernel installed this descriptor for us alone.
            let client = unsafe { OwnedFd::from_raw_fd(res) };
            self.adopt(client)?;
        } else if res == -libc::EMFILE || res == -libc::ENFILE {
            // Out of descriptors: wait until a pair is freed (or the next
            // sweep) instead of spinning on the same error.
            if !self.accept_armed {
                self.accept_paused = true;
            }
            return Ok(());
        } else if res == -libc::EINVAL && self.features.multishot_accept {
            return Err(io::Error::other(
                "--io uring: this kernel's io_uring refused a multishot accept (Linux 5.19)",
            ));
        }
        if !self.accept_armed && !self.accept_paused {
            self.arm_accept()?;
        }
        Ok(())
    }

    /// A new client: pick a backend, make the pair, start the connect.
    pub(super) fn adopt(&mut self, client: OwnedFd) -> io::Result<()> {
        self.stats.accepted += 1;
        let sock = socket2::SockRef::from(&client);
        let _ = sock.set_nodelay(true);
        let peer = sock.peer_addr().ok().and_then(|a| a.as_socket());
        let Some(peer) = peer else {
            // Gone before we looked: nothing to relay.
            return Ok(());
        };
        let Some(idx) = self.balancer.pick(peer.ip()) else {
            self.stats.no_backend += 1;
            reset_on_close(&client);
            return Ok(());
        };
        let slot = match self.free.pop() {
            Some(s) => s,
            None if (self.pairs.len() as u64) < SLOT_MASK => {
                self.pairs.push(None);
                self.generations.push(0);
                self.pairs.len() - 1
            }
            None => {
                self.stats.no_relay += 1;
                reset_on_close(&client);
                return Ok(());
            }
        };
        let generation = self.generations[slot];
        self.generations[slot] = generation.wrapping_add(1);
        let raw = client.as_raw_fd();
        self.pairs[slot] = Some(Pair {
            generation,
            fds: [Some(client), None],
            raw: [raw, -1],
            addr: Box::new(socket2::SockAddr::from(self.balancer.backends()[idx].addr)),
            backend_idx: idx,
            tries: 1,
            connecting: false,
            dirs: [Dir::new(), Dir::new()],
            ops: 0,
            closed: false,
            last_active: self.now,
        });
        self.balancer.opened(idx);
        self.stats.backends[idx].connections += 1;
        match self.connect(slot, idx) {
            Ok(()) => self.stats.limit.served(),
            // Out of descriptors for the backend socket: the proxy's own
            // limit, not the backend's fault. Shed this client.
            Err(e) if is_descriptor_limit(&e) => {
                self.stats.shed_one();
                self.stats.backends[idx].connections -= 1;
                self.close(slot, true);
            }
            Err(_) => {
                self.stats.backends[idx].connect_errors += 1;
                self.retry(slot)?;
            }
        }
        Ok(())
    }

    /// Makes the pair's backend socket for backend `idx` and queues its
    /// connect. An error leaves the pair without a backend socket.
    pub(super) fn connect(&mut self, slot: usize, idx: usize) -> io::Result<()> {
        let addr = self.balancer.backends()[idx].addr;
        let s = socket2::Socket::new(
            socket2::Domain::for_address(addr),
            socket2::Type::STREAM,
            Some(socket2::Protocol::TCP),
        )?;
        s.set_nonblocking(true)?;
        let _ = s.set_nodelay(true);
        let fd = OwnedFd::from(s);
        let Some(p) = self.pairs[slot].as_mut() else {
            return Ok(());
        };
        p.raw[1] = fd.as_raw_fd();
        p.fds[1] = Some(fd);
        *p.addr = socket2::SockAddr::from(addr);
        p.backend_idx = idx;
        p.connecting = true;
        p.ops += 1;
        let entry = opcode::Connect::new(types::Fd(p.raw[1]), p.addr.as_ptr(), p.addr.len())
            .build()
            .user_data(tag(CONNECT, 1, 0, p.generation, slot));
        self.push(&entry)
    }

    /// The current pair of a completion, or `None` when the tag is stale.
    pub(super) fn pair(&mut self, t: Tag) -> Option<&mut Pair> {
        self.pairs
            .get_mut(t.slot)
            .and_then(Option::as_mut)
            .filter(|p| p.generation == t.generation)
    }

    /// One operation of the pair ended: frees the slot if it was the last
    /// of a closed pair.
    pub(super) fn op_done(&mut self, slot: usize) {
        let Some(p) = self.pairs[slot].as_mut() else {
            return;
        };
        p.ops = p.ops.saturating_sub(1);
        if p.closed && p.ops == 0 {
            self.pairs[slot] = None;
            self.free.push(slot);
            if self.accept_paused {
                self.accept_paused = false;
                // Failing to queue it here means the ring itself is
                // broken: the next wait reports that.
                let _ = self.arm_accept();
            }
        }
    }

    pub(super) fn connected(&mut self, t: Tag, res: i32) -> io::Result<()> {
        let Some(p) = self.pair(t) else {
            return Ok(());
        };
        p.connecting = false;
        let closed = p.closed;
        let idx = p.backend_idx;
        self.op_done(t.slot);
        if closed {
            return Ok(());
        }
        if res == 0 || res == -libc::EISCONN {
            let now = self.now;
            if let Some(p) = self.pairs[t.slot].as_mut() {
                p.last_active = now;
            }
            self.arm_recv(t.slot, 0)?;
            self.arm_recv(t.slot, 1)
        } else {
            self.stats.backends[idx].connect_errors += 1;
            self.retry(t.slot)
        }
    }

    /// The backend connect failed: move the pair to the next healthy
    /// backend (each tried at most once), or reset the client when none is
    /// left.
    pub(super) fn retry(&mut self, slot: usize) -> io::Result<()> {
        let n = self.balancer.backends().len();
        let Some(p) = self.pairs[slot].as_mut() else {
            return Ok(());
        };
        let old = p.backend_idx;
        // No entry names the failed socket any more: close it now.
        p.fds[1] = None;
        p.raw[1] = -1;
        self.stats.backends[old].connections -= 1;
        loop {
            let Some(p) = self.pairs[slot].as_mut() else {
                return Ok(());
            };
            if p.tries >= n {
                break;
            }
            let idx = (old + p.tries) % n;
            p.tries += 1;
            if !self.balancer.is_healthy(idx) {
                continue;
            }
            match self.connect(slot, idx) {
                Ok(()) => {
                    self.balancer.closed(old);
                    self.balancer.opened(idx);
                    self.stats.backends[idx].connections += 1;
                    return Ok(());
                }
                // The proxy's own limit: every other backend would fail
                // the same way. Shed the client.
                Err(e) if is_descriptor_limit(&e) => {
                    self.stats.shed_one();
                    break;
                }
                Err(_) => self.stats.backends[idx].connect_errors += 1,
            }
        }
        // Counted as closed on `old`, where the balancer still has it.
        self.close(slot, true);
        Ok(())
    }

    /// Closes a pair (with a reset on both sockets when `reset`): cancels
    /// its operations in flight, gives back the buffers it holds, and
    /// releases its descriptors to be closed after the cancels are
    /// submitted. The slot is freed when the last operation completed.
    pub(super) fn close(&mut self, slot: usize, reset_both: bool) {
        let Some(p) = self.pairs.get_mut(slot).and_then(Option::as_mut) else {
            return;
        };
        if p.closed {
            return;
        }
        p.closed = true;
        let generation = p.generation;
        // At most a connect and a receive and a send per direction: kept on
        // the stack, since a pair closes once per connection.
        let mut cancels = [0u64; 5];
        let mut n = 0;
        let mut cancel = |data: u64| {
            cancels[n] = data;
            n += 1;
        };
        if p.connecting {
            cancel(tag(CONNECT, 1, 0, generation, slot));
        }
        for dir in 0..2 {
            let d = &mut p.dirs[dir];
            if d.recv == Recv::Armed {
                d.recv = Recv::Cancelling;
                cancel(tag(RECV, dir, 0, generation, slot));
            }
            let in_flight = if d.sending { d.queue.pop_front() } else { None };
            if let Some(c) = in_flight {
                cancel(tag(SEND, dir, c.bid, generation, slot));
            }
            for c in d.queue.drain(..) {
                self.buffers.give_back(c.bid);
            }
            d.held = 0;
        }
        for fd in p.fds.iter_mut().filter_map(Option::take) {
            if reset_both {
                reset_on_close(&fd);
            }
            self.closing.push(fd);
        }
        self.balancer.closed(p.backend_idx);
        let ops = p.ops;
        for &data in &cancels[..n] {
            // A full queue that cannot be submitted means the ring is
            // broken; the loop's next wait reports it.
            let _ = self.cancel(data);
        }
        if ops == 0 {
            self.pairs[slot] = None;
            self.free.push(slot);
        }
    }
}
