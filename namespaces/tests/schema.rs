#![allow(clippy::expect_used, clippy::unwrap_used)]

//! `namespaces/namespace.schema.json` is the generated schema, current, and it agrees with the
//! parser: it accepts the shipped examples (both spellings) and rejects what the parser rejects.

use std::path::Path;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn the_committed_schema_is_current() {
    let path = root().join("namespace.schema.json");
    let generated = serde_json::to_string_pretty(&wal_namespaces::json_schema()).unwrap() + "\n";
    if std::env::var_os("UPDATE_SCHEMA").is_some() {
        std::fs::write(&path, &generated).unwrap();
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == generated,
        "{} is stale; regenerate it with: UPDATE_SCHEMA=1 cargo test -p wal-namespaces --test integration schema::",
        path.display()
    );
}

#[test]
fn the_schema_accepts_every_example_in_either_spelling() {
    let validator =
        jsonschema::validator_for(&wal_namespaces::json_schema()).expect("valid schema");
    for entry in std::fs::read_dir(root().join("examples")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|ext| ext != "json") {
            continue;
        }
        let document: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let errors: Vec<String> = validator
            .iter_errors(&document)
            .map(|e| e.to_string())
            .collect();
        assert!(errors.is_empty(), "{}: {errors:?}", path.display());
    }
}

#[test]
fn the_schema_rejects_unknown_fields_and_wrong_types() {
    let validator =
        jsonschema::validator_for(&wal_namespaces::json_schema()).expect("valid schema");
    for name in [
        "unknown-top-level-field.json",
        "nested-unknown-field.json",
        "wrong-type.json",
    ] {
        let path = root().join("tests/fixtures/malformed").join(name);
        let document: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        assert!(!validator.is_valid(&document), "{name} passed the schema");
    }
}
