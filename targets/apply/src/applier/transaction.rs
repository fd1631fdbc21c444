//! Applying a two-phase write: the consumer takes a transaction's commit marker from the queue,
//! reads the staged items from the namespace's durable storage in sequence order, a page at a
//! time, and applies each to its own target (several at once where the target converges in any
//! order: `items.rs`).
//!
//! Progress is recorded in the transaction's row after each page and at a failure, so a retry,
//! a redrive or a restart resumes at the first item not known to be applied (an item may be
//! applied again after a crash mid-page: delivery is at least once, as for every entry). A
//! marker that finds fewer items than its count fails retryably instead of applying a part;
//! the marker's outcome is the deliverer's to act on (retry with backoff, or the DLQ).
//!
//! Each item is applied as an entry of its own: id `<transaction id>/<sequence>`, original
//! write time the commit's plus the sequence in microseconds, so CQL rows written by later items
//! of one transaction win over earlier ones (USING TIMESTAMP), however often a page is applied
//! again.

use std::sync::Arc;
use wal_runtime::trace_context::Carrier;

use wal_durable::{DurableStorage, Txn, TxnState, staging_keep};
use wal_namespaces::Namespace;
use wal_queue::entry::{Entry, TransactionMarker};

use super::Applier;
use super::items::Items;
use crate::TargetError;

/// How long an apply holds a transaction without recording progress; a consumer that died
/// mid-apply holds it back this long.
const LEASE: std::time::Duration = std::time::Duration::from_secs(30);

/// How often an attempt waiting for another's lease tries to take it.
const CLAIM_EVERY: std::time::Duration = std::time::Duration::from_secs(1);

fn lease_until() -> i64 {
    wal_queue::entry::now_micros().saturating_add(LEASE.as_micros() as i64)
}

/// Items applied between two progress records.
const PROGRESS_EVERY: u64 = wal_durable::ITEM_PAGE as u64;

impl Applier {
    /// Applies every item of the transaction `marker` commits, from where an earlier attempt
    /// stopped.
    pub async fn apply_transaction(
        &self,
        namespace: &Namespace,
        marker_entry: &Entry,
        marker: &TransactionMarker,
        trace: Option<&Carrier>,
    ) -> Result<(), TargetError> {
        let id = marker.transaction_id.as_str();
        let (storage, txn) = self.staged(namespace, id).await?;
        if txn.state == TxnState::Applied {
            // A second marker (a commit retried after UNKNOWN) or a redrive of an applied one.
            return Ok(());
        }
        if !txn.state.committed() {
            return Err(TargetError::permanent(format!(
                "transaction {id} is {}, not committed; its marker is not applied",
                txn.state.name()
            )));
        }
        let keep = staging_keep(namespace);
        // One apply at a time: a second marker (a commit sent again, a redelivery) waits for
        // the lease and finds the transaction applied.
        let applier = wal_queue::entry::new_entry_id();
        if !claim(&storage, &namespace.name, id, &applier, keep).await? {
            return Ok(());
        }
        // Read again under the lease: the attempt that held it before may have got further.
        let txn = storage
            .transaction(&namespace.name, id)
            .await
            .map_err(|e| TargetError::retryable(format!("transaction {id}: {e}")))?
            .unwrap_or(txn);
        let mut progress = Progress {
            storage: &storage,
            namespace: &namespace.name,
            id,
            applier: &applier,
            keep,
            applied_through: txn.applied_through,
            recorded: txn.applied_through,
            recorded_at: std::time::Instant::now(),
        };
        let items = Items {
            namespace,
            marker_entry,
            marker,
            trace,
        };
        self.apply_items(&items, &mut progress).await?;
        let finished = storage
            .finish_transaction(
                &namespace.name,
                id,
                &applier,
                TxnState::Applied,
                marker.item_count,
                None,
                keep,
            )
            .await
            .map_err(|e| TargetError::retryable(format!("transaction {id}: {e}")))?;
        if !finished {
            return Err(TargetError::retryable(format!(
                "transaction {id}: its lease ran out before the apply finished; another attempt finishes it"
            )));
        }
        let lag = wal_queue::entry::now_micros()
            .saturating_sub(marker_entry.original_write_time_micros)
            .max(0);
        crate::metrics::transaction_applied(
            &namespace.name,
            marker.item_count.saturating_sub(txn.applied_through),
            std::time::Duration::from_micros(lag as u64),
        );
        Ok(())
    }
}

/// Takes the transaction's apply lease for `applier`: false when another attempt applied it
/// meanwhile. Waited for in place when another attempt holds the lease: a consumer killed
/// mid-apply holds it until it runs out, and retrying with the namespace's backoff instead could
/// spend every attempt before then and dead-letter a healthy transaction.
async fn claim(
    storage: &DurableStorage,
    namespace: &str,
    id: &str,
    applier: &str,
    keep: std::time::Duration,
) -> Result<bool, TargetError> {
    let failed =
        |e: wal_durable::DurableError| TargetError::retryable(format!("transaction {id}: {e}"));
    let waiting_since = std::time::Instant::now();
    loop {
        if storage
            .claim_apply(namespace, id, applier, lease_until(), keep)
            .await
            .map_err(failed)?
        {
            return Ok(true);
        }
        // Applied by another attempt since it was read, or being applied now.
        let now = storage.transaction(namespace, id).await.map_err(failed)?;
        if now.is_some_and(|t| t.state == TxnState::Applied) {
            return Ok(false);
        }
        if waiting_since.elapsed() > LEASE + CLAIM_EVERY {
            return Err(TargetError::retryable(format!(
                "transaction {id} is being applied by another attempt, which kept its lease for {} s",
                LEASE.as_secs()
            )));
        }
        tokio::time::sleep(CLAIM_EVERY).await;
    }
}

impl Applier {
    /// The namespace's staging store and the transaction's row there.
    pub(super) async fn staged(
        &self,
        namespace: &Namespace,
        id: &str,
    ) -> Result<(Arc<DurableStorage>, Txn), TargetError> {
        let Some(durable) = &namespace.durable_storage else {
            return Err(TargetError::permanent(format!(
                "transaction {id}: namespace '{}' has no durable_storage to read its items from",
                namespace.name
            )));
        };
        let storage = self.clients().durable(durable).await?;
        let txn = storage
            .transaction(&namespace.name, id)
            .await
            .map_err(|e| TargetError::retryable(format!("transaction {id}: {e}")))?
            .ok_or_else(|| {
                TargetError::permanent(format!(
                    "transaction {id}: its staging is gone from keyspace '{}' (kept for the transaction's lifetime, the marker's retry horizon and the DLQ's retention; or never staged there)",
                    durable.keyspace
                ))
            })?;
        Ok((storage, txn))
    }
}

/// How far a transaction's apply got, and what of it is recorded.
pub(super) struct Progress<'a> {
    pub(super) storage: &'a DurableStorage,
    namespace: &'a str,
    id: &'a str,
    applier: &'a str,
    keep: std::time::Duration,
    /// Items applied from the first: every item before this one is.
    pub(super) applied_through: u64,
    recorded: u64,
    recorded_at: std::time::Instant,
}

impl Progress<'_> {
    /// Whether to record now: by count, and by time so the lease never runs out while items
    /// are slow.
    pub(super) fn due(&self) -> bool {
        self.applied_through - self.recorded >= PROGRESS_EVERY
            || self.recorded_at.elapsed() >= LEASE / 3
    }

    /// Records the progress and extends the lease; an apply whose lease was taken over stops.
    pub(super) async fn record(&mut self) -> Result<(), TargetError> {
        let id = self.id;
        let held = self
            .storage
            .record_progress(
                self.namespace,
                id,
                self.applier,
                self.applied_through,
                lease_until(),
                self.keep,
            )
            .await
            .map_err(|e| TargetError::retryable(format!("transaction {id}: {e}")))?;
        if !held {
            return Err(TargetError::retryable(format!(
                "transaction {id}: its lease ran out and another attempt took it over"
            )));
        }
        self.recorded = self.applied_through;
        self.recorded_at = std::time::Instant::now();
        Ok(())
    }

    /// The error a failure at the current item ends the attempt with, naming how far it got;
    /// the progress is recorded first where the storage answers.
    pub(super) async fn failed(&mut self, error: TargetError) -> TargetError {
        if self.applied_through > self.recorded {
            // Best effort: unrecorded, the next attempt re-applies from the last record.
            let _ = self.record().await;
        }
        let error = self.failed_now(error);
        if let TargetError::Permanent { .. } = &error {
            let reason = error.to_string();
            // A permanent failure sends the marker to the DLQ: the row says so, and why, until
            // a redrive claims it again. This also gives the lease back.
            let _ = self
                .storage
                .finish_transaction(
                    self.namespace,
                    self.id,
                    self.applier,
                    TxnState::DeadLettered,
                    self.recorded,
                    Some(&reason),
                    self.keep,
                )
                .await;
            return error;
        }
        // Best effort too: unreleased, the next attempt waits for the lease to run out.
        let _ = self
            .storage
            .release_apply(self.namespace, self.id, self.applier, self.keep)
            .await;
        error
    }

    fn failed_now(&self, error: TargetError) -> TargetError {
        let at = self.applied_through;
        let id = self.id;
        error.map_reason(|reason| {
            format!("transaction {id}: applied items 0..{at}, stopped at item {at}: {reason}")
        })
    }
}
