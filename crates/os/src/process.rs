//! What `/proc` says about other processes: parent, descendants, CPU
//! time, memory, context switches and thread affinity. The one `/proc`
//! reader of the repository: [`crate::child::Child`] measures its tree with
//! it, the runners (servers they start, and servers the user started for
//! `connlab run`) and the per-role CPU window ([`crate::window`]) too.

use crate::CpuList;
use std::collections::HashMap;

/// The fields of `/proc/PID/stat` after the command name (the third field
/// of proc(5) is index 0).
fn stat_fields(pid: i32) -> Option<Vec<String>> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = text.rsplit_once(')')?.1;
    Some(rest.split_whitespace().map(str::to_string).collect())
}

/// The parent of `pid`, while it exists.
pub fn parent_pid(pid: i32) -> Option<i32> {
    stat_fields(pid)?.get(1)?.parse().ok()
}

/// One process as `/proc/PID/stat` describes it.
#[derive(Clone, Debug, PartialEq)]
pub struct ProcStat {
    /// Its parent.
    pub ppid: i32,
    /// Its command name (`comm`).
    pub comm: String,
    /// utime + stime + cutime + cstime, seconds; for a process of up to 64
    /// threads read by [`all_processes`], its own time is the scheduler's
    /// exact figure instead (see [`exact_cpu_s`]).
    pub cpu_s: f64,
    /// cutime + cstime: the children it reaped, seconds.
    pub children_cpu_s: f64,
    /// Its threads (0 when the line does not say).
    pub threads: u32,
}

/// Parses a `/proc/PID/stat` line.
pub fn parse_stat(text: &str, tick: f64) -> Option<ProcStat> {
    let (head, rest) = text.rsplit_once(')')?;
    let comm = head.split_once('(')?.1.to_string();
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ppid = f.get(1)?.parse().ok()?;
    let ticks: f64 = (11..=14)
        .map(|i| f.get(i).and_then(|v| v.parse::<f64>().ok()))
        .sum::<Option<f64>>()?;
    let children: f64 = (13..=14)
        .map(|i| f.get(i).and_then(|v| v.parse::<f64>().ok()))
        .sum::<Option<f64>>()?;
    Some(ProcStat {
        ppid,
        comm,
        cpu_s: ticks / tick,
        children_cpu_s: children / tick,
        threads: f.get(17).and_then(|v| v.parse().ok()).unwrap_or(0),
    })
}

/// The CPU time of a process to the nanosecond: the run time of its
/// threads from `/proc/PID/schedstat` (one thread) or
/// `/proc/PID/task/*/schedstat` (several) plus the children it reaped;
/// `None` when a file cannot be read. `/proc/PID/stat` counts in clock
/// ticks of 10 ms, and a window's difference of two truncated counts loses
/// almost all of a process that ran less than a tick in it: with a process
/// per connection at 10,000 connections, the server's whole CPU read as
/// someone else's, and a lightly loaded web backend read as 0. A process of
/// more than 64 threads is left to the ticks (`None`). Never less
/// than the tick count (schedstat reads 0 where the kernel keeps no
/// scheduler statistics; threads that ended are in the ticks only).
pub fn exact_cpu_s(pid: i32, p: &ProcStat) -> Option<f64> {
    // A server of a thread per connection has thousands: reading each at a
    // window's edge would cost more than the ticks lose on a process that
    // busy (`None`: the caller takes the ticks).
    const MAX_EXACT_THREADS: u32 = 64;
    let run_ns = |path: &std::path::Path| -> Option<u64> {
        std::fs::read_to_string(path)
            .ok()?
            .split_whitespace()
            .next()?
            .parse()
            .ok()
    };
    let ns: u64 = if p.threads == 1 {
        run_ns(std::path::Path::new(&format!("/proc/{pid}/schedstat")))?
    } else if p.threads > MAX_EXACT_THREADS {
        return None;
    } else {
        std::fs::read_dir(format!("/proc/{pid}/task"))
            .ok()?
            .flatten()
            .filter_map(|t| run_ns(&t.path().join("schedstat")))
            .sum()
    };
    Some((ns as f64 / 1e9 + p.children_cpu_s).max(p.cpu_s))
}

/// Every process now, read in one pass over `/proc` (a process that ends
/// in the middle is left out).
pub fn all_processes() -> HashMap<i32, ProcStat> {
    // SAFETY: sysconf only reads a configuration value.
    let tick = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    let mut out = HashMap::new();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return out;
    };
    for entry in dir.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<i32>().ok())
        else {
            continue;
        };
        if let Some(mut p) = std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .ok()
            .and_then(|t| parse_stat(&t, tick))
        {
            if let Some(exact) = exact_cpu_s(pid, &p) {
                p.cpu_s = exact;
            }
            out.insert(pid, p);
        }
    }
    out
}

/// The processes of `all` in the trees under `roots`, each once.
pub fn trees_of(all: &HashMap<i32, ProcStat>, roots: &[i32]) -> Vec<i32> {
    let mut children: HashMap<i32, Vec<i32>> = HashMap::new();
    for (pid, p) in all {
        children.entry(p.ppid).or_default().push(*pid);
    }
    let mut out: Vec<i32> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for &r in roots {
        if !seen.insert(r) {
            continue;
        }
        out.push(r);
        let mut i = out.len() - 1;
        while i < out.len() {
            if let Some(c) = children.get(&out[i]) {
                for &k in c {
                    if seen.insert(k) {
                        out.push(k);
                    }
                }
            }
            i += 1;
        }
    }
    out
}

/// `pid` and every process descending from it now, parents first.
pub fn process_tree(pid: i32) -> Vec<i32> {
    let mut children: HashMap<i32, Vec<i32>> = HashMap::new();
    if let Ok(dir) = std::fs::read_dir("/proc") {
        for entry in dir.flatten() {
            let Some(p) = entry.file_name().to_str().and_then(|s| s.parse().ok()) else {
                continue;
            };
            if let Some(pp) = parent_pid(p) {
                children.entry(pp).or_default().push(p);
            }
        }
    }
    let mut out = vec![pid];
    let mut i = 0;
    while i < out.len() {
        if let Some(c) = children.get(&out[i]) {
            out.extend(c);
        }
        i += 1;
    }
    out
}

/// utime + stime + cutime + cstime of one process in seconds (so children
/// it reaped count too; exact for a process of up to 64 threads, see
/// [`exact_cpu_s`]); `None` once it is gone.
pub fn process_cpu_s(pid: i32) -> Option<f64> {
    // SAFETY: sysconf only reads a configuration value.
    let tick = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    let p = parse_stat(
        &std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?,
        tick,
    )?;
    Some(exact_cpu_s(pid, &p).unwrap_or(p.cpu_s))
}

/// CPU seconds of the processes ([`process_cpu_s`] each); processes that
/// vanished count 0.
pub fn processes_cpu_s(pids: &[i32]) -> f64 {
    pids.iter().filter_map(|&p| process_cpu_s(p)).sum()
}

/// Resident memory of one process, from `/proc/PID/status`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Rss {
    /// VmRSS: resident now, KiB.
    pub rss_kib: u64,
    /// VmHWM: the most it was ever resident, KiB (0 when not said).
    pub hwm_kib: u64,
}

/// Resident memory of process `pid` now; `None` once it is gone (or for a
/// zombie, which has no memory line).
pub fn rss_kib(pid: i32) -> Option<Rss> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    Some(Rss {
        rss_kib: status_field(&text, "VmRSS:")?,
        hwm_kib: status_field(&text, "VmHWM:").unwrap_or(0),
    })
}

/// Voluntary context switches of every live thread of the processes.
pub fn voluntary_switches(pids: &[i32]) -> u64 {
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

/// The number after `key` in a `/proc` `status`-like text (`VmRSS:  12 kB`).
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
pub fn memory_kib(pids: &[i32]) -> Option<u64> {
    let mut total = None;
    for p in pids {
        let pss = std::fs::read_to_string(format!("/proc/{p}/smaps_rollup"))
            .ok()
            .and_then(|t| status_field(&t, "Pss:"));
        let kib = pss.or_else(|| rss_kib(*p).map(|r| r.rss_kib));
        if let Some(k) = kib {
            *total.get_or_insert(0) += k;
        }
    }
    total
}

/// Voluntary context switches of this process's reaped children
/// (`getrusage(RUSAGE_CHILDREN)`); the difference around reaping one
/// child is that child's count over its whole life, every thread included.
pub fn children_switches() -> u64 {
    // SAFETY: an all-zero rusage is a valid value to be overwritten.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `ru` is a valid, writable rusage.
    if unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut ru) } != 0 {
        return 0;
    }
    ru.ru_nvcsw.max(0) as u64
}

/// The affinity masks of threads changed by [`pin_tree`], to restore.
pub struct Pinned(Vec<(i32, libc::cpu_set_t)>);

/// Pins every thread of the processes to `cpus`, keeping the masks they had.
pub fn pin_tree(pids: &[i32], cpus: &CpuList) -> std::io::Result<Pinned> {
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
    pub fn restore(self) {
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
    fn one_pass_over_proc_finds_this_process_and_its_tree() {
        let line = "42 (my (odd) name) S 7 42 42 0 -1 0 0 0 0 0 150 50 10 5 20 0";
        let p = parse_stat(line, 100.0).unwrap();
        assert_eq!((p.ppid, p.comm.as_str()), (7, "my (odd) name"));
        assert!((p.cpu_s - 2.15).abs() < 1e-9, "{p:?}");
        assert!(parse_stat("garbage", 100.0).is_none());
        assert!((p.children_cpu_s - 0.15).abs() < 1e-9 && p.threads == 0);
        // A process of one thread (a child that burns a little CPU, less
        // than a tick) reads more exactly than in ticks.
        let mut child = std::process::Command::new("sh")
            .args([
                "-c",
                "i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done; read x",
            ])
            .stdin(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let pid = child.id() as i32;
        let mut seen = None;
        for _ in 0..200 {
            let p = all_processes().remove(&pid).unwrap();
            if p.cpu_s > 0.0 {
                seen = Some(p);
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        drop(child.stdin.take());
        child.wait().unwrap();
        let p = seen.expect("the child ran");
        assert_eq!(p.threads, 1);
        // Not a whole number of 10 ms ticks: the exact figure (where the
        // kernel keeps scheduler statistics, as /proc/self shows).
        let own: u64 = std::fs::read_to_string("/proc/self/schedstat")
            .ok()
            .and_then(|t| t.split_whitespace().next()?.parse().ok())
            .unwrap_or(0);
        if own > 0 {
            assert!((p.cpu_s * 100.0).fract() > 1e-6, "{p:?}");
        }
        let all = all_processes();
        let me = std::process::id() as i32;
        assert!(all.contains_key(&me));
        let tree = trees_of(&all, &[me, me]);
        assert_eq!(tree[0], me);
        assert_eq!(tree.iter().filter(|p| **p == me).count(), 1);
    }

    #[test]
    fn this_process_is_in_its_own_tree_with_its_parent_known() {
        let me = std::process::id() as i32;
        assert_eq!(process_tree(me)[0], me);
        assert!(parent_pid(me).is_some());
        assert!(process_cpu_s(me).is_some());
        assert_eq!(processes_cpu_s(&[i32::MAX]), 0.0);
        assert!(memory_kib(&[me]).is_some_and(|k| k > 0));
        assert!(rss_kib(me).is_some_and(|r| r.rss_kib > 0 && r.hwm_kib >= r.rss_kib));
        assert_eq!(rss_kib(i32::MAX), None);
    }

    #[test]
    fn parses_status_fields() {
        let text = "Name:\tx\nvoluntary_ctxt_switches:\t42\nnonvoluntary_ctxt_switches:\t3\n";
        assert_eq!(status_field(text, "voluntary_ctxt_switches:"), Some(42));
        assert_eq!(status_field("Pss:    1234 kB\n", "Pss:"), Some(1234));
    }
}
