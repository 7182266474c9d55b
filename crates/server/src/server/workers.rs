//! `--workers N`: N event loops of one engine, one thread each, each with
//! its own listener (`SO_REUSEPORT`) or a handle on one shared listener,
//! each pinned to its own CPU of `--cpu` when a list is given. Every loop
//! keeps its own counters, added up when all have stopped, and reports
//! its thread's CPU time and wake-ups; the protocol core is the same as
//! with one loop, so engines still differ only in I/O.

use crate::config::ServerConfig;
use crate::connection::SessionTemplate;
use crate::counters::Counters;
use crate::engine::{self, RunContext};
use crate::listener::Listener;
use crate::profile::PollProfile;
use crate::stats::WorkerStats;
use connlab_os::{CpuList, CpuTimes, Shutdown};
use std::io;
use std::sync::Mutex;

/// Serves with `config.workers` loops until `shutdown` trips; returns each
/// loop's figures and counters, in worker order. `listeners`: one per
/// worker, or one that every worker shares.
pub(super) fn serve(
    config: &ServerConfig,
    listeners: Vec<Listener>,
    shutdown: &Shutdown,
    profile: Option<&Mutex<PollProfile>>,
    template: SessionTemplate,
) -> io::Result<Vec<(WorkerStats, Counters)>> {
    let shared = listeners.len() == 1;
    let mut own: Vec<Listener> = Vec::with_capacity(config.workers);
    for (i, l) in listeners.into_iter().enumerate() {
        if i == 0 && shared {
            for _ in 1..config.workers {
                own.push(l.try_clone()?);
            }
        }
        own.push(l);
    }
    let cpus: Vec<usize> = config
        .cpus
        .as_ref()
        .map(|c| c.cpus().to_vec())
        .unwrap_or_default();
    std::thread::scope(|s| {
        let handles: Vec<_> = own
            .into_iter()
            .enumerate()
            .map(|(i, listener)| {
                let cpu = (!cpus.is_empty()).then(|| cpus[i % cpus.len()]);
                std::thread::Builder::new()
                    .name(format!("worker-{i}"))
                    .spawn_scoped(s, move || {
                        // A loop's timer holds the profile for the whole
                        // run: the first loop's calls are the ones timed.
                        let profile = profile.filter(|_| i == 0);
                        worker(
                            config, i, cpu, listener, shared, shutdown, profile, template,
                        )
                    })
            })
            .collect::<io::Result<_>>()?;
        let mut out = Vec::with_capacity(config.workers);
        let mut failed = None;
        for h in handles {
            match h.join() {
                Ok(Ok(w)) => out.push(w),
                Ok(Err(e)) => failed = failed.or(Some(e)),
                Err(_) => failed = failed.or(Some(io::Error::other("a worker thread panicked"))),
            }
        }
        match failed {
            Some(e) => Err(e),
            None => Ok(out),
        }
    })
}

/// One loop on the calling thread, pinned to `cpu` if given.
#[allow(clippy::too_many_arguments)]
fn worker(
    config: &ServerConfig,
    index: usize,
    cpu: Option<usize>,
    listener: Listener,
    shared: bool,
    shutdown: &Shutdown,
    profile: Option<&Mutex<PollProfile>>,
    template: SessionTemplate,
) -> io::Result<(WorkerStats, Counters)> {
    if let Some(c) = cpu {
        let one = CpuList::parse(&c.to_string()).map_err(io::Error::other)?;
        connlab_os::pin_current_process(&one).map_err(io::Error::other)?;
    }
    let counters = Counters::default();
    let ctx = RunContext {
        listener,
        counters: &counters,
        shutdown,
        profile,
        template,
        exclusive_accept: shared,
    };
    let result = engine::build(config).serve(ctx);
    // A loop that fails stops the others too: the run is over.
    if result.is_err() {
        shutdown.trigger();
    }
    result?;
    let stats = WorkerStats {
        worker: index,
        cpu,
        connections: counters.accepted.load(std::sync::atomic::Ordering::Relaxed),
        requests: counters.requests.load(std::sync::atomic::Ordering::Relaxed),
        cpu_s: CpuTimes::thread().total_s(),
        wakeups: CpuTimes::thread_voluntary_switches(),
    };
    Ok((stats, counters))
}
