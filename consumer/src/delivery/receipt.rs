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
        let record = async {
            let storage = self
                .applier
                .clients()
                .durable(durable)
                .await
                .map_err(|e| e.to_string())?;
            storage
                .record_receipt(&entry.namespace, &entry.id, &destination, outcome)
                .await
                .map_err(|e| e.to_string())
        };
        let failed = match tokio::time::timeout(RECEIPT_TIMEOUT, record).await {
            Ok(Ok(())) => return,
            Ok(Err(error)) => error,
            Err(_) => format!("took longer than {RECEIPT_TIMEOUT:?}"),
        };
        tracing::warn!(namespace = %entry.namespace, entry_id = %entry.id, %destination, outcome = outcome.name(), error = %failed, "recording the entry's receipt failed; its writer is told it is pending");
    }
}
