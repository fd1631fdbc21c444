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
//! Files: `backend` (settings and the shared clients), `credentials` (the start-up check of a
//! secured cluster), `replication` (the start-up check of the brokers against the copies the
//! map asks), `produce` (one record's send), `receiver` (the consumer side: group, pause and
//! the held queue's place in its group, probe, offsets), `apart` (closing consumers and broker calls
//! that may wait on brokers, off the runtime), `provision` (topics), `scan` (reading a
//! topic by time, for replay and redrive); this file is the `Queue` contract on top of them.
//!
//! Durability condition: acks=all waits for every in-sync replica, and a topic's
//! `min.insync.replicas` (the cluster map's `min_insync_replicas`) is how few that may be. With a
//! single broker (the local stack) that is one broker's page cache: an acknowledged entry
//! survives the broker process's crash, not a power cut before the OS flushes it.

mod apart;
mod backend;
mod classify;
mod context;
mod credentials;
mod lag;
mod offsets;
mod produce;
mod provision;
mod receiver;
mod replication;
pub mod scan;

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use futures::{FutureExt as _, StreamExt as _};
use rdkafka::admin::{AdminOptions, NewTopic, TopicReplication};
use rdkafka::consumer::{CommitMode, Consumer};
/// A Kafka client error, as this crate's Kafka functions return it.
pub use rdkafka::error::KafkaError;
use rdkafka::error::RDKafkaErrorCode;
use rdkafka::message::Message;
use tokio::sync::OnceCell;
use tokio::time::Instant;

pub use self::apart::{CloseMark, closes_finished};
pub use self::backend::{KafkaBackend, KafkaSettings};
pub use self::classify::broker_away;
pub use self::context::OutageContext;
use self::context::lock;
pub use self::credentials::Refused;
use self::lag::{group_lag, unfinished};
use self::receiver::Receiver;
pub use self::replication::TooFewBrokers;
use super::delay::{self, KAFKA_HOLD_LIMIT};
use super::{
    Backend, DLQ_HEADROOM_BYTES, DelayTier, Delivery, Durability, EnqueueError, Operation,
    Position, ProvisionReport, Queue, QueueError, QueueSpec, Receipt,
};
use crate::Consume;
use crate::Inspect;
use crate::Produce;
use crate::entry::{self, Entry};

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
/// How long closing a queue waits for its final commit. Long enough for a broker that answers;
/// past it, the queue closes without it (those entries are received again).
const FINAL_COMMIT_WAIT: Duration = Duration::from_secs(10);
/// How long a backlog reading may take: its broker calls time out after 5 s each, and a queue has
/// a few; past this it is given up (the gauge keeps its last value).
const BACKLOG_WAIT: Duration = Duration::from_secs(30);
/// The most deliveries a receive makes room for before its first: a caller may ask for far more
/// than ever arrive in one poll, and the room is taken whether they come or not.
const PREALLOCATED_DELIVERIES: usize = 256;

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

impl KafkaQueue {
    /// A received record as a delivery; `None` for one of a partition revoked since its fetch.
    fn delivery(&self, receiver: &receiver::Receiver, message: &impl Message) -> Option<Delivery> {
        let (partition, offset) = (message.partition(), message.offset());
        let Some(skipped) = lock(&receiver.tracker).received_after(partition, offset) else {
            tracing::debug!(topic = %self.spec.name, partition, offset, "skipped: partition revoked after the fetch");
            return None;
        };
        if let Some(lost) = skipped {
            self.gap(partition, lost);
        }
        let payload = message.payload().unwrap_or_default();
        let entry = entry::decode(payload);
        // Copied only for the DLQ copy of an undecodable message, not for every delivery.
        let raw = match &entry {
            Ok(_) => Bytes::new(),
            Err(_) => Bytes::copy_from_slice(payload),
        };
        Some(Delivery {
            entry,
            raw,
            receipt: Receipt::Kafka { partition, offset },
        })
    }

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
}

#[async_trait]
impl Produce for KafkaQueue {
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
        let min_insync_replicas = settings.min_insync_replicas.map(|n| n.to_string());
        let names: Vec<&str> = std::iter::once(self.spec.name.as_str())
            .chain(self.spec.dlq.as_deref())
            .chain(self.tiers.iter().map(|(_, tier)| tier.spec.name.as_str()))
            .collect();
        let topics: Vec<NewTopic<'_>> = names
            .iter()
            .map(|name| {
                let topic = NewTopic::new(
                    name,
                    settings.partitions,
                    TopicReplication::Fixed(settings.replication_factor),
                );
                match &min_insync_replicas {
                    Some(copies) => topic.set("min.insync.replicas", copies),
                    None => topic,
                }
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
}

#[async_trait]
impl Consume for KafkaQueue {
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
        // Sized up front: growing it moved every delivery received so far, several times a poll.
        let mut deliveries = Vec::with_capacity(max.min(PREALLOCATED_DELIVERIES));
        // What arrived while the queue was held comes first (see `receiver`).
        let kept: Vec<_> = {
            let mut kept = self::context::lock_any(&receiver.kept);
            let taken = kept.len().min(max);
            kept.drain(..taken).collect()
        };
        for message in &kept {
            deliveries.extend(self.delivery(receiver, message));
        }
        // One stream for the whole receive: each makes its own waker slot in the client.
        let mut stream = receiver.consumer.stream();
        while deliveries.len() < max {
            // Wait for the first entry; after it, take only what librdkafka already fetched:
            // one look, without a timer.
            let next = if deliveries.is_empty() {
                let budget = deadline.saturating_duration_since(Instant::now());
                tokio::time::timeout(budget, stream.next()).await.ok()
            } else {
                stream.next().now_or_never()
            };
            let message = match next.flatten() {
                None => break,
                Some(Ok(message)) => message,
                // The broker is away (or was: librdkafka queues an error per failed connection
                // attempt, and they wait here behind the records). The client context counted
                // it already, and librdkafka reconnects by itself: read on, so nothing fetched
                // after the broker returned waits for the errors queued before.
                Some(Err(error)) if error.rdkafka_error_code().is_some_and(broker_away) => continue,
                // Anything else fails the same way until someone acts (a missing topic, a
                // denied group): the caller backs off and says so.
                Some(Err(error)) if deliveries.is_empty() => {
                    let missing = error.rdkafka_error_code()
                        == Some(RDKafkaErrorCode::UnknownTopicOrPartition);
                    let reason = if missing {
                        format!("{error}; provision the queue first")
                    } else {
                        error.to_string()
                    };
                    return Err(self.error(Operation::Receive, false, reason));
                }
                Some(Err(_)) => break,
            };
            deliveries.extend(self.delivery(receiver, &message));
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
        let Some(point) = tracker.acknowledged(partition, offset) else {
            return Ok(());
        };
        // Recorded only once stored: after a failed store, the retried acknowledgement (or the
        // next one) stores the point again.
        self.store_commit_point(&receiver.consumer, partition, point)?;
        tracker.stored(partition, point);
        Ok(())
    }

    async fn extend(&self, _delivery: &Delivery, _by: Duration) -> Result<(), QueueError> {
        // A Kafka entry stays with this consumer until its partition is revoked; there is no
        // per-entry timeout to push back.
        Ok(())
    }

    async fn pause(&self) -> Result<(), QueueError> {
        self.pause_or_resume(true).await
    }

    async fn resume(&self) -> Result<(), QueueError> {
        self.pause_or_resume(false).await
    }

    async fn close(&self) -> Result<(), QueueError> {
        let Some(receiver) = self.receiver.get() else {
            return Ok(());
        };
        // Commits the offsets stored on acknowledgement, for the partitions assigned now only
        // (librdkafka skips an assignment it has lost). It blocks on the broker for as long as
        // there is no group coordinator, so it runs apart and is waited for a bounded time.
        let consumer = Arc::clone(&receiver.consumer);
        let committed = apart::call(FINAL_COMMIT_WAIT, move || {
            consumer.commit_consumer_state(CommitMode::Sync)
        })
        .await;
        match committed {
            Ok(Ok(()) | Err(KafkaError::ConsumerCommit(RDKafkaErrorCode::NoOffset))) => Ok(()),
            Ok(Err(e)) => Err(self.error(Operation::Close, true, e)),
            Err(not_returned) => Err(self.error(
                Operation::Close,
                true,
                format!("the final commit: {not_returned}"),
            )),
        }
    }
}

#[async_trait]
impl Inspect for KafkaQueue {
    async fn parked(&self) -> Result<Option<u64>, QueueError> {
        let mut parked = None;
        for (_, tier) in &self.tiers {
            if let Some(backlog) = tier.backlog().await? {
                parked = Some(parked.unwrap_or(0) + backlog);
            }
        }
        Ok(parked)
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
        // broker, with blocking calls (each bounded by LAG_TIMEOUT), so apart.
        let consumer = Arc::clone(&receiver.consumer);
        let topic = self.spec.name.clone();
        let lag = apart::call(BACKLOG_WAIT, move || group_lag(&consumer, &topic))
            .await
            .map_err(|e| self.error(Operation::Backlog, true, e))?
            .map_err(|e| self.error(Operation::Backlog, true, e))?;
        Ok(Some(lag))
    }

    async fn positions(&self) -> Result<Option<Vec<Position>>, QueueError> {
        let settings = self.backend.settings.clone();
        let (group, topic) = (self.group(), self.spec.name.clone());
        let positions =
            tokio::task::spawn_blocking(move || lag::positions(&settings, &group, &topic))
                .await
                .map_err(|e| self.error(Operation::Backlog, true, e))?
                .map_err(|e| self.error(Operation::Backlog, true, e))?;
        Ok(Some(positions))
    }

    async fn entry_at(
        &self,
        partition: i32,
        offset: i64,
    ) -> Result<Option<Result<Entry, entry::CodecError>>, QueueError> {
        let settings = self.backend.settings.clone();
        let topic = self.spec.name.clone();
        tokio::task::spawn_blocking(move || lag::entry_at(&settings, &topic, partition, offset))
            .await
            .map_err(|e| self.error(Operation::Backlog, true, e))?
            .map_err(|e| self.error(Operation::Backlog, true, e))
    }
}
