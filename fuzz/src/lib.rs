//! The fuzz targets' checks: one function per parser of input a user, a network or a disk
//! controls. Each takes arbitrary bytes, must never panic or hang on them, and asserts what the
//! parser promises of what it accepts (an accepted entry encodes back to itself, a checkpoint
//! saves back to itself, ...). libFuzzer drives them (`fuzz_targets/`, `scripts/fuzz`); the tests
//! replay the kept corpus and the regressions through them on stable.

mod mutate;
mod seeds;

pub use mutate::mutate;
pub use seeds::seeds;

use std::collections::HashMap;
use std::sync::OnceLock;

use prost::Message as _;
use rand::SeedableRng as _;
use wal_namespaces::Namespace;
use wal_proto::v1::{ApplyRequest, WriteToLogBatchRequest, WriteToLogRequest};

/// A target's check: takes any bytes, panics only on a bug.
pub type Check = fn(&[u8]);

/// Every target, by the name its binary, corpus and regressions folders have.
pub const TARGETS: &[(&str, Check)] = &[
    ("write_request", write_request),
    ("namespace_config", namespace_config),
    ("entry_envelope", entry_envelope),
    ("target_payload", target_payload),
    ("walctl_files", walctl_files),
    ("apply_request", apply_request),
];

/// A producer's clock for the checks: fixed, so an input always takes the same path.
const NOW_MICROS: i64 = 1_780_000_000_000_000;

/// The namespace requests are checked against (and a seed): delays and jitter allowed, a
/// default target, and a payload limit small enough for inputs to cross it.
pub(crate) const FUZZ_NAMESPACE: &str = r#"{"namespace": "fuzz",
    "persistence_configurations": {"persistence_configuration": [{
        "physical_storage": {"type": "KAFKA"},
        "config": {"wal-kafka-topics": ["fuzz"]}
    }]},
    "payload_limit_bytes": 4096,
    "delay_limits": {"max_delay_ms": 86400000, "default_jitter_ms": 1000, "max_jitter_ms": 60000},
    "default_target": {"kind": "http", "settings": {"url": "http://127.0.0.1:1/fuzz"}}}"#;

/// Another namespace, owning an SQS queue of its own (and a seed).
pub(crate) const OTHER_NAMESPACE: &str = r#"{"namespace": "other",
    "persistence_configurations": {"persistence_configuration": [{
        "physical_storage": {"type": "SQS"},
        "config": {"wal-queue": ["other"]}
    }]}}"#;

/// [`FUZZ_NAMESPACE`], parsed once.
fn namespace() -> &'static Namespace {
    static NAMESPACE: OnceLock<Namespace> = OnceLock::new();
    NAMESPACE.get_or_init(|| parse_or_panic(FUZZ_NAMESPACE))
}

/// The config a fuzzed Apply updates: the same namespace on its queues, and another that owns
/// queues of its own.
fn applied_before() -> &'static (Namespace, serde_json::Value, Vec<Namespace>) {
    static BEFORE: OnceLock<(Namespace, serde_json::Value, Vec<Namespace>)> = OnceLock::new();
    BEFORE.get_or_init(|| {
        let mine = namespace().clone();
        let value = serde_json::json!({"namespace": "fuzz"});
        let other = parse_or_panic(OTHER_NAMESPACE);
        (mine, value, vec![other])
    })
}

/// A config of this crate's own: one that does not parse is this crate's bug.
fn parse_or_panic(text: &str) -> Namespace {
    match wal_namespaces::parse(text, "the fuzz crate") {
        Ok(namespace) => namespace,
        Err(errors) => panic!("the fuzz crate's own config is refused: {errors}"),
    }
}

/// WriteToLog and WriteToLogBatch requests as the producer receives them: decoded, then checked
/// against a namespace. A request that passes builds an entry that the queue's codec carries
/// unchanged, within the namespace's payload limit.
pub fn write_request(data: &[u8]) {
    accepted_writes(data);
}

/// [`write_request`]'s check, saying how many writes of the input the producer accepted (the
/// seeds' test holds them to more than none: a seed refused at once exercises only the refusal).
pub fn accepted_writes(data: &[u8]) -> usize {
    let mut rng = rand::rngs::StdRng::seed_from_u64(data.len() as u64);
    let check = |request: WriteToLogRequest, rng: &mut rand::rngs::StdRng| -> usize {
        let checked = wal_producer::request::check(
            namespace(),
            request,
            NOW_MICROS,
            "local",
            HashMap::new(),
            rng,
        );
        let Ok(write) = checked else {
            return 0;
        };
        assert!(write.payload_len <= namespace().payload_limit_bytes);
        assert!(!write.entry.id.is_empty(), "an accepted write has an id");
        let bytes = wal_queue::entry::encode(&write.entry);
        let back = wal_queue::entry::decode(&bytes);
        assert_eq!(
            back.as_ref(),
            Ok(&write.entry),
            "the entry's codec changed it"
        );
        1
    };
    let mut accepted = 0;
    if let Ok(request) = WriteToLogRequest::decode(data) {
        accepted += check(request, &mut rng);
    }
    if let Ok(batch) = WriteToLogBatchRequest::decode(data) {
        for request in batch.writes {
            accepted += check(request, &mut rng);
        }
    }
    accepted
}

/// Namespace config files, in either spelling (the platform's snake_case and Netflix's
/// camelCase). A refusal names where it is and says what was expected.
pub fn namespace_config(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match wal_namespaces::parse(text, "fuzz.json") {
        Ok(namespace) => {
            assert!(
                !namespace.name.is_empty(),
                "an accepted namespace has a name"
            );
            assert!(
                !namespace.queues.is_empty(),
                "an accepted namespace has a queue"
            );
        }
        Err(errors) => {
            let message = errors.to_string();
            assert!(
                message.contains("fuzz.json"),
                "a refusal names the file: {message}"
            );
        }
    }
    let _ = wal_namespaces::parse_stored(text, "fuzz.json");
}

/// Entries as a queue delivers them: Kafka's bytes and SQS's base64 text. An entry that decodes
/// encodes back to bytes that decode to the same entry.
pub fn entry_envelope(data: &[u8]) {
    if let Ok(entry) = wal_queue::entry::decode(data) {
        let again = wal_queue::entry::decode(&wal_queue::entry::encode(&entry));
        assert_eq!(
            again.as_ref(),
            Ok(&entry),
            "bytes: an entry's codec changed it"
        );
    }
    if let Ok(text) = std::str::from_utf8(data)
        && let Ok(entry) = wal_queue::entry::decode_text(text)
    {
        let again = wal_queue::entry::decode_text(&wal_queue::entry::encode_text(&entry));
        assert_eq!(
            again.as_ref(),
            Ok(&entry),
            "text: an entry's codec changed it"
        );
    }
}

/// Target payloads and settings: the first byte picks what the rest is (a cql payload, a cache
/// payload, or one kind's settings JSON).
pub fn target_payload(data: &[u8]) {
    target_payload_accepted(data);
}

/// [`target_payload`]'s check, saying whether the parser the first byte picked accepted the rest.
pub fn target_payload_accepted(data: &[u8]) -> bool {
    let Some((&pick, rest)) = data.split_first() else {
        return false;
    };
    match pick % 9 {
        0 => wal_apply::cql::payload::parse(rest).is_ok(),
        1 => {
            static SETTINGS: OnceLock<wal_targets::cache::CacheSettings> = OnceLock::new();
            let settings = SETTINGS.get_or_init(|| {
                wal_targets::parse("{}").unwrap_or_else(|_| unreachable!("{{}} is cache settings"))
            });
            let command = wal_apply::cache::command(rest, settings);
            if let Ok(wal_apply::cache::Command::Set { value, .. }) = &command {
                assert!(value.len() <= rest.len(), "a value longer than its payload");
            }
            command.is_ok()
        }
        kind => {
            let Ok(settings) = std::str::from_utf8(rest) else {
                return false;
            };
            let kind = [
                "cql",
                "cache",
                "kafka",
                "http",
                "region",
                "evc-replication",
                "index",
            ][usize::from(kind - 2)];
            wal_targets::check(kind, settings).is_ok()
        }
    }
}

/// The files walctl reads back: a replay's or redrive's checkpoint, and --exclude-file. A
/// checkpoint that loads saves back to the same checkpoint; exclude ids are trimmed, never
/// blank and never comments.
pub fn walctl_files(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(checkpoint) = walctl::Checkpoint::parse(text) {
        let saved = serde_json::to_string(&checkpoint)
            .unwrap_or_else(|e| unreachable!("a checkpoint always serializes: {e}"));
        let loaded = walctl::Checkpoint::parse(&saved).ok();
        assert_eq!(
            loaded.as_ref(),
            Some(&checkpoint),
            "a checkpoint changed on save"
        );
    }
    for id in walctl::parse_ids(text) {
        assert!(
            !id.is_empty() && !id.starts_with('#') && id.trim() == id,
            "{id:?}"
        );
    }
}

/// The control plane's Apply: the request decoded, its config parsed and judged against the
/// namespace's last config and another namespace's queues, and the changed fields listed.
pub fn apply_request(data: &[u8]) {
    let Ok(request) = ApplyRequest::decode(data) else {
        return;
    };
    let Ok(new) = wal_namespaces::parse(&request.config_json, "the applied config") else {
        return;
    };
    let (old, old_value, others) = applied_before();
    let _ = wal_control_plane::changes::check_update(Some(old), &new, others);
    let _ = wal_control_plane::changes::check_update(None, &new, others);
    if let Ok(value) = serde_json::from_str::<serde_json::Value>(&request.config_json) {
        let _ = wal_control_plane::changes::changed_fields(old_value, &value);
    }
}
