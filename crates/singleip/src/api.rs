//! The application node as a Rust API: [`ClusterListener`] serves a port of
//! the cluster address and hands out [`ClusterStream`]s that read and write
//! like [`std::net::TcpStream`] (blocking [`Read`] and [`Write`]).
//!
//! A background thread runs the interconnect connection (mio). The session,
//! every stream's received bytes and the accept queue sit under one mutex;
//! callers block on a condition variable, and wake the thread through a
//! [`mio::Waker`] when they queued frames. Received bytes are released to
//! the session (credit back to the I/O server) only as `read` consumes them,
//! so a stream nobody reads stops its sender and nothing else.

use crate::{os_nonce, Error};
use connlab_proto::xfer::{
    AuthKey, ErrorCode, Event, LocalError, StreamId, XferConfig, XferSession,
};
use mio::net::TcpStream;
use mio::{Events, Interest, Poll, Token, Waker};
use std::collections::{HashMap, VecDeque};
use std::io::{self, Read, Write};
use std::net::SocketAddr;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

const SOCK: Token = Token(0);
const WAKE: Token = Token(1);
/// How long [`ClusterListener::bind`] waits for the handshake and the port.
const BIND_TIMEOUT: Duration = Duration::from_secs(30);

/// A port of the cluster address served by this process.
pub struct ClusterListener {
    shared: Arc<Shared>,
    port: u16,
    thread: Option<JoinHandle<()>>,
}

/// One client connection of the cluster address, relayed by the I/O server.
pub struct ClusterStream {
    shared: Arc<Shared>,
    stream: StreamId,
    peer: SocketAddr,
}

struct Shared {
    state: Mutex<State>,
    cond: Condvar,
    waker: Waker,
}

struct State {
    session: XferSession,
    port: u16,
    listen_errno: Option<u32>,
    accepts: VecDeque<(StreamId, SocketAddr)>,
    streams: HashMap<u32, Inbound>,
    /// Why the connection to the I/O server ended.
    dead: Option<String>,
    stop: bool,
}

#[derive(Default)]
struct Inbound {
    /// Active opens: `None` while connecting, then `Ok` or the errno.
    connect: Option<Result<(), u32>>,
    data: VecDeque<u8>,
    fin: bool,
    reset: Option<ErrorCode>,
    /// The [`ClusterStream`] was dropped: data is released and discarded.
    dropped: bool,
}

impl ClusterListener {
    /// Connects to the I/O server at `io_server`, authenticates with `key`
    /// as node `node_id` and serves `port`; returns once the port is granted
    /// (or fails after 30 s without an answer).
    pub fn bind(
        io_server: SocketAddr,
        key: AuthKey,
        node_id: u32,
        port: u16,
    ) -> Result<ClusterListener, Error> {
        let session_error = |reason: String| Error::Session {
            addr: io_server.to_string(),
            reason,
        };
        let std_sock = std::net::TcpStream::connect(io_server)
            .map_err(|e| Error::io("connecting to the I/O server at", io_server, e))?;
        std_sock.set_nonblocking(true).map_err(|e| {
            Error::io(
                "setting non-blocking mode on the connection to",
                io_server,
                e,
            )
        })?;
        let _ = std_sock.set_nodelay(true);
        let mut sock = TcpStream::from_std(std_sock);
        let nonce =
            os_nonce().map_err(|e| Error::io("reading a nonce (getrandom) for", io_server, e))?;
        let mut config = XferConfig::new(key, nonce);
        config.node_id = node_id;
        let session = XferSession::node(config).map_err(|e| Error::Config(e.to_string()))?;
        let poll = Poll::new().map_err(|e| Error::io("creating", "an epoll instance", e))?;
        poll.registry()
            .register(&mut sock, SOCK, Interest::READABLE | Interest::WRITABLE)
            .map_err(|e| Error::io("registering the connection to", io_server, e))?;
        let waker = Waker::new(poll.registry(), WAKE)
            .map_err(|e| Error::io("creating a waker (eventfd) for", io_server, e))?;
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                session,
                port,
                listen_errno: None,
                accepts: VecDeque::new(),
                streams: HashMap::new(),
                dead: None,
                stop: false,
            }),
            cond: Condvar::new(),
            waker,
        });
        let thread = {
            let shared = shared.clone();
            std::thread::Builder::new()
                .name("singleip-node".into())
                .spawn(move || io_loop(&shared, sock, poll))
                .map_err(|e| Error::io("starting the session thread for", io_server, e))?
        };
        let listener = ClusterListener {
            shared,
            port,
            thread: Some(thread),
        };
        let deadline = Instant::now() + BIND_TIMEOUT;
        let mut st = listener.shared.lock();
        loop {
            if let Some(errno) = st.listen_errno {
                if errno == 0 {
                    break;
                }
                let e = io::Error::from_raw_os_error(errno as i32);
                return Err(session_error(format!(
                    "the I/O server refused port {port}: {e}"
                )));
            }
            if let Some(why) = &st.dead {
                return Err(session_error(why.clone()));
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(session_error(format!(
                    "no answer to the handshake and LISTEN {port} within {BIND_TIMEOUT:?}"
                )));
            }
            st = listener.shared.wait_timeout(st, left);
        }
        drop(st);
        Ok(listener)
    }

    /// The cluster port served.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Waits for the next client connection.
    pub fn accept(&self) -> io::Result<(ClusterStream, SocketAddr)> {
        let mut st = self.shared.lock();
        loop {
            if let Some((stream, peer)) = st.accepts.pop_front() {
                let s = ClusterStream {
                    shared: self.shared.clone(),
                    stream,
                    peer,
                };
                return Ok((s, peer));
            }
            if let Some(why) = &st.dead {
                return Err(io::Error::new(io::ErrorKind::NotConnected, why.clone()));
            }
            st = self.shared.wait(st);
        }
    }
}

impl ClusterListener {
    /// Opens a TCP connection to `addr` from the I/O server (an active open
    /// on the node's behalf: CONNECT) and waits until it is up.
    pub fn connect(&self, addr: SocketAddr) -> io::Result<ClusterStream> {
        let mut st = self.shared.lock();
        let stream = st.session.connect(addr).map_err(local)?;
        st.streams.insert(stream.0, Inbound::default());
        drop(st);
        let _ = self.shared.waker.wake();
        let mut st = self.shared.lock();
        loop {
            let dead = st.dead.clone();
            match st.streams.get(&stream.0).map(|i| (i.connect, i.reset)) {
                Some((Some(Ok(())), _)) => {
                    return Ok(ClusterStream {
                        shared: self.shared.clone(),
                        stream,
                        peer: addr,
                    })
                }
                Some((Some(Err(errno)), _)) => {
                    st.streams.remove(&stream.0);
                    let e = io::Error::from_raw_os_error(errno as i32);
                    return Err(io::Error::new(
                        e.kind(),
                        format!("connect to {addr} through the I/O server: {e}"),
                    ));
                }
                Some((None, Some(code))) => {
                    st.streams.remove(&stream.0);
                    return Err(io::Error::new(
                        io::ErrorKind::ConnectionReset,
                        format!("connect to {addr} through the I/O server: stream reset ({code})"),
                    ));
                }
                None => {
                    return Err(io::Error::new(io::ErrorKind::NotConnected, "stream gone"));
                }
                Some((None, None)) => {}
            }
            if let Some(why) = dead {
                return Err(io::Error::new(io::ErrorKind::NotConnected, why));
            }
            st = self.shared.wait(st);
        }
    }
}

impl Drop for ClusterListener {
    /// Says GOAWAY to the I/O server and stops the session thread; streams
    /// still open fail from then on.
    fn drop(&mut self) {
        self.shared.lock().stop = true;
        let _ = self.shared.waker.wake();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl ClusterStream {
    /// The client's address.
    pub fn peer_addr(&self) -> SocketAddr {
        self.peer
    }

    /// Half-closes: the client reads end of file; reading goes on.
    pub fn shutdown_write(&self) -> io::Result<()> {
        let mut st = self.shared.lock();
        st.session.finish(self.stream).map_err(local)?;
        drop(st);
        let _ = self.shared.waker.wake();
        Ok(())
    }

    /// Sets `TCP_NODELAY` on the client connection (SETOPT); the I/O server
    /// answers an option it cannot set with an ERROR, which is not reported here.
    pub fn set_nodelay(&self, on: bool) -> io::Result<()> {
        let mut st = self.shared.lock();
        st.session
            .set_option(
                self.stream,
                connlab_proto::xfer::SockOpt::NODELAY,
                u32::from(on),
            )
            .map_err(local)?;
        drop(st);
        let _ = self.shared.waker.wake();
        Ok(())
    }

    /// Abandons the connection: the I/O server resets the client.
    pub fn abort(&self) -> io::Result<()> {
        let mut st = self.shared.lock();
        st.session
            .reset(self.stream, ErrorCode::CONNECTION_RESET)
            .map_err(local)?;
        drop(st);
        let _ = self.shared.waker.wake();
        Ok(())
    }
}

impl Read for ClusterStream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        (&*self).read(buf)
    }
}

impl Write for ClusterStream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        (&*self).write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Like `&TcpStream`: one thread may read while another writes.
impl Read for &ClusterStream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        let mut st = self.shared.lock();
        loop {
            let dead = st.dead.clone();
            let Some(inbound) = st.streams.get_mut(&self.stream.0) else {
                return Ok(0);
            };
            if !inbound.data.is_empty() {
                let n = inbound.data.len().min(buf.len());
                for (dst, src) in buf.iter_mut().zip(inbound.data.drain(..n)) {
                    *dst = src;
                }
                let _ = st.session.release(self.stream, n as u32);
                let wake = st.session.has_output();
                drop(st);
                if wake {
                    let _ = self.shared.waker.wake();
                }
                return Ok(n);
            }
            if inbound.fin {
                return Ok(0);
            }
            if let Some(code) = inbound.reset {
                return Err(io::Error::new(
                    io::ErrorKind::ConnectionReset,
                    format!("stream {} reset: {code}", self.stream),
                ));
            }
            if let Some(why) = dead {
                return Err(io::Error::new(io::ErrorKind::ConnectionAborted, why));
            }
            st = self.shared.wait(st);
        }
    }
}

/// Like `&TcpStream`: one thread may write while another reads.
impl Write for &ClusterStream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let mut st = self.shared.lock();
        loop {
            if let Some(why) = &st.dead {
                return Err(io::Error::new(
                    io::ErrorKind::ConnectionAborted,
                    why.clone(),
                ));
            }
            if let Some(code) = st.streams.get(&self.stream.0).and_then(|i| i.reset) {
                return Err(io::Error::new(
                    io::ErrorKind::ConnectionReset,
                    format!("stream {} reset: {code}", self.stream),
                ));
            }
            match st.session.send_data(self.stream, buf) {
                Ok(n) => {
                    drop(st);
                    let _ = self.shared.waker.wake();
                    return Ok(n);
                }
                Err(LocalError::NoCredit { .. }) => st = self.shared.wait(st),
                Err(e) => return Err(local(e)),
            }
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Drop for ClusterStream {
    /// Like closing a socket: FIN if not sent yet; what arrives later is discarded.
    fn drop(&mut self) {
        let mut st = self.shared.lock();
        let _ = st.session.finish(self.stream);
        if let Some(inbound) = st.streams.get_mut(&self.stream.0) {
            inbound.dropped = true;
            let n = inbound.data.len();
            inbound.data.clear();
            let gone = inbound.fin || inbound.reset.is_some();
            if gone {
                st.streams.remove(&self.stream.0);
            }
            let _ = st.session.release(self.stream, n as u32);
        }
        drop(st);
        let _ = self.shared.waker.wake();
    }
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock leaves plain data; go on with it.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn wait_timeout<'a>(
        &self,
        guard: MutexGuard<'a, State>,
        timeout: Duration,
    ) -> MutexGuard<'a, State> {
        match self.cond.wait_timeout(guard, timeout) {
            Ok((g, _)) => g,
            Err(e) => e.into_inner().0,
        }
    }

    fn wait<'a>(&self, guard: MutexGuard<'a, State>) -> MutexGuard<'a, State> {
        self.cond.wait(guard).unwrap_or_else(|e| e.into_inner())
    }
}

fn local(e: LocalError) -> io::Error {
    let kind = match e {
        LocalError::Closed { .. } => io::ErrorKind::ConnectionAborted,
        _ => io::ErrorKind::BrokenPipe,
    };
    io::Error::new(kind, e.to_string())
}

/// The session thread: reads the interconnect, applies events under the
/// lock, writes queued frames; ends when the listener is dropped or the
/// connection ends.
fn io_loop(shared: &Shared, mut sock: TcpStream, mut poll: Poll) {
    let mut events = Events::with_capacity(64);
    let mut buf = vec![0u8; 64 * 1024];
    let mut out = Vec::new();
    let (mut readable, mut writable) = (true, true);
    let mut evs = Vec::new();
    loop {
        let mut st = shared.lock();
        while readable && st.dead.is_none() {
            match sock.read(&mut buf) {
                Ok(0) => {
                    let why = match st.session.finish_input() {
                        Err(e) => format!("the I/O server closed the connection: {e}"),
                        Ok(()) => "the I/O server closed the connection".into(),
                    };
                    st.dead = Some(why);
                }
                Ok(n) => {
                    let fed = st.session.feed(&buf[..n], &mut |e| evs.push(e));
                    for e in evs.drain(..) {
                        apply(&mut st, e);
                    }
                    if let Err(e) = fed {
                        st.dead = Some(e.to_string());
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => readable = false,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => st.dead = Some(format!("reading from the I/O server: {e}")),
            }
        }
        if st.stop {
            let _ = st
                .session
                .close(ErrorCode::NO_ERROR, "the node is stopping");
            if st.dead.is_none() {
                st.dead = Some("the ClusterListener was dropped".into());
            }
        }
        st.session.drain_output(&mut out);
        let stop = st.stop;
        let dead = st.dead.is_some();
        drop(st);
        shared.cond.notify_all();
        while writable && !out.is_empty() {
            match sock.write(&out) {
                Ok(n) => {
                    out.drain(..n);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => writable = false,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    shared.lock().dead = Some(format!("writing to the I/O server: {e}"));
                    shared.cond.notify_all();
                    return;
                }
            }
        }
        if stop || dead {
            return;
        }
        if poll
            .poll(&mut events, Some(Duration::from_secs(1)))
            .is_err()
        {
            continue;
        }
        for e in &events {
            if e.token() == SOCK {
                readable |= e.is_readable() || e.is_read_closed() || e.is_error();
                writable |= e.is_writable() || e.is_write_closed() || e.is_error();
            }
        }
    }
}

fn apply(st: &mut State, event: Event) {
    match event {
        Event::Established { .. } => {
            let port = st.port;
            if let Err(e) = st.session.listen(port) {
                st.dead = Some(format!("LISTEN {port}: {e}"));
            }
        }
        Event::ListenResult { port, errno } if port == st.port => st.listen_errno = Some(errno),
        Event::Connected { stream, .. } => {
            if let Some(inbound) = st.streams.get_mut(&stream.0) {
                inbound.connect = Some(Ok(()));
            }
        }
        Event::ConnectFailed { stream, errno } => {
            if let Some(inbound) = st.streams.get_mut(&stream.0) {
                inbound.connect = Some(Err(errno));
            }
        }
        Event::Accepted { stream, peer, .. } => {
            let inbound = Inbound {
                connect: Some(Ok(())),
                ..Inbound::default()
            };
            st.streams.insert(stream.0, inbound);
            st.accepts.push_back((stream, peer));
        }
        Event::Data { stream, bytes } => {
            if let Some(inbound) = st.streams.get_mut(&stream.0) {
                if inbound.dropped {
                    let _ = st.session.release(stream, bytes.len() as u32);
                } else {
                    inbound.data.extend(bytes);
                }
            }
        }
        Event::Fin { stream } => {
            if let Some(inbound) = st.streams.get_mut(&stream.0) {
                inbound.fin = true;
                if inbound.dropped {
                    st.streams.remove(&stream.0);
                }
            }
        }
        Event::Reset { stream, code } => set_reset(st, stream, code),
        Event::StreamError { stream, error } => set_reset(st, stream, error.code()),
        Event::GoAway { code, reason } => st.dead = Some(format!("GOAWAY {code}: {reason}")),
        _ => {}
    }
}

fn set_reset(st: &mut State, stream: StreamId, code: ErrorCode) {
    if let Some(inbound) = st.streams.get_mut(&stream.0) {
        inbound.reset = Some(code);
        if inbound.dropped {
            st.streams.remove(&stream.0);
        }
    }
}
