//! `connlab singleip probe` (hidden): the processes a single-IP sweep runs
//! inside its namespaces. `serve` is the unmodified server on every node
//! host (one byte picks the operation: `E` echoes until EOF, `G` + a
//! big-endian u64 N sends N bytes, half-closes and waits for EOF); `rtt`
//! times 4-byte round trips through an echo connection; `get` times
//! transfers and counts the bytes received per time bin. Results go to
//! `--json` as `connlab_lab::ProbeRtt` / a list of `ProbeTransfer`.

use crate::Exit;
use anyhow::{anyhow, bail, Context};
use clap::{Args, Subcommand};
use connlab_lab::{ProbeRtt, ProbeTransfer};
use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Flags of `connlab singleip probe`.
#[derive(Args, Debug)]
pub(crate) struct ProbeArgs {
    #[command(subcommand)]
    command: ProbeCommand,
}

#[derive(Subcommand, Debug)]
enum ProbeCommand {
    /// Echo and bulk server (a thread per connection).
    Serve {
        /// Where to listen.
        #[arg(long)]
        listen: SocketAddr,
    },
    /// 4-byte round trips on one connection.
    Rtt {
        /// The server (through the front end).
        #[arg(long)]
        target: SocketAddr,
        /// Measured round trips.
        #[arg(long)]
        count: u32,
        /// Round trips before measuring.
        #[arg(long, default_value_t = 50)]
        warmup: u32,
        /// Result file.
        #[arg(long)]
        json: PathBuf,
    },
    /// Transfers of --size bytes, one after another.
    Get {
        /// The server (through the front end).
        #[arg(long)]
        target: SocketAddr,
        /// Bytes per transfer.
        #[arg(long)]
        size: u64,
        /// Transfers.
        #[arg(long, default_value_t = 1)]
        count: u32,
        /// Start at this Unix time (seconds).
        #[arg(long)]
        start_at: Option<f64>,
        /// Stop receiving at this Unix time.
        #[arg(long)]
        stop_at: Option<f64>,
        /// Count bytes per bin from this Unix time.
        #[arg(long)]
        epoch: Option<f64>,
        /// Bin width, seconds.
        #[arg(long, default_value_t = 0.1)]
        bin: f64,
        /// Result file.
        #[arg(long)]
        json: PathBuf,
    },
}

/// Runs `connlab singleip probe`.
pub(crate) fn run(args: ProbeArgs) -> Result<ExitCode, Exit> {
    match args.command {
        ProbeCommand::Serve { listen } => serve(listen).map_err(Exit::from),
        ProbeCommand::Rtt {
            target,
            count,
            warmup,
            json,
        } => {
            let r = rtt(target, count, warmup)?;
            write(&json, &r)
        }
        ProbeCommand::Get {
            target,
            size,
            count,
            start_at,
            stop_at,
            epoch,
            bin,
            json,
        } => {
            if let Some(t) = start_at {
                let wait = t - now();
                if wait > 0.0 {
                    std::thread::sleep(Duration::from_secs_f64(wait));
                }
            }
            if bin.is_nan() || bin <= 0.0 {
                return Err(Exit::usage(anyhow!("--bin {bin}: a positive number")));
            }
            let mut out = Vec::new();
            for _ in 0..count {
                out.push(get(target, size, epoch, bin, stop_at)?);
            }
            write(&json, &out)
        }
    }
}

fn write<T: serde::Serialize>(path: &PathBuf, value: &T) -> Result<ExitCode, Exit> {
    let text = serde_json::to_string(value).context("encoding the result")?;
    connlab_os::files::write_atomic(path, text)
        .with_context(|| format!("writing --json {}", path.display()))?;
    Ok(ExitCode::SUCCESS)
}

fn now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

fn serve(listen: SocketAddr) -> anyhow::Result<ExitCode> {
    let listener = TcpListener::bind(listen).with_context(|| format!("binding {listen}"))?;
    println!("probe server ready on {listen}");
    std::io::stdout().flush()?;
    for conn in listener.incoming() {
        let Ok(s) = conn else { continue };
        std::thread::spawn(move || {
            let _ = handle(s);
        });
    }
    Ok(ExitCode::SUCCESS)
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

fn rtt(target: SocketAddr, count: u32, warmup: u32) -> anyhow::Result<ProbeRtt> {
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

fn get(
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
