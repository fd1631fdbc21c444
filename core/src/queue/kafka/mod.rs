//! The Kafka backend: a queue is a topic, its DLQ another topic.
//!
//! Writes go through one idempotent producer per process (acks=all), shared by every queue
//! handle. Each handle that receives joins the consumer group `<group_prefix><topic>` on its first
//! `receive` and stores offsets only when entries are acknowledged, at the oldest entry still in
//! progress (see `offsets.rs`); librdkafka commits the stored offsets every
//! [`KafkaSettings::commit_interval`] and when the consumer closes.
//!
//! Entries that wait longer than [`KAFKA_HOLD_LIMIT`] are parked on the queue's delay tiers,
//! topics named `<topic>.delay-<wait>`, provisioned with the queue (see `queue::delay`).
//!
//! Durability condition: acks=all waits for every in-sync replica. With a single broker (the
//! local stack) that is one broker's page cache: an acknowledged entry survives the broker
//! process's crash, not a power cut before the OS flushes it.

mod classify;
mod context;
mod lag;
mod offsets;
pub mod scan;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{CommitMode, Consumer, StreamConsumer};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::Message as _;
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::{Offset, TopicPartitionList};
use tokio::sync::OnceCell;
use tokio::time::Instant;

pub use self::classify::broker_away;
pub use self::context::OutageContext;
use self::context::{TrackingContext, lock};
use self::lag::{group_lag, unfinished};
use self::offsets::OffsetTracker;
use super::delay::{self, KAFKA_HOLD_LIMIT};
use super::{
    Backend, DLQ_HEADROOM_BYTES, DelayTier, Delivery, Durability, EnqueueError, Operation,
    ProvisionReport, Queue, QueueError, QueueSpec, Receipt,
};
use crate::entry::{self, Entry};
use crate::outage::Outage;

/// The largest encoded entry (the record value) the platform puts on a topic. librdkafka's and
/// the broker's own limits (`message.max.bytes`, 1 MiB) leave 48 KiB above it for the record key
/// (which the producer caps at [`KEY_LIMIT_BYTES`]) and record overhead.
pub const RECORD_LIMIT_BYTES: usize = 1_000_000;
/// The longest record key (the entry's partition key).
pub const KEY_LIMIT_BYTES: usize = 16 * 1024;
/// Records the producer buffers for all queues together (librdkafka's
/// `queue.buffering.max.messages`). When it is full, enqueues fail at once as not stored, so
/// callers that share a producer keep the sum of their writes in flight below it.
pub const PRODUCER_BUFFER_MESSAGES: usize = 100_000;
/// How much a delay tier's consumer fetches ahead, in KiB (librdkafka's default is 64 MiB). Its
/// entries are read only as they come due, so a small read-ahead keeps a large parked backlog
/// out of memory.
const TIER_PREFETCH_KIB: u32 = 1024;
/// How much one fetch takes from each partition of a delay tier, in KiB (librdkafka's default is
/// 1 MiB). librdkafka fills its read-ahead in a fixed partition order, and when one partition's
/// fetch fills it the others wait (confluentinc/librdkafka#1854): a tier's first partition was
/// read on time while the other three fell 50 s behind. Fetches this small leave room in the
/// read-ahead for every partition of the tier (up to 16).
const TIER_PARTITION_FETCH_KIB: u32 = 64;
/// How often `produce` sends a record again after librdkafka reported it delivered without an
/// offset, before answering that it may not be stored.
const UNCONFIRMED_RESENDS: u32 = 2;
/// How long an idle consumer that lost its brokers waits for one to answer its probe.
const PROBE_TIMEOUT: Duration = Duration::from_secs(2);
/// How long `provision` waits for new topics to be served.
const PROVISION_TIMEOUT: Duration = Duration::from_secs(30);

/// How to reach the Kafka cluster and how queues on it behave.
#[derive(Debug, Clone)]
pub struct KafkaSettings {
    pub bootstrap_servers: String,
    /// Consumer groups are named `<group_prefix><topic>`.
    pub group_prefix: String,
    /// How long librdkafka keeps trying to deliver one record; past it the answer is UNKNOWN.
    pub delivery_timeout: Duration,
    /// How long the producer waits to batch records together.
    pub linger: Duration,
    /// Partitions of each topic `provision` creates.
    pub partitions: i32,
    pub replication_factor: i32,
    /// How often stored offsets are committed to the broker.
    pub commit_interval: Duration,
    /// A consumer that is silent this long is considered dead and its partitions reassigned.
    pub session_timeout: Duration,
    /// The longest a consumer may go between receives before it leaves its group. Long: a
    /// consumer whose in-progress slots all hold entries waiting for their deliver-at does not
    /// receive meanwhile, and must not lose its partitions (and its acknowledgements) for it.
    /// Dead processes are still found within `session_timeout`, by the background heartbeat.
    pub max_poll_interval: Duration,
}

impl KafkaSettings {
    /// Settings for a cluster at `bootstrap_servers` with the platform's defaults.
    pub fn new(bootstrap_servers: &str) -> Self {
        Self {
            bootstrap_servers: bootstrap_servers.to_owned(),
            group_prefix: "wal-consumer.".to_owned(),
            delivery_timeout: Duration::from_secs(5),
            linger: Duration::from_millis(1),
            partitions: 4,
            replication_factor: 1,
            commit_interval: Duration::from_millis(500),
            session_timeout: Duration::from_secs(10),
            // librdkafka's maximum.
            max_poll_interval: Duration::from_secs(24 * 3600),
        }
    }
}

/// How soon a reader whose read-ahead was full fetches again; see `subscribe`.
const FETCH_QUEUE_BACKOFF: Duration = Duration::from_millis(10);

/// The clients one process shares across all its Kafka queues.
pub struct KafkaBackend {
    settings: KafkaSettings,
    producer: FutureProducer<OutageContext>,
    /// The producer's view of its brokers, shared with its context: a delivered record says
    /// they answer again.
    producer_outage: Arc<Outage>,
    admin: AdminClient<OutageContext>,
}

impl std::fmt::Debug for KafkaBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KafkaBackend")
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

impl KafkaBackend {
    /// Creates the producer and admin clients. They connect lazily; only a malformed setting
    /// fails here.
    pub fn new(settings: KafkaSettings) -> Result<Arc<Self>, KafkaError> {
        let context = OutageContext::new("producer");
        let producer_outage = context.outage();
        let producer = ClientConfig::new()
            .set("bootstrap.servers", &settings.bootstrap_servers)
            .set("client.id", "wal")
            .set("enable.idempotence", "true")
            .set("acks", "all")
            .set("message.timeout.ms", millis(settings.delivery_timeout))
            .set("linger.ms", millis(settings.linger))
            .set("message.max.bytes", "1048576")
            .set(
                "queue.buffering.max.messages",
                PRODUCER_BUFFER_MESSAGES.to_string(),
            )
            .create_with_context(context)?;
        let admin = ClientConfig::new()
            .set("bootstrap.servers", &settings.bootstrap_servers)
            .set("client.id", "wal-admin")
            .create_with_context(OutageContext::new("admin"))?;
        Ok(Arc::new(Self {
            settings,
            producer,
            producer_outage,
            admin,
        }))
    }

    /// A handle on one queue of a namespace, with the delay tiers its longest wait needs.
    pub fn queue(self: &Arc<Self>, spec: QueueSpec) -> KafkaQueue {
        let tiers = delay::kafka_tiers(spec.longest_wait)
            .into_iter()
            .map(|wait| {
                let tier = KafkaQueue {
                    backend: Arc::clone(self),
                    spec: QueueSpec {
                        namespace: spec.namespace.clone(),
                        name: delay::tier_topic(&spec.name, wait),
                        // An undecodable record on a tier is dead-lettered with the queue's own.
                        dlq: spec.dlq.clone(),
                        longest_wait: Duration::ZERO,
                    },
                    receiver: OnceCell::new(),
                    tiers: Vec::new(),
                    tier_waits: Vec::new(),
                    prefetch_kib: Some(TIER_PREFETCH_KIB),
                };
                (wait, Arc::new(tier))
            })
            .collect::<Vec<_>>();
        KafkaQueue {
            backend: Arc::clone(self),
            spec,
            receiver: OnceCell::new(),
            tier_waits: tiers.iter().map(|(wait, _)| *wait).collect(),
            tiers,
            prefetch_kib: None,
        }
    }

    pub fn settings(&self) -> &KafkaSettings {
        &self.settings
    }
}

fn millis(duration: Duration) -> String {
    duration.as_millis().to_string()
}

/// One topic and its DLQ topic.
#[derive(Debug)]
pub struct KafkaQueue {
    backend: Arc<KafkaBackend>,
    spec: QueueSpec,
    receiver: OnceCell<Receiver>,
    /// The delay tiers, shortest wait first; empty for a tier itself.
    tiers: Vec<(Duration, Arc<KafkaQueue>)>,
    /// The tiers' waits, kept apart so a requeue picks one without building a list.
    tier_waits: Vec<Duration>,
    /// The consumer's read-ahead limit, when not librdkafka's default.
    prefetch_kib: Option<u32>,
}

/// The consumer side of a handle, created on its first `receive`.
struct Receiver {
    consumer: Arc<StreamConsumer<TrackingContext>>,
    tracker: Arc<Mutex<OffsetTracker>>,
    /// The consumer's view of its brokers, shared with its context.
    outage: Arc<Outage>,
}

impl std::fmt::Debug for Receiver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Receiver").finish_non_exhaustive()
    }
}

impl KafkaQueue {
    fn error(
        &self,
        operation: Operation,
        retryable: bool,
        reason: impl std::fmt::Display,
    ) -> QueueError {
        QueueError::new(
            Backend::Kafka,
            &self.spec.name,
            operation,
            retryable,
            reason,
        )
    }

    async fn receiver(&self) -> Result<&Receiver, QueueError> {
        self.receiver
            .get_or_try_init(|| async { self.subscribe() })
            .await
    }

    fn subscribe(&self) -> Result<Receiver, QueueError> {
        let settings = &self.backend.settings;
        let tracker = Arc::new(Mutex::new(OffsetTracker::default()));
        let outage = Arc::new(Outage::new("kafka", &self.spec.name));
        let context = TrackingContext {
            tracker: Arc::clone(&tracker),
            outage: Arc::clone(&outage),
        };
        let mut config = ClientConfig::new();
        if let Some(kib) = self.prefetch_kib {
            config
                .set("queued.max.messages.kbytes", kib.to_string())
                .set(
                    "max.partition.fetch.bytes",
                    (TIER_PARTITION_FETCH_KIB * 1024).to_string(),
                );
        }
        // Once its read-ahead is full, librdkafka postpones the next fetch by this much (1 s by
        // default), a second's stall each time a small read-ahead (the delay tiers' 1 MiB)
        // fills; short, so a tier that was full reads on as soon as it has room.
        config.set("fetch.queue.backoff.ms", millis(FETCH_QUEUE_BACKOFF));
        let consumer: StreamConsumer<TrackingContext> = config
            .set("bootstrap.servers", &settings.bootstrap_servers)
            .set(
                "group.id",
                format!("{}{}", settings.group_prefix, self.spec.name),
            )
            .set("client.id", "wal-consumer")
            .set("enable.auto.commit", "true")
            .set("auto.commit.interval.ms", millis(settings.commit_interval))
            .set("enable.auto.offset.store", "false")
            .set("auto.offset.reset", "earliest")
            .set("session.timeout.ms", millis(settings.session_timeout))
            .set("max.poll.interval.ms", millis(settings.max_poll_interval))
            .set("enable.partition.eof", "false")
            .create_with_context(context)
            .map_err(|e| self.error(Operation::Receive, false, e))?;
        consumer
            .subscribe(&[&self.spec.name])
            .map_err(|e| self.error(Operation::Receive, false, e))?;
        Ok(Receiver {
            consumer: Arc::new(consumer),
            tracker,
            outage,
        })
    }

    async fn produce(&self, topic: &str, entry: &Entry, limit: usize) -> Result<(), EnqueueError> {
        let value = entry::encode(entry);
        let key = if entry.key.is_empty() {
            &entry.id
        } else {
            &entry.key
        };
        let size = value.len();
        if size > limit {
            return Err(EnqueueError::TooLarge {
                backend: Backend::Kafka,
                queue: topic.to_owned(),
                size,
                limit,
            });
        }
        let not_stored = |reason: String| EnqueueError::NotStored {
            backend: Backend::Kafka,
            queue: topic.to_owned(),
            reason,
        };
        let unknown = |reason: String| EnqueueError::Unknown {
            backend: Backend::Kafka,
            queue: topic.to_owned(),
            reason,
        };
        if key.len() > KEY_LIMIT_BYTES {
            return Err(not_stored(format!(
                "partition key of {} bytes is longer than {KEY_LIMIT_BYTES} bytes",
                key.len()
            )));
        }
        for attempt in 0..=UNCONFIRMED_RESENDS {
            // Once a send was reported delivered without an offset, the record may be stored,
            // so no later failure can be answered as "not stored".
            let refused = |reason: String| match attempt {
                0 => not_stored(reason),
                _ => unknown(reason),
            };
            let record = FutureRecord::to(topic).key(key).payload(&value);
            // send_result fails only when librdkafka refuses the record outright (its queue is
            // full, for example): then this send did not leave the process.
            let delivery = self
                .backend
                .producer
                .send_result(record)
                .map_err(|(error, _)| refused(error.to_string()))?;
            match delivery.await {
                Ok(Ok(delivered)) if delivered.offset >= 0 => {
                    self.backend.producer_outage.answered();
                    return Ok(());
                }
                // No offset: librdkafka acknowledged the record implicitly, because a later
                // batch of its partition succeeded. That later batch proves nothing when it was
                // the producer's first on the partition to reach the broker, which then accepts
                // any sequence number: after a "not leader" error on a new topic the earlier
                // batch was never written (confluentinc/confluent-kafka-go#921, seen here as
                // TRUE answers for entries missing from the topic). Sending again costs a
                // duplicate at worst, which targets absorb: they apply idempotently by the
                // entry's id (DESIGN §4.2). The copy may land after a later entry of its key.
                Ok(Ok(_)) => {
                    tracing::warn!(
                        topic,
                        entry_id = %entry.id,
                        attempt,
                        "the broker's acknowledgement carried no offset; sending the entry again"
                    );
                }
                Ok(Err((error, _))) => {
                    return match classify::durability_of(&error) {
                        Durability::NotStored => Err(refused(error.to_string())),
                        Durability::Unknown => Err(unknown(error.to_string())),
                    };
                }
                Err(_canceled) => {
                    return Err(unknown(
                        "the producer shut down before the broker answered".to_owned(),
                    ));
                }
            }
        }
        Err(unknown(format!(
            "the broker acknowledged the entry {} times without an offset, so it may not be stored",
            UNCONFIRMED_RESENDS + 1
        )))
    }

    /// Waits until the broker's metadata lists every topic with its partitions and each
    /// partition's leader answers for it. CreateTopics returns once the controller has the
    /// topic, before every broker serves it; a queue is provisioned when it can be used.
    async fn await_metadata(&self, topics: &[&str]) -> Result<(), QueueError> {
        let deadline = Instant::now() + PROVISION_TIMEOUT;
        for topic in topics {
            loop {
                let backend = Arc::clone(&self.backend);
                let name = (*topic).to_owned();
                // fetch_metadata blocks on the network; keep it off the async workers.
                let visible = tokio::task::spawn_blocking(move || {
                    let client = backend.admin.inner();
                    let metadata = client.fetch_metadata(Some(&name), Duration::from_secs(5))?;
                    let Some(described) = metadata.topics().iter().find(|t| {
                        t.name() == name && t.error().is_none() && !t.partitions().is_empty()
                    }) else {
                        return Ok::<bool, KafkaError>(false);
                    };
                    // Listed is not yet served: a partition whose leader has not taken it up
                    // answers NOT_LEADER, to a producer (whose failed first batch librdkafka may
                    // then count as delivered, see `produce`) and to a reader alike. A
                    // watermark query goes to the leader, so every partition must answer one.
                    Ok(described.partitions().iter().all(|p| {
                        client
                            .fetch_watermarks(&name, p.id(), Duration::from_secs(5))
                            .is_ok()
                    }))
                })
                .await
                .map_err(|e| self.error(Operation::Provision, true, e))?
                .map_err(|e| self.error(Operation::Provision, true, e))?;
                if visible {
                    break;
                }
                if Instant::now() >= deadline {
                    return Err(self.error(
                        Operation::Provision,
                        true,
                        format!("topic '{topic}' was created but is not served after {PROVISION_TIMEOUT:?}"),
                    ));
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
        Ok(())
    }

    /// Pauses or resumes fetching for the partitions assigned now (both local to librdkafka,
    /// no broker call). A partition paused is read again from the first record not yet
    /// received; one assigned by a later rebalance, which only a receive serves, starts
    /// unpaused.
    fn pause_or_resume(&self, pause: bool) -> Result<(), QueueError> {
        let Some(receiver) = self.receiver.get() else {
            return Ok(());
        };
        let consumer = &receiver.consumer;
        let assigned = consumer
            .assignment()
            .map_err(|e| self.error(Operation::Receive, true, e))?;
        let done = if pause {
            consumer.pause(&assigned)
        } else {
            consumer.resume(&assigned)
        };
        done.map_err(|e| self.error(Operation::Receive, true, e))
    }

    /// Asks a broker for the queue's first partition's offsets, to learn whether an idle
    /// consumer's brokers answer again: no record arrives to say so on a topic nobody writes to.
    async fn probe(&self, receiver: &Receiver) {
        let consumer = Arc::clone(&receiver.consumer);
        let topic = self.spec.name.clone();
        // A blocking broker call, so on a blocking thread.
        let answered = tokio::task::spawn_blocking(move || {
            consumer.fetch_watermarks(&topic, 0, PROBE_TIMEOUT).is_ok()
        })
        .await
        .unwrap_or(false);
        if answered {
            receiver.outage.answered();
        }
    }

    fn store_commit_point(
        &self,
        consumer: &StreamConsumer<TrackingContext>,
        partition: i32,
        point: i64,
    ) -> Result<(), QueueError> {
        let mut offsets = TopicPartitionList::new();
        offsets
            .add_partition_offset(&self.spec.name, partition, Offset::Offset(point))
            .map_err(|e| self.error(Operation::Acknowledge, false, e))?;
        match consumer.store_offsets(&offsets) {
            Ok(()) => Ok(()),
            // The partition was revoked after the entry was received: its new owner reads the
            // entry again from the last commit, as at-least-once allows.
            Err(KafkaError::StoreOffset(RDKafkaErrorCode::State))
            | Err(KafkaError::StoreOffset(RDKafkaErrorCode::UnknownPartition)) => {
                tracing::debug!(topic = %self.spec.name, partition, "offset not stored: partition no longer assigned");
                Ok(())
            }
            Err(e) => Err(self.error(Operation::Acknowledge, true, e)),
        }
    }
}

#[async_trait]
impl Queue for KafkaQueue {
    fn spec(&self) -> &QueueSpec {
        &self.spec
    }

    fn backend(&self) -> Backend {
        Backend::Kafka
    }

    fn max_entry_bytes(&self) -> usize {
        RECORD_LIMIT_BYTES - DLQ_HEADROOM_BYTES
    }

    async fn provision(&self) -> Result<ProvisionReport, QueueError> {
        let settings = &self.backend.settings;
        let names: Vec<&str> = std::iter::once(self.spec.name.as_str())
            .chain(self.spec.dlq.as_deref())
            .chain(self.tiers.iter().map(|(_, tier)| tier.spec.name.as_str()))
            .collect();
        let topics: Vec<NewTopic<'_>> = names
            .iter()
            .map(|name| {
                NewTopic::new(
                    name,
                    settings.partitions,
                    TopicReplication::Fixed(settings.replication_factor),
                )
            })
            .collect();
        let options = AdminOptions::new().operation_timeout(Some(Duration::from_secs(10)));
        let results = self
            .backend
            .admin
            .create_topics(&topics, &options)
            .await
            .map_err(|e| self.error(Operation::Provision, true, e))?;
        let mut report = ProvisionReport::default();
        for result in &results {
            match result {
                Ok(name) => report.created.push(name.clone()),
                Err((name, RDKafkaErrorCode::TopicAlreadyExists)) => {
                    report.existing.push(name.clone())
                }
                Err((name, code)) => {
                    return Err(self.error(
                        Operation::Provision,
                        true,
                        format!("creating topic '{name}' failed: {code}"),
                    ));
                }
            }
        }
        self.await_metadata(&names).await?;
        Ok(report)
    }

    async fn enqueue(&self, entry: &Entry) -> Result<(), EnqueueError> {
        self.produce(&self.spec.name, entry, self.max_entry_bytes())
            .await
    }

    async fn requeue(&self, entry: &Entry) -> Result<(), EnqueueError> {
        let remaining = entry.deliver_at_micros.saturating_sub(entry::now_micros());
        let remaining = Duration::from_micros(u64::try_from(remaining).unwrap_or(0));
        let tier = delay::kafka_tier_for(&self.tier_waits, remaining)
            .and_then(|wait| self.tiers.iter().find(|(w, _)| *w == wait));
        let Some((_, tier)) = tier else {
            return self
                .produce(&self.spec.name, entry, RECORD_LIMIT_BYTES)
                .await;
        };
        // The tier's reader moves the entry on `wait` after it was parked, which it reads here.
        let mut parked = entry.clone();
        parked.enqueued_at_micros = entry::now_micros();
        self.produce(&tier.spec.name, &parked, RECORD_LIMIT_BYTES)
            .await
    }

    fn hold_limit(&self) -> Duration {
        if self.tiers.is_empty() {
            Duration::MAX
        } else {
            KAFKA_HOLD_LIMIT
        }
    }

    fn delay_tiers(&self) -> Vec<DelayTier> {
        self.tiers
            .iter()
            .map(|(wait, tier)| DelayTier {
                wait: *wait,
                queue: Arc::clone(tier) as Arc<dyn Queue>,
            })
            .collect()
    }

    async fn parked(&self) -> Result<Option<u64>, QueueError> {
        let mut parked = None;
        for (_, tier) in &self.tiers {
            if let Some(backlog) = tier.backlog().await? {
                parked = Some(parked.unwrap_or(0) + backlog);
            }
        }
        Ok(parked)
    }

    async fn enqueue_dead_letter(&self, entry: &Entry) -> Result<(), EnqueueError> {
        let Some(dlq) = &self.spec.dlq else {
            return Err(EnqueueError::no_dlq(Backend::Kafka, &self.spec.name));
        };
        self.produce(dlq, entry, RECORD_LIMIT_BYTES).await
    }

    async fn receive(&self, max: usize, wait: Duration) -> Result<Vec<Delivery>, QueueError> {
        let receiver = self.receiver().await?;
        // A caller's "wait forever" (Duration::MAX) must not overflow the clock.
        let deadline = Instant::now()
            .checked_add(wait)
            .unwrap_or_else(|| Instant::now() + Duration::from_secs(86_400));
        let mut deliveries = Vec::new();
        while deliveries.len() < max {
            // Wait for the first entry; after it, take only what librdkafka already fetched.
            let budget = if deliveries.is_empty() {
                deadline.saturating_duration_since(Instant::now())
            } else {
                Duration::ZERO
            };
            let message = match tokio::time::timeout(budget, receiver.consumer.recv()).await {
                Err(_elapsed) => break,
                Ok(Ok(message)) => message,
                // The broker is away (or was: librdkafka queues an error per failed connection
                // attempt, and they wait here behind the records). The client context counted
                // it already, and librdkafka reconnects by itself: read on, so nothing fetched
                // after the broker returned waits for the errors queued before.
                Ok(Err(error)) if error.rdkafka_error_code().is_some_and(broker_away) => continue,
                // Anything else fails the same way until someone acts (a missing topic, a
                // denied group): the caller backs off and says so.
                Ok(Err(error)) if deliveries.is_empty() => {
                    let missing = error.rdkafka_error_code()
                        == Some(RDKafkaErrorCode::UnknownTopicOrPartition);
                    let reason = if missing {
                        format!("{error}; provision the queue first")
                    } else {
                        error.to_string()
                    };
                    return Err(self.error(Operation::Receive, false, reason));
                }
                Ok(Err(_)) => break,
            };
            let (partition, offset) = (message.partition(), message.offset());
            let raw = Bytes::copy_from_slice(message.payload().unwrap_or_default());
            if !lock(&receiver.tracker).received(partition, offset) {
                tracing::debug!(topic = %self.spec.name, partition, offset, "skipped: partition revoked after the fetch");
                continue;
            }
            deliveries.push(Delivery {
                entry: entry::decode(&raw),
                raw,
                receipt: Receipt::Kafka { partition, offset },
            });
        }
        if !deliveries.is_empty() {
            receiver.outage.answered();
        } else if receiver.outage.is_away() {
            self.probe(receiver).await;
        }
        Ok(deliveries)
    }

    async fn acknowledge(&self, delivery: &Delivery) -> Result<(), QueueError> {
        let Receipt::Kafka { partition, offset } = delivery.receipt else {
            return Err(self.error(Operation::Acknowledge, false, "not a Kafka receipt"));
        };
        let Some(receiver) = self.receiver.get() else {
            return Err(self.error(
                Operation::Acknowledge,
                false,
                "nothing was received through this handle",
            ));
        };
        // The store happens under the lock, so concurrent acknowledgements store commit points
        // in the order they were computed and the stored offset never moves backwards.
        let mut tracker = lock(&receiver.tracker);
        match tracker.acknowledged(partition, offset) {
            Some(point) => self.store_commit_point(&receiver.consumer, partition, point),
            None => Ok(()),
        }
    }

    async fn extend(&self, _delivery: &Delivery, _by: Duration) -> Result<(), QueueError> {
        // A Kafka entry stays with this consumer until its partition is revoked; there is no
        // per-entry timeout to push back.
        Ok(())
    }

    async fn pause(&self) -> Result<(), QueueError> {
        self.pause_or_resume(true)
    }

    async fn resume(&self) -> Result<(), QueueError> {
        self.pause_or_resume(false)
    }

    async fn close(&self) -> Result<(), QueueError> {
        let Some(receiver) = self.receiver.get() else {
            return Ok(());
        };
        // Commits the offsets stored on acknowledgement, for the partitions assigned now only
        // (librdkafka skips an assignment it has lost). It blocks on the broker, so it runs on a
        // blocking thread rather than an async worker.
        let consumer = Arc::clone(&receiver.consumer);
        let committed =
            tokio::task::spawn_blocking(move || consumer.commit_consumer_state(CommitMode::Sync))
                .await
                .map_err(|e| self.error(Operation::Close, true, e))?;
        match committed {
            Ok(()) | Err(KafkaError::ConsumerCommit(RDKafkaErrorCode::NoOffset)) => Ok(()),
            Err(e) => Err(self.error(Operation::Close, true, e)),
        }
    }

    async fn unfinished(&self) -> Result<u64, QueueError> {
        let settings = self.backend.settings.clone();
        // Entries parked on the delay tiers belong to the queue as much as those on its topic.
        let mut topics = vec![self.spec.name.clone()];
        topics.extend(
            self.delay_tiers()
                .iter()
                .map(|t| t.queue.spec().name.clone()),
        );
        // Broker calls that block, so on a blocking thread.
        tokio::task::spawn_blocking(move || {
            topics.iter().try_fold(0, |sum, topic| {
                Ok::<u64, KafkaError>(sum + unfinished(&settings, topic)?)
            })
        })
        .await
        .map_err(|e| self.error(Operation::Backlog, true, e))?
        .map_err(|e| self.error(Operation::Backlog, true, e))
    }

    async fn backlog(&self) -> Result<Option<u64>, QueueError> {
        let Some(receiver) = self.receiver.get() else {
            return Ok(None);
        };
        // The group's committed offsets and the partitions' high watermarks come from the
        // broker, with blocking calls, so on a blocking thread.
        let consumer = Arc::clone(&receiver.consumer);
        let topic = self.spec.name.clone();
        let lag = tokio::task::spawn_blocking(move || group_lag(&consumer, &topic))
            .await
            .map_err(|e| self.error(Operation::Backlog, true, e))?
            .map_err(|e| self.error(Operation::Backlog, true, e))?;
        Ok(Some(lag))
    }
}
