//! JSON results: reading them, their fields, and their schemas.

use std::path::{Path, PathBuf};

use serde_json::Value;

/// The workspace's root folder.
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Reads and parses a JSON file, panicking with its path.
pub fn read_json(path: &Path) -> Value {
    let text =
        std::fs::read_to_string(path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("parsing {}: {e}", path.display()))
}

/// The unsigned integer at JSON pointer `pointer` (e.g. `/requests/sent`),
/// panicking if it is missing or of another type.
pub fn json_u64(v: &Value, pointer: &str) -> u64 {
    v.pointer(pointer)
        .and_then(Value::as_u64)
        .unwrap_or_else(|| panic!("{pointer} missing or not an integer in {v}"))
}

/// Asserts that `doc` is valid under the JSON schema in `schema` (a path
/// relative to the workspace root, e.g.
/// `crates/loadgen/schema/load-result.schema.json`), listing every error.
pub fn assert_matches_schema(doc: &Value, schema: &str) {
    let schema_doc = read_json(&workspace_root().join(schema));
    let validator = jsonschema::validator_for(&schema_doc)
        .unwrap_or_else(|e| panic!("{schema} does not compile: {e}"));
    let errors: Vec<String> = validator
        .iter_errors(doc)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect();
    assert!(
        errors.is_empty(),
        "the document does not match {schema}: {errors:#?}"
    );
}
