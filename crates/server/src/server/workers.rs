//! `--workers N`: N event loops of one engine, one thread each, each with
//! its own listener (`SO_REUSEPORT`) or a handle on one shared listener,
//! each pinned to its own CPU of `--cpu` when a list is given. Every loop
//! keeps its own counters, added up when all have stopped, and reports
//! its thread's CPU time and wake-ups; the protocol core is the same as
//! with one loop, so engines still differ only in I/O.

use crate::config::{EngineKind, ServerConfig};
use crate::connection::SessionTemplate;
use crate::counters::Counters;
use crate::engine::{self, RunContext, StartGate};
use crate::listener::Listener;
use crate::profile::PollProfile;
use crate::stats::WorkerStats;
use connlab_os::{CpuList, CpuTimes, Shutdown};
use std::io;
use std::sync::Mutex;
use std::time::Duration;

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
                own.push(l.share());
            }
        }
        own.push(l);
    }
    let cpus: Vec<usize> = config
        .cpus
        .as_ref()
        .map(|c| c.cpus().to_vec())
        .unwrap_or_default();
    let rtsig = config.engine == EngineKind::Rtsig;
    // rtsig: the library registers the loop's wake-up descriptor for
    // signals, and a descriptor's signal owner is one per open file, so
    // each loop waits on a latch of its own, tripped by `shutdown`.
    let latches: Vec<Shutdown> = if rtsig {
        (0..config.workers)
            .map(|_| Shutdown::new().map_err(io::Error::other))
            .collect::<io::Result<_>>()?
    } else {
        Vec::new()
    };
    let gate = StartGate::new(config.workers);
    let _blocked = if rtsig {
        Some(BlockedSignals::new()?)
    } else {
        None
    };
    std::thread::scope(|s| {
        if !latches.is_empty() {
            let latches = &latches;
            std::thread::Builder::new()
                .name("worker-stop".into())
                .spawn_scoped(s, move || {
                    while !shutdown.wait(Duration::from_secs(3600)) {}
                    for l in latches {
                        l.trigger();
                    }
                })?;
        }
        let mut handles = Vec::with_capacity(config.workers);
        for (i, listener) in own.into_iter().enumerate() {
            let cpu = (!cpus.is_empty()).then(|| cpus[i % cpus.len()]);
            let stop = latches.get(i).unwrap_or(shutdown);
            let gate = &gate;
            let spawned = std::thread::Builder::new()
                .name(format!("worker-{i}"))
                .spawn_scoped(s, move || {
                    // A loop's timer holds the profile for the whole
                    // run: the first loop's calls are the ones timed.
                    let profile = profile.filter(|_| i == 0);
                    let result = worker(
                        config, i, cpu, listener, shared, stop, profile, template, gate,
                    );
                    // Ended, set up or not: no loop waits for this one.
                    gate.release();
                    // A loop that fails stops the others too: the run is over.
                    if result.is_err() {
                        shutdown.trigger();
                    }
                    result
                });
            match spawned {
                Ok(h) => handles.push(h),
                Err(e) => {
                    // The loops already started (and the latch relay)
                    // stop before the scope ends.
                    shutdown.trigger();
                    return Err(e);
                }
            }
        }
        let mut out = Vec::with_capacity(config.workers);
        let mut failed = None;
        for h in handles {
            match h.join() {
                Ok(Ok(w)) => out.push(w),
                Ok(Err(e)) => failed = failed.or(Some(e)),
                Err(_) => {
                    shutdown.trigger();
                    failed = failed.or(Some(io::Error::other("a worker thread panicked")));
                }
            }
        }
        match failed {
            Some(e) => Err(e),
            None => Ok(out),
        }
    })
}

/// The RT-signal library's signals (its real-time signal and `SIGIO`)
/// blocked in the calling thread, and so in every thread it starts while
/// this lives: the loops' shared listener is armed with the process as
/// signal owner, and the kernel hands such a signal to any thread that
/// does not block it, where its default action would end the process.
/// Dropping it takes what is still pending (nothing is armed any more)
/// and restores the thread's mask.
struct BlockedSignals {
    set: libc::sigset_t,
    old: libc::sigset_t,
}

impl BlockedSignals {
    fn new() -> io::Result<BlockedSignals> {
        // `nix`'s `Signal` has no real-time members: plain libc here.
        let rt = libc::SIGRTMIN() + connlab_rtsig::Options::default().signal_offset;
        // SAFETY: sigemptyset/sigaddset initialise and fill local sigsets;
        // pthread_sigmask reads `set` and writes `old`, both valid.
        unsafe {
            let mut set: libc::sigset_t = std::mem::zeroed();
            let mut old: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            libc::sigemptyset(&mut old);
            libc::sigaddset(&mut set, rt);
            libc::sigaddset(&mut set, libc::SIGIO);
            let rc = libc::pthread_sigmask(libc::SIG_BLOCK, &set, &mut old);
            if rc != 0 {
                return Err(io::Error::from_raw_os_error(rc));
            }
            Ok(BlockedSignals { set, old })
        }
    }
}

impl Drop for BlockedSignals {
    fn drop(&mut self) {
        let zero = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: `set` and `old` are initialised sigsets; a null siginfo
        // pointer is allowed; a zero timeout only polls. Each sigtimedwait
        // takes one pending signal of the set, and returns -1 (EAGAIN)
        // once none is left.
        unsafe {
            while libc::sigtimedwait(&self.set, std::ptr::null_mut(), &zero) > 0 {}
            libc::pthread_sigmask(libc::SIG_SETMASK, &self.old, std::ptr::null_mut());
        }
    }
}

/// One loop on the calling thread, pinned to `cpu` if given, until
/// `shutdown` (its own latch, or the run's) trips.
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
    gate: &StartGate,
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
        start: Some(gate),
    };
    engine::build(config).serve(ctx)?;
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
