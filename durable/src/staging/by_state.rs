//! The index of transactions by where they stand, for operators listing what is open, what is
//! waiting to be applied (or being applied) and what was dead-lettered (`walctl txn list`), and
//! for the producers' sweep of commits whose marker may not be on the queue (`committing`: that
//! listing is kept apart so the sweep reads only those, however many wait for the consumer).
//!
//! It follows each move between states, written after the move's compare-and-set, the new entry
//! before the old one is deleted. A crash or a failed write in between leaves an entry that
//! names a state the transaction has left, so a listing reads each transaction's own row and
//! shows what it says; the entries carry the staging's TTL and go with it. A transaction is
//! indexed as open before its row is inserted, so none is missing from the open listing (or the
//! expiry sweep). Ended transactions (applied, aborted, expired) are not indexed.

use scylla::value::CqlTimestamp;

use futures::TryStreamExt as _;

use super::{TxnState, ttl};
use crate::{DurableError, DurableStorage, cql};
use wal_queue::entry::now_micros;

/// The listings, by the name operators give them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Listing {
    /// Items may still be appended.
    Open,
    /// Committed, and its marker not (yet) acknowledged by the broker.
    Committing,
    /// Committed, its marker on the queue: waiting for the consumer, or being applied.
    Applying,
    /// The marker went to the DLQ; a redrive applies the rest.
    DeadLettered,
}

impl Listing {
    pub fn name(self) -> &'static str {
        match self {
            Listing::Open => "open",
            Listing::Committing => "committing",
            Listing::Applying => "applying",
            Listing::DeadLettered => "dead_lettered",
        }
    }

    /// The listing a transaction in `state` belongs to, if any.
    pub fn of(state: TxnState) -> Option<Self> {
        match state {
            TxnState::Open => Some(Listing::Open),
            TxnState::Committing => Some(Listing::Committing),
            TxnState::Committed => Some(Listing::Applying),
            TxnState::DeadLettered => Some(Listing::DeadLettered),
            TxnState::Applied | TxnState::Aborted | TxnState::Expired => None,
        }
    }
}

impl DurableStorage {
    /// Moves the transaction's index entry out of the listings `left` and into that of `to`.
    pub(super) async fn reindex(
        &self,
        namespace: &str,
        id: &str,
        left: &[Listing],
        to: TxnState,
        keep: std::time::Duration,
    ) -> Result<(), DurableError> {
        let to = Listing::of(to);
        // The new entry first: a failure in between leaves a stale entry, which a listing
        // leaves out, rather than none, which it could not find.
        if let Some(listing) = to {
            let since = CqlTimestamp(now_micros() / 1000);
            self.run(
                &self.staging.index_state,
                (namespace, listing.name(), id, since, ttl(keep)),
                "transaction index",
            )
            .await?;
        }
        for left in left.iter().filter(|l| Some(**l) != to) {
            self.unindex(namespace, *left, id).await?;
        }
        Ok(())
    }

    /// Drops the transaction's entry from `listing`: one that names a state the transaction has
    /// left.
    pub async fn unindex(
        &self,
        namespace: &str,
        listing: Listing,
        id: &str,
    ) -> Result<(), DurableError> {
        self.run(
            &self.staging.unindex_state,
            (namespace, listing.name(), id),
            "transaction index",
        )
        .await
        .map(drop)
    }

    /// The ids indexed under `listing`, in id order, read a page at a time: a listing reads
    /// on until it has found as many live entries as it shows.
    pub async fn listed(
        &self,
        namespace: &str,
        listing: Listing,
    ) -> Result<impl futures::Stream<Item = Result<String, DurableError>> + Send, DurableError>
    {
        Ok(self
            .listed_since(namespace, listing)
            .await?
            .map_ok(|(id, _)| id))
    }

    /// Like [`Self::listed`], each id with when its entry was written (microseconds, whole
    /// milliseconds): an entry that names no row may be that of a transaction being written in
    /// one call, indexed before its row exists, and only an old one is stale.
    pub async fn listed_since(
        &self,
        namespace: &str,
        listing: Listing,
    ) -> Result<impl futures::Stream<Item = Result<(String, i64), DurableError>> + Send, DurableError>
    {
        let pager = self
            .session
            .execute_iter(
                self.staging.list_state.clone(),
                (namespace.to_owned(), listing.name()),
            )
            .await
            .map_err(|e| cql("transaction index")(&e))?;
        let rows = pager
            .rows_stream::<(String, Option<CqlTimestamp>)>()
            .map_err(|e| cql("transaction index")(&e))?;
        Ok(rows
            .map_ok(|(id, since)| (id, since.map_or(0, |at| at.0.saturating_mul(1000))))
            .map_err(|e| cql("transaction index")(&e)))
    }
}
