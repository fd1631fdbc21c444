//! What callers and operators ask of a namespace's staging beside writing to it: the live
//! transactions in some listings, a transaction's state as shown (an open one past its lifetime
//! is expired, whether or not a producer's sweep has marked it yet), and an abort. One copy for
//! the producer's AbortTransaction, the control plane's Operations calls and walctl's reads.

use futures::StreamExt as _;
use wal_namespaces::Namespace;
use wal_queue::entry::now_micros;

use super::{Listing, Txn, TxnState};
use crate::{DurableError, DurableStorage, staging_keep, transaction_lifetime};

/// The longest transaction id.
pub const MAX_TRANSACTION_ID_BYTES: usize = 128;

/// Whether `id` can name a transaction: 1 to 128 letters, digits or '-', '_', '.', ':' (what
/// appears in its commit marker's id, `txn:<id>`).
pub fn is_transaction_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= MAX_TRANSACTION_ID_BYTES
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.:".contains(c))
}

/// What an abort did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Abort {
    /// It was open; it is aborted and its staged items are dropped.
    Aborted,
    /// No transaction had this id: it is recorded as aborted, so an append still on its way
    /// cannot open it afterwards.
    Recorded,
    /// It had ended already (aborted or expired); its items are dropped, if any were left.
    Ended(TxnState),
    /// Its commit was accepted first: nothing changed (its marker may be on the queue).
    Committed(TxnState),
    /// Its row went while the abort ran (its staging's keep ran out): nothing is left to abort.
    Gone,
}

impl DurableStorage {
    /// Aborts transaction `id` of `namespace` unless its commit was accepted; `reason` is kept
    /// on the transaction's row (shown by `walctl txn show`).
    pub async fn abort(
        &self,
        namespace: &Namespace,
        id: &str,
        reason: Option<&str>,
    ) -> Result<Abort, DurableError> {
        let name = &namespace.name;
        let keep = staging_keep(namespace);
        let txn = match self.transaction(name, id).await? {
            Some(txn) => txn,
            None => {
                if self.abort_unknown(name, id, keep).await? {
                    return Ok(Abort::Recorded);
                }
                // Opened meanwhile: aborted as an open one.
                self.transaction(name, id)
                    .await?
                    .ok_or_else(|| DurableError::Cql {
                        operation: "transaction abort",
                        reason: format!(
                            "transaction '{id}' was opened and its row is gone at once; try again"
                        ),
                    })?
            }
        };
        if txn.state.committed() {
            return Ok(Abort::Committed(txn.state));
        }
        let mut done = Abort::Ended(txn.state);
        if txn.state == TxnState::Open {
            let moved = self
                .move_transaction(name, id, TxnState::Open, TxnState::Aborted, reason, keep)
                .await?;
            if moved {
                let _ = self.unindex_open(name, id, &txn).await;
                done = Abort::Aborted;
            } else {
                // A commit, or the expiry sweep, won the race.
                match self.transaction(name, id).await? {
                    Some(now) if now.state.committed() => return Ok(Abort::Committed(now.state)),
                    Some(now) => done = Abort::Ended(now.state),
                    None => done = Abort::Gone,
                }
            }
        }
        self.drop_items(name, id).await?;
        Ok(done)
    }

    /// Up to `limit` transactions of `namespace` whose own rows say they are in one of
    /// `listings`, each with its row. The index can name a transaction that has moved on since
    /// (see [`Listing`]): those are passed over and the reading goes on.
    pub async fn live_in(
        &self,
        namespace: &str,
        listings: &[Listing],
        limit: usize,
    ) -> Result<Vec<(String, Txn)>, DurableError> {
        let mut streams = Vec::with_capacity(listings.len());
        for listing in listings {
            streams.push(self.listed(namespace, *listing).await?.boxed());
        }
        let mut ids = futures::stream::iter(streams).flatten();
        let mut live = Vec::new();
        // An id can be in two listings for a moment (a move writes the new entry first).
        let mut seen = std::collections::HashSet::new();
        while live.len() < limit {
            let Some(id) = ids.next().await else {
                break;
            };
            let id = id?;
            if !seen.insert(id.clone()) {
                continue;
            }
            let listed = |t: &Txn| Listing::of(t.state).is_some_and(|l| listings.contains(&l));
            if let Some(txn) = self.transaction(namespace, &id).await?.filter(listed) {
                live.push((id, txn));
            }
        }
        Ok(live)
    }
}

/// The index listings a listing of the Operations service reads (None: unset): applying is
/// committed and not yet applied, whether or not the broker acknowledged the marker yet.
pub fn listings_of(listing: wal_proto::v1::TransactionListing) -> Option<&'static [Listing]> {
    use wal_proto::v1::TransactionListing as Asked;
    match listing {
        Asked::Open => Some(&[Listing::Open]),
        Asked::Applying => Some(&[Listing::Committing, Listing::Applying]),
        Asked::DeadLettered => Some(&[Listing::DeadLettered]),
        Asked::Unspecified => None,
    }
}

/// Whether `txn` has been open longer than `namespace` lets a transaction stay open (expired,
/// whether or not a producer's sweep has marked it yet).
pub fn past_lifetime(namespace: &Namespace, txn: &Txn) -> bool {
    now_micros().saturating_sub(txn.opened_at_micros)
        > transaction_lifetime(namespace).as_micros() as i64
}

/// The state an operator is shown: an open transaction past its lifetime is expired.
pub fn shown_state(namespace: &Namespace, txn: &Txn) -> &'static str {
    if txn.state == TxnState::Open && past_lifetime(namespace, txn) {
        "expired"
    } else {
        txn.state.name()
    }
}

/// `txn` of `namespace` as the Operations service and walctl show it; `staged`: how many items
/// are staged now, when it was counted.
pub fn shown(
    namespace: &Namespace,
    id: &str,
    txn: &Txn,
    staged: Option<u64>,
) -> wal_proto::v1::Transaction {
    wal_proto::v1::Transaction {
        namespace: namespace.name.clone(),
        transaction_id: id.to_owned(),
        state: shown_state(namespace, txn).to_owned(),
        item_count: txn.item_count,
        applied_through: txn.applied_through,
        opened_at_micros: txn.opened_at_micros,
        committed_at_micros: txn.committed_at_micros,
        reason: txn.reason.clone().unwrap_or_default(),
        staged_items: staged,
    }
}
