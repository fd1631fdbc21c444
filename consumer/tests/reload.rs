//! Hot reload: a producer and a consumer already running take a new namespace and a namespace's
//! added queue, from the control plane's watch or a folder, with no restart, and every write
//! made across the change is stored and delivered; a bad config is refused and the namespaces
//! in use stay.

#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::collections::BTreeSet;
use std::time::Duration;

use tonic::transport::Channel;
use wal_namespaces::Backend;
use wal_namespaces::feed::{Feed, Source};
use wal_proto::v1::write_ahead_log_client::WriteAheadLogClient;
use wal_proto::v1::{ApplyRequest, Trilean, WriteToLogRequest};
use wal_testkit::control_plane_at;
use wal_testkit::{TestProducer, kafka_log, namespace_json, write};
use wal_testkit::{Upstream, eventually, start_consumer_following};

/// How long a new config may take to reach a running producer or consumer: the issue's
/// "within seconds", with room for a loaded CI machine.
const RELOAD_WITHIN: Duration = Duration::from_secs(20);

fn name_of(config: &str) -> String {
    wal_namespaces::parse(config, "test").unwrap().name
}

/// Writes until the producer stores one (it answers NOT_FOUND until it serves the namespace);
/// the entry id.
async fn first_durable_write(
    client: &WriteAheadLogClient<Channel>,
    request: WriteToLogRequest,
) -> String {
    eventually(RELOAD_WITHIN, "the producer to serve the namespace", || {
        let mut client = client.clone();
        let request = request.clone();
        async move {
            match client.write_to_log(request).await {
                Ok(answer) if answer.get_ref().durable() == Trilean::True => {
                    Some(answer.into_inner().entry_id)
                }
                Ok(answer) => panic!("a served namespace's write is not durable: {answer:?}"),
                Err(status) if status.code() == tonic::Code::NotFound => None,
                Err(status) => panic!("unexpected refusal: {status}"),
            }
        }
    })
    .await
}

/// Waits until `upstream` has received every entry in `ids` (by its Idempotency-Key).
async fn delivered(upstream: &Upstream, ids: &BTreeSet<String>) {
    eventually(Duration::from_secs(60), "every entry delivered", || async {
        let received: BTreeSet<String> = upstream
            .received()
            .iter()
            .filter_map(|r| r.headers.get("idempotency-key").cloned())
            .collect();
        ids.is_subset(&received).then_some(())
    })
    .await;
}

#[tokio::test]
async fn control_plane_changes_reach_a_running_producer_and_consumer() {
    let (mut registry, url) = control_plane_at().await;
    let upstream = Upstream::start(|_| 200).await;
    let target = upstream.target();
    let apply =
        async |registry: &mut wal_proto::v1::namespace_registry_client::NamespaceRegistryClient<
            Channel,
        >,
               config: &str| {
            registry
                .apply(ApplyRequest {
                    config_json: config.to_owned(),
                    author: "reload-test".into(),
                    ..Default::default()
                })
                .await
                .unwrap();
        };
    let first = namespace_json(Backend::Kafka, 1, &target, "");
    apply(&mut registry, &first).await;

    let following = async || {
        Feed::open(Source::ControlPlane(url.clone(), None))
            .await
            .unwrap()
    };
    let mut producer = TestProducer::start_following(following().await).await;
    let consumer = start_consumer_following(following().await).await;
    let client = producer.client.clone();
    let mut ids = BTreeSet::new();

    // A new namespace, on the other backend.
    let added = namespace_json(Backend::Sqs, 1, &target, "");
    apply(&mut registry, &added).await;
    ids.insert(
        first_durable_write(&client, write(&name_of(&added), b"to the new namespace")).await,
    );
    delivered(&upstream, &ids).await;

    // A queue added to the first namespace: writes keyed to it go to its topic once the
    // producer has the new version, and the consumer delivers from it. Every write made
    // meanwhile is stored (TRUE) and delivered.
    let name = name_of(&first);
    let second_queue = format!("{name}-q1");
    let grown = first.replacen(
        &format!("\"{name}-q0\""),
        &format!("\"{name}-q0\", \"{second_queue}\""),
        1,
    );
    let grown_config = wal_namespaces::parse(&grown, "test").unwrap();
    assert_eq!(grown_config.queues.len(), 2, "{grown}");
    apply(&mut registry, &grown).await;
    let keys = (0..)
        .map(|i| format!("key-{i}"))
        .filter(|k| grown_config.queue_index(k) == 1);
    let deadline = tokio::time::Instant::now() + RELOAD_WITHIN;
    for key in keys {
        assert!(
            tokio::time::Instant::now() < deadline,
            "no write reached the added queue within {RELOAD_WITHIN:?}"
        );
        let request = WriteToLogRequest {
            key,
            ..write(&name, b"across the change")
        };
        let id = wal_testkit::write_true(&client, request).await;
        ids.insert(id.clone());
        if kafka_log(&second_queue).await.iter().any(|e| e.id == id) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    delivered(&upstream, &ids).await;

    // A namespace deleted: the producer stops taking writes for it (its queues stay).
    let removed = name_of(&added);
    wal_testkit::delete_namespace(&mut registry, &removed).await;
    eventually(RELOAD_WITHIN, "the producer to drop the namespace", || {
        let mut client = client.clone();
        let request = write(&removed, b"after the deletion");
        async move {
            let answer = client.write_to_log(request).await;
            matches!(answer, Err(status) if status.code() == tonic::Code::NotFound).then_some(())
        }
    })
    .await;

    consumer.shutdown().await;
    producer.shutdown().await;
}

#[tokio::test]
async fn a_folder_change_applies_and_a_bad_file_is_refused_keeping_the_namespaces_in_use() {
    let dir = std::env::temp_dir().join(wal_testkit::unique("namespaces"));
    std::fs::create_dir_all(&dir).unwrap();
    let upstream = Upstream::start(|_| 200).await;
    let target = upstream.target();
    let first = namespace_json(Backend::Sqs, 1, &target, "");
    std::fs::write(dir.join("first.json"), &first).unwrap();

    let producer_feed = Feed::open(Source::Folder(dir.clone())).await.unwrap();
    let consumer_feed = Feed::open(Source::Folder(dir.clone())).await.unwrap();
    let mut producer_status = producer_feed.status();
    let mut consumer_status = consumer_feed.status();
    let mut producer = TestProducer::start_following(producer_feed).await;
    let consumer = start_consumer_following(consumer_feed).await;
    let client = producer.client.clone();
    let mut ids = BTreeSet::new();

    let added = namespace_json(Backend::Kafka, 1, &target, "");
    std::fs::write(dir.join("added.json"), &added).unwrap();
    ids.insert(first_durable_write(&client, write(&name_of(&added), b"to the added file")).await);
    delivered(&upstream, &ids).await;

    // A file that is not a namespace config: both refuse the new set, name the file, and keep
    // serving the namespaces they had.
    std::fs::write(dir.join("broken.json"), r#"{"namespace": "half-writ"#).unwrap();
    for status in [&mut producer_status, &mut consumer_status] {
        let refused = tokio::time::timeout(RELOAD_WITHIN, status.wait_for(|s| s.refused > 0))
            .await
            .expect("the bad file is noticed")
            .unwrap()
            .clone();
        let reason = refused.refusal.unwrap();
        assert!(
            reason.contains("broken.json") && reason.contains("not valid JSON"),
            "{reason}"
        );
    }
    for name in [name_of(&first), name_of(&added)] {
        let answer = client
            .clone()
            .write_to_log(write(&name, b"while refused"))
            .await
            .unwrap();
        assert_eq!(answer.get_ref().durable(), Trilean::True, "{answer:?}");
        ids.insert(answer.into_inner().entry_id);
    }
    delivered(&upstream, &ids).await;

    // Fixed: the set applies, with the namespace the file now holds.
    let fixed = namespace_json(Backend::Sqs, 1, &target, "");
    std::fs::write(dir.join("broken.json"), &fixed).unwrap();
    ids.insert(first_durable_write(&client, write(&name_of(&fixed), b"after the fix")).await);
    delivered(&upstream, &ids).await;
    for status in [&producer_status, &consumer_status] {
        let status = status.borrow().clone();
        assert_eq!(status.refusal, None, "{status:?}");
        assert!(status.applied >= 2, "{status:?}");
    }

    consumer.shutdown().await;
    producer.shutdown().await;
    std::fs::remove_dir_all(&dir).unwrap();
}
