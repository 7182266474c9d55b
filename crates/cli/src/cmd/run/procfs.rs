//! What `connlab run` reads about a server process from `/proc` and
//! `getrusage`: its process tree, CPU time, voluntary context switches
//! (wake-ups), proportional memory, and CPU affinity (set for a run and
//! restored after).

use connlab_os::CpuList;

/// `pid` and every process descending from it now.
pub(super) use connlab_os::process::process_tree as tree;

/// CPU seconds of the processes (children they reaped count too).
pub(super) use connlab_os::process::processes_cpu_s as cpu_s;

/// Voluntary context switches of every live thread of the processes.
pub(super) fn voluntary_switches(pids: &[i32]) -> u64 {
    let mut total = 0;
    for p in pids {
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{p}/task")) else {
            continue;
        };
        for t in tasks.flatten() {
            let Ok(text) = std::fs::read_to_string(t.path().join("status")) else {
                continue;
            };
            total += status_field(&text, "voluntary_ctxt_switches:").unwrap_or(0);
        }
    }
    total
}

fn status_field(text: &str, key: &str) -> Option<u64> {
    text.lines()
        .find_map(|l| l.strip_prefix(key))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// Memory of the processes in KiB: their proportional set size (shared
/// pages split among the processes that map them, so a process per
/// connection is not counted many times), or their resident size where
/// `smaps_rollup` cannot be read. `None` if no process could be read.
pub(super) fn memory_kib(pids: &[i32]) -> Option<u64> {
    let mut total = None;
    for p in pids {
        let pss = std::fs::read_to_string(format!("/proc/{p}/smaps_rollup"))
            .ok()
            .and_then(|t| status_field(&t, "Pss:"));
        let kib = pss.or_else(|| {
            std::fs::read_to_string(format!("/proc/{p}/status"))
                .ok()
                .and_then(|t| status_field(&t, "VmRSS:"))
        });
        if let Some(k) = kib {
            *total.get_or_insert(0) += k;
        }
    }
    total
}

/// Voluntary context switches of this process's reaped children
/// (`getrusage(RUSAGE_CHILDREN)`); the difference around reaping one
/// child is that child's count over its whole life, every thread included.
pub(super) fn children_switches() -> u64 {
    // SAFETY: an all-zero rusage is a valid value to be overwritten.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `ru` is a valid, writable rusage.
    if unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut ru) } != 0 {
        return 0;
    }
    ru.ru_nvcsw.max(0) as u64
}

/// The affinity masks of threads changed by [`pin_tree`], to restore.
pub(super) struct Pinned(Vec<(i32, libc::cpu_set_t)>);

/// Pins every thread of the processes to `cpus`, keeping the masks they had.
pub(super) fn pin_tree(pids: &[i32], cpus: &CpuList) -> std::io::Result<Pinned> {
    // SAFETY: an all-zero cpu_set_t is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    for &c in cpus.cpus() {
        // SAFETY: `c` is below 1024 (CpuList's bound), within cpu_set_t.
        unsafe { libc::CPU_SET(c, &mut set) };
    }
    let mut saved = Vec::new();
    for p in pids {
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{p}/task")) else {
            continue;
        };
        for t in tasks.flatten() {
            let Some(tid) = t.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
                continue;
            };
            // SAFETY: an all-zero cpu_set_t is a valid buffer.
            let mut old: libc::cpu_set_t = unsafe { std::mem::zeroed() };
            let size = size_of::<libc::cpu_set_t>();
            // SAFETY: `old` and `set` are valid cpu_set_t of `size` bytes.
            unsafe {
                if libc::sched_getaffinity(tid, size, &mut old) != 0 {
                    continue;
                }
                if libc::sched_setaffinity(tid, size, &set) != 0 {
                    let e = std::io::Error::last_os_error();
                    Pinned(saved).restore();
                    return Err(e);
                }
            }
            saved.push((tid, old));
        }
    }
    Ok(Pinned(saved))
}

impl Pinned {
    /// Gives every pinned thread that still exists its old mask back.
    pub(super) fn restore(self) {
        for (tid, old) in &self.0 {
            // SAFETY: `old` is a valid cpu_set_t; a vanished thread fails harmlessly.
            unsafe { libc::sched_setaffinity(*tid, size_of::<libc::cpu_set_t>(), old) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_this_process() {
        let me = std::process::id() as i32;
        assert!(tree(me).contains(&me));
        assert!(memory_kib(&[me]).is_some_and(|k| k > 0));
        assert!(cpu_s(&[me]) >= 0.0);
    }

    #[test]
    fn parses_status_fields() {
        let text = "Name:\tx\nvoluntary_ctxt_switches:\t42\nnonvoluntary_ctxt_switches:\t3\n";
        assert_eq!(status_field(text, "voluntary_ctxt_switches:"), Some(42));
        assert_eq!(status_field("Pss:    1234 kB\n", "Pss:"), Some(1234));
    }
}
