//! The queue layer: the entry codec ([`entry`]: how an entry becomes bytes on a queue and back),
//! and one trait for a namespace's queue, implemented on Kafka and on SQS.
//!
//! A queue carries entries from the producer to the consumer. Every queue has a DLQ on the same
//! backend. The contract below is what the producer's Trilean answer and the consumer's
//! at-least-once delivery stand on; `tests/queue_conformance.rs` checks it against every backend.

mod copies;
pub mod delay;
pub mod entry;
mod error;
pub mod kafka;
#[cfg(feature = "memory")]
pub mod memory;
pub mod sqs;

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;

use crate::entry::{CodecError, Entry, ErrorClass};
pub use copies::{dead_letter_copy, prefix, redrive_copy, replay_copy, retry_copy};
use error::EnqueueTo;
pub use error::{Durability, EnqueueError, Operation, QueueError};

/// The broker a queue lives on, as the namespace model names it.
pub use wal_namespaces::Backend;
use wal_namespaces::{Namespace, QueueConfig};

/// Names one queue of a namespace: the Kafka topic or SQS queue, and its DLQ.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueSpec {
    /// The namespace the queue belongs to; dead-lettered undecodable messages are filed under it.
    pub namespace: String,
    /// The topic or queue name.
    pub name: String,
    /// The DLQ's topic or queue name. `None` only for a handle that reads a DLQ itself.
    pub dlq: Option<String>,
    /// The longest an entry on this queue may wait for its deliver-at (the namespace's delay
    /// and jitter limits, or its longest retry backoff). A Kafka queue makes the delay tiers a
    /// wait this long needs; zero means entries are held in memory only.
    pub longest_wait: Duration,
    /// The Kafka cluster the queue is on, as the cluster map names it; `None`: the map's
    /// default. Its DLQ and delay tiers are on the same cluster.
    pub cluster: Option<String>,
    /// Who reads the queue through this handle, when not the namespace's delivery group: a
    /// reader of its own keeps its own position (on Kafka, its own consumer group).
    pub reader: Option<Reader>,
}

/// Where a reader stands on one partition of a Kafka topic.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Position {
    pub partition: i32,
    /// The next offset the reader reads; `None` when it has committed nothing yet.
    pub committed: Option<i64>,
    /// The oldest offset the topic still holds.
    pub low: i64,
    /// One past the newest offset.
    pub high: i64,
}

impl Position {
    /// Entries the reader has yet to read (from the oldest held when it has no position).
    pub fn lag(&self) -> u64 {
        let from = self.committed.unwrap_or(self.low).max(self.low);
        u64::try_from(self.high - from).unwrap_or(0)
    }

    /// Offsets the reader will never read: its position is older than what the topic holds.
    pub fn lost(&self) -> Option<std::ops::Range<i64>> {
        self.committed
            .filter(|c| *c < self.low)
            .map(|c| c..self.low)
    }
}

/// A reader of a queue with a position of its own: one destination region of a replicated
/// namespace, or one further store. On Kafka its consumer group is
/// `<group_prefix><topic>.<name>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reader {
    pub name: String,
    /// Where a reader with no position yet starts: the oldest entry the queue holds, or the
    /// next one written.
    pub from_oldest: bool,
}

impl Reader {
    /// The reader that delivers to `destination`, one of a namespace's further stores: on
    /// Kafka, the group `<group_prefix><topic>.destination-<name>`.
    pub fn of_destination(destination: &wal_namespaces::DestinationConfig) -> Self {
        Self {
            name: format!("destination-{}", destination.name),
            from_oldest: destination.from_oldest(),
        }
    }
}

impl QueueSpec {
    /// A namespace queue with its DLQ.
    pub fn new(namespace: &str, name: &str, dlq: &str) -> Self {
        Self {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            dlq: Some(dlq.to_owned()),
            longest_wait: Duration::ZERO,
            cluster: None,
            reader: None,
        }
    }

    /// One of a namespace's queues, with the namespace's longest wait, so a Kafka queue has the
    /// delay tiers its entries need.
    pub fn of(namespace: &Namespace, queue: &QueueConfig) -> Self {
        Self {
            cluster: queue.cluster.clone(),
            ..Self::new(&namespace.name, &queue.name, &queue.dlq)
        }
        .with_longest_wait(namespace.longest_wait())
    }

    /// The same queue, with entries waiting up to `longest_wait` for their deliver-at.
    pub fn with_longest_wait(mut self, longest_wait: Duration) -> Self {
        self.longest_wait = longest_wait;
        self
    }

    /// The same queue, read by `reader` with a position of its own.
    pub fn read_by(mut self, reader: Reader) -> Self {
        self.reader = Some(reader);
        self
    }

    /// A handle on this queue's DLQ, for reading what was dead-lettered.
    pub fn dead_letters(&self) -> Option<Self> {
        self.dlq.as_ref().map(|dlq| Self {
            namespace: self.namespace.clone(),
            name: dlq.clone(),
            dlq: None,
            longest_wait: Duration::ZERO,
            cluster: self.cluster.clone(),
            reader: None,
        })
    }
}

/// What [`Produce::provision`] did: the topics or queues it made, and those that already existed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProvisionReport {
    pub created: Vec<String>,
    pub existing: Vec<String>,
}

/// A delay tier of a queue: a queue of its own whose every entry waits `wait` before it moves on
/// (see [`delay`]). The consumer reads it and puts each entry back through its home queue's
/// [`Consume::requeue`], which parks it on the next tier down or returns it to the queue.
#[derive(Debug, Clone)]
pub struct DelayTier {
    pub wait: Duration,
    pub queue: Arc<dyn Queue>,
}

/// Identifies a received message to its backend, for acknowledging or extending it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Receipt {
    Kafka { partition: i32, offset: i64 },
    Sqs { message_id: String, handle: String },
}

impl fmt::Display for Receipt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Kafka { partition, offset } => write!(f, "partition {partition} offset {offset}"),
            Self::Sqs { message_id, .. } => write!(f, "message {message_id}"),
        }
    }
}

/// One received message: the entry (or why it could not be decoded) and its receipt.
#[derive(Debug, Clone)]
pub struct Delivery {
    /// The decoded entry. An error here is permanent: the consumer dead-letters the raw bytes.
    pub entry: Result<Entry, CodecError>,
    /// The message exactly as the queue held it when its entry did not decode, so even an
    /// undecodable one reaches the DLQ. A queue may leave it empty when the entry decoded
    /// (Kafka does: the copy would cost every delivery, and nothing reads it then).
    pub raw: Bytes,
    pub receipt: Receipt,
}

/// Why a delivery failed, as its retry copy and its DLQ copy record it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    pub class: ErrorClass,
    pub reason: String,
}

impl Failure {
    pub fn retryable(reason: impl Into<String>) -> Self {
        Self {
            class: ErrorClass::Retryable,
            reason: reason.into(),
        }
    }

    pub fn permanent(reason: impl Into<String>) -> Self {
        Self {
            class: ErrorClass::Permanent,
            reason: reason.into(),
        }
    }
}

/// Error texts on entries are capped so that the copy written by a retry or to the DLQ still fits
/// the backend; [`Produce::max_entry_bytes`] keeps this much head room for it.
pub const MAX_ERROR_BYTES: usize = 1024;
/// How much of an undecodable message its DLQ entry keeps (the smallest backend limit, SQS's,
/// less head room).
pub const MAX_UNDECODABLE_BYTES: usize = 128 * 1024;
/// Head room between an entry's size limit and the backend's, for the fields a retry or a DLQ
/// write adds (error text, times, attempt count).
pub const DLQ_HEADROOM_BYTES: usize = 4 * 1024;

/// One queue of a namespace and its DLQ, as a producer uses it: what it is, where it lives, and
/// the put whose `Ok` a TRUE answer stands on. Every handle is one; a consumer's handle is
/// [`Consume`] as well, an operator tool's [`Inspect`], and a [`Queue`] is all of them.
///
/// # Contract (every role's)
/// - **Enqueue is durable or says why not.** [`enqueue`](Produce::enqueue) returns `Ok` only after
///   the broker acknowledged the entry (Kafka: idempotent producer, acks=all; SQS: SendMessage
///   succeeded). An error says whether the entry is definitely not stored or may be
///   ([`EnqueueError::durability`]). An entry larger than [`max_entry_bytes`](Produce::max_entry_bytes)
///   is refused before anything is sent.
/// - **Delay.** An entry is not handed out by [`receive`](Consume::receive) long before its
///   `deliver_at_micros` where the backend can hold it back (SQS DelaySeconds, up to 900 s); Kafka
///   hands what the producer enqueued out at once. Either way the consumer must still wait until
///   deliver-at: the queue never promises exact timing. An entry further from its deliver-at
///   than [`hold_limit`](Consume::hold_limit) is given back with [`requeue`](Consume::requeue), which
///   keeps it on the broker (SQS: delayed; Kafka: on a [`DelayTier`]) until it is near.
/// - **At-least-once.** A received entry stays owned by the queue until it is acknowledged. One
///   that is never acknowledged (the consumer crashed, the handle was dropped) is received again
///   by a later handle: on Kafka the committed offset never passes an entry still in progress,
///   however many are in flight; on SQS the message becomes visible again when its visibility
///   timeout ends (see [`extend`](Consume::extend)).
/// - **Acknowledge after effect.** Callers acknowledge only after the entry's effect happened or
///   it was written to the DLQ. An acknowledged entry is not received again, except after a
///   broker-side failure that at-least-once allows (a Kafka group rebalance before the commit).
/// - **Release and dead-letter write first, acknowledge second.** Both put a new copy on a queue
///   and only then acknowledge the original, so a crash between the two duplicates, never loses.
///
/// Handles are cheap to clone behind an `Arc` and safe to use from many tasks at once.
#[async_trait]
pub trait Produce: Send + Sync + fmt::Debug {
    /// The queue's spec: its name and its DLQ's.
    fn spec(&self) -> &QueueSpec;

    /// The broker this queue lives on.
    fn backend(&self) -> Backend;

    /// The largest encoded entry [`enqueue`](Produce::enqueue) accepts. The producer compares
    /// payload sizes against it to decide on a claim check.
    fn max_entry_bytes(&self) -> usize;

    /// Creates the queue and its DLQ if they do not exist. Idempotent: a second call creates
    /// nothing and reports both as existing.
    async fn provision(&self) -> Result<ProvisionReport, QueueError>;

    /// Puts the entry on the queue. `Ok` means the broker acknowledged it; see the contract.
    async fn enqueue(&self, entry: &Entry) -> Result<(), EnqueueError>;
}

/// What a consumer does with a queue besides writing to it: receive, acknowledge, keep an entry
/// in progress, hold and read on, and give an entry back (a retry copy, a park) or to the DLQ.
#[async_trait]
pub trait Consume: Produce {
    /// Puts the entry on the DLQ as it is (the caller has set its reason). Allows entries up to
    /// the backend's own limit, so an entry that fit the queue always fits its DLQ.
    async fn enqueue_dead_letter(&self, entry: &Entry) -> Result<(), EnqueueError>;

    /// Puts a copy of an entry that was already on this queue back on it (a retry, or a wait
    /// parked on the broker), to be received again shortly before its deliver-at: SQS hides it
    /// with DelaySeconds, in steps of at most 900 s; Kafka parks it on a delay tier when it is
    /// further than the hold limit. Allows entries up to the backend's own limit, like
    /// [`enqueue_dead_letter`](Consume::enqueue_dead_letter): the head room below it is kept for
    /// what a retry adds.
    async fn requeue(&self, entry: &Entry) -> Result<(), EnqueueError>;

    /// The longest wait a consumer should hold in memory; an entry further from its deliver-at is
    /// given back with [`requeue`](Consume::requeue), so waiting costs broker space, not memory.
    /// `Duration::MAX` when the queue has nowhere to park (a Kafka queue without delay tiers).
    fn hold_limit(&self) -> Duration;

    /// The delay tiers a consumer of this queue must also read (Kafka); none on SQS, where the
    /// queue itself holds delayed messages back.
    fn delay_tiers(&self) -> Vec<DelayTier> {
        Vec::new()
    }

    /// Waits up to `wait` for entries, and returns at most `max` of them (possibly none).
    async fn receive(&self, max: usize, wait: Duration) -> Result<Vec<Delivery>, QueueError>;

    /// Marks the delivery done, so it is not received again.
    async fn acknowledge(&self, delivery: &Delivery) -> Result<(), QueueError>;

    /// Keeps an entry in progress from being handed to another consumer for `by` from now
    /// (SQS visibility). Kafka keeps in-progress entries by design, so there it does nothing.
    async fn extend(&self, delivery: &Delivery, by: Duration) -> Result<(), QueueError>;

    /// Stops reading ahead while the caller holds what it has (its target is unavailable) and
    /// will not receive until [`Consume::resume`]: Kafka pauses the assigned partitions, so nothing
    /// more is fetched into memory and the group membership and commits stay as they are; SQS
    /// needs nothing, since it hands out only what is asked for. Entries already received are
    /// not touched.
    async fn pause(&self) -> Result<(), QueueError> {
        Ok(())
    }

    /// Reads on after [`Consume::pause`], from the first entry not yet received.
    async fn resume(&self) -> Result<(), QueueError> {
        Ok(())
    }

    /// Makes what was acknowledged final before the handle goes away (Kafka: a synchronous
    /// commit). A handle dropped without closing may lose acknowledgements made since the last
    /// periodic commit, so those entries are received again: at-least-once, never a loss.
    async fn close(&self) -> Result<(), QueueError>;
}

/// What operators' tools read from a queue: how much waits, how much is unfinished, where a
/// reader stands, one entry by its offset. For metrics and decisions people make, never for
/// correctness.
#[async_trait]
pub trait Inspect: Produce {
    /// Roughly how many entries wait on the broker for their deliver-at: SQS's delayed messages,
    /// or the delay tiers' backlog on Kafka (`None` before they are read). For metrics and
    /// operators, never for correctness.
    async fn parked(&self) -> Result<Option<u64>, QueueError>;

    /// Roughly how many entries wait to be received: on Kafka, the consumer group's lag on the
    /// partitions this handle is assigned (`None` before its first receive); on SQS, the
    /// queue's visible messages. For metrics and operators, never for correctness.
    async fn backlog(&self) -> Result<Option<u64>, QueueError>;

    /// How many entries the queue holds that no consumer has finished: on Kafka, past the
    /// namespace consumer group's committed offsets (everything kept, when the group never
    /// committed); on SQS, its visible, in-flight and delayed messages. Approximate on SQS. The
    /// control plane asks it before a queue or DLQ is dropped from its namespace.
    async fn unfinished(&self) -> Result<u64, QueueError>;

    /// Where this handle's reader (its group, on Kafka) stands on each partition, read without
    /// joining it; `None` for a queue without positions (SQS).
    async fn positions(&self) -> Result<Option<Vec<Position>>, QueueError> {
        Ok(None)
    }

    /// The entry at `offset` of `partition`, read without a reader's position; `None` when the
    /// queue does not hold it (or has no offsets: SQS).
    async fn entry_at(
        &self,
        _partition: i32,
        _offset: i64,
    ) -> Result<Option<Result<Entry, crate::entry::CodecError>>, QueueError> {
        Ok(None)
    }
}

/// A whole handle: every role. Backends implement the three roles; a caller names the role it
/// needs where one is enough, and holds an `Arc<dyn Queue>` where it needs them all.
pub trait Queue: Consume + Inspect {}

impl<T: Consume + Inspect + ?Sized> Queue for T {}
