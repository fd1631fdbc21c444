//! Every malformed config in `tests/fixtures/malformed` is refused with exactly the message in
//! its `.expected` file: the file, the field path in the file's own spelling, and what was
//! expected. To add a case, add `NAME.json` and `NAME.expected` (one error per line).

use std::path::Path;

#[test]
fn every_malformed_fixture_fails_with_its_expected_message() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/malformed");
    let mut fixtures: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "json"))
        .collect();
    fixtures.sort();
    assert!(fixtures.len() >= 15, "the fixture set went missing");

    let mut mismatches = Vec::new();
    for fixture in &fixtures {
        let name = fixture
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .into_owned();
        let text = std::fs::read_to_string(fixture).unwrap_or_default();
        let expected_path = fixture.with_extension("expected");
        let expected = std::fs::read_to_string(&expected_path).unwrap_or_default();
        let actual = match wal_namespaces::parse(&text, &name) {
            Ok(namespace) => format!("accepted as {namespace:?}"),
            Err(errors) => errors.to_string(),
        };
        if std::env::var_os("UPDATE_FIXTURES").is_some() {
            let _ = std::fs::write(&expected_path, format!("{actual}\n"));
        } else if actual.trim_end() != expected.trim_end() {
            mismatches.push(format!(
                "{name}\n  expected: {}\n  actual:   {actual}",
                expected.trim_end()
            ));
        }
    }
    assert!(mismatches.is_empty(), "{}", mismatches.join("\n"));
}
