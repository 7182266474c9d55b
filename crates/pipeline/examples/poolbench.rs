//! Prints `measure_pool` and `measure_handoff` figures. Arguments: `threads ops`.

fn main() {
    let a: Vec<String> = std::env::args().collect();
    let threads = a.get(1).and_then(|s| s.parse().ok()).unwrap_or(2);
    let ops = a.get(2).and_then(|s| s.parse().ok()).unwrap_or(2_000_000);
    for _ in 0..3 {
        let p = connlab_pipeline::measure_pool(threads, ops);
        println!(
            "pool {} threads x {} ops: lock-free {:.1} ns/op, mutex {:.1} ns/op, ratio {:.2}, verified {}",
            p.threads, p.ops_per_thread, p.lock_free_ns_per_op, p.mutex_ns_per_op, p.ratio, p.verified
        );
    }
    let h = connlab_pipeline::measure_handoff(1_000_000);
    println!(
        "handoff: {:.1} ns/item, verified {}",
        h.ns_per_item, h.verified
    );
}
