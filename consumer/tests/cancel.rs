//! An operator's cancel of a delayed entry, end to end: cancelled through the control plane's
//! Operations service while it waits for its deliver-at, the entry never reaches its target,
//! while one written beside it does; one held by a pause when cancelled is not delivered once
//! resumed, nor is one held by its target's open breaker once the target is back; the
//! cancellation is stored, so a consumer started after it skips a cancelled entry
//! too; and a cancel that comes after delivery is refused, naming where the entry went (from
//! its receipts).

#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::sync::atomic::Ordering;
use std::time::Duration;

use tonic::transport::Channel;
use wal_durable::Outcome;
use wal_namespaces::Backend;
use wal_namespaces::feed::{Feed, Source};
use wal_proto::v1::operations_client::OperationsClient;
use wal_proto::v1::{
    AuditRequest, CancelEntryRequest, CancelEntryResponse, DestinationState,
    ListCancellationsRequest, PauseRequest, ResumeRequest,
};
use wal_testkit::{TestProducer, Upstream, control_plane_at, delayed, eventually};
use wal_testkit::{apply_config, namespace_json, start_consumer_following, write, write_true};

/// The delayed entries' delay: long enough to cancel one and for the consumer to hear of it.
const DELAY_MILLIS: i64 = 6_000;
/// The keyspace the several-stores tests use too: one keyspace fewer to create (each adds
/// schema changes every test waiting on a first durable connection feels).
const KEYSPACE: &str = "wal_stores_test";
/// How long a cancelled entry that was due is watched for not arriving: several polls.
const WATCHED_FOR: Duration = Duration::from_secs(3);

async fn cancel(
    operations: &mut OperationsClient<Channel>,
    namespace: &str,
    id: &str,
) -> Result<CancelEntryResponse, tonic::Status> {
    let request = CancelEntryRequest {
        namespace: namespace.to_owned(),
        entry_id: id.to_owned(),
        reason: "the cancel test".to_owned(),
        operator: "cancel-test".to_owned(),
    };
    operations
        .cancel_entry(request)
        .await
        .map(tonic::Response::into_inner)
}

/// Pauses the namespace (`true`) or resumes it.
async fn pause(operations: &mut OperationsClient<Channel>, namespace: &str, paused: bool) {
    let (namespace, operator) = (namespace.to_owned(), "cancel-test".to_owned());
    if paused {
        let reason = "the cancel test".to_owned();
        let request = PauseRequest {
            namespace,
            reason,
            operator,
            ..Default::default()
        };
        operations.pause(request).await.unwrap();
    } else {
        let request = ResumeRequest {
            namespace,
            operator,
            ..Default::default()
        };
        operations.resume(request).await.unwrap();
    }
}

/// How many times `upstream` took entry `id` (answered 200).
fn arrivals(upstream: &Upstream, id: &str) -> usize {
    let taken = upstream.received();
    let of_id = taken.iter().filter(|r| {
        r.status == 200 && r.headers.get("idempotency-key").map(String::as_str) == Some(id)
    });
    of_id.count()
}

/// Waits until `upstream` took entry `id`.
async fn arrived(upstream: &Upstream, id: &str) {
    eventually(Duration::from_secs(40), "the entry delivered", || async {
        (arrivals(upstream, id) > 0).then_some(())
    })
    .await;
}

/// The control plane, a namespace recording receipts (its target an HTTP upstream), and a
/// producer and a consumer following the control plane.
struct Scene {
    url: String,
    operations: OperationsClient<Channel>,
    upstream: Upstream,
    name: String,
    producer: TestProducer,
    /// `None` only while it is being restarted.
    consumer: Option<wal_testkit::ConsumerHandle>,
}

impl Scene {
    async fn start() -> Self {
        // The metrics recorder, before the consumer makes its handles: `in_flight` reads it.
        wal_testkit::scrape();
        let (mut registry, url) = control_plane_at().await;
        let operations = OperationsClient::connect(url.clone()).await.unwrap();
        let upstream = Upstream::start(|_| 200).await;
        let config = namespace_json(Backend::Kafka, 1, &upstream.target(), "");
        let config = wal_testkit::with_durable_storage(&config, KEYSPACE);
        let mut config: serde_json::Value = serde_json::from_str(&config).unwrap();
        config["persistence_configurations"]["persistence_configuration"][0]["config"]["durable_storage"]
            ["receipts"] = serde_json::json!(true);
        let name = apply_config(&mut registry, &config.to_string()).await.name;
        let producer = TestProducer::start_following(Self::feed(&url).await).await;
        let consumer = start_consumer_following(Self::feed(&url).await).await;
        Self {
            url,
            operations,
            upstream,
            name,
            producer,
            consumer: Some(consumer),
        }
    }

    fn consumer(&self) -> &wal_testkit::ConsumerHandle {
        self.consumer.as_ref().expect("a consumer runs")
    }

    async fn feed(url: &str) -> Feed {
        Feed::open(Source::ControlPlane(url.to_owned(), None))
            .await
            .unwrap()
    }

    async fn write(&self, payload: &[u8], delay_millis: i64) -> String {
        let request = delayed(&self.name, payload, delay_millis, 0);
        write_true(&self.producer.client, request).await
    }

    async fn cancel(&mut self, id: &str) -> Result<CancelEntryResponse, tonic::Status> {
        let name = self.name.clone();
        cancel(&mut self.operations, &name, id).await
    }

    /// Waits until the consumer holds at least `count` entries of the namespace it has
    /// received and not yet acknowledged.
    async fn in_flight(&self, count: f64) {
        let name = self.name.as_str();
        eventually(
            Duration::from_secs(30),
            "the entry received",
            || async move {
                let held = wal_testkit::scraped("wal_consumer_in_flight", name)?;
                (held >= count).then_some(())
            },
        )
        .await;
    }

    /// Waits until the consumer has skipped `count` cancelled entries.
    async fn skipped(&self, count: u64) {
        let stats = self.consumer().deliverer().stats();
        eventually(
            Duration::from_secs(20),
            "the cancelled entries skipped",
            || async { (stats.cancelled.load(Ordering::Relaxed) >= count).then_some(()) },
        )
        .await;
    }
}

/// Delivered already: the cancel is refused, names where it went, and stores nothing.
async fn a_late_cancel_is_refused(scene: &mut Scene) -> String {
    let delivered = write_true(&scene.producer.client, write(&scene.name, b"delivered")).await;
    arrived(&scene.upstream, &delivered).await;
    let storage = wal_testkit::durable_storage(KEYSPACE).await;
    eventually(
        Duration::from_secs(20),
        "the delivered entry's receipt",
        || async {
            let receipts = storage.receipts(&scene.name, &delivered).await.ok()?;
            let applied = receipts.iter().any(|r| r.outcome == Outcome::Applied);
            applied.then_some(())
        },
    )
    .await;
    let late = scene.cancel(&delivered).await.unwrap_err();
    assert_eq!(late.code(), tonic::Code::FailedPrecondition, "{late:?}");
    let said = late.message();
    assert!(
        said.contains("delivered already") && said.contains("default"),
        "{said}"
    );
    delivered
}

/// Two delayed entries; one is cancelled while it waits in the consumer (received already:
/// only the check after its wait can stop it). Returns the cancelled one.
async fn a_waiting_entry_is_cancelled(scene: &mut Scene) -> String {
    let kept = scene.write(b"kept", DELAY_MILLIS).await;
    let dropped = scene.write(b"dropped", DELAY_MILLIS).await;
    scene.in_flight(2.0).await;
    let answer = scene.cancel(&dropped).await.unwrap();
    assert!(answer.changed && answer.delivery_known, "{answer:?}");
    let states: Vec<(String, DestinationState)> = answer
        .destinations
        .iter()
        .map(|d| (d.destination.clone(), d.state()))
        .collect();
    assert_eq!(states, [("default".to_owned(), DestinationState::Pending)]);
    let summary = &answer.summary;
    assert!(
        summary.contains("will not be delivered to default"),
        "{summary}"
    );
    let again = scene.cancel(&dropped).await.unwrap();
    assert!(!again.changed, "cancelled once: {again:?}");
    // The cancelled one was due with the kept one: its skip is counted once it is done.
    arrived(&scene.upstream, &kept).await;
    scene.skipped(1).await;
    tokio::time::sleep(WATCHED_FOR).await;
    assert_eq!(
        arrivals(&scene.upstream, &dropped),
        0,
        "a cancelled entry was delivered"
    );
    let stats = scene.consumer().deliverer().stats();
    assert_eq!(stats.cancelled.load(Ordering::Relaxed), 1);
    dropped
}

/// An entry held by a pause when its cancel comes is not delivered once resumed.
async fn a_paused_entry_is_cancelled(scene: &mut Scene) -> String {
    // Received before the pause (a consumer takes no new entries of a paused namespace), and
    // far enough from its deliver-at that the pause lands first on a loaded machine: with 2 s
    // and a fixed second to receive it, CI once saw it never held.
    let held = scene.write(b"held", 10_000).await;
    scene.in_flight(1.0).await;
    let name = scene.name.clone();
    pause(&mut scene.operations, &name, true).await;
    let stats = scene.consumer().deliverer().stats();
    eventually(
        Duration::from_secs(20),
        "the entry held by the pause",
        || async { (stats.paused.load(Ordering::Relaxed) > 0).then_some(()) },
    )
    .await;
    scene.cancel(&held).await.unwrap();
    eventually(
        Duration::from_secs(20),
        "the consumer heard of it",
        || async {
            let directives = scene.consumer().directives();
            let heard = directives.borrow().cancellations.cancelled(&name, &held);
            heard.then_some(())
        },
    )
    .await;
    pause(&mut scene.operations, &name, false).await;
    scene.skipped(2).await;
    assert_eq!(
        arrivals(&scene.upstream, &held),
        0,
        "delivered after its pause"
    );
    held
}

/// An entry held by its target's open breaker when its cancel comes is not attempted again:
/// its next turn through the breaker finds it cancelled, and the target never takes it.
async fn an_entry_held_by_a_breaker_is_cancelled(scene: &mut Scene) -> String {
    scene.upstream.break_with(503);
    let stats = scene.consumer().deliverer().stats();
    let held_before = stats.held.load(Ordering::Relaxed);
    let held = write_true(
        &scene.producer.client,
        write(&scene.name, b"held by a breaker"),
    )
    .await;
    eventually(
        Duration::from_secs(20),
        "the entry held by the open breaker",
        || async { (stats.held.load(Ordering::Relaxed) > held_before).then_some(()) },
    )
    .await;
    let answer = scene.cancel(&held).await.unwrap();
    assert!(answer.changed, "{answer:?}");
    // Skipped at its next turn (a probe every 2 s at most), the target still down.
    scene.skipped(3).await;
    scene.upstream.mend();
    let kept = write_true(&scene.producer.client, write(&scene.name, b"kept")).await;
    arrived(&scene.upstream, &kept).await;
    assert_eq!(
        arrivals(&scene.upstream, &held),
        0,
        "delivered after its cancel, once the target was back"
    );
    held
}

/// The cancellation is stored: a consumer started after it skips a cancelled entry too.
async fn a_restarted_consumer_skips_one(scene: &mut Scene, dropped: &str) -> String {
    let later_kept = scene.write(b"later kept", DELAY_MILLIS).await;
    let later_dropped = scene.write(b"later dropped", DELAY_MILLIS).await;
    scene.cancel(&later_dropped).await.unwrap();
    if let Some(stopped) = scene.consumer.take() {
        stopped.shutdown().await;
    }
    scene.consumer = Some(start_consumer_following(Scene::feed(&scene.url).await).await);
    arrived(&scene.upstream, &later_kept).await;
    // At least the later one (the first may be received again, its acknowledgement not yet
    // committed when the first consumer left, and skipped again).
    scene.skipped(1).await;
    tokio::time::sleep(WATCHED_FOR).await;
    let upstream = &scene.upstream;
    assert_eq!(
        arrivals(upstream, &later_dropped),
        0,
        "delivered after a restart"
    );
    assert_eq!(arrivals(upstream, dropped), 0, "delivered after a restart");
    later_dropped
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_delayed_entry_is_never_delivered_and_a_late_cancel_says_so() {
    let mut scene = Scene::start().await;
    let delivered = a_late_cancel_is_refused(&mut scene).await;
    let dropped = a_waiting_entry_is_cancelled(&mut scene).await;
    let held = a_paused_entry_is_cancelled(&mut scene).await;
    let broken = an_entry_held_by_a_breaker_is_cancelled(&mut scene).await;
    let later_dropped = a_restarted_consumer_skips_one(&mut scene, &dropped).await;

    // Listed, and audited: the refusal and the cancels.
    let operations = &mut scene.operations;
    let listed = operations
        .list_cancellations(ListCancellationsRequest {
            namespace: scene.name.clone(),
        })
        .await
        .unwrap()
        .into_inner()
        .cancellations;
    let ids: Vec<&str> = listed.iter().map(|c| c.entry_id.as_str()).collect();
    assert_eq!(
        ids,
        [
            later_dropped.as_str(),
            broken.as_str(),
            held.as_str(),
            dropped.as_str()
        ]
    );
    assert!(listed.iter().all(|c| c.cancelled_by == "cancel-test"));
    let audit = operations
        .audit(AuditRequest {
            namespace: scene.name.clone(),
            limit: 20,
        })
        .await
        .unwrap()
        .into_inner()
        .records;
    let results: Vec<(&str, &str)> = audit
        .iter()
        .filter(|r| r.verb == "cancel")
        .map(|r| {
            (
                r.subject.as_str(),
                r.result.split(':').next().unwrap_or_default(),
            )
        })
        .collect();
    assert_eq!(
        results,
        [
            (later_dropped.as_str(), "done"),
            (broken.as_str(), "done"),
            (held.as_str(), "done"),
            (dropped.as_str(), "unchanged"),
            (dropped.as_str(), "done"),
            (delivered.as_str(), "refused"),
        ]
    );

    if let Some(consumer) = scene.consumer.take() {
        consumer.shutdown().await;
    }
    scene.producer.shutdown().await;
}
