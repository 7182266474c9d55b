//! Peer comparisons (`kind = "peers"`): connlab's processes against
//! established programs doing the same job (nginx, HAProxy, wrk), measured in
//! one sweep, alternating within every repetition, and judged per CPU second
//! of the side being compared.
//!
//! An experiment has three roles: the **server** answering HTTP, an optional
//! **gateway** in front of it, and the **client** driving closed-loop load.
//! Every `[[contender]]` fills one role (the role follows from its `kind`);
//! the other roles come from the experiment's fixed `[server]`, `[gateway]` and
//! `[client]` tables. `measure` names the role whose CPU time divides the
//! completed requests.
//!
//! ```text
//! DIR/experiment.toml     the experiment file as run
//! DIR/peers.json          PeersInfo: environment, plan size, whether --quick
//! DIR/points/<id>.json    one PeerPoint per finished point (temporary name, then rename)
//! DIR/logs/<id>/          configuration files and output of that point's processes
//! DIR/profiles/<c>-<n>B.perf.data, .report.txt
//!                         with `profile = true`: perf profiles of the measured role,
//!                         one unmeasured run per contender and body size
//! ```
//!
//! Point ids are `<contender>-<body>B-rep<k>`, so a second run of the same
//! sweep skips the points already written.

mod experiment;
mod results;
#[cfg(test)]
mod tests;

pub use experiment::{
    Baseline, Contender, PeerParams, PeersExperiment, PeersQuick, PeersTag, Placement, PointSetup,
    Process, ProcessKind, Role, Scaling, Workload,
};
pub use results::{LatencyRun, PeerPoint, PeersDir, PeersInfo, RoleCpu};

use crate::sweep_file::SweepFileError;

pub use crate::sweep_file::{Bytes, Span};

/// Schema tag of `peers.json`.
pub const PEERS_SWEEP_SCHEMA: &str = "connlab.peers.sweep/1";
/// Schema tag of a point file of a peers sweep.
pub const PEER_POINT_SCHEMA: &str = "connlab.peers.point/1";

/// Why a peers experiment or results directory could not be read.
pub type PeersError = SweepFileError;

#[cfg(test)]
mod shipped {
    use super::PeersExperiment;
    use std::path::Path;

    #[test]
    fn the_shipped_peers_experiments_parse() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../experiments");
        let mut n = 0;
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let text = std::fs::read_to_string(&path).unwrap_or_default();
            if path.extension().is_some_and(|e| e == "toml")
                && crate::ExperimentKind::of_text(&text, "x")
                    .is_ok_and(|k| k == crate::ExperimentKind::Peers)
            {
                let e = PeersExperiment::from_file(&path).unwrap_or_else(|e| panic!("{e}"));
                let (quick, full) = (e.plan(true), e.plan(false));
                assert!(!quick.is_empty() && quick.len() <= full.len());
                assert!(e.duration(true) < e.duration(false), "{}", path.display());
                assert!(!e.baselines_at(full[0].body_bytes).is_empty());
                n += 1;
            }
        }
        assert!(n >= 3);
    }

    #[test]
    fn loadgen_vs_wrk_runs_connlab_load_on_both_io_paths() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../experiments/peers-loadgen-vs-wrk.toml");
        let e = PeersExperiment::from_file(&path).unwrap_or_else(|e| panic!("{e}"));
        let io: Vec<(&str, Option<&str>)> = e
            .contender
            .iter()
            .map(|c| (c.name.as_str(), c.io.map(|i| i.name())))
            .collect();
        assert_eq!(
            io,
            [
                ("wrk", None),
                ("connlab-load", None),
                ("connlab-load-uring", Some("uring"))
            ]
        );
    }
}
