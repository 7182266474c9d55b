//! Loopback servers and clients: free ports, echo servers, patterned data,
//! and connections whose every read and write has a timeout.

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::thread;
use std::time::Duration;

/// How long a read or write on a [`connect`]ed stream may block.
pub const IO_TIMEOUT: Duration = Duration::from_secs(20);

/// A free loopback port (bound and released: a small race, fine in tests).
pub fn free_port() -> SocketAddr {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("binding a loopback port")
}

/// A listener on a fresh loopback port.
pub fn loopback_listener() -> TcpListener {
    TcpListener::bind("127.0.0.1:0").expect("binding a loopback port")
}

/// `n` bytes of a pattern that differs with `seed` and along the stream, so
/// a byte out of place or from another stream shows.
pub fn pattern(n: usize, seed: u8) -> Vec<u8> {
    (0..n)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

/// Serves every connection `l` accepts on its own thread with `serve`.
pub fn serve_each(l: TcpListener, serve: impl Fn(TcpStream) + Send + Sync + Copy + 'static) {
    thread::spawn(move || {
        for s in l.incoming().flatten() {
            thread::spawn(move || serve(s));
        }
    });
}

/// Echoes `s` until the peer's end of file, then half-closes.
pub fn echo(s: TcpStream) {
    let Ok(mut r) = s.try_clone() else { return };
    let mut w = s;
    let _ = std::io::copy(&mut r, &mut w);
    let _ = w.shutdown(Shutdown::Write);
}

/// An unmodified loopback server that echoes every connection until the
/// client's end of file, then closes its side.
pub fn echo_server() -> SocketAddr {
    echo_on(loopback_listener())
}

/// [`echo_server`] on a given listener (e.g. one bound in a namespace).
pub fn echo_on(l: TcpListener) -> SocketAddr {
    let addr = l.local_addr().expect("the listener's address");
    serve_each(l, echo);
    addr
}

/// A server on `l` that writes the byte `name` first, then echoes: which
/// server took a connection shows in its first byte.
pub fn named_echo_on(l: TcpListener, name: u8) -> SocketAddr {
    let addr = l.local_addr().expect("the listener's address");
    thread::spawn(move || {
        for mut s in l.incoming().flatten() {
            thread::spawn(move || {
                if s.write_all(&[name]).is_ok() {
                    echo(s);
                }
            });
        }
    });
    addr
}

/// A loopback server that sends `n` bytes of `pattern(n, seed)` on every
/// connection, half-closes, and reads until the peer goes.
pub fn bulk_server(n: usize, seed: u8) -> SocketAddr {
    let l = loopback_listener();
    let addr = l.local_addr().expect("the listener's address");
    thread::spawn(move || {
        for mut s in l.incoming().flatten() {
            thread::spawn(move || {
                let _ = s.write_all(&pattern(n, seed));
                let _ = s.shutdown(Shutdown::Write);
                let mut sink = [0u8; 1024];
                while matches!(s.read(&mut sink), Ok(k) if k > 0) {}
            });
        }
    });
    addr
}

/// A loopback server that reads a 4-byte request on each connection,
/// answers with `len` bytes of `pattern(len, seed)` (seed: the request's
/// last byte) and closes.
pub fn response_server(len: usize) -> SocketAddr {
    let l = loopback_listener();
    let addr = l.local_addr().expect("the listener's address");
    serve_each(l, move |mut s| {
        let mut request = [0u8; 4];
        if s.read_exact(&mut request).is_ok() {
            let _ = s.write_all(&pattern(len, request[3]));
        }
    });
    addr
}

/// Connects to `addr` with [`IO_TIMEOUT`] on the connect, reads and writes.
pub fn connect(addr: SocketAddr) -> TcpStream {
    let s = TcpStream::connect_timeout(&addr, IO_TIMEOUT)
        .unwrap_or_else(|e| panic!("connecting to {addr}: {e}"));
    s.set_read_timeout(Some(IO_TIMEOUT))
        .expect("set_read_timeout");
    s.set_write_timeout(Some(IO_TIMEOUT))
        .expect("set_write_timeout");
    s
}

/// Connects to `addr`, sends `data` while reading, half-closes, and returns
/// everything read until the server's end of file.
pub fn round_trip(addr: SocketAddr, data: &[u8]) -> Vec<u8> {
    let mut s = connect(addr);
    let mut w = s.try_clone().expect("cloning the stream");
    let data = data.to_vec();
    let writer = thread::spawn(move || {
        w.write_all(&data).expect("sending");
        w.shutdown(Shutdown::Write).expect("half-closing");
    });
    let mut back = Vec::new();
    s.read_to_end(&mut back).expect("reading the reply");
    writer.join().expect("the writer thread");
    back
}

/// Writes `data` on `s` while reading as many bytes back (an echo).
pub fn echo_back(s: &mut TcpStream, data: &[u8]) -> Vec<u8> {
    let mut w = s.try_clone().expect("cloning the stream");
    let d = data.to_vec();
    let writer = thread::spawn(move || w.write_all(&d).expect("sending"));
    let mut back = vec![0u8; data.len()];
    s.read_exact(&mut back).expect("reading the echo");
    writer.join().expect("the writer thread");
    back
}
