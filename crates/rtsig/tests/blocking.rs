//! Blocking accept/read/write wait on a per-descriptor condition and are
//! woken by signals.

use crate::common::pair;
use connlab_rtsig::{Ready, RtSig};
use std::io::{Read, Write};
use std::time::Duration;

#[test]
fn blocking_read_is_woken_by_data() {
    let rt = RtSig::new().unwrap();
    let (mut client, fd) = pair();
    rt.register(fd, Ready::NEW_SOCKET).unwrap();
    std::thread::scope(|s| {
        let reader = s.spawn(|| {
            let mut buf = [0u8; 32];
            let n = rt.read_blocking(fd, &mut buf).unwrap();
            buf[..n].to_vec()
        });
        std::thread::sleep(Duration::from_millis(50));
        client.write_all(b"wake up").unwrap();
        assert_eq!(reader.join().unwrap(), b"wake up");
    });
    rt.close(fd).unwrap();
}

#[test]
fn blocking_accept_is_woken_by_a_connection() {
    let rt = RtSig::new().unwrap();
    let (lfd, addr) = crate::common::listener();
    rt.register(lfd, Ready::NONE).unwrap();
    std::thread::scope(|s| {
        let acceptor = s.spawn(|| rt.accept_blocking(lfd).unwrap());
        std::thread::sleep(Duration::from_millis(50));
        let _c = std::net::TcpStream::connect(addr).unwrap();
        let fd = acceptor.join().unwrap();
        assert_eq!(rt.readiness(fd), Some(Ready::ACCEPTED));
        rt.close(fd).unwrap();
    });
    rt.close(lfd).unwrap();
}

#[test]
fn blocking_write_waits_for_room() {
    let rt = RtSig::new().unwrap();
    let (mut client, fd) = pair();
    rt.register(fd, Ready::NEW_SOCKET).unwrap();
    let big = vec![3u8; 16 << 20];
    std::thread::scope(|s| {
        let reader = s.spawn(move || {
            let mut total = 0;
            let mut buf = vec![0u8; 1 << 16];
            while total < 16 << 20 {
                // Read slowly at first so the writer must wait.
                if total < 1 << 20 {
                    std::thread::sleep(Duration::from_millis(1));
                }
                total += client.read(&mut buf).unwrap();
            }
            total
        });
        assert_eq!(rt.write_blocking(fd, &big).unwrap(), big.len());
        assert_eq!(reader.join().unwrap(), 16 << 20);
    });
    rt.close(fd).unwrap();
}

#[test]
fn a_blocked_reader_is_released_when_the_descriptor_is_closed() {
    let rt = RtSig::new().unwrap();
    let (_client, fd) = pair();
    rt.register(fd, Ready::NEW_SOCKET).unwrap();
    std::thread::scope(|s| {
        let reader = s.spawn(|| {
            let mut buf = [0u8; 8];
            rt.read_blocking(fd, &mut buf)
        });
        std::thread::sleep(Duration::from_millis(50));
        rt.close(fd).unwrap();
        assert!(reader.join().unwrap().is_err());
    });
}
