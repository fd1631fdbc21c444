#![allow(clippy::expect_used, clippy::unwrap_used)]

//! Three Kafka restarts under load leave fewer than 20 lines at WARN or above in the producer's
//! log, as an operator sees it (the binary's default filter): one WARN when a client loses the
//! broker and one INFO when it is back, not a line per connection attempt.
//!
//! This stops the local broker, so it is the only test in its binary and its name says "outage":
//! scripts/test runs such programs on a stack of their own, one test at a time, and no other test
//! sees the outage.

use std::time::Duration;

use wal_namespaces::Backend;
use wal_proto::v1::Trilean;
use wal_proto::v1::write_ahead_log_client::WriteAheadLogClient;
use wal_testkit::{
    ProducerProcess, ShowLogOnFailure, assert_quiet, eventually, namespace_json, unique, write,
    write_through_kafka_restarts,
};

/// The most lines at WARN or above the three restarts may leave.
const MOST: usize = 20;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_broker_restarts_under_load_leave_fewer_than_20_warnings_in_the_producers_log() {
    let text = namespace_json(
        Backend::Kafka,
        2,
        r#"{"kind": "http", "settings": {"url": "http://127.0.0.1:9/hook"}}"#,
        "",
    );
    let namespace = wal_namespaces::parse(&text, "test").unwrap();
    let dir = std::env::temp_dir().join(unique("quiet-producer"));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join(format!("{}.json", namespace.name)), &text).unwrap();
    let log = dir.join("producer.log");
    let mut producer = ProducerProcess::start_logging_to(&dir, Duration::from_secs(2), &log).await;
    let client = WriteAheadLogClient::new(producer.channel.clone());
    let _shown = ShowLogOnFailure(&log);

    let written = write_through_kafka_restarts(client.clone(), &namespace.name).await;
    assert!(!written.is_empty(), "writes were answered TRUE meanwhile");
    eventually(Duration::from_secs(60), "writes TRUE again", || async {
        let answer = client
            .clone()
            .write_to_log(write(&namespace.name, b"after"))
            .await
            .ok()?;
        (answer.get_ref().durable() == Trilean::True).then_some(())
    })
    .await;
    producer.kill();

    assert_quiet(&log, MOST);
}
