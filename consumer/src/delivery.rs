//! One entry's way through the consumer: wait until deliver-at, resolve the payload, apply it to
//! the target, then acknowledge, release for a retry, or dead-letter. Every path ends in exactly
//! one of those (or, at shutdown, in leaving the entry to the queue), which is what makes
//! delivery at-least-once and acknowledgement never early.

use std::borrow::Cow;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use rand::Rng as _;
use tokio::sync::{OnceCell, OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::CancellationToken;
use tracing::Instrument as _;
use wal_core::durable::DurableError;
use wal_core::entry::{self, Body, ClaimCheck, Entry, Target as TargetSpec};
use wal_core::queue::{
    Backend, Delivery, Failure, Operation, Queue, QueueError, dead_letter_copy, retry_copy,
};
use wal_namespaces::Namespace;

use crate::backoff;
use crate::breaker::{Breaker, Pass};
use crate::clients::Clients;
use crate::hold::{Hold, Holds};
use crate::metrics::{KindMetrics, QueueMetrics};
use crate::target::{Mutation, TargetError, TargetRegistry};
use crate::trace;

/// How much longer than its wait and apply a held SQS message stays invisible, so no other
/// consumer receives it meanwhile.
const SQS_HOLD_MARGIN: Duration = Duration::from_secs(5);
/// Waits between tries of a failed acknowledge, release or dead-letter: the entry's outcome is
/// known, only the queue must still hear it.
const SETTLE_RETRY_FIRST: Duration = Duration::from_millis(100);
const SETTLE_RETRY_MAX: Duration = Duration::from_secs(10);
/// How often a held entry's SQS message is made invisible again (for three times as long).
const HOLD_EXTEND_EVERY: Duration = Duration::from_secs(10);

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
    /// Entries being worked on (applying or settling); the worker receives only when one is free.
    pub in_flight: Arc<Semaphore>,
    /// Entries waiting in memory for their deliver-at. A waiting entry gives its in-flight slot
    /// back, so a queue full of retries in backoff still applies the entries that are due; when
    /// these slots run out too, a waiting entry keeps its in-flight slot and the worker slows.
    pub held: Arc<Semaphore>,
    /// When the crew reading this queue started with this namespace config: every entry
    /// written since is received by it or a later crew, so an archive holds them all.
    pub started_micros: i64,
    /// Whether this crew recorded `started_micros` as its archive's start.
    pub archive_recorded: Arc<OnceCell<()>>,
    /// Entries of this queue held for an unavailable target; the worker takes none meanwhile.
    pub holds: Arc<Holds>,
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
    /// Entries given back to wait on the broker (an SQS delay step, a Kafka delay tier).
    pub parked: AtomicU64,
    /// Entries applied before their deliver-at by this consumer's clock. Must stay 0.
    pub early: AtomicU64,
    /// Entries held because their target was unavailable (each counted once).
    pub held: AtomicU64,
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
    /// `slot` is the in-flight slot the worker took for it, given back when the delivery ends.
    pub async fn deliver(
        &self,
        context: &QueueContext,
        delivery: Delivery,
        mut slot: Option<OwnedSemaphorePermit>,
        shutdown: &CancellationToken,
    ) {
        let entry = match &delivery.entry {
            Ok(entry) => entry,
            Err(codec) => {
                let failure = TargetError::permanent(format!("undecodable message: {codec}"));
                let metrics = context.metrics.kind("none");
                Box::pin(self.settle(context, &delivery, &metrics, Err(failure), shutdown)).await;
                return;
            }
        };
        if !self
            .wait_until_due(context, &delivery, entry, &mut slot, shutdown)
            .await
        {
            return;
        }
        // Boxed: a held entry's task then keeps only the waiting state above in memory (under
        // 1 KiB), not room for the apply's larger state (about 3.5 KiB), so thousands of held
        // entries stay cheap.
        Box::pin(self.apply_and_settle(context, &delivery, entry, shutdown)).await;
        drop(slot);
    }

    /// The due entry's attempt and its settling; see [`deliver`](Self::deliver).
    async fn apply_and_settle(
        &self,
        context: &QueueContext,
        delivery: &Delivery,
        entry: &Entry,
        shutdown: &CancellationToken,
    ) {
        let spec = entry.target.as_ref().or(context.default_target.as_ref());
        let kind = spec.map_or("none", |s| s.kind.as_str());
        // Kinds come from entries; only those the registry knows become metric labels.
        let metrics = context.metrics.kind(if self.targets.knows(kind) {
            kind
        } else {
            "unknown"
        });
        let continued = trace::continue_trace(&entry.trace_context);
        let span = tracing::info_span!(
            "deliver",
            namespace = %entry.namespace,
            entry_id = %entry.id,
            target = %kind,
            attempt = entry.attempt,
            trace_id = continued.as_ref().map_or("", |c| c.trace_id.as_str()),
        );
        let traceparent = continued.as_ref().map(|c| c.traceparent.as_str());
        let attempt = || self.attempt(context, entry, spec, traceparent, &metrics, &span);
        let applied = match spec.and_then(|spec| self.targets.breaker(spec)) {
            None => attempt().await,
            Some(breaker) => {
                let held =
                    self.attempt_when_available(context, delivery, &breaker, attempt, shutdown);
                match Box::pin(held).await {
                    Some(applied) => applied,
                    // Shutdown while the target was away: left to the queue, received again.
                    None => {
                        let _ = context.queue.extend(delivery, Duration::ZERO).await;
                        return;
                    }
                }
            }
        };
        if applied.is_ok() {
            let late = entry::now_micros().saturating_sub(entry.deliver_at_micros);
            metrics.lateness_seconds.record(late.max(0) as f64 / 1e6);
            // Measured after the effect, so an early one is certain: it breaks "never early".
            if late < 0 {
                context.metrics.early.increment(1);
                self.stats.early.fetch_add(1, Ordering::Relaxed);
                tracing::error!(namespace = %entry.namespace, entry_id = %entry.id, early_micros = -late, "applied before its deliver-at");
            }
        }
        self.settle(context, delivery, &metrics, applied, shutdown)
            .instrument(span)
            .await;
    }

    /// One attempt: the apply, and the archive write beside it when the namespace keeps one.
    async fn attempt(
        &self,
        context: &QueueContext,
        entry: &Entry,
        spec: Option<&TargetSpec>,
        traceparent: Option<&str>,
        metrics: &KindMetrics,
        span: &tracing::Span,
    ) -> Applied {
        let started = Instant::now();
        // The whole attempt is bounded: resolving the payload and the target (a connection, a
        // prepare) as well as the apply, so an SQS message's visibility is not outrun.
        let applied = self.apply_to(&context.namespace, entry, spec, traceparent);
        let applied = match archive_of(&context.namespace) {
            None => applied.instrument(span.clone()).await,
            // The archive is written beside the apply, and the attempt succeeds only when both
            // did: an entry is acknowledged only once it is in the archive. Boxed: few
            // namespaces archive, and every delivery's future would carry its size.
            Some((keyspace, retention)) => {
                let archived = Box::pin(self.archive(context, keyspace, entry, retention));
                let (applied, archived) = tokio::join!(applied.instrument(span.clone()), archived);
                applied.and(archived)
            }
        };
        metrics.apply_seconds.record(started.elapsed());
        applied
    }

    /// Attempts the entry once its target's breaker lets it, and holds it for as long as the
    /// target is unavailable: no attempt is counted and nothing is written to the queue; the
    /// queue takes no new entries meanwhile (see `hold`), and an SQS message is kept invisible.
    /// `None` at shutdown.
    async fn attempt_when_available<F, Fut>(
        &self,
        context: &QueueContext,
        delivery: &Delivery,
        breaker: &Breaker,
        attempt: F,
        shutdown: &CancellationToken,
    ) -> Option<Applied>
    where
        F: Fn() -> Fut,
        Fut: std::future::Future<Output = Applied>,
    {
        // Taken when the entry first waits for the target, kept until its attempt went through.
        let mut hold = None;
        let held = |hold: &mut Option<Hold>| {
            if hold.is_none() {
                *hold = Some(context.holds.enter());
                breaker.hold_entry();
                self.stats.held.fetch_add(1, Ordering::Relaxed);
            }
        };
        loop {
            if breaker.is_open() {
                held(&mut hold);
            }
            let pass = loop {
                tokio::select! {
                    pass = breaker.admit(shutdown) => break pass?,
                    () = tokio::time::sleep(HOLD_EXTEND_EVERY) => {
                        // Keep a held SQS message from being handed out again (Kafka: no-op).
                        if let Err(error) = context.queue.extend(delivery, HOLD_EXTEND_EVERY * 3).await {
                            tracing::warn!(%error, "cannot keep a held entry invisible; it may be received again");
                        }
                    }
                }
            };
            let applied = attempt().await;
            match (&applied, pass) {
                (Err(TargetError::Unavailable(reason)), _) => {
                    breaker.unavailable(pass, reason);
                    held(&mut hold);
                }
                // A slow target is not an unavailable one, but a probe that timed out proves
                // nothing either: the breaker stays open, and this entry waits with the others.
                (Err(TargetError::Retryable(reason)), Pass::Probe) => {
                    breaker.unavailable(pass, reason);
                }
                (Err(TargetError::Retryable(_)), Pass::Free) => return Some(applied),
                // The target answered: applied, or refused the entry for its own fault.
                (Ok(()) | Err(TargetError::Permanent(_)), _) => {
                    breaker.answered();
                    return Some(applied);
                }
            }
        }
    }

    /// Holds the entry until its deliver-at. Returns false when the entry left this consumer
    /// instead: parked on the broker because it is far (a copy written, then the original
    /// acknowledged), or, at shutdown, left unacknowledged for the queue to hand out again.
    async fn wait_until_due(
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
            let by = remaining + self.settings.apply_timeout + SQS_HOLD_MARGIN;
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
    async fn park(
        &self,
        context: &QueueContext,
        delivery: &Delivery,
        entry: &Entry,
        shutdown: &CancellationToken,
    ) -> bool {
        let queue = &context.queue;
        let written = persist(context, "park", shutdown, || async {
            queue
                .requeue(entry)
                .await
                .map_err(|e| QueueError::from_enqueue(Operation::Release, e))
        })
        .await;
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

    /// Applies one entry of `namespace` to its target: the payload resolved (a claim check read
    /// from the namespace's durable storage), the target made or reused, and the apply, all
    /// bounded by the apply timeout. Deliveries and walctl's replay both go through here.
    pub async fn apply_to(
        &self,
        namespace: &Namespace,
        entry: &Entry,
        spec: Option<&TargetSpec>,
        traceparent: Option<&str>,
    ) -> Applied {
        let kind = spec.map_or("unnamed", |s| s.kind.as_str());
        let attempt = self.apply(namespace, entry, spec, traceparent);
        match tokio::time::timeout(self.settings.apply_timeout, attempt).await {
            Ok(applied) => applied,
            Err(_) => Err(TargetError::retryable(format!(
                "the {kind} target did not answer within {:?}",
                self.settings.apply_timeout
            ))),
        }
    }

    async fn apply(
        &self,
        namespace: &Namespace,
        entry: &Entry,
        spec: Option<&TargetSpec>,
        traceparent: Option<&str>,
    ) -> Applied {
        let spec = spec.ok_or_else(|| {
            TargetError::permanent(
                "the entry names no target and its namespace has no default target",
            )
        })?;
        let payload = self.payload(namespace, entry).await?;
        let target = self.targets.resolve(spec).await?;
        let mutation = Mutation {
            entry,
            payload: &payload,
            traceparent,
        };
        target.apply(mutation).await
    }

    /// The entry's payload, read from durable storage when the queue carried a claim check.
    async fn payload<'e>(
        &self,
        namespace: &Namespace,
        entry: &'e Entry,
    ) -> Result<Cow<'e, [u8]>, TargetError> {
        match &entry.body {
            None => Ok(Cow::Borrowed(&[])),
            Some(Body::Payload(payload)) => Ok(Cow::Borrowed(payload)),
            // Boxed: the CQL read's future is large, and every delivery's future would carry
            // its size (and be copied with it) although few entries take this path.
            Some(Body::ClaimCheck(check)) => Box::pin(self.claim_check(namespace, entry, check))
                .await
                .map(Cow::Owned),
        }
    }

    /// Reads a claim-checked payload from the namespace's durable storage. Only the keyspace the
    /// namespace configures is read: an entry cannot make the consumer connect anywhere else.
    async fn claim_check(
        &self,
        namespace: &Namespace,
        entry: &Entry,
        check: &ClaimCheck,
    ) -> Result<Vec<u8>, TargetError> {
        let Some(durable) = &namespace.durable_storage else {
            return Err(TargetError::permanent(format!(
                "the entry's payload is claim-checked in {} but namespace '{}' has no durable_storage",
                check.table, namespace.name
            )));
        };
        let expected = format!("{}.claim_checks", durable.keyspace);
        if check.table != expected {
            return Err(TargetError::permanent(format!(
                "the entry's claim check points at {}; namespace '{}' keeps claim checks in {expected}",
                check.table, namespace.name
            )));
        }
        let storage = self.clients.durable(&durable.keyspace).await?;
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

    /// Keeps the entry in the namespace's archive (with its payload, not a claim check, which
    /// expires sooner), within the apply timeout. A failure is retryable: the entry is tried
    /// again, the apply included, which idempotent targets take without harm.
    async fn archive(
        &self,
        context: &QueueContext,
        keyspace: &str,
        entry: &Entry,
        retention: Duration,
    ) -> Applied {
        let namespace = &*context.namespace;
        let write = async {
            let storage = self.clients.durable(keyspace).await?;
            // Before the crew's first archived entry, once: since when the archive is kept (the
            // first time recorded stays). Replay refuses ranges that start earlier.
            context
                .archive_recorded
                .get_or_try_init(|| async {
                    storage
                        .mark_archive_started(&namespace.name, context.started_micros)
                        .await
                        .map(|_| ())
                        .map_err(|e| {
                            TargetError::retryable(format!("recording the archive's start: {e}"))
                        })
                })
                .await?;
            let resolved;
            let entry = match &entry.body {
                Some(Body::ClaimCheck(check)) => {
                    let payload = self.claim_check(namespace, entry, check).await?;
                    resolved = Entry {
                        body: Some(Body::Payload(payload)),
                        ..entry.clone()
                    };
                    &resolved
                }
                _ => entry,
            };
            storage
                .archive(entry, retention)
                .await
                .map_err(|e| TargetError::retryable(format!("archiving the entry: {e}")))
        };
        match tokio::time::timeout(self.settings.apply_timeout, write).await {
            Ok(archived) => archived,
            Err(_) => Err(TargetError::retryable(format!(
                "archiving the entry took longer than {:?}",
                self.settings.apply_timeout
            ))),
        }
    }

    /// Acknowledges, releases for a retry, or dead-letters, per the outcome and the namespace's
    /// retry policy. A retry or DLQ copy is written first and the original acknowledged after,
    /// each step retried on its own, so a failed acknowledgement never writes a second copy.
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
                if self.acknowledge(context, delivery, shutdown).await {
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
        let failure = match &error {
            // Unavailable reaches here only for a target without a breaker (past their bound).
            TargetError::Retryable(reason) | TargetError::Unavailable(reason)
                if attempts < policy.max_attempts =>
            {
                match self
                    .retry(context, delivery, attempts, reason, shutdown)
                    .await
                {
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
            TargetError::Retryable(reason) | TargetError::Unavailable(reason) => {
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
        let dead = dead_letter_copy(queue.spec(), &counted, &failure);
        // The DLQ is the last resort: a refusal is logged loudly and tried again, never skipped.
        loop {
            let written = persist(context, "dead-letter", shutdown, || async {
                queue
                    .enqueue_dead_letter(&dead)
                    .await
                    .map_err(|e| QueueError::from_enqueue(Operation::DeadLetter, e))
            })
            .await;
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
        if self.acknowledge(context, delivery, shutdown).await {
            if error.is_retryable() {
                metrics.dead_lettered_exhausted.increment(1);
            } else {
                metrics.dead_lettered_permanent.increment(1);
            }
            self.stats.dead_lettered.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Puts the retry copy on the queue, then acknowledges the original.
    async fn retry(
        &self,
        context: &QueueContext,
        delivery: &Delivery,
        attempts: u32,
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
        let wait = backoff::retry_wait(&context.namespace.retry, attempts, rand::rng().random());
        let deliver_at =
            entry::now_micros().saturating_add(i64::try_from(wait.as_micros()).unwrap_or(i64::MAX));
        tracing::debug!(attempts, ?wait, reason, "retrying later");
        let copy = retry_copy(entry, deliver_at, &Failure::retryable(reason));
        let queue = &context.queue;
        let written = persist(context, "release", shutdown, || async {
            queue
                .requeue(&copy)
                .await
                .map_err(|e| QueueError::from_enqueue(Operation::Release, e))
        })
        .await;
        if !matches!(written, Settled::Done) {
            return written;
        }
        if self.acknowledge(context, delivery, shutdown).await {
            Settled::Done
        } else {
            Settled::Stopped
        }
    }

    async fn acknowledge(
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

/// The keyspace and retention of the namespace's archive, if it keeps one.
fn archive_of(namespace: &Namespace) -> Option<(&str, Duration)> {
    let durable = namespace.durable_storage.as_ref()?;
    let archive = durable.archive.as_ref()?;
    Some((durable.keyspace.as_str(), archive.retention))
}

pub(crate) fn micros_until(at_micros: i64) -> Duration {
    let remaining = at_micros.saturating_sub(entry::now_micros());
    Duration::from_micros(u64::try_from(remaining).unwrap_or(0))
}
