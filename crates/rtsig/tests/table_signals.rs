//! The readiness table driven by real signals and real non-blocking I/O.

use crate::common::{eventually, pair};
use connlab_rtsig::{FdSet, Ready, RtSig};
use std::io::Write;
use std::time::Duration;

const SECOND: Duration = Duration::from_secs(5);

#[test]
fn signals_set_readiness_and_io_results_clear_it() {
    let rt = RtSig::new().unwrap();
    let (mut client, fd) = pair();
    rt.register(fd, Ready::NEW_SOCKET).unwrap();
    assert_eq!(rt.readiness(fd), Some(Ready::NEW_SOCKET));

    // Data arriving queues a signal that makes the socket readable.
    client.write_all(b"hello").unwrap();
    let mut fds = [libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    }];
    assert_eq!(rt.poll(&mut fds, Some(SECOND)).unwrap(), 1);
    assert_eq!(fds[0].revents, libc::POLLIN);

    // A short read clears readable without another system call.
    let mut buf = [0u8; 64];
    assert_eq!(rt.read(fd, &mut buf).unwrap(), 5);
    assert!(!rt.readiness(fd).unwrap().readable);
    assert_eq!(rt.poll(&mut fds, Some(Duration::ZERO)).unwrap(), 0);

    // Fill the socket: EAGAIN clears writable; draining the peer sets it again.
    let chunk = vec![7u8; 1 << 16];
    loop {
        match rt.write(fd, &chunk) {
            Ok(_) => continue,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
            Err(e) => panic!("write: {e}"),
        }
    }
    // As with the listener below: a signal queued before the EAGAIN may
    // mark it writable again (spuriously); another EAGAIN clears it.
    assert!(eventually(SECOND, || {
        if let Err(e) = rt.write(fd, &chunk) {
            assert_eq!(e.kind(), std::io::ErrorKind::WouldBlock);
        }
        !rt.readiness(fd).unwrap().writable
    }));
    let drain = std::thread::spawn(move || {
        let mut sink = [0u8; 1 << 16];
        let mut total = 0usize;
        while total < 4 << 20 {
            match std::io::Read::read(&mut client, &mut sink) {
                Ok(0) | Err(_) => break,
                Ok(n) => total += n,
            }
        }
        client
    });
    let mut wfds = [libc::pollfd {
        fd,
        events: libc::POLLOUT,
        revents: 0,
    }];
    assert_eq!(rt.poll(&mut wfds, Some(SECOND)).unwrap(), 1);
    assert_eq!(wfds[0].revents, libc::POLLOUT);
    rt.close(fd).unwrap();
    drop(drain.join().unwrap());
}

#[test]
fn end_of_file_and_reset_are_reported() {
    let rt = RtSig::new().unwrap();
    let (client, fd) = pair();
    rt.register(fd, Ready::NEW_SOCKET).unwrap();
    drop(client);
    let mut fds = [libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    }];
    assert_eq!(rt.poll(&mut fds, Some(SECOND)).unwrap(), 1);
    let mut buf = [0u8; 16];
    assert_eq!(rt.read(fd, &mut buf).unwrap(), 0);
    assert!(
        rt.readiness(fd).unwrap().readable,
        "end of file stays readable"
    );
    rt.close(fd).unwrap();

    // A reset (linger 0) raises an error, reported once.
    let (client, fd) = pair();
    rt.register(fd, Ready::NEW_SOCKET).unwrap();
    socket2::SockRef::from(&client)
        .set_linger(Some(Duration::ZERO))
        .unwrap();
    drop(client);
    assert!(eventually(SECOND, || rt
        .readiness(fd)
        .is_some_and(|r| r.error)));
    let mut fds = [libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    }];
    rt.poll(&mut fds, Some(SECOND)).unwrap();
    assert_ne!(fds[0].revents & libc::POLLERR, 0);
    rt.poll(&mut fds, Some(Duration::ZERO)).unwrap();
    assert_eq!(
        fds[0].revents & libc::POLLERR,
        0,
        "an error is reported once"
    );
    rt.close(fd).unwrap();
}

#[test]
fn listener_accept_and_select() {
    let rt = RtSig::new().unwrap();
    let (lfd, addr) = crate::common::listener();
    rt.register(lfd, Ready::NONE).unwrap();
    let mut read = FdSet::new();
    read.insert(lfd);
    assert_eq!(
        rt.select(
            lfd as usize + 1,
            Some(&mut read),
            None,
            None,
            Some(Duration::ZERO)
        )
        .unwrap(),
        0
    );
    assert!(!read.contains(lfd), "select empties the set on timeout");
    let clients: Vec<_> = (0..3)
        .map(|_| std::net::TcpStream::connect(addr).unwrap())
        .collect();
    let mut read = FdSet::new();
    read.insert(lfd);
    assert_eq!(
        rt.select(lfd as usize + 1, Some(&mut read), None, None, Some(SECOND))
            .unwrap(),
        1
    );
    assert!(read.contains(lfd));
    // Accept until EAGAIN; every accepted socket starts readable and writable.
    let mut accepted = Vec::new();
    assert!(eventually(SECOND, || {
        while let Ok(fd) = rt.accept(lfd) {
            accepted.push(fd);
        }
        accepted.len() == 3
    }));
    // EAGAIN cleared it. A signal for a connection already accepted can
    // still arrive after that EAGAIN and mark the listener readable again (a
    // spurious readiness, which a signal-kept table allows); the next accept
    // then fails with EAGAIN and clears it for good.
    assert!(
        eventually(SECOND, || {
            match rt.accept(lfd) {
                Ok(fd) => panic!("a fourth connection ({fd}) was accepted"),
                Err(e) => assert_eq!(e.kind(), std::io::ErrorKind::WouldBlock),
            }
            !rt.readiness(lfd).unwrap().readable
        }),
        "EAGAIN clears readable"
    );
    for &fd in &accepted {
        assert_eq!(rt.readiness(fd), Some(Ready::ACCEPTED));
    }
    // A descriptor in a set but not registered is refused.
    let mut bad = FdSet::new();
    bad.insert(lfd + 100);
    assert!(rt
        .select(
            lfd as usize + 101,
            Some(&mut bad),
            None,
            None,
            Some(Duration::ZERO)
        )
        .is_err());
    // poll reports unregistered descriptors as POLLNVAL.
    let mut fds = [libc::pollfd {
        fd: lfd + 100,
        events: libc::POLLIN,
        revents: 0,
    }];
    assert_eq!(rt.poll(&mut fds, Some(Duration::ZERO)).unwrap(), 1);
    assert_eq!(fds[0].revents, libc::POLLNVAL);
    for fd in accepted {
        rt.close(fd).unwrap();
    }
    drop(clients);
    rt.close(lfd).unwrap();
}

#[test]
fn bad_calls_are_clear_errors() {
    let rt = RtSig::new().unwrap();
    let (_client, fd) = pair();
    rt.register(fd, Ready::NONE).unwrap();
    let again = rt.register(fd, Ready::NONE).unwrap_err();
    assert!(again.to_string().contains("already registered"), "{again}");
    assert!(rt.register(-1, Ready::NONE).is_err());
    assert!(rt.deregister(fd + 1000).is_err());
    let mut buf = [0u8; 4];
    assert!(rt.read_blocking(fd + 1000, &mut buf).is_err());
    rt.deregister(fd).unwrap();
    assert!(
        crate::common::is_open(fd),
        "deregister leaves the descriptor open"
    );
    let bad = connlab_rtsig::Options {
        signal_offset: 1000,
        ..Default::default()
    };
    let e = RtSig::with_options(bad).err().unwrap();
    assert!(e.to_string().contains("SIGRTMAX"), "{e}");
}
