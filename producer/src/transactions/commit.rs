//! A commit: the transaction's state change and, while it may not have reached the broker, its
//! marker (see the module above for why a commit never answers FALSE).

use std::sync::Arc;

use tonic::{Request, Status};
use wal_durable::{DurableStorage, Txn, TxnState, staging_keep};
use wal_proto::v1::WriteToLogResponse;
use wal_runtime::trace_context::{self, Carrier};

use super::checks::{check_complete, expired, refused, unavailable};
use super::marker::{marker_id, queue_marker};
use super::{MAX_ITEMS_PER_TRANSACTION, TransactionService};
use crate::registry::NamespaceRuntime;
use crate::status;

impl TransactionService {
    pub(super) async fn commit(
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
            begin_commit(runtime, durable, id, item_count, txn).await?
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
                ..WriteToLogResponse::default()
            });
        }
        queue_marker(&self.writes, runtime, durable, id, item_count, &txn, trace).await
    }
}

/// Moves an open transaction to `committing` once every item is staged, or refuses it: expired,
/// or missing items. Whoever wins a race (an abort, another commit), the transaction as it is
/// afterwards is returned, for the caller to answer from.
async fn begin_commit(
    runtime: &NamespaceRuntime,
    durable: &DurableStorage,
    id: &str,
    item_count: u64,
    txn: Txn,
) -> Result<Txn, Status> {
    let namespace = &runtime.config;
    let name = &namespace.name;
    let keep = staging_keep(namespace);
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
        Some(committing) => Ok(committing),
        None => {
            tracing::debug!(namespace = %name, transaction = %id, "commit raced another change");
            durable
                .transaction(name, id)
                .await
                .map_err(unavailable)?
                .ok_or_else(|| Status::unavailable("the transaction's row vanished"))
        }
    }
}

/// `answer`, counted in the commit metric.
pub(super) fn counted(
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

/// A commit as a span of the caller's trace (`commit_transaction`, whichever call commits),
/// and the trace context its marker carries on, so the consumer's apply of every item is in
/// the same trace.
pub(super) fn commit_span<T: super::Named>(request: &Request<T>) -> (tracing::Span, Carrier) {
    let call = request.get_ref();
    let span = tracing::info_span!(
        "commit_transaction",
        namespace = %call.namespace(),
        transaction_id = %call.transaction_id(),
    );
    let caller = crate::request::trace_context(request);
    trace_context::follow(&span, &caller);
    let carried = trace_context::carried(&span, caller);
    (span, carried)
}
