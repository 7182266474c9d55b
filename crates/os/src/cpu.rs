//! CPU placement: parsing `--cpu` lists, pinning, and reading where a thread
//! runs. On this two-vCPU VM a cross-core wake-up costs ~100 us, so every result
//! records where it ran.

use crate::OsError;
use std::fmt;

/// A set of CPU numbers as written on a command line: `0`, `0,1`, `0-3,6`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CpuList(Vec<usize>);

/// Why a CPU list did not parse.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum CpuListError {
    /// Empty list, or an empty item between commas.
    #[error("empty CPU list item in {0:?}")]
    Empty(String),
    /// An item that is not a number or a range `a-b` with `a <= b`.
    #[error("bad CPU list item {item:?} in {list:?}: expected N or A-B")]
    BadItem {
        /// The offending item.
        item: String,
        /// The whole list.
        list: String,
    },
    /// A CPU number at or above the CPU_SETSIZE of the kernel interface.
    #[error("CPU {cpu} in {list:?} is out of range (0..1024)")]
    OutOfRange {
        /// The offending CPU number.
        cpu: usize,
        /// The whole list.
        list: String,
    },
}

impl CpuList {
    /// Parses `0,2-3` style lists.
    pub fn parse(text: &str) -> Result<Self, CpuListError> {
        let mut cpus = Vec::new();
        if text.trim().is_empty() {
            return Err(CpuListError::Empty(text.to_string()));
        }
        for item in text.split(',') {
            let item = item.trim();
            if item.is_empty() {
                return Err(CpuListError::Empty(text.to_string()));
            }
            let bad = || CpuListError::BadItem {
                item: item.to_string(),
                list: text.to_string(),
            };
            let (lo, hi) = match item.split_once('-') {
                Some((a, b)) => (
                    a.parse::<usize>().map_err(|_| bad())?,
                    b.parse::<usize>().map_err(|_| bad())?,
                ),
                None => {
                    let n = item.parse::<usize>().map_err(|_| bad())?;
                    (n, n)
                }
            };
            if lo > hi {
                return Err(bad());
            }
            if hi >= 1024 {
                return Err(CpuListError::OutOfRange {
                    cpu: hi,
                    list: text.to_string(),
                });
            }
            cpus.extend(lo..=hi);
        }
        cpus.sort_unstable();
        cpus.dedup();
        Ok(CpuList(cpus))
    }

    /// The CPU numbers, sorted and unique.
    pub fn cpus(&self) -> &[usize] {
        &self.0
    }
}

impl fmt::Display for CpuList {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let items: Vec<String> = self.0.iter().map(|c| c.to_string()).collect();
        f.write_str(&items.join(","))
    }
}

impl std::str::FromStr for CpuList {
    type Err = CpuListError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        CpuList::parse(s)
    }
}

/// Pins the calling thread (and so every thread and child it creates later) to `cpus`.
pub fn pin_current_process(cpus: &CpuList) -> Result<(), OsError> {
    let mut set = nix::sched::CpuSet::new();
    for &cpu in cpus.cpus() {
        set.set(cpu).map_err(|e| OsError::Sys {
            call: "CpuSet::set",
            source: e.into(),
        })?;
    }
    nix::sched::sched_setaffinity(nix::unistd::Pid::from_raw(0), &set).map_err(|e| OsError::Sys {
        call: "sched_setaffinity",
        source: e.into(),
    })
}

/// Runs the calling thread under `SCHED_FIFO` at `priority` (1-99): it then
/// preempts ordinary threads on its CPU as soon as it wakes. Needs root or
/// CAP_SYS_NICE; the kernel's real-time throttling still leaves 5% of each
/// second to other threads.
pub fn set_current_thread_fifo(priority: i32) -> Result<(), OsError> {
    let param = libc::sched_param {
        sched_priority: priority,
    };
    // SAFETY: `param` is a valid sched_param; pid 0 is the calling thread.
    if unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) } != 0 {
        return Err(OsError::last("sched_setscheduler(SCHED_FIFO)"));
    }
    Ok(())
}

/// The CPUs the calling thread may run on.
pub fn current_affinity() -> Result<CpuList, OsError> {
    let set =
        nix::sched::sched_getaffinity(nix::unistd::Pid::from_raw(0)).map_err(|e| OsError::Sys {
            call: "sched_getaffinity",
            source: e.into(),
        })?;
    let cpus = (0..nix::sched::CpuSet::count())
        .filter(|&c| set.is_set(c).unwrap_or(false))
        .collect();
    Ok(CpuList(cpus))
}

/// The CPU the calling thread is running on right now, if the kernel says.
pub fn current_cpu() -> Option<usize> {
    // SAFETY: sched_getcpu has no preconditions.
    let cpu = unsafe { libc::sched_getcpu() };
    usize::try_from(cpu).ok()
}

/// Busy and total time of every CPU since boot, from `/proc/stat` (clock
/// ticks): machine-wide, so it sees work no process is charged with (the
/// kernel forwarding packets in softirq, for one).
#[derive(Clone, Debug, Default)]
pub struct CpuBusy(crate::window::CpuTicks);

impl CpuBusy {
    /// Reads `/proc/stat` now; empty if it cannot be read.
    pub fn sample() -> CpuBusy {
        CpuBusy(crate::window::CpuTicks::sample())
    }

    #[cfg(test)]
    fn parse(stat: &str) -> CpuBusy {
        CpuBusy(crate::window::CpuTicks::parse(stat))
    }

    /// Each CPU's busy share (0 to 1) between `earlier` and `self`: every
    /// column but idle and iowait, over all eight.
    pub fn shares_since(&self, earlier: &CpuBusy) -> Vec<f64> {
        (self.0)
            .0
            .iter()
            .zip(&(earlier.0).0)
            .map(|(now, then)| {
                let idle = |c: &crate::window::CpuCounters| c.idle + c.iowait;
                let all = now.total().saturating_sub(then.total());
                let idle = idle(now).saturating_sub(idle(then)).min(all);
                if all == 0 {
                    0.0
                } else {
                    (all - idle) as f64 / all as f64
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_busy_shares_from_proc_stat() {
        let a = CpuBusy::parse(
            "cpu  9 9 9 9 9 9 9 9\ncpu0 10 0 10 70 10 0 0 0 0 0\ncpu1 0 0 0 100 0 0 0 0\n",
        );
        let b = CpuBusy::parse(
            "cpu  9 9 9 9 9 9 9 9\ncpu0 40 0 20 120 10 0 10 0 0 0\ncpu1 0 0 0 200 0 0 0 0\n",
        );
        assert_eq!(b.shares_since(&a), vec![0.5, 0.0]);
        assert!(CpuBusy::sample()
            .shares_since(&CpuBusy::default())
            .is_empty());
    }

    #[test]
    fn parses_lists_and_ranges() {
        assert_eq!(CpuList::parse("1").unwrap().cpus(), &[1]);
        assert_eq!(CpuList::parse("3,0-1").unwrap().cpus(), &[0, 1, 3]);
        assert_eq!(CpuList::parse("0-1").unwrap().to_string(), "0,1");
    }

    #[test]
    fn rejects_bad_items_naming_them() {
        let e = CpuList::parse("0,x").unwrap_err();
        assert!(e.to_string().contains("\"x\""), "{e}");
        assert!(CpuList::parse("3-1").is_err());
        assert!(CpuList::parse("").is_err());
        assert!(CpuList::parse("0,,1").is_err());
        assert!(CpuList::parse("4096").is_err());
    }

    #[test]
    fn reads_own_affinity() {
        assert!(!current_affinity().unwrap().cpus().is_empty());
    }
}
