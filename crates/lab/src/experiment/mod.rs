//! Experiment files: what to measure, on which topology, and which paper table
//! the result reproduces. Parsed from TOML with every error naming the file and
//! the field; expanded by [`Experiment::plan`] into the points of a sweep.

mod file;
mod paper;
mod plan;
#[cfg(test)]
mod tests;

pub use file::{
    web_config, ClientSection, Compare, Experiment, ExperimentError, Matrix, MatrixOverride,
    Metric, Over, RateValue, RatioValue, ServerSection, SizeValue, TopologySection, Vary,
    WebSection, ENGINES, WEB_CONFIGS,
};
pub use paper::{
    ClaimShape, DerivedPick, Paper, PaperCell, PaperClaim, PaperDerived, PaperProjection,
};
pub use plan::{parse_link_rate, rate_label, PointParams};

#[cfg(test)]
mod shipped {
    use super::Experiment;
    use std::path::Path;

    #[test]
    fn the_shipped_experiments_parse() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../experiments");
        let mut n = 0;
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "toml") {
                let text = std::fs::read_to_string(&path).unwrap();
                match crate::ExperimentKind::of_text(&text, "x")
                    .ok()
                    .map(|k| k.name())
                {
                    Some("suite") => {
                        crate::Suite::from_file(&path).unwrap_or_else(|e| panic!("{e}"));
                        n += 1;
                        continue;
                    }
                    Some("singleip") => {
                        crate::SingleIpExperiment::from_file(&path)
                            .unwrap_or_else(|e| panic!("{e}"));
                        n += 1;
                        continue;
                    }
                    Some("peers") => {
                        crate::PeersExperiment::from_file(&path).unwrap_or_else(|e| panic!("{e}"));
                        n += 1;
                        continue;
                    }
                    Some("loadgen") => {
                        crate::LoadgenExperiment::from_file(&path)
                            .unwrap_or_else(|e| panic!("{e}"));
                        n += 1;
                        continue;
                    }
                    _ => {}
                }
                if crate::ExperimentKind::of_text(&text, "x").ok()
                    == Some(crate::ExperimentKind::Pipeline)
                {
                    let p = crate::PipelineExperiment::from_file(&path)
                        .unwrap_or_else(|e| panic!("{e}"));
                    let (quick, full) = (p.plan(true), p.plan(false));
                    assert!(!quick.is_empty() && quick.len() < full.len());
                    n += 1;
                    continue;
                }
                let e = Experiment::from_file(&path).unwrap_or_else(|e| panic!("{e}"));
                assert!(e.topology.client_hosts >= 2, "{}", path.display());
                // --quick runs fewer points or shorter ones.
                let (quick, full) = (e.plan(true), e.plan(false));
                let seconds = |plan: &[super::PointParams]| -> f64 {
                    plan.iter().map(|p| p.duration_s + p.warmup_s).sum()
                };
                assert!(
                    !quick.is_empty()
                        && quick.len() <= full.len()
                        && seconds(&quick) < seconds(&full),
                    "{}",
                    path.display()
                );
                n += 1;
            }
        }
        assert!(n >= 3);
    }
}
