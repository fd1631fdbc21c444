//! The consumer after an SQS outage: ElasticMQ is stopped for a minute while the consumer runs,
//! then started again; entries written once it stores writes again are applied within seconds. Alone in its
//! binary: it stops a shared service.
//!
//! The stack's ElasticMQ keeps its queues and messages in a database (as SQS keeps them), so the
//! namespace's queues are there again when it answers: nothing provisions them again here.

#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::time::{Duration, Instant};

use wal_namespaces::Backend;
use wal_testkit::{Cql, Fleet, arrival, cql_target, env_u64, eventually, put};
use wal_testkit::{namespace_with_target, write, write_true, write_until_true};

/// How long entries written after SQS returned may take to be applied: seconds against
/// minutes, with a wide margin for this shared 2-core machine's noise.
const RECOVERY_BOUND: Duration = Duration::from_secs(30);
const AFTER: usize = 20;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn entries_written_after_a_minute_long_sqs_outage_are_applied_within_seconds() {
    let outage = Duration::from_secs(env_u64("WAL_OUTAGE_SECS", 60));
    let cql = Cql::connect().await;
    let table = cql.table().await;
    let fleet = Fleet::start(namespace_with_target(
        Backend::Sqs,
        2,
        &cql_target(&table),
        "",
    ))
    .await;
    let (name, producer) = (fleet.name(), &fleet.producer);

    write_true(&producer.client, write(name, &put("before", "up"))).await;
    eventually(
        Duration::from_secs(60),
        "the row written before",
        || async { (cql.count(&table).await == 1).then_some(()) },
    )
    .await;

    wal_testkit::outage("elasticmq", outage).await;

    // ElasticMQ answers before it has restored its queues (README, "The local stack"): a write
    // in that moment is refused FALSE, nothing stored (seen in CI). SQS is back for writers once
    // a write is stored; the entries count from there.
    write_until_true(
        &producer.client,
        Duration::from_secs(60),
        "ElasticMQ to store writes again",
        || write(name, &put("after0", "up")),
    )
    .await;
    let written = Instant::now();
    for i in 1..AFTER {
        write_true(
            &producer.client,
            write(name, &put(&format!("after{i}"), "up")),
        )
        .await;
    }
    // A stall after the outage fails here.
    let (first, all) = arrival(
        written,
        AFTER,
        RECOVERY_BOUND,
        "entries written after SQS returned, applied,",
        || async { usize::try_from(cql.count(&table).await - 1).unwrap_or(0) },
    )
    .await;
    println!(
        "after SQS returned (outage {outage:?}): of {AFTER} entries written then, first applied \
         {first:?}, all {all:?}"
    );
    fleet.stop().await;
}
