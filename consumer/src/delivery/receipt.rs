//! A destination's receipt for an entry whose write awaits its destinations
//! (`Entry::receipts`): what became of it, recorded in the namespace's durable storage, where
//! the producer that took the write looks while its caller waits.

use std::time::Duration;

use wal_durable::Outcome;
use wal_queue::entry::Entry;

use super::{Deliverer, QueueContext};

/// The longest a receipt's write may hold up its entry's acknowledgement. A receipt that is
/// not written leaves the caller told "pending", never a wrong answer.
const RECEIPT_TIMEOUT: Duration = Duration::from_secs(2);

impl Deliverer {
    /// Records what this destination did with `entry`, when its write asked for receipts.
    pub(super) async fn receipt(&self, context: &QueueContext, entry: &Entry, outcome: Outcome) {
        if !entry.receipts {
            return;
        }
        let Some(durable) = context.namespace.durable_storage.as_ref() else {
            return;
        };
        let destination = context.destination.name();
        let clients = self.applier.shared_clients();
        let (durable, namespace, id) = (durable.clone(), entry.namespace.clone(), entry.id.clone());
        let named = destination.clone();
        // Spawned: the acknowledgement waits RECEIPT_TIMEOUT at most, the receipt does not. The
        // first connection to a keyspace checks its schema, which a busy cluster can take
        // longer than that for; cancelled with the wait, it would start over at every receipt
        // and none would ever be written.
        let record = tokio::spawn(async move {
            let storage = clients.durable(&durable).await.map_err(|e| e.to_string())?;
            storage
                .record_receipt(&namespace, &id, &named, outcome)
                .await
                .map_err(|e| e.to_string())
        });
        let failed = match tokio::time::timeout(RECEIPT_TIMEOUT, record).await {
            Ok(Ok(Ok(()))) => return,
            Ok(Ok(Err(error))) => error,
            Ok(Err(task)) => task.to_string(),
            Err(_) => {
                format!("took longer than {RECEIPT_TIMEOUT:?} (it is still written when it can be)")
            }
        };
        tracing::warn!(namespace = %entry.namespace, entry_id = %entry.id, %destination, outcome = outcome.name(), error = %failed, "recording the entry's receipt failed; its writer is told it is pending");
    }
}
