//! The single-IP kind: the cluster front end's RTT, bandwidth and
//! contention experiments (`[rtt]`, `[bandwidth]`, `[contention]`) in
//! network namespaces behind the user-space link emulator.

use crate::{
    duration_words, Assessment, Builtin, Ending, Here, Lines, Listing, Results, Sweep, SweepTraits,
};
use connlab_lab::run::{self as lab_run, Progress, RunError, SweepOutcome, SweepRequest};
use connlab_lab::{ExperimentKind, SingleIpExperiment, SingleIpSweep};
use connlab_os::Shutdown;
use connlab_report::{ExperimentClaims, Format, ReportError};
use std::path::Path;
use std::time::Duration;

/// Seconds a single-IP point takes, for the dry run's estimate: the full
/// singleip-saps matrix (102 points of every experiment) took 341 s on the
/// 2-vCPU machine of the 2026-11-25 reference run; this rounds it up.
const POINT_SECONDS: f64 = 3.5;

/// `kind = "singleip"`: a `sweep.json` whose experiment file says so.
pub(crate) const KIND: Builtin = Builtin {
    kind: ExperimentKind::Singleip,
    load: |text, origin| Ok(Box::new(SingleIpExperiment::from_toml(text, origin)?)),
    holds: SingleIpSweep::is_singleip_dir,
    open: |dir| {
        Ok(Box::new(
            SingleIpSweep::open(dir).map_err(|e| e.to_string())?,
        ))
    },
    results: "sweep.json",
};

impl Sweep for SingleIpExperiment {
    fn name(&self) -> &str {
        &self.name
    }

    fn plan(&self, quick: bool) -> Vec<String> {
        SingleIpExperiment::plan(self, quick)
            .iter()
            .map(|p| p.id())
            .collect()
    }

    fn traits(&self) -> SweepTraits {
        SweepTraits {
            children: false,
            profiles: false,
            lines: Lines::Results,
        }
    }

    fn pinned_cpus(&self) -> Vec<(&'static str, usize)> {
        vec![
            ("placement.client_cpu", self.placement.client_cpu as usize),
            ("placement.front_cpu", self.placement.front_cpu as usize),
        ]
    }

    fn listing(&self, quick: bool, _profile: bool, out: &Path) -> Result<Listing, RunError> {
        let ids = Sweep::plan(self, quick);
        let total = POINT_SECONDS * ids.len() as f64;
        Ok(Listing {
            head: format!(
                "{}: {} points, about {} (results in {})",
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
        lab_run::sweep_singleip(self, req, progress, shutdown)
    }

    fn ending(&self, o: &SweepOutcome, _took: Duration) -> Ending {
        if o.kept == o.total && o.failed.is_empty() && !o.interrupted {
            return Ending::nothing_left(o);
        }
        Ending::points(o, None)
    }

    fn assess(&self, here: &Here) -> Assessment {
        let mut a = Assessment::default();
        if !here.root {
            a.blockers
                .push("needs root for its network namespaces".to_string());
        }
        a
    }
}

impl Results for SingleIpSweep {
    fn name(&self) -> &str {
        &self.experiment.name
    }

    fn done(&self) -> String {
        format!("{} of {} points", self.points.len(), self.info.points_total)
    }

    fn render(&self, format: Format) -> Result<String, ReportError> {
        connlab_report::render_singleip(self, format)
    }

    fn claims(&self) -> ExperimentClaims {
        connlab_report::singleip_claims(self)
    }
}
