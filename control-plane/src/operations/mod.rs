//! The `Operations` gRPC service (proto/wal/v1/operations.proto): pausing and resuming delivery,
//! and the audit trail of both. Every call that changes something, or is refused the grant to,
//! is audited before it answers.

pub mod audit;
pub mod dlq;
pub mod pauses;

use std::sync::Arc;

use tonic::{Request, Response, Status};
use wal_namespaces::{Action, Namespace};
use wal_proto::v1::operations_server::Operations;
use wal_proto::v1::{
    AuditRequest, AuditResponse, ListPausesRequest, ListPausesResponse, PauseRequest,
    PauseResponse, ResumeRequest, ResumeResponse,
};
use wal_runtime::authorize::Authorizer;
use wal_runtime::tls::Peer;

use self::audit::AuditRecord;
use self::pauses::PauseRecord;
use crate::service::{now_micros, store_status, stored_config};
use crate::store::NamespaceStore;
use crate::watch::Announcer;

#[derive(Debug)]
pub struct OperationsService {
    store: NamespaceStore,
    announcer: Announcer,
    authorizer: Authorizer,
}

/// One call being carried out: who makes it and on what, for its audit record.
struct Call {
    actor: String,
    verb: &'static str,
    namespace: String,
    subject: String,
    detail: String,
}

impl OperationsService {
    pub fn new(store: NamespaceStore, announcer: Announcer, authorizer: Authorizer) -> Self {
        Self {
            store,
            announcer,
            authorizer,
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

    /// Records `call` and its result in the store and the log. A record that cannot be stored
    /// is logged as such: the operation itself has happened (or been refused) by then.
    async fn record(&self, call: &Call, result: &str) {
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
        if let Err(error) = self.store.record(&record).await {
            tracing::error!(%error, verb = %record.verb, namespace = %record.namespace, "the audit record could not be stored; this log line is the only record");
        }
    }
}

/// Who a call is recorded as: the connection's principal, else what the request states, else
/// "anonymous".
fn actor(peer: Option<&Peer>, stated: &str) -> String {
    let principal: Option<Arc<str>> = peer.and_then(|p| p.principal.clone());
    let stated = stated.trim();
    match principal {
        Some(principal) if stated.is_empty() || *principal == *stated => principal.to_string(),
        Some(principal) => format!("{principal} (as {stated:?})"),
        None if stated.is_empty() => "anonymous".to_owned(),
        None => stated.to_owned(),
    }
}

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

#[tonic::async_trait]
impl Operations for OperationsService {
    async fn pause(
        &self,
        request: Request<PauseRequest>,
    ) -> Result<Response<PauseResponse>, Status> {
        let peer = request.extensions().get::<Peer>().cloned();
        let request = request.into_inner();
        let reason = request.reason.trim();
        if reason.is_empty() || reason.len() > 1024 {
            return Err(Status::invalid_argument(
                "reason must say why delivery is paused (1 to 1,024 characters); it is shown beside the pause",
            ));
        }
        let call = Call {
            actor: actor(peer.as_ref(), &request.operator),
            verb: "pause",
            namespace: request.namespace.clone(),
            subject: request.destination.clone(),
            detail: reason.to_owned(),
        };
        let namespace = self.namespace(&request.namespace).await?;
        self.check_admin(peer.as_ref(), &namespace, &call).await?;
        check_destination(&namespace, &request.destination)?;
        let asked = PauseRecord {
            namespace: request.namespace,
            destination: request.destination,
            paused_by: call.actor.clone(),
            paused_at_micros: now_micros(),
            reason: reason.to_owned(),
        };
        let (pause, changed) = match self.store.pause(&asked).await {
            Ok(done) => done,
            Err(error) => {
                self.record(&call, &format!("failed: {error}")).await;
                return Err(store_status(error));
            }
        };
        if changed {
            self.announcer.stored();
        }
        self.record(&call, if changed { "done" } else { "unchanged" })
            .await;
        Ok(Response::new(PauseResponse {
            pause: Some(pause.to_proto()),
            changed,
        }))
    }

    async fn resume(
        &self,
        request: Request<ResumeRequest>,
    ) -> Result<Response<ResumeResponse>, Status> {
        let peer = request.extensions().get::<Peer>().cloned();
        let request = request.into_inner();
        let call = Call {
            actor: actor(peer.as_ref(), &request.operator),
            verb: "resume",
            namespace: request.namespace.clone(),
            subject: request.destination.clone(),
            detail: String::new(),
        };
        let namespace = self.namespace(&request.namespace).await?;
        self.check_admin(peer.as_ref(), &namespace, &call).await?;
        let ended = match self
            .store
            .resume(&request.namespace, &request.destination)
            .await
        {
            Ok(ended) => ended,
            Err(error) => {
                self.record(&call, &format!("failed: {error}")).await;
                return Err(store_status(error));
            }
        };
        if ended.is_some() {
            self.announcer.stored();
        }
        self.record(&call, if ended.is_some() { "done" } else { "unchanged" })
            .await;
        let still_paused = self
            .store
            .pauses(Some(&request.namespace))
            .await
            .map_err(store_status)?;
        Ok(Response::new(ResumeResponse {
            changed: ended.is_some(),
            ended: ended.as_ref().map(PauseRecord::to_proto),
            still_paused: still_paused.iter().map(PauseRecord::to_proto).collect(),
        }))
    }

    async fn list_pauses(
        &self,
        request: Request<ListPausesRequest>,
    ) -> Result<Response<ListPausesResponse>, Status> {
        self.check_reader(request.extensions().get::<Peer>())?;
        let namespace = request.into_inner().namespace;
        let pauses = self
            .store
            .pauses(Some(namespace.as_str()).filter(|n| !n.is_empty()))
            .await
            .map_err(store_status)?;
        Ok(Response::new(ListPausesResponse {
            pauses: pauses.iter().map(PauseRecord::to_proto).collect(),
        }))
    }

    async fn audit(
        &self,
        request: Request<AuditRequest>,
    ) -> Result<Response<AuditResponse>, Status> {
        self.check_reader(request.extensions().get::<Peer>())?;
        let request = request.into_inner();
        let limit = if request.limit == 0 {
            audit::DEFAULT
        } else {
            request.limit
        };
        let records = self
            .store
            .audit(
                Some(request.namespace.as_str()).filter(|n| !n.is_empty()),
                limit,
            )
            .await
            .map_err(store_status)?;
        Ok(Response::new(AuditResponse {
            records: records.iter().map(AuditRecord::to_proto).collect(),
        }))
    }
}
