//! Model checks of the lock-free pool with `loom`: every interleaving (up to
//! a preemption bound for three threads) of alloc, steal and release. Run
//! with `RUSTFLAGS="--cfg loom" cargo test -p connlab-pipeline --release
//! --lib loom` (`.ci/run loom`).

use super::*;
use loom::cell::UnsafeCell;
use loom::sync::Arc;
use loom::thread;

/// What loom sees of each buffer's bytes: an access to a buffer without
/// happens-before from its previous owner's (two owners at once, or a
/// hand-over too weakly ordered) fails the model as a data race.
struct Shadow(Vec<UnsafeCell<u32>>);

// SAFETY: the cells are only touched by the owner of the buffer they
// stand for; loom itself checks that claim (that is the test).
unsafe impl Sync for Shadow {}
// SAFETY: as above.
unsafe impl Send for Shadow {}

fn shadow(n: usize) -> Arc<Shadow> {
    Arc::new(Shadow((0..n).map(|_| UnsafeCell::new(0)).collect()))
}

/// Writes and reads back the buffer's shadow as its owner.
fn own(shadow: &Shadow, b: &Buf<'_>, me: u32) {
    let cell = &shadow.0[b.index()];
    // SAFETY: `b` owns the buffer; loom reports it if another thread
    // touches the same cell without happens-before.
    cell.with_mut(|p| unsafe { *p = me });
    // SAFETY: as above.
    let seen = cell.with(|p| unsafe { *p });
    assert_eq!(seen, me, "buffer {} shared", b.index());
}

fn bounded(preemptions: usize) -> loom::model::Builder {
    let mut b = loom::model::Builder::new();
    b.preemption_bound = Some(preemptions);
    b
}

/// Two threads on two stripes share two buffers: the first refill takes
/// both into stripe 0's run, so the other thread steals. Each allocates,
/// uses and releases twice.
#[test]
fn loom_alloc_steal_release_two_threads() {
    bounded(3).check(|| {
        let pool = Arc::new(BufferPool::new(PoolKind::LockFree, 2, 8).unwrap());
        let sh = shadow(2);
        let handles: Vec<_> = (0..2u32)
            .map(|t| {
                let (pool, sh) = (pool.clone(), sh.clone());
                thread::spawn(move || {
                    for _ in 0..2 {
                        if let Some(b) = pool.alloc_in_stripe(t as usize) {
                            own(&sh, &b, t + 1);
                        }
                    }
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
        assert_eq!(pool.free_count(), 2, "every buffer returned");
    });
}

/// Three threads, two buffers, a clone handed to another thread: alloc
/// fails only when both buffers are owned, no buffer has two owners, the
/// last of two handles releases, and every buffer comes back.
#[test]
fn loom_exhaustion_and_shared_release_three_threads() {
    bounded(2).check(|| {
        let pool = Arc::new(BufferPool::new(PoolKind::LockFree, 2, 8).unwrap());
        let sh = shadow(2);
        let handles: Vec<_> = (0..3u32)
            .map(|t| {
                let (pool, sh) = (pool.clone(), sh.clone());
                thread::spawn(move || {
                    let Some(b) = pool.alloc_in_stripe(t as usize) else {
                        // Both buffers owned by the other two threads
                        // (a free count of 0 then is only a snapshot).
                        return;
                    };
                    own(&sh, &b, t + 1);
                    if t == 0 {
                        // Hand a clone to another thread; whichever
                        // handle drops last releases the buffer.
                        // SAFETY: loom's spawn wants 'static; the
                        // thread holds an Arc of the pool and drops the
                        // handle before it.
                        let c: Buf<'static> = unsafe { std::mem::transmute(b.clone()) };
                        let p2 = pool.clone();
                        let h = thread::spawn(move || {
                            assert!(c.ref_count() >= 1);
                            drop(c);
                            drop(p2);
                        });
                        drop(b);
                        h.join().unwrap();
                    }
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
        assert_eq!(pool.free_count(), 2, "every buffer returned");
        let a = pool.alloc_in_stripe(5).unwrap();
        let b = pool.alloc_in_stripe(6).unwrap();
        assert_ne!(a.index(), b.index());
    });
}
