//! The copies the platform asks of what it creates (the flags' or the cluster map's replication
//! settings): refused at start-up when the cluster cannot hold them, set on the topics it
//! creates. The suite's stacks have one broker and one node, the clustered stack three: the
//! refusals ask for nine, more than either.

#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::path::PathBuf;
use std::time::Duration;

use rdkafka::admin::{AdminClient, AdminOptions, ConfigSource, ResourceSpecifier};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use wal_namespaces::Backend;
use wal_producer::{Producer, ProducerOptions};
use wal_testkit::{kafka_bootstrap, namespace, namespace_json, unique, with_durable_storage};

fn options() -> ProducerOptions {
    ProducerOptions::for_local_stack(PathBuf::new())
}

/// Starts a producer for `namespace`, which must fail; its error as an operator reads it.
async fn start_error(options: &ProducerOptions, namespace: wal_namespaces::Namespace) -> String {
    let settings = options.settings().unwrap();
    match Producer::start(&settings, vec![namespace]).await {
        Ok(_) => panic!("a producer started"),
        Err(error) => format!("{error:#}"),
    }
}

#[tokio::test]
async fn more_copies_than_the_cluster_has_brokers_stop_the_producer_at_start_naming_the_setting() {
    let mut options = options();
    options.brokers.kafka_replication_factor = Some(9);
    let error = start_error(&options, namespace(Backend::Kafka, 1, "")).await;
    assert!(
        error.contains("Kafka cluster 'default'")
            && error.contains(&kafka_bootstrap())
            && error.contains("fewer than the 9 copies of each topic")
            && error.contains("--kafka-replication-factor"),
        "{error}"
    );
}

#[tokio::test]
async fn more_copies_in_sync_than_a_topic_has_are_refused_naming_the_flag() {
    let mut options = options();
    options.brokers.kafka_replication_factor = Some(1);
    options.brokers.kafka_min_insync_replicas = Some(2);
    let error = options.settings().unwrap_err().to_string();
    assert!(
        error.contains("--kafka-min-insync-replicas")
            && error.contains("2: expected 1 to replication_factor (1)"),
        "{error}"
    );
}

#[tokio::test]
async fn durable_storage_asking_more_copies_than_the_ring_has_nodes_is_refused() {
    let mut options = options();
    options.cql.cql_replication_factor = Some(9);
    let keyspace = unique("copies").replace('-', "_");
    let text = with_durable_storage(
        &namespace_json(Backend::Kafka, 1, &wal_testkit::cql_target("t"), ""),
        &keyspace,
    );
    let error = start_error(&options, wal_namespaces::parse(&text, "test").unwrap()).await;
    assert!(
        error.contains(&format!("fewer than the 9 copies of keyspace '{keyspace}'"))
            && error.contains("--cql-replication-factor"),
        "{error}"
    );
}

#[tokio::test]
async fn the_topics_it_creates_keep_the_copies_in_sync_it_asks_for() {
    let mut options = options();
    options.brokers.kafka_min_insync_replicas = Some(1);
    let settings = options.settings().unwrap();
    let namespace = namespace(Backend::Kafka, 1, "");
    let topic = namespace.queues[0].name.clone();
    let producer = Producer::start(&settings, vec![namespace]).await.unwrap();

    let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
        .set("bootstrap.servers", kafka_bootstrap())
        .create()
        .unwrap();
    let options = AdminOptions::new().request_timeout(Some(Duration::from_secs(10)));
    let described = admin
        .describe_configs([&ResourceSpecifier::Topic(&topic)], &options)
        .await
        .unwrap();
    let config = described[0].as_ref().unwrap();
    let entry = config.get("min.insync.replicas").unwrap();
    assert_eq!(entry.value.as_deref(), Some("1"));
    // Set on the topic, not the broker's default showing through.
    assert_eq!(entry.source, ConfigSource::DynamicTopic, "{entry:?}");
    drop(producer);
}

#[tokio::test]
async fn a_file_cluster_with_enough_copies_takes_the_flags_copies_in_sync() {
    let map = std::env::temp_dir().join(format!("{}.json", unique("clusters")));
    std::fs::write(
        &map,
        r#"{"kafka": {"default": "main", "clusters": {"main": {"bootstrap_servers": "a:9092", "replication_factor": 3}}}}"#,
    )
    .unwrap();
    let mut options = options();
    options.brokers.clusters = Some(map.clone());
    options.brokers.kafka_min_insync_replicas = Some(2);
    let main = options
        .settings()
        .unwrap()
        .clusters
        .kafka(None)
        .unwrap()
        .clone();
    assert_eq!(
        (main.replication_factor, main.min_insync_replicas),
        (3, Some(2))
    );

    // A cluster the flags' two in sync cannot hold is named, and the flag it took them from.
    std::fs::write(
        &map,
        r#"{"kafka": {"default": "main", "clusters": {"main": {"bootstrap_servers": "a:9092", "replication_factor": 1}}}}"#,
    )
    .unwrap();
    let error = options.settings().unwrap_err().to_string();
    assert!(
        error.contains("kafka.clusters.main.min_insync_replicas")
            && error.contains("the value of --kafka-min-insync-replicas"),
        "{error}"
    );
    std::fs::remove_file(&map).unwrap();
}
