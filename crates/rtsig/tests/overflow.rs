//! Signal-queue overflow: with RLIMIT_SIGPENDING lowered for this test
//! process the real-time queue overflows (the kernel sends a plain SIGIO);
//! the library marks every descriptor ready and no readiness is lost:
//! every connection is still served. The limit is process-wide, and this
//! binary holds the other tests too, so the test runs in a child copy of
//! the binary (`overflow_child`), alone.

use crate::common::{pair, pollfds};
use connlab_rtsig::{Options, Ready, RtSig};
use std::io::{Read, Write};
use std::time::Duration;

const CONNECTIONS: usize = 200;
const MSG: usize = 64;

/// Set in the child that runs the test body.
const CHILD: &str = "CONNLAB_RTSIG_OVERFLOW_CHILD";

#[test]
fn overflow_loses_no_readiness() {
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "overflow::overflow_child",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD, "1")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "the child failed:\n{stdout}\n{stderr}"
    );
    assert!(
        stdout.contains("1 passed"),
        "the child ran no test:\n{stdout}"
    );
}

/// The body of [`overflow_loses_no_readiness`], in a process of its own.
#[test]
fn overflow_child() {
    if std::env::var_os(CHILD).is_none() {
        return;
    }
    // One queued signal at a time for this process: a burst of events on
    // many connections overflows the queue at once.
    let limit = libc::rlimit {
        rlim_cur: 1,
        rlim_max: 1,
    };
    // SAFETY: setrlimit with a valid rlimit; lowering needs no privilege.
    let rc = unsafe { libc::setrlimit(libc::RLIMIT_SIGPENDING, &limit) };
    assert_eq!(rc, 0);
    let rt = RtSig::with_options(Options {
        overflow_delay: Duration::from_millis(200),
        ..Options::default()
    })
    .unwrap();
    let (mut clients, fds): (Vec<_>, Vec<_>) = (0..CONNECTIONS).map(|_| pair()).unzip();
    for &fd in &fds {
        rt.register(fd, Ready::NEW_SOCKET).unwrap();
    }
    let rounds = 10;
    std::thread::scope(|s| {
        let rt = &rt;
        // The server: poll, then echo each whole message.
        s.spawn(move || {
            let mut pfds = pollfds(&fds, libc::POLLIN);
            let mut pending = vec![Vec::<u8>::new(); CONNECTIONS];
            let mut echoed = 0;
            let mut buf = [0u8; 4096];
            while echoed < CONNECTIONS * rounds {
                let n = rt.poll(&mut pfds, Some(Duration::from_secs(20))).unwrap();
                assert!(n > 0, "readiness was lost: the poller waited 20 s");
                for (i, p) in pfds.iter().enumerate() {
                    if p.revents & libc::POLLIN == 0 {
                        continue;
                    }
                    match rt.read(p.fd, &mut buf) {
                        Ok(k) if k > 0 => pending[i].extend_from_slice(&buf[..k]),
                        _ => continue,
                    }
                    while pending[i].len() >= MSG {
                        let msg: Vec<u8> = pending[i].drain(..MSG).collect();
                        rt.write_blocking(p.fd, &msg).unwrap();
                        echoed += 1;
                    }
                }
            }
            for &fd in &fds {
                rt.close(fd).unwrap();
            }
        });
        for round in 0..rounds {
            // A burst: one message on every connection, then every answer.
            for (i, c) in clients.iter_mut().enumerate() {
                c.write_all(&[(round * 7 + i) as u8; MSG]).unwrap();
            }
            for (i, c) in clients.iter_mut().enumerate() {
                let mut back = [0u8; MSG];
                c.read_exact(&mut back)
                    .unwrap_or_else(|e| panic!("round {round}, connection {i}: {e}"));
                assert_eq!(back, [(round * 7 + i) as u8; MSG]);
            }
        }
    });
    let stats = rt.stats();
    eprintln!("{stats:?}");
    assert!(stats.overflows > 0, "the queue never overflowed: {stats:?}");
    assert!(stats.recoveries > 0, "no recovery ran: {stats:?}");
}
