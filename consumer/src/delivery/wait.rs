//! Waiting for an entry's deliver-at: held in memory when it is near, parked on the broker (an
//! SQS delay step, a Kafka delay tier) when it is far.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use tokio::sync::OwnedSemaphorePermit;
use tokio_util::sync::CancellationToken;
use wal_queue::entry::Entry;
use wal_queue::{Backend, Delivery, Operation};

use super::{Deliverer, QueueContext, Settled, micros_until, persist_enqueue};

/// How much longer than its wait and apply a held SQS message stays invisible, so no other
/// consumer receives it meanwhile.
const SQS_HOLD_MARGIN: Duration = Duration::from_secs(5);

impl Deliverer {
    /// Holds the entry until its deliver-at. Returns false when the entry left this consumer
    /// instead: parked on the broker because it is far (a copy written, then the original
    /// acknowledged), or, at shutdown, left unacknowledged for the queue to hand out again.
    pub(super) async fn wait_until_due(
        &self,
        context: &QueueContext,
        delivery: &Delivery,
        entry: &Entry,
        slot: &mut Option<OwnedSemaphorePermit>,
        shutdown: &CancellationToken,
    ) -> bool {
        let remaining = micros_until(entry.deliver_at_micros);
        if remaining.is_zero() {
            return true;
        }
        // Fixed now: the park and the visibility extension below take broker round trips, and a
        // sleep of `remaining` started after them is late by their time. Counting from after
        // the extension made SQS lateness p50 9.0 ms and p99 38 ms on ElasticMQ; from here,
        // 1.7 ms and 15 ms (delay_lateness bench).
        let due_at = tokio::time::Instant::now() + remaining;
        let queue = &context.queue;
        // Boxed for the same reason as the apply: most entries never park.
        if remaining > queue.hold_limit()
            && Box::pin(self.park(context, delivery, entry, shutdown)).await
        {
            return false;
        }
        if queue.backend() == Backend::Sqs {
            // Invisible long enough to hold and apply it.
            let by = remaining + self.applier.timeout() + SQS_HOLD_MARGIN;
            if let Err(error) = queue.extend(delivery, by).await {
                tracing::warn!(namespace = %entry.namespace, entry_id = %entry.id, %error, "cannot extend visibility; the entry will be received again");
                return false;
            }
        }
        let held = &context.metrics.held;
        held.increment(1.0);
        // Trade the in-flight slot for a waiting one if there is one; take a slot back when due.
        let waiting = Arc::clone(&context.held).try_acquire_owned().ok();
        if waiting.is_some() {
            slot.take();
        }
        let due = tokio::select! {
            () = tokio::time::sleep_until(due_at) => true,
            () = shutdown.cancelled() => false,
        };
        held.decrement(1.0);
        drop(waiting);
        if due && slot.is_none() {
            *slot = tokio::select! {
                permit = Arc::clone(&context.in_flight).acquire_owned() => permit.ok(),
                () = shutdown.cancelled() => None,
            };
        }
        let due = due && slot.is_some();
        if !due {
            // Visible again at once, for whichever consumer is still running.
            let _ = queue.extend(delivery, Duration::ZERO).await;
        }
        due
    }

    /// Gives a far entry back to wait on the broker: the copy first, then the original
    /// acknowledged. Returns whether the entry left this consumer; false only when the queue
    /// refused the copy for good, and then the entry is held in memory instead.
    pub(super) async fn park(
        &self,
        context: &QueueContext,
        delivery: &Delivery,
        entry: &Entry,
        shutdown: &CancellationToken,
    ) -> bool {
        let queue = &context.queue;
        // The parked copy comes back for this destination alone: the others had the original.
        let mut parked = entry.clone();
        context.destination.mark(&mut parked);
        let enqueue = || queue.requeue(&parked);
        let written = persist_enqueue(context, Operation::Park, shutdown, enqueue).await;
        match written {
            Settled::Done => {}
            Settled::Stopped => return true,
            Settled::Refused(_) => return false,
        }
        if self.acknowledge(context, delivery, shutdown).await {
            context.metrics.parked_total.increment(1);
            self.stats.parked.fetch_add(1, Ordering::Relaxed);
        }
        true
    }
}
