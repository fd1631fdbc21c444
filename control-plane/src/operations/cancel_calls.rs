//! The cancel calls of the Operations service: CancelEntry and ListCancellations.

use tonic::{Request, Response, Status};
use wal_proto::v1::{
    CancelEntryRequest, CancelEntryResponse, DestinationOutcome, DestinationState,
    ListCancellationsRequest, ListCancellationsResponse,
};
use wal_runtime::tls::Peer;

use super::cancellations::{self, CancellationRecord, Cancelled, MAX_PER_NAMESPACE};
use super::{Call, OperationsService, actor};
use crate::service::{now_micros, store_status};

/// The longest entry id a cancel takes (ids are UUIDs, or a caller's idempotency key).
const MAX_ID: usize = 512;

impl OperationsService {
    pub(super) async fn cancel_entry_call(
        &self,
        request: Request<CancelEntryRequest>,
    ) -> Result<Response<CancelEntryResponse>, Status> {
        let peer = request.extensions().get::<Peer>().cloned();
        let request = request.into_inner();
        let reason = request.reason.trim();
        if reason.is_empty() || reason.len() > 1024 {
            return Err(Status::invalid_argument(
                "reason must say why the entry is cancelled (1 to 1,024 characters); it is shown beside the cancellation",
            ));
        }
        if request.entry_id.is_empty() || request.entry_id.len() > MAX_ID {
            return Err(Status::invalid_argument(format!(
                "entry_id must be the entry's id (1 to {MAX_ID} bytes): the id WriteToLog answered with, or the idempotency key the write gave"
            )));
        }
        let call = Call {
            actor: actor(peer.as_ref(), &request.operator),
            verb: "cancel",
            namespace: request.namespace.clone(),
            subject: request.entry_id.clone(),
            detail: reason.to_owned(),
        };
        let namespace = self.namespace(&request.namespace).await?;
        self.check_admin(peer.as_ref(), &namespace, &call).await?;
        let delivery = self
            .receipts
            .delivery(&self.clusters, &namespace, &request.entry_id)
            .await;
        if let Ok(destinations) = &delivery
            && !destinations.is_empty()
            && destinations
                .iter()
                .all(|d| d.state() == DestinationState::Applied)
        {
            let message = format!(
                "entry '{}' of namespace '{}' was delivered already, to every destination ({}); nothing was cancelled",
                request.entry_id,
                namespace.name,
                names(destinations, DestinationState::Applied)
            );
            self.record(&call, &format!("refused: {message}")).await;
            return Err(Status::failed_precondition(message));
        }
        let now = now_micros();
        let keep = i64::try_from(cancellations::keep(&namespace).as_micros()).unwrap_or(i64::MAX);
        let asked = CancellationRecord {
            namespace: namespace.name.clone(),
            entry_id: request.entry_id.clone(),
            cancelled_by: call.actor.clone(),
            cancelled_at_micros: now,
            reason: reason.to_owned(),
            expires_at_micros: now.saturating_add(keep),
        };
        let (cancellation, changed) = match self.store.cancel(&asked).await {
            Ok(Cancelled::New(found)) => (found, true),
            Ok(Cancelled::Already(found)) => (found, false),
            Ok(Cancelled::Full {
                oldest_expires_at_micros,
            }) => {
                let message = format!(
                    "namespace '{}' has {MAX_PER_NAMESPACE} cancellations in force, the most it may have (consumers hold them all in memory); the oldest expires at {} µs since the epoch",
                    namespace.name, oldest_expires_at_micros
                );
                self.record(&call, &format!("refused: {message}")).await;
                return Err(Status::resource_exhausted(message));
            }
            Err(error) => {
                self.record(&call, &format!("failed: {error}")).await;
                return Err(store_status(error));
            }
        };
        if changed {
            self.announcer.stored();
        }
        let summary = summary(&request.entry_id, &delivery);
        let result = if changed { "done" } else { "unchanged" };
        self.record(&call, &format!("{result}: {summary}")).await;
        let (delivery_known, destinations) = match delivery {
            Ok(destinations) => (true, destinations),
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

/// The destinations in `state`, comma-separated.
fn names(destinations: &[DestinationOutcome], state: DestinationState) -> String {
    let named: Vec<&str> = destinations
        .iter()
        .filter(|d| d.state() == state)
        .map(|d| d.destination.as_str())
        .collect();
    named.join(", ")
}

/// The answer in words: what is cancelled, where it came too late, or why that is not known.
fn summary(id: &str, delivery: &super::receipts::Delivery) -> String {
    let destinations = match delivery {
        Err(unknown) => {
            return format!(
                "entry '{id}' is cancelled if it is not delivered yet: whether it was is not known, as {unknown}"
            );
        }
        Ok(destinations) => destinations,
    };
    let mut parts = Vec::new();
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
        let delivery = Ok(vec![
            outcome("default", DestinationState::Applied),
            outcome("events", DestinationState::Pending),
            outcome("cache", DestinationState::DeadLettered),
        ]);
        assert_eq!(
            summary("e1", &delivery),
            "entry 'e1' is cancelled: it will not be delivered to events; a redrive of it from \
             the DLQ will skip it for cache; it came too late for default, which applied it already"
        );
        let unknown = Err("namespace 'n' has no durable_storage".to_owned());
        assert_eq!(
            summary("e1", &unknown),
            "entry 'e1' is cancelled if it is not delivered yet: whether it was is not known, as \
             namespace 'n' has no durable_storage"
        );
    }
}
