//! [`FairQueue`]: deficit round robin (Shreedhar and Varghese, SIGCOMM 1995)
//! over the client sockets that have bytes to send and room to take them.
//!
//! Hand-written on purpose: this scheduler is the research of system 4 (the
//! paper's per-connection limit on the interface queue, served round-robin).
//! It is sans-I/O: the I/O server asks for the next [`Turn`], writes at most
//! [`Turn::allowance`] bytes to that flow's socket, and reports what happened
//! with [`FairQueue::complete`]. Flows are small integers (the server's
//! connection slots); a slot reused for a new connection starts afresh.
//!
//! Bytes are a stream, not packets, so a flow may use any part of its
//! deficit. A flow whose socket stopped taking bytes ([`After::Blocked`])
//! leaves the round but keeps at most one quantum of unused deficit, so a
//! flow that the kernel throttles is not punished and cannot hoard credit
//! either; a flow that emptied ([`After::Empty`]) loses its deficit, as in
//! the original algorithm.

use std::collections::VecDeque;

/// Deficit-round-robin order over active flows.
#[derive(Clone, Debug)]
pub struct FairQueue {
    quantum: u64,
    flows: Vec<FlowState>,
    /// Flows waiting for a turn, with the generation they were queued under
    /// (entries of removed flows are skipped when they come up).
    active: VecDeque<(usize, u64)>,
}

#[derive(Clone, Copy, Debug, Default)]
struct FlowState {
    deficit: u64,
    /// This flow's quantum; 0: the queue's.
    quantum: u64,
    queued: bool,
    /// Bumped by [`FairQueue::remove`], so stale queue entries are ignored.
    generation: u64,
}

/// One flow's turn: write at most `allowance` bytes, then call
/// [`FairQueue::complete`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Turn {
    /// The flow.
    pub flow: usize,
    /// Bytes it may write in this turn (its deficit).
    pub allowance: u64,
}

/// What a flow's state is after its turn.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum After {
    /// It still has bytes and its socket still takes them: back to the tail.
    Backlogged,
    /// Nothing left to send: out of the round, deficit reset.
    Empty,
    /// Its socket is full (short write or `EAGAIN`): out of the round until
    /// [`FairQueue::activate`] again, keeping at most one quantum of deficit.
    Blocked,
}

impl FairQueue {
    /// A queue giving each flow `quantum` bytes per round (at least 1).
    pub fn new(quantum: u64) -> FairQueue {
        FairQueue {
            quantum: quantum.max(1),
            flows: Vec::new(),
            active: VecDeque::new(),
        }
    }

    /// Bytes added per round to the deficit of flows without a quantum of
    /// their own.
    pub fn quantum(&self) -> u64 {
        self.quantum
    }

    /// Gives `flow` its own quantum (at least 1), so that over many rounds
    /// backlogged flows get bytes in proportion to their quanta (a weight).
    /// [`FairQueue::remove`] returns the slot to the queue's quantum.
    pub fn set_quantum(&mut self, flow: usize, quantum: u64) {
        self.slot(flow).quantum = quantum.max(1);
    }

    fn slot(&mut self, flow: usize) -> &mut FlowState {
        if flow >= self.flows.len() {
            self.flows.resize(flow + 1, FlowState::default());
        }
        &mut self.flows[flow]
    }

    fn quantum_of(&self, f: &FlowState) -> u64 {
        if f.quantum == 0 {
            self.quantum
        } else {
            f.quantum
        }
    }

    /// Flows waiting for a turn.
    pub fn len(&self) -> usize {
        self.flows.iter().filter(|f| f.queued).count()
    }

    /// Whether no flow is waiting for a turn.
    pub fn is_empty(&self) -> bool {
        self.active.is_empty()
    }

    /// Whether `flow` is waiting for a turn.
    pub fn is_active(&self, flow: usize) -> bool {
        self.flows.get(flow).is_some_and(|f| f.queued)
    }

    /// `flow` has bytes to send and room to send them: it joins the tail of
    /// the round (no-op if it is already in it).
    pub fn activate(&mut self, flow: usize) {
        let f = self.slot(flow);
        if !f.queued {
            f.queued = true;
            let generation = f.generation;
            self.active.push_back((flow, generation));
        }
    }

    /// The next flow's turn: the head of the round, its deficit raised by one
    /// quantum. `None` when no flow is active.
    pub fn next_turn(&mut self) -> Option<Turn> {
        while let Some((flow, generation)) = self.active.pop_front() {
            let quantum = self.quantum_of(&self.flows[flow]);
            let f = &mut self.flows[flow];
            if !f.queued || f.generation != generation {
                continue;
            }
            f.queued = false;
            f.deficit = f.deficit.saturating_add(quantum);
            return Some(Turn {
                flow,
                allowance: f.deficit,
            });
        }
        None
    }

    /// The flow of `turn` wrote `sent` bytes (at most its allowance) and is
    /// now in state `after`.
    pub fn complete(&mut self, turn: Turn, sent: u64, after: After) {
        let Some(quantum) = self.flows.get(turn.flow).map(|f| self.quantum_of(f)) else {
            return;
        };
        let f = &mut self.flows[turn.flow];
        f.deficit = f.deficit.saturating_sub(sent);
        match after {
            After::Backlogged => {
                if !f.queued {
                    f.queued = true;
                    self.active.push_back((turn.flow, f.generation));
                }
            }
            After::Empty => f.deficit = 0,
            After::Blocked => f.deficit = f.deficit.min(quantum),
        }
    }

    /// `flow` is gone (its connection closed): forgets it; the slot may be
    /// activated again for a new flow.
    pub fn remove(&mut self, flow: usize) {
        if let Some(f) = self.flows.get_mut(flow) {
            f.deficit = 0;
            f.quantum = 0;
            f.queued = false;
            f.generation += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Runs `turns` turns where flow i has `backlog[i]` bytes (u64::MAX:
    /// endless) and its socket takes at most `take(i, turn)` bytes per turn;
    /// returns the bytes each flow sent.
    fn simulate(
        quantum: u64,
        backlog: &mut [u64],
        turns: usize,
        take: impl Fn(usize, usize) -> u64,
    ) -> Vec<u64> {
        let mut q = FairQueue::new(quantum);
        let mut sent = vec![0; backlog.len()];
        for (i, b) in backlog.iter().enumerate() {
            if *b > 0 {
                q.activate(i);
            }
        }
        for t in 0..turns {
            let Some(turn) = q.next_turn() else { break };
            let i = turn.flow;
            let room = take(i, t);
            let n = turn.allowance.min(backlog[i]).min(room);
            backlog[i] -= n;
            sent[i] += n;
            let after = if backlog[i] == 0 {
                After::Empty
            } else if n < turn.allowance.min(backlog[i] + n) {
                After::Blocked
            } else {
                After::Backlogged
            };
            q.complete(turn, n, after);
            if after == After::Blocked {
                // The socket drains and becomes writable again at once.
                q.activate(i);
            }
        }
        sent
    }

    #[test]
    fn backlogged_flows_get_one_quantum_each_per_round() {
        let mut backlog = vec![u64::MAX; 3];
        let sent = simulate(1000, &mut backlog, 30, |_, _| u64::MAX);
        assert_eq!(sent, vec![10_000, 10_000, 10_000]);
    }

    #[test]
    fn bulk_flow_does_not_delay_a_short_one_beyond_one_quantum() {
        // Flow 0 is a bulk transfer, flow 1 has 1500 bytes: it is done after
        // two of its turns, whatever flow 0 has queued.
        let mut backlog = vec![u64::MAX, 1500];
        let sent = simulate(1000, &mut backlog, 4, |_, _| u64::MAX);
        assert_eq!(sent, vec![2000, 1500]);
    }

    #[test]
    fn removed_flow_leaves_the_round_and_its_slot_starts_afresh() {
        let mut q = FairQueue::new(100);
        q.activate(0);
        q.activate(1);
        q.remove(0);
        let t = q.next_turn().unwrap();
        assert_eq!(
            t,
            Turn {
                flow: 1,
                allowance: 100
            }
        );
        q.complete(t, 0, After::Blocked);
        assert!(q.next_turn().is_none());
        q.activate(0);
        assert_eq!(
            q.next_turn(),
            Some(Turn {
                flow: 0,
                allowance: 100
            })
        );
    }

    #[test]
    fn blocked_flow_keeps_at_most_one_quantum() {
        let mut q = FairQueue::new(100);
        q.activate(0);
        let t = q.next_turn().unwrap();
        q.complete(t, 10, After::Blocked);
        q.activate(0);
        // 90 carried over + 100 new.
        assert_eq!(q.next_turn().unwrap().allowance, 190);
    }

    #[test]
    fn activate_twice_queues_once() {
        let mut q = FairQueue::new(10);
        q.activate(3);
        q.activate(3);
        assert_eq!(q.len(), 1);
        assert!(q.next_turn().is_some());
        assert!(q.next_turn().is_none());
    }

    #[test]
    fn flows_share_in_proportion_to_their_quanta() {
        let mut q = FairQueue::new(1000);
        q.set_quantum(1, 3000);
        let mut sent = [0u64; 2];
        q.activate(0);
        q.activate(1);
        for _ in 0..200 {
            let t = q.next_turn().unwrap();
            sent[t.flow] += t.allowance;
            q.complete(t, t.allowance, After::Backlogged);
        }
        assert_eq!(sent, [100_000, 300_000]);
    }

    proptest! {
        /// Weighted fairness: always-backlogged flows with quanta q_i that
        /// take all they are given get q_i bytes per round each.
        #[test]
        fn backlogged_flows_get_bytes_in_proportion_to_their_quanta(
            quanta in proptest::collection::vec(1u64..50_000, 1..10),
            rounds in 1u64..50,
        ) {
            let mut q = FairQueue::new(1);
            for (i, &qi) in quanta.iter().enumerate() {
                q.set_quantum(i, qi);
                q.activate(i);
            }
            let mut sent = vec![0u64; quanta.len()];
            for _ in 0..rounds as usize * quanta.len() {
                let t = q.next_turn().unwrap();
                sent[t.flow] += t.allowance;
                q.complete(t, t.allowance, After::Backlogged);
            }
            let want: Vec<u64> = quanta.iter().map(|qi| qi * rounds).collect();
            prop_assert_eq!(sent, want);
        }

        /// Fairness: flows that stay backlogged and whose sockets take all
        /// they are given get the same bytes within one quantum (the last
        /// round may be cut short); flows whose sockets take less (a slow
        /// client) never get more than those plus the one quantum of deficit
        /// a blocked flow may keep.
        #[test]
        fn backlogged_flows_get_quantum_proportional_bytes(
            quantum in 1u64..20_000,
            fast in 1usize..6,
            slow in 0usize..6,
            rounds in 5usize..60,
            seed in any::<u64>(),
        ) {
            let flows = fast + slow;
            let mut backlog = vec![u64::MAX; flows];
            // Slow sockets take between 1 byte and twice the quantum, varying
            // by flow and turn (a deterministic hash of both).
            let take = |i: usize, t: usize| {
                if i < fast {
                    return u64::MAX;
                }
                let h = (seed ^ (i as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ (t as u64).wrapping_mul(0xbf58_476d_1ce4_e5b9))
                    .wrapping_mul(0x94d0_49bb_1331_11eb);
                1 + h % (quantum * 2)
            };
            let sent = simulate(quantum, &mut backlog, rounds * flows, take);
            let fast_max = *sent[..fast].iter().max().unwrap();
            let fast_min = *sent[..fast].iter().min().unwrap();
            prop_assert!(fast_max - fast_min <= quantum, "sent {sent:?}, quantum {quantum}");
            prop_assert!(fast_min >= (rounds as u64 - 1) * quantum, "sent {sent:?}, quantum {quantum}");
            for s in &sent[fast..] {
                prop_assert!(*s <= fast_max + quantum, "sent {sent:?}, quantum {quantum}");
            }
        }

        /// No starvation: with n active flows, each one gets a turn within n
        /// consecutive turns.
        #[test]
        fn every_active_flow_gets_a_turn_within_one_round(
            flows in 1usize..30,
            quantum in 1u64..5000,
            removed in proptest::collection::vec(any::<bool>(), 30),
        ) {
            let mut q = FairQueue::new(quantum);
            for i in 0..flows {
                q.activate(i);
            }
            let live: Vec<usize> = (0..flows).filter(|i| !removed[*i] || *i == 0).collect();
            for i in 0..flows {
                if !live.contains(&i) {
                    q.remove(i);
                }
            }
            for _ in 0..3 {
                let mut seen = Vec::new();
                for _ in 0..live.len() {
                    let t = q.next_turn().unwrap();
                    seen.push(t.flow);
                    q.complete(t, t.allowance, After::Backlogged);
                }
                seen.sort_unstable();
                prop_assert_eq!(&seen, &live);
            }
        }

        /// Bytes sent by a finite flow never exceed its backlog, and every
        /// finite backlog is served completely.
        #[test]
        fn finite_backlogs_are_served_completely(
            quantum in 1u64..4000,
            sizes in proptest::collection::vec(1u64..50_000, 1..10),
        ) {
            let mut backlog = sizes.clone();
            let turns = sizes.iter().map(|s| (s / quantum + 2) as usize).sum::<usize>() * sizes.len();
            let sent = simulate(quantum, &mut backlog, turns, |_, _| u64::MAX);
            prop_assert_eq!(sent, sizes);
        }
    }
}
