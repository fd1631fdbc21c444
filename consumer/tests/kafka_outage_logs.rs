#![allow(clippy::expect_used, clippy::unwrap_used)]

//! Three Kafka restarts under load leave fewer than 20 lines at WARN or above in the consumer's
//! log, as an operator sees it (the binary's default filter): one WARN when a client loses the
//! broker and one INFO when it is back, not a line per connection attempt; and every write
//! answered TRUE meanwhile is delivered.
//!
//! This stops the local broker, so it is the only test in its binary and its name says "outage":
//! scripts/test runs such programs on a stack of their own, one test at a time, and no other test
//! sees the outage.

use std::time::Duration;

use wal_namespaces::Backend;
use wal_testkit::{
    ShowLogOnFailure, TestProducer, Upstream, assert_quiet, consumer_process_logging_to,
    eventually, namespace_json, unique, write_through_kafka_restarts,
};

/// The most lines at WARN or above the three restarts may leave.
const MOST: usize = 20;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_broker_restarts_under_load_leave_fewer_than_20_warnings_in_the_consumers_log() {
    let upstream = Upstream::start(|_| 200).await;
    let text = namespace_json(Backend::Kafka, 2, &upstream.target(), "");
    let namespace = wal_namespaces::parse(&text, "test").unwrap();
    let dir = std::env::temp_dir().join(unique("quiet-consumer"));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join(format!("{}.json", namespace.name)), &text).unwrap();
    let log = dir.join("consumer.log");
    let mut producer = TestProducer::start(vec![namespace.clone()]).await;
    let mut consumer = consumer_process_logging_to(&dir, &log);
    let _shown = ShowLogOnFailure(&log);

    let written = write_through_kafka_restarts(producer.client.clone(), &namespace.name).await;
    assert!(!written.is_empty(), "writes were answered TRUE meanwhile");
    eventually(
        Duration::from_secs(120),
        "every write answered TRUE delivered",
        || async {
            let delivered: std::collections::HashSet<String> = upstream
                .received()
                .iter()
                .filter_map(|r| r.headers.get("idempotency-key").cloned())
                .collect();
            written
                .iter()
                .all(|id| delivered.contains(id))
                .then_some(())
        },
    )
    .await;
    consumer.kill().unwrap();
    consumer.wait().unwrap();
    producer.shutdown().await;

    assert_quiet(&log, MOST);
}
