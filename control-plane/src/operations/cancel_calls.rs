//! The cancel calls of the Operations service: CancelEntry and ListCancellations.

use tonic::{Request, Response, Status};
use wal_namespaces::Namespace;
use wal_proto::v1::{
    CancelEntryRequest, CancelEntryResponse, DestinationOutcome, DestinationState,
    ListCancellationsRequest, ListCancellationsResponse,
};
use wal_runtime::tls::Peer;

use super::cancellations::{self, CancellationRecord, Cancelled, MAX_IN_FORCE, MAX_PER_NAMESPACE};
use super::receipts::{Delivery, Receipts};
use super::{Call, OperationsService, actor};
use crate::service::{now_micros, store_status};

/// The longest entry id: the producer's limit on an idempotency id.
const MAX_ID: usize = 256;

/// The id prefix of a two-phase write's commit marker (`txn:<transaction id>`).
const MARKER_PREFIX: &str = "txn:";

impl OperationsService {
    pub(super) async fn cancel_entry_call(
        &self,
        request: Request<CancelEntryRequest>,
    ) -> Result<Response<CancelEntryResponse>, Status> {
        let peer = request.extensions().get::<Peer>().cloned();
        let request = request.into_inner();
        let reason = checked(&request)?;
        let call = Call {
            actor: actor(peer.as_ref(), &request.operator),
            verb: "cancel",
            namespace: request.namespace.clone(),
            subject: request.entry_id.clone(),
            detail: reason.to_owned(),
        };
        let namespace = self.namespace(&request.namespace).await?;
        self.check_admin(peer.as_ref(), &namespace, &call).await?;
        let id = &request.entry_id;
        let delivery = self
            .durable
            .delivery((&self.clusters, &self.region), &namespace, id)
            .await;
        if let Ok(receipts) = &delivery
            && let Some(message) = too_late(&namespace, id, &receipts.destinations)
        {
            self.record(&call, &format!("refused: {message}")).await;
            return Err(Status::failed_precondition(message));
        }
        let (cancellation, changed) = self.store_cancellation(&call, &namespace, reason).await?;
        if changed {
            self.announcer.stored();
        }
        let summary = summary(&namespace.name, id, &delivery);
        let result = if changed { "done" } else { "unchanged" };
        self.record(&call, &format!("{result}: {summary}")).await;
        let (delivery_known, destinations) = match delivery {
            Ok(receipts) => (true, receipts.destinations),
            Err(_) => (false, Vec::new()),
        };
        Ok(Response::new(CancelEntryResponse {
            cancellation: Some(cancellation.to_proto()),
            changed,
            delivery_known,
            destinations,
            summary,
        }))
    }

    /// Stores the cancellation `call` asks for; the one in force, and whether it is new.
    async fn store_cancellation(
        &self,
        call: &Call,
        namespace: &Namespace,
        reason: &str,
    ) -> Result<(CancellationRecord, bool), Status> {
        let now = now_micros();
        let keep = i64::try_from(cancellations::keep(namespace).as_micros()).unwrap_or(i64::MAX);
        let asked = CancellationRecord {
            namespace: namespace.name.clone(),
            entry_id: call.subject.clone(),
            cancelled_by: call.actor.clone(),
            cancelled_at_micros: now,
            reason: reason.to_owned(),
            expires_at_micros: now.saturating_add(keep),
        };
        match self.store.cancel(&asked).await {
            Ok(Cancelled::New(found)) => Ok((found, true)),
            Ok(Cancelled::Already(found)) => Ok((found, false)),
            Ok(Cancelled::Full {
                of_namespace,
                oldest_expires_at_micros,
            }) => {
                let (cap, whose) = if of_namespace {
                    (
                        MAX_PER_NAMESPACE,
                        format!("namespace '{}' has", namespace.name),
                    )
                } else {
                    (MAX_IN_FORCE, "the namespaces together have".to_owned())
                };
                let message = format!(
                    "{whose} {cap} cancellations in force, the most allowed (consumers hold them all in memory); the oldest expires at {}",
                    rfc3339(oldest_expires_at_micros)
                );
                self.record(call, &format!("refused: {message}")).await;
                Err(Status::resource_exhausted(message))
            }
            Err(error) => {
                self.record(call, &format!("failed: {error}")).await;
                Err(store_status(error))
            }
        }
    }

    pub(super) async fn list_cancellations_call(
        &self,
        request: Request<ListCancellationsRequest>,
    ) -> Result<Response<ListCancellationsResponse>, Status> {
        self.check_reader(request.extensions().get::<Peer>())?;
        let namespace = request.into_inner().namespace;
        let namespace = Some(namespace.as_str()).filter(|n| !n.is_empty());
        let cancellations = self
            .store
            .cancellations(namespace, now_micros())
            .await
            .map_err(store_status)?;
        Ok(Response::new(ListCancellationsResponse {
            cancellations: cancellations
                .iter()
                .map(CancellationRecord::to_proto)
                .collect(),
        }))
    }
}

/// The request's reason, once the request is one a cancel can take.
fn checked(request: &CancelEntryRequest) -> Result<&str, Status> {
    let reason = request.reason.trim();
    if reason.is_empty() || reason.len() > 1024 {
        return Err(Status::invalid_argument(
            "reason must say why the entry is cancelled (1 to 1,024 bytes); it is shown beside the cancellation",
        ));
    }
    let id = &request.entry_id;
    if id.is_empty() || id.len() > MAX_ID {
        return Err(Status::invalid_argument(format!(
            "entry_id must be the entry's id (1 to {MAX_ID} bytes): the id WriteToLog answered with, or the idempotency id the write gave"
        )));
    }
    if id.starts_with(MARKER_PREFIX) {
        return Err(Status::failed_precondition(format!(
            "'{id}' is a two-phase write's commit marker: its transaction is committed and is applied whole; a transaction is aborted before its commit (AbortTransaction), not cancelled after"
        )));
    }
    Ok(reason)
}

/// Why a cancel is refused when every destination had applied the entry already.
fn too_late(
    namespace: &Namespace,
    id: &str,
    destinations: &[DestinationOutcome],
) -> Option<String> {
    let applied = |d: &DestinationOutcome| d.state() == DestinationState::Applied;
    if destinations.is_empty() || !destinations.iter().all(applied) {
        return None;
    }
    Some(format!(
        "entry '{id}' of namespace '{}' was delivered already, to every destination ({}); nothing was cancelled",
        namespace.name,
        names(destinations, DestinationState::Applied)
    ))
}

/// The destinations in `state`, comma-separated.
fn names(destinations: &[DestinationOutcome], state: DestinationState) -> String {
    let named: Vec<&str> = destinations
        .iter()
        .filter(|d| d.state() == state)
        .map(|d| d.destination.as_str())
        .collect();
    named.join(", ")
}

fn rfc3339(micros: i64) -> String {
    let at = std::time::UNIX_EPOCH
        + std::time::Duration::from_micros(u64::try_from(micros).unwrap_or(0));
    humantime::format_rfc3339_seconds(at).to_string()
}

/// The answer in words: what is cancelled, where it came too late, or why that is not known.
fn summary(namespace: &str, id: &str, delivery: &Delivery) -> String {
    let Receipts { destinations, any } = match delivery {
        Err(unknown) => {
            return format!(
                "entry '{id}' is cancelled if it is not delivered yet: whether it was is not known, as {unknown}"
            );
        }
        Ok(receipts) => receipts,
    };
    let mut parts = Vec::new();
    if !any {
        // With receipts recorded, none at all means not delivered yet, or an id that is wrong.
        parts.push(format!(
            "no destination has a receipt of it yet (not delivered yet, or no such entry in '{namespace}': check the id)"
        ));
    }
    let pending = names(destinations, DestinationState::Pending);
    if !pending.is_empty() {
        parts.push(format!("it will not be delivered to {pending}"));
    }
    let dead = names(destinations, DestinationState::DeadLettered);
    if !dead.is_empty() {
        parts.push(format!(
            "a redrive of it from the DLQ will skip it for {dead}"
        ));
    }
    let applied = names(destinations, DestinationState::Applied);
    if !applied.is_empty() {
        parts.push(format!(
            "it came too late for {applied}, which applied it already"
        ));
    }
    format!("entry '{id}' is cancelled: {}", parts.join("; "))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outcome(destination: &str, state: DestinationState) -> DestinationOutcome {
        DestinationOutcome {
            destination: destination.to_owned(),
            state: state.into(),
        }
    }

    #[test]
    fn the_summary_names_each_destination_by_what_the_cancel_does_there() {
        let delivery = Ok(Receipts {
            destinations: vec![
                outcome("default", DestinationState::Applied),
                outcome("events", DestinationState::Pending),
                outcome("cache", DestinationState::DeadLettered),
            ],
            any: true,
        });
        assert_eq!(
            summary("n", "e1", &delivery),
            "entry 'e1' is cancelled: it will not be delivered to events; a redrive of it from \
             the DLQ will skip it for cache; it came too late for default, which applied it already"
        );
        let none_yet = Ok(Receipts {
            destinations: vec![outcome("default", DestinationState::Pending)],
            any: false,
        });
        assert_eq!(
            summary("n", "e1", &none_yet),
            "entry 'e1' is cancelled: no destination has a receipt of it yet (not delivered yet, \
             or no such entry in 'n': check the id); it will not be delivered to default"
        );
        let unknown = Err("namespace 'n' has no durable_storage".to_owned());
        assert_eq!(
            summary("n", "e1", &unknown),
            "entry 'e1' is cancelled if it is not delivered yet: whether it was is not known, as \
             namespace 'n' has no durable_storage"
        );
    }

    #[test]
    fn a_commit_marker_is_not_cancelled() {
        let request = CancelEntryRequest {
            entry_id: "txn:t-1".to_owned(),
            reason: "why not".to_owned(),
            ..Default::default()
        };
        let refused = checked(&request).unwrap_err();
        assert_eq!(refused.code(), tonic::Code::FailedPrecondition);
        assert!(refused.message().contains("AbortTransaction"), "{refused}");
    }
}
