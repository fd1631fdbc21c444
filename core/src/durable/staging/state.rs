//! A transaction's row: reading it, opening it, and the moves between states (each a
//! compare-and-set).

use scylla::value::CqlTimestamp;

use super::{Txn, TxnRow, TxnState, micros, open_bucket, ttl};
use crate::durable::{DurableError, DurableStorage, cql};
use crate::entry::now_micros;

impl DurableStorage {
    /// The transaction's row, if any.
    pub async fn transaction(
        &self,
        namespace: &str,
        id: &str,
    ) -> Result<Option<Txn>, DurableError> {
        let rows = self
            .run(&self.staging.read, (namespace, id), "transaction read")
            .await?
            .into_rows_result()
            .map_err(|e| cql("transaction read")(&e))?;
        let Some((state, count, applied, opened, committed, reason)) = rows
            .maybe_first_row::<TxnRow>()
            .map_err(|e| cql("transaction read")(&e))?
        else {
            return Ok(None);
        };
        Ok(Some(Txn {
            state: TxnState::parse(state.as_deref().unwrap_or("open"))?,
            item_count: count.map(|c| c.max(0) as u64),
            applied_through: applied.unwrap_or(0).max(0) as u64,
            opened_at_micros: micros(opened).unwrap_or(0),
            committed_at_micros: micros(committed),
            reason,
        }))
    }

    /// Opens the transaction if nobody has, and returns its row as it now stands.
    pub async fn open_transaction(
        &self,
        namespace: &str,
        id: &str,
        keep: std::time::Duration,
    ) -> Result<Txn, DurableError> {
        if let Some(txn) = self.transaction(namespace, id).await? {
            return Ok(txn);
        }
        let now = now_micros();
        let opened = CqlTimestamp(now / 1000);
        if self
            .run_lwt(
                &self.staging.open,
                (namespace, id, opened, ttl(keep)),
                "transaction open",
            )
            .await?
        {
            // Indexed by when it opened, so an abandoned one is found and counted once expired.
            // The row's own opened_at is in milliseconds: the bucket is taken from those.
            self.run(
                &self.staging.index_open,
                (namespace, open_bucket(now / 1000 * 1000), id, ttl(keep)),
                "transaction open",
            )
            .await?;
        }
        self.transaction(namespace, id)
            .await?
            .ok_or_else(|| cql("transaction open")(&"the row is missing right after its insert"))
    }

    /// Records a transaction nobody opened as aborted, so a late first append cannot open it;
    /// false when it exists (opened meanwhile: abort it as an open one).
    pub async fn abort_unknown(
        &self,
        namespace: &str,
        id: &str,
        keep: std::time::Duration,
    ) -> Result<bool, DurableError> {
        let at = CqlTimestamp(now_micros() / 1000);
        self.run_lwt(
            &self.staging.abort_unknown,
            (namespace, id, at, ttl(keep)),
            "transaction abort",
        )
        .await
    }

    /// Moves an open transaction to committing with its item count; false when it was not open
    /// (someone else committed, aborted or expired it first).
    pub async fn begin_commit(
        &self,
        namespace: &str,
        id: &str,
        item_count: u64,
        keep: std::time::Duration,
    ) -> Result<bool, DurableError> {
        let at = CqlTimestamp(now_micros() / 1000);
        self.run_lwt(
            &self.staging.commit,
            (ttl(keep), item_count as i64, at, namespace, id),
            "transaction commit",
        )
        .await
    }

    /// Moves the transaction from `from` to `to`, with a reason; false when it was not in `from`.
    pub async fn move_transaction(
        &self,
        namespace: &str,
        id: &str,
        from: TxnState,
        to: TxnState,
        reason: Option<&str>,
        keep: std::time::Duration,
    ) -> Result<bool, DurableError> {
        self.run_lwt(
            &self.staging.move_state,
            (ttl(keep), to.name(), reason, namespace, id, from.name()),
            "transaction update",
        )
        .await
    }

    /// Ends a committed transaction's apply by `applier`: `applied`, or `dead_lettered` with
    /// why; false when the lease is no longer `applier`'s.
    #[allow(clippy::too_many_arguments)]
    pub async fn finish_transaction(
        &self,
        namespace: &str,
        id: &str,
        applier: &str,
        state: TxnState,
        applied_through: u64,
        reason: Option<&str>,
        keep: std::time::Duration,
    ) -> Result<bool, DurableError> {
        let at = CqlTimestamp(now_micros() / 1000);
        self.run_lwt(
            &self.staging.finish,
            (
                ttl(keep),
                state.name(),
                applied_through as i64,
                reason,
                at,
                namespace,
                id,
                applier,
            ),
            "transaction update",
        )
        .await
    }
}
