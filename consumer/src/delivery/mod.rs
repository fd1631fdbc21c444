//! One entry's way through the consumer: wait until deliver-at, resolve the payload, apply it to
//! the target, then acknowledge, release for a retry, or dead-letter. Every path ends in exactly
//! one of those (or, at shutdown, in leaving the entry to the queue), which is what makes
//! delivery at-least-once and acknowledgement never early.
//!
//! The flow is here; its steps each have a file: [`wait`] (until deliver-at: held in memory or
//! parked on the broker), [`apply`] (one attempt: breaker, the [`Applier`]'s apply, archive) and
//! [`settle`] (acknowledged, retried or dead-lettered, persisted until the queue heard it).

mod apply;
mod cancel;
mod receipt;
mod settle;
mod verdict;
mod wait;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use rand::Rng as _;
use tokio::sync::{OnceCell, OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::CancellationToken;
use tracing::Instrument as _;
use wal_namespaces::Namespace;
use wal_queue::entry::{self, Body, Entry, Target as TargetSpec};
use wal_queue::{Delivery, Failure, Queue};

use crate::destination::Destination;
use crate::hold::Holds;
use crate::metrics::{KindMetrics, QueueMetrics};
use crate::pause::PauseSwitch;
use wal_apply::applier::Applier;
use wal_apply::{TargetError, TargetRegistry};
use wal_runtime::trace_context;

use self::apply::Waited;
use self::verdict::{Settle, Verdict, verdict};

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
    /// What the queue is read for: where its entries are applied, and how (see `destination`).
    pub destination: Arc<Destination>,
    /// Whether an operator paused this destination (see `pause`).
    pub pause: PauseSwitch,
    /// The pauses and cancellations in force; the entries cancelled are skipped (`cancel`).
    pub directives: tokio::sync::watch::Receiver<wal_namespaces::feed::Directives>,
}

#[derive(Debug)]
pub struct Deliverer {
    applier: Applier,
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
    /// Entries held because an operator paused their destination (counted each time one waits).
    pub paused: AtomicU64,
    /// Entries an operator cancelled, acknowledged without being applied.
    pub cancelled: AtomicU64,
    /// Attempts of archiving namespaces' entries that succeeded with the archive row written in
    /// the target's own request.
    pub archived_carried: AtomicU64,
    /// Attempts of archiving namespaces' entries that succeeded with the archive row written
    /// apart, by the archive writer (or not at all: an entry past its retention).
    pub archived_apart: AtomicU64,
}

/// What became of an attempt.
type Applied = Result<(), TargetError>;

impl Deliverer {
    pub fn new(applier: Applier) -> Self {
        Self {
            applier,
            stats: DeliveryStats::default(),
        }
    }

    pub fn stats(&self) -> &DeliveryStats {
        &self.stats
    }

    pub fn targets(&self) -> &TargetRegistry {
        self.applier.targets()
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
            // The namespace's own target's reader dead-letters it (or each region's): one DLQ
            // copy, not one more per store.
            Err(codec) if context.destination.store().is_some() => {
                tracing::debug!(%codec, "undecodable message; left to the namespace's own reader");
                self.acknowledge(context, &delivery, shutdown).await;
                return;
            }
            Err(codec) => {
                let failure = Failure::permanent(format!("undecodable message: {codec}"));
                let metrics = context.metrics.kind("none");
                let settle = Settle::DeadLetter(failure);
                Box::pin(self.settle(context, &delivery, &metrics, settle, 1, shutdown)).await;
                return;
            }
        };
        if !context.destination.takes(entry) {
            // A copy for another destination alone (a redriven DLQ copy): that destination's
            // reader applies it; here it is done.
            tracing::debug!(namespace = %entry.namespace, entry_id = %entry.id, destination = %context.destination.name(), for_destination = %entry.destination, for_region = %entry.destination_region, "not for this destination");
            self.acknowledge(context, &delivery, shutdown).await;
            return;
        }
        // Cancelled before it is due: ended now rather than moved on through the delay tiers.
        if Self::cancelled(context, entry) {
            self.skip_cancelled(context, &delivery, entry, shutdown)
                .await;
            return;
        }
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
        // A transaction's commit marker has no target of its own: each item names its own,
        // and the marker is retried as a whole (see `transaction`).
        let marker = matches!(entry.body, Some(Body::Transaction(_)));
        let spec = if marker {
            None
        } else {
            context
                .destination
                .target(entry, context.default_target.as_ref())
        };
        let kind = spec.map_or("none", |s| s.kind.as_str());
        let metrics = self.kind_metrics(context, marker, kind);
        let span = deliver_span(entry, kind);
        // Attempts counted from the entry's, in place ones included, for each attempt's span.
        let tried = std::sync::atomic::AtomicU32::new(entry.attempt);
        let attempt = || {
            let number = tried.fetch_add(1, Ordering::Relaxed).saturating_add(1);
            self.attempt(context, entry, spec, number, &metrics, &span)
        };
        let breaker = spec.and_then(|spec| self.targets().breaker(spec));
        let in_place = context.destination.retries_in_place();
        let policy = &context.namespace.retry;
        let mut attempts = entry.attempt;
        let settle = loop {
            let turn = self.turn(
                context,
                (delivery, entry),
                breaker.as_ref(),
                &attempt,
                shutdown,
            );
            let Some(applied) = Box::pin(turn).await else {
                return;
            };
            attempts = attempts.saturating_add(1);
            let unit = || rand::rng().random();
            match verdict(&applied, attempts, policy, in_place, unit) {
                Verdict::Settle(settle) => break settle,
                Verdict::InPlace { wait, reason } => {
                    metrics.retried.increment(1);
                    self.stats.retried.fetch_add(1, Ordering::Relaxed);
                    tracing::debug!(parent: &span, attempts, ?wait, %reason, "retrying in place");
                    tokio::select! {
                        () = tokio::time::sleep(wait) => {}
                        () = shutdown.cancelled() => {
                            let _ = context.queue.extend(delivery, Duration::ZERO).await;
                            return;
                        }
                    }
                }
            }
        };
        if settle == Settle::Acknowledge {
            Self::applied_though_cancelled(context, entry);
            self.applied(context, entry, &metrics);
            self.receipt(context, entry, wal_durable::Outcome::Applied)
                .await;
        }
        self.settle(context, delivery, &metrics, settle, attempts, shutdown)
            .instrument(span)
            .await;
    }

    /// One attempt's turn: the entry's cancellation and its destination's pause looked at
    /// first, and again after any wait, then the attempt (through the target's breaker when it
    /// has one). `None`: the delivery ended here, skipped as cancelled or, at shutdown, left to
    /// the queue to be received again.
    async fn turn<F, Fut>(
        &self,
        context: &QueueContext,
        (delivery, entry): (&Delivery, &Entry),
        breaker: Option<&Arc<wal_apply::breaker::Breaker>>,
        attempt: &F,
        shutdown: &CancellationToken,
    ) -> Option<Applied>
    where
        F: Fn() -> Fut,
        Fut: std::future::Future<Output = Applied>,
    {
        loop {
            if Self::cancelled(context, entry) {
                self.skip_cancelled(context, delivery, entry, shutdown)
                    .await;
                return None;
            }
            if !context.pause.paused() {
                break;
            }
            if !Box::pin(self.wait_while_paused(context, delivery, shutdown)).await {
                let _ = context.queue.extend(delivery, Duration::ZERO).await;
                return None;
            }
        }
        let Some(breaker) = breaker else {
            return Some(attempt().await);
        };
        let held =
            self.attempt_when_available(context, (delivery, entry), breaker, attempt, shutdown);
        match Box::pin(held).await {
            Waited::Attempted(applied) => Some(applied),
            Waited::Cancelled => {
                self.skip_cancelled(context, delivery, entry, shutdown)
                    .await;
                None
            }
            // Shutdown while the target was away: left to the queue, received again.
            Waited::Stopped => {
                let _ = context.queue.extend(delivery, Duration::ZERO).await;
                None
            }
        }
    }

    /// The metric handles of an entry of `kind` (or a transaction's `marker`). Kinds come from
    /// entries; only those the registry knows become labels.
    fn kind_metrics(&self, context: &QueueContext, marker: bool, kind: &str) -> Arc<KindMetrics> {
        context.metrics.kind(if marker {
            "transaction"
        } else if self.targets().knows(kind) {
            kind
        } else {
            "unknown"
        })
    }

    /// Records `entry` applied: with its destination, and how late it was after its deliver-at.
    fn applied(&self, context: &QueueContext, entry: &Entry, metrics: &KindMetrics) {
        context.destination.applied(entry);
        let late = entry::now_micros().saturating_sub(entry.deliver_at_micros);
        metrics.lateness_seconds.record(late.max(0) as f64 / 1e6);
        // Measured after the effect, so an early one is certain: it breaks "never early".
        if late < 0 {
            context.metrics.early.increment(1);
            self.stats.early.fetch_add(1, Ordering::Relaxed);
            tracing::error!(namespace = %entry.namespace, entry_id = %entry.id, early_micros = -late, "applied before its deliver-at");
        }
    }
}

pub(crate) fn micros_until(at_micros: i64) -> Duration {
    let remaining = at_micros.saturating_sub(entry::now_micros());
    Duration::from_micros(u64::try_from(remaining).unwrap_or(0))
}

pub(crate) use settle::{Settled, persist, persist_enqueue};

/// A delivery of `entry` to a target of `kind`, as a span: a child of the producer's call when
/// spans are exported, so the write's trace holds however many deliveries it takes.
fn deliver_span(entry: &Entry, kind: &str) -> tracing::Span {
    let trace_id = trace_context::trace_id(&entry.trace_context);
    let span = tracing::info_span!(
        "deliver",
        namespace = %entry.namespace,
        entry_id = %entry.id,
        target = %kind,
        attempt = entry.attempt,
        trace_id = trace_id.as_deref().unwrap_or_default(),
    );
    trace_context::follow(&span, &entry.trace_context);
    trace_context::link_retry(&span, &entry.trace_context);
    span
}
