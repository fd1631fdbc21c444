//! The Transactions service (proto/wal/v1/transaction.proto): items staged in the namespace's
//! durable storage, then one commit marker on its queue. The commit answers TRUE only once the
//! broker acknowledged the marker; from then on the consumer applies every item.
//!
//! A commit moves the transaction `open` -> `committing` with a compare-and-set before the
//! marker is sent, so a commit racing an abort, or another commit, has one winner; a commit of a
//! transaction already `committing` or further sends the marker again (the first may have been
//! lost or its answer UNKNOWN): the consumer applies a transaction once, whichever marker comes
//! first, and acknowledges the other. A committing transaction is never opened again, so a
//! commit answers TRUE or UNKNOWN, never FALSE.

use std::sync::Arc;
use tracing::Instrument as _;
use wal_runtime::trace_context::{self, Carrier};

use tonic::{Request, Response, Status};
use wal_durable::{DurableStorage, TxnState, staging_keep};
use wal_proto::v1::transactions_server::Transactions;
use wal_proto::v1::{
    AbortTransactionRequest, AbortTransactionResponse, AppendItemsRequest, AppendItemsResponse,
    CommitTransactionRequest, TransactionItem, WriteToLogResponse, WriteTransactionRequest,
};
use wal_runtime::tls::Peer;

use crate::registry::NamespaceRuntime;
use crate::service::WriteService;
use crate::status;

mod checks;
mod marker;

use self::checks::*;
pub(crate) use self::marker::queue_marker;
use self::marker::*;

/// The most items one call may carry.
pub const MAX_ITEMS_PER_CALL: usize = 1000;
/// The most payload bytes one call may carry: its items are staged in one CQL batch, which must
/// stay under Cassandra's largest mutation (half a 32 MiB commit log segment by default).
pub const MAX_BYTES_PER_CALL: usize = 4 * 1024 * 1024;
/// The most items one transaction may have.
pub const MAX_ITEMS_PER_TRANSACTION: u64 = 100_000;
/// The longest transaction id.
const MAX_ID_BYTES: usize = 128;
/// How often an append that lost a race for its sequences reads them again.
const APPEND_TRIES: usize = 5;
/// Missing sequences named in a refused commit's message; the rest are counted.
const MISSING_NAMED: usize = 20;

#[derive(Debug, Clone)]
pub struct TransactionService {
    writes: WriteService,
}

impl TransactionService {
    pub fn new(writes: WriteService) -> Self {
        Self { writes }
    }

    /// The namespace's runtime and durable storage, or why a transaction cannot use it.
    fn namespace(
        &self,
        peer: Option<&Peer>,
        name: &str,
        id: &str,
    ) -> Result<(Arc<NamespaceRuntime>, Arc<DurableStorage>), Status> {
        let runtime = self
            .writes
            .runtime(name)
            .ok_or_else(|| status::unknown_namespace(name))?;
        self.writes.authorize(peer, &runtime)?;
        let durable = runtime.durable.clone().ok_or_else(|| {
            status::refused(
                tonic::Code::FailedPrecondition,
                "namespace",
                format!(
                    "namespace '{name}' has no durable_storage; two-phase writes stage their items there"
                ),
            )
        })?;
        check_id(id)?;
        Ok((runtime, durable))
    }

    async fn append(
        &self,
        runtime: &NamespaceRuntime,
        durable: &DurableStorage,
        id: &str,
        items: Vec<TransactionItem>,
    ) -> Result<AppendItemsResponse, Status> {
        let namespace = &runtime.config;
        let items = check_items(namespace, items)?;
        let keep = staging_keep(namespace);
        let txn = durable
            .open_transaction(&namespace.name, id, keep)
            .await
            .map_err(unavailable)?;
        refuse_unless_open(namespace, id, &txn)?;
        let sequences: Vec<u64> = items.iter().map(|i| i.sequence).collect();
        // Staged all or nothing, each sequence only if free: an append racing another with a
        // different item under the same sequence loses with ALREADY_EXISTS instead of
        // overwriting it. A lost race is read again and compared.
        for _ in 0..APPEND_TRIES {
            let staged = durable
                .staged_items(&namespace.name, id, &sequences)
                .await
                .map_err(unavailable)?;
            let mut fresh = Vec::with_capacity(items.len());
            let mut unchanged = 0;
            for item in &items {
                match staged.iter().find(|s| s.sequence == item.sequence) {
                    Some(same) if same == item => unchanged += 1,
                    Some(_) => {
                        return Err(status::refused(
                            tonic::Code::AlreadyExists,
                            "items",
                            format!(
                                "transaction '{id}': sequence {} is staged with a different item; nothing of this call was staged",
                                item.sequence
                            ),
                        ));
                    }
                    None => fresh.push(item.clone()),
                }
            }
            if durable
                .stage_items(&namespace.name, id, &fresh, keep)
                .await
                .map_err(unavailable)?
            {
                crate::metrics::transaction_items_staged(&namespace.name, fresh.len() as u64);
                return Ok(AppendItemsResponse {
                    staged: fresh.len() as u32,
                    unchanged,
                });
            }
        }
        Err(Status::aborted(format!(
            "transaction '{id}': other appends kept staging the same sequences ({APPEND_TRIES} tries); send this call again"
        )))
    }

    async fn commit(
        &self,
        runtime: &NamespaceRuntime,
        durable: &Arc<DurableStorage>,
        id: &str,
        item_count: u64,
        trace: Carrier,
    ) -> Result<WriteToLogResponse, Status> {
        let namespace = &runtime.config;
        let name = &namespace.name;
        if item_count == 0 || item_count > MAX_ITEMS_PER_TRANSACTION {
            return Err(status::refused(
                tonic::Code::InvalidArgument,
                "item_count",
                format!(
                    "item_count is {item_count}; expected 1 to {MAX_ITEMS_PER_TRANSACTION} (the transaction item limit)"
                ),
            ));
        }
        let keep = staging_keep(namespace);
        let txn = durable
            .transaction(name, id)
            .await
            .map_err(unavailable)?
            .ok_or_else(|| {
                status::refused(
                    tonic::Code::NotFound,
                    "transaction_id",
                    format!("transaction '{id}' of namespace '{name}' has no staged item"),
                )
            })?;
        let txn = if txn.state == TxnState::Open {
            if expired(namespace, &txn) {
                durable
                    .move_transaction(
                        name,
                        id,
                        TxnState::Open,
                        TxnState::Expired,
                        Some("not committed within its lifetime"),
                        keep,
                    )
                    .await
                    .map_err(unavailable)?;
                return Err(refused(namespace, id, TxnState::Expired));
            }
            check_complete(durable, name, id, item_count).await?;
            let committing = durable
                .begin_commit(name, id, &txn, item_count, keep)
                .await
                .map_err(unavailable)?;
            match committing {
                Some(committing) => committing,
                None => {
                    tracing::debug!(namespace = %name, transaction = %id, "commit raced another change");
                    durable
                        .transaction(name, id)
                        .await
                        .map_err(unavailable)?
                        .ok_or_else(|| Status::unavailable("the transaction's row vanished"))?
                }
            }
        } else {
            txn
        };
        if !txn.state.committed() {
            return Err(refused(namespace, id, txn.state));
        }
        let committed_count = txn.item_count.unwrap_or(item_count);
        if committed_count != item_count {
            return Err(status::refused(
                tonic::Code::FailedPrecondition,
                "item_count",
                format!(
                    "transaction '{id}' was committed with {committed_count} items, not {item_count}"
                ),
            ));
        }
        // The marker is sent again only while the commit may not have reached the broker.
        if txn.state != TxnState::Committing {
            return Ok(WriteToLogResponse {
                durable: wal_proto::v1::Trilean::True as i32,
                message: String::new(),
                entry_id: marker_id(id),
            });
        }
        queue_marker(&self.writes, runtime, durable, id, item_count, &txn, trace).await
    }
}

/// `answer`, counted in the commit metric.
fn counted(
    namespace: &str,
    answer: Result<WriteToLogResponse, Status>,
) -> Result<WriteToLogResponse, Status> {
    let outcome = match &answer {
        Ok(response) => match response.durable() {
            wal_proto::v1::Trilean::True => "true",
            wal_proto::v1::Trilean::False => "false",
            _ => "unknown",
        },
        Err(_) => "refused",
    };
    crate::metrics::transaction_committed(namespace, outcome);
    answer
}

#[tonic::async_trait]
impl Transactions for TransactionService {
    async fn append_items(
        &self,
        request: Request<AppendItemsRequest>,
    ) -> Result<Response<AppendItemsResponse>, Status> {
        let peer = request.extensions().get::<Peer>().cloned();
        let request = request.into_inner();
        let (runtime, durable) =
            self.namespace(peer.as_ref(), &request.namespace, &request.transaction_id)?;
        let first = request.items.iter().map(|item| item.sequence).min();
        let appended = self
            .append(&runtime, &durable, &request.transaction_id, request.items)
            .await?;
        let namespace = &runtime.config.name;
        if first.is_some_and(|first| {
            self.writes
                .append_fails(namespace, &request.transaction_id, first)
        }) {
            return Err(Status::unavailable(
                "the items are staged, but the answer is withheld by the test fault 'append-unavailable-once'",
            ));
        }
        Ok(Response::new(appended))
    }

    async fn commit_transaction(
        &self,
        request: Request<CommitTransactionRequest>,
    ) -> Result<Response<WriteToLogResponse>, Status> {
        let peer = request.extensions().get::<Peer>().cloned();
        let (span, trace) = commit_span(&request);
        let request = request.into_inner();
        let (runtime, durable) =
            self.namespace(peer.as_ref(), &request.namespace, &request.transaction_id)?;
        let answer = self
            .commit(
                &runtime,
                &durable,
                &request.transaction_id,
                request.item_count,
                trace,
            )
            .instrument(span)
            .await;
        counted(&runtime.config.name, answer).map(Response::new)
    }

    async fn write_transaction(
        &self,
        request: Request<WriteTransactionRequest>,
    ) -> Result<Response<WriteToLogResponse>, Status> {
        let peer = request.extensions().get::<Peer>().cloned();
        let (span, trace) = commit_span(&request);
        let request = request.into_inner();
        let (runtime, durable) =
            self.namespace(peer.as_ref(), &request.namespace, &request.transaction_id)?;
        let count = request.items.len() as u64;
        if let Some(item) = request.items.iter().find(|i| i.sequence >= count) {
            return Err(status::refused(
                tonic::Code::InvalidArgument,
                "items",
                format!(
                    "items: sequence {} in a transaction of {count} items; expected sequences 0 to {}",
                    item.sequence,
                    count.saturating_sub(1)
                ),
            ));
        }
        let id = &request.transaction_id;
        // Sent again after UNKNOWN: the items are staged and committed already, and only the
        // commit (its marker) is repeated.
        let txn = durable
            .transaction(&runtime.config.name, id)
            .await
            .map_err(unavailable)?;
        if !txn.is_some_and(|t| t.state.committed()) {
            self.append(&runtime, &durable, id, request.items).await?;
        }
        let answer = self
            .commit(&runtime, &durable, id, count, trace)
            .instrument(span)
            .await;
        counted(&runtime.config.name, answer).map(Response::new)
    }

    async fn abort_transaction(
        &self,
        request: Request<AbortTransactionRequest>,
    ) -> Result<Response<AbortTransactionResponse>, Status> {
        let peer = request.extensions().get::<Peer>().cloned();
        let request = request.into_inner();
        let (runtime, durable) =
            self.namespace(peer.as_ref(), &request.namespace, &request.transaction_id)?;
        let (name, id) = (&runtime.config.name, &request.transaction_id);
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
                    return Ok(Response::new(AbortTransactionResponse {}));
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
        durable.drop_items(name, id).await.map_err(unavailable)?;
        Ok(Response::new(AbortTransactionResponse {}))
    }
}

/// A commit as a span of the caller's trace (`commit_transaction`, whichever call commits),
/// and the trace context its marker carries on, so the consumer's apply of every item is in
/// the same trace.
fn commit_span<T: Named>(request: &Request<T>) -> (tracing::Span, Carrier) {
    let call = request.get_ref();
    let span = tracing::info_span!(
        "commit_transaction",
        namespace = %call.namespace(),
        transaction_id = %call.transaction_id(),
    );
    let caller = crate::service::trace_context(request);
    trace_context::follow(&span, &caller);
    let carried = trace_context::carried(&span, caller);
    (span, carried)
}

/// What a commit call names: its namespace and transaction.
trait Named {
    fn namespace(&self) -> &str;
    fn transaction_id(&self) -> &str;
}

impl Named for CommitTransactionRequest {
    fn namespace(&self) -> &str {
        &self.namespace
    }
    fn transaction_id(&self) -> &str {
        &self.transaction_id
    }
}

impl Named for WriteTransactionRequest {
    fn namespace(&self) -> &str {
        &self.namespace
    }
    fn transaction_id(&self) -> &str {
        &self.transaction_id
    }
}
