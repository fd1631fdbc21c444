//! The consumer side of a queue handle: joining its group on the first receive, pausing and
//! resuming, probing brokers that went away, and storing the offsets acknowledged entries allow.
//!
//! A held queue (paused while its target is unavailable) is not received from, yet librdkafka
//! serves a group's rebalances only inside a poll, and the group waits for every member to
//! rejoin (up to max.poll.interval.ms, a day here): one held consumer stalled every consumer of
//! its queue for as long as the target was down (consumer/tests/rebalance.rs measured it). So a
//! held receiver keeps polling (the keeper): its partitions are paused, those a rebalance
//! assigns are paused on arrival (see `TrackingContext`), and a record that arrives all the
//! same is kept for the next receive, never dropped.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt as _;
use rdkafka::consumer::{Consumer, StreamConsumer};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{Message as _, OwnedMessage};
use rdkafka::{Offset, TopicPartitionList};

use super::KafkaQueue;
use super::backend::millis;
use super::context::TrackingContext;
use super::offsets::OffsetTracker;
use super::{Operation, QueueError};
use crate::Inspect;
use wal_runtime::outage::Outage;

/// How much one fetch takes from each partition of a delay tier, in KiB (librdkafka's default is
/// 1 MiB). librdkafka fills its read-ahead in a fixed partition order, and when one partition's
/// fetch fills it the others wait (confluentinc/librdkafka#1854): a tier's first partition was
/// read on time while the other three fell 50 s behind. Fetches this small leave room in the
/// read-ahead for every partition of the tier (up to 16).
const TIER_PARTITION_FETCH_KIB: u32 = 64;
/// How long an idle consumer that lost its brokers waits for one to answer its probe.
const PROBE_TIMEOUT: Duration = Duration::from_secs(2);

/// How soon a reader whose read-ahead was full fetches again; see `subscribe`.
const FETCH_QUEUE_BACKOFF: Duration = Duration::from_millis(10);

/// The consumer side of a handle, created on its first `receive`.
pub(super) struct Receiver {
    pub(super) consumer: Arc<StreamConsumer<TrackingContext>>,
    pub(super) tracker: Arc<Mutex<OffsetTracker>>,
    /// The consumer's view of its brokers, shared with its context.
    pub(super) outage: Arc<Outage>,
    topic: String,
    /// Whether the queue is held; shared with the context, which pauses what a rebalance
    /// assigns meanwhile.
    held: Arc<AtomicBool>,
    /// Polls while the queue is held, so its group's rebalances go on (see the module's doc).
    keeper: Mutex<Option<tokio::task::JoinHandle<()>>>,
    /// Records the keeper received (none should arrive while every partition is paused), for
    /// the next receive: in order, before anything fetched later.
    pub(super) kept: Arc<Mutex<Vec<OwnedMessage>>>,
}

/// The consumer closes apart (see `apart`): its close may wait on brokers that are away.
impl Drop for Receiver {
    fn drop(&mut self) {
        if let Some(keeper) = super::context::lock_any(&self.keeper).take() {
            keeper.abort();
        }
        super::apart::close(Arc::clone(&self.consumer), &self.topic);
    }
}

impl Receiver {
    /// Starts polling for the held queue (once).
    fn start_keeper(&self) {
        let mut keeper = super::context::lock_any(&self.keeper);
        if keeper.is_some() {
            return;
        }
        let (consumer, kept) = (Arc::clone(&self.consumer), Arc::clone(&self.kept));
        *keeper = Some(tokio::spawn(async move {
            let mut stream = consumer.stream();
            while let Some(next) = stream.next().await {
                // Errors were counted by the context (a broker away); librdkafka reconnects.
                let Ok(message) = next else { continue };
                let (topic, partition) = (message.topic().to_owned(), message.partition());
                super::context::lock_any(&kept).push(message.detach());
                // A record arrives only from a partition whose pause failed: pause it now, or
                // the keeper would read it without bound for as long as the hold lasts.
                let mut unpaused = TopicPartitionList::new();
                unpaused.add_partition(&topic, partition);
                if let Err(error) = consumer.pause(&unpaused) {
                    tracing::warn!(%error, topic, partition, "pausing a held queue's partition failed");
                }
            }
        }));
    }

    /// Stops the keeper and waits until it no longer polls, so receives have the queue alone.
    async fn stop_keeper(&self) {
        let keeper = super::context::lock_any(&self.keeper).take();
        if let Some(keeper) = keeper {
            keeper.abort();
            let _ = keeper.await;
        }
    }
}

impl std::fmt::Debug for Receiver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Receiver").finish_non_exhaustive()
    }
}

impl KafkaQueue {
    pub(super) async fn receiver(&self) -> Result<&Receiver, QueueError> {
        self.receiver
            .get_or_try_init(|| async {
                let receiver = self.subscribe()?;
                self.report_lost_at_start().await;
                Ok(receiver)
            })
            .await
    }

    /// The consumer group this handle reads with.
    pub(super) fn group(&self) -> String {
        let prefix = &self.backend.settings.group_prefix;
        match &self.spec.reader {
            None => format!("{prefix}{}", self.spec.name),
            Some(reader) => format!("{prefix}{}.{}", self.spec.name, reader.name),
        }
    }

    /// Entries this reader will never receive: counted as data loss and logged with where they
    /// were. Never silent: the consumer reads on from the oldest entry held (an automatic offset
    /// reset), so this record is all that is left of them.
    pub(super) fn gap(&self, partition: i32, lost: std::ops::Range<i64>) {
        let group = self.group();
        let count = u64::try_from(lost.end - lost.start).unwrap_or(0);
        wal_runtime::metrics::gap_entries(&self.spec.name, &group).increment(count);
        tracing::error!(
            topic = %self.spec.name,
            group = %group,
            partition,
            from_offset = lost.start,
            to_offset = lost.end,
            lost = count,
            "gap: the topic no longer holds entries this reader had not read (retention removed them); they are not delivered by it"
        );
    }

    /// A reader that comes back after retention removed entries it had not read: its committed
    /// offset is older than the oldest entry held. Checked once, before its first entry.
    async fn report_lost_at_start(&self) {
        let positions = match self.positions().await {
            Ok(positions) => positions.unwrap_or_default(),
            Err(error) => {
                tracing::debug!(%error, "reading the group's positions at start failed");
                return;
            }
        };
        // A reader that starts from the newest entry resets past everything held, not only past
        // what was removed.
        let to_newest = self.spec.reader.as_ref().is_some_and(|r| !r.from_oldest);
        for position in positions {
            if let Some(lost) = position.lost() {
                let end = if to_newest { position.high } else { lost.end };
                self.gap(position.partition, lost.start..end);
            }
        }
    }

    pub(super) fn subscribe(&self) -> Result<Receiver, QueueError> {
        let settings = &self.backend.settings;
        let tracker = Arc::new(Mutex::new(OffsetTracker::default()));
        let outage = Arc::new(Outage::new("kafka", &self.spec.name));
        let held = Arc::new(AtomicBool::new(false));
        let kept = Arc::new(Mutex::new(Vec::new()));
        let context = TrackingContext {
            queue: self.spec.name.clone(),
            tracker: Arc::clone(&tracker),
            outage: Arc::clone(&outage),
            held: Arc::clone(&held),
            kept: Arc::clone(&kept),
        };
        let mut config = settings.client_config();
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
        let (group, reset) = match &self.spec.reader {
            None => (
                format!("{}{}", settings.group_prefix, self.spec.name),
                "earliest",
            ),
            Some(reader) => (
                format!(
                    "{}{}.{}",
                    settings.group_prefix, self.spec.name, reader.name
                ),
                if reader.from_oldest {
                    "earliest"
                } else {
                    "latest"
                },
            ),
        };
        let consumer: StreamConsumer<TrackingContext> = config
            .set("group.id", group)
            .set("client.id", "wal-consumer")
            .set("enable.auto.commit", "true")
            .set("auto.commit.interval.ms", millis(settings.commit_interval))
            .set("enable.auto.offset.store", "false")
            .set("auto.offset.reset", reset)
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
            topic: self.spec.name.clone(),
            held,
            keeper: Mutex::new(None),
            kept,
        })
    }

    /// Holds the queue (`pause`) or lets it read on: fetching paused or resumed for the
    /// partitions assigned now (local to librdkafka, no broker call), and while held, the
    /// keeper polls so the group's rebalances go on; a partition a rebalance assigns while
    /// held is paused as it arrives. A partition paused is read again from the first record
    /// not yet received.
    pub(super) async fn pause_or_resume(&self, pause: bool) -> Result<(), QueueError> {
        let Some(receiver) = self.receiver.get() else {
            return Ok(());
        };
        if !pause {
            receiver.stop_keeper().await;
        }
        receiver.held.store(pause, Ordering::SeqCst);
        // Held, the group must be served whatever else fails here.
        if pause {
            receiver.start_keeper();
        }
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
    pub(super) async fn probe(&self, receiver: &Receiver) {
        let consumer = Arc::clone(&receiver.consumer);
        let topic = self.spec.name.clone();
        // A blocking broker call, so apart (see `apart`).
        let answered = super::apart::call(PROBE_TIMEOUT * 2, move || {
            consumer.fetch_watermarks(&topic, 0, PROBE_TIMEOUT).is_ok()
        })
        .await
        .unwrap_or(false);
        if answered {
            receiver.outage.answered();
        }
    }

    pub(super) fn store_commit_point(
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
