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

/// Starts sampling the window `[from, from + length)` on `cpus` (all CPUs
/// when empty); the handle's result is `None` when the sweep was stopped
/// first.
pub(crate) fn sample(
    roles: Roles,
    cpus: Vec<usize>,
    from: SystemTime,
    length: Duration,
    shutdown: &Shutdown,
) -> JoinHandle<Option<WindowCpu>> {
    let shutdown = shutdown.clone();
    std::thread::spawn(move || {
        if let Ok(wait) = from.duration_since(SystemTime::now()) {
            if shutdown.wait(wait) {
                return None;
            }
        }
        let roles = roles.borrowed();
        let before = WindowSnapshot::take(&roles);
        if shutdown.wait(length) {
            return None;
        }
        let after = WindowSnapshot::take(&roles);
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
        assert!(w.seconds >= 0.05, "{w:?}");
        assert!(w.role_cpu_s.contains_key("me"));
    }
}
