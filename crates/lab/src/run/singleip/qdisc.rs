//! Sampling the host queues of a contention point: one `tc -s -j -batch -`
//! per namespace, asked for its qdisc's backlog every [`PERIOD`] (a netlink
//! dump each, no process per sample).

use crate::run::unix_now;
use crate::QueueSample;
use anyhow::{bail, Context};
use connlab_os::child::Child;
use std::io::{BufRead, BufReader, Write};
use std::process::{ChildStdin, ChildStdout, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Time between samples.
pub(super) const PERIOD: Duration = Duration::from_millis(5);

/// One queue's reading: backlog bytes, length as the qdisc counts it, drops.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Reading {
    pub(super) bytes: u64,
    pub(super) packets: u64,
    pub(super) drops: u64,
}

/// Reads `tc -s -j qdisc show dev X`'s line: the root qdisc's backlog,
/// length and drops.
pub(super) fn parse_tc_line(line: &str) -> Option<Reading> {
    let v: serde_json::Value = serde_json::from_str(line.trim()).ok()?;
    let all = v.as_array()?;
    let q = all
        .iter()
        .find(|q| q.get("root").and_then(serde_json::Value::as_bool) == Some(true))
        .or_else(|| all.first())?;
    let n = |k: &str| q.get(k).and_then(serde_json::Value::as_u64);
    Some(Reading {
        bytes: n("backlog")?,
        packets: n("qlen")?,
        drops: n("drops").unwrap_or(0),
    })
}

struct Tc {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    dev: String,
}

impl Tc {
    fn read(&mut self) -> anyhow::Result<Reading> {
        writeln!(self.stdin, "qdisc show dev {}", self.dev)?;
        self.stdin.flush()?;
        let mut line = String::new();
        if self.stdout.read_line(&mut line)? == 0 {
            bail!("tc ended");
        }
        parse_tc_line(&line).with_context(|| format!("tc printed {line:?}"))
    }
}

/// The sampling thread; [`Sampler::finish`] stops it and hands the samples.
pub(super) struct Sampler {
    stop: Arc<AtomicBool>,
    thread: JoinHandle<anyhow::Result<Vec<QueueSample>>>,
    /// The `tc` processes reading the queues: the experiment's own work,
    /// never foreign CPU.
    pids: Vec<u32>,
}

impl Sampler {
    /// Starts sampling the root qdisc of each `(namespace, device)`.
    pub(super) fn start(targets: &[(String, String)]) -> anyhow::Result<Sampler> {
        let mut tcs = Vec::new();
        for (ns, dev) in targets {
            let mut child = Child::spawn(
                Command::new("tc")
                    .args(["-n", ns, "-s", "-j", "-batch", "-"])
                    .stdin(Stdio::piped())
                    .stdout(Stdio::piped())
                    .stderr(Stdio::null()),
            )
            .context("starting tc")?;
            let stdin = child.inner().stdin.take().context("tc's stdin")?;
            let stdout = BufReader::new(child.inner().stdout.take().context("tc's stdout")?);
            let mut tc = Tc {
                child,
                stdin,
                stdout,
                dev: dev.clone(),
            };
            tc.read()
                .with_context(|| format!("reading the qdisc of {dev} in {ns}"))?;
            tcs.push(tc);
        }
        let pids = tcs.iter().map(|t| t.child.pid()).collect();
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::spawn(move || -> anyhow::Result<Vec<QueueSample>> {
            let mut out = Vec::new();
            let mut next = Instant::now();
            while !flag.load(Ordering::Relaxed) {
                let t_s = unix_now();
                let mut s = QueueSample {
                    t_s,
                    bytes: Vec::new(),
                    packets: Vec::new(),
                    drops: Vec::new(),
                };
                for tc in &mut tcs {
                    let r = tc.read()?;
                    s.bytes.push(r.bytes);
                    s.packets.push(r.packets);
                    s.drops.push(r.drops);
                }
                out.push(s);
                next += PERIOD;
                let now = Instant::now();
                if next > now {
                    std::thread::sleep(next - now);
                } else {
                    next = now;
                }
            }
            Ok(out)
        });
        Ok(Sampler { stop, thread, pids })
    }

    /// The `tc` processes' ids, for the window's roles.
    pub(super) fn pids(&self) -> &[u32] {
        &self.pids
    }

    /// Stops sampling; the samples taken.
    pub(super) fn finish(self) -> anyhow::Result<Vec<QueueSample>> {
        self.stop.store(true, Ordering::Relaxed);
        self.thread
            .join()
            .map_err(|_| anyhow::anyhow!("the queue sampler panicked"))?
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_root_qdisc_backlog_is_read_from_tc_json() {
        let line = r#"[{"kind":"tbf","handle":"83f5:","root":true,"refcnt":3,"options":{"rate":12500000,"burst":32762,"lat":9491},"bytes":266,"packets":3,"drops":2,"overlimits":0,"requeues":0,"backlog":4542,"qlen":3}]"#;
        assert_eq!(
            parse_tc_line(line),
            Some(Reading {
                bytes: 4542,
                packets: 3,
                drops: 2
            })
        );
        assert_eq!(parse_tc_line("Error: no such device"), None);
        assert_eq!(parse_tc_line("[]"), None);
    }
}
