//! The platform on a CQL cluster with authentication and TLS on: the local stack's
//! `cassandra-auth`, reached through a cluster map whose shard logs in with a `${file:...}`
//! password over TLS. Claim checks go to durable storage there and cql targets write there; a
//! wrong password or an untrusted certificate stops the producer at start-up with an error that
//! names the nodes and the reason, never the password; the consumer holds its deliveries.

#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::sync::atomic::Ordering;
use std::time::Duration;

use std::path::Path;

use wal_producer::{Producer, ProducerOptions};
use wal_testkit::secured::{
    auth_cql_cluster_map, cql_auth_ca, cql_auth_login, cql_auth_nodes, cql_auth_place,
};
use wal_testkit::{
    Backend, Cql, cql_target, eventually, namespace_json, put, unique, with_durable_storage, write,
    write_true,
};

fn folder() -> std::path::PathBuf {
    std::env::temp_dir().join(unique("cql-auth"))
}

/// A namespace on Kafka delivering to `table` with durable storage in its own keyspace, both on
/// the cluster map's default CQL shard.
fn namespace_on_default_shard(table: &str) -> wal_namespaces::Namespace {
    let keyspace = unique("wal_auth").replace('-', "_");
    let config = with_durable_storage(
        &namespace_json(Backend::Kafka, 1, &cql_target(table), ""),
        &keyspace,
    );
    wal_namespaces::parse(&config, "test").unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claim_checks_and_cql_deliveries_log_in_to_a_shard_with_authentication_on() {
    let (_, password) = cql_auth_login();
    let map = auth_cql_cluster_map(&folder(), &password, &cql_auth_ca());
    let cql = Cql::connect_to(cql_auth_place(&password)).await;
    let table = cql.table().await;
    let namespace = namespace_on_default_shard(&table);

    let fleet = wal_testkit::Fleet::start_on_map(namespace.clone(), &map).await;
    // Over what a record holds (1,000,000 bytes), under the namespace's limit (1 MiB): the body is claim-checked into durable storage on the shard, and
    // the consumer reads it back from there before it applies the row.
    let large = "x".repeat(1_020_000);
    write_true(
        &fleet.producer.client,
        write(&namespace.name, &put("large", &large)),
    )
    .await;
    write_true(
        &fleet.producer.client,
        write(&namespace.name, &put("small", "s")),
    )
    .await;
    let rows = eventually(Duration::from_secs(60), "both rows applied", || async {
        let rows = cql.rows(&table).await;
        (rows.len() == 2).then_some(rows)
    })
    .await;
    assert_eq!(rows["large"].as_deref().map(str::len), Some(large.len()));
    assert_eq!(rows["small"].as_deref(), Some("s"));
    fleet.stop().await;
}

/// Starts an in-process producer with durable storage on the map's default shard, which must
/// fail; returns its error as an operator reads it.
async fn producer_start_error(map: &Path) -> String {
    let mut options = ProducerOptions::for_local_stack(std::path::PathBuf::new());
    options.brokers.clusters = Some(map.to_owned());
    let settings = options.settings().unwrap();
    let namespace = namespace_on_default_shard("t");
    match Producer::start(&settings, vec![namespace]).await {
        Ok(_) => panic!("a producer started with the cluster map {}", map.display()),
        Err(error) => format!("{error:#}"),
    }
}

#[tokio::test]
async fn a_wrong_cql_password_stops_the_producer_at_start_without_printing_it() {
    let wrong = format!("not-{}", unique("the-password"));
    let map = auth_cql_cluster_map(&folder(), &wrong, &cql_auth_ca());
    let error = producer_start_error(&map).await;
    assert!(
        error.contains(&cql_auth_nodes()[0]) && error.to_lowercase().contains("authentication"),
        "{error}"
    );
    assert!(!error.contains(&wrong), "the password is in: {error}");
}

#[tokio::test]
async fn a_node_certificate_from_another_ca_stops_the_producer_at_start() {
    let other = wal_testkit::pki::Pki::new("not the nodes' CA");
    let map = auth_cql_cluster_map(&folder(), &cql_auth_login().1, &other.ca_path());
    let error = producer_start_error(&map).await;
    assert!(error.contains(&cql_auth_nodes()[0]), "{error}");
    assert!(error.to_lowercase().contains("certificate"), "{error}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_password_holds_cql_deliveries_until_a_restart_with_the_right_one() {
    let (_, password) = cql_auth_login();
    let dir = folder();
    let wrong = format!("not-{}", unique("the-password"));
    let map = auth_cql_cluster_map(&dir, &wrong, &cql_auth_ca());
    let cql = Cql::connect_to(cql_auth_place(&password)).await;
    let table = cql.table().await;
    // No durable storage: the producer needs no CQL, and takes the stack's defaults. Quick
    // retries, two attempts: a refused login counted as an attempt would be dead-lettered long
    // before the wait below is over.
    let quick = r#""retry_policy": {"max_attempts": 2, "initial_backoff_ms": 20, "multiplier": 2.0, "max_backoff_ms": 100, "jitter": 0.0}"#;
    let config = namespace_json(Backend::Kafka, 1, &cql_target(&table), quick);
    let namespace = wal_namespaces::parse(&config, "test").unwrap();
    let mut producer = wal_testkit::TestProducer::start(vec![namespace.clone()]).await;
    let consumer = wal_testkit::start_consumer_with(vec![namespace.clone()], |o| {
        o.brokers.clusters = Some(map.clone())
    })
    .await;
    write_true(&producer.client, write(&namespace.name, &put("held", "h"))).await;
    // The consumer tried the session and holds the entry: the target's breaker is open. (A
    // wait alone would pass on a consumer that never tried.)
    let deliverer = consumer.deliverer();
    wal_testkit::eventually(
        Duration::from_secs(30),
        "the refused login holding the entry",
        || async { (!deliverer.targets().open_breakers().is_empty()).then_some(()) },
    )
    .await;
    // Then long enough for several probes of the session, had a refused login counted as an
    // attempt (two, 20 ms apart).
    tokio::time::sleep(Duration::from_secs(5)).await;
    let stats = deliverer.stats();
    assert!(stats.held.load(Ordering::Relaxed) > 0, "the entry was held");
    assert_eq!(stats.retried.load(Ordering::Relaxed), 0, "no attempt used");
    assert_eq!(stats.dead_lettered.load(Ordering::Relaxed), 0);
    assert_eq!(cql.count(&table).await, 0);
    let dlq = &namespace.queues[0].dlq;
    let dead = wal_testkit::kafka_log_on(&wal_testkit::kafka_bootstrap(), dlq).await;
    assert!(dead.is_empty(), "a refused login dead-lettered the entry");
    consumer.shutdown().await;

    // The operator fixes the Secret and restarts the consumer.
    let map = auth_cql_cluster_map(&dir, &password, &cql_auth_ca());
    let consumer = wal_testkit::start_consumer_with(vec![namespace.clone()], |o| {
        o.brokers.clusters = Some(map.clone())
    })
    .await;
    let rows = eventually(
        Duration::from_secs(60),
        "the held entry applied",
        || async {
            let rows = cql.rows(&table).await;
            (!rows.is_empty()).then_some(rows)
        },
    )
    .await;
    assert_eq!(rows["held"].as_deref(), Some("h"));
    consumer.shutdown().await;
    producer.shutdown().await;
}
