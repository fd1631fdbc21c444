//! One attempt at an entry: its target's breaker asked, the payload resolved (a claim check read
//! from durable storage), the apply, and the archive write beside it.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;
use tracing::Instrument as _;
use wal_namespaces::{DurableStorageConfig, Namespace};
use wal_queue::Delivery;
use wal_queue::entry::{Body, Entry, Target as TargetSpec};

use crate::hold::Hold;
use crate::metrics::KindMetrics;
use wal_apply::TargetError;
use wal_apply::breaker::{Breaker, Pass};
use wal_runtime::trace_context;

use super::{Applied, Deliverer, QueueContext};

/// How waiting for an available target ended.
pub(super) enum Waited {
    Attempted(Applied),
    /// An operator cancelled the entry meanwhile.
    Cancelled,
    /// Shutdown came first.
    Stopped,
}

/// How often a held entry's SQS message is made invisible again (for three times as long).
const HOLD_EXTEND_EVERY: Duration = Duration::from_secs(10);

impl Deliverer {
    /// One attempt: the apply, and the archive write beside it when the namespace keeps one.
    pub(super) async fn attempt(
        &self,
        context: &QueueContext,
        entry: &Entry,
        spec: Option<&TargetSpec>,
        number: u32,
        metrics: &KindMetrics,
        span: &tracing::Span,
    ) -> Applied {
        let started = Instant::now();
        // A span of its own in a trace (the target's request is its child), else the delivery's:
        // when the delivery is not sampled, nothing would read an attempt's.
        let span = if trace_context::recorded(span) {
            tracing::info_span!(
                parent: span,
                "attempt",
                attempt = number,
                target = spec.map_or("none", |s| s.kind.as_str()),
                outcome = tracing::field::Empty,
            )
        } else {
            span.clone()
        };
        let onward = trace_context::onward(&span, &entry.trace_context);
        // A heartbeat is the platform's own, not a mutation to keep.
        let archive = archive_of(&context.namespace)
            .filter(|_| !entry.heartbeat && context.destination.archives());
        let applied = match archive {
            // The whole attempt is bounded: resolving the payload and the target (a connection,
            // a prepare) as well as the apply, so an SQS message's visibility is not outrun.
            None => {
                self.applier
                    .apply(&context.namespace, entry, spec, Some(&onward))
                    .instrument(span.clone())
                    .await
            }
            // Boxed: few namespaces archive, and every delivery's future would carry its size.
            Some(archive) => {
                Box::pin(self.apply_and_archive(context, entry, spec, (&onward, &span), archive))
                    .await
            }
        };
        metrics.apply_seconds.record(started.elapsed());
        span.record("outcome", outcome_of(&applied));
        applied
    }

    /// Attempts the entry once its target's breaker lets it, and holds it for as long as the
    /// target is unavailable: no attempt is counted and nothing is written to the queue; the
    /// queue takes no new entries meanwhile (see `hold`), and an SQS message is kept invisible.
    /// An entry cancelled while it waited is not attempted (its turn goes back unused).
    pub(super) async fn attempt_when_available<F, Fut>(
        &self,
        context: &QueueContext,
        (delivery, entry): (&Delivery, &Entry),
        breaker: &Breaker,
        attempt: F,
        shutdown: &CancellationToken,
    ) -> Waited
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
            // An operator's pause holds the entry here too: a target coming back does not end
            // it.
            if context.pause.paused() && !self.wait_while_paused(context, delivery, shutdown).await
            {
                return Waited::Stopped;
            }
            if breaker.is_open() {
                held(&mut hold);
            }
            let pass = loop {
                tokio::select! {
                    pass = breaker.admit(shutdown) => match pass {
                        Some(pass) => break pass,
                        None => return Waited::Stopped,
                    },
                    () = tokio::time::sleep(HOLD_EXTEND_EVERY) => {
                        // Keep a held SQS message from being handed out again (Kafka: no-op).
                        if let Err(error) = context.queue.extend(delivery, HOLD_EXTEND_EVERY * 3).await {
                            tracing::warn!(%error, "cannot keep a held entry invisible; it may be received again");
                        }
                    }
                }
            };
            // Paused while waiting for the breaker: the pass goes back unused (a probe's turn
            // to the next entry waiting, of this destination or another).
            if context.pause.paused() {
                breaker.unused(pass);
                continue;
            }
            // Cancelled while it was held (for hours, maybe): never attempted.
            if Self::cancelled(context, entry) {
                breaker.unused(pass);
                return Waited::Cancelled;
            }
            let applied = attempt().await;
            match (&applied, pass) {
                (Err(error @ TargetError::Unavailable { .. }), _) => {
                    breaker.unavailable(pass, &error.to_string());
                    held(&mut hold);
                }
                (Err(TargetError::Throttled { reason, wait }), _) => {
                    breaker.throttled(pass, reason, *wait);
                    held(&mut hold);
                }
                // A slow target is not an unavailable one, but a probe that timed out proves
                // nothing either: the breaker stays open, and this entry waits with the others.
                (Err(error @ TargetError::Retryable { .. }), Pass::Probe) => {
                    breaker.unavailable(pass, &error.to_string());
                }
                (Err(TargetError::Retryable { .. }), Pass::Free) => {
                    return Waited::Attempted(applied);
                }
                // The target answered: applied, or refused the entry for its own fault.
                (Ok(()) | Err(TargetError::Permanent { .. }), _) => {
                    breaker.answered();
                    return Waited::Attempted(applied);
                }
            }
        }
    }

    /// Holds the entry while an operator's pause holds its destination: no attempt is counted
    /// and nothing is written to the queue; the queue takes no new entries meanwhile (see
    /// `hold`), and an SQS message is kept invisible. False at shutdown.
    pub(super) async fn wait_while_paused(
        &self,
        context: &QueueContext,
        delivery: &Delivery,
        shutdown: &CancellationToken,
    ) -> bool {
        let _hold = context.holds.enter();
        self.stats.paused.fetch_add(1, Ordering::Relaxed);
        let resumed = context.pause.resumed(shutdown);
        tokio::pin!(resumed);
        loop {
            tokio::select! {
                resumed = &mut resumed => return resumed,
                () = tokio::time::sleep(HOLD_EXTEND_EVERY) => {
                    if let Err(error) = context.queue.extend(delivery, HOLD_EXTEND_EVERY * 3).await {
                        tracing::warn!(%error, "cannot keep a paused entry invisible; it may be received again");
                    }
                }
            }
        }
    }

    /// Applies the entry and keeps it in the namespace's archive; the attempt succeeds only when
    /// both did, so an entry is acknowledged only once it is in the archive. The archive row
    /// rides in the target's own request when the target can carry it (a cql target on the
    /// archive's cluster), else it is written beside the apply.
    async fn apply_and_archive(
        &self,
        context: &QueueContext,
        entry: &Entry,
        spec: Option<&TargetSpec>,
        trace: (&trace_context::Carrier, &tracing::Span),
        archive: (&DurableStorageConfig, Duration),
    ) -> Applied {
        // One apply timeout for the whole attempt, as when the apply and the archive write only
        // went side by side: a carried write that falls back, or a crew's first entry recording
        // the archive's start, must not hold an entry (and its SQS visibility) for longer.
        let timeout = self.applier.timeout();
        let attempt = self.apply_and_archive_unbounded(context, entry, spec, trace, archive);
        tokio::time::timeout(timeout, attempt)
            .await
            .unwrap_or_else(|_| {
                Err(TargetError::retryable(format!(
                    "applying and archiving the entry took longer than {timeout:?}"
                )))
            })
    }

    async fn apply_and_archive_unbounded(
        &self,
        context: &QueueContext,
        entry: &Entry,
        spec: Option<&TargetSpec>,
        (onward, span): (&trace_context::Carrier, &tracing::Span),
        (durable, retention): (&DurableStorageConfig, Duration),
    ) -> Applied {
        let namespace = &context.namespace;
        if self.applier.may_carry_archive(entry, spec, durable) {
            let carried = self
                .applier
                .apply_with_archive(entry, spec, Some(onward), (durable, retention))
                .instrument(span.clone());
            let (started, carried) = tokio::join!(self.archive_started(context, durable), carried);
            if let Some(applied) = carried {
                let attempt = started.and(applied);
                if attempt.is_ok() {
                    self.stats.archived_carried.fetch_add(1, Ordering::Relaxed);
                }
                return attempt;
            }
        }
        let applied = self
            .applier
            .apply(namespace, entry, spec, Some(onward))
            .instrument(span.clone());
        let archived = async {
            self.archive_started(context, durable).await?;
            self.archive(context, durable, entry, retention).await
        };
        let (applied, archived) = tokio::join!(applied, archived);
        let attempt = applied.and(archived);
        if attempt.is_ok() {
            self.stats.archived_apart.fetch_add(1, Ordering::Relaxed);
        }
        attempt
    }

    /// Before the crew's first archived entry, once: since when the archive is kept (the first
    /// time recorded stays). Replay refuses ranges that start earlier. Bounded by the attempt's
    /// timeout, which also bounds waiting for another entry's recording.
    async fn archive_started(
        &self,
        context: &QueueContext,
        durable: &DurableStorageConfig,
    ) -> Applied {
        context
            .archive_recorded
            .get_or_try_init(|| async {
                let storage = self.applier.clients().durable(durable).await?;
                storage
                    .mark_archive_started(&context.namespace.name, context.started_micros)
                    .await
                    .map(|_| ())
                    .map_err(|e| {
                        TargetError::retryable(format!("recording the archive's start: {e}"))
                    })
            })
            .await
            .copied()
    }

    /// Keeps the entry in the namespace's archive (with its payload, not a claim check, which
    /// expires sooner), within the apply timeout. A failure is retryable: the entry is tried
    /// again, the apply included, which idempotent targets take without harm.
    pub(super) async fn archive(
        &self,
        context: &QueueContext,
        durable: &DurableStorageConfig,
        entry: &Entry,
        retention: Duration,
    ) -> Applied {
        let namespace = &*context.namespace;
        let write = async {
            let storage = self.applier.clients().durable(durable).await?;
            let resolved;
            let entry = match &entry.body {
                Some(Body::ClaimCheck(check)) => {
                    // Boxed, as the applier's own read of one: a CQL read's future is large.
                    let payload =
                        Box::pin(self.applier.claim_check(namespace, entry, check)).await?;
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
        match tokio::time::timeout(self.applier.timeout(), write).await {
            Ok(archived) => archived,
            Err(_) => Err(TargetError::retryable(format!(
                "archiving the entry took longer than {:?}",
                self.applier.timeout()
            ))),
        }
    }
}

/// Where the namespace's archive is (its durable storage) and its retention, if it keeps one.
pub(super) fn archive_of(namespace: &Namespace) -> Option<(&DurableStorageConfig, Duration)> {
    let durable = namespace.durable_storage.as_ref()?;
    let archive = durable.archive.as_ref()?;
    Some((durable, archive.retention))
}

/// An attempt's outcome, as its span records it.
fn outcome_of(applied: &Applied) -> &'static str {
    match applied {
        Ok(()) => "applied",
        Err(TargetError::Retryable { .. }) => "retryable",
        Err(TargetError::Unavailable { .. }) => "unavailable",
        Err(TargetError::Throttled { .. }) => "throttled",
        Err(TargetError::Permanent { .. }) => "permanent",
    }
}
