//! The transaction calls of the Operations service: ListTransactions, ShowTransaction and
//! AbortTransaction, on the staging tables in each namespace's durable storage (the same
//! tables, and the same abort, as the producers' Transactions service).

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use tonic::{Request, Response, Status};
use wal_durable::{
    Abort, DurableError, DurableStorage, Listing, MAX_TRANSACTION_ID_BYTES, is_transaction_id,
    shown,
};
use wal_namespaces::Namespace;
use wal_proto::v1::{
    ListTransactionsRequest, ListTransactionsResponse, ShowTransactionRequest, Transaction,
    TransactionAbortRequest, TransactionAbortResponse, TransactionListing,
};
use wal_runtime::tls::Peer;

use super::{Call, OperationsService, actor};

/// The longest a transaction call waits on the namespace's CQL cluster, connecting included.
const CQL_WAIT: Duration = Duration::from_secs(30);
/// How many ListTransactions returns when the request says 0, and at most.
const DEFAULT_LIMIT: u32 = 100;
const MAX_LIMIT: u32 = 10_000;

impl OperationsService {
    pub(super) async fn list_transactions_call(
        &self,
        request: Request<ListTransactionsRequest>,
    ) -> Result<Response<ListTransactionsResponse>, Status> {
        self.check_reader(request.extensions().get::<Peer>())?;
        let request = request.into_inner();
        let listings = listings(request.listing())?;
        let limit = match request.limit {
            0 => DEFAULT_LIMIT,
            n if n <= MAX_LIMIT => n,
            n => {
                return Err(Status::invalid_argument(format!(
                    "limit is {n}; expected 1 to {MAX_LIMIT} (or 0 for {DEFAULT_LIMIT})"
                )));
            }
        };
        let namespace = self.namespace(&request.namespace).await?;
        let until = Instant::now() + CQL_WAIT;
        let storage = self.staging(&namespace, until).await?;
        let live = within(
            until,
            storage.live_in(&namespace.name, listings, limit as usize),
        )
        .await?;
        Ok(Response::new(ListTransactionsResponse {
            transactions: live
                .iter()
                .map(|(id, txn)| shown(&namespace, id, txn, None))
                .collect(),
        }))
    }

    pub(super) async fn show_transaction_call(
        &self,
        request: Request<ShowTransactionRequest>,
    ) -> Result<Response<Transaction>, Status> {
        self.check_reader(request.extensions().get::<Peer>())?;
        let request = request.into_inner();
        let id = checked_id(&request.transaction_id)?;
        let namespace = self.namespace(&request.namespace).await?;
        let until = Instant::now() + CQL_WAIT;
        let storage = self.staging(&namespace, until).await?;
        let txn = within(until, storage.transaction(&namespace.name, id))
            .await?
            .ok_or_else(|| {
                Status::not_found(format!(
                    "transaction '{id}' of namespace '{}': no record (never staged, or past the {} days its staging is kept)",
                    namespace.name,
                    wal_durable::staging_keep(&namespace).as_secs() / 86_400
                ))
            })?;
        let staged = within(until, storage.staged_count(&namespace.name, id)).await?;
        Ok(Response::new(shown(&namespace, id, &txn, Some(staged))))
    }

    pub(super) async fn abort_transaction_call(
        &self,
        request: Request<TransactionAbortRequest>,
    ) -> Result<Response<TransactionAbortResponse>, Status> {
        let peer = request.extensions().get::<Peer>().cloned();
        let request = request.into_inner();
        let id = checked_id(&request.transaction_id)?;
        let reason = request.reason.trim();
        if reason.is_empty() || reason.len() > 1024 {
            return Err(Status::invalid_argument(
                "reason must say why the transaction is aborted (1 to 1,024 bytes); it is kept on the transaction and in the audit",
            ));
        }
        let call = Call {
            actor: actor(peer.as_ref(), &request.operator),
            verb: "abort transaction",
            namespace: request.namespace.clone(),
            subject: id.to_owned(),
            detail: reason.to_owned(),
        };
        let namespace = self.namespace(&request.namespace).await?;
        self.check_admin(peer.as_ref(), &namespace, &call).await?;
        let kept = format!("aborted by {}: {reason}", call.actor);
        let until = Instant::now() + CQL_WAIT;
        let storage = match self.staging(&namespace, until).await {
            Ok(storage) => storage,
            Err(status) => {
                self.record(&call, &format!("failed: {}", status.message()))
                    .await;
                return Err(status);
            }
        };
        let abort = match within(until, storage.abort(&namespace, id, Some(&kept))).await {
            Ok(abort) => abort,
            Err(status) => {
                // The abort's compare-and-set may have happened before the failure or the
                // deadline: the record says what is known.
                let message = format!(
                    "{}; whether it was aborted is not known: `walctl txn show {} {id}` says",
                    status.message(),
                    namespace.name
                );
                self.record(&call, &format!("unknown: {message}")).await;
                return Err(Status::unavailable(message));
            }
        };
        let name = &namespace.name;
        let (changed, summary) = match abort {
            Abort::Committed(state) => {
                let message = format!(
                    "transaction '{id}' of namespace '{name}' is {}: its commit was accepted, so it is not aborted (its marker may be on the queue; undo what it applied with writes of your own)",
                    state.name()
                );
                self.record(&call, &format!("refused: {message}")).await;
                return Err(Status::failed_precondition(message));
            }
            Abort::Aborted => (
                true,
                format!(
                    "aborted transaction '{id}' of namespace '{name}': its staged items are dropped, and a later append or commit is refused"
                ),
            ),
            Abort::Recorded => (
                true,
                format!(
                    "no transaction '{id}' was staged in namespace '{name}': it is recorded as aborted, so an append on its way cannot open it (check the id)"
                ),
            ),
            Abort::Gone => (
                false,
                format!(
                    "transaction '{id}' of namespace '{name}' has no record any more (its staging ran out); nothing changed"
                ),
            ),
            Abort::Ended(state) => (
                false,
                format!(
                    "transaction '{id}' of namespace '{name}' had ended already ({}); nothing changed",
                    state.name()
                ),
            ),
        };
        let result = if changed { "done" } else { "unchanged" };
        self.record(&call, &format!("{result}: {summary}")).await;
        // As it stands now, if the call's time allows; the abort is done either way.
        let now = within(until, storage.transaction(name, id))
            .await
            .ok()
            .flatten();
        Ok(Response::new(TransactionAbortResponse {
            transaction: now.map(|txn| shown(&namespace, id, &txn, None)),
            changed,
            summary,
        }))
    }

    /// The session on `namespace`'s staging tables, connected by `until`; FAILED_PRECONDITION
    /// when it has none.
    async fn staging(
        &self,
        namespace: &Namespace,
        until: Instant,
    ) -> Result<Arc<DurableStorage>, Status> {
        if namespace.durable_storage.is_none() {
            return Err(Status::failed_precondition(format!(
                "namespace '{}' has no durable_storage, so it has no two-phase writes",
                namespace.name
            )));
        }
        let left = until.saturating_duration_since(Instant::now());
        self.durable
            .of(&self.clusters, namespace, left)
            .await
            .map_err(|why| Status::unavailable(format!("the staging tables: {why}")))
    }
}

/// The index listings a request's listing reads.
fn listings(listing: TransactionListing) -> Result<&'static [Listing], Status> {
    wal_durable::listings_of(listing).ok_or_else(|| {
        Status::invalid_argument("listing is unset; expected OPEN, APPLYING or DEAD_LETTERED")
    })
}

fn checked_id(id: &str) -> Result<&str, Status> {
    if is_transaction_id(id) {
        Ok(id)
    } else {
        Err(Status::invalid_argument(format!(
            "transaction_id {:?}: expected 1 to {MAX_TRANSACTION_ID_BYTES} letters, digits or '-', '_', '.', ':'",
            wal_queue::prefix(id, MAX_TRANSACTION_ID_BYTES + 1)
        )))
    }
}

/// `read` by `until`; UNAVAILABLE, saying why, when it fails or does not answer.
async fn within<T>(
    until: Instant,
    read: impl Future<Output = Result<T, DurableError>>,
) -> Result<T, Status> {
    match tokio::time::timeout_at(until, read).await {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(error)) => Err(Status::unavailable(format!("the staging tables: {error}"))),
        Err(_) => Err(Status::unavailable(format!(
            "the staging tables did not answer within {CQL_WAIT:?} of the call"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unset_listing_is_refused_naming_the_listings() {
        let refused = listings(TransactionListing::Unspecified).unwrap_err();
        assert_eq!(refused.code(), tonic::Code::InvalidArgument);
        assert!(
            refused
                .message()
                .contains("OPEN, APPLYING or DEAD_LETTERED")
        );
        assert_eq!(
            listings(TransactionListing::Applying).unwrap(),
            [Listing::Committing, Listing::Applying]
        );
    }

    #[test]
    fn ids_are_checked_as_the_producer_checks_them() {
        assert!(checked_id("order-1").is_ok());
        let refused = checked_id("two words").unwrap_err();
        assert!(refused.message().contains("\"two words\""), "{refused:?}");
        let long = "x".repeat(5_000);
        let refused = checked_id(&long).unwrap_err();
        assert!(refused.message().len() < 300, "the id is cut short");
    }
}
