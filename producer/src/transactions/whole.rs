//! WriteTransaction: a transaction's items and its commit in one call.

use std::sync::Arc;

use tonic::Status;
use wal_durable::{DurableStorage, OneCall, StagedItem, Txn, TxnState, staging_keep};
use wal_proto::v1::{TransactionItem, WriteToLogResponse};
use wal_runtime::trace_context::Carrier;

use super::checks::{check_items, unavailable};
use super::marker::queue_marker;
use super::{TransactionService, compared};
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
            let one_call = durable
                .stage_and_commit(&namespace.name, id, &items, keep)
                .await
                .map_err(unavailable)?;
            if !matches!(one_call, OneCall::NotStaged) {
                crate::metrics::transaction_items_staged(&namespace.name, count);
            }
            if let OneCall::Committed(txn) = one_call {
                return queue_marker(&self.writes, runtime, durable, id, count, &txn, trace).await;
            }
            // Raced another call (this one sent twice, an append, an abort): read again, and go
            // step by step, which compares what is staged.
            txn = read().await?;
            if matches!(one_call, OneCall::StagedOnly)
                && txn.as_ref().is_some_and(|t| t.state == TxnState::Aborted)
            {
                // Staged just before an abort recorded the id: nothing will apply them. Best
                // effort, as the staging's TTL drops them anyway.
                let _ = durable.drop_items(&namespace.name, id).await;
            }
        }
        // Sent again after UNKNOWN, the items are staged and committed already, and only the
        // commit (its marker) is repeated, once they are found to be this call's.
        if !committed(&txn)
            && let Err(refused) = self.append_checked(runtime, durable, id, &items).await
        {
            // Sent twice at once (a client retrying past its deadline while the first call
            // goes on), the other call may commit between this one's read and its append,
            // which then refuses a transaction no longer open.
            txn = read().await?;
            if refused.code() != tonic::Code::FailedPrecondition || !committed(&txn) {
                return Err(refused);
            }
        }
        if let Some(txn) = txn.filter(|t| t.state.committed())
            && !self_same(durable, &namespace.name, id, &txn, &items).await?
        {
            return Err(status::refused(
                tonic::Code::AlreadyExists,
                "transaction_id",
                format!(
                    "transaction '{id}' is committed with other items than this call's {count}; a transaction id names one transaction"
                ),
            ));
        }
        self.commit(runtime, durable, id, count, trace).await
    }
}

/// Whether the committed `txn` is this call's: as many items, each staged as it is. A
/// transaction applied so long ago that its items are gone (their TTL is from their staging,
/// the row's from its last move) is taken as this call's, as before the items were compared.
async fn self_same(
    durable: &DurableStorage,
    namespace: &str,
    id: &str,
    txn: &Txn,
    items: &[StagedItem],
) -> Result<bool, Status> {
    if txn.item_count != Some(items.len() as u64) {
        return Ok(false);
    }
    let sequences: Vec<u64> = items.iter().map(|item| item.sequence).collect();
    let staged = durable
        .staged_items(namespace, id, &sequences)
        .await
        .map_err(unavailable)?;
    if staged.is_empty() && txn.state == TxnState::Applied {
        return Ok(true);
    }
    Ok(compared(items, &staged).is_ok_and(|c| c.fresh.is_empty()))
}
