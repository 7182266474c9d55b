//! One process of the soak (backend, gateway, I/O server or app node): its
//! start, restarts, kills and stops, liveness and memory samples, and the
//! environment it is started in.

use super::procs::{describe, stats_path};
use super::report::ExitRecord;
use super::{exit_record, RESTART_TRIES, STOP_GRACE};
use connlab_os::child::Child;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// A long-lived component: its arguments, its process and its history.
pub(super) struct Component {
    pub(super) name: String,
    pub(super) role: &'static str,
    /// Arguments without `--stats`.
    pub(super) args: Vec<String>,
    /// Prefix of its ready line.
    pub(super) ready: &'static str,
    pub(super) proc: Option<Child>,
    pub(super) incarnation: u32,
    /// SIGSTOPped and not continued yet.
    pub(super) stopped: bool,
    pub(super) peak_rss_kib: u64,
    pub(super) exits: Vec<ExitRecord>,
    pub(super) last_stats: Option<PathBuf>,
}

impl Component {
    pub(super) fn new(
        name: &str,
        role: &'static str,
        args: Vec<String>,
        ready: &'static str,
    ) -> Self {
        Component {
            name: name.to_string(),
            role,
            args,
            ready,
            proc: None,
            incarnation: 0,
            stopped: false,
            peak_rss_kib: 0,
            exits: Vec::new(),
            last_stats: None,
        }
    }

    /// Starts the next incarnation; returns its ready line.
    pub(super) fn start(&mut self, env: &Env) -> anyhow::Result<String> {
        let stats = stats_path(&env.work, &self.name, self.incarnation + 1);
        let mut args = self.args.clone();
        args.push("--stats".into());
        args.push(stats.display().to_string());
        let log = env.work.join(format!("{}.log", self.name));
        let (proc, line) = super::procs::spawn(&env.exe, &args, &log, self.ready)?;
        self.proc = Some(proc);
        self.stopped = false;
        self.incarnation += 1;
        self.last_stats = Some(stats);
        Ok(line)
    }

    /// A restart after a kill: a few tries, since a client socket may hold
    /// the port for a moment (the failures are in the log).
    pub(super) fn restart(&mut self, env: &Env) -> anyhow::Result<()> {
        let mut tries = 0;
        loop {
            tries += 1;
            match self.start(env) {
                Ok(_) => return Ok(()),
                Err(e) if tries >= RESTART_TRIES => return Err(e),
                Err(_) => std::thread::sleep(Duration::from_millis(300)),
            }
        }
    }

    pub(super) fn sample(&mut self) {
        if let Some(p) = &self.proc {
            if let Some(m) = p.rss() {
                self.peak_rss_kib = self.peak_rss_kib.max(m.rss_kib).max(m.hwm_kib);
            }
        }
    }

    /// Notices an exit the soak did not cause: a crash, unless Ctrl-C
    /// (`interrupted`) reached the process too and it exited by itself.
    pub(super) fn check_alive(&mut self, at_s: f64, interrupted: bool) {
        let Some(p) = &mut self.proc else { return };
        if let Ok(Some(status)) = p.try_wait() {
            self.exits.push(exit_record(
                self.incarnation,
                at_s,
                status,
                interrupted,
                "ended on its own during the run",
            ));
            self.proc = None;
        }
    }

    /// The fault: SIGKILL and reap.
    pub(super) fn kill(&mut self, at_s: f64) -> Result<(), String> {
        let Some(mut p) = self.proc.take() else {
            return Err(format!("{} is not running", self.name));
        };
        self.sample();
        let status = p
            .stop(libc::SIGKILL, STOP_GRACE)
            .status
            .map(|s| describe(&s))
            .unwrap_or_else(|| "unknown".into());
        let expected = status.contains("SIGKILL");
        self.exits.push(ExitRecord {
            incarnation: self.incarnation,
            at_s,
            status,
            expected,
            why: "killed by the soak (fault)".into(),
        });
        Ok(())
    }

    pub(super) fn signal(&mut self, sig: libc::c_int) -> Result<(), String> {
        match &self.proc {
            Some(p) => {
                let _ = p.signal(sig);
                self.stopped = sig == libc::SIGSTOP;
                Ok(())
            }
            None => Err(format!("{} is not running", self.name)),
        }
    }

    /// The end: SIGTERM, and its exit must be clean.
    pub(super) fn finish(&mut self, at_s: f64, interrupted: bool) {
        let Some(mut p) = self.proc.take() else {
            return;
        };
        self.sample();
        if let Ok(Some(status)) = p.try_wait() {
            self.exits.push(exit_record(
                self.incarnation,
                at_s,
                status,
                interrupted,
                "ended before the soak stopped it",
            ));
            return;
        }
        let stopped = p.stop(libc::SIGTERM, STOP_GRACE);
        let (status, in_time) = (stopped.status, stopped.in_grace);
        let text = status
            .map(|s| describe(&s))
            .unwrap_or_else(|| "unknown".into());
        let expected = in_time && status.is_some_and(|s| s.success());
        self.exits.push(ExitRecord {
            incarnation: self.incarnation,
            at_s,
            status: text,
            expected,
            why: if in_time {
                "stopped by the soak (SIGTERM)".into()
            } else {
                format!("did not stop within {}s of SIGTERM", STOP_GRACE.as_secs())
            },
        });
    }
}

/// Where things are.
pub(super) struct Env {
    pub(super) exe: PathBuf,
    pub(super) work: PathBuf,
    pub(super) started: Instant,
}

impl Env {
    pub(super) fn now_s(&self) -> f64 {
        self.started.elapsed().as_secs_f64()
    }
}
