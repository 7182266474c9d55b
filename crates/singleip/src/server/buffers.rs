//! Send-buffer sizing toward clients: the limit set on each new socket and
//! the rate-share passes that re-size send buffers as delivery rates change
//! ([`ShareSizing`]).

use super::{SendBuffer, SendLimit, Server};
use crate::sizing::{self, ShareSizing};
use connlab_os::tcp;
use mio::net::TcpStream;
use std::collections::VecDeque;
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

/// `TCP_INFO` readings a socket's delivery rate is taken over (the span is
/// `RATE_READINGS - 1` sizing periods).
const RATE_READINGS: usize = 3;
/// Sockets read per call of a sizing pass (each a `TCP_INFO`, about a
/// microsecond, sometimes a `setsockopt`).
const SIZING_BATCH: usize = 32;

/// What rate-share sizing knows of one client socket.
pub(super) struct ConnSizing {
    /// When the socket was added.
    pub(super) born: Instant,
    /// When and `tcpi_bytes_acked` at the last few readings, oldest first:
    /// the delivery rate is taken over these (a few periods), as one period
    /// of ACKs is bursty.
    pub(super) readings: VecDeque<(Instant, u64)>,
    /// The relay's `blocked` count at the last reading.
    pub(super) blocked: u64,
    /// The lowest RTT seen, microseconds.
    pub(super) min_rtt_us: u32,
    /// The send buffer set, bytes as the kernel counts them.
    pub(super) sk_bytes: usize,
}

/// Rate-share sizing across the client sockets.
pub(super) struct Sizer {
    pub(super) rules: ShareSizing,
    /// The fastest delivery rate in the last round, bytes per second.
    pub(super) fastest: f64,
    pub(super) next: Instant,
    /// Whether any client socket was written since the last pass began (an
    /// idle server neither wakes up nor scans).
    pub(super) sent_since: bool,
    /// The next client slot of the pass under way (`None`: no pass).
    pub(super) cursor: Option<usize>,
    /// The fastest rate and the lowest RTTs seen so far in this pass.
    pub(super) pass_fastest: f64,
    pub(super) pass_rtts: Vec<Duration>,
    /// Base-RTT group starts from the last complete pass.
    pub(super) groups: Vec<Duration>,
}

impl Sizer {
    pub(super) fn in_pass(&self) -> bool {
        self.cursor.is_some()
    }

    /// The sizer rate-share sizing needs (`None` for any other send limit).
    pub(super) fn for_limit(limit: Option<SendLimit>) -> Option<Sizer> {
        match limit.map(|l| l.sndbuf) {
            Some(SendBuffer::Share(rules)) => Some(Sizer {
                rules,
                fastest: 0.0,
                next: Instant::now() + rules.period,
                sent_since: false,
                cursor: None,
                pass_fastest: 0.0,
                pass_rtts: Vec::new(),
                groups: Vec::new(),
            }),
            _ => None,
        }
    }
}

impl Server<'_> {
    /// Sets a new client socket's `TCP_NOTSENT_LOWAT` and send buffer as the
    /// send limit says; with rate-share sizing, the state its later passes
    /// start from.
    pub(super) fn size_new_socket(&self, sock: &TcpStream) -> Option<ConnSizing> {
        let mut sizing = None;
        if let Some(limit) = self.config.send_limit {
            let fd = sock.as_raw_fd();
            let _ = tcp::set_notsent_lowat(fd, limit.notsent_lowat as usize);
            match (limit.sndbuf, &self.sizer) {
                (SendBuffer::Fixed(b), _) => {
                    let _ = socket2::SockRef::from(sock).set_send_buffer_size(b);
                }
                (SendBuffer::Share(rules), Some(sizer)) => {
                    // Before any sample of its own: the handshake's RTT and
                    // the allowance every active connection has now. With no
                    // allowance yet the RTT changes nothing (a young socket
                    // gets `initial`): no TCP_INFO per accept then.
                    let info = if sizer.fastest > 0.0 {
                        tcp::tcp_info(fd).unwrap_or_default()
                    } else {
                        tcp::TcpInfo::default()
                    };
                    let rtt_us = if info.min_rtt_us > 0 {
                        info.min_rtt_us
                    } else {
                        info.rtt_us
                    };
                    let rtt = Duration::from_micros(rtt_us.into());
                    let sk_bytes = rules.target_at_age(sizer.fastest, rtt, Duration::ZERO);
                    let _ = tcp::set_send_buffer(fd, sk_bytes / 2);
                    let now = Instant::now();
                    sizing = Some(ConnSizing {
                        born: now,
                        readings: VecDeque::from([(now, info.bytes_acked)]),
                        blocked: 0,
                        min_rtt_us: rtt_us,
                        sk_bytes,
                    });
                }
                _ => {}
            }
        }
        sizing
    }

    /// Rate-share sizing, a pass over the client sockets when one is due:
    /// reads `TCP_INFO` of every socket that filled up (a short write or
    /// `EAGAIN`) since its last reading,
    /// keeps the fastest delivery rate, and re-sizes those sockets' send
    /// buffers to the allowance it gives ([`ShareSizing`]); idle sockets keep
    /// theirs. A pass goes [`SIZING_BATCH`] readings per call, between
    /// event-loop turns, so thousands of connections do not stall the loop;
    /// sockets are sized with the fastest rate so far in this pass or the
    /// last, and the base RTTs of the last pass's groups.
    pub(super) fn resize_send_buffers(&mut self, now: Instant) {
        let Some(sizer) = self.sizer.as_mut() else {
            return;
        };
        if !sizer.in_pass() {
            if now < sizer.next || !sizer.sent_since {
                return;
            }
            sizer.sent_since = false;
            sizer.cursor = Some(0);
        }
        let rules = sizer.rules;
        let mut reads = 0;
        let mut slot = sizer.cursor.unwrap_or(0);
        while slot < self.clients.len() && reads < SIZING_BATCH {
            let this = slot;
            slot += 1;
            let Some(c) = self.clients[this].as_mut() else {
                continue;
            };
            let Some(z) = c.sizing.as_mut() else { continue };
            // Only sockets that filled up since their last reading: one that
            // never does (a request-response) is not held by its buffer, and
            // reading it would only cost (measured: +190 us at p99 with 5,000
            // such connections). It keeps the buffer it has.
            if c.relay.blocked == z.blocked {
                continue;
            }
            z.blocked = c.relay.blocked;
            reads += 1;
            let Ok(info) = tcp::tcp_info(c.relay.sock.as_raw_fd()) else {
                continue;
            };
            if z.readings.len() >= RATE_READINGS {
                z.readings.pop_front();
            }
            z.readings.push_back((now, info.bytes_acked));
            if let (Some(&(t0, a0)), Some(&(t1, a1))) = (z.readings.front(), z.readings.back()) {
                // Too short a span makes a noisy sample: such a socket is
                // sized this pass but sets the pace only later.
                let span = t1.saturating_duration_since(t0);
                if span >= rules.period / 2 {
                    let r = sizing::rate(a1.saturating_sub(a0), span);
                    sizer.pass_fastest = sizer.pass_fastest.max(r);
                }
            }
            if info.min_rtt_us > 0 {
                z.min_rtt_us = info.min_rtt_us;
            }
            let rtt = Duration::from_micros(z.min_rtt_us.into());
            sizer.pass_rtts.push(rtt);
            let base = sizing::base_in(&sizer.groups, rtt, rules.same_path);
            let fastest = sizer.pass_fastest.max(sizer.fastest);
            let target = rules.target_at_age(fastest, base, now.saturating_duration_since(z.born));
            let st = &mut c.relay.stats;
            st.min_rtt_us = z.min_rtt_us;
            st.base_rtt_us = base.as_micros().try_into().unwrap_or(u32::MAX);
            if ShareSizing::worth_changing(z.sk_bytes, target)
                && tcp::set_send_buffer(c.relay.sock.as_raw_fd(), target / 2).is_ok()
            {
                z.sk_bytes = target;
                st.sndbuf_changes += 1;
                st.sndbuf_last_bytes = target as u64;
                st.sndbuf_max_bytes = st.sndbuf_max_bytes.max(target as u64);
            }
        }
        if slot < self.clients.len() {
            sizer.cursor = Some(slot);
            return;
        }
        // The pass is complete.
        sizer.cursor = None;
        sizer.fastest = sizer.pass_fastest;
        sizer.pass_fastest = 0.0;
        sizer.groups = sizing::group_starts(&sizer.pass_rtts, rules.same_path);
        sizer.next = now + rules.period_for(sizer.pass_rtts.len());
        sizer.pass_rtts.clear();
        self.stats.sizing_rounds += 1;
    }
}
