//! A transaction's row: reading it, opening it, and the moves between states (each a
//! compare-and-set).

use scylla::value::CqlTimestamp;

use super::{Listing, Txn, TxnRow, TxnState, micros, open_bucket, ttl};
use crate::{DurableError, DurableStorage, cql};
use wal_queue::entry::now_micros;

/// What [`DurableStorage::stage_and_commit`] got done.
#[derive(Debug)]
pub enum OneCall {
    /// Staged and committing: the row as it now stands.
    Committed(Txn),
    /// The items were staged, and another call made the row first.
    StagedOnly,
    /// An item was staged already: nothing of this call was.
    NotStaged,
}

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
        // The row keeps milliseconds: the bucket and the answer are taken from those.
        let now = now_micros() / 1000 * 1000;
        let opened = CqlTimestamp(now / 1000);
        // Indexed before the row exists, so a failure after the insert cannot leave an open
        // transaction the expiry sweep never finds: an entry without a row is passed over.
        let by_time = self.run(
            &self.staging.index_open,
            (namespace, open_bucket(now), id, ttl(keep)),
            "transaction open",
        );
        let by_state = self.reindex(namespace, id, &[], TxnState::Open, keep);
        futures::try_join!(by_time, by_state)?;
        if !self
            .run_lwt(
                &self.staging.open,
                (namespace, id, opened, ttl(keep)),
                "transaction open",
            )
            .await?
        {
            // Opened (or aborted) by another call meanwhile.
            return self.transaction(namespace, id).await?.ok_or_else(|| {
                cql("transaction open")(&"the row is missing right after its insert")
            });
        }
        Ok(Txn {
            state: TxnState::Open,
            item_count: None,
            applied_through: 0,
            opened_at_micros: now,
            committed_at_micros: None,
            reason: None,
        })
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

    /// Moves the open transaction `open` to committing with its item count, and returns it
    /// as it then stands; None when it was not open (someone else committed, aborted or expired
    /// it first: read it again).
    pub async fn begin_commit(
        &self,
        namespace: &str,
        id: &str,
        open: &Txn,
        item_count: u64,
        keep: std::time::Duration,
    ) -> Result<Option<Txn>, DurableError> {
        let at = now_micros() / 1000;
        // Indexed as committing before the move, so a failure after it cannot leave a committing
        // transaction the producers' resend sweep never finds; an entry for a row that did not
        // move is passed over (and dropped) by the sweep.
        self.reindex(namespace, id, &[], TxnState::Committing, keep)
            .await?;
        if !self
            .run_lwt(
                &self.staging.commit,
                (
                    ttl(keep),
                    item_count as i64,
                    CqlTimestamp(at),
                    namespace,
                    id,
                ),
                "transaction commit",
            )
            .await?
        {
            return Ok(None);
        }
        // Best effort: a sweep or a listing checks the row, so an index entry left behind only
        // costs a read.
        let (_, _) = futures::join!(
            self.unindex_open(namespace, id, open),
            self.unindex(namespace, Listing::Open, id)
        );
        Ok(Some(Txn {
            state: TxnState::Committing,
            item_count: Some(item_count),
            committed_at_micros: Some(at * 1000),
            ..open.clone()
        }))
    }

    /// Stages `items` and commits them, for a transaction nobody has opened (one written whole
    /// in one call): the items as [`Self::stage_items`] does, then the row inserted as
    /// `committing` with their count if there is none. When an item or the row exists already
    /// (a call sent again, or racing an append or an abort) the caller takes the step-by-step
    /// way, which reads and compares what is there.
    pub async fn stage_and_commit(
        &self,
        namespace: &str,
        id: &str,
        items: &[super::StagedItem],
        keep: std::time::Duration,
    ) -> Result<OneCall, DurableError> {
        // Indexed as committing before the row exists, as a commit of an open transaction is
        // (see begin_commit), so a failure after the insert leaves it to the producers' sweep;
        // beside the staging, which it does not depend on. The sweep leaves an entry without a
        // row alone for its grace, and it is written again once the row is in, in case the
        // staging took longer than that.
        let indexed = self.reindex(namespace, id, &[], TxnState::Committing, keep);
        let staged = self.stage_items(namespace, id, items, keep);
        let (indexed, staged) = futures::join!(indexed, staged);
        indexed?;
        if !staged? {
            return Ok(OneCall::NotStaged);
        }
        // The row keeps milliseconds: the answer is taken from those.
        let now = now_micros() / 1000 * 1000;
        let at = CqlTimestamp(now / 1000);
        let count = items.len() as u64;
        let inserted = self
            .run_lwt(
                &self.staging.commit_unopened,
                (namespace, id, count as i64, at, at, ttl(keep)),
                "transaction commit",
            )
            .await?;
        if !inserted {
            return Ok(OneCall::StagedOnly);
        }
        self.reindex(namespace, id, &[], TxnState::Committing, keep)
            .await?;
        Ok(OneCall::Committed(Txn {
            state: TxnState::Committing,
            item_count: Some(count),
            applied_through: 0,
            opened_at_micros: now,
            committed_at_micros: Some(now),
            reason: None,
        }))
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
        let moved = self
            .run_lwt(
                &self.staging.move_state,
                (ttl(keep), to.name(), reason, namespace, id, from.name()),
                "transaction update",
            )
            .await?;
        if moved && Listing::of(from) != Listing::of(to) {
            // Best effort, as every index move: see [`Listing`].
            let left: Vec<Listing> = Listing::of(from).into_iter().collect();
            let _ = self.reindex(namespace, id, &left, to, keep).await;
        }
        Ok(moved)
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
        let finished = self
            .run_lwt(
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
            .await?;
        if finished {
            // Applied or dead-lettered, from any committed listing (the consumer applies a
            // committing one too, and a redrive a dead-lettered one).
            let left = [
                Listing::Committing,
                Listing::Applying,
                Listing::DeadLettered,
            ];
            let _ = self.reindex(namespace, id, &left, state, keep).await;
        }
        Ok(finished)
    }
}
