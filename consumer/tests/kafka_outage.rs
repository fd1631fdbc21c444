//! The consumer after a Kafka broker outage: the broker is stopped for a minute while the
//! consumer runs, then started again; entries written once it answers are applied within
//! seconds, as are entries that pass through a delay tier, and the outage is not paid for
//! afterwards. (Before the fix, the errors librdkafka queued during the outage were drained one
//! per second per worker, and delivery stalled for minutes.) Alone in its binary: it stops a
//! shared service.

#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::time::{Duration, Instant};

use wal_namespaces::Backend;
use wal_queue::delay::KAFKA_HOLD_LIMIT;
use wal_testkit::write_until_true;
use wal_testkit::{Cql, Fleet, arrival, cql_target, env_u64, eventually, put};
use wal_testkit::{delayed, namespace_with_target, write, write_true};

/// How long entries written after the broker returned may take to be applied. The point is
/// seconds against minutes: the stall this guards against lasted minutes. Recovery is not
/// instant either: each consumer's group session ran out during the outage, so it joins its
/// group again as a new member, and the coordinator (itself loading the group's state after the
/// restart) waits out the old member's session (10 s) first: 11-15 s here, idle or beside three
/// busy loops (2026-11-29). The rest of the bound is this shared 2-core machine's noise.
const RECOVERY_BOUND: Duration = Duration::from_secs(30);
/// Entries written after the broker answers again.
const AFTER: usize = 50;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn entries_written_after_a_minute_long_broker_outage_are_applied_within_seconds() {
    // WAL_OUTAGE_SECS lengthens or shortens the outage, for measuring by hand.
    let outage = Duration::from_secs(env_u64("WAL_OUTAGE_SECS", 60));
    let cql = Cql::connect().await;
    let table = cql.table().await;
    // Two queues, each with delay tiers (the default delay limits need them): ten workers, as
    // in the drill that found the stall.
    let fleet = Fleet::start(namespace_with_target(
        Backend::Kafka,
        2,
        &cql_target(&table),
        "",
    ))
    .await;
    let (name, producer) = (fleet.name(), &fleet.producer);

    for i in 0..10 {
        write_true(
            &producer.client,
            write(name, &put(&format!("before{i}"), "up")),
        )
        .await;
    }
    eventually(
        Duration::from_secs(60),
        "the rows written before the outage",
        || async { (cql.count(&table).await == 10).then_some(()) },
    )
    .await;

    wal_testkit::outage("kafka", outage).await;
    let back = Instant::now();
    println!("broker answers again (outage {outage:?})");

    // The producer's first TRUE after the broker returned.
    write_until_true(
        &producer.client,
        Duration::from_secs(60),
        "a TRUE write after the broker returned",
        || write(name, &put("first-after", "up")),
    )
    .await;
    let producer_back = back.elapsed();

    // Through a delay tier: the shortest wait that is parked rather than held in memory.
    let tier_delay = KAFKA_HOLD_LIMIT + Duration::from_secs(1);
    write_true(
        &producer.client,
        delayed(
            name,
            &put("via-tier", "up"),
            tier_delay.as_millis() as i64,
            0,
        ),
    )
    .await;
    let tier_written = Instant::now();

    let written = Instant::now();
    for i in 0..AFTER {
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
        "entries written after the broker returned, applied,",
        || after_rows(&cql, &table),
    )
    .await;
    let rows = cql.rows(&table).await;
    for i in 0..AFTER {
        assert_eq!(rows[&format!("after{i}")].as_deref(), Some("up"));
    }

    // The delayed entry comes back from its tier when due, not minutes later.
    eventually(
        tier_delay + RECOVERY_BOUND,
        "the entry delayed through a delay tier",
        || async { rows_has(&cql, &table, "via-tier").await.then_some(()) },
    )
    .await;
    let tier = tier_written.elapsed();
    println!(
        "after the broker returned: producer's first TRUE {producer_back:?}; \
         of {AFTER} entries written then, first applied {first:?}, all {all:?}; \
         an entry delayed {tier_delay:?} through a tier applied {tier:?} after its write"
    );
    fleet.stop().await;
}

async fn rows_has(cql: &Cql, table: &str, id: &str) -> bool {
    cql.rows(table).await.contains_key(id)
}

/// How many of the entries written after the outage are rows.
async fn after_rows(cql: &Cql, table: &str) -> usize {
    let rows = cql.rows(table).await;
    (0..AFTER)
        .filter(|i| rows.contains_key(&format!("after{i}")))
        .count()
}
