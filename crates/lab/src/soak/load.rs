//! The load children of the soak: `connlab load` runs per traffic class and
//! phase, started, and their results collected into segments.

use super::procs::describe;
use super::report::SegmentReport;
use super::{Soak, HANG_SLACK, WORKERS};
use anyhow::Context;
use connlab_loadgen::LoadResult;
use connlab_measure::LatencyHistogram;
use connlab_os::child::Child;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Instant;

/// A running load child ([`Child`]) and what its segment is.
pub(super) struct LoadChild {
    pub(super) class: usize,
    pub(super) phase: &'static str,
    pub(super) index: usize,
    pub(super) faults: Vec<String>,
    pub(super) started_s: f64,
    pub(super) deadline: Instant,
    pub(super) json: PathBuf,
    pub(super) child: Child,
}

impl Soak<'_> {
    pub(super) fn spawn_load(
        &mut self,
        class: usize,
        phase: &'static str,
        index: usize,
        faults: Vec<String>,
    ) -> anyhow::Result<()> {
        let c = &self.classes[class];
        let json = self
            .env
            .work
            .join(format!("load-{}-{phase}-{index:04}.json", c.name));
        let seg = self.plan.segment;
        let mut cmd = Command::new(&self.env.exe);
        cmd.args(["load", "--target"])
            .arg(c.target.to_string())
            .args(["--protocol", "http", "--connection-per-request", "-c"])
            .arg(WORKERS.to_string())
            .arg("--rate")
            .arg(self.plan.rate.to_string())
            .arg("-d")
            .arg(format!("{}ms", seg.as_millis()))
            .args(["--warmup", "0s", "--drain-timeout", "5s"])
            .args(["--response-size", c.response_size])
            .args(["--max-error-ratio", "1", "--seed"])
            .arg((index + 1).to_string())
            .arg("--json")
            .arg(&json)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(self.load_logs[class].try_clone().context("load log")?);
        let child = Child::spawn(&mut cmd).context("starting connlab load")?;
        self.loads.push(LoadChild {
            class,
            phase,
            index,
            faults,
            started_s: self.env.now_s(),
            deadline: Instant::now() + seg + HANG_SLACK,
            json,
            child,
        });
        Ok(())
    }

    pub(super) fn collect(
        &mut self,
        l: LoadChild,
        status: Option<std::process::ExitStatus>,
        hung: bool,
    ) {
        let interrupted = self.shutdown.requested();
        let exit = status
            .map(|s| describe(&s))
            .unwrap_or_else(|| "unknown".into());
        let clean =
            !hung && status.is_some_and(|s| s.success() || (interrupted && s.code() == Some(130)));
        let parsed: Option<LoadResult> = std::fs::read_to_string(&l.json)
            .ok()
            .and_then(|t| serde_json::from_str(&t).ok());
        let mut seg = SegmentReport {
            class: self.classes[l.class].name.to_string(),
            phase: l.phase.to_string(),
            index: l.index,
            faults: l.faults,
            started_s: l.started_s,
            ended_s: self.env.now_s(),
            exit,
            clean_exit: clean,
            hung,
            result_read: parsed.is_some(),
            sent: 0,
            completed: 0,
            errored: 0,
            errors: BTreeMap::new(),
            p99_us: None,
        };
        if let Some(r) = parsed {
            let q = &r.requests;
            seg.sent = q.total_sent();
            seg.completed = q.total_completed();
            for (k, v) in q.errors.iter().chain(q.warmup_errors.iter()) {
                *seg.errors.entry(k.clone()).or_default() += v;
            }
            seg.errored = seg.errors.values().sum();
            if r.service_latency_us.count > 0 {
                seg.p99_us = Some(r.service_latency_us.p99);
            }
            if let Ok(h) = LatencyHistogram::from_base64(&r.histograms.service_latency) {
                let mut buckets = vec![if l.phase == "baseline" {
                    "baseline"
                } else {
                    "fault_all"
                }];
                if l.phase == "fault" && seg.faults.is_empty() {
                    buckets.push("fault_healthy");
                }
                for b in buckets {
                    self.histograms.entry((l.class, b)).or_default().merge(&h);
                }
            }
        }
        self.segments.push(seg);
    }
}
