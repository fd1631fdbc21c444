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
mod consume;
mod context;
mod credentials;
mod inspect;
mod lag;
mod offsets;
mod produce;
mod provision;
mod receiver;
mod replace;
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
    Backend, Consume, DLQ_HEADROOM_BYTES, DelayTier, Delivery, Durability, EnqueueError, Inspect,
    Operation, Position, Produce, ProvisionReport, Queue, QueueError, QueueSpec, Receipt,
};
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
