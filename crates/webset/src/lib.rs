//! `connlab-webset`: the web workload of the load-balancing paper. A file set
//! is a list of files (path, size, popularity weight) drawn from a model and
//! written as real files plus `manifest.csv`, so nginx (or any web server)
//! serves them and `connlab load --manifest` requests them.
//!
//! Models ([`Model`]):
//! - `paper`: the paper's set, 861 files from 35 B to 729 KB with a mean of
//!   9.6 KB (KB = 1,000 bytes), fitted as described in [`paper_sizes`];
//! - `specweb96`: SPECweb96's four size classes and class mix;
//! - `surge`: SURGE's lognormal body, Pareto tail and Zipf popularity.
//!
//! Everything is seeded and reproducible: the same model, seed and options
//! give the same files, byte for byte.

mod manifest;
mod models;
mod popularity;

pub use manifest::{Manifest, ManifestEntry, ManifestError, SizeStats};
pub use models::{
    generate, paper_sizes, Model, ModelOptions, PAPER_COUNT, PAPER_MAX, PAPER_MEAN, PAPER_MIN,
};
pub use popularity::{Popularity, RequestPicker};
