//! The findings of `connlab doctor` (schema `connlab.doctor/1`): how quiet
//! the CPUs are ([`watch`]), the A/A noise of a calibration
//! ([`Calibration::from_runs`]), which peer programs run ([`have`]) and,
//! per experiment of the suite, whether it can run and be judged here
//! ([`Assessment`], filled in by `connlab_kinds::doctor`).

use crate::validity::Validity;
use connlab_loadgen::LoadResult;
use connlab_os::window::{WindowCpu, WindowSnapshot};
use connlab_os::Shutdown;
use serde::Serialize;
use std::process::{Command, Stdio};
use std::time::Duration;

/// The programs `connlab doctor` looks for.
pub const PROGRAMS: [&str; 6] = ["nginx", "haproxy", "wrk", "nft", "perf", "ip"];

/// The machine's quiet or noise over a window.
#[derive(Serialize, Debug)]
pub struct Quiet {
    /// The window's length.
    pub seconds: f64,
    /// Share of CPU time stolen by the hypervisor.
    pub steal_share: f64,
    /// Share of CPU time of other processes.
    pub foreign_share: f64,
    /// Steal per CPU.
    pub per_cpu_steal: Vec<(usize, f64)>,
}

/// The calibration's outcome.
#[derive(Serialize, Debug)]
pub struct Calibration {
    /// The placement, in words.
    pub placement: String,
    /// Runs measured.
    pub runs: usize,
    /// Runs that passed their gates.
    pub valid_runs: usize,
    /// The 90th percentile (the largest below ten) of max(r, 1/r) over
    /// consecutive pairs of median service latency.
    pub noise_factor: Option<f64>,
    /// Each run's median service latency.
    pub medians_us: Vec<f64>,
    /// Each run's send-lag p99.
    pub send_lag_p99_us: Vec<f64>,
    /// Why each invalid run failed.
    pub failures: Vec<String>,
}

/// One experiment of the suite, assessed.
#[derive(Serialize, Debug)]
pub struct Assessment {
    /// Its name.
    pub experiment: String,
    /// Its kind (`?` when the file does not read).
    pub kind: String,
    /// `can judge`, `probably cannot judge`, `cannot measure`.
    pub outlook: &'static str,
    /// Why not.
    pub why: Vec<String>,
}

/// Everything `connlab doctor --json` writes.
#[derive(Serialize, Debug)]
pub struct Findings {
    /// `connlab.doctor/1`.
    pub schema: &'static str,
    /// The machine's fingerprint.
    pub machine: String,
    /// The CPUs this process may use.
    pub cpu_affinity: String,
    /// Open-files soft limit.
    pub nofile_soft: u64,
    /// Open-files hard limit.
    pub nofile_hard: u64,
    /// Running as root.
    pub root: bool,
    /// Peer programs and whether each runs.
    pub programs: Vec<(String, bool)>,
    /// The CPUs' quiet.
    pub quiet: Quiet,
    /// The calibration, unless skipped.
    pub calibration: Option<Calibration>,
    /// The suite's experiments.
    pub experiments: Vec<Assessment>,
}

/// Whether a program runs (`PROGRAM -v`, any exit status).
pub fn have(program: &str) -> bool {
    Command::new(program)
        .arg("-v")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok()
}

/// Steal and other processes' CPU on every CPU over `length` (shorter
/// when `shutdown` comes first).
pub fn watch(length: Duration, shutdown: &Shutdown) -> Quiet {
    let me = vec![std::process::id() as i32];
    let before = WindowSnapshot::take(&[("doctor", me.clone())]);
    shutdown.wait(length);
    let after = WindowSnapshot::take(&[("doctor", me)]);
    let w = WindowCpu::between(&before, &after, &[]);
    Quiet {
        seconds: w.seconds,
        steal_share: w.steal_share,
        foreign_share: w.foreign_share,
        per_cpu_steal: w.per_cpu.iter().map(|c| (c.cpu, c.steal)).collect(),
    }
}

/// The A/A noise factor of consecutive medians: the 90th percentile of
/// max(r, 1/r) over consecutive pairs (the largest with fewer than ten
/// pairs); `None` without a pair of positive medians.
pub fn noise_factor(medians: &[f64]) -> Option<f64> {
    let mut factors: Vec<f64> = medians
        .windows(2)
        .filter(|w| w[0] > 0.0 && w[1] > 0.0)
        .map(|w| (w[1] / w[0]).max(w[0] / w[1]))
        .collect();
    factors.sort_by(f64::total_cmp);
    let n = factors.len();
    (n > 0).then(|| {
        let i = if n < 10 {
            n - 1
        } else {
            ((0.9 * n as f64).ceil() as usize).clamp(1, n) - 1
        };
        factors[i]
    })
}

impl Calibration {
    /// The calibration of `results`, measured under `placement`: valid
    /// runs in a row are the A/A pairs.
    pub fn from_runs(placement: String, results: &[(LoadResult, Validity)]) -> Calibration {
        let valid: Vec<f64> = results
            .iter()
            .filter(|(_, v)| v.valid)
            .map(|(r, _)| r.service_latency_us.p50)
            .collect();
        Calibration {
            placement,
            runs: results.len(),
            valid_runs: valid.len(),
            noise_factor: noise_factor(&valid),
            medians_us: results
                .iter()
                .map(|(r, _)| r.service_latency_us.p50)
                .collect(),
            send_lag_p99_us: results.iter().map(|(r, _)| r.send_lag_us.p99).collect(),
            failures: results
                .iter()
                .filter(|(_, v)| !v.valid)
                .map(|(_, v)| v.failure_text())
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn noise_is_the_widest_pair_below_ten_pairs() {
        assert_eq!(noise_factor(&[]), None);
        assert_eq!(noise_factor(&[100.0]), None);
        assert_eq!(noise_factor(&[100.0, 0.0]), None);
        let f = noise_factor(&[100.0, 110.0, 100.0, 105.0]).unwrap();
        assert!((f - 1.1).abs() < 1e-9, "{f}");
    }

    #[test]
    fn noise_is_the_90th_percentile_from_ten_pairs() {
        // Eleven medians: ten pairs, nine of ratio 1.01 and one of 2.
        let mut m = vec![100.0; 10];
        for (i, v) in m.iter_mut().enumerate() {
            if i % 2 == 1 {
                *v = 101.0;
            }
        }
        m.push(m[9] * 2.0);
        let f = noise_factor(&m).unwrap();
        assert!((f - 1.01).abs() < 1e-9, "{f}");
    }
}
