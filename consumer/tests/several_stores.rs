//! A namespace with several destinations: each gets every entry once, whatever copies another
//! destination puts back on the queue. Here the namespace's own target parks delayed entries on
//! Kafka's delay tiers; the copies come back to the topic marked for it, and the events store,
//! which waited for their deliver-at in memory, skips them.

use std::sync::atomic::Ordering;
use std::time::Duration;

use wal_namespaces::Backend;
use wal_proto::v1::{Lifecycle, WriteToLogRequest};
use wal_testkit::{Cql, TestProducer, cql_target, eventually, namespace_with_target, put};
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
