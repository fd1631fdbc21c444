//! The Transactions service (proto/wal/v1/transaction.proto): items staged in the namespace's
//! durable storage, then one commit marker on its queue. The commit answers TRUE only once the
//! broker acknowledged the marker; from then on the consumer applies every item.
//!
//! A commit moves the transaction `open` -> `committing` with a compare-and-set before the
//! marker is sent, so a commit racing an abort, or another commit, has one winner; a commit of a
//! transaction already `committing` or further sends the marker again (the first may have been
//! lost or its answer UNKNOWN): the consumer applies a transaction once, whichever marker comes
//! first, and acknowledges the other. A committing transaction is never opened again, so a
//! commit answers TRUE or UNKNOWN, never FALSE. A transaction in one call (WriteTransaction)
//! nobody has opened is staged and committed at once, with no `open` state ([`whole`]).

use std::sync::Arc;
use tracing::Instrument as _;

use tonic::{Request, Response, Status};
use wal_durable::{DurableStorage, StagedItem, staging_keep};
use wal_proto::v1::transactions_server::Transactions;
use wal_proto::v1::{
    AbortTransactionRequest, AbortTransactionResponse, AppendItemsRequest, AppendItemsResponse,
    CommitTransactionRequest, TransactionItem, WriteToLogResponse, WriteTransactionRequest,
};
use wal_runtime::tls::Peer;

use crate::registry::NamespaceRuntime;
use crate::service::WriteService;
use crate::status;

mod abort;
mod checks;
mod commit;
mod marker;
mod whole;

use self::checks::{check_id, check_items, refuse_unless_open, unavailable};
use self::commit::{commit_span, counted};
pub(crate) use self::marker::queue_marker;

/// The most items one call may carry.
pub const MAX_ITEMS_PER_CALL: usize = 1000;
/// The most payload bytes one call may carry: its items are staged in one CQL batch, which must
/// stay under Cassandra's largest mutation (half a 32 MiB commit log segment by default).
pub const MAX_BYTES_PER_CALL: usize = 4 * 1024 * 1024;
/// The most items one transaction may have.
pub const MAX_ITEMS_PER_TRANSACTION: u64 = 100_000;
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

    /// The call, its namespace's runtime and durable storage, or why a transaction cannot use
    /// them (an unknown namespace, a caller without the write grant, no durable storage, a bad
    /// transaction id).
    fn resolve<T: Named>(
        &self,
        request: Request<T>,
    ) -> Result<(T, Arc<NamespaceRuntime>, Arc<DurableStorage>), Status> {
        let peer = request.extensions().get::<Peer>().cloned();
        let call = request.into_inner();
        let name = call.namespace();
        let runtime = self
            .writes
            .runtime(name)
            .ok_or_else(|| status::unknown_namespace(name))?;
        self.writes.authorize(peer.as_ref(), &runtime)?;
        let durable = runtime.durable.clone().ok_or_else(|| {
            status::refused(
                tonic::Code::FailedPrecondition,
                "namespace",
                format!(
                    "namespace '{name}' has no durable_storage; two-phase writes stage their items there"
                ),
            )
        })?;
        check_id(call.transaction_id())?;
        Ok((call, runtime, durable))
    }

    async fn append(
        &self,
        runtime: &NamespaceRuntime,
        durable: &DurableStorage,
        id: &str,
        items: Vec<TransactionItem>,
    ) -> Result<AppendItemsResponse, Status> {
        let items = check_items(&runtime.config, items)?;
        self.append_checked(runtime, durable, id, &items).await
    }

    /// Stages items [`check_items`] passed.
    pub(super) async fn append_checked(
        &self,
        runtime: &NamespaceRuntime,
        durable: &DurableStorage,
        id: &str,
        items: &[StagedItem],
    ) -> Result<AppendItemsResponse, Status> {
        let namespace = &runtime.config;
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
            let Compared { fresh, unchanged } = compared(items, &staged).map_err(|sequence| {
                status::refused(
                    tonic::Code::AlreadyExists,
                    "items",
                    format!(
                        "transaction '{id}': sequence {sequence} is staged with a different item; nothing of this call was staged"
                    ),
                )
            })?;
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
}

/// A call's items against what is staged under their sequences.
struct Compared {
    /// Items whose sequence nothing is staged under.
    fresh: Vec<StagedItem>,
    /// Items staged as they are.
    unchanged: u32,
}

/// Compares `items` with `staged` (what is staged under their sequences); Err names the first
/// sequence staged with a different item.
fn compared(items: &[StagedItem], staged: &[StagedItem]) -> Result<Compared, u64> {
    let by_sequence: std::collections::HashMap<u64, &StagedItem> =
        staged.iter().map(|s| (s.sequence, s)).collect();
    let mut fresh = Vec::new();
    let mut unchanged = 0;
    for item in items {
        match by_sequence.get(&item.sequence) {
            Some(same) if *same == item => unchanged += 1,
            Some(_) => return Err(item.sequence),
            None => fresh.push(item.clone()),
        }
    }
    Ok(Compared { fresh, unchanged })
}

#[tonic::async_trait]
impl Transactions for TransactionService {
    async fn append_items(
        &self,
        request: Request<AppendItemsRequest>,
    ) -> Result<Response<AppendItemsResponse>, Status> {
        let (request, runtime, durable) = self.resolve(request)?;
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
        let (span, trace) = commit_span(&request);
        let (request, runtime, durable) = self.resolve(request)?;
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
        let (span, trace) = commit_span(&request);
        let (request, runtime, durable) = self.resolve(request)?;
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
        let answer = self
            .write_whole(&runtime, &durable, id, request.items, trace)
            .instrument(span)
            .await;
        counted(&runtime.config.name, answer).map(Response::new)
    }

    async fn abort_transaction(
        &self,
        request: Request<AbortTransactionRequest>,
    ) -> Result<Response<AbortTransactionResponse>, Status> {
        let (request, runtime, durable) = self.resolve(request)?;
        self.abort(&runtime, &durable, &request.transaction_id)
            .await?;
        Ok(Response::new(AbortTransactionResponse {}))
    }
}

/// What every transaction call names: its namespace and transaction.
trait Named {
    fn namespace(&self) -> &str;
    fn transaction_id(&self) -> &str;
}

macro_rules! named {
    ($($call:ty),*) => {$(
        impl Named for $call {
            fn namespace(&self) -> &str {
                &self.namespace
            }
            fn transaction_id(&self) -> &str {
                &self.transaction_id
            }
        }
    )*};
}

named!(
    AppendItemsRequest,
    CommitTransactionRequest,
    WriteTransactionRequest,
    AbortTransactionRequest
);
