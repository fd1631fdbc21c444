//! The consumer after an SQS outage: ElasticMQ is stopped for a minute while the consumer runs,
//! then started again; entries written once it answers are applied within seconds. Alone in its
//! binary: it stops a shared service.
//!
//! The stack's ElasticMQ keeps its queues and messages in a database (as SQS keeps them), so the
//! namespace's queues are there again when it answers: nothing provisions them again here.

#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::time::{Duration, Instant};

use wal_namespaces::Backend;
use wal_testkit::{Cql, Restart, cql_target, env_u64, eventually, put, stack, start_consumer};
use wal_testkit::{TestProducer, namespace_with_target, write, write_true};

/// How long entries written after SQS returned may take to be applied: seconds against
/// minutes, with a wide margin for this shared 2-core machine's noise.
const RECOVERY_BOUND: Duration = Duration::from_secs(30);
const AFTER: usize = 20;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn entries_written_after_a_minute_long_sqs_outage_are_applied_within_seconds() {
    let outage = Duration::from_secs(env_u64("WAL_OUTAGE_SECS", 60));
    let cql = Cql::connect().await;
    let table = cql.table().await;
    let namespace = namespace_with_target(Backend::Sqs, 2, &cql_target(&table), "");
    let name = namespace.name.clone();
    let mut producer = TestProducer::start(vec![namespace.clone()]).await;
    let consumer = start_consumer(vec![namespace.clone()]).await;

    write_true(&producer.client, write(&name, &put("before", "up"))).await;
    eventually(
        Duration::from_secs(60),
        "the row written before",
        || async { (cql.count(&table).await == 1).then_some(()) },
    )
    .await;

    stack("down", "elasticmq");
    let restart = Restart("elasticmq");
    tokio::time::sleep(outage).await;
    drop(restart);

    let mut written = None;
    for i in 0..AFTER {
        write_true(
            &producer.client,
            write(&name, &put(&format!("after{i}"), "up")),
        )
        .await;
        written.get_or_insert_with(Instant::now);
    }
    let written = written.unwrap();
    let mut first = None;
    loop {
        let count = cql.count(&table).await - 1;
        if count > 0 && first.is_none() {
            first = Some(written.elapsed());
        }
        if count == AFTER as i64 {
            break;
        }
        assert!(
            written.elapsed() < RECOVERY_BOUND,
            "{count} of {AFTER} entries written after SQS returned were applied within \
             {RECOVERY_BOUND:?}: the consumer stalls after an SQS outage"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    println!(
        "after SQS returned (outage {outage:?}): of {AFTER} entries written then, first applied \
         {:?}, all {:?}",
        first.unwrap_or_default(),
        written.elapsed()
    );
    consumer.shutdown().await;
    producer.shutdown().await;
}
