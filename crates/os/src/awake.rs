//! Keeping CPUs awake while an experiment measures: one idle-priority
//! (`SCHED_IDLE`) spinning process per CPU, which runs only when nothing
//! else wants that CPU and yields it at once to any task that wakes.
//!
//! Why: on a virtual machine a vCPU with nothing to run halts, and the host
//! takes it back; waking it again (a timer for the load generator's writer,
//! a packet for the server) waits for the host to schedule it, time the
//! guest counts as steal. Measured on the 2-vCPU development VM at 2,000
//! req/s, alternating runs: without spinners the writer's send-lag p99 was
//! 620-740 us, the service-latency p99 2.3-4.6 ms and steal 3-6 % of the
//! CPUs; with them 1-26 us, 116-147 us and under 0.2 %. On bare metal the
//! same spinners keep the CPUs out of deep idle states, whose exit latency
//! is the same kind of machine noise. Hand-written (a few system calls after
//! `fork`), because the spinners must not be threads of a process whose CPU
//! time is measured.

use crate::OsError;

/// Spinning processes, one per CPU, killed when this is dropped (and by
/// the kernel if this process dies first).
#[derive(Debug, Default)]
pub struct KeepAwake {
    pids: Vec<libc::pid_t>,
}

impl KeepAwake {
    /// Starts one `SCHED_IDLE` spinner pinned to each of `cpus`.
    pub fn start(cpus: &[usize]) -> Result<KeepAwake, OsError> {
        let mut k = KeepAwake::default();
        for &cpu in cpus {
            if cpu >= libc::CPU_SETSIZE as usize {
                continue;
            }
            // Prepared before fork: the child calls nothing that allocates.
            // SAFETY: a zeroed cpu_set_t is an empty set.
            let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
            // SAFETY: CPU_SET writes one bit of the set; `cpu` is below
            // CPU_SETSIZE.
            unsafe { libc::CPU_SET(cpu, &mut set) };
            let param = libc::sched_param { sched_priority: 0 };
            // SAFETY: the child runs only async-signal-safe system calls and
            // a spin loop until it is killed; it never returns.
            let pid = unsafe { libc::fork() };
            if pid < 0 {
                return Err(OsError::last("fork (keep-awake spinner)"));
            }
            if pid == 0 {
                let _ = crate::child::set_parent_death_kill();
                // SAFETY: plain system calls on this child's own state.
                unsafe {
                    libc::sched_setaffinity(0, size_of_val(&set), &set);
                    libc::sched_setscheduler(0, libc::SCHED_IDLE, &param);
                }
                loop {
                    std::hint::spin_loop();
                }
            }
            k.pids.push(pid);
        }
        Ok(k)
    }

    /// The spinners' process ids (the experiment's own CPU time).
    pub fn pids(&self) -> Vec<u32> {
        self.pids.iter().map(|p| *p as u32).collect()
    }

    /// Whether any spinner runs.
    pub fn is_on(&self) -> bool {
        !self.pids.is_empty()
    }
}

impl Drop for KeepAwake {
    fn drop(&mut self) {
        for &pid in &self.pids {
            // SAFETY: signalling and reaping our own children.
            unsafe {
                libc::kill(pid, libc::SIGKILL);
                libc::waitpid(pid, std::ptr::null_mut(), 0);
            }
        }
    }
}

/// Whether this machine is a virtual machine: the CPU flags say
/// `hypervisor`.
pub fn is_virtual_machine() -> bool {
    std::fs::read_to_string("/proc/cpuinfo").is_ok_and(|t| {
        t.lines()
            .find(|l| l.starts_with("flags"))
            .is_some_and(|l| l.split_whitespace().any(|f| f == "hypervisor"))
    })
}

/// When to keep the CPUs awake: always, never, or on virtual machines.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum KeepAwakeMode {
    /// On virtual machines only (the default).
    #[default]
    Auto,
    /// Always.
    On,
    /// Never.
    Off,
}

impl KeepAwakeMode {
    /// Whether it applies on this machine.
    pub fn applies(self) -> bool {
        match self {
            KeepAwakeMode::On => true,
            KeepAwakeMode::Off => false,
            KeepAwakeMode::Auto => is_virtual_machine(),
        }
    }
}

impl std::str::FromStr for KeepAwakeMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.trim() {
            "auto" => Ok(KeepAwakeMode::Auto),
            "on" => Ok(KeepAwakeMode::On),
            "off" => Ok(KeepAwakeMode::Off),
            other => Err(format!("{other:?}: auto, on or off")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spinners_start_on_each_cpu_and_die_with_the_guard() {
        let cpus: Vec<usize> = crate::current_affinity()
            .map(|c| c.cpus().to_vec())
            .unwrap_or_default();
        let k = KeepAwake::start(&cpus[..1]).unwrap();
        let pids = k.pids();
        assert_eq!(pids.len(), 1);
        // SAFETY: reads another process's scheduling policy.
        let policy = unsafe { libc::sched_getscheduler(pids[0] as i32) };
        // The child may not have switched yet; once it has, it is idle-priority.
        assert!(
            policy == libc::SCHED_IDLE || policy == libc::SCHED_OTHER,
            "{policy}"
        );
        drop(k);
        // Reaped: the pid no longer names our child.
        assert!(
            !std::path::Path::new(&format!("/proc/{}/stat", pids[0])).exists()
                || crate::process::parent_pid(pids[0] as i32) != Some(std::process::id() as i32)
        );
        assert_eq!("on".parse::<KeepAwakeMode>(), Ok(KeepAwakeMode::On));
        assert!("sometimes".parse::<KeepAwakeMode>().is_err());
        assert!(KeepAwakeMode::On.applies() && !KeepAwakeMode::Off.applies());
    }
}
