//! The consumer process killed with SIGKILL in the middle of a backlog: a restarted consumer
//! delivers every entry, and the entries applied twice (those after the last commit) leave the
//! rows exactly as one application would. Then SIGTERM stops it cleanly.
//!
//! Each entry writes two rows in one batch: its own row (so a lost entry shows as a missing row)
//! and a row of one of 2,000 shared keys, each written ten times with rising original times (so
//! a repeated older write that won would show as a wrong value or write time).

#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::time::Duration;

use wal_namespaces::Backend;
use wal_proto::v1::{Lifecycle, WriteToLogRequest};
use wal_testkit::{Cql, cql_target, eventually, kafka_log, namespace_json};
use wal_testkit::{TestProducer, terminate, unique, write_all_durably};

const ENTRIES: i64 = 10_000;
const KEYS: i64 = 2_000;
/// The stack's Cassandra is shared with the tests running beside this one: at the default 256
/// entries in flight (two rows each) this backlog took the whole node, which dropped mutations
/// after 2.8 s and kept a producer beside it waiting over a minute for its schema (CI,
/// 2026-11-29). 32 still keeps many batches in flight when the consumer is killed.
const IN_FLIGHT: &str = "32";

/// Entry `i`: its own row, and the shared key's row.
fn payload(i: i64) -> Vec<u8> {
    format!(
        r#"{{"mutations":[{{"put":{{"row":{{"id":"entry{i}","value":"{i}"}}}}}},{{"put":{{"row":{{"id":"key{}","value":"value{i}"}}}}}}]}}"#,
        i % KEYS
    )
    .into_bytes()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_consumer_killed_mid_backlog_and_restarted_delivers_every_entry_without_changing_rows() {
    let cql = Cql::connect().await;
    let table = cql.table().await;
    let unlimited = r#""rate_limit": {"writes_per_second": 100000, "burst": 100000}"#;
    let config = namespace_json(Backend::Kafka, 1, &cql_target(&table), unlimited);
    let namespace = wal_namespaces::parse(&config, "test").unwrap();
    let name = namespace.name.clone();
    let dir = std::env::temp_dir().join(unique("crash-namespaces"));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join(format!("{name}.json")), &config).unwrap();
    let mut producer = TestProducer::start(vec![namespace.clone()]).await;

    // The backlog first, then the consumer.
    let base = wal_queue::entry::now_micros() - 3_600_000_000;
    let mut oracle = BTreeMap::new();
    let requests: Vec<WriteToLogRequest> = (0..ENTRIES)
        .map(|i| {
            oracle.insert(format!("entry{i}"), Some(i.to_string()));
            oracle.insert(format!("key{}", i % KEYS), Some(format!("value{i}")));
            WriteToLogRequest {
                namespace: name.clone(),
                key: format!("key{}", i % KEYS),
                payload: payload(i),
                lifecycle: Some(Lifecycle {
                    original_write_time_micros: base + i,
                    ..Lifecycle::default()
                }),
                ..WriteToLogRequest::default()
            }
        })
        .collect();
    write_all_durably(&producer.client, requests, 500, 1).await;

    let sharing = [("WAL_CONSUMER_MAX_IN_FLIGHT", IN_FLIGHT.to_string())];
    let mut first = wal_testkit::consumer_process_with_env(&dir, &sharing);
    eventually(
        Duration::from_secs(120),
        "the first consumer to apply some entries",
        || async { (cql.count(&table).await >= 1_000).then_some(()) },
    )
    .await;
    first.kill().unwrap(); // SIGKILL: no commit, no cleanup.
    first.wait().unwrap();
    let at_kill = cql.count(&table).await;
    assert!(
        at_kill < ENTRIES + KEYS,
        "the kill landed before the backlog was applied ({at_kill} rows)"
    );

    let mut second = wal_testkit::consumer_process_with_env(&dir, &sharing);
    eventually(
        Duration::from_secs(180),
        "the restarted consumer to apply every entry",
        || async { (cql.count(&table).await == ENTRIES + KEYS).then_some(()) },
    )
    .await;
    assert_eq!(
        cql.rows(&table).await,
        oracle,
        "every entry's row, and each key's last write"
    );
    for i in [0, 1, KEYS / 2, KEYS - 1] {
        let last = ENTRIES - KEYS + i;
        assert_eq!(
            cql.writetime(&table, &format!("key{i}")).await,
            Some(base + last),
            "key{i} holds its last write"
        );
    }

    terminate(&second);
    // Bounded: a consumer that ignores SIGTERM fails the test here (and is killed when `second`
    // drops) rather than holding the suite until CI's own limit.
    let status = eventually(
        Duration::from_secs(60),
        "the consumer process to exit after SIGTERM",
        || std::future::ready(second.try_wait().unwrap()),
    )
    .await;
    assert!(
        status.success(),
        "SIGTERM stops the consumer cleanly: {status}"
    );

    // The whole DLQ topic, read to its end (a first receive of a new group could come back
    // empty before its group join was done).
    let dead = kafka_log(&namespace.queues[0].dlq).await;
    assert!(
        dead.is_empty(),
        "nothing was dead-lettered: {:?}",
        dead.first()
    );
    producer.shutdown().await;
    let _ = std::fs::remove_dir_all(dir);
}
