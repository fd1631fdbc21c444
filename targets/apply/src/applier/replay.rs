//! A committed transaction applied again for `walctl replay`, from its first item.

use futures::StreamExt as _;
use wal_namespaces::Namespace;
use wal_queue::entry::{Entry, Target as TargetSpec, TransactionMarker};

use super::Applier;
use super::items::item_entry;
use crate::TargetError;

impl Applier {
    /// Applies every item of a committed transaction again, from its first, for `walctl
    /// replay`: the way back after corruption re-applies what the transaction wrote, whether or
    /// not it was applied before. No lease and no progress are recorded (a replay keeps its own
    /// checkpoint), and the transaction's state is left as it is. `over` sends every item to
    /// the replay's own target instead of the item's. Staging that is gone (expired after its
    /// retention) or holds fewer items than the marker counts fails permanently, naming what
    /// is missing: a replay never applies a part silently.
    pub async fn replay_transaction(
        &self,
        namespace: &Namespace,
        marker_entry: &Entry,
        marker: &TransactionMarker,
        over: Option<&TargetSpec>,
    ) -> Result<(), TargetError> {
        let id = marker.transaction_id.as_str();
        let (storage, txn) = self.staged(namespace, id).await?;
        let read_failed =
            |e: wal_durable::DurableError| TargetError::retryable(format!("transaction {id}: {e}"));
        if !txn.state.committed() {
            return Err(TargetError::permanent(format!(
                "transaction {id} is {}, not committed; a replay applies committed transactions only",
                txn.state.name()
            )));
        }
        let mut items = storage
            .items_from(&namespace.name, id, 0)
            .await
            .map_err(read_failed)?;
        let mut next = 0;
        while let Some(item) = items.next().await {
            let item = item.map_err(read_failed)?;
            // Past the count, or a gap: the check below names where.
            if item.sequence >= marker.item_count || item.sequence != next {
                break;
            }
            let entry = item_entry(marker_entry, id, &item);
            let spec = over.or(entry.target.as_ref());
            self.apply(namespace, &entry, spec, None)
                .await
                .map_err(|error| {
                    error.map_reason(|reason| {
                        format!("transaction {id}: replayed items 0..{next}, stopped at item {next}: {reason}")
                    })
                })?;
            next += 1;
        }
        if next < marker.item_count {
            return Err(TargetError::permanent(format!(
                "transaction {id}: item {next} of {} is gone from its staging (expired?); replayed items 0..{next} only",
                marker.item_count
            )));
        }
        Ok(())
    }
}
