//! Two Kafka clusters of the local stack (`kafka` and `kafka2`) in one cluster map: a namespace
//! on each, applied to the control plane, written through one producer and delivered by one
//! consumer. Each entry is on its own cluster's topic and on no other; names the map does not
//! have are refused by validate and apply, with the names it knows.

#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::time::Duration;

use serde_json::Value;
use tonic::Code;
use wal_namespaces::{Backend, Namespace};
use wal_proto::v1::ApplyRequest;
use wal_testkit::{SECOND_CLUSTER, Upstream, apply_config, control_plane, eventually};
use wal_testkit::{kafka_bootstrap, kafka_log_on, kafka2_bootstrap, namespace_json};
use wal_testkit::{write, write_true};

/// A namespace config delivering to `upstream`, its queue on `cluster` (None: the default).
fn config_on(upstream: &Upstream, cluster: Option<&str>) -> String {
    let mut config: Value =
        serde_json::from_str(&namespace_json(Backend::Kafka, 1, &upstream.target(), "")).unwrap();
    if let Some(cluster) = cluster {
        config["persistence_configurations"]["persistence_configuration"][0]["config"]["wal.kafka.bootstrap.servers.prefix"] =
            Value::from(cluster);
    }
    config.to_string()
}

/// The ids of the entries on `namespace`'s topic on the cluster at `bootstrap`.
async fn ids_on(bootstrap: &str, namespace: &Namespace) -> Vec<String> {
    let log = kafka_log_on(bootstrap, &namespace.queues[0].name).await;
    log.into_iter().map(|entry| entry.id).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_namespace_writes_to_its_own_cluster_and_is_delivered() {
    let upstream = Upstream::start(|_| 200).await;
    let mut registry = control_plane().await;
    let main = apply_config(&mut registry, &config_on(&upstream, None)).await;
    let second = apply_config(&mut registry, &config_on(&upstream, Some(SECOND_CLUSTER))).await;

    // One producer and one consumer serve both.
    let both = vec![main.clone(), second.clone()];
    let mut producer = wal_testkit::TestProducer::start(both.clone()).await;
    let consumer = wal_testkit::start_consumer(both).await;
    let on_main = write_true(&producer.client, write(&main.name, b"to main")).await;
    let on_second = write_true(&producer.client, write(&second.name, b"to second")).await;

    eventually(
        Duration::from_secs(60),
        "both entries delivered",
        || async {
            let ids: Vec<String> = upstream
                .received()
                .iter()
                .filter_map(|r| r.headers.get("idempotency-key").cloned())
                .collect();
            (ids.contains(&on_main) && ids.contains(&on_second)).then_some(())
        },
    )
    .await;
    let (main_cluster, second_cluster) = (kafka_bootstrap(), kafka2_bootstrap());
    assert_eq!(ids_on(&main_cluster, &main).await, [on_main]);
    assert_eq!(ids_on(&second_cluster, &second).await, [on_second]);
    // Neither topic exists on the other cluster.
    assert!(ids_on(&second_cluster, &main).await.is_empty());
    assert!(ids_on(&main_cluster, &second).await.is_empty());
    consumer.shutdown().await;
    producer.shutdown().await;
}

#[tokio::test]
async fn names_the_cluster_map_does_not_have_are_refused_with_the_known_ones() {
    let upstream = Upstream::start(|_| 200).await;
    let mut registry = control_plane().await;
    let nowhere = config_on(&upstream, Some("nowhere"));
    let mut shard: Value = serde_json::from_str(&config_on(&upstream, None)).unwrap();
    shard["persistence_configurations"]["persistence_configuration"][0]["config"]["durable_storage"] =
        serde_json::json!({"namespace": "ks", "shard": "s9", "type": "kv"});
    let cases = [
        (nowhere, "Kafka cluster 'nowhere'", "known: default, kafka2"),
        (shard.to_string(), "CQL shard 's9'", "known: default"),
    ];
    for (config, named, known) in cases {
        let request = || ApplyRequest {
            config_json: config.clone(),
            author: "test".into(),
            ..Default::default()
        };
        for refused in [
            registry.validate(request()).await.unwrap_err(),
            registry.apply(request()).await.unwrap_err(),
        ] {
            wal_testkit::assert_refused(&refused, Code::InvalidArgument, &[named, known]);
        }
    }
}

/// A consumer group of a deployment serves the namespaces that name its consumer stack, and
/// leaves the others to their own group.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_consumer_stack_serves_only_the_namespaces_that_name_it() {
    let upstream = Upstream::start(|_| 200).await;
    let on_stack = |stack: &str| {
        let mut namespace =
            wal_testkit::namespace_with_target(Backend::Kafka, 1, &upstream.target(), "");
        namespace.consumer.stack = Some(stack.to_owned());
        namespace
    };
    let (mine, theirs) = (on_stack("orders"), on_stack("billing"));
    let mut options = wal_consumer::ConsumerOptions::for_local_stack(std::path::PathBuf::new());
    options.consumer_stack = Some("orders".to_owned());
    let settings = options.settings().unwrap();
    let consumer = wal_consumer::Consumer::start(&settings, vec![mine.clone(), theirs.clone()])
        .await
        .unwrap();
    let queues = consumer.queues();
    assert!(
        queues
            .iter()
            .any(|q| q.starts_with(&format!("{}/", mine.name))),
        "{queues:?}"
    );
    assert!(
        !queues
            .iter()
            .any(|q| q.starts_with(&format!("{}/", theirs.name))),
        "{queues:?}"
    );
}
