//! `connlab merge` inputs: a sequence of JSON load results (as in the shard
//! files `connlab load --shard i/N --json` writes) parsed as `connlab merge`
//! parses them, then merged.
//!
//! Checks: no panic; a merged result has the schema of a single run and
//! encodes back to JSON.

#![no_main]

use connlab_loadgen::{merge, LoadResult};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut parts = Vec::new();
    for (i, result) in serde_json::Deserializer::from_slice(data)
        .into_iter::<LoadResult>()
        .enumerate()
    {
        match result {
            Ok(result) => parts.push((format!("shard-{i}.json"), result)),
            Err(_) => break,
        }
    }
    if let Ok(merged) = merge(&parts) {
        let text = serde_json::to_string(&merged).expect("a merged result encodes");
        assert!(serde_json::from_str::<LoadResult>(&text).is_ok());
    }
});
