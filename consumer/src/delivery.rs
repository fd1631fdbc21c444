//! One entry's way through the consumer: wait until deliver-at, resolve the payload, apply it to
//! the target, then acknowledge, release for a retry, or dead-letter. Every path ends in exactly
//! one of those (or, at shutdown, in leaving the entry to the queue), which is what makes
//! delivery at-least-once and acknowledgement never early.

use std::borrow::Cow;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use rand::Rng as _;
use tokio_util::sync::CancellationToken;
use tracing::Instrument as _;
use wal_core::durable::DurableError;
use wal_core::entry::{self, Body, ClaimCheck, Entry, Target as TargetSpec};
use wal_core::queue::{Backend, Delivery, Failure, Queue, QueueError};
use wal_namespaces::Namespace;

use crate::backoff;
use crate::clients::Clients;
use crate::metrics::{KindMetrics, QueueMetrics};
use crate::target::{Mutation, TargetError, TargetRegistry};
use crate::trace;

/// How long the consumer itself holds an entry whose deliver-at is near. On SQS a longer wait is
/// handed back to the queue (the message stays invisible until nearly due); Kafka has no such
/// lever, so there every wait is held (parking long delays durably is the delay queue's work).
pub const SQS_HOLD_LIMIT: Duration = Duration::from_secs(20);
/// The longest SQS keeps a message invisible.
const SQS_MAX_VISIBILITY: Duration = Duration::from_secs(12 * 3600);
/// Waits between tries of a failed acknowledge, release or dead-letter: the entry's outcome is
/// known, only the queue must still hear it.
const SETTLE_RETRY_FIRST: Duration = Duration::from_millis(100);
const SETTLE_RETRY_MAX: Duration = Duration::from_secs(10);

#[derive(Debug, Clone)]
pub struct DeliverySettings {
    /// The longest one apply may take before it counts as a retryable failure.
    pub apply_timeout: Duration,
}

/// One namespace queue, as a delivery sees it.
#[derive(Debug, Clone)]
pub struct QueueContext {
    pub namespace: Arc<Namespace>,
    pub queue: Arc<dyn Queue>,
    /// The namespace's default target, for entries that carry none.
    pub default_target: Option<TargetSpec>,
    pub metrics: Arc<QueueMetrics>,
}

#[derive(Debug)]
pub struct Deliverer {
    targets: TargetRegistry,
    clients: Arc<Clients>,
    settings: DeliverySettings,
    stats: DeliveryStats,
}

/// Totals since start, across all queues: for status pages, tests and benchmarks that run the
/// consumer in-process (the metrics carry the same counts, by namespace and kind).
#[derive(Debug, Default)]
pub struct DeliveryStats {
    pub delivered: AtomicU64,
    pub retried: AtomicU64,
    pub dead_lettered: AtomicU64,
}

/// What became of an attempt.
type Applied = Result<(), TargetError>;

impl Deliverer {
    pub fn new(targets: TargetRegistry, clients: Arc<Clients>, settings: DeliverySettings) -> Self {
        Self {
            targets,
            clients,
            settings,
            stats: DeliveryStats::default(),
        }
    }

    pub fn stats(&self) -> &DeliveryStats {
        &self.stats
    }

    pub fn targets(&self) -> &TargetRegistry {
        &self.targets
    }

    /// Takes one delivery to its end; see the module doc.
    pub async fn deliver(
        &self,
        context: &QueueContext,
        delivery: Delivery,
        shutdown: &CancellationToken,
    ) {
        let entry = match &delivery.entry {
            Ok(entry) => entry,
            Err(codec) => {
                let failure = TargetError::permanent(format!("undecodable message: {codec}"));
                let metrics = context.metrics.kind("none");
                self.settle(context, &delivery, &metrics, Err(failure), shutdown)
                    .await;
                return;
            }
        };
        if !self
            .wait_until_due(context, &delivery, entry, shutdown)
            .await
        {
            return;
        }
        let spec = entry.target.as_ref().or(context.default_target.as_ref());
        let kind = spec.map_or("none", |s| s.kind.as_str());
        let metrics = context.metrics.kind(kind);
        let continued = trace::continue_trace(&entry.trace_context);
        let span = tracing::info_span!(
            "deliver",
            namespace = %entry.namespace,
            entry_id = %entry.id,
            target = %kind,
            attempt = entry.attempt,
            trace_id = continued.as_ref().map_or("", |c| c.trace_id.as_str()),
        );
        let started = Instant::now();
        let traceparent = continued.as_ref().map(|c| c.traceparent.as_str());
        let applied = self
            .apply(entry, spec, traceparent)
            .instrument(span.clone())
            .await;
        metrics.apply_seconds.record(started.elapsed());
        if applied.is_ok() {
            let late = entry::now_micros()
                .saturating_sub(entry.deliver_at_micros)
                .max(0);
            metrics.lateness_seconds.record(late as f64 / 1e6);
        }
        self.settle(context, &delivery, &metrics, applied, shutdown)
            .instrument(span)
            .await;
    }

    /// Holds the entry until its deliver-at. Returns false when the entry was handed back to the
    /// queue instead (a long wait on SQS, or shutdown): it is then not acknowledged, and the
    /// queue hands it out again later.
    async fn wait_until_due(
        &self,
        context: &QueueContext,
        delivery: &Delivery,
        entry: &Entry,
        shutdown: &CancellationToken,
    ) -> bool {
        let remaining = micros_until(entry.deliver_at_micros);
        if remaining.is_zero() {
            return true;
        }
        let queue = &context.queue;
        if queue.backend() == Backend::Sqs {
            // Invisible until due (whole seconds, rounded down, so never late by it), then held
            // for the rest; or, if near, invisible long enough to hold and apply it.
            let by = if remaining > SQS_HOLD_LIMIT {
                Duration::from_secs(remaining.min(SQS_MAX_VISIBILITY).as_secs())
            } else {
                remaining + self.settings.apply_timeout + Duration::from_secs(5)
            };
            if let Err(error) = queue.extend(delivery, by).await {
                tracing::warn!(namespace = %entry.namespace, entry_id = %entry.id, %error, "cannot extend visibility; the entry will be received again");
                return false;
            }
            if remaining > SQS_HOLD_LIMIT {
                return false;
            }
        }
        let held = &context.metrics.held;
        held.increment(1.0);
        let due = tokio::select! {
            () = tokio::time::sleep(remaining) => true,
            () = shutdown.cancelled() => false,
        };
        held.decrement(1.0);
        if !due {
            // Visible again at once, for whichever consumer is still running.
            let _ = queue.extend(delivery, Duration::ZERO).await;
        }
        due
    }

    async fn apply(
        &self,
        entry: &Entry,
        spec: Option<&TargetSpec>,
        traceparent: Option<&str>,
    ) -> Applied {
        let spec = spec.ok_or_else(|| {
            TargetError::permanent(
                "the entry names no target and its namespace has no default target",
            )
        })?;
        let payload = self.payload(entry).await?;
        let target = self.targets.resolve(spec).await?;
        let mutation = Mutation {
            entry,
            payload: &payload,
            traceparent,
        };
        match tokio::time::timeout(self.settings.apply_timeout, target.apply(mutation)).await {
            Ok(applied) => applied,
            Err(_) => Err(TargetError::retryable(format!(
                "the {} target did not answer within {:?}",
                spec.kind, self.settings.apply_timeout
            ))),
        }
    }

    /// The entry's payload, read from durable storage when the queue carried a claim check.
    async fn payload<'e>(&self, entry: &'e Entry) -> Result<Cow<'e, [u8]>, TargetError> {
        match &entry.body {
            None => Ok(Cow::Borrowed(&[])),
            Some(Body::Payload(payload)) => Ok(Cow::Borrowed(payload)),
            // Boxed: the CQL read's future is large, and every delivery's future would carry
            // its size (and be copied with it) although few entries take this path.
            Some(Body::ClaimCheck(check)) => Box::pin(self.claim_check(entry, check))
                .await
                .map(Cow::Owned),
        }
    }

    async fn claim_check(&self, entry: &Entry, check: &ClaimCheck) -> Result<Vec<u8>, TargetError> {
        let keyspace = check.table.split('.').next().unwrap_or_default();
        let storage = self.clients.durable(keyspace).await?;
        match storage.get_claim_check(&entry.namespace, check).await {
            Ok(body) => Ok(body),
            Err(error @ (DurableError::NotFound { .. } | DurableError::SizeMismatch { .. })) => {
                Err(TargetError::permanent(format!(
                    "resolving the claim check: {error}"
                )))
            }
            Err(error) => Err(TargetError::retryable(format!(
                "resolving the claim check: {error}"
            ))),
        }
    }

    /// Acknowledges, releases for a retry, or dead-letters, per the outcome and the namespace's
    /// retry policy.
    async fn settle(
        &self,
        context: &QueueContext,
        delivery: &Delivery,
        metrics: &KindMetrics,
        applied: Applied,
        shutdown: &CancellationToken,
    ) {
        let queue = &context.queue;
        let error = match applied {
            Ok(()) => {
                if persist(context, "acknowledge", shutdown, || {
                    queue.acknowledge(delivery)
                })
                .await
                {
                    metrics.delivered.increment(1);
                    self.stats.delivered.fetch_add(1, Ordering::Relaxed);
                }
                return;
            }
            Err(error) => error,
        };
        let attempts = delivery
            .entry
            .as_ref()
            .map_or(1, |e| e.attempt.saturating_add(1));
        let policy = &context.namespace.retry;
        if error.is_retryable() && attempts < policy.max_attempts {
            let wait = backoff::retry_wait(policy, attempts, rand::rng().random());
            let deliver_at = entry::now_micros()
                .saturating_add(i64::try_from(wait.as_micros()).unwrap_or(i64::MAX));
            tracing::debug!(attempts, ?wait, %error, "retrying later");
            let failure = Failure::retryable(error.to_string());
            if persist(context, "release", shutdown, || {
                queue.release(delivery, deliver_at, &failure)
            })
            .await
            {
                metrics.retried.increment(1);
                self.stats.retried.fetch_add(1, Ordering::Relaxed);
            }
            return;
        }
        let failure = match &error {
            TargetError::Retryable(reason) => {
                Failure::retryable(format!("gave up after {attempts} attempts: {reason}"))
            }
            TargetError::Permanent(reason) => Failure::permanent(reason.clone()),
        };
        tracing::warn!(attempts, reason = %failure.reason, "dead-lettering");
        // The DLQ copy counts every attempt made, this one included.
        let mut counted = delivery.clone();
        if let Ok(entry) = &mut counted.entry {
            entry.attempt = attempts;
        }
        if persist(context, "dead-letter", shutdown, || {
            queue.dead_letter(&counted, &failure)
        })
        .await
        {
            if error.is_retryable() {
                metrics.dead_lettered_exhausted.increment(1);
            } else {
                metrics.dead_lettered_permanent.increment(1);
            }
            self.stats.dead_lettered.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// Runs a queue operation until it succeeds. The entry's outcome is decided; only the queue must
/// still hear it, and on Kafka an entry left unacknowledged would hold back every later commit.
/// Gives up only at shutdown (the entry is then received again after the restart) or on an error
/// the queue calls permanent (logged loudly: it breaks the queue contract).
async fn persist<'a, F, Fut>(
    context: &QueueContext,
    what: &str,
    shutdown: &CancellationToken,
    mut operation: F,
) -> bool
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<(), QueueError>> + 'a,
{
    let mut wait = SETTLE_RETRY_FIRST;
    loop {
        let error = match operation().await {
            Ok(()) => return true,
            Err(error) => error,
        };
        context.metrics.queue_errors.increment(1);
        if !error.retryable {
            tracing::error!(%error, operation = what, "the queue refused for good; the entry stays unacknowledged");
            return false;
        }
        tracing::warn!(%error, operation = what, ?wait, "queue operation failed; trying again");
        tokio::select! {
            () = tokio::time::sleep(wait) => {}
            () = shutdown.cancelled() => return false,
        }
        wait = (wait * 2).min(SETTLE_RETRY_MAX);
    }
}

fn micros_until(at_micros: i64) -> Duration {
    let remaining = at_micros.saturating_sub(entry::now_micros());
    Duration::from_micros(u64::try_from(remaining).unwrap_or(0))
}
