//! The consumer process killed with SIGKILL in the middle of a backlog: a restarted consumer
//! delivers every entry, and the entries applied twice (those after the last commit) leave the
//! rows exactly as one application would. Then SIGTERM stops it cleanly.

#![allow(clippy::expect_used, clippy::unwrap_used)]

mod support;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use support::producer::{TestProducer, unique};
use support::{Cql, KEYSPACE, eventually, put};
use wal_proto::v1::{Lifecycle, Trilean, WriteToLogBatchRequest, WriteToLogRequest};

const ENTRIES: i64 = 20_000;
const KEYS: i64 = 2_000;

fn spawn_consumer(namespaces: &Path) -> Child {
    Command::new(env!("CARGO_BIN_EXE_wal-consumer"))
        .env("WAL_NAMESPACES", namespaces)
        .env("WAL_CONSUMER_METRICS_LISTEN", "127.0.0.1:0")
        .env("WAL_CONSUMER_HEALTH_LISTEN", "127.0.0.1:0")
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .spawn()
        .expect("start wal-consumer")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_consumer_killed_mid_backlog_and_restarted_delivers_every_entry_without_changing_rows() {
    let cql = Cql::connect().await;
    let table = cql.table().await;
    let name = unique("ns");
    let config = format!(
        r#"{{"namespace": "{name}",
            "persistence_configurations": {{"persistence_configuration": [
              {{"physical_storage": {{"type": "KAFKA"}}, "config": {{"wal-kafka-topics": ["{name}"]}}}}]}},
            "default_target": {{"kind": "cql", "settings": {{"keyspace": "{KEYSPACE}", "table": "{table}"}}}}}}"#
    );
    let dir = std::env::temp_dir().join(unique("crash-namespaces"));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join(format!("{name}.json")), &config).unwrap();
    let namespace = wal_namespaces::parse(&config, "test").unwrap();
    let mut producer = TestProducer::start(vec![namespace]).await;

    // A backlog first: every key written ten times, later writes with later original times.
    let base = wal_core::entry::now_micros() - 3_600_000_000;
    let mut oracle = BTreeMap::new();
    let requests: Vec<WriteToLogRequest> = (0..ENTRIES)
        .map(|i| {
            let (key, value) = (format!("key{}", i % KEYS), format!("value{i}"));
            let payload = put(&key, &value);
            oracle.insert(key.clone(), Some(value));
            WriteToLogRequest {
                namespace: name.clone(),
                key,
                payload,
                lifecycle: Some(Lifecycle {
                    original_write_time_micros: base + i,
                    ..Lifecycle::default()
                }),
                ..WriteToLogRequest::default()
            }
        })
        .collect();
    for chunk in requests.chunks(500) {
        let answers = producer
            .client
            .write_to_log_batch(WriteToLogBatchRequest {
                writes: chunk.to_vec(),
            })
            .await
            .unwrap()
            .into_inner();
        assert!(answers.results.iter().all(|r| {
            r.response
                .as_ref()
                .is_some_and(|a| a.durable() == Trilean::True)
        }));
    }

    let mut first = spawn_consumer(&dir);
    eventually(
        Duration::from_secs(120),
        "the first consumer to apply some rows",
        || async { (cql.rows(&table).await.len() >= 300).then_some(()) },
    )
    .await;
    first.kill().unwrap(); // SIGKILL: no commit, no cleanup.
    first.wait().unwrap();
    let at_kill = cql.rows(&table).await;
    assert_ne!(
        at_kill, oracle,
        "the kill landed before the backlog was applied"
    );

    let mut second = spawn_consumer(&dir);
    eventually(
        Duration::from_secs(180),
        "the restarted consumer to apply every entry",
        || async { (cql.rows(&table).await == oracle).then_some(()) },
    )
    .await;
    for i in [0, 1, KEYS / 2, KEYS - 1] {
        let last = ENTRIES - KEYS + i;
        assert_eq!(
            cql.writetime(&table, &format!("key{i}")).await,
            Some(base + last),
            "key{i} holds its last write"
        );
    }

    let pid = second.id().to_string();
    assert!(
        Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .unwrap()
            .success()
    );
    let status = tokio::task::spawn_blocking(move || second.wait())
        .await
        .unwrap()
        .unwrap();
    assert!(
        status.success(),
        "SIGTERM stops the consumer cleanly: {status}"
    );
    producer.shutdown().await;
    let _ = std::fs::remove_dir_all(dir);
}
