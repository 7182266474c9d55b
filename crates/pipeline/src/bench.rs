//! Microbenchmarks as library functions, so `cargo bench` and the CLI run the
//! same code: the SPSC hand-off cost and the pool's allocation cost.

use std::collections::VecDeque;
use std::sync::Barrier;
use std::time::Instant;

use rtrb::{PushError, RingBuffer};

use crate::pool::{BufferPool, PoolKind};

/// Cost of one hand-off through an rtrb SPSC queue between two threads.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct HandoffCost {
    /// Items passed.
    pub items: u64,
    /// Nanoseconds per item (consumer's wall time from the first item to the
    /// last, divided by the items): the streaming cost of one hop.
    pub ns_per_item: f64,
    /// True if every item arrived once and in order.
    pub verified: bool,
}

/// Queue capacity used by [`measure_handoff`].
pub const HANDOFF_QUEUE: usize = 1024;

fn wait(spins: &mut u32) {
    *spins += 1;
    if *spins < 100 {
        std::hint::spin_loop();
    } else {
        std::thread::yield_now();
    }
}

/// Passes `items` 32-byte items (the size of a queue element carrying a buffer
/// handle) from one thread to another through an rtrb queue of
/// [`HANDOFF_QUEUE`] slots and reports the nanoseconds per item. The two
/// threads are pinned to the first two allowed CPUs (cross-core, as between
/// two pipeline stages on different cores).
pub fn measure_handoff(items: u64) -> HandoffCost {
    if items == 0 {
        return HandoffCost {
            items,
            ns_per_item: 0.0,
            verified: true,
        };
    }
    let (mut tx, mut rx) = RingBuffer::<[u64; 4]>::new(HANDOFF_QUEUE);
    let cpus = allowed_cpus();
    std::thread::scope(|s| {
        let (pa, pb) = (cpus.first().copied(), cpus.get(1).copied());
        s.spawn(move || {
            pin_to(pb);
            let mut spins = 0;
            for i in 0..items {
                let mut v = [i, !i, 0, 0];
                loop {
                    match tx.push(v) {
                        Ok(()) => break,
                        Err(PushError::Full(back)) => {
                            v = back;
                            wait(&mut spins);
                        }
                    }
                }
                spins = 0;
            }
        });
        // The consumer is a scoped thread of its own too, so the caller's
        // affinity is left alone.
        let consumer = s.spawn(move || {
            pin_to(pa);
            consume(&mut rx, items)
        });
        consumer.join().unwrap_or(HandoffCost {
            items,
            ns_per_item: 0.0,
            verified: false,
        })
    })
}

fn consume(rx: &mut rtrb::Consumer<[u64; 4]>, items: u64) -> HandoffCost {
    {
        let mut next = 0u64;
        let mut ok = true;
        let mut start = None;
        let mut spins = 0;
        while next < items {
            match rx.pop() {
                Ok(v) => {
                    start.get_or_insert_with(Instant::now);
                    ok &= v[0] == next && v[1] == !next;
                    next += 1;
                    spins = 0;
                }
                Err(_) => wait(&mut spins),
            }
        }
        let elapsed = start.map_or(0.0, |t| t.elapsed().as_secs_f64());
        HandoffCost {
            items,
            ns_per_item: elapsed * 1e9 / items.max(2).saturating_sub(1) as f64,
            verified: ok,
        }
    }
}

/// The lock-free pool against the mutex pool under the same load.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct PoolCost {
    /// Threads allocating and releasing at once.
    pub threads: usize,
    /// Allocate/release pairs per thread.
    pub ops_per_thread: u64,
    /// Nanoseconds per allocate + release pair, lock-free pool (per thread:
    /// wall time of the run divided by `ops_per_thread`, averaged over threads).
    pub lock_free_ns_per_op: f64,
    /// The same for the mutex pool.
    pub mutex_ns_per_op: f64,
    /// `mutex_ns_per_op / lock_free_ns_per_op`: how many times cheaper the
    /// lock-free path is.
    pub ratio: f64,
    /// True if no buffer was ever held by two owners at once and every buffer
    /// was back in each pool at the end.
    pub verified: bool,
}

/// Buffers in the pools [`measure_pool`] uses.
pub const POOL_BENCH_BUFFERS: usize = 1024;
/// Buffers each thread holds at once in [`measure_pool`] (like PDUs in flight).
pub const POOL_BENCH_HELD: usize = 8;

/// The CPUs this thread may run on (empty if unknown).
fn allowed_cpus() -> Vec<usize> {
    connlab_os::current_affinity()
        .map(|l| l.cpus().to_vec())
        .unwrap_or_default()
}

/// Pins the calling thread to `cpu` if given; a failure leaves it unpinned.
fn pin_to(cpu: Option<usize>) {
    if let Some(c) = cpu {
        if let Ok(l) = connlab_os::CpuList::parse(&c.to_string()) {
            let _ = connlab_os::pin_current_process(&l);
        }
    }
}

fn pool_run(kind: PoolKind, threads: usize, ops: u64) -> (f64, bool) {
    let Ok(pool) = BufferPool::new(kind, POOL_BENCH_BUFFERS, 64) else {
        return (0.0, false);
    };
    let barrier = Barrier::new(threads);
    let cpus = allowed_cpus();
    let results: Vec<(f64, bool)> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let pool = &pool;
                let barrier = &barrier;
                let cpu = cpus.get(t % cpus.len().max(1)).copied();
                s.spawn(move || {
                    pin_to(cpu);
                    let mut held = VecDeque::with_capacity(POOL_BENCH_HELD + 1);
                    let mut ok = true;
                    barrier.wait();
                    let start = Instant::now();
                    for i in 0..ops {
                        let mut b = loop {
                            match pool.alloc() {
                                Some(b) => break b,
                                None => std::thread::yield_now(),
                            }
                        };
                        let stamp = ((t as u64) << 48) | i;
                        match b.set_view(0, 8) {
                            Ok(v) => v.copy_from_slice(&stamp.to_le_bytes()),
                            Err(_) => ok = false,
                        }
                        held.push_back((stamp, b));
                        if held.len() > POOL_BENCH_HELD {
                            if let Some((stamp, old)) = held.pop_front() {
                                ok &= old.as_slice() == stamp.to_le_bytes();
                            }
                        }
                    }
                    for (stamp, old) in held.drain(..) {
                        ok &= old.as_slice() == stamp.to_le_bytes();
                    }
                    (start.elapsed().as_secs_f64() * 1e9 / ops.max(1) as f64, ok)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or((0.0, false)))
            .collect()
    });
    let ns = results.iter().map(|r| r.0).sum::<f64>() / threads.max(1) as f64;
    let ok = results.iter().all(|r| r.1) && pool.free_count() == pool.capacity();
    (ns, ok)
}

/// Runs `threads` threads each doing `ops_per_thread` allocate + write +
/// release cycles (holding [`POOL_BENCH_HELD`] buffers at a time) on the
/// lock-free pool, then the same on the mutex pool, and compares. Thread `t`
/// is pinned to the `t`-th allowed CPU (cycled), so two threads really run at
/// once on two cores; without pinning the scheduler sometimes keeps both on
/// one CPU and neither pool sees contention. `threads`
/// is clamped to 1..=64.
pub fn measure_pool(threads: usize, ops_per_thread: u64) -> PoolCost {
    // Above 64 threads the 1024 buffers could all be held at once.
    let threads = threads.clamp(1, 64);
    let (lf, ok_lf) = pool_run(PoolKind::LockFree, threads, ops_per_thread);
    let (mx, ok_mx) = pool_run(PoolKind::Mutex, threads, ops_per_thread);
    PoolCost {
        threads,
        ops_per_thread,
        lock_free_ns_per_op: lf,
        mutex_ns_per_op: mx,
        ratio: if lf > 0.0 { mx / lf } else { 0.0 },
        verified: ok_lf && ok_mx,
    }
}
