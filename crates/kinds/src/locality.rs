//! The locality kind (`connlab serve` on network-namespace hosts under
//! sharded `connlab load`: the locality and polling papers) and the web
//! kind (web backends behind a gateway: the load-balancing paper). Both read
//! an [`Experiment`] and leave a [`SweepDir`]; they differ in their tag and
//! in the `[web]` section.

use crate::{
    duration_words, other_kind, Assessment, Builtin, Ending, Here, Lines, Listing, Results, Sweep,
    SweepTraits,
};
use connlab_lab::run::{self as lab_run, Progress, RunError, SweepOutcome, SweepRequest};
use connlab_lab::{Compare, Experiment, ExperimentError, ExperimentKind, SweepDir};
use connlab_os::Shutdown;
use connlab_report::{ExperimentClaims, Format, ReportError, Verdict};
use std::path::Path;
use std::time::Duration;

/// `kind = "locality"`: a `sweep.json` whose experiment file is of no other
/// kind (an unreadable one is the locality reader's to report).
pub(crate) const LOCALITY: Builtin = Builtin {
    kind: ExperimentKind::Locality,
    load,
    holds: |dir| {
        SweepDir::layout(dir).info_path().exists() && !other_kind(dir, ExperimentKind::Locality)
    },
    open,
    results: "sweep.json",
};

/// `kind = "web"`: a `sweep.json` whose experiment file says so.
pub(crate) const WEB: Builtin = Builtin {
    kind: ExperimentKind::Web,
    load,
    holds: |dir| {
        SweepDir::layout(dir).info_path().exists()
            && ExperimentKind::of_dir(dir).is_ok_and(|k| k == ExperimentKind::Web)
    },
    open,
    results: "sweep.json",
};

/// Both kinds read an [`Experiment`].
fn load(text: &str, origin: &str) -> Result<Box<dyn Sweep>, ExperimentError> {
    Ok(Box::new(Experiment::from_toml(text, origin)?))
}

/// Both kinds leave a [`SweepDir`].
fn open(dir: &Path) -> Result<Box<dyn Results>, String> {
    Ok(Box::new(SweepDir::open(dir).map_err(|e| e.to_string())?))
}

impl Sweep for Experiment {
    fn name(&self) -> &str {
        &self.name
    }

    fn plan(&self, quick: bool) -> Vec<String> {
        Experiment::plan(self, quick)
            .iter()
            .map(connlab_lab::PointParams::id)
            .collect()
    }

    fn traits(&self) -> SweepTraits {
        SweepTraits {
            children: true,
            profiles: false,
            lines: Lines::Points,
        }
    }

    fn pinned_cpus(&self) -> Vec<(&'static str, usize)> {
        let mut v = lab_run::listed_cpus("server.cpu", self.server.cpu.as_deref());
        v.extend(lab_run::listed_cpus(
            "client.cpu",
            self.client.cpu.as_deref(),
        ));
        v
    }

    fn check(&self, quick: bool) -> Result<(), RunError> {
        lab_run::check_locality(self, quick)
    }

    fn listing(&self, quick: bool, _profile: bool, out: &Path) -> Result<Listing, RunError> {
        let plan = Experiment::plan(self, quick);
        let total: Duration = plan.iter().map(|p| lab_run::estimate(self, p)).sum();
        Ok(Listing {
            head: format!(
                "{}: {} points, about {} (results in {})",
                self.name,
                plan.len(),
                duration_words(total),
                out.display()
            ),
            ids: plan.iter().map(connlab_lab::PointParams::id).collect(),
            estimate: Some(total),
        })
    }

    fn run(
        &self,
        req: &SweepRequest,
        progress: &mut dyn Progress,
        shutdown: &Shutdown,
    ) -> Result<SweepOutcome, RunError> {
        lab_run::sweep_locality(self, req, progress, shutdown)
    }

    fn rounds(&self, quick: bool) -> Option<u32> {
        Some(self.repetitions(quick))
    }

    fn undecided(&self, out: &Path) -> Result<Vec<String>, String> {
        let sweep = SweepDir::open(out).map_err(|e| e.to_string())?;
        let table = connlab_report::PaperTable::of(&sweep);
        Ok(connlab_report::check_claims(&sweep, &table)
            .iter()
            .filter(|c| matches!(c.verdict, Verdict::CannotJudge(_)))
            .map(|c| format!("{}: {}", c.source, short(&c.text, 60)))
            .collect())
    }

    fn ending(&self, outcome: &SweepOutcome, _took: Duration) -> Ending {
        Ending::points(outcome, Some(|dir, id| SweepDir::layout(dir).log_dir(id)))
    }

    fn assess(&self, here: &Here) -> Assessment {
        let mut a = Assessment::default();
        if !here.root {
            a.blockers
                .push("needs root for its network namespaces".to_string());
        }
        if self.web.is_some() && !here.has("nginx") {
            a.blockers
                .push("needs nginx (apt-get install nginx)".into());
        }
        if self.server.engines.iter().any(|x| x.starts_with("haproxy")) && !here.has("haproxy") {
            a.blockers
                .push("needs HAProxy (apt-get install haproxy)".into());
        }
        let pins = Sweep::pinned_cpus(self);
        if let Err(err) = lab_run::check_pinned_cpus(&pins).and_then(|()| Sweep::check(self, false))
        {
            a.blockers.push(err.to_string());
        }
        let max_conns = Experiment::plan(self, false)
            .iter()
            .map(|p| p.connections)
            .max()
            .unwrap_or(0);
        if max_conns + 64 > here.nofile_hard {
            a.blockers.push(format!(
                "{max_conns} connections in one server process, over the open-files limit {}",
                here.nofile_hard
            ));
        }
        let cpus = here.environment.cpu_count;
        if let Some(c) = pins.iter().map(|&(_, c)| c).max().filter(|&c| c >= cpus) {
            a.blockers
                .push(format!("it pins CPU {c} and this machine has {cpus}"));
        }
        let shards = self.topology.client_hosts as usize;
        if self.web.is_none() && cpus < shards + 2 {
            a.doubts.push(format!(
                "its {shards} client shards share {} CPU(s) with the kernel's network work ({cpus} CPUs here; {} would give each its own)",
                cpus.saturating_sub(1).max(1),
                shards + 2
            ));
        }
        if let (Some(f), Some((m, text))) = (here.noise, tightest_margin(self)) {
            if f >= m {
                a.doubts.push(format!(
                    "its tightest claim leaves ±{:.0} % before the verdict turns, and this machine's A/A noise is ±{:.0} % (\"{}\")",
                    (m - 1.0) * 100.0,
                    (f - 1.0) * 100.0,
                    short(&text, 70)
                ));
            }
        }
        if here.schedule_fails {
            a.doubts.push(
                "most calibration runs failed their gates: points will need their retries and may stay invalid"
                    .into(),
            );
        }
        a
    }
}

impl Results for SweepDir {
    fn name(&self) -> &str {
        &self.info.name
    }

    fn done(&self) -> String {
        format!("{} of {} points", self.points.len(), self.info.points_total)
    }

    fn render(&self, format: Format) -> Result<String, ReportError> {
        connlab_report::render(self, format)
    }

    fn claims(&self) -> ExperimentClaims {
        connlab_report::sweep_claims(self)
    }
}

/// The first `n` characters of a claim.
fn short(text: &str, n: usize) -> String {
    let t: String = text.chars().take(n).collect();
    if t.len() < text.len() {
        format!("{t}...")
    } else {
        t
    }
}

/// The tightest margin of an experiment's claims, as a factor: how far
/// (either way, relative) its results may move before a verdict turns. Two
/// bounds leave the square root of their quotient; one bound and a stated
/// paper value leave their quotient.
fn tightest_margin(exp: &Experiment) -> Option<(f64, String)> {
    let paper = exp.paper.as_ref()?;
    paper
        .claims
        .iter()
        .filter(|c| c.unmeasurable.is_none() && c.compare == Compare::Ratio)
        .filter_map(|c| {
            let m = match (c.expect_min, c.expect_max, c.paper_stated()) {
                (Some(lo), Some(hi), _) if lo > 0.0 && hi > lo => (hi / lo).sqrt(),
                (Some(lo), None, Some(p)) if lo > 0.0 && p > lo => p / lo,
                (None, Some(hi), Some(p)) if p > 0.0 && hi > p => hi / p,
                _ => return None,
            };
            Some((m, c.text.clone()))
        })
        .min_by(|a, b| a.0.total_cmp(&b.0))
}
