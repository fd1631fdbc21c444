//! A namespace with several destinations: each gets every entry once, whatever copies another
//! destination puts back on the queue. Here the namespace's own target parks delayed entries on
//! Kafka's delay tiers; the copies come back to the topic marked for it, and the events store,
//! which waited for their deliver-at in memory, skips them.

use std::sync::atomic::Ordering;
use std::time::Duration;

use wal_namespaces::Backend;
use wal_proto::v1::{Lifecycle, WriteToLogRequest};
use wal_testkit::{Cql, TestProducer, cql_target, eventually, namespace_with_target, put};
use wal_testkit::{Upstream, namespace_json, with_durable_storage};
use wal_testkit::{start_consumer, topic_records, unique, write, write_true};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_parked_copy_of_the_namespace_target_never_reaches_a_store() {
    const WRITES: usize = 10;
    let cql = Cql::connect().await;
    let table = cql.table().await;
    let topic = unique("events");
    wal_testkit::provision_topic(&topic).await;
    let extra = format!(
        r#""destinations": [{{"name": "events", "start_from": "earliest",
            "target": {{"kind": "kafka", "settings": {{"topic": "{topic}"}}}}}}]"#
    );
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

/// A write may wait for its destinations: the answer names each, applied or pending. Here the
/// table and the events topic apply it; the hook store's upstream answers 503, so its breaker
/// holds the entry and it stays pending. The call's deadline (3 s) is shorter than the wait it
/// asks for (10 s): the producer answers within the deadline, so the call succeeds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_awaiting_its_destinations_hears_which_applied_it_within_its_deadline() {
    use wal_proto::v1::DestinationState;

    let cql = Cql::connect().await;
    let table = cql.table().await;
    let topic = unique("events");
    wal_testkit::provision_topic(&topic).await;
    let hook = Upstream::start(|_| 503).await;
    let extra = format!(
        r#""destinations": [
            {{"name": "events", "start_from": "earliest", "target": {{"kind": "kafka", "settings": {{"topic": "{topic}"}}}}}},
            {{"name": "hook", "start_from": "earliest", "target": {}}}]"#,
        hook.target()
    );
    let text = with_durable_storage(
        &namespace_json(Backend::Kafka, 1, &cql_target(&table), &extra),
        "wal_stores_test",
    );
    let namespace = wal_namespaces::parse(&text, "test").unwrap();
    let mut producer = TestProducer::start(vec![namespace.clone()]).await;
    let consumer = start_consumer(vec![namespace.clone()]).await;

    let mut request = tonic::Request::new(WriteToLogRequest {
        key: "o1".into(),
        await_destinations_millis: 10_000,
        ..write(&namespace.name, &put("o1", "v"))
    });
    request.set_timeout(Duration::from_secs(3));
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
        ]
    );
    assert_eq!(
        cql.rows(&table).await.len(),
        1,
        "applied means in the table"
    );
    assert_eq!(topic_records(&topic).await, 1, "and on the topic");
    consumer.shutdown().await;
    producer.shutdown().await;
}
