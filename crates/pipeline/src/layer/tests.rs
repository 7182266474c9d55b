use super::*;
use crate::pool::PoolKind;
use std::collections::VecDeque;

const N: usize = 2;

fn pool() -> BufferPool {
    BufferPool::new(PoolKind::LockFree, 512, N * HEADER_LEN + 64).unwrap()
}

fn msg<'p>(pool: &'p BufferPool, i: u8) -> Buf<'p> {
    let mut b = pool.alloc().unwrap();
    b.set_view(N * HEADER_LEN, N * HEADER_LEN + 16)
        .unwrap()
        .fill(i);
    b
}

/// Moves every Down action of `from` into `to` (a perfect wire); returns
/// the Up SDUs of `to`.
fn deliver<'p>(
    acts: &mut Vec<Action<'p>>,
    to: &mut Layer<'p>,
    now: Instant,
    drop_if: &mut dyn FnMut(usize) -> bool,
) -> Vec<Buf<'p>> {
    let mut ups = Vec::new();
    let mut out = Vec::new();
    for (i, a) in std::mem::take(acts).into_iter().enumerate() {
        if let Action::Down(b, _) = a {
            if !drop_if(i) {
                to.on_pdu(b, now, &mut out);
            }
        }
    }
    for a in out {
        match a {
            Action::Up(b, Service::Data) => ups.push(b),
            Action::Down(..) => acts.push(a),
            _ => {}
        }
    }
    ups
}

fn open_pair<'p>(pool: &'p BufferPool, window: u32) -> (Layer<'p>, Layer<'p>, Instant) {
    let cfg = LayerConfig::new(2, window, Duration::from_millis(10));
    let mut a = Layer::new(cfg, Role::Initiator, pool);
    let mut b = Layer::new(cfg, Role::Responder, pool);
    let now = Instant::now();
    let mut acts = Vec::new();
    a.connect(now, &mut acts);
    deliver(&mut acts, &mut b, now, &mut |_| false);
    assert_eq!(b.state(), State::Open);
    deliver(&mut acts, &mut a, now, &mut |_| false);
    assert_eq!(a.state(), State::Open);
    (a, b, now)
}

#[test]
fn window_limits_outstanding() {
    let pool = pool();
    let (mut a, mut b, now) = open_pair(&pool, 4);
    let mut acts = Vec::new();
    for i in 0..10 {
        a.send(msg(&pool, i), Service::Data, now, &mut acts);
        assert!(a.outstanding() <= 4);
    }
    assert_eq!(a.outstanding(), 4);
    assert!(!a.wants_data());
    assert_eq!(acts.len(), 4);
    let ups = deliver(&mut acts, &mut b, now, &mut |_| false);
    assert_eq!(ups.len(), 4);
    b.poll(now, true, &mut acts); // idle: flush the ack
    deliver(&mut acts, &mut a, now, &mut |_| false);
    // The ack opened the window: four more went out.
    assert_eq!(a.outstanding(), 4);
    assert_eq!(acts.len(), 4);
    assert!(a.counters().max_outstanding <= 4);
}

#[test]
fn loss_is_repaired_by_timeout_and_order_kept() {
    let pool = pool();
    let (mut a, mut b, mut now) = open_pair(&pool, 8);
    let mut acts = Vec::new();
    let mut got = Vec::new();
    for i in 0..6 {
        a.send(msg(&pool, i), Service::Data, now, &mut acts);
    }
    // Lose the second DT; the third to sixth are buffered out of order.
    got.extend(deliver(&mut acts, &mut b, now, &mut |i| i == 1));
    assert_eq!(got.len(), 1);
    assert_eq!(b.counters().out_of_order, 4);
    // Duplicate acks come back: fast retransmit of seq 1.
    b.poll(now, true, &mut acts);
    deliver(&mut acts, &mut a, now, &mut |_| false);
    got.extend(deliver(&mut acts, &mut b, now, &mut |_| false));
    if got.len() < 6 {
        now += Duration::from_millis(20);
        a.poll(now, true, &mut acts);
        got.extend(deliver(&mut acts, &mut b, now, &mut |_| false));
    }
    assert_eq!(got.len(), 6);
    for (i, m) in got.iter().enumerate() {
        assert_eq!(m.as_slice(), &[i as u8; 16][..]);
    }
    assert!(a.counters().retransmissions >= 1);
}

#[test]
fn duplicates_are_dropped() {
    let pool = pool();
    let (mut a, mut b, now) = open_pair(&pool, 8);
    let mut acts = Vec::new();
    a.send(msg(&pool, 9), Service::Data, now, &mut acts);
    let Some(Action::Down(p, s)) = acts.pop() else {
        panic!("no DT")
    };
    acts.push(Action::Down(p.clone(), s));
    acts.push(Action::Down(p, s));
    let ups = deliver(&mut acts, &mut b, now, &mut |_| false);
    assert_eq!(ups.len(), 1);
    assert_eq!(b.counters().duplicates, 1);
}

#[test]
fn release_handshake() {
    let pool = pool();
    let (mut a, mut b, now) = open_pair(&pool, 8);
    let mut acts = Vec::new();
    a.send(msg(&pool, 1), Service::Data, now, &mut acts);
    a.release(now, &mut acts);
    assert_eq!(a.state(), State::Open, "waits for the ack");
    deliver(&mut acts, &mut b, now, &mut |_| false);
    b.poll(now, true, &mut acts);
    deliver(&mut acts, &mut a, now, &mut |_| false);
    assert_eq!(a.state(), State::Closing);
    deliver(&mut acts, &mut b, now, &mut |_| false);
    assert_eq!(b.state(), State::Closed);
    deliver(&mut acts, &mut a, now, &mut |_| false);
    assert_eq!(a.state(), State::Closed);
    drop(acts);
    drop(a);
    drop(b);
    assert_eq!(pool.free_count(), pool.capacity());
}

#[test]
fn garbage_and_wrong_layer_are_rejected() {
    let pool = pool();
    let (_a, mut b, now) = open_pair(&pool, 8);
    let mut out = Vec::new();
    let mut g = pool.alloc().unwrap();
    g.set_view(0, 30).unwrap().fill(0xff);
    assert!(b.on_pdu_checked(g, now, &mut out).is_err());
    let other = Layer::new(
        LayerConfig::new(1, 8, Duration::from_millis(10)),
        Role::Initiator,
        &pool,
    );
    let mut acts = Vec::new();
    let mut o = other;
    o.connect(now, &mut acts);
    let Some(Action::Down(cr, _)) = acts.pop() else {
        panic!("no CR")
    };
    assert!(matches!(
        b.on_pdu_checked(cr, now, &mut out),
        Err(HeaderError::Layer {
            got: 1,
            expected: 2
        })
    ));
    assert_eq!(b.counters().rejected, 2);
}

/// Work for one layer of a [`Stack`], as the run-to-completion carrier has.
enum Work<'p> {
    Connect,
    FromBelow(Buf<'p>),
    FromAbove(Buf<'p>, Service),
    Poll(bool),
}

/// One side's layers (index 0 = bottom), driven as the run-to-completion
/// carrier drives them: every PDU a layer emits is carried on at once,
/// breadth first, with no bound on what waits in a layer's send queue.
struct Stack<'p> {
    layers: Vec<Layer<'p>>,
    to_line: VecDeque<Buf<'p>>,
    delivered: Vec<Buf<'p>>,
}

impl<'p> Stack<'p> {
    fn new(pool: &'p BufferPool, n: usize, window: u32, role: Role) -> Self {
        let layers = (1..=n)
            .map(|l| {
                Layer::new(
                    LayerConfig::new(l as u8, window, Duration::from_millis(10)),
                    role,
                    pool,
                )
            })
            .collect();
        Stack {
            layers,
            to_line: VecDeque::new(),
            delivered: Vec::new(),
        }
    }

    fn carry(&mut self, j: usize, work: Work<'p>, now: Instant) {
        let n = self.layers.len();
        let mut queue = VecDeque::from([(j, work)]);
        let mut acts = Vec::new();
        while let Some((j, work)) = queue.pop_front() {
            let l = &mut self.layers[j];
            match work {
                Work::Connect => l.connect(now, &mut acts),
                Work::FromBelow(b) => l.on_pdu(b, now, &mut acts),
                Work::FromAbove(b, s) => l.send(b, s, now, &mut acts),
                Work::Poll(idle) => l.poll(now, idle, &mut acts),
            }
            for a in acts.drain(..) {
                match a {
                    Action::Down(b, _) if j == 0 => self.to_line.push_back(b),
                    Action::Down(b, s) => queue.push_back((j - 1, Work::FromAbove(b, s))),
                    Action::Up(b, _) if j + 1 < n => queue.push_back((j + 1, Work::FromBelow(b))),
                    Action::Up(b, Service::Data) => self.delivered.push(b),
                    _ => {}
                }
            }
        }
    }

    fn poll(&mut self, now: Instant, idle: bool) {
        for j in 0..self.layers.len() {
            self.carry(j, Work::Poll(idle), now);
        }
    }
}

/// A bounded, single-threaded run over `n` stacked layers per side: a line
/// that carries one frame every `line_ms` (so a window takes longer to
/// drain than the timeout and every layer times out and goes back N), acks
/// back at once. Returns the messages delivered in order and the fewest
/// free pool buffers seen.
fn stacked_run(
    pool: &BufferPool,
    n: usize,
    window: u32,
    messages: usize,
    line_ms: u64,
) -> (Vec<u8>, usize) {
    let t0 = Instant::now();
    let mut tx = Stack::new(pool, n, window, Role::Initiator);
    let mut rx = Stack::new(pool, n, window, Role::Responder);
    for j in 0..n {
        tx.carry(j, Work::Connect, t0);
    }
    let (mut made, mut min_free) = (0usize, pool.free_count());
    for ms in 0..60_000u64 {
        let now = t0 + Duration::from_millis(ms);
        while made < messages && tx.layers[n - 1].wants_data() {
            let Some(mut b) = pool.alloc() else { break };
            let off = n * HEADER_LEN;
            b.set_view(off, off + 16).unwrap().fill(made as u8);
            tx.carry(n - 1, Work::FromAbove(b, Service::Data), now);
            made += 1;
        }
        if ms % line_ms == 0 {
            if let Some(f) = tx.to_line.pop_front() {
                rx.carry(0, Work::FromBelow(f), now);
            }
        }
        while let Some(f) = rx.to_line.pop_front() {
            tx.carry(0, Work::FromBelow(f), now);
        }
        tx.poll(now, false);
        rx.poll(now, true);
        min_free = min_free.min(pool.free_count());
        if rx.delivered.len() == messages {
            break;
        }
    }
    let got = rx.delivered.iter().map(|b| b.as_slice()[0]).collect();
    (got, min_free)
}

/// The run-to-completion wedge, deterministically: over a line slower than
/// a window per timeout, every layer times out and hands a copy of its
/// window down while the layer below still queues the previous copies.
/// Before the fix (a timeout copied every DT a lower layer still held)
/// the queues grew until the pool was empty (then no AK can be allocated)
/// and 64 of 200 messages arrived in 60 simulated seconds.
#[test]
fn stacked_go_back_n_storm_completes_without_emptying_the_pool() {
    let pool = BufferPool::new(PoolKind::LockFree, 2000, 3 * HEADER_LEN + 16).unwrap();
    let (got, min_free) = stacked_run(&pool, 3, 32, 200, 8);
    let want: Vec<u8> = (0..200).map(|i| i as u8).collect();
    assert_eq!(got, want);
    assert!(min_free > 0);
}
