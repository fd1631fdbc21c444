//! An in-memory twin of a Kafka topic with one partition, for unit tests and simulations of
//! delivery logic: no broker, no network, deterministic order. It passes the same conformance
//! suite as Kafka and SQS (`tests/queue_conformance.rs`), so what holds of a `Queue` holds here.
//!
//! A [`MemoryBroker`] holds every topic; a [`MemoryQueue`] handle starts reading at the topic's
//! committed position, which never passes an entry still in progress. Acknowledgements are
//! committed at once (Kafka commits them periodically and on close; committing sooner is allowed
//! by the contract). A handle dropped with entries in progress leaves them to the next handle:
//! at-least-once, like a consumer that crashed. Like a Kafka group with one partition, the first
//! handle that receives owns the topic; another live handle receives nothing until the owner is
//! dropped, then reads from the commit.
//!
//! It reports itself as [`Backend::Kafka`], whose semantics it copies, so errors and metrics name
//! Kafka. It has no delay tiers: entries wait in the caller's memory (`hold_limit` is unbounded).

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use tokio::sync::Notify;

use super::kafka::RECORD_LIMIT_BYTES;
use super::{
    Backend, DLQ_HEADROOM_BYTES, Delivery, EnqueueError, Operation, ProvisionReport, QueueError,
    QueueSpec, Receipt,
};
use crate::Consume;
use crate::Inspect;
use crate::Produce;
use crate::entry::{self, Entry};

/// Every topic of one in-memory "cluster". Cheap to clone; clones share the topics.
#[derive(Debug, Clone, Default)]
pub struct MemoryBroker {
    inner: Arc<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    topics: Mutex<HashMap<String, Topic>>,
    /// The next handle's number.
    handles: std::sync::atomic::AtomicU64,
    /// Woken on every append, so a waiting receive returns at once.
    appended: Notify,
}

#[derive(Debug, Default)]
struct Topic {
    records: Vec<Bytes>,
    /// The consumer group's position: every record below it is done.
    committed: usize,
    /// Records at or above `committed` that are done (acknowledged out of order).
    done: BTreeSet<usize>,
    /// The handle the partition is assigned to: the first that receives, until it is dropped
    /// (a Kafka group gives its one partition to one member).
    owner: Option<u64>,
}

impl Topic {
    /// Marks one record done and moves the commit past every done record in a row.
    fn finish(&mut self, offset: usize) {
        if offset >= self.committed {
            self.done.insert(offset);
        }
        while self.done.remove(&self.committed) {
            self.committed += 1;
        }
    }
}

impl MemoryBroker {
    pub fn new() -> Self {
        Self::default()
    }

    /// A handle on one queue; a new handle reads from the group's committed position, like a
    /// restarted consumer.
    pub fn queue(&self, spec: QueueSpec) -> MemoryQueue {
        MemoryQueue {
            id: self
                .inner
                .handles
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            broker: self.clone(),
            spec,
            next: Mutex::new(None),
            paused: std::sync::atomic::AtomicBool::new(false),
        }
    }

    /// Whether the topic exists (was provisioned or written to).
    pub fn exists(&self, topic: &str) -> bool {
        self.topics().contains_key(topic)
    }

    /// Appends raw bytes to a topic, as a foreign producer might: they need not be an entry.
    pub fn append_raw(&self, topic: &str, bytes: impl Into<Bytes>) {
        self.topics()
            .entry(topic.to_owned())
            .or_default()
            .records
            .push(bytes.into());
        self.inner.appended.notify_waiters();
    }

    fn topics(&self) -> MutexGuard<'_, HashMap<String, Topic>> {
        self.inner
            .topics
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

/// One topic and its DLQ topic in a [`MemoryBroker`].
#[derive(Debug)]
pub struct MemoryQueue {
    id: u64,
    broker: MemoryBroker,
    spec: QueueSpec,
    /// This handle's read position; `None` until its first receive, which starts at the commit.
    next: Mutex<Option<usize>>,
    /// Between `pause` and `resume`, receives hand out nothing.
    paused: std::sync::atomic::AtomicBool,
}

impl MemoryQueue {
    fn append(&self, topic: &str, entry: &Entry, limit: usize) -> Result<(), EnqueueError> {
        let bytes = entry::encode(entry);
        if bytes.len() > limit {
            return Err(EnqueueError::TooLarge {
                backend: Backend::Kafka,
                queue: topic.to_owned(),
                size: bytes.len(),
                limit,
            });
        }
        self.broker.append_raw(topic, bytes);
        Ok(())
    }

    /// Takes up to `max` records after this handle's position.
    fn take(&self, max: usize) -> Vec<Delivery> {
        let mut topics = self.broker.topics();
        let Some(topic) = topics.get_mut(&self.spec.name) else {
            return Vec::new();
        };
        if *topic.owner.get_or_insert(self.id) != self.id {
            return Vec::new();
        }
        let mut next = self.next.lock().unwrap_or_else(PoisonError::into_inner);
        let start = *next.get_or_insert(topic.committed);
        let end = topic.records.len().min(start.saturating_add(max));
        *next = Some(end.max(start));
        (start..end)
            .map(|offset| {
                let raw = topic.records[offset].clone();
                Delivery {
                    entry: entry::decode(&raw),
                    raw,
                    receipt: Receipt::Kafka {
                        partition: 0,
                        offset: i64::try_from(offset).unwrap_or(i64::MAX),
                    },
                }
            })
            .collect()
    }

    fn error(&self, operation: Operation, reason: impl std::fmt::Display) -> QueueError {
        QueueError::permanent(Backend::Kafka, &self.spec.name, operation, reason)
    }
}

/// The partition goes back to the group: the next handle that receives takes it over.
impl Drop for MemoryQueue {
    fn drop(&mut self) {
        if let Some(topic) = self.broker.topics().get_mut(&self.spec.name)
            && topic.owner == Some(self.id)
        {
            topic.owner = None;
        }
    }
}

#[async_trait]
impl Produce for MemoryQueue {
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
        let mut report = ProvisionReport::default();
        let mut topics = self.broker.topics();
        for name in std::iter::once(&self.spec.name).chain(self.spec.dlq.as_ref()) {
            if topics.contains_key(name) {
                report.existing.push(name.clone());
            } else {
                topics.insert(name.clone(), Topic::default());
                report.created.push(name.clone());
            }
        }
        Ok(report)
    }

    async fn enqueue(&self, entry: &Entry) -> Result<(), EnqueueError> {
        self.append(&self.spec.name, entry, self.max_entry_bytes())
    }
}

#[async_trait]
impl Consume for MemoryQueue {
    async fn enqueue_dead_letter(&self, entry: &Entry) -> Result<(), EnqueueError> {
        let dlq = self
            .spec
            .dlq
            .as_ref()
            .ok_or_else(|| EnqueueError::no_dlq(Backend::Kafka, &self.spec.name))?;
        self.append(dlq, entry, RECORD_LIMIT_BYTES)
    }

    async fn requeue(&self, entry: &Entry) -> Result<(), EnqueueError> {
        self.append(&self.spec.name, entry, RECORD_LIMIT_BYTES)
    }

    fn hold_limit(&self) -> Duration {
        Duration::MAX
    }

    async fn receive(&self, max: usize, wait: Duration) -> Result<Vec<Delivery>, QueueError> {
        let now = tokio::time::Instant::now();
        // A day stands for "for ever": Instant + Duration::MAX would overflow.
        let deadline = now
            .checked_add(wait)
            .unwrap_or(now + Duration::from_secs(86_400));
        loop {
            // Registered before looking, so an append between the look and the wait wakes it.
            let appended = self.broker.inner.appended.notified();
            let taken = if self.paused.load(std::sync::atomic::Ordering::Acquire) {
                Vec::new()
            } else {
                self.take(max)
            };
            if !taken.is_empty() || tokio::time::Instant::now() >= deadline {
                return Ok(taken);
            }
            let _ = tokio::time::timeout_at(deadline, appended).await;
        }
    }

    async fn acknowledge(&self, delivery: &Delivery) -> Result<(), QueueError> {
        let Receipt::Kafka { offset, .. } = delivery.receipt else {
            return Err(self.error(Operation::Acknowledge, "not a receipt of this queue"));
        };
        let offset = usize::try_from(offset)
            .map_err(|_| self.error(Operation::Acknowledge, "a negative offset"))?;
        let mut topics = self.broker.topics();
        let topic = topics
            .get_mut(&self.spec.name)
            .ok_or_else(|| self.error(Operation::Acknowledge, "the topic does not exist"))?;
        topic.finish(offset);
        Ok(())
    }

    async fn extend(&self, _delivery: &Delivery, _by: Duration) -> Result<(), QueueError> {
        Ok(())
    }

    async fn pause(&self) -> Result<(), QueueError> {
        self.paused
            .store(true, std::sync::atomic::Ordering::Release);
        Ok(())
    }

    async fn resume(&self) -> Result<(), QueueError> {
        self.paused
            .store(false, std::sync::atomic::Ordering::Release);
        // A receive waiting while paused looks again now.
        self.broker.inner.appended.notify_waiters();
        Ok(())
    }

    async fn close(&self) -> Result<(), QueueError> {
        Ok(())
    }
}

#[async_trait]
impl Inspect for MemoryQueue {
    async fn parked(&self) -> Result<Option<u64>, QueueError> {
        Ok(Some(0))
    }

    async fn backlog(&self) -> Result<Option<u64>, QueueError> {
        self.unfinished().await.map(Some)
    }

    async fn unfinished(&self) -> Result<u64, QueueError> {
        let topics = self.broker.topics();
        let waiting = topics.get(&self.spec.name).map_or(0, |topic| {
            topic
                .records
                .len()
                .saturating_sub(topic.committed)
                .saturating_sub(topic.done.len())
        });
        Ok(u64::try_from(waiting).unwrap_or(u64::MAX))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(id: &str) -> Entry {
        Entry {
            version: entry::ENTRY_VERSION,
            id: id.to_owned(),
            ..Entry::default()
        }
    }

    #[tokio::test]
    async fn a_paused_queue_hands_out_nothing_until_resumed() {
        let broker = MemoryBroker::new();
        let queue = broker.queue(QueueSpec::new("ns", "q", "q-dlq"));
        queue.provision().await.unwrap();
        queue.enqueue(&entry("a")).await.unwrap();
        queue.pause().await.unwrap();
        let wait = Duration::from_millis(20);
        assert!(queue.receive(10, wait).await.unwrap().is_empty());
        queue.resume().await.unwrap();
        let received = queue.receive(10, wait).await.unwrap();
        assert_eq!(received.len(), 1);
        // A wait as long as it gets does not overflow the clock.
        queue.enqueue(&entry("b")).await.unwrap();
        assert_eq!(queue.receive(10, Duration::MAX).await.unwrap().len(), 1);
    }

    #[tokio::test]
    async fn one_handle_owns_the_topic_until_it_is_dropped() {
        let broker = MemoryBroker::new();
        let spec = QueueSpec::new("ns", "q", "q-dlq");
        let first = broker.queue(spec.clone());
        first.provision().await.unwrap();
        first.enqueue(&entry("a")).await.unwrap();
        let wait = Duration::from_millis(20);
        assert_eq!(first.receive(10, wait).await.unwrap().len(), 1);
        let second = broker.queue(spec);
        assert!(second.receive(10, wait).await.unwrap().is_empty());
        // The first leaves without acknowledging: the second gets the entry again.
        drop(first);
        let again = second.receive(10, wait).await.unwrap();
        assert_eq!(again.len(), 1);
        assert_eq!(again[0].entry.as_ref().map(|e| e.id.as_str()), Ok("a"));
    }
}
