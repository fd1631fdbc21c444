//! Structure-aware seeds: a few well-formed inputs per target, written as code so they follow
//! the formats as they change. `scripts/fuzz` writes them into the corpus before fuzzing, and
//! the tests mutate them on stable.

use prost::Message as _;
use wal_proto::v1::{ApplyRequest, Lifecycle, Target, WriteToLogBatchRequest, WriteToLogRequest};
use wal_queue::entry::{Body, ENTRY_VERSION, Entry, TransactionMarker};

/// The seeds of the target named `target` (one of [`crate::TARGETS`]).
pub fn seeds(target: &str) -> Vec<Vec<u8>> {
    match target {
        "write_request" => write_requests(),
        "namespace_config" => namespace_configs()
            .into_iter()
            .map(String::into_bytes)
            .collect(),
        "entry_envelope" => entries(),
        "target_payload" => target_payloads(),
        "walctl_files" => walctl_files(),
        "apply_request" => namespace_configs()
            .into_iter()
            .map(|config_json| {
                ApplyRequest {
                    config_json,
                    author: "fuzz".into(),
                    ..Default::default()
                }
                .encode_to_vec()
            })
            .collect(),
        _ => Vec::new(),
    }
}

fn write_requests() -> Vec<Vec<u8>> {
    let plain = WriteToLogRequest {
        namespace: "fuzz".into(),
        payload: b"{\"k\":1}".to_vec(),
        ..WriteToLogRequest::default()
    };
    let full = WriteToLogRequest {
        namespace: "fuzz".into(),
        lifecycle: Some(Lifecycle {
            delay_millis: 5_000,
            jitter_millis: 1_000,
            original_write_time_micros: 1_779_999_000_000_000,
        }),
        payload: br#"{"mutations":[{"put":{"row":{"id":"1","value":"v"}}}]}"#.to_vec(),
        target: Some(Target {
            kind: "cql".into(),
            settings_json: r#"{"keyspace":"k","table":"t"}"#.into(),
        }),
        idempotency_id: "id-1".into(),
        key: "user:1".into(),
        ..WriteToLogRequest::default()
    };
    let batch = WriteToLogBatchRequest {
        writes: vec![plain.clone(), full.clone()],
    };
    vec![
        plain.encode_to_vec(),
        full.encode_to_vec(),
        batch.encode_to_vec(),
    ]
}

/// The example configs in both spellings, and small ones of each backend.
fn namespace_configs() -> Vec<String> {
    let examples = [
        include_str!("../../namespaces/examples/delay-queue-pds.json"),
        include_str!("../../namespaces/examples/cross-region-evcache-foobar.json"),
        include_str!("../../namespaces/examples/multi-partition-kv-foobar.json"),
    ];
    let mut configs: Vec<String> = examples.iter().map(|s| (*s).to_owned()).collect();
    configs.push(crate::FUZZ_NAMESPACE.to_owned());
    configs.push(crate::OTHER_NAMESPACE.to_owned());
    configs
}

fn entries() -> Vec<Vec<u8>> {
    let payload = Entry {
        version: ENTRY_VERSION,
        id: "e-1".into(),
        namespace: "fuzz".into(),
        key: "user:1".into(),
        body: Some(Body::Payload(b"{\"k\":1}".to_vec())),
        original_write_time_micros: 1_779_999_000_000_000,
        deliver_at_micros: 1_780_000_000_000_000,
        enqueued_at_micros: 1_780_000_000_000_000,
        origin_region: "local".into(),
        ..Entry::default()
    };
    let marker = Entry {
        id: "txn:t-1".into(),
        body: Some(Body::Transaction(TransactionMarker {
            transaction_id: "t-1".into(),
            item_count: 3,
        })),
        ..payload.clone()
    };
    let entries = [payload, marker];
    // As Kafka carries them (bytes), and as SQS does (base64 text).
    let bytes = entries.iter().map(wal_queue::entry::encode);
    let text = entries
        .iter()
        .map(|e| wal_queue::entry::encode_text(e).into_bytes());
    bytes.chain(text).collect()
}

/// Each prefixed with the byte that picks its parser in [`crate::target_payload`].
fn target_payloads() -> Vec<Vec<u8>> {
    let picked = |pick: u8, text: &str| {
        let mut input = vec![pick];
        input.extend_from_slice(text.as_bytes());
        input
    };
    vec![
        picked(
            0,
            r#"{"mutations":[{"put":{"row":{"id":"1","n":2,"b":true,"l":[1,2],"m":{"a":"b"}},"ttl_seconds":60}},{"delete":{"key":{"id":"2"}}}]}"#,
        ),
        picked(
            1,
            r#"{"set":{"key":"user:1","value":"text","ttl_seconds":60}}"#,
        ),
        picked(1, r#"{"set":{"key":"user:1","value_base64":"AAEC"}}"#),
        picked(1, r#"{"delete":{"key":"user:1"}}"#),
        picked(2, r#"{"keyspace":"k","table":"t"}"#),
        picked(
            3,
            r#"{"servers":["127.0.0.1:11211"],"ttl_seconds":3600,"ttl_spread_seconds":360}"#,
        ),
        picked(4, r#"{"topic":"out"}"#),
        picked(
            5,
            r#"{"url":"http://127.0.0.1:8080/apply","headers":{"x-team":"pds"}}"#,
        ),
        picked(6, r#"{"regions":{"euwest1":{"writer":"127.0.0.1:50070"}}}"#),
    ]
}

fn walctl_files() -> Vec<Vec<u8>> {
    vec![
        br#"{"namespace":"fuzz","filter":"--since 1h","since_micros":1,"until_micros":2,"positions":{"fuzz":{"0":10,"1":20}},"starts":{"fuzz":{"0":0}},"done":30}"#.to_vec(),
        b"# ids to leave out\nid-1\n  id-2  \n\n#id-3\n".to_vec(),
    ]
}
