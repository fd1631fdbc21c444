//! One write delivered to three stores (a table, a cache of its rows, an events topic) against
//! the same write delivered to the table alone, and against the service writing the three stores
//! itself, side by side in one run on the local stack.
//!
//! The consumer sides read entries already on a Kafka queue (4 partitions): "one" delivers them
//! to a Cassandra table (the namespace's target); "three" delivers them to the table and to two
//! further destinations, a memcached cache of the rows and a Kafka topic, each read by a
//! consumer group of its own. The baseline is what a service would do instead of the WAL: for
//! each row, a prepared INSERT, a memcached set and an rdkafka produce (acks=all), from as many
//! concurrent tasks as the consumer has entries in flight. Rates are from the first delivery
//! to the last (every destination's), so the groups' joins are not counted. CPU is this
//! process's: the consumer's, or the service's client work. Each figure is the median of rounds
//! that alternate the order of the sides, after an untimed warm-up. Run with:
//!     scripts/stack up && cargo bench -p wal-consumer --bench several_stores
//! Tunables (environment): BENCH_ENTRIES (20000), BENCH_CONCURRENCY (64), BENCH_ROUNDS (5).

#![allow(clippy::expect_used, clippy::unwrap_used)]

/// The allocator the consumer's binary runs with (see its `main.rs`); every side runs with it.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use memcache::exp::AsyncMetaClient;
use rdkafka::producer::{FutureProducer, FutureRecord};
use scylla::client::session::Session;
use wal_consumer::{Consumer, ConsumerOptions};
use wal_queue::entry;
use wal_testkit::cql_rows::{self, KEYSPACE, Round, count, fill_topic, value};
use wal_testkit::measure::{cpu_seconds, median};
use wal_testkit::stack;

/// One side's figures: entries per second, and this process's CPU per entry in microseconds.
#[derive(Debug, Clone, Copy)]
struct Side {
    rate: f64,
    cpu_micros: f64,
}

/// A fresh topic for the events destination, or for the service's own events.
async fn events_topic(name: &str) -> String {
    use wal_queue::Produce as _;
    let topic = format!("bench-stores-{}-{name}", std::process::id());
    let backend = wal_queue::kafka::KafkaBackend::new(wal_queue::kafka::KafkaSettings::new(
        &stack::kafka_bootstrap(),
    ))
    .unwrap();
    let spec = wal_queue::QueueSpec::new("bench", &topic, &format!("{topic}-dlq"));
    backend.queue(spec).provision().await.unwrap();
    topic
}

/// The consumer over a full queue, delivering to the table alone or (`stores`) to the table,
/// a cache of its rows and an events topic.
async fn consumer_round(session: &Session, round: Round, stores: bool) -> Side {
    let side = if stores { "three" } else { "one" };
    let table = round.table(session, side).await;
    let topic = format!("bench-stores-{}-{side}-{}", std::process::id(), round.index);
    fill_topic(&topic, &topic, &table, round.entries, true).await;
    let destinations = if stores {
        let events = events_topic(&format!("events-{}", round.index)).await;
        format!(
            r#", "destinations": [
                {{"name": "cache", "start_from": "earliest", "target": {{"kind": "cache", "settings": {{"rows": {{"key": ["id"], "prefix": "{topic}:"}}}}}}}},
                {{"name": "events", "start_from": "earliest", "target": {{"kind": "kafka", "settings": {{"topic": "{events}"}}}}}}]"#
        )
    } else {
        String::new()
    };
    let config = format!(
        r#"{{"namespace": "{topic}", "persistence_configurations": {{"persistence_configuration": [
            {{"physical_storage": {{"type": "KAFKA"}}, "config": {{"wal-kafka-topics": ["{topic}"], "wal-kafka-dlq-topics": ["{topic}-dlq"]}}}}]}}{destinations}}}"#
    );
    let namespace = wal_namespaces::parse(&config, "bench").unwrap();
    let mut options = ConsumerOptions::for_local_stack(PathBuf::new());
    options.max_in_flight = u32::try_from(round.concurrency).unwrap();
    options.provision = false;
    let consumer = Consumer::start(&options.settings().unwrap(), vec![namespace])
        .await
        .unwrap();
    let deliverer = Arc::clone(consumer.deliverer());
    let handle = consumer.spawn();
    let delivered = || deliverer.stats().delivered.load(Ordering::Relaxed) as usize;
    while delivered() == 0 {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let (first, from, cpu) = (Instant::now(), delivered(), cpu_seconds());
    let expected = if stores {
        3 * round.entries
    } else {
        round.entries
    };
    let deadline = Instant::now() + Duration::from_secs(600);
    while delivered() < expected {
        let stats = deliverer.stats();
        assert_eq!(
            stats.dead_lettered.load(Ordering::Relaxed),
            0,
            "nothing dead-lettered"
        );
        assert!(Instant::now() < deadline, "not delivered in 10 minutes");
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let (elapsed, cpu) = (first.elapsed(), cpu_seconds() - cpu);
    handle.shutdown().await;
    assert_eq!(count(session, &table).await, round.entries as i64);
    // The entries delivered before the clock started are left out, in their share of the work.
    let applied = (expected - from) as f64 * round.entries as f64 / expected as f64;
    Side {
        rate: applied / elapsed.as_secs_f64(),
        cpu_micros: cpu * 1e6 / applied,
    }
}

/// The service writing the three stores itself: per row an INSERT, a memcached set and a
/// produce acknowledged by every in-sync replica, the three at once, `concurrency` rows at a
/// time. `timed` is false for the warm-up.
async fn service_round(session: &Arc<Session>, round: Round) -> Side {
    use futures::StreamExt as _;
    let table = round.table(session, "service").await;
    let events = events_topic(&format!("service-{}", round.index)).await;
    let insert = session
        .prepare(format!(
            "INSERT INTO {KEYSPACE}.{table} JSON ? DEFAULT UNSET USING TIMESTAMP ?"
        ))
        .await
        .unwrap();
    let cache = Arc::new(
        AsyncMetaClient::connect(stack::memcached()[0].as_str())
            .await
            .unwrap(),
    );
    let producer: FutureProducer = rdkafka::ClientConfig::new()
        .set("bootstrap.servers", stack::kafka_bootstrap())
        .set("acks", "all")
        .set("linger.ms", "5")
        .create()
        .unwrap();
    let written = entry::now_micros();
    let (started, cpu) = (Instant::now(), cpu_seconds());
    futures::stream::iter(0..round.entries)
        .for_each_concurrent(round.concurrency, |i| {
            let (session, insert, cache, producer) = (session, &insert, &cache, &producer);
            let (table, events) = (&table, &events);
            async move {
                let row = format!(r#"{{"id":"row{i}","value":"{}"}}"#, value(i));
                let key = format!("row{i}");
                let payload = format!(r#"{{"mutations":[{{"put":{{"row":{row}}}}}]}}"#);
                let at = written + i as i64;
                let (inserted, cached, produced) = tokio::join!(
                    session.execute_unpaged(insert, (row.as_str(), at)),
                    cache.set(format!("{table}:{key}"), row.as_bytes()).send(),
                    producer.send(
                        FutureRecord::to(events).key(&key).payload(&payload),
                        Duration::from_secs(30)
                    ),
                );
                inserted.unwrap();
                assert!(cached.unwrap().stored(), "memcached stored the row");
                produced.map_err(|(e, _)| e).unwrap();
            }
        })
        .await;
    let side = Side {
        rate: round.entries as f64 / started.elapsed().as_secs_f64(),
        cpu_micros: (cpu_seconds() - cpu) * 1e6 / round.entries as f64,
    };
    assert_eq!(count(session, &table).await, round.entries as i64);
    side
}

#[tokio::main]
async fn main() {
    let (rounds, all) = Round::from_env(5, 20_000);
    let session = cql_rows::session().await;
    println!("several stores: {all}, {rounds} rounds");
    service_round(&session, all).await;
    let (mut one, mut three, mut service) = (Vec::new(), Vec::new(), Vec::new());
    for round in 0..rounds {
        let this = Round {
            index: round,
            ..all
        };
        // Rotate the order, so no side always meets a fresher Cassandra.
        let mut sides = [None; 3];
        for turn in 0..3 {
            match (round + turn) % 3 {
                0 => sides[0] = Some(consumer_round(&session, this, false).await),
                1 => sides[1] = Some(consumer_round(&session, this, true).await),
                _ => sides[2] = Some(service_round(&session, this).await),
            }
        }
        let [Some(o), Some(t), Some(s)] = sides else {
            unreachable!()
        };
        println!(
            "  round {round}: one store {:>6.0}/s ({:>5.1} µs CPU/entry)   three stores {:>6.0}/s ({:>5.1} µs CPU/entry, {:>5.1} per entry and store)   service writing the three {:>6.0}/s ({:>5.1} µs CPU/row)",
            o.rate,
            o.cpu_micros,
            t.rate,
            t.cpu_micros,
            t.cpu_micros / 3.0,
            s.rate,
            s.cpu_micros
        );
        one.push(o);
        three.push(t);
        service.push(s);
    }
    let med =
        |sides: &[Side], f: fn(&Side) -> f64| median(&mut sides.iter().map(f).collect::<Vec<_>>());
    let (one_rate, three_rate, service_rate) = (
        med(&one, |s| s.rate),
        med(&three, |s| s.rate),
        med(&service, |s| s.rate),
    );
    let (one_cpu, three_cpu, service_cpu) = (
        med(&one, |s| s.cpu_micros),
        med(&three, |s| s.cpu_micros),
        med(&service, |s| s.cpu_micros),
    );
    println!(
        "median:   one store {one_rate:>6.0}/s ({one_cpu:>5.1} µs CPU/entry)   three stores {three_rate:>6.0}/s ({three_cpu:>5.1} µs CPU/entry, {:>5.1} per entry and store)   service writing the three {service_rate:>6.0}/s ({service_cpu:>5.1} µs CPU/row)",
        three_cpu / 3.0
    );
    println!(
        "ratios:   three stores / one store: rate {:.2}, CPU per entry {:.2}   three stores / service writing the three: rate {:.2}, CPU {:.2}",
        three_rate / one_rate,
        three_cpu / one_cpu,
        three_rate / service_rate,
        three_cpu / service_cpu
    );
    wal_testkit::delete_topics(&format!("bench-stores-{}-", std::process::id())).await;
}
