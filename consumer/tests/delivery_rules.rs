//! The delivery contract on the real stack: retries up to the namespace's attempts and then the
//! DLQ, permanent failures straight to the DLQ, undecodable messages dead-lettered, healthy
//! entries flowing meanwhile, and never a delivery before deliver-at.

#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::time::{Duration, UNIX_EPOCH};

use rdkafka::producer::{FutureProducer, FutureRecord};
use wal_namespaces::Backend;
use wal_queue::entry::{ErrorClass, now_micros};
use wal_testkit::{
    Fleet, Received, Upstream, dlq_reader, eventually, find_entries, find_entry,
    start_consumer_with, write_true,
};
use wal_testkit::{TestProducer, delayed, namespace_with_target, write};

wal_testkit::on_each_backend! {
    never_delivers_before_deliver_at => never_delivered_before_deliver_at;
}

const LIMIT: Duration = Duration::from_secs(60);
const RETRY_THRICE: &str = r#""retry_policy": {"max_attempts": 3, "initial_backoff_ms": 1000, "multiplier": 2.0, "max_backoff_ms": 10000, "jitter": 0.0}"#;

fn answer_by_body(request: &Received) -> u16 {
    if request.body.starts_with(b"poison") {
        // A failure of this entry's own: retried, counting attempts. (A 502, 503 or 504 would
        // say the upstream is unavailable, and hold every entry: see target_outage.rs.)
        500
    } else if request.body.starts_with(b"reject") {
        400
    } else {
        200
    }
}

fn bodies(received: &[Received], body: &[u8]) -> Vec<Received> {
    received
        .iter()
        .filter(|r| r.body == body)
        .cloned()
        .collect()
}

/// Three poison entries on a consumer with two in-flight slots. Their retries wait 3 s, then 6 s;
/// the waits give their slots back, so healthy entries written meanwhile are applied before any
/// poison entry's last attempt. Were the waits to hold the slots, no healthy entry could be
/// applied until two poison entries had used every attempt: the last attempt is the line, not
/// the second, whose 3 s a loaded machine's 20 writes and deliveries have overrun (CI).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn poison_entries_reach_the_dlq_after_exactly_the_configured_attempts_while_others_flow() {
    const SLOW_RETRIES: &str = r#""retry_policy": {"max_attempts": 3, "initial_backoff_ms": 3000, "multiplier": 2.0, "max_backoff_ms": 10000, "jitter": 0.0}"#;
    let upstream = Upstream::start(answer_by_body).await;
    let namespace = namespace_with_target(Backend::Kafka, 1, &upstream.target(), SLOW_RETRIES);
    let name = namespace.name.clone();
    let fleet = Fleet::start_with(namespace.clone(), |options| options.max_in_flight = 2).await;

    let mut poisons = Vec::new();
    for i in 0..3 {
        let body = format!("poison {i}");
        let answer_id = write_true(&fleet.producer.client, write(&name, body.as_bytes())).await;
        poisons.push((body, answer_id));
    }
    eventually(LIMIT, "every poison entry's first attempt", || async {
        let received = upstream.received();
        poisons
            .iter()
            .all(|(body, _)| !bodies(&received, body.as_bytes()).is_empty())
            .then_some(())
    })
    .await;
    for i in 0..20 {
        write_true(
            &fleet.producer.client,
            write(&name, format!("healthy {i}").as_bytes()),
        )
        .await;
    }

    let dlq = dlq_reader(&namespace).await;
    let dead = find_entries(dlq.as_ref(), poisons.len(), |e| {
        poisons.iter().any(|(_, id)| id == &e.id)
    })
    .await;
    for dead in &dead {
        assert_eq!(dead.attempt, 3, "the DLQ copy counts every attempt");
        assert_eq!(dead.last_error_class(), ErrorClass::Retryable);
        assert!(
            dead.last_error.contains("gave up after 3 attempts") && dead.last_error.contains("500"),
            "{}",
            dead.last_error
        );
        assert!(dead.dead_lettered_at_micros > 0);
    }

    let received = upstream.received();
    let mut last_attempts = Vec::new();
    for (body, _) in &poisons {
        let attempts = bodies(&received, body.as_bytes());
        let numbers: Vec<&str> = attempts
            .iter()
            .map(|r| r.headers["x-wal-attempt"].as_str())
            .collect();
        assert_eq!(
            numbers,
            ["0", "1", "2"],
            "{body}: exactly the configured attempts, in order"
        );
        last_attempts.push(attempts[2].at);
    }
    let first_last_attempt = last_attempts.into_iter().min().unwrap();
    for i in 0..20 {
        let healthy = bodies(&received, format!("healthy {i}").as_bytes());
        assert_eq!(healthy.len(), 1, "healthy {i} delivered once");
        assert!(
            healthy[0].at < first_last_attempt,
            "healthy {i} was held up behind the poison entries waiting to retry"
        );
    }
    fleet.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_permanent_failure_goes_to_the_dlq_on_its_first_attempt() {
    let upstream = Upstream::start(answer_by_body).await;
    let namespace = namespace_with_target(Backend::Sqs, 1, &upstream.target(), RETRY_THRICE);
    let name = namespace.name.clone();
    let mut fleet = Fleet::start(namespace.clone()).await;

    let rejected = fleet
        .producer
        .client
        .write_to_log(write(&name, b"reject"))
        .await
        .unwrap()
        .into_inner();
    let dlq = dlq_reader(&namespace).await;
    let dead = find_entry(dlq.as_ref(), |e| e.id == rejected.entry_id).await;
    assert_eq!(dead.attempt, 1);
    assert_eq!(dead.last_error_class(), ErrorClass::Permanent);
    assert!(dead.last_error.contains("400"), "{}", dead.last_error);
    assert_eq!(
        bodies(&upstream.received(), b"reject").len(),
        1,
        "a permanent failure is not retried"
    );
    fleet.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_undecodable_message_is_dead_lettered_and_the_queue_keeps_flowing() {
    let upstream = Upstream::start(answer_by_body).await;
    let namespace = namespace_with_target(Backend::Kafka, 1, &upstream.target(), "");
    let name = namespace.name.clone();
    let mut fleet = Fleet::start(namespace.clone()).await;

    let bootstrap = wal_testkit::kafka_bootstrap();
    let raw: FutureProducer = rdkafka::ClientConfig::new()
        .set("bootstrap.servers", &bootstrap)
        .create()
        .unwrap();
    raw.send(
        FutureRecord::<(), _>::to(&namespace.queues[0].name).payload(b"not an entry".as_slice()),
        Duration::from_secs(10),
    )
    .await
    .unwrap();
    fleet
        .producer
        .client
        .write_to_log(write(&name, b"after the garbage"))
        .await
        .unwrap();

    let dlq = dlq_reader(&namespace).await;
    let dead = find_entry(dlq.as_ref(), |e| e.id.starts_with("undecodable:")).await;
    assert!(
        dead.last_error.contains("undecodable"),
        "{}",
        dead.last_error
    );
    eventually(LIMIT, "the entry after the garbage", || async {
        (!bodies(&upstream.received(), b"after the garbage").is_empty()).then_some(())
    })
    .await;
    fleet.stop().await;
}

/// An entry from a newer build (a rolling upgrade's producer ahead of this consumer) carries a
/// field this build does not know: it is delivered with the fields this build knows, not
/// refused as undecodable and dead-lettered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_entry_with_a_field_this_build_does_not_know_is_delivered() {
    use wal_queue::entry::{self, Body, Entry, Target};
    let upstream = Upstream::start(answer_by_body).await;
    let namespace = namespace_with_target(Backend::Kafka, 1, &upstream.target(), "");
    let fleet = Fleet::start(namespace.clone()).await;

    let target: serde_json::Value = serde_json::from_str(&upstream.target()).unwrap();
    let now = now_micros();
    let newer = Entry {
        version: entry::ENTRY_VERSION,
        id: entry::new_entry_id(),
        namespace: namespace.name.clone(),
        key: "k".to_owned(),
        body: Some(Body::Payload(b"from a newer build".to_vec())),
        target: Some(Target {
            kind: "http".to_owned(),
            settings_json: target["settings"].to_string(),
        }),
        original_write_time_micros: now,
        deliver_at_micros: now,
        enqueued_at_micros: now,
        ..Entry::default()
    };
    let mut bytes = entry::encode(&newer);
    // Field 999: none in entry.proto, as a newer build's would be.
    prost::encoding::string::encode(999, &"a newer field".to_owned(), &mut bytes);
    let raw: FutureProducer = rdkafka::ClientConfig::new()
        .set("bootstrap.servers", wal_testkit::kafka_bootstrap())
        .create()
        .unwrap();
    raw.send(
        FutureRecord::to(&namespace.queues[0].name)
            .key("k")
            .payload(bytes.as_slice()),
        Duration::from_secs(10),
    )
    .await
    .unwrap();

    let delivered = eventually(LIMIT, "the newer build's entry delivered", || async {
        let received = bodies(&upstream.received(), b"from a newer build");
        (!received.is_empty()).then_some(received)
    })
    .await;
    assert_eq!(
        delivered[0].headers["x-wal-attempt"], "0",
        "delivered at its first attempt"
    );
    fleet.stop().await;
}

async fn never_delivered_before_deliver_at(backend: Backend) {
    let upstream = Upstream::start(answer_by_body).await;
    let namespace = namespace_with_target(backend, 1, &upstream.target(), "");
    let name = namespace.name.clone();
    let fleet = Fleet::start(namespace.clone()).await;

    let mut due = Vec::new();
    for (i, delay_millis) in [3000, 1500, 0, 4500].into_iter().enumerate() {
        let original = now_micros();
        let body = format!("delayed {i}");
        write_true(
            &fleet.producer.client,
            delayed(&name, body.as_bytes(), delay_millis, original),
        )
        .await;
        due.push((body, original + delay_millis * 1000));
    }
    for (body, due_micros) in due {
        let received = eventually(LIMIT, &body, || async {
            bodies(&upstream.received(), body.as_bytes())
                .first()
                .cloned()
        })
        .await;
        let at =
            i64::try_from(received.at.duration_since(UNIX_EPOCH).unwrap().as_micros()).unwrap();
        assert!(
            at >= due_micros,
            "{body} arrived {} µs early",
            due_micros - at
        );
    }
    fleet.stop().await;
}

/// A namespace that keeps an archive: an entry is acknowledged only once it is archived. With
/// the archive's CQL cluster unreachable the apply succeeds every time, yet the entry is retried
/// and finally dead-lettered, naming the archive, instead of being acknowledged unarchived.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_entry_the_archive_did_not_take_is_not_acknowledged() {
    let upstream = Upstream::start(|_| 200).await;
    let mut namespace = namespace_with_target(Backend::Kafka, 1, &upstream.target(), RETRY_THRICE);
    namespace.durable_storage = Some(wal_namespaces::DurableStorageConfig {
        archive: Some(wal_namespaces::ArchiveConfig {
            retention: Duration::from_secs(86_400),
        }),
        ..wal_namespaces::DurableStorageConfig::keyspace("wal_test")
    });
    let name = namespace.name.clone();
    let mut producer = TestProducer::start(vec![namespace.clone()]).await;
    // Nothing listens on port 1: every archive write fails to connect.
    let consumer = start_consumer_with(vec![namespace.clone()], |options| {
        options.cql.cql_nodes = vec!["127.0.0.1:1".into()];
    })
    .await;
    let answer_id = write_true(&producer.client, write(&name, b"archived or not at all")).await;

    let dlq = dlq_reader(&namespace).await;
    let dead = find_entry(dlq.as_ref(), |e| e.id == answer_id).await;
    assert_eq!(dead.attempt, 3, "every attempt failed for the archive");
    assert!(
        dead.last_error.contains("durable storage") && dead.last_error.contains("127.0.0.1:1"),
        "{}",
        dead.last_error
    );
    assert_eq!(
        bodies(&upstream.received(), b"archived or not at all").len(),
        3,
        "each attempt applied it (idempotent targets absorb the repeats)"
    );
    consumer.shutdown().await;
    producer.shutdown().await;
}
