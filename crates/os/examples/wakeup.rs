//! The cost of waking a blocked thread on the same CPU and on the other one:
//! two threads ping-pong a byte over a pair of pipes (each blocks in `read`,
//! as a server thread blocks in `poll`/`epoll_wait`), and, for the hardware
//! floor, over a shared atomic that both spin on (no sleep, no wake-up).
//! Blocking rounds run back to back (gap 0: the CPUs never go idle) and with
//! an idle gap before each round (both threads sleep, as a server between
//! requests does), which is when a wake-up has to bring an idle CPU back.
//!
//! ```text
//! cargo run --release -p connlab-os --example wakeup [-- ROUNDS]
//! ```
//!
//! Prints CSV: `mode,gap_us,cpu_a,cpu_b,rounds,median_one_way_us,p90_one_way_us,p99_one_way_us`.
//! One way = round trip / 2.

use connlab_os::CpuList;
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

fn pin(cpu: usize) {
    let list: CpuList = cpu.to_string().parse().expect("a CPU number");
    if let Err(e) = connlab_os::pin_current_process(&list) {
        eprintln!("wakeup: cannot pin to CPU {cpu}: {e}");
        std::process::exit(1);
    }
}

/// Round trips over blocking sockets: every hop sleeps and is woken.
fn blocking(cpu_a: usize, cpu_b: usize, rounds: usize, gap_us: u64) -> Vec<f64> {
    let (mut a, mut b) = UnixStream::pair().expect("socketpair");
    let echo = std::thread::spawn(move || {
        pin(cpu_b);
        let mut byte = [0u8; 1];
        for _ in 0..rounds {
            b.read_exact(&mut byte).expect("read");
            b.write_all(&byte).expect("write");
        }
    });
    pin(cpu_a);
    let mut rtts = Vec::with_capacity(rounds);
    let mut byte = [7u8; 1];
    for _ in 0..rounds {
        if gap_us > 0 {
            std::thread::sleep(std::time::Duration::from_micros(gap_us));
        }
        let t = Instant::now();
        a.write_all(&byte).expect("write");
        a.read_exact(&mut byte).expect("read");
        rtts.push(t.elapsed().as_secs_f64() * 1e6 / 2.0);
    }
    echo.join().expect("echo thread");
    rtts
}

/// Round trips over a spinning atomic: the cache-line transfer alone.
fn spinning(cpu_a: usize, cpu_b: usize, rounds: usize, _gap_us: u64) -> Vec<f64> {
    let flag = Arc::new(AtomicU64::new(0));
    let f = Arc::clone(&flag);
    let echo = std::thread::spawn(move || {
        pin(cpu_b);
        for i in 0..rounds as u64 {
            while f.load(Ordering::Acquire) != 2 * i + 1 {
                std::hint::spin_loop();
            }
            f.store(2 * i + 2, Ordering::Release);
        }
    });
    pin(cpu_a);
    let mut rtts = Vec::with_capacity(rounds);
    for i in 0..rounds as u64 {
        let t = Instant::now();
        flag.store(2 * i + 1, Ordering::Release);
        while flag.load(Ordering::Acquire) != 2 * i + 2 {
            std::hint::spin_loop();
        }
        rtts.push(t.elapsed().as_secs_f64() * 1e6 / 2.0);
    }
    echo.join().expect("echo thread");
    rtts
}

fn quantile(sorted: &[f64], q: f64) -> f64 {
    sorted[((sorted.len() - 1) as f64 * q).round() as usize]
}

fn main() {
    let rounds: usize = match std::env::args().nth(1).map(|a| a.parse()) {
        None => 20_000,
        Some(Ok(n)) if n > 0 => n,
        Some(_) => {
            eprintln!("usage: wakeup [ROUNDS]   (ROUNDS a positive integer, default 20000)");
            std::process::exit(2);
        }
    };
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    println!("mode,gap_us,cpu_a,cpu_b,rounds,median_one_way_us,p90_one_way_us,p99_one_way_us");
    let mut pairs = vec![(0, 0)];
    if cpus > 1 {
        pairs.push((0, 1));
    }
    type Measure = fn(usize, usize, usize, u64) -> Vec<f64>;
    for (mode, gap_us, f) in [
        ("blocking", 0, blocking as Measure),
        ("blocking", 500, blocking),
        ("blocking", 5000, blocking),
        ("spinning", 0, spinning),
    ] {
        // Gapped rounds take gap x rounds: fewer of them.
        let rounds = if gap_us > 0 {
            (rounds / 10).max(100)
        } else {
            rounds
        };
        for &(a, b) in &pairs {
            if mode == "spinning" && a == b {
                continue; // two spinners on one CPU only measure the scheduler tick
            }
            let mut v = f(a, b, rounds, gap_us);
            v.sort_by(f64::total_cmp);
            println!(
                "{mode},{gap_us},{a},{b},{rounds},{:.2},{:.2},{:.2}",
                quantile(&v, 0.5),
                quantile(&v, 0.9),
                quantile(&v, 0.99)
            );
            // Unpin the main thread before the next pair.
            let all: CpuList = format!("0-{}", cpus - 1).parse().expect("cpu list");
            let _ = connlab_os::pin_current_process(&all);
        }
    }
}
