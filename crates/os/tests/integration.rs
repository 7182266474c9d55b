//! `connlab-os`'s one integration test binary: each module is one concern.
//! `Cargo.toml` sets `autotests = false`, so a new file here needs its `mod`
//! line below.

mod atomic_file;
mod netns;

#[test]
fn every_test_file_is_a_module() {
    connlab_testkit::assert_every_test_file_is_a_module(
        env!("CARGO_MANIFEST_DIR"),
        "integration.rs",
    );
}
