#![allow(clippy::expect_used, clippy::unwrap_used)]

//! The queue conformance suite: the contract of `wal_queue::Queue`, run unchanged against
//! real Kafka and real ElasticMQ (the SQS API), as `scripts/stack up` starts them, and against the
//! in-memory twin (`queue::memory`, feature `memory`) that unit tests and simulations use.
//!
//! Each backend supplies a `Harness`; `conformance!` instantiates every check for it, so a test
//! reads as `kafka::unacknowledged_entry_is_received_again_after_restart`.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use rdkafka::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::producer::{FutureProducer, FutureRecord};
use tokio::time::Instant;
use wal_queue::entry::{self, Body, Entry, ErrorClass, Target};
use wal_queue::kafka::{CloseMark, KafkaBackend, KafkaSettings, closes_finished};
use wal_queue::memory::MemoryBroker;
use wal_queue::sqs::{SqsBackend, SqsSettings, is_missing_queue};
use wal_queue::{
    Delivery, Durability, EnqueueError, Failure, MAX_ERROR_BYTES, MAX_UNDECODABLE_BYTES, Operation,
    Queue, QueueError, QueueSpec, dead_letter_copy, retry_copy,
};

/// How long any one expected entry may take to arrive (a new Kafka consumer first joins its
/// group; an unacknowledged SQS message first waits out its visibility timeout).
const ARRIVAL: Duration = Duration::from_secs(30);

/// What the suite needs from a backend beyond the `Queue` trait.
#[async_trait]
trait Harness: Send + Sync {
    /// A fresh handle, as a restarted consumer process would open it.
    fn open(&self, spec: &QueueSpec) -> Arc<dyn Queue>;
    /// Whether the topic or queue exists on the broker.
    async fn exists(&self, name: &str) -> bool;
    /// Puts bytes that are not an entry on the queue, as a foreign producer might.
    async fn put_raw(&self, name: &str, body: &str);
    /// How long an entry received but not acknowledged stays hidden from other handles.
    fn hidden_for(&self) -> Duration;
}

struct KafkaHarness {
    backend: Arc<KafkaBackend>,
    raw: FutureProducer,
    admin: BaseConsumer,
}

impl KafkaHarness {
    fn new() -> Self {
        let bootstrap = wal_testkit::kafka_bootstrap();
        let mut settings = KafkaSettings::new(&bootstrap);
        settings.group_prefix = wal_testkit::unique("conformance") + ".";
        let client = |name: &str| {
            let mut config = ClientConfig::new();
            config
                .set("bootstrap.servers", &bootstrap)
                .set("client.id", name);
            config
        };
        Self {
            backend: KafkaBackend::new(settings).expect("kafka settings"),
            raw: client("raw").create().expect("raw producer"),
            admin: client("metadata").create().expect("metadata client"),
        }
    }
}

#[async_trait]
impl Harness for KafkaHarness {
    fn open(&self, spec: &QueueSpec) -> Arc<dyn Queue> {
        Arc::new(self.backend.queue(spec.clone()))
    }

    async fn exists(&self, name: &str) -> bool {
        let metadata = self
            .admin
            .fetch_metadata(None, Duration::from_secs(10))
            .expect("kafka metadata (is the stack up? scripts/stack up)");
        metadata.topics().iter().any(|t| t.name() == name)
    }

    async fn put_raw(&self, name: &str, body: &str) {
        let record = FutureRecord::to(name).key("raw").payload(body);
        self.raw
            .send(record, Duration::from_secs(10))
            .await
            .expect("raw produce");
    }

    fn hidden_for(&self) -> Duration {
        // Kafka hides nothing by time: a new consumer resumes at the last commit at once.
        Duration::ZERO
    }
}

struct SqsHarness {
    backend: Arc<SqsBackend>,
}

const SQS_VISIBILITY: Duration = Duration::from_secs(2);

impl SqsHarness {
    async fn new() -> Self {
        let mut settings = SqsSettings::local(&wal_testkit::sqs_endpoint());
        settings.visibility_timeout = SQS_VISIBILITY;
        Self {
            backend: SqsBackend::new(settings).await,
        }
    }
}

#[async_trait]
impl Harness for SqsHarness {
    fn open(&self, spec: &QueueSpec) -> Arc<dyn Queue> {
        Arc::new(self.backend.queue(spec.clone()))
    }

    async fn exists(&self, name: &str) -> bool {
        let client = self.backend.client();
        match client.get_queue_url().queue_name(name).send().await {
            Ok(_) => true,
            Err(e) if is_missing_queue(&e) => false,
            Err(e) => panic!("SQS GetQueueUrl failed (is the stack up? scripts/stack up): {e:?}"),
        }
    }

    async fn put_raw(&self, name: &str, body: &str) {
        let client = self.backend.client();
        let url = client
            .get_queue_url()
            .queue_name(name)
            .send()
            .await
            .expect("queue url")
            .queue_url()
            .expect("url")
            .to_owned();
        client
            .send_message()
            .queue_url(url)
            .message_body(body)
            .send()
            .await
            .expect("raw send");
    }

    fn hidden_for(&self) -> Duration {
        SQS_VISIBILITY + Duration::from_secs(1)
    }
}

/// The in-memory twin: the same suite, no broker.
#[derive(Default)]
struct MemoryHarness {
    broker: MemoryBroker,
}

#[async_trait]
impl Harness for MemoryHarness {
    fn open(&self, spec: &QueueSpec) -> Arc<dyn Queue> {
        Arc::new(self.broker.queue(spec.clone()))
    }

    async fn exists(&self, name: &str) -> bool {
        self.broker.exists(name)
    }

    async fn put_raw(&self, name: &str, body: &str) {
        self.broker.append_raw(name, body.as_bytes().to_vec());
    }

    fn hidden_for(&self) -> Duration {
        Duration::ZERO
    }
}

fn spec(test: &str) -> QueueSpec {
    let name = wal_testkit::unique(test);
    QueueSpec::new("conformance", &name, &format!("{name}-dlq"))
}

fn sample_entry(key: &str, payload: &[u8]) -> Entry {
    let now = entry::now_micros();
    Entry {
        version: entry::ENTRY_VERSION,
        id: entry::new_entry_id(),
        namespace: "conformance".into(),
        key: key.into(),
        body: Some(Body::Payload(payload.to_vec())),
        target: Some(Target {
            kind: "cql".into(),
            settings_json: r#"{"table":"t"}"#.into(),
        }),
        original_write_time_micros: now - 5_000_000,
        deliver_at_micros: now,
        enqueued_at_micros: now,
        origin_region: "local".into(),
        trace_context: [("traceparent".to_owned(), "00-abc-def-01".to_owned())].into(),
        ..Entry::default()
    }
}

/// An entry whose encoding is exactly `size` bytes.
fn entry_of_encoded_size(size: usize) -> Entry {
    let mut entry = sample_entry("big", b"");
    let overhead = entry::encode(&entry).len();
    let mut payload_len = size.saturating_sub(overhead);
    loop {
        entry.body = Some(Body::Payload(vec![b'x'; payload_len]));
        let len = entry::encode(&entry).len();
        if len == size {
            return entry;
        }
        // The payload's length prefix grows by a byte now and then; step back over it.
        payload_len = if len > size {
            payload_len - (len - size)
        } else {
            payload_len + (size - len)
        };
    }
}

fn id_of(delivery: &Delivery) -> Option<&str> {
    delivery.entry.as_ref().ok().map(|e| e.id.as_str())
}

/// Receives until `done` holds for everything received so far, or `limit` passes.
async fn receive_until(
    queue: &dyn Queue,
    limit: Duration,
    done: impl Fn(&[Delivery]) -> bool,
) -> Vec<Delivery> {
    let deadline = Instant::now() + limit;
    let mut received = Vec::new();
    while !done(&received) && Instant::now() < deadline {
        let wait = deadline
            .saturating_duration_since(Instant::now())
            .min(Duration::from_secs(1));
        let batch = queue.receive(10, wait).await.expect("receive");
        received.extend(batch);
    }
    received
}

async fn receive_id(queue: &dyn Queue, id: &str) -> Delivery {
    let received = receive_until(queue, ARRIVAL, |got| {
        got.iter().any(|d| id_of(d) == Some(id))
    })
    .await;
    received
        .into_iter()
        .find(|d| id_of(d) == Some(id))
        .unwrap_or_else(|| panic!("entry {id} not received within {ARRIVAL:?}"))
}

fn ids(deliveries: &[Delivery]) -> BTreeSet<String> {
    deliveries
        .iter()
        .filter_map(id_of)
        .map(str::to_owned)
        .collect()
}

async fn provisioned(harness: &dyn Harness, test: &str) -> (QueueSpec, Arc<dyn Queue>) {
    let spec = spec(test);
    let queue = harness.open(&spec);
    queue.provision().await.expect("provision");
    (spec, queue)
}

/// Lets go of a handle as a stopping process does: a Kafka handle's consumer closes apart, and
/// leaves its group before the handle that replaces it joins.
async fn let_go<Q>(queue: Q) {
    drop(queue);
    closes_finished(CloseMark::ALL, Duration::from_secs(10)).await;
}

/// Opens a fresh handle (a restarted consumer), and checks that `gone` never arrives: a marker
/// written after it must arrive, and then the window in which an unacknowledged entry could
/// still be hidden must pass without it.
async fn assert_not_received_after_restart(
    harness: &dyn Harness,
    spec: &QueueSpec,
    key: &str,
    gone: &str,
) {
    let restarted = harness.open(spec);
    let marker = sample_entry(key, b"marker");
    restarted.enqueue(&marker).await.expect("enqueue marker");
    let mut seen = receive_until(restarted.as_ref(), ARRIVAL, |got| {
        ids(got).contains(&marker.id)
    })
    .await;
    seen.extend(receive_until(restarted.as_ref(), harness.hidden_for(), |_| false).await);
    let seen = ids(&seen);
    assert!(seen.contains(&marker.id), "the marker arrives");
    assert!(!seen.contains(gone), "entry {gone} came back: {seen:?}");
}

async fn durable_enqueue_is_received(harness: &dyn Harness) {
    let (_, queue) = provisioned(harness, "received").await;
    let sent = sample_entry("k1", b"put users/1 {\"name\":\"ada\"}");
    queue.enqueue(&sent).await.expect("durable enqueue");

    let delivery = receive_id(queue.as_ref(), &sent.id).await;
    assert_eq!(
        delivery.entry,
        Ok(sent),
        "the entry arrives whole, times and all"
    );
}

/// Enqueues an entry of key "k", receives it, acknowledges it and closes the queue (which
/// commits, on Kafka); the entry.
async fn enqueued_received_acknowledged(queue: &dyn Queue) -> Entry {
    let first = sample_entry("k", b"first");
    queue.enqueue(&first).await.expect("enqueue");
    let delivery = receive_id(queue, &first.id).await;
    queue.acknowledge(&delivery).await.expect("acknowledge");
    queue.close().await.expect("close");
    first
}

async fn acknowledged_entry_is_not_received_again(harness: &dyn Harness) {
    let (spec, queue) = provisioned(harness, "acked").await;
    let first = enqueued_received_acknowledged(queue.as_ref()).await;
    let_go(queue).await;

    assert_not_received_after_restart(harness, &spec, "k", &first.id).await;
}

async fn unacknowledged_entry_is_received_again_after_restart(harness: &dyn Harness) {
    let (spec, queue) = provisioned(harness, "unacked").await;
    let (older, newer) = (sample_entry("k", b"older"), sample_entry("k", b"newer"));
    queue.enqueue(&older).await.expect("enqueue");
    queue.enqueue(&newer).await.expect("enqueue");
    let both = [older.id.clone(), newer.id.clone()];
    let received = receive_until(queue.as_ref(), ARRIVAL, |got| {
        both.iter().all(|id| ids(got).contains(id))
    })
    .await;
    let newer_delivery = received
        .iter()
        .find(|d| id_of(d) == Some(newer.id.as_str()))
        .expect("newer received");
    // Only the later entry is done; the earlier one is still in progress when the consumer dies.
    queue
        .acknowledge(newer_delivery)
        .await
        .expect("acknowledge");
    let_go(queue).await;

    let restarted = harness.open(&spec);
    let again = receive_id(restarted.as_ref(), &older.id).await;
    assert_eq!(again.entry, Ok(older));
}

/// What a consumer does with a failed entry it will retry, as the suite checks it: a retry copy
/// (attempt + 1, due at `deliver_at_micros`, the failure recorded) put back with
/// [`Consume::requeue`], then the original acknowledged.
async fn release(
    queue: &dyn Queue,
    delivery: &Delivery,
    deliver_at_micros: i64,
    failure: &Failure,
) -> Result<(), QueueError> {
    let original = delivery.entry.as_ref().map_err(|e| {
        QueueError::permanent(
            queue.backend(),
            &queue.spec().name,
            Operation::Release,
            format!("an undecodable message cannot be retried, dead-letter it: {e}"),
        )
    })?;
    let retry = retry_copy(original, deliver_at_micros, failure);
    queue
        .requeue(&retry)
        .await
        .map_err(|e| QueueError::from_enqueue(Operation::Release, e))?;
    queue.acknowledge(delivery).await
}

/// What a consumer does with an entry it gives up on: the DLQ copy (the reason, class and time
/// recorded; an undecodable message as an entry holding its bytes) put on the DLQ with
/// [`Consume::enqueue_dead_letter`], then the original acknowledged.
async fn dead_letter(
    queue: &dyn Queue,
    delivery: &Delivery,
    failure: &Failure,
) -> Result<(), QueueError> {
    let dead = dead_letter_copy(queue.spec(), delivery, failure);
    queue
        .enqueue_dead_letter(&dead)
        .await
        .map_err(|e| QueueError::from_enqueue(Operation::DeadLetter, e))?;
    queue.acknowledge(delivery).await
}

/// Dead-letters `delivery` of the queue `spec` with `failure`; the entry as its DLQ holds it.
async fn dead_lettered(
    harness: &dyn Harness,
    spec: &QueueSpec,
    queue: &dyn Queue,
    delivery: &Delivery,
    failure: &Failure,
) -> Entry {
    dead_letter(queue, delivery, failure)
        .await
        .expect("dead-letter");
    let dlq = harness.open(&spec.dead_letters().expect("has a dlq"));
    let id = delivery
        .entry
        .as_ref()
        .map(|e| e.id.clone())
        .expect("decodes");
    let dead = receive_id(dlq.as_ref(), &id).await;
    dead.entry.expect("its DLQ copy decodes")
}

async fn dead_lettering_puts_entry_and_reason_on_the_dlq(harness: &dyn Harness) {
    let (spec, queue) = provisioned(harness, "dead").await;
    let mut poison = sample_entry("p", b"bad row");
    poison.attempt = 3;
    queue.enqueue(&poison).await.expect("enqueue");
    let delivery = receive_id(queue.as_ref(), &poison.id).await;
    let reason = "target refused the row: 400 unknown column 'nmae'";
    let failure = Failure::permanent(reason);
    let dead = dead_lettered(harness, &spec, queue.as_ref(), &delivery, &failure).await;
    assert_eq!(dead.last_error, reason);
    assert_eq!(dead.last_error_class, ErrorClass::Permanent as i32);
    assert_eq!(dead.attempt, 3, "the attempt count travels to the DLQ");
    assert!(dead.dead_lettered_at_micros >= poison.enqueued_at_micros);
    assert_eq!(dead.body, poison.body);
    assert_eq!(
        dead.original_write_time_micros,
        poison.original_write_time_micros
    );

    // Dead-lettering acknowledged the original.
    queue.close().await.expect("close");
    let_go(queue).await;
    assert_not_received_after_restart(harness, &spec, "p", &poison.id).await;
}

/// Puts `garbage` on a fresh queue as a foreign producer might, dead-letters what arrives, and
/// returns the DLQ's entry for it.
async fn dead_letter_garbage(harness: &dyn Harness, test: &str, garbage: &str) -> Entry {
    let (spec, queue) = provisioned(harness, test).await;
    harness.put_raw(&spec.name, garbage).await;
    let received = receive_until(queue.as_ref(), ARRIVAL, |got| !got.is_empty()).await;
    let delivery = received.first().expect("the raw message is received");
    assert!(
        delivery.entry.is_err(),
        "garbage decoded as {:?}",
        delivery.entry
    );
    dead_letter(
        queue.as_ref(),
        delivery,
        &Failure::permanent("cannot decode"),
    )
    .await
    .expect("dead-letter");
    let dlq = harness.open(&spec.dead_letters().expect("has a dlq"));
    let dead = receive_until(dlq.as_ref(), ARRIVAL, |got| !got.is_empty()).await;
    dead.first()
        .expect("dlq entry")
        .entry
        .clone()
        .expect("dlq entry decodes")
}

async fn undecodable_message_reaches_the_dlq_with_its_bytes(harness: &dyn Harness) {
    let garbage = "this is not an entry";
    let dead = dead_letter_garbage(harness, "garbage", garbage).await;
    assert_eq!(dead.body, Some(Body::Payload(garbage.as_bytes().to_vec())));
    assert!(
        dead.last_error.contains("cannot decode"),
        "{}",
        dead.last_error
    );
    assert!(
        dead.last_error.contains("undecodable"),
        "{}",
        dead.last_error
    );
    assert!(dead.id.starts_with("undecodable:"), "{}", dead.id);
}

async fn released_entry_returns_with_its_attempt_count(harness: &dyn Harness) {
    let (_, queue) = provisioned(harness, "release").await;
    let sent = sample_entry("r", b"retry me");
    queue.enqueue(&sent).await.expect("enqueue");
    let delivery = receive_id(queue.as_ref(), &sent.id).await;
    let retry_at = entry::now_micros() + 1_000_000;
    release(
        queue.as_ref(),
        &delivery,
        retry_at,
        &Failure::retryable("timed out after 2s"),
    )
    .await
    .expect("release");

    let retried = receive_id(queue.as_ref(), &sent.id)
        .await
        .entry
        .expect("decodes");
    assert_eq!(retried.attempt, 1);
    assert_eq!(retried.deliver_at_micros, retry_at);
    assert_eq!(retried.last_error, "timed out after 2s");
    assert_eq!(retried.last_error_class, ErrorClass::Retryable as i32);
    assert_eq!(retried.body, sent.body);
}

async fn provisioning_creates_queue_and_dlq_and_is_idempotent(harness: &dyn Harness) {
    let spec = spec("provision");
    let dlq = spec.dlq.clone().expect("dlq");
    assert!(!harness.exists(&spec.name).await && !harness.exists(&dlq).await);
    let queue = harness.open(&spec);

    let first = queue.provision().await.expect("provision");
    let both: BTreeSet<String> = [spec.name.clone(), dlq.clone()].into();
    assert_eq!(first.created.iter().cloned().collect::<BTreeSet<_>>(), both);
    assert!(first.existing.is_empty());
    assert!(harness.exists(&spec.name).await, "queue exists");
    assert!(harness.exists(&dlq).await, "dlq exists");

    let second = queue.provision().await.expect("provision again");
    assert!(
        second.created.is_empty(),
        "second run created {:?}",
        second.created
    );
    assert_eq!(
        second.existing.iter().cloned().collect::<BTreeSet<_>>(),
        both
    );
}

async fn oversize_entries_are_refused_with_a_clear_error(harness: &dyn Harness) {
    let (spec, queue) = provisioned(harness, "oversize").await;
    let limit = queue.max_entry_bytes();

    let too_big = entry_of_encoded_size(limit + 1);
    let error = queue.enqueue(&too_big).await.expect_err("refused");
    assert_eq!(error.durability(), Durability::NotStored);
    assert!(matches!(error, EnqueueError::TooLarge { size, .. } if size == limit + 1));
    let message = error.to_string();
    for needle in [&(limit + 1).to_string(), &limit.to_string(), &spec.name] {
        assert!(
            message.contains(needle.as_str()),
            "'{message}' does not name {needle}"
        );
    }

    let at_limit = entry_of_encoded_size(limit);
    queue
        .enqueue(&at_limit)
        .await
        .expect("an entry at the limit fits");
    let delivery = receive_id(queue.as_ref(), &at_limit.id).await;
    assert_eq!(delivery.entry, Ok(at_limit));
}

async fn an_entry_at_the_limit_can_still_be_retried_and_dead_lettered(harness: &dyn Harness) {
    let (spec, queue) = provisioned(harness, "limit-retry").await;
    let at_limit = entry_of_encoded_size(queue.max_entry_bytes());
    queue.enqueue(&at_limit).await.expect("fits");
    let long_error = "e".repeat(4 * MAX_ERROR_BYTES);

    let delivery = receive_id(queue.as_ref(), &at_limit.id).await;
    let retry_at = entry::now_micros();
    release(
        queue.as_ref(),
        &delivery,
        retry_at,
        &Failure::retryable(long_error.clone()),
    )
    .await
    .expect("a retry copy with a maximal error still fits");
    let retried = receive_id(queue.as_ref(), &at_limit.id).await;
    assert_eq!(retried.entry.as_ref().map(|e| e.attempt), Ok(1));
    // And so does its DLQ copy.
    let failure = Failure::permanent(long_error);
    let dead = dead_lettered(harness, &spec, queue.as_ref(), &retried, &failure).await;
    assert_eq!(dead.body, at_limit.body);
    assert!(dead.last_error.len() <= MAX_ERROR_BYTES + '…'.len_utf8());
}

async fn a_huge_undecodable_message_reaches_the_dlq_truncated(harness: &dyn Harness) {
    let garbage = "not an entry ".repeat(200_000 / 13);
    let dead = dead_letter_garbage(harness, "garbage-big", &garbage).await;
    let kept = MAX_UNDECODABLE_BYTES;
    assert_eq!(
        dead.body,
        Some(Body::Payload(garbage.as_bytes()[..kept].to_vec()))
    );
    let expected = format!(
        "the payload holds the first {kept} of {} bytes",
        garbage.len()
    );
    assert!(dead.last_error.contains(&expected), "{}", dead.last_error);
}

async fn backlog_counts_what_waits_after_what_was_acknowledged(harness: &dyn Harness) {
    let (_, queue) = provisioned(harness, "backlog").await;
    // Kafka counts from the group's commit, which close() makes now.
    enqueued_received_acknowledged(queue.as_ref()).await;
    for i in 0..3 {
        let waiting = sample_entry(&format!("w{i}"), b"waiting");
        queue.enqueue(&waiting).await.expect("enqueue");
    }
    let deadline = Instant::now() + ARRIVAL;
    loop {
        let backlog = queue.backlog().await.expect("backlog");
        if backlog == Some(3) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "backlog is {backlog:?}, expected Some(3) (three enqueued after the acknowledged one)"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

macro_rules! conformance {
    ($backend:ident, $harness:expr) => {
        mod $backend {
            use super::*;

            macro_rules! check {
                ($name:ident) => {
                    #[tokio::test]
                    async fn $name() {
                        super::$name(&$harness).await;
                    }
                };
            }

            check!(durable_enqueue_is_received);
            check!(acknowledged_entry_is_not_received_again);
            check!(unacknowledged_entry_is_received_again_after_restart);
            check!(dead_lettering_puts_entry_and_reason_on_the_dlq);
            check!(undecodable_message_reaches_the_dlq_with_its_bytes);
            check!(released_entry_returns_with_its_attempt_count);
            check!(provisioning_creates_queue_and_dlq_and_is_idempotent);
            check!(oversize_entries_are_refused_with_a_clear_error);
            check!(an_entry_at_the_limit_can_still_be_retried_and_dead_lettered);
            check!(a_huge_undecodable_message_reaches_the_dlq_truncated);
            check!(backlog_counts_what_waits_after_what_was_acknowledged);
        }
    };
}

conformance!(kafka, KafkaHarness::new());
conformance!(sqs, SqsHarness::new().await);
conformance!(memory, MemoryHarness::default());
