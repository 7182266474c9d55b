//! Pool and hand-off microbenchmarks. Checks correctness first, then prints
//! timings. `cargo bench -p connlab-pipeline` for real figures; `cargo test
//! --benches` runs it quickly (small counts without optimisations).

use connlab_pipeline::{measure_handoff, measure_pool, BufferPool, PoolKind};

fn check_pool(kind: PoolKind) {
    let pool = match BufferPool::new(kind, 256, 64) {
        Ok(p) => p,
        Err(e) => panic!("pool: {e}"),
    };
    let held: Vec<_> = (0..256).filter_map(|_| pool.alloc()).collect();
    assert_eq!(held.len(), 256, "{kind:?}: every buffer allocatable");
    let mut idx: Vec<_> = held.iter().map(|b| b.index()).collect();
    idx.sort_unstable();
    idx.dedup();
    assert_eq!(idx.len(), 256, "{kind:?}: distinct buffers");
    assert!(pool.alloc().is_none(), "{kind:?}: exhausted");
    drop(held);
    assert_eq!(pool.free_count(), 256, "{kind:?}: all returned");
}

fn main() {
    let quick = cfg!(debug_assertions) || std::env::args().any(|a| a == "--test");
    check_pool(PoolKind::LockFree);
    check_pool(PoolKind::Mutex);
    let (ops, items) = if quick {
        (20_000, 20_000)
    } else {
        (2_000_000, 2_000_000)
    };
    for threads in [1, 2, 4] {
        let p = measure_pool(threads, ops);
        assert!(
            p.verified,
            "pool benchmark saw a buffer with two owners or a leak"
        );
        println!(
            "pool alloc+release, {threads} thread(s) x {ops}: lock-free {:.1} ns, mutex {:.1} ns, mutex/lock-free {:.2}",
            p.lock_free_ns_per_op, p.mutex_ns_per_op, p.ratio
        );
    }
    let h = measure_handoff(items);
    assert!(h.verified, "hand-off lost or reordered items");
    println!(
        "rtrb SPSC hand-off, {items} items: {:.1} ns per item",
        h.ns_per_item
    );
}
