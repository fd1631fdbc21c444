//! Reloading a running producer's namespaces: what it can serve replaces the set in use at once;
//! what it cannot is refused with the reason, and the set in use stays.

#![allow(clippy::expect_used, clippy::unwrap_used)]

use tonic::Code;
use wal_namespaces::Backend;
use wal_proto::v1::Trilean;
use wal_testkit::{TestProducer, namespace, write};

#[tokio::test]
async fn a_set_the_producer_can_serve_replaces_the_one_in_use() {
    let kept = namespace(Backend::Kafka, 1, "");
    let dropped = namespace(Backend::Kafka, 1, "");
    let mut producer = TestProducer::start(vec![kept.clone(), dropped.clone()]).await;
    let before = producer.live.current();
    let added = namespace(Backend::Sqs, 1, "");

    let changes = producer
        .live
        .reload(vec![kept.clone(), added.clone()])
        .await
        .unwrap();
    assert_eq!(changes.added, vec![added.name.clone()]);
    assert_eq!(changes.removed, vec![dropped.name.clone()]);
    assert!(changes.changed.is_empty(), "{changes}");
    // The unchanged namespace keeps its runtime: its admission state carries over.
    let after = producer.live.current();
    assert!(std::sync::Arc::ptr_eq(
        before.get(&kept.name).unwrap(),
        after.get(&kept.name).unwrap()
    ));

    let mut client = producer.client.clone();
    for name in [&kept.name, &added.name] {
        let answer = client.write_to_log(write(name, b"x")).await.unwrap();
        assert_eq!(answer.get_ref().durable(), Trilean::True, "{answer:?}");
    }
    let gone = client
        .write_to_log(write(&dropped.name, b"x"))
        .await
        .unwrap_err();
    assert_eq!(gone.code(), Code::NotFound, "{gone}");
    producer.shutdown().await;
}

#[tokio::test]
async fn a_set_the_producer_cannot_serve_is_refused_and_the_set_in_use_stays() {
    let served = namespace(Backend::Kafka, 1, "");
    let mut producer = TestProducer::start(vec![served.clone()]).await;
    // Larger payloads than the gRPC server was started to decode.
    let large = namespace(Backend::Kafka, 1, r#""payload_limit_bytes": 16777216"#);

    let refused = producer
        .live
        .reload(vec![served.clone(), large.clone()])
        .await
        .unwrap_err();
    let reason = format!("{refused:#}");
    assert!(
        reason.contains(&large.name) && reason.contains("restart the producer"),
        "{reason}"
    );
    let current = producer.live.current();
    assert!(current.get(&large.name).is_none());
    let answer = producer
        .client
        .clone()
        .write_to_log(write(&served.name, b"still served"))
        .await
        .unwrap();
    assert_eq!(answer.get_ref().durable(), Trilean::True, "{answer:?}");
    producer.shutdown().await;
}
