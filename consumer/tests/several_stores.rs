//! A namespace with several destinations: each gets every entry once, whatever copies another
//! destination puts back on the queue. Here the namespace's own target parks delayed entries on
//! Kafka's delay tiers; the copies come back to the topic marked for it, and the events store,
//! which waited for their deliver-at in memory, skips them.

use std::sync::atomic::Ordering;
use std::time::Duration;

use wal_namespaces::Backend;
use wal_proto::v1::{Lifecycle, WriteToLogRequest};
use wal_testkit::{Cql, TestProducer, cql_target, eventually, namespace_with_target, put};
use wal_testkit::{Upstream, destinations, kafka_store, namespace_json, with_durable_storage};
use wal_testkit::{start_consumer, topic_records, unique, write, write_true};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_parked_copy_of_the_namespace_target_never_reaches_a_store() {
    const WRITES: usize = 10;
    let cql = Cql::connect().await;
    let (table, topic) = table_and_topic(&cql).await;
    let extra = destinations(&[kafka_store("events", &topic, "earliest")]);
    let namespace = namespace_with_target(Backend::Kafka, 1, &cql_target(&table), &extra);
    let mut producer = TestProducer::start(vec![namespace.clone()]).await;
    let consumer = start_consumer(vec![namespace.clone()]).await;
    for i in 0..WRITES {
        let id = format!("o{i}");
        let request = WriteToLogRequest {
            key: id.clone(),
            // Past the consumer's hold limit on Kafka (7 s): the table's reader parks it.
            lifecycle: Some(Lifecycle {
                delay_millis: 15_000,
                ..Lifecycle::default()
            }),
            ..write(&namespace.name, &put(&id, "v"))
        };
        write_true(&producer.client, request).await;
    }
    eventually(
        Duration::from_secs(90),
        "every row in the table",
        || async { (cql.rows(&table).await.len() == WRITES).then_some(()) },
    )
    .await;
    eventually(
        Duration::from_secs(30),
        "every write on the events topic",
        || async { (topic_records(&topic).await >= WRITES).then_some(()) },
    )
    .await;
    let stats = consumer.deliverer().stats();
    let parked = stats.parked.load(Ordering::Relaxed);
    assert!(
        parked >= WRITES as u64,
        "the table's entries waited on a delay tier (parked {parked} times)"
    );
    // The rows came from the parked copies, back on the topic: had the store taken them, their
    // records would follow within moments.
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(
        topic_records(&topic).await,
        WRITES,
        "one record per write: the store skipped the table's parked copies"
    );
    consumer.shutdown().await;
    producer.shutdown().await;
}

/// A write may wait for its destinations: the answer names each, applied, dead-lettered or
/// pending. Here the table and the events topic apply it; the hook store's upstream answers
/// 503, so its breaker holds the entry and it stays pending; the rejects store's answers 400, a
/// permanent failure, so it dead-letters the entry. The call's deadline (15 s) is shorter than
/// the wait it asks for (30 s): the producer answers within the deadline, so the call succeeds.
/// The hook's entry stays pending, so each call takes its whole deadline; it is long because the
/// suite beside it loads the 2-core machine: 3 s passed before the first append to the fresh
/// topic was acknowledged, and 6 s before a consumer had applied the second write (CI,
/// 2026-11-29).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_awaiting_its_destinations_hears_which_applied_it_within_its_deadline() {
    use wal_proto::v1::DestinationState;

    let cql = Cql::connect().await;
    let (table, topic) = table_and_topic(&cql).await;
    let (hook, rejecting) = (
        Upstream::start(|_| 503).await,
        Upstream::start(|_| 400).await,
    );
    let http_store = |name: &str, upstream: &Upstream| {
        let target = upstream.target();
        format!(r#"{{"name": "{name}", "start_from": "earliest", "target": {target}}}"#)
    };
    let stores = [
        kafka_store("events", &topic, "earliest"),
        http_store("hook", &hook),
        http_store("rejects", &rejecting),
    ];
    let extra = destinations(&stores);
    let text = with_durable_storage(
        &namespace_json(Backend::Kafka, 1, &cql_target(&table), &extra),
        "wal_stores_test",
    );
    let namespace = wal_namespaces::parse(&text, "test").unwrap();
    let mut producer = TestProducer::start(vec![namespace.clone()]).await;
    let consumer = start_consumer(vec![namespace.clone()]).await;

    let mut request = tonic::Request::new(WriteToLogRequest {
        key: "o1".into(),
        await_destinations_millis: 30_000,
        ..write(&namespace.name, &put("o1", "v"))
    });
    request.set_timeout(Duration::from_secs(15));
    let answer = producer
        .client
        .clone()
        .write_to_log(request)
        .await
        .expect("answered within the call's deadline")
        .into_inner();
    assert_eq!(
        answer.durable(),
        wal_proto::v1::Trilean::True,
        "{}",
        answer.message
    );
    let states: Vec<(&str, DestinationState)> = answer
        .destinations
        .iter()
        .map(|d| (d.destination.as_str(), d.state()))
        .collect();
    assert_eq!(
        states,
        [
            ("default", DestinationState::Applied),
            ("events", DestinationState::Applied),
            ("hook", DestinationState::Pending),
            ("rejects", DestinationState::DeadLettered),
        ]
    );
    assert_eq!(
        cql.rows(&table).await.len(),
        1,
        "applied means in the table"
    );
    assert_eq!(topic_records(&topic).await, 1, "and on the topic");

    // The Rust client library says the same, from a call of its own (not batched).
    let library =
        wal_client::Client::new(wal_client::Settings::new([producer.address.to_string()])).unwrap();
    let written = library
        .write(
            wal_client::Write::new(namespace.name.as_str(), put("o2", "v"))
                .key("o2")
                .deadline(Duration::from_secs(15))
                .await_destinations(Duration::from_secs(30)),
        )
        .await
        .unwrap();
    assert_eq!(
        written.outcome,
        wal_client::Outcome::True,
        "{}",
        written.message
    );
    let applied = wal_client::Applied::Applied;
    assert_eq!(
        written.destinations,
        [
            ("default".to_owned(), applied),
            ("events".to_owned(), applied),
            ("hook".to_owned(), wal_client::Applied::Pending),
            ("rejects".to_owned(), wal_client::Applied::DeadLettered),
        ]
    );
    consumer.shutdown().await;
    producer.shutdown().await;
}

/// A consumer told which destinations to read (`--destinations`, the chart's group
/// `destinations`) reads those alone: here the events store, and not the table.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_consumer_reads_only_the_destinations_it_is_given() {
    let cql = Cql::connect().await;
    let (table, topic) = table_and_topic(&cql).await;
    let extra = destinations(&[kafka_store("events", &topic, "earliest")]);
    let namespace = namespace_with_target(Backend::Kafka, 1, &cql_target(&table), &extra);
    let mut producer = TestProducer::start(vec![namespace.clone()]).await;
    let consumer = wal_testkit::start_consumer_with(vec![namespace.clone()], |options| {
        options.destinations = vec!["events".to_owned()];
    })
    .await;
    for i in 0..2 {
        let id = format!("o{i}");
        write_true(&producer.client, write(&namespace.name, &put(&id, "v"))).await;
    }
    eventually(
        Duration::from_secs(30),
        "both writes on the events topic",
        || async { (topic_records(&topic).await == 2).then_some(()) },
    )
    .await;
    // A reader of the table would have applied the two rows by now, beside the topic's.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let delivered = consumer
        .deliverer()
        .stats()
        .delivered
        .load(Ordering::Relaxed);
    assert_eq!(delivered, 2, "two deliveries, both to the events store");
    assert!(
        cql.rows(&table).await.is_empty(),
        "the table is another group's"
    );
    consumer.shutdown().await;
    producer.shutdown().await;
}

/// A destination added to a namespace that already has entries starts where it says: one from
/// `earliest` catches up on every entry the topic holds, one from `now` takes only what is
/// written after it first reads.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_destination_added_later_starts_where_it_says() {
    let cql = Cql::connect().await;
    let table = cql.table().await;
    let (all, new) = (unique("events-all"), unique("events-new"));
    for topic in [&all, &new] {
        wal_testkit::provision_topic(topic).await;
    }
    let before = namespace_with_target(Backend::Kafka, 1, &cql_target(&table), "");
    let mut producer = TestProducer::start(vec![before.clone()]).await;
    let consumer = start_consumer(vec![before.clone()]).await;
    for i in 0..3 {
        let id = format!("old{i}");
        write_true(&producer.client, write(&before.name, &put(&id, "v"))).await;
    }
    eventually(
        Duration::from_secs(30),
        "the old rows in the table",
        || async { (cql.rows(&table).await.len() == 3).then_some(()) },
    )
    .await;
    consumer.shutdown().await;

    // The same namespace with two stores added.
    let mut after = before.clone();
    let stores = [
        kafka_store("all", &all, "earliest"),
        kafka_store("new", &new, "now"),
    ];
    let text = namespace_json(
        Backend::Kafka,
        1,
        &cql_target(&table),
        &destinations(&stores),
    );
    after.destinations = wal_namespaces::parse(&text, "test").unwrap().destinations;
    let consumer = start_consumer(vec![after.clone()]).await;
    eventually(
        Duration::from_secs(30),
        "the old entries on the earliest store's topic",
        || async { (topic_records(&all).await == 3).then_some(()) },
    )
    .await;
    // The `now` store reads from where its group first finds the topic's end: write until a
    // late write reaches it (its group's join takes a moment).
    let mut late = 0;
    eventually(
        Duration::from_secs(60),
        "a late write on the now store's topic",
        || {
            late += 1;
            let (client, name) = (producer.client.clone(), after.name.clone());
            let (id, new) = (format!("late{late}"), new.clone());
            async move {
                write_true(&client, write(&name, &put(&id, "v"))).await;
                tokio::time::sleep(Duration::from_millis(500)).await;
                (topic_records(&new).await > 0).then_some(())
            }
        },
    )
    .await;
    eventually(
        Duration::from_secs(30),
        "every late write on the earliest store's topic",
        || async { (topic_records(&all).await == 3 + late).then_some(()) },
    )
    .await;
    let taken = topic_records(&new).await;
    assert!(
        (1..=late).contains(&taken),
        "the now store took {taken} of the {late} late writes and none of the 3 old ones"
    );
    consumer.shutdown().await;
    producer.shutdown().await;
}

/// A fresh table, and a fresh Kafka topic for an events store.
async fn table_and_topic(cql: &Cql) -> (String, String) {
    let table = cql.table().await;
    let topic = unique("events");
    wal_testkit::provision_topic(&topic).await;
    (table, topic)
}
