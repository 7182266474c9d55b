//! Experiment files: arbitrary text through the lab's parser for every kind
//! (sweep, pipeline, suite, single-IP, peers, loadgen), whatever its `kind`
//! says, so that each parser sees the others' files too.
//!
//! Checks: no panic; an error names the origin; a parsed file answers the
//! cheap questions a run asks first (id, hosts, link rate).

#![no_main]

use connlab_kinds::Registry;
use connlab_lab::{
    Experiment, ExperimentKind, LoadgenExperiment, PeersExperiment, PipelineExperiment,
    SingleIpExperiment, Suite,
};
use libfuzzer_sys::fuzz_target;

const ORIGIN: &str = "fuzz.toml";

fn names_origin(error: impl std::fmt::Display) {
    let text = error.to_string();
    assert!(
        text.contains(ORIGIN),
        "error does not name the file: {text}"
    );
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    // The dispatch every command does first: by `kind`, then the whole file
    // through the registry of kinds.
    if let Err(error) = ExperimentKind::of_text(text, ORIGIN) {
        names_origin(error);
    }
    match Registry::builtin().load(text, ORIGIN) {
        Ok(exp) => {
            let _ = exp.name();
        }
        Err(error) => names_origin(error),
    }
    match Experiment::from_toml(text, ORIGIN) {
        Ok(e) => {
            let _ = (e.reproduces(), e.backend_hosts(), e.client_hosts());
            let _ = (e.link_rate_bps(), e.start_lead(1000));
        }
        Err(error) => names_origin(error),
    }
    if let Err(error) = PipelineExperiment::from_toml(text, ORIGIN) {
        names_origin(error);
    }
    if let Err(error) = Suite::from_toml(text, ORIGIN) {
        names_origin(error);
    }
    if let Err(error) = SingleIpExperiment::from_toml(text, ORIGIN) {
        names_origin(error);
    }
    if let Err(error) = PeersExperiment::from_toml(text, ORIGIN) {
        names_origin(error);
    }
    if let Err(error) = LoadgenExperiment::from_toml(text, ORIGIN) {
        names_origin(error);
    }
});
