//! Settling an entry once its outcome is known: acknowledged, released for a retry, or
//! dead-lettered, each persisted until the queue has heard it.

use std::sync::atomic::Ordering;
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use wal_queue::entry::{self, ErrorClass};
use wal_queue::{
    Delivery, EnqueueError, Failure, Operation, QueueError, dead_letter_copy, retry_copy,
};
use wal_runtime::trace_context;

use crate::metrics::KindMetrics;

use super::verdict::Settle;
use super::{Deliverer, QueueContext};

/// Waits between tries of a failed acknowledge, release or dead-letter: the entry's outcome is
/// known, only the queue must still hear it.
const SETTLE_RETRY_FIRST: Duration = Duration::from_millis(100);
const SETTLE_RETRY_MAX: Duration = Duration::from_secs(10);

impl Deliverer {
    /// Acknowledges, puts a retry copy on the queue, or dead-letters, as the verdict says
    /// (`attempts`: those made, this one included). A retry or DLQ copy is written first and the
    /// original acknowledged after, each step retried on its own, so a failed acknowledgement
    /// never writes a second copy.
    pub(super) async fn settle(
        &self,
        context: &QueueContext,
        delivery: &Delivery,
        metrics: &KindMetrics,
        settle: Settle,
        attempts: u32,
        shutdown: &CancellationToken,
    ) {
        let queue = &context.queue;
        let failure = match settle {
            Settle::Acknowledge => {
                if self.acknowledge(context, delivery, shutdown).await {
                    metrics.delivered.increment(1);
                    self.stats.delivered.fetch_add(1, Ordering::Relaxed);
                }
                return;
            }
            Settle::Later { wait, reason } => {
                match self.retry(context, delivery, wait, &reason, shutdown).await {
                    Settled::Done => {
                        metrics.retried.increment(1);
                        self.stats.retried.fetch_add(1, Ordering::Relaxed);
                        return;
                    }
                    Settled::Stopped => return,
                    // The queue will not take the retry copy (it cannot, by its contract, but
                    // if it did the entry would be stuck): the DLQ is the way out.
                    Settled::Refused(refusal) => Failure::retryable(format!(
                        "{reason}; and the retry copy was refused: {refusal}"
                    )),
                }
            }
            Settle::DeadLetter(failure) => failure,
        };
        tracing::warn!(attempts, reason = %failure.reason, "dead-lettering");
        // The DLQ copy counts every attempt made, this one included.
        let mut counted = delivery.clone();
        if let Ok(entry) = &mut counted.entry {
            entry.attempt = attempts;
        }
        let mut dead = dead_letter_copy(queue.spec(), &counted, &failure);
        context.destination.mark_dead_letter(&mut dead);
        // A redrive's delivery of it links back to this delivery, the one that gave up.
        trace_context::mark_retry(&mut dead.trace_context, &tracing::Span::current());
        // The DLQ is the last resort: a refusal is logged loudly and tried again, never skipped.
        loop {
            let enqueue = || queue.enqueue_dead_letter(&dead);
            let written = persist_enqueue(context, Operation::DeadLetter, shutdown, enqueue).await;
            match written {
                Settled::Done => break,
                Settled::Stopped => return,
                Settled::Refused(_) => {
                    tokio::select! {
                        () = tokio::time::sleep(SETTLE_RETRY_MAX) => {}
                        () = shutdown.cancelled() => return,
                    }
                }
            }
        }
        if let Ok(entry) = &delivery.entry {
            self.receipt(context, entry, wal_durable::Outcome::DeadLettered)
                .await;
        }
        if self.acknowledge(context, delivery, shutdown).await {
            if failure.class == ErrorClass::Retryable {
                metrics.dead_lettered_exhausted.increment(1);
            } else {
                metrics.dead_lettered_permanent.increment(1);
            }
            self.stats.dead_lettered.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Puts the retry copy on the queue, then acknowledges the original.
    pub(super) async fn retry(
        &self,
        context: &QueueContext,
        delivery: &Delivery,
        wait: Duration,
        reason: &str,
        shutdown: &CancellationToken,
    ) -> Settled {
        let Ok(entry) = &delivery.entry else {
            return Settled::Refused(QueueError::permanent(
                context.queue.backend(),
                &context.queue.spec().name,
                Operation::Release,
                "an undecodable message cannot be retried",
            ));
        };
        let deliver_at =
            entry::now_micros().saturating_add(i64::try_from(wait.as_micros()).unwrap_or(i64::MAX));
        tracing::debug!(attempt = entry.attempt, ?wait, reason, "retrying later");
        let mut copy = retry_copy(entry, deliver_at, &Failure::retryable(reason));
        context.destination.mark(&mut copy);
        // Settled inside the delivery's span: the copy's delivery links back to it.
        trace_context::mark_retry(&mut copy.trace_context, &tracing::Span::current());
        let queue = &context.queue;
        let enqueue = || queue.requeue(&copy);
        let written = persist_enqueue(context, Operation::Release, shutdown, enqueue).await;
        if !matches!(written, Settled::Done) {
            return written;
        }
        if self.acknowledge(context, delivery, shutdown).await {
            Settled::Done
        } else {
            Settled::Stopped
        }
    }

    pub(super) async fn acknowledge(
        &self,
        context: &QueueContext,
        delivery: &Delivery,
        shutdown: &CancellationToken,
    ) -> bool {
        let queue = &context.queue;
        matches!(
            persist(context, "acknowledge", shutdown, || queue
                .acknowledge(delivery))
            .await,
            Settled::Done
        )
    }
}

/// How a queue operation ended.
#[derive(Debug)]
pub(crate) enum Settled {
    Done,
    /// Shutdown came first; the entry stays unacknowledged and is received again later.
    Stopped,
    /// The queue called the failure permanent.
    Refused(QueueError),
}

/// [`persist`] for an enqueue: a retry copy, a park, a DLQ copy.
pub(crate) async fn persist_enqueue<F, Fut>(
    context: &QueueContext,
    operation: Operation,
    shutdown: &CancellationToken,
    mut enqueue: F,
) -> Settled
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<(), EnqueueError>>,
{
    let what = operation.to_string();
    persist(context, &what, shutdown, || {
        let written = enqueue();
        async move {
            written
                .await
                .map_err(|e| QueueError::from_enqueue(operation, e))
        }
    })
    .await
}

/// Runs one queue operation until it succeeds. The entry's outcome is decided; only the queue must
/// still hear it, and on Kafka an entry left unacknowledged would hold back every later commit.
/// Stops at shutdown, or when the queue calls the failure permanent (logged loudly: it breaks
/// the queue's contract).
pub(crate) async fn persist<'a, F, Fut>(
    context: &QueueContext,
    what: &str,
    shutdown: &CancellationToken,
    mut operation: F,
) -> Settled
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<(), QueueError>> + 'a,
{
    let mut wait = SETTLE_RETRY_FIRST;
    loop {
        let error = match operation().await {
            Ok(()) => return Settled::Done,
            Err(error) => error,
        };
        context.metrics.queue_errors.increment(1);
        if !error.retryable {
            tracing::error!(%error, operation = what, "the queue refused for good");
            return Settled::Refused(error);
        }
        tracing::warn!(%error, operation = what, ?wait, "queue operation failed; trying again");
        tokio::select! {
            () = tokio::time::sleep(wait) => {}
            () = shutdown.cancelled() => return Settled::Stopped,
        }
        wait = (wait * 2).min(SETTLE_RETRY_MAX);
    }
}
