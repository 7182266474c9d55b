//! The descriptor-limit checks of issue 29, shared by every component's
//! test: lower a child's `RLIMIT_NOFILE`, read its own CPU time from
//! `/proc` (not the test's clock), and print the figures RELIABILITY.md
//! quotes (`cargo test ... -- --nocapture` shows them).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

/// Sets the child's open-files limit (soft and hard) to `n`.
pub fn lower_nofile(pid: libc::pid_t, n: u64) {
    let limit = libc::rlimit {
        rlim_cur: n,
        rlim_max: n,
    };
    // SAFETY: valid pointers; lowering a child's limit is allowed to its
    // parent's user.
    let rc = unsafe { libc::prlimit(pid, libc::RLIMIT_NOFILE, &limit, std::ptr::null_mut()) };
    assert_eq!(rc, 0, "prlimit: {}", std::io::Error::last_os_error());
}

/// CPU seconds (user + system, every thread) process `pid` has used, from
/// `/proc/PID/stat`.
pub fn cpu_s(pid: libc::pid_t) -> f64 {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .unwrap_or_else(|e| panic!("reading /proc/{pid}/stat: {e}"));
    // Fields after the command name, which may hold spaces: utime, stime
    // are the 12th and 13th of those.
    let rest = text.rsplit_once(')').map_or("", |(_, r)| r);
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks: f64 = fields[11].parse::<f64>().unwrap() + fields[12].parse::<f64>().unwrap();
    // SAFETY: sysconf only reads a configuration value.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    ticks / hz
}

/// Runs `during` every 100 ms for `span` and returns the CPU seconds `pid`
/// used meanwhile.
pub fn cpu_during(pid: libc::pid_t, span: Duration, mut during: impl FnMut()) -> f64 {
    let before = cpu_s(pid);
    let end = Instant::now() + span;
    while Instant::now() < end {
        std::thread::sleep(Duration::from_millis(100));
        during();
    }
    cpu_s(pid) - before
}

/// Retries `serve` every 50 ms until it returns true or `within` passes;
/// the time it took, or `None`.
pub fn served_within(within: Duration, mut serve: impl FnMut() -> bool) -> Option<Duration> {
    let start = Instant::now();
    while start.elapsed() < within {
        if serve() {
            return Some(start.elapsed());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    None
}

/// Prints one row of RELIABILITY.md's "descriptor exhaustion" table.
pub fn report(component: &str, cpu_s: f64, span: Duration, recovery: Duration) {
    eprintln!(
        "descriptor exhaustion: {component}: {:.1} % CPU over {:.0} s at the limit, \
         served {:.0} ms after the release",
        100.0 * cpu_s / span.as_secs_f64(),
        span.as_secs_f64(),
        recovery.as_secs_f64() * 1e3
    );
}

/// Connects `n` clients to each address of `floods`, then holds them for
/// `span` while one more connects to the first address every 100 ms;
/// returns how many clients that made and the CPU seconds `pid` used while
/// holding them. The clients are closed on return: the flood's release.
pub fn flood_and_hold(
    pid: libc::pid_t,
    floods: &[(SocketAddr, usize)],
    span: Duration,
) -> (usize, f64) {
    let mut held: Vec<TcpStream> = Vec::new();
    for &(addr, n) in floods {
        let before = held.len();
        held.extend((0..n).filter_map(|_| TcpStream::connect(addr).ok()));
        assert_eq!(
            held.len() - before,
            n,
            "the flood of {addr} could not connect"
        );
    }
    let spent = cpu_during(pid, span, || {
        if let Ok(c) = TcpStream::connect(floods[0].0) {
            held.push(c);
        }
    });
    (held.len(), spent)
}

/// Whether a client of `addr` gets its 4 bytes echoed within a second (a
/// relay to an echo server).
pub fn echoes(addr: SocketAddr) -> bool {
    let Ok(mut c) = TcpStream::connect(addr) else {
        return false;
    };
    c.set_read_timeout(Some(Duration::from_secs(1))).unwrap();
    let mut got = [0u8; 4];
    c.write_all(b"ping").is_ok() && c.read_exact(&mut got).is_ok() && &got == b"ping"
}
