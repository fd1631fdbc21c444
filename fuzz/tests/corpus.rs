#![allow(clippy::expect_used, clippy::unwrap_used)]

//! The fuzz targets' checks on stable, in CI: every input kept in the corpus (what fuzzing
//! found interesting) and in the regressions (what once failed), then the seeds mutated blindly.
//! A panic anywhere fails the test, naming the target and the input.

use std::path::{Path, PathBuf};

use prost::Message as _;
use rand::SeedableRng as _;
use wal_fuzz::{Check, TARGETS, mutate, seeds};

/// Mutated inputs per target: a smoke, not a search (`scripts/fuzz` searches).
const MUTATIONS: usize = 20_000;

fn inputs_in(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut inputs: Vec<(PathBuf, Vec<u8>)> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.is_file())
        .map(|p| {
            let bytes = std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
            (p, bytes)
        })
        .collect();
    inputs.sort();
    inputs
}

/// Runs `check` on `input`, saying which input of which target panicked.
fn run(target: &str, what: &str, check: Check, input: &[u8]) {
    let outcome = std::panic::catch_unwind(|| check(input));
    assert!(
        outcome.is_ok(),
        "target {target} panicked on {what}: {:?}",
        String::from_utf8_lossy(input)
    );
}

#[test]
fn every_kept_corpus_and_regression_input_passes_its_target() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    // A missing folder would read as no regressions, and a misnamed one would never be read.
    let regressions = root.join("regressions");
    assert!(
        regressions.join("README.md").is_file(),
        "fuzz/regressions/README.md is missing: the folder the regressions are read from"
    );
    for entry in std::fs::read_dir(&regressions).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        assert!(
            name == "README.md" || (path.is_dir() && TARGETS.iter().any(|(t, _)| *t == name)),
            "fuzz/regressions/{name} is not a target's folder ({:?}), so nothing reads it",
            TARGETS.iter().map(|(t, _)| *t).collect::<Vec<_>>()
        );
    }
    for (target, check) in TARGETS {
        let corpus = inputs_in(&root.join("corpus").join(target));
        assert!(
            !corpus.is_empty(),
            "fuzz/corpus/{target} is missing or empty: run scripts/fuzz {target} and keep its corpus"
        );
        // Regressions: inputs that once failed, kept beside the fix; a target may have none.
        let regressions = inputs_in(&root.join("regressions").join(target));
        for (path, input) in corpus.iter().chain(&regressions) {
            run(target, &path.display().to_string(), *check, input);
        }
        println!(
            "{target}: {} corpus inputs, {} regressions",
            corpus.len(),
            regressions.len()
        );
    }
}

#[test]
fn mutated_seeds_pass_every_target() {
    for (target, check) in TARGETS {
        let seeds = seeds(target);
        assert!(!seeds.is_empty(), "target {target} has no seeds");
        for seed in &seeds {
            run(target, "a seed", *check, seed);
        }
        let mut rng = rand::rngs::StdRng::seed_from_u64(21);
        for n in 0..MUTATIONS {
            let input = mutate(
                &seeds[n % seeds.len()],
                &seeds[(n + 1) % seeds.len()],
                &mut rng,
            );
            run(target, &format!("mutation {n}"), *check, &input);
        }
        println!("{target}: {} seeds, {MUTATIONS} mutations", seeds.len());
    }
}

/// Seeds that the parsers refuse would start the search at the surface: each is accepted.
#[test]
fn the_seeds_are_accepted_so_the_search_starts_deep() {
    for seed in seeds("namespace_config") {
        let text = String::from_utf8(seed).unwrap();
        if let Err(errors) = wal_namespaces::parse(&text, "seed") {
            panic!("a namespace seed is refused: {errors}\n{text}");
        }
    }
    for seed in seeds("entry_envelope") {
        let decoded = wal_queue::entry::decode(&seed).is_ok()
            || std::str::from_utf8(&seed).is_ok_and(|t| wal_queue::entry::decode_text(t).is_ok());
        assert!(decoded, "an entry seed does not decode: {seed:?}");
    }
    let files = seeds("walctl_files");
    let checkpoint = std::str::from_utf8(&files[0]).unwrap();
    assert!(
        walctl::Checkpoint::parse(checkpoint).is_ok(),
        "{checkpoint}"
    );
    assert_eq!(
        walctl::parse_ids(std::str::from_utf8(&files[1]).unwrap()),
        ["id-1", "id-2"]
    );
}

/// The seeds of the targets whose input is a request or a payload reach past the decoder into
/// the checks: a seed every parser refuses would exercise the refusal alone.
#[test]
fn the_request_and_payload_seeds_get_past_their_decoders() {
    for target in ["write_request", "apply_request", "target_payload"] {
        assert!(!seeds(target).is_empty(), "target {target} has no seeds");
    }
    for seed in seeds("write_request") {
        assert!(
            wal_fuzz::accepted_writes(&seed) > 0,
            "a write_request seed of which the producer accepts no write: {seed:?}"
        );
    }
    for seed in seeds("apply_request") {
        let request = wal_proto::v1::ApplyRequest::decode(seed.as_slice())
            .unwrap_or_else(|e| panic!("an apply_request seed does not decode: {e}"));
        if let Err(errors) = wal_namespaces::parse(&request.config_json, "seed") {
            panic!("an apply_request seed's config is refused: {errors}");
        }
    }
    let refused: Vec<String> = seeds("target_payload")
        .iter()
        .filter(|seed| !wal_fuzz::target_payload_accepted(seed))
        .map(|seed| String::from_utf8_lossy(seed).into_owned())
        .collect();
    assert!(
        refused.is_empty(),
        "target_payload seeds their parsers refuse: {refused:?}"
    );
}
