//! Entries outlive the build that wrote them: a rolling upgrade runs two versions side by side,
//! and a queue, a DLQ or an archive holds entries for days. `tests/entries/v1/` is a corpus of
//! encoded entries, each file written once by the build that added it and committed; every
//! later build must decode each into the same entry. Never change or delete a file: add one
//! (with `WAL_WRITE_ENTRY_CORPUS=1`, which writes the files missing, never one that exists) when
//! the entry gains a field or a kind of body.
//!
//! One file is an entry from a build newer than this one, with a field this one does not know:
//! it must decode with the fields it knows, not be refused (and so not dead-lettered; the
//! consumer's delivery_rules test delivers one end to end).

use std::collections::HashMap;
use std::path::PathBuf;

use wal_queue::entry::{self, Body, ClaimCheck, Entry, ErrorClass, Target, TransactionMarker};

/// The field number a newer build's entry uses in `from_a_newer_build` (none in entry.proto).
pub const FUTURE_FIELD: u32 = 999;

fn corpus_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/entries/v1")
}

fn base(id: &str) -> Entry {
    Entry {
        version: 1,
        id: id.to_owned(),
        namespace: "orders".to_owned(),
        key: "customer-7".to_owned(),
        target: Some(Target {
            kind: "cql".to_owned(),
            settings_json: r#"{"keyspace": "shop", "table": "orders"}"#.to_owned(),
        }),
        original_write_time_micros: 1_764_000_000_000_000,
        deliver_at_micros: 1_764_000_005_000_000,
        enqueued_at_micros: 1_764_000_000_100_000,
        origin_region: "us-east-1".to_owned(),
        ..Entry::default()
    }
}

/// The corpus as this build builds it, by file name: the entries every later build must read.
fn corpus() -> Vec<(&'static str, Entry)> {
    vec![
        (
            "payload_every_field",
            Entry {
                body: Some(Body::Payload(
                    br#"{"mutations":[{"put":{"row":{"id":"o-1","state":"paid"}}}]}"#.to_vec(),
                )),
                attempt: 3,
                last_error: "gave up after 3 attempts: POST answered 500".to_owned(),
                last_error_class: ErrorClass::Retryable as i32,
                dead_lettered_at_micros: 1_764_000_060_000_000,
                trace_context: HashMap::from([(
                    "traceparent".to_owned(),
                    "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01".to_owned(),
                )]),
                redrives: 2,
                ..base("01937e4a-0000-7000-8000-000000000001")
            },
        ),
        (
            "claim_check",
            Entry {
                body: Some(Body::ClaimCheck(ClaimCheck {
                    table: "wal_orders.claim_checks".to_owned(),
                    id: "01937e4a-0000-7000-8000-000000000002".to_owned(),
                    size: 4_194_304,
                })),
                ..base("01937e4a-0000-7000-8000-000000000002")
            },
        ),
        (
            "transaction_marker",
            Entry {
                body: Some(Body::Transaction(TransactionMarker {
                    transaction_id: "txn-01937e4a".to_owned(),
                    item_count: 12,
                })),
                ..base("01937e4a-0000-7000-8000-000000000003")
            },
        ),
        (
            "replication_dlq_copy",
            Entry {
                body: Some(Body::Payload(
                    b"{\"set\":{\"key\":\"k\",\"value\":\"v\"}}".to_vec(),
                )),
                target: Some(Target {
                    kind: "region".to_owned(),
                    settings_json: r#"{"regions": ["eu-west-1", "ap-south-1"]}"#.to_owned(),
                }),
                destination_region: "eu-west-1".to_owned(),
                last_error: "region eu-west-1: writer unavailable".to_owned(),
                last_error_class: ErrorClass::Permanent as i32,
                dead_lettered_at_micros: 1_764_000_090_000_000,
                ..base("01937e4a-0000-7000-8000-000000000004")
            },
        ),
        (
            "replication_heartbeat",
            Entry {
                heartbeat: true,
                destination_region: "ap-south-1".to_owned(),
                body: None,
                ..base("01937e4a-0000-7000-8000-000000000005")
            },
        ),
        (
            "destination_dlq_copy",
            Entry {
                body: Some(Body::Payload(b"{\"id\":\"o-1\"}".to_vec())),
                target: Some(Target {
                    kind: "cache".to_owned(),
                    settings_json: r#"{"ttl_seconds":600}"#.to_owned(),
                }),
                destination: "cache".to_owned(),
                attempt: 5,
                last_error: "gave up after 5 attempts: memcached timed out".to_owned(),
                last_error_class: ErrorClass::Retryable as i32,
                dead_lettered_at_micros: 1_764_000_095_000_000,
                ..base("01937e4a-0000-7000-8000-000000000007")
            },
        ),
        (
            "awaited_write",
            Entry {
                body: Some(Body::Payload(b"{\"id\":\"o-2\"}".to_vec())),
                receipts: true,
                ..base("01937e4a-0000-7000-8000-000000000008")
            },
        ),
        (
            "from_a_newer_build",
            Entry {
                body: Some(Body::Payload(b"written by a newer build".to_vec())),
                ..base("01937e4a-0000-7000-8000-000000000006")
            },
        ),
    ]
}

/// The bytes a build writes for `name`: the entry's encoding, and for `from_a_newer_build` a
/// field this build's entry.proto does not have, as a newer build's would be.
fn encoded(name: &str, entry: &Entry) -> Vec<u8> {
    let mut bytes = entry::encode(entry);
    if name == "from_a_newer_build" {
        prost::encoding::string::encode(FUTURE_FIELD, &"a newer field".to_owned(), &mut bytes);
    }
    bytes
}

#[test]
fn every_entry_of_the_corpus_decodes_as_the_build_that_wrote_it_meant() {
    let dir = corpus_dir();
    let write_missing = std::env::var("WAL_WRITE_ENTRY_CORPUS").is_ok_and(|v| v == "1");
    let corpus = corpus();
    for (name, expected) in &corpus {
        let path = dir.join(format!("{name}.bin"));
        if !path.exists() && write_missing {
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(&path, encoded(name, expected)).unwrap();
        }
        let bytes = std::fs::read(&path).unwrap_or_else(|e| {
            panic!(
                "{}: {e}; a corpus entry without its file: write it with \
                 WAL_WRITE_ENTRY_CORPUS=1 and commit it",
                path.display()
            )
        });
        let decoded =
            entry::decode(&bytes).unwrap_or_else(|e| panic!("{name}: this build refuses it: {e}"));
        assert_eq!(&decoded, expected, "{name}: decoded differently");
        let text = entry::encode_text(&decoded);
        assert_eq!(
            entry::decode_text(&text).unwrap(),
            decoded,
            "{name} as SQS text"
        );
    }
    // A committed file is never dropped from the corpus: each must still be built above.
    for file in std::fs::read_dir(&dir).unwrap() {
        let file = file.unwrap().file_name().to_string_lossy().into_owned();
        let name = file.trim_end_matches(".bin");
        assert!(
            corpus.iter().any(|(n, _)| *n == name),
            "{file} is in the corpus folder but not in corpus(): entries once written stay read"
        );
    }
}

#[test]
fn the_newer_builds_entry_really_carries_a_field_this_build_lacks() {
    // Without it the corpus would not show unknown fields pass: the file must differ from what
    // this build would write for the entry it decodes to.
    let bytes = std::fs::read(corpus_dir().join("from_a_newer_build.bin")).unwrap();
    let decoded = entry::decode(&bytes).unwrap();
    assert_ne!(entry::encode(&decoded), bytes);
    assert!(bytes.len() > entry::encode(&decoded).len());
}
