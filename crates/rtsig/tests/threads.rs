//! Several threads poll, read, write, register and close through one
//! library instance at once; every connection is served.

use crate::common::{pair, pollfds, round_trip};
use connlab_rtsig::{Ready, RtSig};
use std::time::Duration;

const THREADS: usize = 4;
const PER_THREAD: usize = 25;
const ROUNDS: usize = 20;

#[test]
fn concurrent_pollers_each_serve_their_connections() {
    let rt = RtSig::new().unwrap();
    std::thread::scope(|s| {
        for _ in 0..THREADS {
            let rt = &rt;
            s.spawn(move || {
                let (clients, fds): (Vec<_>, Vec<_>) = (0..PER_THREAD).map(|_| pair()).unzip();
                for &fd in &fds {
                    rt.register(fd, Ready::NEW_SOCKET).unwrap();
                }
                let server = s.spawn(move || {
                    // An echo loop over this thread's own descriptors.
                    let mut pfds = pollfds(&fds, libc::POLLIN);
                    let mut served = 0;
                    let mut buf = [0u8; 256];
                    while served < PER_THREAD * ROUNDS {
                        let n = rt.poll(&mut pfds, Some(Duration::from_secs(10))).unwrap();
                        assert!(n > 0, "a poller waited 10 s for events that were sent");
                        for p in &pfds {
                            if p.revents & libc::POLLIN != 0 {
                                if let Ok(k) = rt.read(p.fd, &mut buf) {
                                    if k > 0 {
                                        rt.write_blocking(p.fd, &buf[..k]).unwrap();
                                        served += k / 8;
                                    }
                                }
                            }
                        }
                    }
                    fds
                });
                let mut clients = clients;
                for round in 0..ROUNDS {
                    for c in clients.iter_mut() {
                        let msg = (round as u64).to_le_bytes();
                        assert_eq!(round_trip(c, &msg), msg);
                    }
                }
                for fd in server.join().unwrap() {
                    rt.close(fd).unwrap();
                }
            });
        }
    });
    let stats = rt.stats();
    assert_eq!(stats.watched, 0);
    assert!(stats.signals as usize >= THREADS * PER_THREAD * ROUNDS / 2);
}
