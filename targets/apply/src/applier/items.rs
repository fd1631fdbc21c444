//! A committed transaction's items applied in sequence order: those whose target converges in
//! any order (CQL: each item's writes carry its own timestamp, a later item's later) up to
//! [`WINDOW`] at once, any other alone, with nothing before it still in flight.
//!
//! Progress counts only the contiguous prefix applied: the window answers in sequence order, so
//! an item counts once it and every item before it are applied. A failure ends the attempt at
//! the first item that failed; items after it that landed meanwhile are applied again by the
//! next attempt (a retry, or a redrive of a marker dead-lettered there), which their timestamps
//! make harmless, as for a page applied again after a crash.

use std::future::Future;

use futures::StreamExt as _;
use futures::stream::FuturesOrdered;
use tracing::Instrument as _;
use wal_durable::StagedItem;
use wal_namespaces::Namespace;
use wal_queue::entry::{Body, Entry, Target as TargetSpec, TransactionMarker};
use wal_runtime::trace_context::{self, Carrier};

use super::Applier;
use super::transaction::Progress;
use crate::TargetError;

/// Items in flight at once: enough to keep a CQL cluster's replicas busy with one transaction,
/// few enough that a failure re-applies little.
const WINDOW: usize = 32;

/// What a transaction's items are applied as: parts of the marker's entry, in its trace.
#[derive(Clone, Copy)]
pub(super) struct Items<'a> {
    pub(super) namespace: &'a Namespace,
    pub(super) marker_entry: &'a Entry,
    pub(super) marker: &'a TransactionMarker,
    pub(super) trace: Option<&'a Carrier>,
}

impl Applier {
    /// Applies the staged items from `progress.applied_through` on, recording progress as it
    /// goes; a failure at an item is recorded with how far it got. The marker never applies a
    /// part.
    pub(super) async fn apply_items(
        &self,
        items: &Items<'_>,
        progress: &mut Progress<'_>,
    ) -> Result<(), TargetError> {
        let Items {
            namespace,
            marker_entry,
            marker,
            trace,
        } = *items;
        let id = marker.transaction_id.as_str();
        let mut staged = match progress
            .storage
            .items_from(&namespace.name, id, progress.applied_through)
            .await
        {
            Ok(staged) => staged,
            Err(e) => return Err(progress.failed(TargetError::retryable(e)).await),
        };
        let mut window = FuturesOrdered::new();
        while let Some(item) = staged.next().await {
            let item = match item {
                Ok(item) => item,
                Err(e) => {
                    settle(&mut window, progress, 0).await?;
                    return Err(progress.failed(TargetError::retryable(e)).await);
                }
            };
            if item.sequence >= marker.item_count {
                break;
            }
            // Every item before the window's is applied; the window holds the next ones.
            let next = progress.applied_through + window.len() as u64;
            if item.sequence != next {
                settle(&mut window, progress, 0).await?;
                let missing = TargetError::retryable(format!(
                    "item {next} of {} is not staged (yet); the commit saw it, so it is retried",
                    marker.item_count
                ));
                return Err(progress.failed(missing).await);
            }
            let any_order =
                wal_targets::Kind::from_name(&item.target_kind).is_ok_and(|kind| kind.any_order());
            // An item applied in order waits for every item before it, and holds back the rest.
            settle(
                &mut window,
                progress,
                if any_order { WINDOW - 1 } else { 0 },
            )
            .await?;
            let entry = item_entry(marker_entry, id, &item);
            let sequence = item.sequence;
            window.push_back(
                async move { self.apply_item(namespace, &entry, sequence, trace).await },
            );
            if !any_order {
                settle(&mut window, progress, 0).await?;
            }
        }
        settle(&mut window, progress, 0).await?;
        if progress.applied_through < marker.item_count {
            let part = TargetError::retryable(format!(
                "found items up to {} of {}; a marker never applies a part",
                progress.applied_through, marker.item_count
            ));
            return Err(progress.failed(part).await);
        }
        Ok(())
    }

    /// One item applied, as a span of the marker's attempt when spans are exported (the
    /// item's target gets that span's trace context): a commit's trace shows every item.
    async fn apply_item(
        &self,
        namespace: &Namespace,
        entry: &Entry,
        sequence: u64,
        trace: Option<&Carrier>,
    ) -> Result<(), TargetError> {
        if !wal_runtime::process::exporting() {
            return self
                .apply(namespace, entry, entry.target.as_ref(), trace)
                .await;
        }
        let span = tracing::info_span!("apply_item", sequence, outcome = tracing::field::Empty);
        let onward = trace_context::onward(&span, trace.unwrap_or(&Carrier::new()));
        let applied = self
            .apply(namespace, entry, entry.target.as_ref(), Some(&onward))
            .instrument(span.clone())
            .await;
        span.record(
            "outcome",
            if applied.is_ok() { "applied" } else { "failed" },
        );
        applied
    }
}

/// Waits for the window's oldest items until at most `room` are in flight, counting each one
/// applied. The first failure ends the attempt: the items after it are dropped mid-flight.
async fn settle<F>(
    window: &mut FuturesOrdered<F>,
    progress: &mut Progress<'_>,
    room: usize,
) -> Result<(), TargetError>
where
    F: Future<Output = Result<(), TargetError>>,
{
    while window.len() > room {
        let Some(applied) = window.next().await else {
            break;
        };
        if let Err(error) = applied {
            // Items after it that were in flight may have landed: the reason says so, since a
            // marker dead-lettered here leaves them in place until a redrive applies them again.
            let after = window.len();
            *window = FuturesOrdered::new();
            let error = as_the_markers(error);
            let error = if after == 0 {
                error
            } else {
                error.map_reason(|reason| {
                    format!("{reason} ({after} items after it were in flight and may have landed)")
                })
            };
            return Err(progress.failed(error).await);
        }
        progress.applied_through += 1;
        if progress.due() {
            progress.record().await?;
        }
    }
    Ok(())
}

/// An item's failure as its marker's: the marker has no breaker of its own (its items' targets
/// differ), so an item's target that is away makes the whole marker wait its backoff and come
/// back.
fn as_the_markers(error: TargetError) -> TargetError {
    match error {
        TargetError::Unavailable { reason, cause } => TargetError::Retryable { reason, cause },
        throttled @ TargetError::Throttled { .. } => TargetError::retryable(throttled.reason()),
        other => other,
    }
}

/// One staged item as the entry its target applies.
pub(super) fn item_entry(marker: &Entry, id: &str, item: &StagedItem) -> Entry {
    Entry {
        id: format!("{id}/{}", item.sequence),
        key: id.to_owned(),
        body: Some(Body::Payload(item.payload.clone())),
        target: Some(TargetSpec {
            kind: item.target_kind.clone(),
            settings_json: item.target_settings.clone(),
        }),
        original_write_time_micros: marker
            .original_write_time_micros
            .saturating_add(item.sequence as i64),
        trace_context: Default::default(),
        ..marker.clone()
    }
}
