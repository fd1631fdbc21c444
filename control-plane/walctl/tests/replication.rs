#![allow(clippy::expect_used, clippy::unwrap_used)]

//! `walctl replication status` and gaps, on the real stack: a region's reader stopped, the
//! entries written meanwhile removed from the topic (as retention would), and the reader back.

use std::collections::BTreeMap;
use std::time::Duration;

use memcache::exp::AsyncMetaClient;
use rdkafka::admin::{AdminClient, AdminOptions};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer as _};
use rdkafka::{ClientConfig, Offset, TopicPartitionList};
use wal_testkit::{
    Backend, TestProducer, TestWriter, apply_config, cache_converges, cache_set, cached,
    control_plane_at, json_of, kafka_bootstrap, keyed, namespace_json, region_caches,
    region_target, start_consumer, unique, walctl_at, write_true,
};

/// Removes every record of `topic` held now, as retention would.
async fn remove_everything(topic: &str) {
    let config = {
        let mut config = ClientConfig::new();
        config.set("bootstrap.servers", kafka_bootstrap());
        config
    };
    let topic = topic.to_owned();
    let ends = {
        let config = config.clone();
        tokio::task::spawn_blocking(move || {
            let consumer: BaseConsumer = config.create().unwrap();
            let metadata = consumer
                .fetch_metadata(Some(&topic), Duration::from_secs(10))
                .unwrap();
            let mut ends = TopicPartitionList::new();
            for partition in metadata.topics()[0].partitions() {
                let (_, high) = consumer
                    .fetch_watermarks(&topic, partition.id(), Duration::from_secs(10))
                    .unwrap();
                ends.add_partition_offset(&topic, partition.id(), Offset::Offset(high))
                    .unwrap();
            }
            ends
        })
        .await
        .unwrap()
    };
    let admin: AdminClient<DefaultClientContext> = config.create().unwrap();
    let deleted = admin
        .delete_records(&ends, &AdminOptions::new())
        .await
        .unwrap();
    for partition in deleted.elements() {
        assert!(partition.error().is_ok(), "{partition:?}");
    }
}

async fn status(control_plane: &str, namespace: &str) -> serde_json::Value {
    let output = walctl_at(
        control_plane,
        &["replication", "status", namespace, "-o", "json"],
    )
    .await;
    json_of(&output)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn entries_removed_while_a_region_was_down_are_a_reported_gap_and_the_region_resumes_after_it()
 {
    // Installed before the consumer starts: handles made before the recorder are no-ops.
    wal_testkit::scrape();
    let cache_at = region_caches()[0].clone();
    let cache = AsyncMetaClient::connect(cache_at.as_str()).await.unwrap();
    let mut writer = TestWriter::start("regionb", &cache_at).await;
    let (mut registry, control_plane) = control_plane_at().await;
    let text = namespace_json(Backend::Kafka, 1, &region_target(&[&writer]), "");
    let namespace = apply_config(&mut registry, &text).await;
    let (name, topic) = (namespace.name.clone(), namespace.queues[0].name.clone());
    let mut producer = TestProducer::start(vec![namespace.clone()]).await;
    let prefix = unique("gap");
    let keys =
        |set: &str| -> Vec<String> { (0..10).map(|i| format!("{prefix}-{set}-{i}")).collect() };
    let write_set = async |set: &str| {
        for key in keys(set) {
            write_true(&producer.client, keyed(&name, &key, &cache_set(&key, set))).await;
        }
    };
    let expect = |set: &str| -> BTreeMap<String, Option<String>> {
        keys(set)
            .into_iter()
            .map(|k| (k, Some(set.to_owned())))
            .collect()
    };

    // Before: replicated, and the reader stopped with its position committed.
    let before = status(&control_plane, &name).await;
    assert_eq!(before[0]["state"], "not started", "{before}");
    let consumer = start_consumer(vec![namespace.clone()]).await;
    write_set("before").await;
    cache_converges(&cache_at, &expect("before")).await;
    consumer.shutdown().await;

    // Down: what is written meanwhile is removed from the topic before the reader returns.
    write_set("lost").await;
    remove_everything(&topic).await;
    let down = status(&control_plane, &name).await;
    let row = &down[0];
    assert_eq!(
        (row["region"].as_str(), row["state"].as_str()),
        (Some("regionb"), Some("gap")),
        "{down}"
    );
    let lost = row["lost"].as_u64().unwrap();
    // The ten writes, and any heartbeat the reader wrote just before it stopped.
    assert!((10..=12).contains(&lost), "{down}");
    let gaps = row["gaps"].as_array().unwrap();
    assert!(
        !gaps.is_empty()
            && gaps
                .iter()
                .all(|g| g.as_str().unwrap().starts_with(&format!("{topic}/"))),
        "{down}"
    );

    // Back: the gap is counted as lost for this region's reader, which reads on after it.
    write_set("after").await;
    let consumer = start_consumer(vec![namespace.clone()]).await;
    cache_converges(&cache_at, &expect("after")).await;
    for key in keys("lost") {
        assert_eq!(
            cached(&cache, &key).await,
            None,
            "{key} was never replicated"
        );
    }
    let group = format!("wal-consumer.{topic}.region-regionb");
    let rendered = wal_testkit::scrape();
    let counted: f64 = rendered
        .lines()
        .filter(|l| l.starts_with("wal_queue_gap_entries_total") && l.contains(&group))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum();
    assert_eq!(counted as u64, lost, "{rendered}");
    // The reader's new position reaches the broker with its next periodic commit.
    let after = wal_testkit::eventually(
        Duration::from_secs(60),
        "the region's committed position past the gap",
        || async {
            let after = status(&control_plane, &name).await;
            (after[0]["lost"] == 0).then_some(after)
        },
    )
    .await;
    assert!(after[0]["last_applied"].is_string(), "{after}");
    assert_ne!(after[0]["state"], "gap", "{after}");

    consumer.shutdown().await;
    producer.shutdown().await;
    writer.stop().await;
}

/// A region that lost its data is sent everything since a time again: `walctl replication
/// reset`, a replay to that region's reader alone, brings its cache back.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_region_reset_to_a_time_gets_everything_written_since_again() {
    let cache_at = region_caches()[0].clone();
    let writer = TestWriter::start("regionb", &cache_at).await;
    let (mut registry, control_plane) = control_plane_at().await;
    let text = namespace_json(Backend::Kafka, 1, &region_target(&[&writer]), "");
    let namespace = apply_config(&mut registry, &text).await;
    let name = namespace.name.clone();
    let mut producer = TestProducer::start(vec![namespace.clone()]).await;
    let consumer = start_consumer(vec![namespace.clone()]).await;
    let since = std::time::SystemTime::now() - Duration::from_secs(1);
    let since = humantime::format_rfc3339_micros(since).to_string();
    let prefix = unique("reset");
    let keys: Vec<String> = (0..5).map(|i| format!("{prefix}-{i}")).collect();
    for key in &keys {
        write_true(&producer.client, keyed(&name, key, &cache_set(key, "v"))).await;
    }
    let written: BTreeMap<String, Option<String>> = keys
        .iter()
        .map(|k| (k.clone(), Some("v".to_owned())))
        .collect();
    cache_converges(&cache_at, &written).await;

    // The region loses its data.
    let mut tcp = tokio::net::TcpStream::connect(cache_at.as_str())
        .await
        .unwrap();
    for key in &keys {
        use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
        tcp.write_all(format!("delete {key}\r\n").as_bytes())
            .await
            .unwrap();
        let mut answer = [0_u8; 64];
        let read = tcp.read(&mut answer).await.unwrap();
        assert!(
            answer[..read].starts_with(b"DELETED"),
            "{:?}",
            &answer[..read]
        );
    }
    let gone: BTreeMap<String, Option<String>> = keys.iter().map(|k| (k.clone(), None)).collect();
    cache_converges(&cache_at, &gone).await;

    let reset = walctl_at(
        &control_plane,
        &[
            "-o",
            "json",
            "replication",
            "reset",
            &name,
            "regionb",
            "--since",
            &since,
        ],
    )
    .await;
    let done = json_of(&reset);
    assert_eq!(done["state"], "done", "{done:#}");
    assert_eq!(done["replayed"], 5, "{done:#}");
    assert_eq!(done["range"]["destination"], "region-regionb", "{done:#}");
    cache_converges(&cache_at, &written).await;
    consumer.shutdown().await;
    producer.shutdown().await;
    drop(writer);
}
