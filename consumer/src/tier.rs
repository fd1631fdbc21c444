//! A delay tier's reader (Kafka). Every entry on a tier waits the tier's wait from when it was
//! parked, so a tier is read in the order its entries come due: each one is held until then,
//! put back through its home queue's `requeue` (which parks it on the next tier down, or returns
//! it to the queue when it is near) and only then acknowledged on the tier. A reader holds no
//! more than its in-flight slots' worth of entries; the rest wait on the broker.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::OwnedSemaphorePermit;
use tokio_util::sync::CancellationToken;
use wal_queue::delay::{TIER_SUFFIX_MAX, tier_release_at};
use wal_queue::{Delivery, Failure, Operation, Queue, dead_letter_copy};

use crate::delivery::{QueueContext, Settled, micros_until, persist, persist_enqueue};

/// Where a tier's entries go when their wait is over.
#[derive(Debug, Clone)]
pub struct TierRoute {
    /// The queue the tier belongs to; its `requeue` decides the next stop.
    pub home: Arc<dyn Queue>,
    /// The tier's wait.
    pub wait: Duration,
}

/// Takes one parked entry on: waits out the tier, then requeues it home and acknowledges it.
/// `context` is the tier's own (its queue is the tier). The slot is given back when done.
pub async fn forward(
    context: &QueueContext,
    route: &TierRoute,
    delivery: Delivery,
    _slot: OwnedSemaphorePermit,
    shutdown: &CancellationToken,
) {
    let tier = &context.queue;
    let entry = match &delivery.entry {
        Ok(entry) => entry,
        Err(codec) => {
            let failure = Failure::permanent(format!("undecodable message: {codec}"));
            dead_letter(context, &delivery, &failure, shutdown).await;
            return;
        }
    };
    let release = tier_release_at(
        entry.enqueued_at_micros,
        route.wait,
        entry.deliver_at_micros,
    );
    let wait = micros_until(release);
    if !wait.is_zero() {
        tokio::select! {
            () = tokio::time::sleep(wait) => {}
            // Left unacknowledged: the tier hands it out again after a restart.
            () = shutdown.cancelled() => return,
        }
    }
    let home = &route.home;
    let moved = persist_enqueue(context, Operation::Park, shutdown, || home.requeue(entry)).await;
    match moved {
        Settled::Done => {}
        Settled::Stopped => return,
        // The home queue took the entry once and cannot now; the DLQ keeps it and says why.
        Settled::Refused(error) => {
            let failure = Failure::permanent(format!("moving it off the delay tier: {error}"));
            dead_letter(context, &delivery, &failure, shutdown).await;
            return;
        }
    }
    let _ = persist(context, "acknowledge", shutdown, || {
        tier.acknowledge(&delivery)
    })
    .await;
}

/// Writes the entry to the home queue's DLQ (the tier shares it), then acknowledges it.
async fn dead_letter(
    context: &QueueContext,
    delivery: &Delivery,
    failure: &Failure,
    shutdown: &CancellationToken,
) {
    let tier = &context.queue;
    tracing::error!(queue = %tier.spec().name, receipt = %delivery.receipt, reason = %failure.reason, "dead-lettering from a delay tier");
    let dead = dead_letter_copy(tier.spec(), delivery, failure);
    let enqueue = || tier.enqueue_dead_letter(&dead);
    let written = persist_enqueue(context, Operation::DeadLetter, shutdown, enqueue).await;
    if matches!(written, Settled::Done) {
        let _ = persist(context, "acknowledge", shutdown, || {
            tier.acknowledge(delivery)
        })
        .await;
    }
}

// Every topic a namespace may name leaves room for its tiers' names (Kafka's limit is 249).
const _: () = assert!(wal_namespaces::KAFKA_TOPIC_MAX + TIER_SUFFIX_MAX <= 249);
