//! The `Operations` gRPC service (proto/wal/v1/operations.proto): pausing and resuming delivery,
//! where each destination stands, reading and redriving dead letters, cancelling entries,
//! reading and aborting two-phase writes, and the audit trail. Every call that changes something, or is refused the grant to, is
//! audited before it answers. The calls are in files of their
//! own; this one holds what they share.

mod access_calls;
pub mod audit;
mod cancel_calls;
pub mod cancellations;
mod dead_letters;
pub mod destinations;
pub mod dlq;
mod durable_sessions;
mod export_calls;
pub mod lag;
mod pause_calls;
pub mod pauses;
mod purge_calls;
mod receipts;
mod redrive_calls;
mod redrive_job;
pub mod redrives;
mod replay_calls;
pub mod selection;
mod transaction_calls;

use std::sync::Arc;

use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tonic::{Request, Response, Status};
use wal_namespaces::{Action, Namespace};
use wal_proto::v1::operations_server::Operations;
use wal_proto::v1::{
    AccessRequest, AccessResponse, AuditRequest, AuditResponse, CancelEntryRequest,
    CancelEntryResponse, ExportDeadLettersRequest, GetRedriveRequest, ListCancellationsRequest,
    ListCancellationsResponse, ListDeadLettersRequest, ListDeadLettersResponse,
    ListDestinationsRequest, ListDestinationsResponse, ListPausesRequest, ListPausesResponse,
    ListTransactionsRequest, ListTransactionsResponse, PauseRequest, PauseResponse,
    PurgeDeadLettersRequest, PurgeDeadLettersResponse, Redrive, ResumeRequest, ResumeResponse,
    ShowDeadLetterRequest, ShowDeadLetterResponse, ShowTransactionRequest, StartRedriveRequest,
    StartReplayRequest, Transaction, TransactionAbortRequest, TransactionAbortResponse,
};
use wal_runtime::authorize::Authorizer;
use wal_runtime::tls::Peer;

use self::audit::AuditRecord;
use crate::service::{now_micros, store_status, stored_config};
use crate::store::NamespaceStore;
use crate::watch::Announcer;

#[derive(Debug)]
pub struct OperationsService {
    store: NamespaceStore,
    announcer: Announcer,
    authorizer: Authorizer,
    /// Where the namespaces' DLQs and durable storage are.
    clusters: wal_clusters::ClusterMap,
    /// This control plane's region (see `ControlPlaneSettings::region`).
    region: String,
    /// Sessions on the namespaces' durable storage: an entry's receipts, transactions' staging.
    durable: durable_sessions::DurableSessions,
    /// The redrives this control plane runs; each stops (its progress saved) at shutdown.
    jobs: TaskTracker,
    stopping: CancellationToken,
}

/// One call being carried out: who makes it and on what, for its audit record.
#[derive(Debug, Clone)]
struct Call {
    actor: String,
    verb: &'static str,
    namespace: String,
    subject: String,
    detail: String,
}

impl OperationsService {
    pub fn new(
        store: NamespaceStore,
        announcer: Announcer,
        authorizer: Authorizer,
        (clusters, region): (wal_clusters::ClusterMap, String),
    ) -> Self {
        Self {
            store,
            announcer,
            authorizer,
            clusters,
            region,
            durable: durable_sessions::DurableSessions::default(),
            jobs: TaskTracker::new(),
            stopping: CancellationToken::new(),
        }
    }

    /// Stops the redrives this control plane runs, each saving its progress and recording
    /// itself as stopped, and waits for them (at most `within`).
    pub fn stopper(&self) -> Stopper {
        Stopper {
            jobs: self.jobs.clone(),
            stopping: self.stopping.clone(),
        }
    }

    /// The namespace's current config; NOT_FOUND when there is none.
    async fn namespace(&self, name: &str) -> Result<Namespace, Status> {
        let latest = self.store.latest(name).await.map_err(store_status)?;
        match latest.as_ref().and_then(|v| v.config.as_deref()) {
            Some(text) => stored_config(name, text),
            None => Err(Status::not_found(format!(
                "namespace '{name}' is not held by this control plane{}",
                if latest.is_some() {
                    " (it was deleted)"
                } else {
                    ""
                }
            ))),
        }
    }

    /// The namespace's last config, a deleted one's included; NOT_FOUND when it never had one.
    async fn last_namespace(&self, name: &str) -> Result<Namespace, Status> {
        let last = self.store.last_config(name).await.map_err(store_status)?;
        match last.as_ref().and_then(|v| v.config.as_deref()) {
            Some(text) => stored_config(name, text),
            None => Err(Status::not_found(format!(
                "namespace '{name}' was never held by this control plane"
            ))),
        }
    }

    /// Whether `peer` holds `namespace`'s admin grant; a refusal is audited.
    async fn check_admin(
        &self,
        peer: Option<&Peer>,
        namespace: &Namespace,
        call: &Call,
    ) -> Result<(), Status> {
        match self.authorizer.check(peer, namespace, Action::Admin) {
            Ok(_) => Ok(()),
            Err(refused) => {
                self.record(call, &format!("refused: {}", refused.message()))
                    .await;
                Err(refused)
            }
        }
    }

    /// Reads need an authenticated caller when authorization is on.
    fn check_reader(&self, peer: Option<&Peer>) -> Result<(), Status> {
        if self.authorizer.is_on() && peer.and_then(|p| p.principal.as_ref()).is_none() {
            return Err(Status::unauthenticated(
                "authorization is on and this connection carries no principal (a client certificate the control plane maps to one)",
            ));
        }
        Ok(())
    }

    /// Records `call` and its result; see [`record`].
    async fn record(&self, call: &Call, result: &str) {
        record(&self.store, call, result).await;
    }
}

/// Records `call` and its result in the store and the log. A record that cannot be stored is
/// logged as such: the operation itself has happened (or been refused) by then.
async fn record(store: &NamespaceStore, call: &Call, result: &str) {
    let record = AuditRecord {
        id: uuid::Uuid::now_v7().to_string(),
        at_micros: now_micros(),
        actor: call.actor.clone(),
        verb: call.verb.to_owned(),
        namespace: call.namespace.clone(),
        subject: call.subject.clone(),
        detail: call.detail.clone(),
        result: result.to_owned(),
    };
    tracing::info!(target: "wal::audit", actor = %record.actor, verb = %record.verb, namespace = %record.namespace, subject = %record.subject, detail = %record.detail, result = %record.result, "operation");
    if let Err(error) = store.record(&record).await {
        tracing::error!(%error, verb = %record.verb, namespace = %record.namespace, "the audit record could not be stored; this log line is the only record");
    }
}

/// Who a call is recorded as: the connection's principal, else what the request states, else
/// "anonymous".
/// A time in microseconds since the Unix epoch as an operator reads it: RFC 3339, in seconds.
pub(crate) fn when(micros: i64) -> String {
    let at = std::time::UNIX_EPOCH
        + std::time::Duration::from_micros(u64::try_from(micros).unwrap_or(0));
    humantime::format_rfc3339_seconds(at).to_string()
}

fn actor(peer: Option<&Peer>, stated: &str) -> String {
    let principal: Option<Arc<str>> = peer.and_then(|p| p.principal.clone());
    let stated = wal_queue::prefix(stated.trim(), MAX_OPERATOR);
    match principal {
        Some(principal) if stated.is_empty() || *principal == *stated => principal.to_string(),
        Some(principal) => format!("{principal} (as {stated:?})"),
        None if stated.is_empty() => "anonymous".to_owned(),
        None => stated.to_owned(),
    }
}

/// The longest `operator` a request's record keeps: a name, not a document.
const MAX_OPERATOR: usize = 128;

/// Refuses a destination `namespace` does not have, naming those it has.
fn check_destination(namespace: &Namespace, destination: &str) -> Result<(), Status> {
    if destination.is_empty() {
        return Ok(());
    }
    // Every region the namespace replicates to, whichever region's consumer reads it.
    let names = namespace.destination_names("");
    if names.iter().any(|name| name == destination) {
        return Ok(());
    }
    Err(Status::invalid_argument(format!(
        "namespace '{}' has no destination '{destination}'; it has: {} (or leave the destination empty to pause them all)",
        namespace.name,
        names.join(", ")
    )))
}

/// Stops a control plane's redrives at shutdown; see [`OperationsService::stopper`].
#[derive(Debug, Clone)]
pub struct Stopper {
    jobs: TaskTracker,
    stopping: CancellationToken,
}

impl Stopper {
    pub async fn stop(&self, within: std::time::Duration) {
        self.stopping.cancel();
        self.jobs.close();
        if tokio::time::timeout(within, self.jobs.wait())
            .await
            .is_err()
        {
            tracing::warn!(
                left = self.jobs.len(),
                "redrives did not record their stop in time; each is taken over once stale"
            );
        }
    }
}

#[tonic::async_trait]
impl Operations for OperationsService {
    async fn pause(
        &self,
        request: Request<PauseRequest>,
    ) -> Result<Response<PauseResponse>, Status> {
        self.pause_call(request).await
    }

    async fn resume(
        &self,
        request: Request<ResumeRequest>,
    ) -> Result<Response<ResumeResponse>, Status> {
        self.resume_call(request).await
    }

    async fn list_pauses(
        &self,
        request: Request<ListPausesRequest>,
    ) -> Result<Response<ListPausesResponse>, Status> {
        self.list_pauses_call(request).await
    }

    async fn list_destinations(
        &self,
        request: Request<ListDestinationsRequest>,
    ) -> Result<Response<ListDestinationsResponse>, Status> {
        self.list_destinations_call(request).await
    }

    async fn audit(
        &self,
        request: Request<AuditRequest>,
    ) -> Result<Response<AuditResponse>, Status> {
        self.audit_call(request).await
    }

    async fn access(
        &self,
        request: Request<AccessRequest>,
    ) -> Result<Response<AccessResponse>, Status> {
        self.access_call(request).await
    }

    async fn list_dead_letters(
        &self,
        request: Request<ListDeadLettersRequest>,
    ) -> Result<Response<ListDeadLettersResponse>, Status> {
        self.list_dead_letters_call(request).await
    }

    async fn show_dead_letter(
        &self,
        request: Request<ShowDeadLetterRequest>,
    ) -> Result<Response<ShowDeadLetterResponse>, Status> {
        self.show_dead_letter_call(request).await
    }

    async fn start_redrive(
        &self,
        request: Request<StartRedriveRequest>,
    ) -> Result<Response<Redrive>, Status> {
        self.start_redrive_call(request).await
    }

    async fn get_redrive(
        &self,
        request: Request<GetRedriveRequest>,
    ) -> Result<Response<Redrive>, Status> {
        self.get_redrive_call(request).await
    }

    async fn start_replay(
        &self,
        request: Request<StartReplayRequest>,
    ) -> Result<Response<Redrive>, Status> {
        self.start_replay_call(request).await
    }

    async fn purge_dead_letters(
        &self,
        request: Request<PurgeDeadLettersRequest>,
    ) -> Result<Response<PurgeDeadLettersResponse>, Status> {
        self.purge_dead_letters_call(request).await
    }

    type ExportDeadLettersStream = export_calls::ExportStream;

    async fn export_dead_letters(
        &self,
        request: Request<ExportDeadLettersRequest>,
    ) -> Result<Response<Self::ExportDeadLettersStream>, Status> {
        self.export_dead_letters_call(request).await
    }

    async fn cancel_entry(
        &self,
        request: Request<CancelEntryRequest>,
    ) -> Result<Response<CancelEntryResponse>, Status> {
        self.cancel_entry_call(request).await
    }

    async fn list_cancellations(
        &self,
        request: Request<ListCancellationsRequest>,
    ) -> Result<Response<ListCancellationsResponse>, Status> {
        self.list_cancellations_call(request).await
    }

    async fn list_transactions(
        &self,
        request: Request<ListTransactionsRequest>,
    ) -> Result<Response<ListTransactionsResponse>, Status> {
        self.list_transactions_call(request).await
    }

    async fn show_transaction(
        &self,
        request: Request<ShowTransactionRequest>,
    ) -> Result<Response<Transaction>, Status> {
        self.show_transaction_call(request).await
    }

    async fn abort_transaction(
        &self,
        request: Request<TransactionAbortRequest>,
    ) -> Result<Response<TransactionAbortResponse>, Status> {
        self.abort_transaction_call(request).await
    }
}
