//! The data-loss-prevention persona: Cassandra is stopped for 30 s while writes keep coming.
//! Every write is still answered TRUE (the queue holds it), the consumer retries with backoff,
//! and once Cassandra is back every row is there. Alone in its binary: it stops a shared service.

#![allow(clippy::expect_used, clippy::unwrap_used)]

mod support;

use std::cell::Cell;
use std::time::{Duration, Instant};

use support::producer::{TestProducer, namespace_with_target, write};
use support::{Cql, Restart, cql_target, eventually, put, stack, start_consumer};
use wal_namespaces::Backend;
use wal_proto::v1::Trilean;

const OUTAGE: Duration = Duration::from_secs(30);
/// Enough attempts to outlast the outage and the restart: waits of 0.5, 1, 2, 4, then 5 s.
const PATIENT: &str = r#""retry_policy": {"max_attempts": 40, "initial_backoff_ms": 500, "multiplier": 2.0, "max_backoff_ms": 5000, "jitter": 0.2}"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_made_while_cassandra_is_down_are_all_applied_when_it_returns() {
    let cql = Cql::connect().await;
    let table = cql.table().await;
    let namespace = namespace_with_target(Backend::Kafka, 1, &cql_target(&table), PATIENT);
    let name = namespace.name.clone();
    let mut producer = TestProducer::start(vec![namespace.clone()]).await;
    let consumer = start_consumer(vec![namespace]).await;

    let mut expected = 0;
    for i in 0..10 {
        producer
            .client
            .write_to_log(write(&name, &put(&format!("before{i}"), "up")))
            .await
            .unwrap();
        expected += 1;
    }
    eventually(
        Duration::from_secs(60),
        "the rows written before the outage",
        || async { (cql.rows(&table).await.len() == expected).then_some(()) },
    )
    .await;

    stack("down", "cassandra");
    let restart = Restart("cassandra");
    let started = Instant::now();
    let mut during = 0;
    while started.elapsed() < OUTAGE {
        let answer = producer
            .client
            .write_to_log(write(&name, &put(&format!("during{during}"), "down")))
            .await
            .unwrap()
            .into_inner();
        assert_eq!(
            answer.durable(),
            Trilean::True,
            "the queue takes writes while the database is down"
        );
        during += 1;
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    drop(restart);
    let back = Instant::now();

    let first = Cell::new(None);
    let rows = eventually(
        Duration::from_secs(180),
        "every row after Cassandra returned",
        || {
            let (first, cql, table) = (&first, &cql, &table);
            async move {
                let rows = cql
                    .session
                    .query_unpaged("SELECT now() FROM system.local", &[])
                    .await
                    .ok()?;
                drop(rows);
                let rows = cql.rows(table).await;
                if rows.len() > expected && first.get().is_none() {
                    first.set(Some(back.elapsed()));
                }
                (rows.len() == expected + during).then_some(rows)
            }
        },
    )
    .await;
    println!(
        "after Cassandra answered again: first entry of the outage applied {:?}, all {during} {:?}",
        first.get().unwrap_or_default(),
        back.elapsed()
    );
    for i in 0..during {
        assert_eq!(rows[&format!("during{i}")].as_deref(), Some("down"));
    }
    assert!(
        during > 50,
        "writes kept coming through the outage ({during})"
    );
    consumer.shutdown().await;
    producer.shutdown().await;
}
