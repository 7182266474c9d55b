//! Load-generator experiments (`kind = "loadgen"`): `connlab load` (one
//! process, or N shards merged exactly) against one `connlab serve` on
//! loopback, each pinned where the file says, every point repeated. They
//! measure the load generator itself (how closely it keeps its send
//! schedule, how fast it sets connections up, what a connection costs in
//! memory, whether shards merge into the same result as one process) and the
//! engines' service latency under the locality paper's workload shape.
//!
//! ```text
//! DIR/experiment.toml     the experiment file as run
//! DIR/loadgen.json        LoadgenInfo: experiment, environment, plan size, whether --quick
//! DIR/points/<id>.json    one LoadgenPoint per finished point (temporary name, then rename)
//! DIR/logs/<id>/          server stats and output, each client's result and output
//! ```
//!
//! Point ids name every axis (`epoll-1000c-1of4-20000rps-1sh-rep1`, with
//! `-src<addrs>` when the file lists source addresses and `-uring` for a
//! client on io_uring), so a second run of
//! the same sweep skips the points already written.

mod experiment;
mod results;
#[cfg(test)]
mod tests;
mod values;

pub use experiment::{
    LoadgenExperiment, LoadgenParams, LoadgenPlacement, LoadgenQuick, LoadgenServer, LoadgenTag,
    LoadgenWorkload,
};
pub use results::{ClientFigures, LoadgenDir, LoadgenInfo, LoadgenPoint, ServerFigures};
pub use values::{ClientIo, LoadgenTable, Rate, Ratio, WireProtocol};

use crate::sweep_file::SweepFileError;

/// Schema tag of `loadgen.json`.
pub const LOADGEN_SWEEP_SCHEMA: &str = "connlab.loadgen.sweep/1";
/// Schema tag of a point file of a loadgen sweep.
pub const LOADGEN_POINT_SCHEMA: &str = "connlab.loadgen.point/1";

/// Why a loadgen experiment or results directory could not be read.
pub type LoadgenError = SweepFileError;

#[cfg(test)]
mod shipped {
    use super::LoadgenExperiment;
    use std::path::Path;

    #[test]
    fn the_shipped_loadgen_experiments_parse() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../experiments");
        let mut names = Vec::new();
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let text = std::fs::read_to_string(&path).unwrap_or_default();
            if path.extension().is_some_and(|e| e == "toml")
                && crate::ExperimentKind::of_text(&text, "f").ok()
                    == Some(crate::ExperimentKind::Loadgen)
            {
                let e = LoadgenExperiment::from_file(&path).unwrap_or_else(|e| panic!("{e}"));
                let (quick, full) = (e.plan(true), e.plan(false));
                assert!(!quick.is_empty() && quick.len() <= full.len());
                assert!(e.duration(true) < e.duration(false), "{}", path.display());
                assert!(e.repetitions >= 3, "{}", path.display());
                names.push(e.name);
            }
        }
        names.sort();
        assert_eq!(
            names,
            [
                "loadgen-engines",
                "loadgen-pacing",
                "loadgen-scale",
                "loadgen-shards"
            ]
        );
    }

    /// One test per shipped file, so a failure names the file.
    fn parses(file: &str) -> LoadgenExperiment {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../experiments")
            .join(file);
        LoadgenExperiment::from_file(&path).unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn pacing_parses() {
        let e = parses("loadgen-pacing.toml");
        assert_eq!(e.placement.client_cpu_list().as_deref(), Some("0,1"));
        // Its measured quantity is the schedule: no gate on it.
        assert_eq!(e.validity.schedule.0, None);
        assert_eq!(e.plan(false)[0].connections, 1000);
        let io: Vec<&str> = e.plan(true).iter().map(|p| p.io.name()).collect();
        assert_eq!(io[..2], ["epoll", "uring"]);
    }

    #[test]
    fn scale_parses() {
        let e = parses("loadgen-scale.toml");
        assert_eq!(e.workload.source_addrs.len(), 2);
        assert_eq!(e.workload.connections, [100, 19000]);
    }

    #[test]
    fn engines_parses() {
        let e = parses("loadgen-engines.toml");
        assert_eq!(e.server.engines.len(), 5);
        assert_eq!(e.workload.connections, [400, 2000, 10000]);
    }

    #[test]
    fn shards_parses() {
        let e = parses("loadgen-shards.toml");
        assert_eq!(e.workload.shards, [1, 2]);
    }
}
