//! Who used the CPUs during a measured window: per-CPU tick counters from
//! `/proc/stat` (busy, steal) and the CPU time of the experiment's own
//! process trees from `/proc/PID/stat`, so that a result can say whether the
//! machine was its own while it measured. A [`WindowSnapshot`] is taken at
//! each edge of the window; [`WindowCpu::between`] compares two.
//!
//! The kernel keeps each CPU's idle, I/O-wait and steal time exactly (from
//! clocks, also when the tick stops on an idle CPU), but its user and
//! system columns are samples taken at the tick, which miss the short
//! bursts a server at a few thousand requests per second runs in (measured
//! on a 2-CPU VM: the columns held a third of the CPU time the processes'
//! own counters held). So busy here is the wall clock of the window on the
//! CPUs watched less their idle, I/O-wait, steal and interrupt time, and the
//! experiment's share is from its processes' own precise counters. Interrupt
//! time is left out of both, since the experiment's packets cause most of
//! it; the `ksoftirqd/N` threads, which take softirq work over under load,
//! count as the experiment's kernel work, not as foreign.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::Instant;

/// One CPU's counters from a `cpuN` line of `/proc/stat`, in clock ticks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CpuCounters {
    /// Normal user time.
    pub user: u64,
    /// User time at a positive nice value (idle-priority work among it).
    pub nice: u64,
    /// Kernel time of tasks.
    pub system: u64,
    /// Idle.
    pub idle: u64,
    /// Idle waiting for I/O.
    pub iowait: u64,
    /// Hard interrupts.
    pub irq: u64,
    /// Soft interrupts.
    pub softirq: u64,
    /// Time the hypervisor ran something else while this CPU wanted to run.
    pub steal: u64,
}

impl CpuCounters {
    /// Every column that is time passing on the CPU.
    pub fn total(&self) -> u64 {
        self.user
            + self.nice
            + self.system
            + self.idle
            + self.iowait
            + self.irq
            + self.softirq
            + self.steal
    }

    /// Time tasks ran: user, nice and system.
    pub fn task_busy(&self) -> u64 {
        self.user + self.nice + self.system
    }

    fn since(&self, e: &CpuCounters) -> CpuCounters {
        CpuCounters {
            user: self.user.saturating_sub(e.user),
            nice: self.nice.saturating_sub(e.nice),
            system: self.system.saturating_sub(e.system),
            idle: self.idle.saturating_sub(e.idle),
            iowait: self.iowait.saturating_sub(e.iowait),
            irq: self.irq.saturating_sub(e.irq),
            softirq: self.softirq.saturating_sub(e.softirq),
            steal: self.steal.saturating_sub(e.steal),
        }
    }
}

/// Every CPU's counters at one instant (index = CPU number).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CpuTicks(pub Vec<CpuCounters>);

impl CpuTicks {
    /// Reads `/proc/stat` now; empty if it cannot be read.
    pub fn sample() -> CpuTicks {
        std::fs::read_to_string("/proc/stat")
            .map(|s| CpuTicks::parse(&s))
            .unwrap_or_default()
    }

    /// Parses the `cpuN` lines of a `/proc/stat` text (the `cpu` total line
    /// and everything else are skipped; missing columns read 0).
    pub fn parse(stat: &str) -> CpuTicks {
        let mut cpus = Vec::new();
        for line in stat.lines() {
            let Some(rest) = line
                .strip_prefix("cpu")
                .filter(|r| r.starts_with(|c: char| c.is_ascii_digit()))
            else {
                continue;
            };
            let mut fields = rest.split_whitespace();
            let Some(index) = fields.next().and_then(|i| i.parse::<usize>().ok()) else {
                continue;
            };
            if index >= 4096 {
                continue;
            }
            let v: Vec<u64> = fields.map(|f| f.parse().unwrap_or(0)).collect();
            let at = |i: usize| v.get(i).copied().unwrap_or(0);
            if cpus.len() <= index {
                cpus.resize(index + 1, CpuCounters::default());
            }
            cpus[index] = CpuCounters {
                user: at(0),
                nice: at(1),
                system: at(2),
                idle: at(3),
                iowait: at(4),
                irq: at(5),
                softirq: at(6),
                steal: at(7),
            };
        }
        CpuTicks(cpus)
    }
}

/// Whether the kernel keeps interrupt time apart from the tasks it
/// interrupted (`CONFIG_IRQ_TIME_ACCOUNTING`): then a task's CPU time
/// leaves out the soft interrupts it ran, and the `irq`/`softirq` columns
/// hold them exactly; without it, a task's time includes them and the
/// columns are tick samples. Read from `/proc/config.gz` or
/// `/boot/config-RELEASE`; `None` when neither is readable.
pub fn irq_time_accounting() -> Option<bool> {
    use std::io::Read as _;
    let mut text = String::new();
    let from_gz = std::fs::File::open("/proc/config.gz")
        .ok()
        .map(|f| {
            flate2::read::GzDecoder::new(f)
                .read_to_string(&mut text)
                .is_ok()
        })
        .unwrap_or(false);
    if !from_gz {
        let release = nix::sys::utsname::uname().ok()?;
        let path = format!("/boot/config-{}", release.release().to_string_lossy());
        text = std::fs::read_to_string(path).ok()?;
    }
    Some(parse_irq_time_accounting(&text))
}

fn parse_irq_time_accounting(config: &str) -> bool {
    config
        .lines()
        .any(|l| l.trim() == "CONFIG_IRQ_TIME_ACCOUNTING=y")
}

/// Clock ticks per second (`_SC_CLK_TCK`, 100 on Linux).
pub fn clock_ticks_per_s() -> f64 {
    // SAFETY: sysconf only reads a configuration value.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 {
        t as f64
    } else {
        100.0
    }
}

/// The state at one edge of a window.
#[derive(Clone, Debug)]
pub struct WindowSnapshot {
    /// When it was taken.
    pub at: Instant,
    /// Per-CPU counters.
    pub ticks: CpuTicks,
    /// CPU seconds of each role's process trees, by role name.
    pub roles: BTreeMap<String, f64>,
    /// CPU seconds of each `ksoftirqd/N` thread, by CPU.
    pub ksoftirqd: BTreeMap<usize, f64>,
    /// Every other process (in no role's tree, not a `ksoftirqd`): its
    /// command name and CPU seconds, by pid.
    pub others: HashMap<i32, (String, f64)>,
}

impl WindowSnapshot {
    /// Takes a snapshot: `/proc/stat`, then the CPU time of every role's
    /// process trees (each role names the root processes of its trees).
    pub fn take(roles: &[(&str, Vec<i32>)]) -> WindowSnapshot {
        let ticks = CpuTicks::sample();
        let at = Instant::now();
        // One pass over /proc for every role and the softirq threads: with
        // ten thousand processes (a process per connection) a pass per role
        // took seconds and stretched the window.
        let all = crate::process::all_processes();
        let mut mine = HashSet::new();
        let roles = roles
            .iter()
            .map(|(name, roots)| {
                let tree = crate::process::trees_of(&all, roots);
                let cpu: f64 = tree
                    .iter()
                    .filter_map(|p| all.get(p).map(|s| s.cpu_s))
                    .sum();
                mine.extend(tree);
                ((*name).to_string(), cpu)
            })
            .collect();
        let others = all
            .iter()
            .filter(|(pid, p)| !mine.contains(*pid) && !p.comm.starts_with("ksoftirqd/"))
            .map(|(pid, p)| (*pid, (p.comm.clone(), p.cpu_s)))
            .collect();
        let ksoftirqd = all
            .values()
            .filter_map(|p| {
                let cpu = p.comm.strip_prefix("ksoftirqd/")?.parse::<usize>().ok()?;
                Some((cpu, p.cpu_s))
            })
            .collect();
        WindowSnapshot {
            at,
            ticks,
            roles,
            ksoftirqd,
            others,
        }
    }
}

/// A process outside the experiment that ran during a window.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct OtherProcess {
    /// Its pid.
    pub pid: i32,
    /// Its command name.
    pub comm: String,
    /// CPU seconds it ran in the window (on any CPU).
    pub cpu_s: f64,
}

/// How many of the busiest other processes a window keeps.
const OTHERS_KEPT: usize = 3;

/// What happened on a set of CPUs between two snapshots; shares are of the
/// CPUs' whole time over the window (their tick totals).
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct WindowCpu {
    /// The CPUs watched.
    pub cpus: Vec<usize>,
    /// Wall seconds between the snapshots.
    pub seconds: f64,
    /// Steal time over the CPUs' time.
    pub steal_share: f64,
    /// Task time (the window less idle, I/O wait, steal and interrupts)
    /// over the CPUs' time.
    pub busy_share: f64,
    /// Interrupt time (irq + softirq) over the CPUs' time.
    pub interrupt_share: f64,
    /// The roles' process trees' CPU over the CPUs' time (all roles).
    pub own_share: f64,
    /// The `ksoftirqd` threads of the watched CPUs over the CPUs' time.
    pub kernel_net_share: f64,
    /// Task time nobody of the experiment accounts for: busy minus own
    /// minus ksoftirqd, over the CPUs' time (0 at least).
    pub foreign_share: f64,
    /// Each role's CPU seconds in the window (a share of one CPU per
    /// second: divide by `seconds`).
    pub role_cpu_s: BTreeMap<String, f64>,
    /// Each watched CPU on its own.
    #[serde(default)]
    pub per_cpu: Vec<PerCpu>,
    /// The busiest processes outside the experiment in the window (up to
    /// three, 10 ms or more each, on any CPU: a process's counters do not
    /// say where it ran), so a failed `foreign_cpu` names its suspects.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub others_top: Vec<OtherProcess>,
}

/// One CPU over the window, shares of its own time.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct PerCpu {
    /// The CPU.
    pub cpu: usize,
    /// Task time (the window less idle, I/O wait, steal and interrupts).
    pub busy: f64,
    /// Interrupt time (irq + softirq).
    pub interrupt: f64,
    /// Its `ksoftirqd` thread.
    pub kernel_net: f64,
    /// Steal.
    pub steal: f64,
}

impl WindowCpu {
    /// Compares two snapshots on `cpus` (all CPUs when empty).
    pub fn between(before: &WindowSnapshot, after: &WindowSnapshot, cpus: &[usize]) -> WindowCpu {
        // Most distribution kernels keep interrupts apart.
        Self::between_with(before, after, cpus, irq_time_accounting().unwrap_or(true))
    }

    /// [`between`](WindowCpu::between) on a kernel that keeps interrupt
    /// time apart (`irq_apart`) or not: without, the tasks' own counters
    /// hold the soft interrupts they ran, so interrupts count as busy here
    /// too (matched by the experiment's counters); with, they are apart on
    /// both sides.
    pub fn between_with(
        before: &WindowSnapshot,
        after: &WindowSnapshot,
        cpus: &[usize],
        irq_apart: bool,
    ) -> WindowCpu {
        let n = after.ticks.0.len().min(before.ticks.0.len());
        let cpus: Vec<usize> = if cpus.is_empty() {
            (0..n).collect()
        } else {
            cpus.iter().copied().filter(|c| *c < n).collect()
        };
        let tick = clock_ticks_per_s();
        let seconds = after.at.saturating_duration_since(before.at).as_secs_f64();
        let capacity_s = seconds * cpus.len() as f64;
        let (mut busy_s, mut steal_s, mut interrupt_s, mut kernel_s) = (0.0, 0.0, 0.0, 0.0);
        let mut per_cpu = Vec::new();
        for &c in &cpus {
            let d = after.ticks.0[c].since(&before.ticks.0[c]);
            let s = |ticks: u64| ticks as f64 / tick;
            let interrupts = s(d.irq + d.softirq);
            // Busy is what the wall clock leaves after idle and steal (the
            // kernel keeps both exactly; the user and system columns are
            // tick samples, which miss short bursts).
            let mut busy = (seconds - s(d.idle + d.iowait) - s(d.steal)).clamp(0.0, seconds);
            if irq_apart {
                busy = (busy - interrupts).max(0.0);
            }
            let ksoft = match (after.ksoftirqd.get(&c), before.ksoftirqd.get(&c)) {
                (Some(a), Some(b)) => (a - b).max(0.0),
                _ => 0.0,
            };
            let of = |v: f64| {
                if seconds > 0.0 {
                    (v / seconds).clamp(0.0, 1.0)
                } else {
                    0.0
                }
            };
            per_cpu.push(PerCpu {
                cpu: c,
                busy: of(busy),
                interrupt: of(interrupts),
                kernel_net: of(ksoft),
                steal: of(s(d.steal)),
            });
            busy_s += busy;
            steal_s += s(d.steal);
            interrupt_s += interrupts;
            kernel_s += ksoft;
        }
        let role_cpu_s: BTreeMap<String, f64> = after
            .roles
            .iter()
            .map(|(name, s)| {
                let b = before.roles.get(name).copied().unwrap_or(0.0);
                (name.clone(), (s - b).max(0.0))
            })
            .collect();
        let own_s: f64 = role_cpu_s.values().sum();
        let share = |s: f64| {
            if capacity_s > 0.0 {
                (s / capacity_s).clamp(0.0, 1.0)
            } else {
                0.0
            }
        };
        let mut others_top: Vec<OtherProcess> = after
            .others
            .iter()
            .filter_map(|(pid, (comm, cpu))| {
                let (_, was) = before.others.get(pid)?;
                let cpu_s = cpu - was;
                (cpu_s >= 0.01).then(|| OtherProcess {
                    pid: *pid,
                    comm: comm.clone(),
                    cpu_s,
                })
            })
            .collect();
        others_top.sort_by(|a, b| b.cpu_s.total_cmp(&a.cpu_s).then(a.pid.cmp(&b.pid)));
        others_top.truncate(OTHERS_KEPT);
        WindowCpu {
            others_top,
            seconds,
            steal_share: share(steal_s),
            busy_share: share(busy_s),
            interrupt_share: share(interrupt_s),
            own_share: share(own_s),
            kernel_net_share: share(kernel_s),
            foreign_share: share((busy_s - own_s - kernel_s).max(0.0)),
            role_cpu_s,
            cpus,
            per_cpu,
        }
    }

    /// One CPU's figures, if it was watched.
    pub fn cpu(&self, cpu: usize) -> Option<&PerCpu> {
        self.per_cpu.iter().find(|c| c.cpu == cpu)
    }

    /// A role's CPU as a share of one CPU over the window.
    pub fn role_share(&self, role: &str) -> Option<f64> {
        let s = self.role_cpu_s.get(role)?;
        (self.seconds > 0.0).then(|| s / self.seconds)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snap(stat: &str, roles: &[(&str, f64)], at: Instant) -> WindowSnapshot {
        WindowSnapshot {
            at,
            ticks: CpuTicks::parse(stat),
            roles: roles.iter().map(|(n, s)| (n.to_string(), *s)).collect(),
            ksoftirqd: BTreeMap::new(),
            others: HashMap::new(),
        }
    }

    #[test]
    fn steal_busy_and_foreign_on_the_cpus_watched() {
        let t0 = Instant::now();
        let a = snap(
            "cpu  1 1 1 1 1 1 1 1\ncpu0 0 0 0 0 0 0 0 0\ncpu1 0 0 0 0 0 0 0 0\n",
            &[("server", 10.0)],
            t0,
        );
        // CPU 1 over 100 ticks: 60 task time, 30 idle, 5 softirq, 5 steal.
        let b = snap(
            "cpu  1 1 1 1 1 1 1 1\ncpu0 0 0 0 100 0 0 0 0\ncpu1 40 0 20 30 0 0 5 5\n",
            &[("server", 10.5)],
            t0 + std::time::Duration::from_secs(1),
        );
        let w = WindowCpu::between_with(&a, &b, &[1], true);
        assert_eq!(w.cpus, vec![1]);
        let tick = clock_ticks_per_s();
        let close = |x: f64, y: f64| (x - y).abs() < 1e-9;
        assert!(close(w.steal_share, 0.05), "{w:?}");
        assert!(close(w.busy_share, 0.6), "{w:?}");
        assert!(close(w.interrupt_share, 0.05), "{w:?}");
        // 0.5 s of the server's own time over 100 ticks of capacity.
        let own = 0.5 / (100.0 / tick);
        assert!(close(w.own_share, own), "{w:?}");
        assert!(close(w.foreign_share, (0.6 - own).max(0.0)), "{w:?}");
        assert!(close(w.role_share("server").unwrap(), 0.5));
        let one = w.cpu(1).unwrap();
        assert!(close(one.busy, 0.6) && close(one.interrupt, 0.05) && close(one.steal, 0.05));
        assert!(w.cpu(0).is_none());
        // Interrupts not kept apart: they are the tasks' time, so busy.
        let w = WindowCpu::between_with(&a, &b, &[1], false);
        assert!(close(w.busy_share, 0.65), "{w:?}");
        // Every CPU when none is named.
        assert_eq!(WindowCpu::between(&a, &b, &[]).cpus, vec![0, 1]);
        // A CPU the machine does not have is left out.
        assert_eq!(WindowCpu::between(&a, &b, &[1, 7]).cpus, vec![1]);
    }

    #[test]
    fn the_busiest_other_processes_are_named() {
        let t0 = Instant::now();
        let stat = "cpu0 0 0 0 0 0 0 0 0\n";
        let mut a = snap(stat, &[], t0);
        let mut b = snap(stat, &[], t0 + std::time::Duration::from_secs(1));
        for (pid, comm, was, now) in [
            (10, "kdamond.0", 1.0, 1.35),
            (11, "cron", 5.0, 5.001),
            (12, "kworker/0:1", 0.0, 0.05),
            (13, "gone", 1.0, 9.0),
            (14, "make", 0.0, 0.2),
            (15, "cc1", 0.0, 0.1),
        ] {
            if pid != 13 {
                b.others.insert(pid, (comm.to_string(), now));
            }
            a.others.insert(pid, (comm.to_string(), was));
        }
        let w = WindowCpu::between_with(&a, &b, &[0], true);
        let named: Vec<(&str, i64)> = w
            .others_top
            .iter()
            .map(|o| (o.comm.as_str(), (o.cpu_s * 1000.0).round() as i64))
            .collect();
        // The three busiest of those alive at both edges; cron's 1 ms is
        // below the floor, and a process gone by the end has no figure.
        assert_eq!(named, vec![("kdamond.0", 350), ("make", 200), ("cc1", 100)]);
        // A snapshot of this machine sees others, never its own roles.
        let me = std::process::id() as i32;
        let s = WindowSnapshot::take(&[("me", vec![me])]);
        assert!(!s.others.contains_key(&me));
        assert!(!s.others.is_empty());
    }

    #[test]
    fn the_kernel_config_says_whether_interrupts_are_apart() {
        assert!(parse_irq_time_accounting(
            "A=1\nCONFIG_IRQ_TIME_ACCOUNTING=y\n"
        ));
        assert!(!parse_irq_time_accounting(
            "# CONFIG_IRQ_TIME_ACCOUNTING is not set\n"
        ));
        // Whatever this machine says, asking does not fail.
        let _ = irq_time_accounting();
    }

    #[test]
    fn a_snapshot_of_this_process_sees_its_cpu() {
        let me = std::process::id() as i32;
        let a = WindowSnapshot::take(&[("me", vec![me])]);
        let mut x = 0u64;
        let until = Instant::now() + std::time::Duration::from_millis(60);
        while Instant::now() < until {
            x = x.wrapping_mul(31).wrapping_add(7);
        }
        std::hint::black_box(x);
        let b = WindowSnapshot::take(&[("me", vec![me])]);
        let w = WindowCpu::between(&a, &b, &[]);
        assert!(!w.cpus.is_empty());
        assert!(w.role_cpu_s["me"] >= 0.0);
        assert!((0.0..=1.0).contains(&w.busy_share), "{w:?}");
        assert!((0.0..=1.0).contains(&w.foreign_share), "{w:?}");
    }
}
