//! The `connlab` crate's one integration test binary (one link instead of
//! one per file, as ripgrep lays its tests out): each module is one command
//! or concern, driven through the real binary. `Cargo.toml` sets
//! `autotests = false`, so a new file here needs its `mod` line below.

mod cap_cli;
mod crate_graph;
mod doc_paths;
mod doctor_cli;
mod gateway_cli;
mod linkem_cli;
mod load_cli;
mod load_outcomes;
mod loadgen_cli;
mod peers_cli;
mod pipeline_cli;
mod reproduce_cli;
mod run_cli;
mod serve_cli;
mod serve_engines;
mod singleip_cli;
mod singleip_sweep;
mod soak_cli;
mod sweep_cli;
mod webset_cli;

#[test]
fn every_test_file_is_a_module() {
    connlab_testkit::assert_every_test_file_is_a_module(
        env!("CARGO_MANIFEST_DIR"),
        "integration.rs",
    );
}
