//! An abort: an open transaction moves to `aborted` and its staged items are dropped. One that
//! is committing or further is refused: its marker may be on the queue already.

use tonic::Status;
use wal_durable::{DurableStorage, TxnState, staging_keep};

use super::TransactionService;
use super::checks::{refused, unavailable};
use crate::registry::NamespaceRuntime;

impl TransactionService {
    pub(super) async fn abort(
        &self,
        runtime: &NamespaceRuntime,
        durable: &DurableStorage,
        id: &str,
    ) -> Result<(), Status> {
        let name = &runtime.config.name;
        let keep = staging_keep(&runtime.config);
        let txn = match durable.transaction(name, id).await.map_err(unavailable)? {
            Some(txn) => txn,
            None => {
                // Recorded as aborted, so an append still on its way cannot open it afterwards.
                if durable
                    .abort_unknown(name, id, keep)
                    .await
                    .map_err(unavailable)?
                {
                    return Ok(());
                }
                // Opened meanwhile: aborted as an open one.
                durable
                    .transaction(name, id)
                    .await
                    .map_err(unavailable)?
                    .ok_or_else(|| Status::unavailable("the transaction's row vanished"))?
            }
        };
        if txn.state.committed() {
            return Err(refused(&runtime.config, id, txn.state));
        }
        if txn.state == TxnState::Open {
            let moved = durable
                .move_transaction(name, id, TxnState::Open, TxnState::Aborted, None, keep)
                .await
                .map_err(unavailable)?;
            if moved {
                let _ = durable.unindex_open(name, id, &txn).await;
            } else {
                // A commit won the race.
                let now = durable.transaction(name, id).await.map_err(unavailable)?;
                if let Some(txn) = now.filter(|t| t.state.committed()) {
                    return Err(refused(&runtime.config, id, txn.state));
                }
            }
        }
        durable.drop_items(name, id).await.map_err(unavailable)
    }
}
