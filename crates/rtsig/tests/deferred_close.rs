//! Deferred close: a descriptor number is reused only after the signal
//! queue can no longer hold an event for it, so a new socket never inherits
//! a stale readiness.

use crate::common::{eventually, is_open, pair};
use connlab_rtsig::{Options, Ready, RtSig};
use std::io::Write;
use std::time::Duration;

#[test]
fn closed_descriptors_are_parked_then_released_and_reuse_sees_no_stale_event() {
    // A short timer period keeps the hundred rounds quick.
    let rt = RtSig::with_options(Options {
        close_interval: Duration::from_millis(10),
        ..Options::default()
    })
    .unwrap();
    let mut stale = 0;
    for round in 0..100 {
        let (mut client, fd) = pair();
        rt.register(fd, Ready::NEW_SOCKET).unwrap();
        // Events in flight for `fd` while it is closed.
        client.write_all(&[1u8; 100]).unwrap();
        rt.close(fd).unwrap();
        assert!(is_open(fd), "round {round}: parked, not yet closed");
        // The peer sees end of file at once (the socket was shut down).
        let mut buf = [0u8; 1];
        assert_eq!(std::io::Read::read(&mut client, &mut buf).unwrap(), 0);
        // The number comes back only once the timer released it.
        assert!(
            eventually(Duration::from_secs(2), || !is_open(fd)),
            "round {round}: descriptor {fd} never released"
        );
        // A new socket takes the lowest free number: very likely `fd`.
        let s = rt.socket(libc::AF_INET, libc::SOCK_STREAM, 0).unwrap();
        std::thread::sleep(Duration::from_millis(2));
        if rt.readiness(s).unwrap().readable {
            stale += 1;
        }
        rt.close(s).unwrap();
    }
    assert_eq!(stale, 0, "a reused descriptor saw a stale readable event");
    // The counter moves after the closes themselves: wait for it.
    assert!(eventually(Duration::from_secs(2), || {
        let s = rt.stats();
        s.parked == 0 && s.closed == 200
    }));
    let stats = rt.stats();
    assert!(stats.signals > 0);
}

#[test]
fn a_parked_number_cannot_be_registered_again() {
    let rt = RtSig::new().unwrap();
    let (_client, fd) = pair();
    rt.register(fd, Ready::NONE).unwrap();
    rt.close(fd).unwrap();
    let e = rt.register(fd, Ready::NONE).unwrap_err();
    assert!(e.to_string().contains("not released yet"), "{e}");
}
