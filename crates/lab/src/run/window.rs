//! The measured window's CPU, seen from outside the processes measured: a
//! thread that waits for the window to open, takes a
//! [`WindowSnapshot`](connlab_os::window::WindowSnapshot) of every role's
//! process trees, waits for it to close and takes another. Every runner
//! that knows its processes and its window uses it, so steal, foreign work
//! and each role's CPU come from one place.

use connlab_os::window::{WindowCpu, WindowSnapshot};
use connlab_os::Shutdown;
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime};

/// The process trees of one experiment, by role (`server`, `clients`,
/// `gateway`, `backends`, ...).
#[derive(Clone, Debug, Default)]
pub(crate) struct Roles(pub(crate) Vec<(String, Vec<i32>)>);

impl Roles {
    /// Adds a role's root processes.
    pub(crate) fn with(mut self, name: &str, pids: impl IntoIterator<Item = u32>) -> Roles {
        self.0
            .push((name.into(), pids.into_iter().map(|p| p as i32).collect()));
        self
    }

    fn borrowed(&self) -> Vec<(&str, Vec<i32>)> {
        self.0
            .iter()
            .map(|(n, p)| (n.as_str(), p.clone()))
            .collect()
    }
}

/// The keep-awake spinners of the sweep under way (their CPU is the
/// experiment's own, role `keep_awake`, in every window).
static AWAKE: std::sync::Mutex<Vec<i32>> = std::sync::Mutex::new(Vec::new());

/// Starts idle-priority spinners on the CPUs this process may use, when
/// `mode` applies here; every window counts them as role `keep_awake` while
/// the returned guard lives. `None` when it does not apply.
pub(crate) fn keep_awake(
    mode: connlab_os::awake::KeepAwakeMode,
) -> Result<Option<AwakeGuard>, crate::run::RunError> {
    if !mode.applies() {
        return Ok(None);
    }
    let cpus = connlab_os::current_affinity()
        .map(|c| c.cpus().to_vec())
        .unwrap_or_default();
    let k = connlab_os::awake::KeepAwake::start(&cpus)
        .map_err(|e| crate::run::RunError::Failed(format!("keeping the CPUs awake: {e}")))?;
    if let Ok(mut a) = AWAKE.lock() {
        *a = k.pids().into_iter().map(|p| p as i32).collect();
    }
    Ok(Some(AwakeGuard { _spinners: k, cpus }))
}

/// The spinners of [`keep_awake`], stopped (and forgotten by the windows)
/// when dropped.
pub(crate) struct AwakeGuard {
    _spinners: connlab_os::awake::KeepAwake,
    /// The CPUs kept awake.
    pub(crate) cpus: Vec<usize>,
}

impl Drop for AwakeGuard {
    fn drop(&mut self) {
        if let Ok(mut a) = AWAKE.lock() {
            a.clear();
        }
    }
}

/// The spinners' process ids while a sweep keeps the CPUs awake.
pub(crate) fn awake_pids() -> Vec<i32> {
    AWAKE.lock().map(|a| a.clone()).unwrap_or_default()
}

/// Windows shorter than this keep their record but leave the `steal`
/// and `foreign_cpu` gates out: `/proc/stat` and a process's CPU time count
/// in clock ticks (10 ms), so over a shorter window either share is mostly
/// rounding.
///
/// 0.8 s rather than 1 s: a 1 s measured window is sampled a tenth early
/// (see [`sample`]) and its first edge comes a moment after its start, so
/// it is measured as 0.9 s or a little less, and a 1 s point must keep
/// its gates.
pub(crate) const MIN_GATED_WINDOW_S: f64 = 0.8;

/// The window as evidence for the CPU gates: `None` when it is missing or
/// shorter than [`MIN_GATED_WINDOW_S`].
pub(crate) fn gated(w: Option<&WindowCpu>) -> Option<WindowCpu> {
    w.filter(|w| w.seconds >= MIN_GATED_WINDOW_S).cloned()
}

/// One edge of a window, taken now in this thread (for runners whose
/// measured part runs in their own thread: the pipeline, the single-IP
/// points): the roles' process trees, and as role `runner` this process's
/// own CPU with that of the children it has reaped. A process that starts
/// and ends inside the window (a probe) is counted there once reaped, so
/// leave it out of the roles; a role's live process is never counted twice.
pub(crate) fn edge(roles: &Roles) -> WindowSnapshot {
    let mut borrowed = roles.borrowed();
    let awake = awake_pids();
    if !awake.is_empty() {
        borrowed.push(("keep_awake", awake));
    }
    // This process's CPU is read before the snapshot's pass over /proc:
    // the pass at the window's end runs after its instant (with ten
    // thousand processes, for most of a second), so read after it, the
    // runner's share held a pass that belongs to no window.
    let me = std::process::id() as i32;
    let own = connlab_os::process::process_cpu_s(me).unwrap_or(0.0);
    let mut s = WindowSnapshot::take(&borrowed);
    s.others.remove(&me);
    s.roles.insert("runner".into(), own);
    s
}

/// Starts sampling the window `[from, from + length)` on `cpus` (all CPUs
/// when empty), closed a tenth early (at most 500 ms): the clients stop at
/// the window's end and exit as soon as their last responses arrive, and a
/// process per connection exits with them, so an edge taken at the very end
/// races their exit and loses their CPU. The shares are of the window
/// sampled. The handle's result is `None` when the sweep was stopped first.
pub(crate) fn sample(
    roles: Roles,
    cpus: Vec<usize>,
    from: SystemTime,
    length: Duration,
    shutdown: &Shutdown,
) -> JoinHandle<Option<WindowCpu>> {
    let shutdown = shutdown.clone();
    let length = length.saturating_sub((length / 10).min(Duration::from_millis(500)));
    std::thread::spawn(move || {
        if let Ok(wait) = from.duration_since(SystemTime::now()) {
            if shutdown.wait(wait) {
                return None;
            }
        }
        // The runner itself (this sampler, the progress display) counts as
        // the experiment's own, not as foreign work.
        let before = edge(&roles);
        // The end is fixed from the start, not from the first edge: with a
        // process per connection, one pass over /proc takes most of a
        // second, and a window that ran that much late outlived the load.
        let end = from + length;
        if let Ok(wait) = end.duration_since(SystemTime::now()) {
            if shutdown.wait(wait) {
                return None;
            }
        }
        let after = edge(&roles);
        Some(WindowCpu::between(&before, &after, &cpus))
    })
}

/// The CPUs a set of CPU lists names, sorted and unique; empty (all CPUs)
/// as soon as one of them is `None` (a process that was not pinned).
pub(crate) fn cpus_of<'a>(lists: impl IntoIterator<Item = Option<&'a str>>) -> Vec<usize> {
    let mut out = Vec::new();
    for l in lists {
        let Some(cpus) = l.and_then(|l| connlab_os::CpuList::parse(l).ok()) else {
            return Vec::new();
        };
        out.extend_from_slice(cpus.cpus());
    }
    out.sort_unstable();
    out.dedup();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cpus_watched_are_the_union_or_all() {
        assert_eq!(cpus_of([Some("1"), Some("0"), Some("0,2")]), vec![0, 1, 2]);
        assert!(cpus_of([Some("1"), None]).is_empty());
    }

    #[test]
    fn a_window_of_this_process() {
        let shutdown = Shutdown::new().unwrap();
        let roles = Roles::default().with("me", [std::process::id()]);
        let h = sample(
            roles,
            Vec::new(),
            SystemTime::now(),
            Duration::from_millis(50),
            &shutdown,
        );
        let w = h.join().unwrap().expect("not stopped");
        assert!(w.seconds > 0.0, "{w:?}");
        assert!(w.role_cpu_s.contains_key("me") && w.role_cpu_s.contains_key("runner"));
    }

    #[test]
    fn an_edge_counts_this_process_as_the_runner_and_short_windows_are_not_gated() {
        let roles = Roles::default().with("none", []);
        let (a, b) = (edge(&roles), edge(&roles));
        let w = WindowCpu::between(&a, &b, &[]);
        assert!(w.role_cpu_s.contains_key("runner"), "{w:?}");
        assert!(w.role_cpu_s.contains_key("none"), "{w:?}");
        assert!(gated(Some(&w)).is_none(), "{w:?}");
        let long = WindowCpu {
            seconds: MIN_GATED_WINDOW_S,
            ..w
        };
        assert!(gated(Some(&long)).is_some());
        assert!(gated(None).is_none());
    }
}
