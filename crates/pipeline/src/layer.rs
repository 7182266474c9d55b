//! One layer's protocol entity: a sans-I/O, TP4-like connection-oriented
//! protocol. No threads, no clock: time is passed in, and every output is an
//! [`Action`] appended to a caller-owned vector, so the same code runs in a
//! thread of its own ([`crate::Mode::LayerParallel`]) or under a mutex driven by
//! whichever thread carries a message ([`crate::Mode::RunToCompletion`]).
//!
//! # Protocol
//!
//! * **Connection**: the initiator sends CR (retransmitted every timeout until
//!   CC); the responder answers every CR with CC. **Release**: once asked to
//!   release and every DT is acknowledged, the initiator sends DR (retransmitted
//!   until DC); the responder answers every DR with DC, also after it closed.
//! * **Services offered to the layer above**: [`Service::Data`] is sequenced,
//!   acknowledged, flow-controlled and retransmitted (DT PDUs);
//!   [`Service::Expedited`] is sent at once as an EX PDU, unsequenced and not
//!   retransmitted (like N-UNITDATA). A layer sends its own CR/CC/AK/DR/DC to
//!   the layer below as expedited data and makes them reliable itself (timers
//!   and cumulative acks), so the control traffic of 11 stacked layers does
//!   not multiply through every layer's acknowledgements.
//! * **Sequencing**: 32-bit wrapping sequence numbers starting at 0; the ack
//!   field of every PDU is cumulative (next sequence number expected).
//! * **Flow control**: at most `window` DT PDUs unacknowledged. Data from
//!   above that does not fit waits in the entity's send queue
//!   ([`Layer::wants_data`] tells a driver when to stop feeding).
//! * **Retransmission**: go-back-N on timeout (all unacknowledged DT resent in
//!   order, timer restarted), plus fast retransmit of the oldest DT after three
//!   duplicate acknowledgements. The timeout adapts to the round trip the
//!   layer measures (RFC 6298: `srtt + 4 rttvar`, from DT acknowledged
//!   without having been sent again, never below `rto` nor above 64 x
//!   `rto`) and doubles on every expiry; by Karn's rule the doubled value
//!   stays until a DT sent only once is acknowledged. A fixed timeout below
//!   the time a window takes to drain through the line (32 x 32 KiB at 98.2
//!   Mbit/s is 87 ms against a 20 ms `rto`) made every layer go back N
//!   again and again: its copies queued behind the originals in the layer
//!   below, which timed out in turn, and with run-to-completion workers
//!   (who, unlike a layer thread, cannot wait for the layer below to want
//!   data) the copies grew until the pool was empty and no AK could be
//!   sent: the wedge of issue 30.
//! * **Receiving**: out-of-order DT within the window are *buffered* (handles,
//!   not copies) and delivered when the gap fills; duplicates and DT beyond the
//!   window are dropped and answered by an immediate AK. In-order DT are
//!   acknowledged after `ack_every` deliveries, after `ack_delay`, or when the
//!   driver reports it is idle, whichever comes first; any outgoing PDU carries
//!   the current ack too.
//! * **No copying**: the header goes into the buffer's headroom in front of the
//!   SDU ([`Buf::push_front`]); a sent DT is retained as a clone of the same
//!   buffer. A PDU is copied only to retransmit it while a lower layer still
//!   holds the previous transmission.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use crate::header::{data_checksum, Header, HeaderError, PduType, FLAG_DATA_CHECKSUM, HEADER_LEN};
use crate::pool::{Buf, BufError, BufferPool};

/// How an SDU is to be carried by a layer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Service {
    /// Sequenced, reliable, flow-controlled.
    Data,
    /// Immediate, unsequenced, best effort.
    Expedited,
}

/// Which end opens and releases the connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// Sends CR and DR (the sending side of the pipeline).
    Initiator,
    /// Answers with CC and DC.
    Responder,
}

/// Connection state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum State {
    /// Initiator before [`Layer::connect`].
    Idle,
    /// CR sent, waiting for CC.
    Connecting,
    /// Responder waiting for CR.
    Listening,
    /// Data transfer.
    Open,
    /// DR sent, waiting for DC.
    Closing,
    /// Released.
    Closed,
}

/// Parameters of one layer entity.
#[derive(Clone, Copy, Debug)]
pub struct LayerConfig {
    /// Layer number, 1 = bottom (written in every header and checked).
    pub layer: u8,
    /// Offset of this layer's header in every buffer (`(layer - 1) * HEADER_LEN`
    /// in the pipeline's layout, where frames start at offset 0).
    pub header_offset: usize,
    /// Most DT PDUs unacknowledged at once.
    pub window: u32,
    /// Retransmission timeout.
    pub rto: Duration,
    /// Acknowledge after this many in-order deliveries.
    pub ack_every: u32,
    /// Acknowledge at the latest this long after an unacknowledged delivery.
    pub ack_delay: Duration,
    /// Compute and check the data checksum over each SDU.
    pub data_checksum: bool,
}

impl LayerConfig {
    /// Defaults for layer `layer` with `window` and `rto`: ack every quarter
    /// window, ack delay a quarter of the timeout (at most 1 ms), data checksum on.
    pub fn new(layer: u8, window: u32, rto: Duration) -> Self {
        LayerConfig {
            layer,
            header_offset: usize::from(layer.saturating_sub(1)) * HEADER_LEN,
            window: window.max(1),
            rto,
            ack_every: (window / 4).max(1),
            ack_delay: (rto / 4).min(Duration::from_millis(1)),
            data_checksum: true,
        }
    }
}

/// Something the entity wants done.
#[derive(Debug)]
pub enum Action<'p> {
    /// Hand this PDU to the layer below as an SDU with this service.
    Down(Buf<'p>, Service),
    /// Deliver this SDU to the layer above.
    Up(Buf<'p>, Service),
    /// The connection opened.
    Opened,
    /// The connection was released.
    Closed,
}

/// Event counters of one entity.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LayerCounters {
    /// DT PDUs sent for the first time.
    pub data_sent: u64,
    /// DT SDUs delivered up in order.
    pub data_delivered: u64,
    /// DT PDUs sent again.
    pub retransmissions: u64,
    /// Of those, copied because a lower layer still held the buffer.
    pub retransmit_copies: u64,
    /// Duplicate DT received and dropped.
    pub duplicates: u64,
    /// DT received out of order and buffered.
    pub out_of_order: u64,
    /// DT received beyond the window and dropped.
    pub beyond_window: u64,
    /// PDUs rejected by the header or data checks.
    pub rejected: u64,
    /// AK PDUs sent.
    pub acks_sent: u64,
    /// EX PDUs sent and received.
    pub expedited_sent: u64,
    /// EX PDUs received.
    pub expedited_received: u64,
    /// Allocation failures (retried later).
    pub alloc_failures: u64,
    /// Largest number of unacknowledged DT seen.
    pub max_outstanding: u64,
    /// Times the retransmission timer expired.
    pub timeouts: u64,
}

fn seq_lt(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) < 0
}

/// A layer's protocol entity. See the module documentation.
pub struct Layer<'p> {
    cfg: LayerConfig,
    pool: &'p BufferPool,
    role: Role,
    state: State,
    // Sending.
    next_seq: u32,
    unacked: VecDeque<Unacked<'p>>,
    data_queue: VecDeque<Buf<'p>>,
    ex_queue: VecDeque<Buf<'p>>,
    rto_deadline: Option<Instant>,
    /// Current retransmission timeout (backed off).
    rto: Duration,
    /// The timeout the round trip gives, before any backoff.
    base_rto: Duration,
    /// Smoothed round trip and its variation (RFC 6298), once measured.
    srtt: Option<Duration>,
    rttvar: Duration,
    ctrl_deadline: Option<Instant>,
    dup_acks: u32,
    release_requested: bool,
    peer_window: u32,
    // Receiving.
    rcv_next: u32,
    reorder: Vec<Option<Buf<'p>>>,
    ack_pending: u32,
    ack_now: bool,
    ack_deadline: Option<Instant>,
    /// A CC or DC owed to the peer whose allocation failed.
    owed_ctrl: Option<PduType>,
    counters: LayerCounters,
}

struct Unacked<'p> {
    seq: u32,
    pdu: Buf<'p>,
    /// When it was first sent.
    sent: Instant,
    /// Sent again since: its acknowledgement gives no round trip (Karn).
    again: bool,
}

impl<'p> Layer<'p> {
    /// A new entity: [`State::Idle`] for an initiator, [`State::Listening`] for
    /// a responder.
    pub fn new(cfg: LayerConfig, role: Role, pool: &'p BufferPool) -> Self {
        let window = cfg.window.max(1);
        Layer {
            cfg: LayerConfig { window, ..cfg },
            pool,
            role,
            state: match role {
                Role::Initiator => State::Idle,
                Role::Responder => State::Listening,
            },
            next_seq: 0,
            unacked: VecDeque::with_capacity(window as usize),
            data_queue: VecDeque::new(),
            ex_queue: VecDeque::new(),
            rto_deadline: None,
            rto: cfg.rto,
            base_rto: cfg.rto,
            srtt: None,
            rttvar: Duration::ZERO,
            ctrl_deadline: None,
            dup_acks: 0,
            release_requested: false,
            peer_window: window,
            rcv_next: 0,
            reorder: (0..window).map(|_| None).collect(),
            ack_pending: 0,
            ack_now: false,
            ack_deadline: None,
            owed_ctrl: None,
            counters: LayerCounters::default(),
        }
    }

    /// The configuration.
    pub fn config(&self) -> &LayerConfig {
        &self.cfg
    }

    /// Current state.
    pub fn state(&self) -> State {
        self.state
    }

    /// Counters so far.
    pub fn counters(&self) -> LayerCounters {
        self.counters
    }

    /// DT PDUs sent and not yet acknowledged.
    pub fn outstanding(&self) -> usize {
        self.unacked.len()
    }

    /// SDUs accepted from above and not yet sent.
    pub fn queued(&self) -> usize {
        self.data_queue.len() + self.ex_queue.len()
    }

    /// True when a driver should hand this layer more [`Service::Data`]: open,
    /// nothing queued and the window not full.
    pub fn wants_data(&self) -> bool {
        self.state == State::Open
            && self.data_queue.is_empty()
            && (self.unacked.len() as u32) < self.window()
    }

    /// True when the layer takes [`Service::Expedited`] SDUs now (open, or
    /// already released: then they are dropped).
    pub fn accepts_expedited(&self) -> bool {
        matches!(self.state, State::Open | State::Closing | State::Closed)
    }

    /// The earliest time [`Layer::poll`] has something to do, if any.
    pub fn next_deadline(&self) -> Option<Instant> {
        [self.rto_deadline, self.ctrl_deadline, self.ack_deadline]
            .into_iter()
            .flatten()
            .min()
    }

    fn window(&self) -> u32 {
        self.cfg.window.min(self.peer_window.max(1))
    }

    /// Initiator: send CR. No effect for a responder or when not idle.
    pub fn connect(&mut self, now: Instant, out: &mut Vec<Action<'p>>) {
        if self.role == Role::Initiator && self.state == State::Idle {
            self.state = State::Connecting;
            self.send_ctrl(PduType::Cr, now, out);
            self.ctrl_deadline = Some(now + self.rto);
        }
    }

    /// Initiator: release the connection once everything queued is sent and
    /// acknowledged (DR then goes out from [`Layer::poll`] or the next ack).
    pub fn release(&mut self, now: Instant, out: &mut Vec<Action<'p>>) {
        self.release_requested = true;
        self.maybe_release(now, out);
    }

    /// Accepts an SDU from the layer above.
    pub fn send(
        &mut self,
        sdu: Buf<'p>,
        service: Service,
        now: Instant,
        out: &mut Vec<Action<'p>>,
    ) {
        match service {
            Service::Data => self.data_queue.push_back(sdu),
            Service::Expedited => {
                if self.state == State::Closed {
                    return; // released: nothing goes out any more
                }
                self.ex_queue.push_back(sdu);
            }
        }
        self.pump(now, out);
    }

    /// Sends what the state and window allow.
    fn pump(&mut self, now: Instant, out: &mut Vec<Action<'p>>) {
        if !matches!(self.state, State::Open | State::Closing) {
            return;
        }
        while let Some(sdu) = self.ex_queue.pop_front() {
            match self.encapsulate(sdu, PduType::Ex, 0) {
                Ok(pdu) => {
                    self.counters.expedited_sent += 1;
                    self.note_ack_sent();
                    out.push(Action::Down(pdu, Service::Expedited));
                }
                Err(sdu) => {
                    self.ex_queue.push_front(sdu);
                    return;
                }
            }
        }
        if self.state != State::Open {
            return;
        }
        while (self.unacked.len() as u32) < self.window() {
            let Some(sdu) = self.data_queue.pop_front() else {
                break;
            };
            let seq = self.next_seq;
            match self.encapsulate(sdu, PduType::Dt, seq) {
                Ok(pdu) => {
                    self.next_seq = seq.wrapping_add(1);
                    self.unacked.push_back(Unacked {
                        seq,
                        pdu: pdu.clone(),
                        sent: now,
                        again: false,
                    });
                    self.counters.data_sent += 1;
                    self.counters.max_outstanding =
                        self.counters.max_outstanding.max(self.unacked.len() as u64);
                    if self.rto_deadline.is_none() {
                        self.rto_deadline = Some(now + self.rto);
                    }
                    self.note_ack_sent();
                    out.push(Action::Down(pdu, Service::Data));
                }
                Err(sdu) => {
                    self.data_queue.push_front(sdu);
                    return;
                }
            }
        }
        self.maybe_release(now, out);
    }

    /// Puts this layer's header in front of `sdu`, copying only if the
    /// headroom is another handle's. Gives the SDU back if the pool is empty.
    fn encapsulate(
        &mut self,
        mut sdu: Buf<'p>,
        kind: PduType,
        seq: u32,
    ) -> Result<Buf<'p>, Buf<'p>> {
        let (flags, dck) = if self.cfg.data_checksum {
            (FLAG_DATA_CHECKSUM, data_checksum(sdu.as_slice()))
        } else {
            (0, 0)
        };
        let header = Header {
            kind,
            flags,
            window: self.cfg.window.min(u32::from(u16::MAX)) as u16,
            seq,
            ack: self.rcv_next,
            length: sdu.len() as u32,
            data_checksum: dck,
            layer: self.cfg.layer,
        };
        match sdu.push_front(HEADER_LEN) {
            Ok(h) => {
                header.emit(h);
                return Ok(sdu);
            }
            Err(BufError::Claimed | BufError::Shared) => {}
            Err(BufError::NoHeadroom { .. } | BufError::Range { .. }) => {
                // Mis-sized buffer from above: nothing sensible to send.
                self.counters.rejected += 1;
                return Err(sdu);
            }
        }
        let Some(mut copy) = sdu.copy() else {
            self.counters.alloc_failures += 1;
            return Err(sdu);
        };
        match copy.push_front(HEADER_LEN) {
            Ok(h) => {
                header.emit(h);
                Ok(copy)
            }
            Err(_) => Err(sdu),
        }
    }

    /// Sends a header-only control PDU (CR, CC, AK, DR, DC). Returns false if
    /// the pool was empty.
    fn send_ctrl(&mut self, kind: PduType, _now: Instant, out: &mut Vec<Action<'p>>) -> bool {
        let Some(mut b) = self.pool.alloc() else {
            self.counters.alloc_failures += 1;
            return false;
        };
        let off = self.cfg.header_offset;
        let header = Header {
            kind,
            flags: 0,
            window: self.cfg.window.min(u32::from(u16::MAX)) as u16,
            seq: 0,
            ack: self.rcv_next,
            length: 0,
            data_checksum: 0,
            layer: self.cfg.layer,
        };
        match b.set_view(off, off + HEADER_LEN) {
            Ok(h) => header.emit(h),
            Err(_) => {
                self.counters.rejected += 1;
                return false;
            }
        }
        if kind == PduType::Ak {
            self.counters.acks_sent += 1;
        }
        self.note_ack_sent();
        out.push(Action::Down(b, Service::Expedited));
        true
    }

    fn note_ack_sent(&mut self) {
        self.ack_pending = 0;
        self.ack_now = false;
        self.ack_deadline = None;
    }

    /// Processes a PDU from the layer below. Bad PDUs are counted and
    /// dropped (see [`Layer::check`] for the reason).
    pub fn on_pdu(&mut self, pdu: Buf<'p>, now: Instant, out: &mut Vec<Action<'p>>) {
        let _ = self.on_pdu_checked(pdu, now, out);
    }

    /// Checks a PDU's header (and data checksum) for this layer.
    pub fn check(&self, pdu: &[u8]) -> Result<Header, HeaderError> {
        let h = Header::parse(pdu)?;
        if h.layer != self.cfg.layer {
            return Err(HeaderError::Layer {
                got: h.layer,
                expected: self.cfg.layer,
            });
        }
        if h.flags & FLAG_DATA_CHECKSUM != 0 && data_checksum(&pdu[HEADER_LEN..]) != h.data_checksum
        {
            return Err(HeaderError::DataChecksum);
        }
        Ok(h)
    }

    /// As [`Layer::on_pdu`], returning why a PDU was rejected.
    pub fn on_pdu_checked(
        &mut self,
        mut pdu: Buf<'p>,
        now: Instant,
        out: &mut Vec<Action<'p>>,
    ) -> Result<(), HeaderError> {
        let h = match self.check(pdu.as_slice()) {
            Ok(h) => h,
            Err(e) => {
                self.counters.rejected += 1;
                return Err(e);
            }
        };
        if pdu.advance(HEADER_LEN).is_err() {
            self.counters.rejected += 1;
            return Err(HeaderError::Short(pdu.len()));
        }
        match h.kind {
            PduType::Cr => {
                if self.role == Role::Responder && self.state != State::Closed {
                    if self.state == State::Listening {
                        self.state = State::Open;
                        self.peer_window = u32::from(h.window).max(1);
                        out.push(Action::Opened);
                    }
                    if !self.send_ctrl(PduType::Cc, now, out) {
                        self.owed_ctrl = Some(PduType::Cc);
                    }
                }
            }
            PduType::Cc => {
                if self.state == State::Connecting {
                    self.state = State::Open;
                    self.peer_window = u32::from(h.window).max(1);
                    self.ctrl_deadline = None;
                    self.rto = self.cfg.rto;
                    out.push(Action::Opened);
                    self.pump(now, out);
                }
            }
            PduType::Dr => {
                if self.role == Role::Responder && self.state != State::Listening {
                    if self.state != State::Closed {
                        self.state = State::Closed;
                        self.drop_state();
                        out.push(Action::Closed);
                    }
                    if !self.send_ctrl(PduType::Dc, now, out) {
                        self.owed_ctrl = Some(PduType::Dc);
                    }
                }
            }
            PduType::Dc => {
                if self.state == State::Closing {
                    self.state = State::Closed;
                    self.ctrl_deadline = None;
                    self.drop_state();
                    out.push(Action::Closed);
                }
            }
            PduType::Ak => {
                if matches!(self.state, State::Open | State::Closing) {
                    self.on_ack(h.ack, true, now, out);
                }
            }
            PduType::Ex => {
                if matches!(self.state, State::Open | State::Closing) {
                    self.on_ack(h.ack, false, now, out);
                    self.counters.expedited_received += 1;
                    out.push(Action::Up(pdu, Service::Expedited));
                }
            }
            PduType::Dt => {
                if self.state == State::Open || self.state == State::Closing {
                    self.on_ack(h.ack, false, now, out);
                    self.on_data(h.seq, pdu, now, out);
                }
            }
        }
        Ok(())
    }

    fn drop_state(&mut self) {
        self.unacked.clear();
        self.data_queue.clear();
        self.ex_queue.clear();
        self.rto_deadline = None;
        self.ack_deadline = None;
        self.ack_pending = 0;
        self.ack_now = false;
        for slot in &mut self.reorder {
            *slot = None;
        }
    }

    fn on_data(&mut self, seq: u32, sdu: Buf<'p>, now: Instant, out: &mut Vec<Action<'p>>) {
        let d = seq.wrapping_sub(self.rcv_next);
        let w = self.cfg.window;
        if (d as i32) < 0 {
            self.counters.duplicates += 1;
            self.ack_now = true;
        } else if d == 0 {
            self.deliver(sdu, out);
            loop {
                let slot = (self.rcv_next % w) as usize;
                match self.reorder[slot].take() {
                    Some(b) => self.deliver(b, out),
                    None => break,
                }
            }
        } else if d < w {
            let slot = (seq % w) as usize;
            if self.reorder[slot].is_some() {
                self.counters.duplicates += 1;
            } else {
                self.reorder[slot] = Some(sdu);
                self.counters.out_of_order += 1;
            }
            self.ack_now = true;
        } else {
            self.counters.beyond_window += 1;
            self.ack_now = true;
        }
        if self.ack_now || self.ack_pending >= self.cfg.ack_every {
            self.send_ack(now, out);
        } else if self.ack_pending > 0 && self.ack_deadline.is_none() {
            self.ack_deadline = Some(now + self.cfg.ack_delay);
        }
    }

    fn deliver(&mut self, sdu: Buf<'p>, out: &mut Vec<Action<'p>>) {
        self.rcv_next = self.rcv_next.wrapping_add(1);
        self.ack_pending += 1;
        self.counters.data_delivered += 1;
        out.push(Action::Up(sdu, Service::Data));
    }

    fn send_ack(&mut self, now: Instant, out: &mut Vec<Action<'p>>) {
        if !self.send_ctrl(PduType::Ak, now, out) {
            // Pool empty: try again soon.
            self.ack_deadline = Some(now + self.cfg.ack_delay);
        }
    }

    fn on_ack(&mut self, ack: u32, pure: bool, now: Instant, out: &mut Vec<Action<'p>>) {
        let una = self.unacked.front().map_or(self.next_seq, |u| u.seq);
        if seq_lt(una, ack) && !seq_lt(self.next_seq, ack) {
            // The newest DT this ack covers that went only once.
            let mut sample = None;
            while let Some(u) = self.unacked.front() {
                if seq_lt(u.seq, ack) {
                    if !u.again {
                        sample = Some(now.saturating_duration_since(u.sent));
                    }
                    self.unacked.pop_front();
                } else {
                    break;
                }
            }
            self.dup_acks = 0;
            if let Some(rtt) = sample {
                self.measured(rtt);
                self.rto = self.base_rto;
            }
            self.rto_deadline = if self.unacked.is_empty() {
                None
            } else {
                Some(now + self.rto)
            };
            self.pump(now, out);
        } else if pure && ack == una && !self.unacked.is_empty() {
            self.dup_acks += 1;
            if self.dup_acks == 3 {
                self.retransmit(1, out);
            }
        }
    }

    /// Resends the first `n` unacknowledged DT (fresh ack field; copied if a
    /// lower layer still holds the buffer).
    fn retransmit(&mut self, n: usize, out: &mut Vec<Action<'p>>) {
        let ack = self.rcv_next;
        for i in 0..n.min(self.unacked.len()) {
            let u = &mut self.unacked[i];
            if !u.pdu.is_unique() {
                match u.pdu.copy() {
                    Some(c) => {
                        u.pdu = c;
                        self.counters.retransmit_copies += 1;
                    }
                    None => {
                        self.counters.alloc_failures += 1;
                        return; // the timer fires again
                    }
                }
            }
            if let Ok(view) = u.pdu.view_mut() {
                // Refresh the piggybacked ack (and with it the header checksum).
                if let Ok(mut h) = Header::parse(view) {
                    h.ack = ack;
                    h.emit(view);
                }
            }
            self.counters.retransmissions += 1;
            u.again = true;
            out.push(Action::Down(u.pdu.clone(), Service::Data));
        }
        self.ack_pending = 0;
        self.ack_now = false;
        self.ack_deadline = None;
    }

    /// Takes a round-trip sample into the timeout (RFC 6298, 2.2-2.3).
    fn measured(&mut self, rtt: Duration) {
        match self.srtt {
            None => {
                self.srtt = Some(rtt);
                self.rttvar = rtt / 2;
            }
            Some(srtt) => {
                let diff = srtt.abs_diff(rtt);
                self.rttvar = (self.rttvar * 3 + diff) / 4;
                self.srtt = Some((srtt * 7 + rtt) / 8);
            }
        }
        let rto = self.srtt.unwrap_or(rtt) + self.rttvar * 4;
        self.base_rto = rto.clamp(self.cfg.rto, self.cfg.rto * 64);
    }

    fn backoff(&mut self) {
        self.rto = (self.rto * 2).min(self.cfg.rto * 64);
    }

    fn maybe_release(&mut self, now: Instant, out: &mut Vec<Action<'p>>) {
        if self.release_requested
            && self.role == Role::Initiator
            && self.state == State::Open
            && self.data_queue.is_empty()
            && self.ex_queue.is_empty()
            && self.unacked.is_empty()
        {
            self.state = State::Closing;
            self.send_ctrl(PduType::Dr, now, out);
            self.ctrl_deadline = Some(now + self.rto);
        }
    }

    /// Runs timers (retransmission, CR/DR retry, delayed ack) and, if `idle`
    /// (the driver has no more input right now), sends any pending ack.
    pub fn poll(&mut self, now: Instant, idle: bool, out: &mut Vec<Action<'p>>) {
        if let Some(kind) = self.owed_ctrl.take() {
            if !self.send_ctrl(kind, now, out) {
                self.owed_ctrl = Some(kind);
            }
        }
        if let Some(t) = self.ctrl_deadline {
            if now >= t {
                let kind = match self.state {
                    State::Connecting => Some(PduType::Cr),
                    State::Closing => Some(PduType::Dr),
                    _ => None,
                };
                self.backoff();
                self.ctrl_deadline = kind.map(|_| now + self.rto);
                if let Some(kind) = kind {
                    self.send_ctrl(kind, now, out);
                }
            }
        }
        if let Some(t) = self.rto_deadline {
            if now >= t && !self.unacked.is_empty() {
                self.counters.timeouts += 1;
                self.dup_acks = 0;
                self.backoff();
                self.retransmit(self.unacked.len(), out);
                self.rto_deadline = Some(now + self.rto);
            }
        }
        let ack_due = self.ack_now
            || (self.ack_pending > 0 && (idle || self.ack_deadline.is_some_and(|t| now >= t)));
        if ack_due && matches!(self.state, State::Open | State::Closing) {
            self.send_ack(now, out);
        }
        self.pump(now, out);
    }
}

#[cfg(test)]
mod tests;
