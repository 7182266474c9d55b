//! The pipeline kind: the layer-parallel protocol pipeline, run in this
//! process (`[pipeline]`); its results are one `pipeline.json`.

use crate::{duration_words, Builtin, Ending, Lines, Listing, Results, Sweep, SweepTraits};
use connlab_lab::run::{self as lab_run, Progress, RunError, SweepOutcome, SweepRequest};
use connlab_lab::{ExperimentKind, PipelineExperiment, PipelineSweep};
use connlab_os::Shutdown;
use connlab_report::{ExperimentClaims, Format, ReportError};
use std::path::Path;
use std::time::Duration;

/// Seconds a pipeline run takes, for the dry run's estimate: the full
/// matrix of pipeline-tables (117 runs) took 15 s on the 2-vCPU machine
/// of the 2026-11-25 reference run; this rounds it up.
const RUN_SECONDS: f64 = 0.2;

/// `kind = "pipeline"`: its runs are one `pipeline.json`.
pub(crate) const KIND: Builtin = Builtin {
    kind: ExperimentKind::Pipeline,
    load: |text, origin| Ok(Box::new(PipelineExperiment::from_toml(text, origin)?)),
    holds: |dir| dir.join("pipeline.json").exists(),
    open: |dir| {
        Ok(Box::new(
            PipelineSweep::open(dir).map_err(|e| e.to_string())?,
        ))
    },
    results: "pipeline.json",
};

impl Sweep for PipelineExperiment {
    fn name(&self) -> &str {
        &self.name
    }

    fn plan(&self, quick: bool) -> Vec<String> {
        PipelineExperiment::plan(self, quick)
            .iter()
            .map(|p| p.id())
            .collect()
    }

    fn traits(&self) -> SweepTraits {
        SweepTraits {
            children: false,
            profiles: false,
            lines: Lines::Runs,
        }
    }

    fn check(&self, quick: bool) -> Result<(), RunError> {
        lab_run::check_pipeline(self, quick)
    }

    fn listing(&self, quick: bool, _profile: bool, out: &Path) -> Result<Listing, RunError> {
        lab_run::check_pipeline(self, quick)?;
        let ids = Sweep::plan(self, quick);
        let total = RUN_SECONDS * ids.len() as f64;
        Ok(Listing {
            head: format!(
                "{}: {} runs of the layer-parallel pipeline, about {} (results in {})",
                self.name,
                ids.len(),
                duration_words(Duration::from_secs_f64(total)),
                out.display()
            ),
            ids,
            estimate: Some(Duration::from_secs_f64(total)),
        })
    }

    fn run(
        &self,
        req: &SweepRequest,
        progress: &mut dyn Progress,
        shutdown: &Shutdown,
    ) -> Result<SweepOutcome, RunError> {
        lab_run::sweep_pipeline(self, req, progress, shutdown)
    }

    fn ending(&self, outcome: &SweepOutcome, took: Duration) -> Ending {
        Ending::runs(
            outcome,
            took,
            "runs",
            "failed or unverified",
            "runs failed or unverified",
            false,
        )
    }
}

impl Results for PipelineSweep {
    fn name(&self) -> &str {
        &self.experiment.name
    }

    fn done(&self) -> String {
        format!("{} of {} runs", self.runs.len(), self.runs_total)
    }

    fn render(&self, format: Format) -> Result<String, ReportError> {
        connlab_report::render_pipeline(self, format)
    }

    fn claims(&self) -> ExperimentClaims {
        connlab_report::pipeline_claims(self)
    }
}
