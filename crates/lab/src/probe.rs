//! The processes a single-IP sweep runs inside its namespaces
//! (`connlab singleip probe`): [`serve`] is the unmodified server on every
//! node host (one byte picks the operation: `E` echoes until EOF, `G` + a
//! big-endian u64 N sends N bytes, half-closes and waits for EOF); [`rtt`]
//! times 4-byte round trips through an echo connection; [`get`] and
//! [`transfers`] time transfers and count the bytes received per time bin.

use crate::{ProbeRtt, ProbeTransfer};
use anyhow::{bail, Context};
use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// `count` transfers of `size` bytes from `target`, one after another,
/// starting at `start_at` (Unix seconds) when given; see [`get`].
pub fn transfers(
    target: SocketAddr,
    size: u64,
    count: u32,
    start_at: Option<f64>,
    stop_at: Option<f64>,
    epoch: Option<f64>,
    bin: f64,
) -> anyhow::Result<Vec<ProbeTransfer>> {
    if bin.is_nan() || bin <= 0.0 {
        bail!("--bin {bin}: a positive number");
    }
    if let Some(t) = start_at {
        let wait = t - now();
        if wait > 0.0 {
            std::thread::sleep(Duration::from_secs_f64(wait));
        }
    }
    (0..count)
        .map(|_| get(target, size, epoch, bin, stop_at))
        .collect()
}

/// Unix time, seconds.
fn now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// The echo and bulk server on `listen`, a thread per connection, until
/// the process ends; `ready` is called once it listens.
pub fn serve(listen: SocketAddr, ready: impl FnOnce()) -> anyhow::Result<()> {
    let listener = TcpListener::bind(listen).with_context(|| format!("binding {listen}"))?;
    ready();
    for conn in listener.incoming() {
        let Ok(s) = conn else { continue };
        std::thread::spawn(move || {
            let _ = handle(s);
        });
    }
    Ok(())
}

fn handle(mut s: TcpStream) -> std::io::Result<()> {
    s.set_nodelay(true)?;
    let mut op = [0u8; 1];
    if s.read(&mut op)? == 0 {
        return Ok(());
    }
    let mut buf = vec![0u8; 1 << 16];
    match op[0] {
        b'E' => loop {
            let n = s.read(&mut buf)?;
            if n == 0 {
                return Ok(());
            }
            s.write_all(&buf[..n])?;
        },
        b'G' => {
            let mut hdr = [0u8; 8];
            s.read_exact(&mut hdr)?;
            let mut left = u64::from_be_bytes(hdr);
            let chunk = vec![0u8; 1 << 20];
            while left > 0 {
                let n = left.min(chunk.len() as u64) as usize;
                s.write_all(&chunk[..n])?;
                left -= n as u64;
            }
            s.shutdown(Shutdown::Write)?;
            while s.read(&mut buf)? > 0 {}
            Ok(())
        }
        _ => Ok(()),
    }
}

fn connect(target: SocketAddr) -> anyhow::Result<TcpStream> {
    let s = TcpStream::connect_timeout(&target, Duration::from_secs(10))
        .with_context(|| format!("connecting to {target}"))?;
    s.set_nodelay(true)?;
    s.set_read_timeout(Some(Duration::from_secs(60)))?;
    Ok(s)
}

/// `count` 4-byte round trips through an echo connection to `target`,
/// after `warmup` unmeasured ones.
pub fn rtt(target: SocketAddr, count: u32, warmup: u32) -> anyhow::Result<ProbeRtt> {
    let mut s = connect(target)?;
    s.write_all(b"E")?;
    let msg = *b"ping";
    let mut got = [0u8; 4];
    let mut samples = Vec::with_capacity(count as usize);
    for i in 0..(count + warmup) {
        let t = Instant::now();
        s.write_all(&msg)?;
        s.read_exact(&mut got)
            .context("the echo connection closed")?;
        if i >= warmup {
            samples.push(t.elapsed().as_secs_f64() * 1e6);
        }
    }
    Ok(ProbeRtt {
        samples_us: samples,
    })
}

/// One transfer of `size` bytes from `target`: when the bytes came, and
/// with `epoch` the bytes received per `bin` seconds from it; with
/// `stop_at` (Unix seconds) receiving stops then.
pub fn get(
    target: SocketAddr,
    size: u64,
    epoch: Option<f64>,
    bin: f64,
    stop_at: Option<f64>,
) -> anyhow::Result<ProbeTransfer> {
    let mut buf = vec![0u8; 1 << 20];
    let t0 = now();
    let mut s = connect(target)?;
    let t_conn = now();
    let mut req = [0u8; 9];
    req[0] = b'G';
    req[1..].copy_from_slice(&size.to_be_bytes());
    s.write_all(&req)?;
    if stop_at.is_some() {
        s.set_read_timeout(Some(Duration::from_millis(100)))?;
    }
    let (mut got, mut first, mut last) = (0u64, None, None);
    let mut bins: Vec<u64> = Vec::new();
    while got < size {
        if stop_at.is_some_and(|t| now() > t) {
            break;
        }
        let n = match s.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e)
                if stop_at.is_some()
                    && matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) =>
            {
                continue
            }
            Err(e) => bail!("receiving from {target}: {e}"),
        };
        let t = now();
        first.get_or_insert(t);
        last = Some(t);
        got += n as u64;
        if let Some(e) = epoch {
            let k = ((t - e) / bin).floor().max(0.0) as usize;
            if bins.len() <= k {
                bins.resize(k + 1, 0);
            }
            bins[k] += n as u64;
        }
    }
    Ok(ProbeTransfer {
        size,
        got,
        t0,
        t_conn,
        t_first: first,
        t_last: last,
        bins,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn echo_and_transfer_through_the_probe_server() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        drop(listener);
        std::thread::spawn(move || serve(addr, || ()));
        let deadline = Instant::now() + Duration::from_secs(5);
        while TcpStream::connect(addr).is_err() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        let r = rtt(addr, 5, 1).unwrap();
        assert_eq!(r.samples_us.len(), 5);
        let t = transfers(addr, 100_000, 2, None, None, Some(now()), 0.1).unwrap();
        assert_eq!(t.len(), 2);
        assert!(t.iter().all(|t| t.got == 100_000), "{:?}", t[0].got);
        assert_eq!(t[0].bins.iter().sum::<u64>(), 100_000);
        assert!(transfers(addr, 1, 1, None, None, None, 0.0).is_err());
    }
}
