//! An entry an operator cancelled (the control plane's `Operations.CancelEntry`): checked
//! before each attempt, so a delayed entry cancelled while it waits is never applied; it is
//! acknowledged instead, which ends it on this destination's queue as a delivery would.

use std::sync::atomic::Ordering;

use tokio_util::sync::CancellationToken;
use wal_queue::Delivery;
use wal_queue::entry::{Body, Entry};

use super::{Deliverer, QueueContext};

impl Deliverer {
    /// Whether an operator cancelled `entry`, as the control plane last said. A two-phase
    /// write's commit marker is never skipped: its transaction is committed, and skipping it
    /// would leave the items staged and never applied (a transaction is aborted before its
    /// commit, not cancelled after).
    pub(super) fn cancelled(context: &QueueContext, entry: &Entry) -> bool {
        if matches!(entry.body, Some(Body::Transaction(_))) {
            return false;
        }
        let directives = context.directives.borrow();
        !directives.cancellations.is_empty()
            && directives
                .cancellations
                .cancelled(&entry.namespace, &entry.id)
    }

    /// Ends a cancelled entry without applying it: acknowledged, counted, logged.
    pub(super) async fn skip_cancelled(
        &self,
        context: &QueueContext,
        delivery: &Delivery,
        entry: &Entry,
        shutdown: &CancellationToken,
    ) {
        tracing::info!(namespace = %entry.namespace, entry_id = %entry.id, destination = %context.destination.name(), attempt = entry.attempt, "skipping an entry an operator cancelled; it is acknowledged without being applied");
        if self.acknowledge(context, delivery, shutdown).await {
            context.metrics.cancelled.increment(1);
            self.stats.cancelled.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// After an attempt applied `entry`: a cancellation that arrived while it ran came too
    /// late here, which the log says (the receipts, where recorded, show it applied).
    pub(super) fn applied_though_cancelled(context: &QueueContext, entry: &Entry) {
        if Self::cancelled(context, entry) {
            tracing::warn!(namespace = %entry.namespace, entry_id = %entry.id, destination = %context.destination.name(), "an entry was cancelled while its attempt ran; it was applied here");
        }
    }
}
