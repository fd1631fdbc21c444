//! PurgeDeadLetters: dead letters removed for good, counted first.

use tonic::{Request, Response, Status};
use wal_proto::v1::{PurgeDeadLettersRequest, PurgeDeadLettersResponse};
use wal_runtime::tls::Peer;

use super::dead_letters::{dlq_status, filter_of};
use super::dlq::purge::purge;
use super::redrives::{RUNNING, STALE_AFTER};
use super::{Call, OperationsService, actor};
use crate::service::{now_micros, store_status};

impl OperationsService {
    pub(super) async fn purge_dead_letters_call(
        &self,
        request: Request<PurgeDeadLettersRequest>,
    ) -> Result<Response<PurgeDeadLettersResponse>, Status> {
        let peer = request.extensions().get::<Peer>().cloned();
        let request = request.into_inner();
        let filter = filter_of(request.filter.as_ref())?;
        let call = Call {
            actor: actor(peer.as_ref(), &request.operator),
            verb: "purge",
            namespace: request.namespace.clone(),
            subject: String::new(),
            detail: match request.expect {
                Some(expected) => format!("{} (expecting {expected})", filter.key()),
                None => filter.key(),
            },
        };
        let namespace = self.namespace(&request.namespace).await?;
        if request.dry_run {
            self.check_reader(peer.as_ref())?;
        } else {
            self.check_admin(peer.as_ref(), &namespace, &call).await?;
            self.check_no_redrive(&namespace.name, &call).await?;
        }
        let dead = self.dead_letters(&namespace).await?;
        // A task of its own: a caller that goes away does not cut the purge short, which
        // ends (every SQS message it held removed or visible again) and is audited.
        let (store, dry_run, expect) = (self.store.clone(), request.dry_run, request.expect);
        let audited = call.clone();
        let purging = tokio::spawn(async move {
            let ended = purge(&dead, &filter, dry_run, expect).await;
            if !dry_run {
                let result = match &ended {
                    Ok(purged) => format!("done: {} purged", purged.total()),
                    Err(stopped) if stopped.purged.total() == 0 => {
                        format!("refused: {}", stopped.error)
                    }
                    Err(stopped) => format!(
                        "failed after {} purged: {}",
                        stopped.purged.total(),
                        stopped.error
                    ),
                };
                super::record(&store, &audited, &result).await;
            }
            ended
        });
        let purged = match purging.await {
            Ok(Ok(purged)) => purged,
            Ok(Err(stopped)) => return Err(dlq_status(stopped.error)),
            Err(panicked) => return Err(Status::internal(format!("the purge failed: {panicked}"))),
        };
        if !request.dry_run {
            tracing::info!(namespace = %namespace.name, purged = purged.total(), by = %call.actor, "dead letters purged");
        }
        Ok(Response::new(PurgeDeadLettersResponse {
            purged: purged.total(),
            by_dlq: purged.by_dlq.into_iter().collect(),
            dry_run: request.dry_run,
        }))
    }

    /// A purge waits for the namespace's redrive to end: both read and change the same DLQs.
    async fn check_no_redrive(&self, namespace: &str, call: &Call) -> Result<(), Status> {
        let redrive = self.store.redrive(namespace).await.map_err(store_status)?;
        let stale = i64::try_from(STALE_AFTER.as_micros()).unwrap_or(i64::MAX);
        let Some(running) =
            redrive.filter(|r| r.state == RUNNING && now_micros() - r.updated_at_micros < stale)
        else {
            return Ok(());
        };
        let refusal = format!(
            "a redrive of namespace '{namespace}' is running ({}, started by {}); purge once it ends (walctl dlq status {namespace})",
            running.id, running.started_by
        );
        self.record(call, &format!("refused: {refusal}")).await;
        Err(Status::failed_precondition(refusal))
    }
}
