//! What `/proc` says about other processes: parent, descendants and CPU
//! time. Shared by the peers runner (servers it starts) and `connlab run`
//! (servers the user started).

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
    /// utime + stime + cutime + cstime, seconds.
    pub cpu_s: f64,
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
    Some(ProcStat {
        ppid,
        comm,
        cpu_s: ticks / tick,
    })
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
        if let Some(p) = std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .ok()
            .and_then(|t| parse_stat(&t, tick))
        {
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
/// it reaped count too); `None` once it is gone.
pub fn process_cpu_s(pid: i32) -> Option<f64> {
    let f = stat_fields(pid)?;
    // SAFETY: sysconf only reads a configuration value.
    let tick = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    let ticks: f64 = (11..=14)
        .map(|i| f.get(i).and_then(|v| v.parse::<f64>().ok()))
        .sum::<Option<f64>>()?;
    Some(ticks / tick)
}

/// CPU seconds of the processes ([`process_cpu_s`] each); processes that
/// vanished count 0.
pub fn processes_cpu_s(pids: &[i32]) -> f64 {
    pids.iter().filter_map(|&p| process_cpu_s(p)).sum()
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
    }
}
