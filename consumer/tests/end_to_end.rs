//! WriteToLog -> queue -> consumer -> target, on the real stack, for every target kind.

#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::time::Duration;

use memcache::exp::{AsyncMetaClient, GetStatus};
use rdkafka::consumer::{Consumer as _, StreamConsumer};
use rdkafka::message::{Headers as _, Message as _};
use wal_namespaces::Backend;
use wal_proto::v1::{Lifecycle, WriteToLogRequest};
use wal_queue::kafka::{KafkaBackend, KafkaSettings};
use wal_queue::{Produce, QueueSpec};
use wal_testkit::{Cql, Fleet, Upstream, cql_target, eventually, put, write_true};
use wal_testkit::{namespace_with_target, unique, write};

wal_testkit::on_each_backend! {
    writes_reach_cassandra_with_their_original_time => writes_reach_cassandra_with_their_original_time;
}

const LIMIT: Duration = Duration::from_secs(60);

fn written_at(request: WriteToLogRequest, original_micros: i64) -> WriteToLogRequest {
    WriteToLogRequest {
        lifecycle: Some(Lifecycle {
            original_write_time_micros: original_micros,
            ..Lifecycle::default()
        }),
        ..request
    }
}

async fn writes_reach_cassandra_with_their_original_time(backend: Backend) {
    let cql = Cql::connect().await;
    let table = cql.table().await;
    let namespace = namespace_with_target(backend, 1, &cql_target(&table), "");
    let name = namespace.name.clone();
    let fleet = Fleet::start(namespace.clone()).await;

    let base = wal_queue::entry::now_micros() - 60_000_000;
    for i in 0..20 {
        let request = written_at(
            write(&name, &put(&format!("k{i}"), &format!("v{i}"))),
            base + i,
        );
        write_true(&fleet.producer.client, request).await;
    }
    let rows = eventually(LIMIT, "20 rows in Cassandra", || async {
        let rows = cql.rows(&table).await;
        (rows.len() == 20).then_some(rows)
    })
    .await;
    for i in 0..20 {
        assert_eq!(
            rows[&format!("k{i}")].as_deref(),
            Some(format!("v{i}").as_str())
        );
        assert_eq!(
            cql.writetime(&table, &format!("k{i}")).await,
            Some(base + i),
            "USING TIMESTAMP is the original write time"
        );
    }
    fleet.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cache_entry_is_set_then_deleted_in_memcached() {
    let key = unique("cache-key");
    let namespace = namespace_with_target(
        Backend::Kafka,
        1,
        r#"{"kind": "cache", "settings": {"ttl_seconds": 600}}"#,
        "",
    );
    let name = namespace.name.clone();
    let mut fleet = Fleet::start(namespace.clone()).await;
    let memcached = wal_testkit::memcached()[0].clone();
    let cache = AsyncMetaClient::connect(memcached.as_str()).await.unwrap();

    let set = format!(r#"{{"set": {{"key": "{key}", "value": "hello"}}}}"#);
    write_true(&fleet.producer.client, write(&name, set.as_bytes())).await;
    eventually(LIMIT, "the key set in memcached", || async {
        let got = cache.get(key.as_str()).send().await.unwrap();
        (got.status == GetStatus::Hit)
            .then_some(())
            .filter(|()| got.value.as_deref() == Some(b"hello".as_slice()))
    })
    .await;

    let delete = format!(r#"{{"delete": {{"key": "{key}"}}}}"#);
    fleet
        .producer
        .client
        .write_to_log(write(&name, delete.as_bytes()))
        .await
        .unwrap();
    eventually(LIMIT, "the key deleted from memcached", || async {
        (cache.get(key.as_str()).send().await.unwrap().status == GetStatus::Miss).then_some(())
    })
    .await;
    fleet.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kafka_target_gets_the_payload_with_the_entry_id() {
    let bootstrap = wal_testkit::kafka_bootstrap();
    let topic = unique("target-topic");
    let backend = KafkaBackend::new(KafkaSettings::new(&bootstrap)).unwrap();
    backend
        .queue(QueueSpec::new("test", &topic, &format!("{topic}-dlq")))
        .provision()
        .await
        .unwrap();
    let target = format!(r#"{{"kind": "kafka", "settings": {{"topic": "{topic}"}}}}"#);
    let namespace = namespace_with_target(Backend::Kafka, 1, &target, "");
    let name = namespace.name.clone();
    let fleet = Fleet::start(namespace.clone()).await;

    let request = WriteToLogRequest {
        key: "order-7".into(),
        ..write(&name, b"retry me later")
    };
    let answer_id = write_true(&fleet.producer.client, request).await;

    let reader: StreamConsumer = rdkafka::ClientConfig::new()
        .set("bootstrap.servers", &bootstrap)
        .set("group.id", unique("reader"))
        .set("auto.offset.reset", "earliest")
        .create()
        .unwrap();
    reader.subscribe(&[&topic]).unwrap();
    let message = tokio::time::timeout(LIMIT, reader.recv())
        .await
        .expect("a record on the target topic")
        .unwrap();
    assert_eq!(message.payload(), Some(b"retry me later".as_slice()));
    assert_eq!(message.key(), Some(b"order-7".as_slice()));
    let headers = message.headers().expect("headers");
    let id = headers
        .iter()
        .find(|h| h.key == "wal-entry-id")
        .and_then(|h| h.value)
        .expect("wal-entry-id header");
    assert_eq!(id, answer_id.as_bytes());
    fleet.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_http_upstream_gets_the_post_with_its_idempotency_key() {
    let upstream = Upstream::start(|_| 200).await;
    let namespace = namespace_with_target(Backend::Sqs, 1, &upstream.target(), "");
    let name = namespace.name.clone();
    let fleet = Fleet::start(namespace.clone()).await;

    let mut request = tonic::Request::new(WriteToLogRequest {
        idempotency_id: "order-42-v1".into(),
        ..write(&name, b"{\"order\":42}")
    });
    let caller = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    request
        .metadata_mut()
        .insert("traceparent", caller.parse().unwrap());
    write_true(&fleet.producer.client, request).await;
    let received = eventually(LIMIT, "the POST upstream", || async {
        upstream.received().first().cloned()
    })
    .await;
    assert_eq!(received.body, b"{\"order\":42}");
    assert_eq!(received.headers["idempotency-key"], "order-42-v1");
    assert_eq!(received.headers["x-wal-namespace"], name);
    let traceparent = &received.headers["traceparent"];
    assert!(
        traceparent.starts_with("00-4bf92f3577b34da6a3ce929d0e0e4736-") && traceparent != caller,
        "the caller's trace continues with a new span: {traceparent}"
    );
    fleet.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_checked_payload_is_resolved_before_delivery() {
    let upstream = Upstream::start(|_| 200).await;
    let keyspace = "wal_consumer_claims";
    let mut namespace = namespace_with_target(
        Backend::Sqs,
        1,
        &upstream.target(),
        r#""payload_limit_bytes": 1048576"#,
    );
    namespace.durable_storage = Some(wal_namespaces::DurableStorageConfig::keyspace(keyspace));
    let name = namespace.name.clone();
    let fleet = Fleet::start(namespace.clone()).await;

    // Larger than an SQS message: the queue carries a claim check, the upstream gets the bytes.
    let payload: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
    write_true(&fleet.producer.client, write(&name, &payload)).await;
    let received = eventually(LIMIT, "the POST upstream", || async {
        upstream.received().first().cloned()
    })
    .await;
    assert_eq!(received.body.len(), payload.len());
    assert!(
        received.body == payload,
        "the upstream received the payload intact"
    );
    fleet.stop().await;
}
