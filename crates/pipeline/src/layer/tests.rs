use super::*;
use crate::pool::PoolKind;

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
