//! The loadgen kind: `connlab load` (one process or merged shards) against
//! one pinned `connlab serve` on loopback (`[workload]` and `[placement]`);
//! its results are `loadgen.json` and a file per point.

use crate::{Builtin, Ending, Lines, Listing, Results, Sweep, SweepTraits};
use connlab_lab::run::{self as lab_run, Progress, RunError, SweepOutcome, SweepRequest};
use connlab_lab::{ExperimentKind, LoadgenDir, LoadgenExperiment};
use connlab_os::Shutdown;
use connlab_report::{ExperimentClaims, Format, ReportError};
use std::path::Path;
use std::time::Duration;

/// `kind = "loadgen"`: a `loadgen.json` and a file per point.
pub(crate) const KIND: Builtin = Builtin {
    kind: ExperimentKind::Loadgen,
    load: |text, origin| Ok(Box::new(LoadgenExperiment::from_toml(text, origin)?)),
    holds: |dir| LoadgenDir::layout(dir).info_path().exists(),
    open: |dir| Ok(Box::new(LoadgenDir::open(dir).map_err(|e| e.to_string())?)),
    results: "loadgen.json",
};

impl Sweep for LoadgenExperiment {
    fn name(&self) -> &str {
        &self.name
    }

    fn plan(&self, quick: bool) -> Vec<String> {
        LoadgenExperiment::plan(self, quick)
            .iter()
            .map(|p| p.id())
            .collect()
    }

    fn traits(&self) -> SweepTraits {
        SweepTraits {
            children: true,
            profiles: false,
            lines: Lines::Runs,
        }
    }

    fn pinned_cpus(&self) -> Vec<(&'static str, usize)> {
        [
            ("placement.server_cpu", self.placement.server_cpu),
            ("placement.writer_cpu", self.placement.writer_cpu),
            ("placement.reader_cpu", self.placement.reader_cpu),
        ]
        .into_iter()
        .filter_map(|(field, cpu)| cpu.map(|c| (field, c)))
        .collect()
    }

    fn listing(&self, quick: bool, _profile: bool, out: &Path) -> Result<Listing, RunError> {
        let plan = LoadgenExperiment::plan(self, quick);
        let total: f64 = plan
            .iter()
            .map(|p| lab_run::loadgen_estimate(self, p, quick).as_secs_f64())
            .sum();
        Ok(Listing {
            head: format!(
                "{}: {} points of {:.0} s measured each, about {total:.0} s in all (results in {})",
                self.name,
                plan.len(),
                self.duration(quick).as_secs_f64(),
                out.display()
            ),
            ids: plan.iter().map(|p| p.id()).collect(),
            estimate: Some(Duration::from_secs_f64(total)),
        })
    }

    fn run(
        &self,
        req: &SweepRequest,
        progress: &mut dyn Progress,
        shutdown: &Shutdown,
    ) -> Result<SweepOutcome, RunError> {
        lab_run::sweep_loadgen(self, req, progress, shutdown)
    }

    fn ending(&self, outcome: &SweepOutcome, took: Duration) -> Ending {
        Ending::runs(outcome, took, "points", "failed", "points failed", true)
    }
}

impl Results for LoadgenDir {
    fn name(&self) -> &str {
        &self.info.experiment.name
    }

    fn done(&self) -> String {
        format!("{} of {} points", self.points.len(), self.info.points_total)
    }

    fn render(&self, format: Format) -> Result<String, ReportError> {
        connlab_report::render_loadgen(self, format)
    }

    /// The title and progress; the loadgen page has no paper claims.
    fn claims(&self) -> ExperimentClaims {
        ExperimentClaims {
            title: self.info.experiment.title.clone(),
            progress: self.done(),
            ..ExperimentClaims::default()
        }
    }
}
