//! The entry codec: how an entry becomes bytes on a queue and back.
//!
//! An entry is the protobuf message `wal.v1.Entry` (proto/wal/v1/entry.proto). Kafka carries the
//! encoded bytes as the record value; SQS carries them base64-encoded, because SQS bodies must be
//! text. Decoding never panics: whatever bytes a queue hands back become an entry or a
//! [`CodecError`] that says what was wrong, so the consumer can dead-letter them.

use std::time::{SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use prost::Message as _;

pub use wal_proto::v1::{ClaimCheck, Entry, ErrorClass, Target, TransactionMarker, entry::Body};

/// The envelope version this build writes and the newest it can read.
pub const ENTRY_VERSION: u32 = 1;

/// Why bytes from a queue are not an entry this build can read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CodecError {
    #[error("the message is empty; expected an encoded wal.v1.Entry")]
    Empty,
    #[error("the message is not valid base64 (SQS bodies carry base64-encoded entries): {0}")]
    Base64(String),
    #[error("the message is not a wal.v1.Entry: {0}")]
    Protobuf(String),
    #[error("the entry has no version; expected version 1 to {ENTRY_VERSION}")]
    MissingVersion,
    #[error(
        "the entry has version {0}, newer than this build reads (up to {ENTRY_VERSION}); upgrade the consumer"
    )]
    TooNew(u32),
    #[error("the entry has no id")]
    MissingId,
}

/// The platform's key hash (FNV-1a 64), defined with the namespace model: fixed, so every
/// process of every version puts a key in the same queue, archive shard and replay lane.
pub use wal_namespaces::key_hash;

/// Encodes an entry for a queue that carries bytes (Kafka).
pub fn encode(entry: &Entry) -> Vec<u8> {
    entry.encode_to_vec()
}

/// The length of [`encode`]'s output, without encoding.
pub fn encoded_len(entry: &Entry) -> usize {
    entry.encoded_len()
}

/// Decodes bytes from a queue that carries bytes (Kafka).
pub fn decode(bytes: &[u8]) -> Result<Entry, CodecError> {
    if bytes.is_empty() {
        return Err(CodecError::Empty);
    }
    let entry = Entry::decode(bytes).map_err(|e| CodecError::Protobuf(e.to_string()))?;
    match entry.version {
        0 => Err(CodecError::MissingVersion),
        v if v > ENTRY_VERSION => Err(CodecError::TooNew(v)),
        _ if entry.id.is_empty() => Err(CodecError::MissingId),
        _ => Ok(entry),
    }
}

/// Encodes an entry for a queue that carries text (SQS).
pub fn encode_text(entry: &Entry) -> String {
    base64::engine::general_purpose::STANDARD.encode(encode(entry))
}

/// Decodes text from a queue that carries text (SQS).
pub fn decode_text(text: &str) -> Result<Entry, CodecError> {
    if text.is_empty() {
        return Err(CodecError::Empty);
    }
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(text)
        .map_err(|e| CodecError::Base64(e.to_string()))?;
    decode(&bytes)
}

/// The length of [`encode_text`]'s output for an entry of `encoded_len` bytes.
pub fn text_len(encoded_len: usize) -> usize {
    encoded_len.div_ceil(3) * 4
}

/// A new entry id: a UUIDv7, so ids sort roughly by creation time.
pub fn new_entry_id() -> String {
    uuid::Uuid::now_v7().to_string()
}

/// The clock [`now_micros`] reads, when one was set: a simulation of delivery runs under
/// tokio's paused clock, and deliver-at must be judged by the same clock its waits sleep on.
/// Only in builds with the `memory` feature (tests and simulations), never in the binaries.
#[cfg(feature = "memory")]
static CLOCK: std::sync::OnceLock<fn() -> i64> = std::sync::OnceLock::new();

/// Makes [`now_micros`] read `clock` for the rest of the process: for simulations, which run the
/// delivery logic under a simulated clock. False when a clock was set already.
#[cfg(feature = "memory")]
pub fn set_clock(clock: fn() -> i64) -> bool {
    CLOCK.set(clock).is_ok()
}

/// Microseconds since the Unix epoch, the unit of every time in an entry.
pub fn now_micros() -> i64 {
    #[cfg(feature = "memory")]
    if let Some(clock) = CLOCK.get() {
        return clock();
    }
    let since_epoch = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    i64::try_from(since_epoch.as_micros()).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn entry_strategy() -> impl Strategy<Value = Entry> {
        (
            "[a-z0-9-]{1,40}",
            "[a-z_]{1,20}",
            proptest::collection::vec(any::<u8>(), 0..512),
            any::<i64>(),
            any::<i64>(),
            0u32..100,
            ".{0,40}",
            proptest::collection::btree_map("[a-z]{1,8}", ".{0,16}", 0..3),
        )
            .prop_map(
                |(id, namespace, payload, written, deliver_at, attempt, error, trace)| Entry {
                    version: ENTRY_VERSION,
                    key: id.clone(),
                    id,
                    namespace,
                    body: Some(Body::Payload(payload)),
                    target: Some(Target {
                        kind: "cql".into(),
                        settings_json: "{}".into(),
                    }),
                    original_write_time_micros: written,
                    deliver_at_micros: deliver_at,
                    enqueued_at_micros: written,
                    attempt,
                    last_error: error,
                    last_error_class: ErrorClass::Retryable as i32,
                    dead_lettered_at_micros: 0,
                    origin_region: "local".into(),
                    trace_context: trace.into_iter().collect(),
                    redrives: attempt % 4,
                    destination_region: String::new(),
                    heartbeat: false,
                    destination: String::new(),
                    receipts: attempt % 2 == 0,
                },
            )
    }

    proptest! {
        #[test]
        fn bytes_round_trip(entry in entry_strategy()) {
            prop_assert_eq!(decode(&encode(&entry)), Ok(entry));
        }

        #[test]
        fn text_round_trip(entry in entry_strategy()) {
            let text = encode_text(&entry);
            prop_assert_eq!(text.len(), text_len(encode(&entry).len()));
            prop_assert_eq!(decode_text(&text), Ok(entry));
        }

        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
            let _ = decode(&bytes);
        }

        #[test]
        fn arbitrary_text_never_panics(text in ".{0,256}") {
            let _ = decode_text(&text);
        }
    }

    #[test]
    fn refuses_entries_from_a_newer_build() {
        let entry = Entry {
            version: ENTRY_VERSION + 1,
            id: "e1".into(),
            ..Entry::default()
        };
        assert_eq!(
            decode(&encode(&entry)),
            Err(CodecError::TooNew(ENTRY_VERSION + 1))
        );
    }

    #[test]
    fn refuses_messages_without_version_or_id() {
        let no_version = Entry {
            id: "e1".into(),
            ..Entry::default()
        };
        assert_eq!(
            decode(&encode(&no_version)),
            Err(CodecError::MissingVersion)
        );
        let no_id = Entry {
            version: ENTRY_VERSION,
            ..Entry::default()
        };
        assert_eq!(decode(&encode(&no_id)), Err(CodecError::MissingId));
        assert_eq!(decode(&[]), Err(CodecError::Empty));
        assert!(matches!(decode_text("%%%"), Err(CodecError::Base64(_))));
    }
}
