//! The peers kind: connlab against peer programs (wrk, nginx, HAProxy) on
//! loopback (`[workload]` and `[[contender]]`); its results are `peers.json`
//! and a file per point.

use crate::{Ending, Kind, Lines, Listing, ReportOptions, Results, Sweep, SweepTraits};
use connlab_lab::run::{self as lab_run, Progress, RunError, SweepOutcome, SweepRequest};
use connlab_lab::{ExperimentError, ExperimentKind, PeersDir, PeersExperiment};
use connlab_os::Shutdown;
use connlab_report::{ExperimentClaims, Format, ReportError};
use std::path::Path;
use std::time::Duration;

/// `kind = "peers"`.
pub(crate) struct Peers;

impl Kind for Peers {
    fn name(&self) -> &'static str {
        ExperimentKind::Peers.name()
    }

    fn fits(&self, file: &toml::Table) -> bool {
        connlab_lab::shape_of(file) == Some(ExperimentKind::Peers)
    }

    fn load(&self, text: &str, origin: &str) -> Result<Box<dyn Sweep>, ExperimentError> {
        Ok(Box::new(PeersExperiment::from_toml(text, origin)?))
    }

    fn holds(&self, dir: &Path) -> bool {
        PeersDir::layout(dir).info_path().exists()
    }

    fn results_file(&self) -> &'static str {
        "peers.json"
    }

    /// `--baseline` divides by other contenders than the file's baseline.
    fn open(&self, dir: &Path, options: &ReportOptions) -> Result<Box<dyn Results>, String> {
        let mut peers = PeersDir::open(dir).map_err(|e| e.to_string())?;
        if !options.baseline.is_empty() {
            let exp = &peers.info.experiment;
            if let Some(unknown) = options
                .baseline
                .iter()
                .find(|b| exp.contender_named(b).is_none())
            {
                let names: Vec<&str> = exp.contender.iter().map(|c| c.name.as_str()).collect();
                return Err(format!(
                    "--baseline {unknown:?}: no such contender in {} (contenders: {})",
                    dir.display(),
                    names.join(", ")
                ));
            }
            // The A/A control was the file's first baseline: it stays the
            // control (the plan's ids, and so the points not measured yet).
            let control = exp.control_contender().unwrap_or("none").to_string();
            peers.info.experiment.validity.control = Some(control);
            peers.info.experiment.baseline = connlab_lab::Baseline::Many(options.baseline.clone());
        }
        Ok(Box::new(peers))
    }
}

impl Sweep for PeersExperiment {
    fn name(&self) -> &str {
        &self.name
    }

    fn plan(&self, quick: bool) -> Vec<String> {
        PeersExperiment::plan(self, quick)
            .iter()
            .map(connlab_lab::PeerParams::id)
            .collect()
    }

    fn traits(&self) -> SweepTraits {
        SweepTraits {
            children: true,
            profiles: true,
            lines: Lines::Runs,
        }
    }

    fn pinned_cpus(&self) -> Vec<(&'static str, usize)> {
        let pl = &self.placement;
        let lists = [
            (
                "placement.server_cpus",
                pl.server_cpus.clone().unwrap_or_default(),
            ),
            (
                "placement.client_cpus",
                pl.client_cpus.clone().unwrap_or_default(),
            ),
        ];
        [
            ("placement.server_cpu", pl.server_cpu),
            ("placement.gateway_cpu", pl.gateway_cpu),
            ("placement.client_cpu", pl.client_cpu),
        ]
        .into_iter()
        .filter_map(|(field, cpu)| cpu.map(|c| (field, c)))
        .chain(
            lists
                .into_iter()
                .flat_map(|(field, list)| list.into_iter().map(move |c| (field, c))),
        )
        .collect()
    }

    /// The points, then the profile runs when the file or `--profile` asks
    /// for them.
    fn listing(&self, quick: bool, profile: bool, out: &Path) -> Result<Listing, RunError> {
        let mut ids = Sweep::plan(self, quick);
        let duration = self.duration(quick).as_secs_f64();
        let points = ids.len();
        let profiles: Vec<String> = if self.profile || profile {
            self.profile_plan(quick)
                .iter()
                .map(|p| format!("profile {}", p.profile_id()))
                .collect()
        } else {
            Vec::new()
        };
        let and_profiles = match profiles.len() {
            0 => String::new(),
            n => format!(" and {n} unmeasured profile runs"),
        };
        let runs = points + profiles.len();
        ids.extend(profiles);
        let total = runs as f64 * (duration + 1.5);
        Ok(Listing {
            head: format!(
                "{}: {points} points{and_profiles} of {duration:.0} s each, about {total:.0} s in all (results in {})",
                self.name,
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
        lab_run::sweep_peers(self, req, progress, shutdown)
    }

    fn ending(&self, outcome: &SweepOutcome, took: Duration) -> Ending {
        Ending::runs(
            outcome,
            took,
            "points",
            "failed or with errors",
            "points failed or had errors",
            false,
        )
    }
}

impl Results for PeersDir {
    fn name(&self) -> &str {
        &self.info.experiment.name
    }

    fn done(&self) -> String {
        format!("{} of {} points", self.points.len(), self.info.points_total)
    }

    fn render(&self, format: Format) -> Result<String, ReportError> {
        connlab_report::render_peers(self, format)
    }

    /// The title and progress; the peers page has no paper claims.
    fn claims(&self) -> ExperimentClaims {
        ExperimentClaims {
            title: self.info.experiment.title.clone(),
            progress: self.done(),
            ..ExperimentClaims::default()
        }
    }
}
