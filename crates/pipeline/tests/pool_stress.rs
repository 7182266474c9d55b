//! Concurrent stress of both pools: no buffer ever has two owners, clones
//! share, and every buffer comes back.

use connlab_pipeline::{BufferPool, PoolKind};

const THREADS: u64 = 4;

fn stress(kind: PoolKind, capacity: usize, iterations: u64) {
    let pool = BufferPool::new(kind, capacity, 48).expect("pool");
    std::thread::scope(|s| {
        for t in 0..THREADS {
            let pool = &pool;
            s.spawn(move || {
                let mut held = Vec::new();
                for i in 0..iterations {
                    let Some(mut b) = pool.alloc() else {
                        // Exhausted (small pools): give everything back and go on.
                        held.clear();
                        std::thread::yield_now();
                        continue;
                    };
                    let stamp = (t << 56) | i;
                    b.set_view(8, 16)
                        .expect("unique fresh buffer")
                        .copy_from_slice(&stamp.to_le_bytes());
                    std::thread::yield_now();
                    assert_eq!(
                        b.as_slice(),
                        stamp.to_le_bytes(),
                        "buffer {} had two owners",
                        b.index()
                    );
                    if i % 3 == 0 {
                        // Clone semantics: both handles see the bytes; the
                        // buffer stays allocated until the last drops.
                        let c = b.clone();
                        assert_eq!(b.ref_count(), 2);
                        assert!(!b.is_unique());
                        held.push((stamp, c));
                    }
                    held.push((stamp, b));
                    if held.len() > 6 {
                        let (stamp, old) = held.remove(0);
                        assert_eq!(
                            old.as_slice(),
                            stamp.to_le_bytes(),
                            "buffer {} was overwritten",
                            old.index()
                        );
                    }
                }
                for (stamp, b) in held {
                    assert_eq!(b.as_slice(), stamp.to_le_bytes());
                }
            });
        }
    });
    assert_eq!(
        pool.free_count(),
        pool.capacity(),
        "{kind:?}: every buffer returned"
    );
}

#[test]
fn lock_free_pool_never_double_allocates() {
    stress(PoolKind::LockFree, 1000, 20_000);
}

#[test]
fn lock_free_pool_under_exhaustion() {
    // Fewer buffers than the threads want: refills, stealing between stripes
    // and empty-pool returns all happen.
    stress(PoolKind::LockFree, 20, 20_000);
}

#[test]
fn mutex_pool_never_double_allocates() {
    stress(PoolKind::Mutex, 1000, 20_000);
    stress(PoolKind::Mutex, 20, 5_000);
}

#[test]
fn bench_functions_verify() {
    let p = connlab_pipeline::measure_pool(2, 5_000);
    assert!(p.verified);
    assert!(p.lock_free_ns_per_op > 0.0 && p.mutex_ns_per_op > 0.0);
    let h = connlab_pipeline::measure_handoff(5_000);
    assert!(h.verified);
}
