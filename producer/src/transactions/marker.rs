//! A transaction's commit marker: the one entry its commit puts on the namespace's queue.

use std::sync::Arc;

use tonic::Status;
use wal_durable::{DurableStorage, Txn, TxnState, staging_keep};
use wal_proto::v1::WriteToLogResponse;
use wal_queue::entry::{Body, ENTRY_VERSION, Entry, TransactionMarker, now_micros};

use wal_runtime::trace_context::Carrier;

use crate::registry::NamespaceRuntime;
use crate::service::WriteService;

/// Puts the committing transaction `id`'s marker on its namespace's queue, answering as a
/// commit does. A commit calls it, and the producers' sweep of transactions left committing
/// ([`crate::resend`]).
pub(crate) async fn queue_marker(
    writes: &WriteService,
    runtime: &NamespaceRuntime,
    durable: &Arc<DurableStorage>,
    id: &str,
    item_count: u64,
    txn: &Txn,
    trace: Carrier,
) -> Result<WriteToLogResponse, Status> {
    let mut marker = marker(runtime, id, item_count, txn, writes.region());
    // The commit's trace goes on with the marker: the consumer applies its items in it.
    marker.trace_context = trace;
    // From `committing` on, a transaction is never opened again, whatever this send's
    // answer: another commit call (a client retrying past its own deadline) may have
    // queued a marker meanwhile, and reopening would leave that marker a transaction the
    // consumer refuses to apply. A marker that could not be queued is sent again by the
    // next commit of the same id, or by the sweep.
    let mut answer = match writes.write_entry(runtime, marker).await {
        Ok(answer) => answer,
        Err(refused) => {
            return Err(Status::new(
                refused.code(),
                format!(
                    "{}; transaction '{id}' stays committed: commit it again to queue its marker",
                    refused.message()
                ),
            ));
        }
    };
    match answer.durable() {
        wal_proto::v1::Trilean::True => {
            // Takes it out of the sweep's listing (the consumer applies a committing one as
            // well), so the answer does not wait for its compare-and-set: if it fails, the
            // sweep sends the marker once more, which the consumer acknowledges.
            let keep = staging_keep(&runtime.config);
            let (durable, name, id) = (
                Arc::clone(durable),
                runtime.config.name.clone(),
                id.to_owned(),
            );
            tokio::spawn(async move {
                let (from, to) = (TxnState::Committing, TxnState::Committed);
                let _ = durable
                    .move_transaction(&name, &id, from, to, None, keep)
                    .await;
            });
        }
        wal_proto::v1::Trilean::False => {
            // Not this marker, but perhaps another call's: not FALSE for the transaction.
            answer.durable = wal_proto::v1::Trilean::Unknown as i32;
            answer.message = format!(
                "{}; transaction '{id}' stays committed: commit it again to queue its marker",
                answer.message
            );
        }
        _ => {}
    }
    Ok(answer)
}

/// The commit marker's entry id: one per transaction, so a marker sent twice is one entry.
pub(super) fn marker_id(id: &str) -> String {
    format!("txn:{id}")
}

pub(super) fn marker(
    runtime: &NamespaceRuntime,
    id: &str,
    item_count: u64,
    txn: &Txn,
    region: &str,
) -> Entry {
    let now = now_micros();
    let committed = txn.committed_at_micros.unwrap_or(now);
    Entry {
        version: ENTRY_VERSION,
        id: marker_id(id),
        namespace: runtime.config.name.clone(),
        key: id.to_owned(),
        body: Some(Body::Transaction(TransactionMarker {
            transaction_id: id.to_owned(),
            item_count,
        })),
        original_write_time_micros: committed,
        deliver_at_micros: now,
        enqueued_at_micros: now,
        origin_region: region.to_owned(),
        ..Entry::default()
    }
}
