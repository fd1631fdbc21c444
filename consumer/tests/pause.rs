//! An operator's pause, end to end: paused through the control plane's Operations service, a
//! consumer following it holds the namespace's entries in place (nothing delivered, no attempt
//! used), and resumed, delivers every one of them once, on its first attempt. A destination's
//! pause holds that destination alone; entries already held for a down target stay held when it
//! comes back; a consumer started during a pause holds from its first entry.

#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::collections::BTreeSet;
use std::sync::atomic::Ordering;
use std::time::Duration;

use tonic::transport::Channel;
use wal_namespaces::Backend;
use wal_namespaces::feed::{Feed, Source};
use wal_proto::v1::operations_client::OperationsClient;
use wal_proto::v1::{PauseRequest, ResumeRequest};
use wal_testkit::{TestProducer, Upstream, control_plane_at, destinations, eventually};
use wal_testkit::{apply_config, namespace_json, start_consumer_following, write, write_true};

/// How long held entries are watched for not arriving: several of the consumer's polls.
const HELD_FOR: Duration = Duration::from_secs(3);

/// The idempotency keys `upstream` took (answered 200), each with the attempt number it came
/// with.
fn received(upstream: &Upstream) -> Vec<(String, String)> {
    upstream
        .received()
        .iter()
        .filter(|r| r.status == 200)
        .map(|r| {
            let header = |name: &str| r.headers.get(name).cloned().unwrap_or_default();
            (header("idempotency-key"), header("x-wal-attempt"))
        })
        .collect()
}

/// Waits until `upstream` has every entry of `ids`, then checks each came once, on its first
/// attempt: a pause uses none.
async fn delivered_once_each(upstream: &Upstream, ids: &BTreeSet<String>) {
    eventually(
        Duration::from_secs(60),
        "every held entry delivered",
        || async {
            let keys: BTreeSet<String> = received(upstream).into_iter().map(|(k, _)| k).collect();
            ids.is_subset(&keys).then_some(())
        },
    )
    .await;
    let mine: Vec<(String, String)> = received(upstream)
        .into_iter()
        .filter(|(key, _)| ids.contains(key))
        .collect();
    assert_eq!(
        mine.len(),
        ids.len(),
        "an entry came more than once: {mine:?}"
    );
    assert!(
        mine.iter().all(|(_, attempt)| attempt == "0"),
        "a held entry used an attempt: {mine:?}"
    );
}

async fn pause(operations: &mut OperationsClient<Channel>, namespace: &str, destination: &str) {
    let answer = operations
        .pause(PauseRequest {
            namespace: namespace.to_owned(),
            destination: destination.to_owned(),
            reason: "the pause test".to_owned(),
            operator: "pause-test".to_owned(),
        })
        .await
        .unwrap()
        .into_inner();
    assert!(answer.changed, "{answer:?}");
}

async fn resume(operations: &mut OperationsClient<Channel>, namespace: &str, destination: &str) {
    let answer = operations
        .resume(ResumeRequest {
            namespace: namespace.to_owned(),
            destination: destination.to_owned(),
            operator: "pause-test".to_owned(),
        })
        .await
        .unwrap()
        .into_inner();
    assert!(answer.changed, "{answer:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_namespace_holds_its_entries_without_attempts_and_resumed_delivers_them() {
    let (mut registry, url) = control_plane_at().await;
    let mut operations = OperationsClient::connect(url.clone()).await.unwrap();
    let (own, hook) = (
        Upstream::start(|_| 200).await,
        Upstream::start(|_| 200).await,
    );
    let store = format!(
        r#"{{"name": "hook", "start_from": "earliest", "target": {}}}"#,
        hook.target()
    );
    let config = namespace_json(Backend::Kafka, 1, &own.target(), &destinations(&[store]));
    let name = apply_config(&mut registry, &config).await.name;
    let following = async || {
        Feed::open(Source::ControlPlane(url.clone(), None))
            .await
            .unwrap()
    };
    let mut producer = TestProducer::start_following(following().await).await;
    let consumer = start_consumer_following(following().await).await;
    let client = producer.client.clone();
    let heard = |paused: bool| {
        let mut directives = consumer.directives();
        let name = name.clone();
        async move {
            let wait = directives.wait_for(|d| d.pauses.holding(&name, "hook").is_some() == paused);
            tokio::time::timeout(Duration::from_secs(20), wait)
                .await
                .expect("the consumer heard the pause's change")
                .unwrap();
        }
    };
    // Delivery works before the pause.
    let first: BTreeSet<String> = [write_true(&client, write(&name, b"before")).await].into();
    delivered_once_each(&own, &first).await;
    delivered_once_each(&hook, &first).await;

    // The whole namespace paused: writes are stored, and neither destination receives them.
    pause(&mut operations, &name, "").await;
    heard(true).await;
    let mut held = BTreeSet::new();
    for i in 0..20 {
        held.insert(write_true(&client, write(&name, format!("held {i}").as_bytes())).await);
    }
    tokio::time::sleep(HELD_FOR).await;
    let arrived = |upstream: &Upstream| {
        received(upstream)
            .into_iter()
            .filter(|(key, _)| held.contains(key))
            .count()
    };
    assert_eq!(arrived(&own), 0, "delivered while the namespace was paused");
    assert_eq!(
        arrived(&hook),
        0,
        "delivered while the namespace was paused"
    );
    let stats = consumer.deliverer().stats();
    assert_eq!(stats.retried.load(Ordering::Relaxed), 0);

    // Resumed: every held entry arrives once, on its first attempt.
    resume(&mut operations, &name, "").await;
    heard(false).await;
    delivered_once_each(&own, &held).await;
    delivered_once_each(&hook, &held).await;

    // One destination paused: the other delivers on; resumed, the paused one catches up.
    pause(&mut operations, &name, "hook").await;
    heard(true).await;
    let mut later = BTreeSet::new();
    for i in 0..10 {
        later.insert(write_true(&client, write(&name, format!("later {i}").as_bytes())).await);
    }
    delivered_once_each(&own, &later).await;
    tokio::time::sleep(HELD_FOR).await;
    let hooked = received(&hook)
        .into_iter()
        .filter(|(key, _)| later.contains(key))
        .count();
    assert_eq!(hooked, 0, "the paused destination received entries");
    resume(&mut operations, &name, "hook").await;
    delivered_once_each(&hook, &later).await;
    assert_eq!(stats.retried.load(Ordering::Relaxed), 0);
    assert_eq!(stats.dead_lettered.load(Ordering::Relaxed), 0);

    consumer.shutdown().await;
    producer.shutdown().await;
}

/// Waits until `consumer` holds `namespace` paused (or not).
async fn heard(consumer: &wal_testkit::ConsumerHandle, namespace: &str, paused: bool) {
    let mut directives = consumer.directives();
    let wait = directives.wait_for(|d| d.pauses.holding(namespace, "default").is_some() == paused);
    tokio::time::timeout(Duration::from_secs(20), wait)
        .await
        .expect("the consumer heard the pause's change")
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pause_holds_entries_a_down_target_held_and_binds_a_consumer_started_during_it() {
    let (mut registry, url) = control_plane_at().await;
    let mut operations = OperationsClient::connect(url.clone()).await.unwrap();
    // 503: unavailable, so the consumer opens the target's breaker and holds its entries.
    let upstream = Upstream::broken(503).await;
    let config = namespace_json(Backend::Kafka, 1, &upstream.target(), "");
    let name = apply_config(&mut registry, &config).await.name;
    let following = async || {
        Feed::open(Source::ControlPlane(url.clone(), None))
            .await
            .unwrap()
    };
    let mut producer = TestProducer::start_following(following().await).await;
    let consumer = start_consumer_following(following().await).await;
    let client = producer.client.clone();
    let mut held = BTreeSet::new();
    for i in 0..5 {
        held.insert(write_true(&client, write(&name, format!("held {i}").as_bytes())).await);
    }
    eventually(
        Duration::from_secs(30),
        "the breaker holding the entries",
        || async { (consumer.deliverer().stats().held.load(Ordering::Relaxed) > 0).then_some(()) },
    )
    .await;

    // Paused while held, the target comes back: its probes would pass, but nothing is applied.
    pause(&mut operations, &name, "").await;
    heard(&consumer, &name, true).await;
    // An attempt under way when the pause came may still land; none starts after it.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let attempted = upstream.received().len();
    upstream.mend();
    tokio::time::sleep(HELD_FOR + Duration::from_secs(2)).await;
    assert_eq!(received(&upstream).len(), 0, "applied while paused");
    assert_eq!(
        upstream.received().len(),
        attempted,
        "attempted while paused"
    );
    resume(&mut operations, &name, "").await;
    delivered_once_each(&upstream, &held).await;

    // A consumer that starts while a pause is in force, its entries waiting on the queue,
    // holds from its first entry.
    consumer.shutdown().await;
    pause(&mut operations, &name, "").await;
    let mut later = BTreeSet::new();
    for i in 0..5 {
        later.insert(write_true(&client, write(&name, format!("later {i}").as_bytes())).await);
    }
    let consumer = start_consumer_following(following().await).await;
    // It runs and knows of the pause (a wait alone would pass on a consumer that never
    // started); then nothing arrives for as long as the pause lasts.
    let mut directives = consumer.directives();
    let knows = directives.wait_for(|d| d.pauses.holding(&name, "default").is_some());
    tokio::time::timeout(Duration::from_secs(30), knows)
        .await
        .expect("the new consumer heard of the pause")
        .unwrap();
    tokio::time::sleep(HELD_FOR + Duration::from_secs(3)).await;
    let arrived = received(&upstream)
        .into_iter()
        .filter(|(key, _)| later.contains(key))
        .count();
    assert_eq!(arrived, 0, "a consumer started during the pause delivered");
    resume(&mut operations, &name, "").await;
    delivered_once_each(&upstream, &later).await;

    consumer.shutdown().await;
    producer.shutdown().await;
}
