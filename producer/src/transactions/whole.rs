//! WriteTransaction: a transaction's items and its commit in one call.

use std::sync::Arc;

use tonic::Status;
use wal_durable::{DurableStorage, StagedItem, Txn, staging_keep};
use wal_proto::v1::{TransactionItem, WriteToLogResponse};
use wal_runtime::trace_context::Carrier;

use super::TransactionService;
use super::checks::{check_items, unavailable};
use super::marker::queue_marker;
use crate::registry::NamespaceRuntime;
use crate::status;

impl TransactionService {
    /// A transaction in one call: staged and committed at once when nobody has opened it (two
    /// compare-and-sets), else appended and committed step by step, which reads and compares
    /// what an earlier call left. Its items are checked first, also when it was committed
    /// already, since they are compared with what was staged.
    pub(super) async fn write_whole(
        &self,
        runtime: &NamespaceRuntime,
        durable: &Arc<DurableStorage>,
        id: &str,
        items: Vec<TransactionItem>,
        trace: Carrier,
    ) -> Result<WriteToLogResponse, Status> {
        let namespace = &runtime.config;
        let count = items.len() as u64;
        let items = check_items(namespace, items)?;
        let read = || async {
            durable
                .transaction(&namespace.name, id)
                .await
                .map_err(unavailable)
        };
        let committed = |txn: &Option<Txn>| txn.as_ref().is_some_and(|t| t.state.committed());
        let mut txn = read().await?;
        if txn.is_none() {
            let keep = staging_keep(namespace);
            let committing = durable
                .stage_and_commit(&namespace.name, id, &items, keep)
                .await
                .map_err(unavailable)?;
            if let Some(txn) = committing {
                crate::metrics::transaction_items_staged(&namespace.name, count);
                return queue_marker(&self.writes, runtime, durable, id, count, &txn, trace).await;
            }
            // Raced another call (this one sent twice, an append, an abort): read again, and go
            // step by step, which compares what is staged.
            txn = read().await?;
        }
        // Sent again after UNKNOWN, the items are staged and committed already, and only the
        // commit (its marker) is repeated, once they are found to be this call's.
        let mut sent_again = committed(&txn);
        if !sent_again && let Err(refused) = self.append_checked(runtime, durable, id, &items).await
        {
            // Sent twice at once (a client retrying past its deadline while the first call
            // goes on), the other call may commit between this one's read and its append,
            // which then refuses a transaction no longer open.
            if refused.code() != tonic::Code::FailedPrecondition || !committed(&read().await?) {
                return Err(refused);
            }
            sent_again = true;
        }
        if sent_again && !staged_alike(durable, &namespace.name, id, &items).await? {
            return Err(status::refused(
                tonic::Code::AlreadyExists,
                "transaction_id",
                format!(
                    "transaction '{id}' is committed with other items than this call's; a transaction id names one transaction"
                ),
            ));
        }
        self.commit(runtime, durable, id, count, trace).await
    }
}

/// Whether every one of `items` is staged as it is: another call staged this very transaction.
async fn staged_alike(
    durable: &DurableStorage,
    namespace: &str,
    id: &str,
    items: &[StagedItem],
) -> Result<bool, Status> {
    let sequences: Vec<u64> = items.iter().map(|item| item.sequence).collect();
    let staged = durable
        .staged_items(namespace, id, &sequences)
        .await
        .map_err(unavailable)?;
    let same = |item: &StagedItem| staged.iter().any(|s| s == item);
    Ok(staged.len() == items.len() && items.iter().all(same))
}
