//! The delay queue on the real brokers: entries are never delivered before their deliver-at,
//! even across a SIGKILL of the consumer while they wait; a delay longer than an SQS step is
//! taken in steps and delivered once; and on Kafka a long-delayed entry waits on a delay tier
//! without holding back entries that are due.
//!
//! Entries go to a real HTTP upstream, which records when each arrived; the http target sends
//! each entry's deliver-at in `X-WAL-Deliver-At-Micros`.

#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::Ordering;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use wal_namespaces::Backend;
use wal_proto::v1::{Lifecycle, WriteToLogRequest};
use wal_queue::delay::tier_topic;
use wal_testkit::{Received, Upstream, eventually, start_consumer_with, write_true};
use wal_testkit::{TestProducer, kafka_log, namespace_json, namespace_with_target, unique};

wal_testkit::on_each_backend! {
    entries_are_never_early_across_a_consumer_kill_and_restart => never_early_across_a_kill;
}

fn delayed_write(namespace: &str, key: &str, delay_millis: i64) -> WriteToLogRequest {
    WriteToLogRequest {
        namespace: namespace.to_owned(),
        key: key.to_owned(),
        payload: key.as_bytes().to_vec(),
        lifecycle: Some(Lifecycle {
            delay_millis,
            ..Lifecycle::default()
        }),
        ..WriteToLogRequest::default()
    }
}

/// Writes and returns the entry id; the write must be durable.
async fn write(producer: &mut TestProducer, request: WriteToLogRequest) -> String {
    write_true(&producer.client, request).await
}

fn micros(at: SystemTime) -> i64 {
    i64::try_from(at.duration_since(UNIX_EPOCH).unwrap().as_micros()).unwrap()
}

fn entry_id(received: &Received) -> String {
    received.headers["idempotency-key"].clone()
}

/// Every arrival at or after its deliver-at: the one it carries, and the one the test holds for
/// its id (`due`: when it was written, by the test's clock, plus its delay, a bound the
/// platform cannot move; a copy stamped with a later deliver-at than it should carry passes
/// the first check, not this one). Returns the arrivals that came early, a line each.
fn early_arrivals(received: &[Received], due: &BTreeMap<String, i64>) -> Vec<String> {
    received
        .iter()
        .filter_map(|r| {
            let carried: i64 = r.headers["x-wal-deliver-at-micros"].parse().unwrap();
            let id = entry_id(r);
            let owed = *due.get(&id).expect("an entry the test wrote");
            let arrived = micros(r.at);
            let due = carried.max(owed);
            (arrived < due).then(|| format!("{id} arrived {} µs early", due - arrived))
        })
        .collect()
}

/// Writes `request` and records when it is due by the test's clock: its write's start plus its
/// delay.
async fn write_due(
    producer: &mut TestProducer,
    request: WriteToLogRequest,
    due: &mut BTreeMap<String, i64>,
) -> String {
    let delay = request.lifecycle.as_ref().map_or(0, |l| l.delay_millis);
    let started = micros(SystemTime::now());
    let id = write(producer, request).await;
    due.insert(id.clone(), started + delay * 1_000);
    id
}

/// Entries with delays of 1 to 40 s, a consumer SIGKILLed while they wait (held in memory,
/// parked on the broker), then restarted: every entry arrives, none before its deliver-at.
async fn never_early_across_a_kill(backend: Backend) {
    let upstream = Upstream::start(|_| 200).await;
    let config = namespace_json(backend, 1, &upstream.target(), "");
    let namespace = wal_namespaces::parse(&config, "test").unwrap();
    let dir = std::env::temp_dir().join(unique("delay-namespaces"));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join(format!("{}.json", namespace.name)), &config).unwrap();
    let mut producer = TestProducer::start(vec![namespace.clone()]).await;
    let mut first = wal_testkit::consumer_process(&dir, "127.0.0.1:0");

    let (mut ids, mut due) = (BTreeSet::new(), BTreeMap::new());
    for i in 0..40 {
        let delay = 1_000 + i * 1_000;
        let request = delayed_write(&namespace.name, &format!("k{i}"), delay);
        ids.insert(write_due(&mut producer, request, &mut due).await);
    }
    // Some have arrived, the rest wait: near ones held in memory, far ones on the broker.
    eventually(
        Duration::from_secs(60),
        "the first entries to arrive",
        || async { (upstream.received().len() >= 3).then_some(()) },
    )
    .await;
    first.kill().unwrap();
    first.wait().unwrap();
    let at_kill = upstream.received().len();
    assert!(at_kill < ids.len(), "the kill landed while entries waited");

    let mut second = wal_testkit::consumer_process(&dir, "127.0.0.1:0");
    let arrived = eventually(
        Duration::from_secs(120),
        "every entry to arrive",
        || async {
            let received = upstream.received();
            let seen: BTreeSet<String> = received.iter().map(entry_id).collect();
            ids.is_subset(&seen).then_some(received)
        },
    )
    .await;
    second.kill().unwrap();
    second.wait().unwrap();
    assert_eq!(
        early_arrivals(&arrived, &due),
        Vec::<String>::new(),
        "none early"
    );
    producer.shutdown().await;
}

/// With the SQS step shortened to 2 s, a 15 s delay takes several steps (each a copy put back
/// with DelaySeconds, the original deleted) and is still delivered once, after the full delay.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_sqs_delay_longer_than_a_step_is_delivered_once_after_the_full_delay() {
    let upstream = Upstream::start(|_| 200).await;
    let namespace = namespace_with_target(Backend::Sqs, 1, &upstream.target(), "");
    let step = |options_step: &mut u64| *options_step = 2;
    let mut producer = TestProducer::start_with(vec![namespace.clone()], |o| {
        step(&mut o.sqs_delay_step_secs)
    })
    .await;
    let consumer = start_consumer_with(vec![namespace.clone()], |o| {
        step(&mut o.sqs_delay_step_secs);
    })
    .await;
    let mut due = BTreeMap::new();
    let request = delayed_write(&namespace.name, "late", 15_000);
    let id = write_due(&mut producer, request, &mut due).await;
    let received = eventually(Duration::from_secs(60), "the delayed entry", || async {
        let received = upstream.received();
        (!received.is_empty()).then_some(received)
    })
    .await;
    // Any second copy would arrive within a step or two of the first.
    tokio::time::sleep(Duration::from_secs(6)).await;
    let received_after = upstream.received();
    assert_eq!(
        received_after.len(),
        1,
        "delivered once: {:?}",
        received_after.iter().map(entry_id).collect::<Vec<_>>()
    );
    assert_eq!(entry_id(&received[0]), id);
    assert_eq!(early_arrivals(&received, &due), Vec::<String>::new());
    let parked = consumer.deliverer().stats().parked.load(Ordering::Relaxed);
    assert!(
        parked >= 3,
        "the 15 s delay was taken in 2 s steps (parked {parked} times)"
    );
    consumer.shutdown().await;
    producer.shutdown().await;
}

/// On Kafka an entry delayed by an hour waits on a delay tier; twenty entries of other keys
/// written after it arrive at once, and the hour-long one does not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kafka_entry_delayed_an_hour_waits_on_a_tier_and_holds_back_nothing() {
    let upstream = Upstream::start(|_| 200).await;
    let namespace = namespace_with_target(Backend::Kafka, 1, &upstream.target(), "");
    let mut producer = TestProducer::start(vec![namespace.clone()]).await;
    let consumer = start_consumer_with(vec![namespace.clone()], |_| {}).await;
    let slow = write(
        &mut producer,
        delayed_write(&namespace.name, "slow", 3_600_000),
    )
    .await;
    let mut due = BTreeMap::new();
    for i in 0..20 {
        let id = write(
            &mut producer,
            delayed_write(&namespace.name, &format!("k{i}"), 0),
        )
        .await;
        due.insert(id, i);
    }
    eventually(
        Duration::from_secs(60),
        "the twenty due entries",
        || async {
            let seen: BTreeSet<String> = upstream.received().iter().map(entry_id).collect();
            due.keys().all(|id| seen.contains(id)).then_some(())
        },
    )
    .await;
    let tier = tier_topic(&namespace.queues[0].name, Duration::from_secs(15 * 60));
    let parked = eventually(
        Duration::from_secs(30),
        "the slow entry on its tier",
        || async {
            let on_tier = kafka_log(&tier).await;
            on_tier.into_iter().find(|e| e.id == slow)
        },
    )
    .await;
    assert_eq!(parked.key, "slow");
    assert!(
        !upstream.received().iter().any(|r| entry_id(r) == slow),
        "the hour-long entry is not delivered early"
    );
    consumer.shutdown().await;
    producer.shutdown().await;
}
