//! A fault drill, run like the benchmarks: a producer and a consumer in this process on the
//! local stack, a Kafka namespace (two queues, a cql target, the PDS example's retry policy:
//! 8 attempts from 1 s doubling), writers putting unique rows, and Cassandra killed with SIGKILL
//! and kept away for DRILL_OUTAGE_SECS before it is started again. It prints what the outage cost:
//! messages the namespace's topics gained per entry written, entries retried and dead-lettered,
//! the time from Cassandra answering again to the first delivery, and to the last (catch-up),
//! and whether every entry answered TRUE reached Cassandra. Run with:
//!     scripts/stack up && cargo bench -p wal-drills --bench cassandra_outage_drill
//! Tunables (environment): DRILL_OUTAGE_SECS (60), DRILL_WRITERS (8), DRILL_PACE_MS (5, each
//! writer's pause between writes).

#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::collections::BTreeSet;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rdkafka::consumer::{BaseConsumer, Consumer as _};
use tokio_util::sync::CancellationToken;
use wal_namespaces::{Backend, Namespace};
use wal_proto::v1::Trilean;
use wal_queue::delay::tier_topic;
use wal_testkit::{Cql, Restart, cql_target, env_u64, put, stack, start_consumer};
use wal_testkit::{TestProducer, namespace_with_target, write};

const PDS_POLICY: &str = r#""retry_policy": {"max_attempts": 8, "initial_backoff_ms": 1000, "multiplier": 2.0, "max_backoff_ms": 600000, "jitter": 0.3}"#;

/// Every message on the namespace's topics: its queues, their delay tiers and DLQs.
fn messages_on_topics(namespace: &Namespace) -> i64 {
    let consumer: BaseConsumer = rdkafka::ClientConfig::new()
        .set("bootstrap.servers", wal_testkit::kafka_bootstrap())
        .create()
        .unwrap();
    let mut topics = Vec::new();
    for queue in &namespace.queues {
        topics.push(queue.name.clone());
        topics.push(queue.dlq.clone());
        for wait in wal_queue::delay::kafka_tiers(namespace.longest_wait()) {
            topics.push(tier_topic(&queue.name, wait));
        }
    }
    let timeout = Duration::from_secs(10);
    let mut total = 0;
    for topic in topics {
        let metadata = consumer.fetch_metadata(Some(&topic), timeout).unwrap();
        for partition in metadata.topics()[0].partitions() {
            let (low, high) = consumer
                .fetch_watermarks(&topic, partition.id(), timeout)
                .unwrap();
            total += high - low;
        }
    }
    total
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let outage = Duration::from_secs(env_u64("DRILL_OUTAGE_SECS", 60));
    let writers = env_u64("DRILL_WRITERS", 8);
    let pace = Duration::from_millis(env_u64("DRILL_PACE_MS", 5));
    let cql = Cql::connect().await;
    let table = cql.table().await;
    let namespace = namespace_with_target(Backend::Kafka, 2, &cql_target(&table), PDS_POLICY);
    let mut producer = TestProducer::start(vec![namespace.clone()]).await;
    let consumer = start_consumer(vec![namespace.clone()]).await;

    let written = Arc::new(Mutex::new(BTreeSet::new()));
    let stop = CancellationToken::new();
    let mut tasks = Vec::new();
    for w in 0..writers {
        let (mut client, name, stop, written) = (
            producer.client.clone(),
            namespace.name.clone(),
            stop.clone(),
            Arc::clone(&written),
        );
        tasks.push(tokio::spawn(async move {
            let mut n = 0;
            while !stop.is_cancelled() {
                let id = format!("w{w}-{n}");
                n += 1;
                let answer = client.write_to_log(write(&name, &put(&id, "v"))).await;
                if answer.is_ok_and(|a| a.into_inner().durable() == Trilean::True) {
                    written.lock().unwrap().insert(id);
                }
                tokio::time::sleep(pace).await;
            }
        }));
    }
    tokio::time::sleep(Duration::from_secs(10)).await;
    let before_messages = messages_on_topics(&namespace);
    let before_entries = written.lock().unwrap().len() as i64;

    stack("kill", "cassandra");
    let restart = Restart("cassandra");
    tokio::time::sleep(outage).await;
    drop(restart);
    let back = Instant::now();
    stop.cancel();
    for task in tasks {
        task.await.unwrap();
    }
    let entries = written.lock().unwrap().len() as i64;
    let stats = consumer.deliverer().stats();
    let delivered_at_return = stats.delivered.load(Ordering::Relaxed);

    let mut first = None;
    let caught_up = loop {
        let delivered = stats.delivered.load(Ordering::Relaxed);
        if first.is_none() && delivered > delivered_at_return {
            first = Some(back.elapsed());
        }
        let dead = stats.dead_lettered.load(Ordering::Relaxed);
        if (delivered + dead) as i64 >= entries {
            break back.elapsed();
        }
        assert!(
            back.elapsed() < Duration::from_secs(1800),
            "not caught up after 30 minutes"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let rows = cql.rows(&table).await;
    let missing = written
        .lock()
        .unwrap()
        .iter()
        .filter(|id| !rows.contains_key(*id))
        .count();
    let added = messages_on_topics(&namespace) - before_messages;
    let during = entries - before_entries;
    println!("cassandra_outage_drill: Cassandra killed for {outage:?}, {writers} writers");
    println!("  entries answered TRUE            {entries} ({during} from the kill on)");
    println!(
        "  messages added from the kill on  {added} ({:.2} per entry written)",
        added as f64 / during.max(1) as f64
    );
    println!(
        "  retried {}, dead-lettered {}",
        stats.retried.load(Ordering::Relaxed),
        stats.dead_lettered.load(Ordering::Relaxed)
    );
    println!(
        "  after Cassandra answered: first delivery {:?}, caught up {caught_up:?}",
        first.unwrap_or_default()
    );
    let total = messages_on_topics(&namespace);
    println!(
        "  all messages on the topics       {total} ({:.2} per entry written)",
        total as f64 / entries.max(1) as f64
    );
    println!("  TRUE entries not in Cassandra    {missing}");
    consumer.shutdown().await;
    producer.shutdown().await;
}
