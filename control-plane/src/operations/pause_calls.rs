//! The pause and audit calls of the Operations service.

use tonic::{Request, Response, Status};
use wal_proto::v1::{
    AuditRequest, AuditResponse, ListPausesRequest, ListPausesResponse, PauseRequest,
    PauseResponse, ResumeRequest, ResumeResponse,
};
use wal_runtime::tls::Peer;

use super::audit::{self, AuditRecord};
use super::pauses::PauseRecord;
use super::{Call, OperationsService, actor, check_destination};
use crate::service::{now_micros, store_status};

impl OperationsService {
    pub(super) async fn pause_call(
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

    pub(super) async fn resume_call(
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
        // A deleted namespace's pauses stay (a namespace re-created under its name would start
        // paused): its last admins may still end them.
        let namespace = self.last_namespace(&request.namespace).await?;
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

    pub(super) async fn list_pauses_call(
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

    pub(super) async fn audit_call(
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
