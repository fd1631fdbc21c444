//! The consumer after an SQS outage: ElasticMQ is stopped for a minute while the consumer runs,
//! then started again; entries written once it stores writes again are applied within seconds. Alone in its
//! binary: it stops a shared service.
//!
//! The stack's ElasticMQ keeps its queues and messages in a database (as SQS keeps them), so the
//! namespace's queues are there again when it answers: nothing provisions them again here.

#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::time::{Duration, Instant};

use wal_namespaces::Backend;
use wal_proto::v1::Trilean;
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

    // ElasticMQ answers before it has restored its queues (README, "The local stack"): a write
    // in that moment is refused FALSE, nothing stored (seen in CI). SQS is back for writers once
    // a write is stored; the entries count from there.
    eventually(
        Duration::from_secs(60),
        "ElasticMQ to store writes again",
        || {
            let (mut client, request) =
                (producer.client.clone(), write(&name, &put("after0", "up")));
            async move {
                let answer = client.write_to_log(request).await.ok()?.into_inner();
                (answer.durable() == Trilean::True).then_some(())
            }
        },
    )
    .await;
    let written = Instant::now();
    for i in 1..AFTER {
        write_true(
            &producer.client,
            write(&name, &put(&format!("after{i}"), "up")),
        )
        .await;
    }
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
