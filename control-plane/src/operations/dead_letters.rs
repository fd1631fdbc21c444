//! Reading a namespace's dead letters: ListDeadLetters and ShowDeadLetter.

use tonic::{Request, Response, Status};
use wal_namespaces::Namespace;
use wal_proto::v1::{
    DeadLetterFilter, ErrorClass, ListDeadLettersRequest, ListDeadLettersResponse,
    ShowDeadLetterRequest, ShowDeadLetterResponse,
};
use wal_runtime::tls::Peer;

use super::OperationsService;
use super::dlq::list::{list, show};
use super::dlq::{Class, DeadLetters, DlqError, Filter};

/// The most entries one list returns.
const MOST_LISTED: u32 = 10_000;

impl OperationsService {
    /// The namespace's DLQs, connected.
    pub(super) async fn dead_letters(&self, namespace: &Namespace) -> Result<DeadLetters, Status> {
        DeadLetters::connect(&self.clusters, namespace)
            .await
            .map_err(dlq_status)
    }

    pub(super) async fn list_dead_letters_call(
        &self,
        request: Request<ListDeadLettersRequest>,
    ) -> Result<Response<ListDeadLettersResponse>, Status> {
        self.check_reader(request.extensions().get::<Peer>())?;
        let request = request.into_inner();
        let filter = filter_of(request.filter.as_ref())?;
        let limit = match request.limit {
            0 => 100,
            n => n.min(MOST_LISTED),
        } as usize;
        let namespace = self.namespace(&request.namespace).await?;
        let dead = self.dead_letters(&namespace).await?;
        let listed = list(&dead, &filter, limit).await.map_err(dlq_status)?;
        Ok(Response::new(listed))
    }

    pub(super) async fn show_dead_letter_call(
        &self,
        request: Request<ShowDeadLetterRequest>,
    ) -> Result<Response<ShowDeadLetterResponse>, Status> {
        // A dead letter's payload is the namespace's data: its admins' to read, as the DLQ's
        // broker credentials were before the control plane read it for them.
        let peer = request.extensions().get::<Peer>().cloned();
        let request = request.into_inner();
        let namespace = self.namespace(&request.namespace).await?;
        self.authorizer
            .check(peer.as_ref(), &namespace, wal_namespaces::Action::Admin)?;
        let dead = self.dead_letters(&namespace).await?;
        let copies = show(&dead, &request.id).await.map_err(dlq_status)?;
        if copies.is_empty() {
            return Err(Status::not_found(format!(
                "no dead letter with id '{}' in the DLQs of namespace '{}'; ListDeadLetters (walctl dlq list {}) shows those there are",
                request.id, request.namespace, request.namespace
            )));
        }
        Ok(Response::new(ShowDeadLetterResponse { copies }))
    }
}

/// The request's filter, checked.
pub(super) fn filter_of(filter: Option<&DeadLetterFilter>) -> Result<Filter, Status> {
    let Some(filter) = filter else {
        return Ok(Filter::default());
    };
    let bound = |micros: i64| (micros != 0).then_some(micros);
    let (since_micros, until_micros) = (bound(filter.since_micros), bound(filter.until_micros));
    if let (Some(since), Some(until)) = (since_micros, until_micros)
        && since >= until
    {
        return Err(Status::invalid_argument(
            "filter.since_micros must be before filter.until_micros; nothing is in that range",
        ));
    }
    let class = match ErrorClass::try_from(filter.class) {
        Ok(ErrorClass::Unspecified) => None,
        Ok(ErrorClass::Retryable) => Some(Class::Retryable),
        Ok(ErrorClass::Permanent) => Some(Class::Permanent),
        Err(_) => {
            return Err(Status::invalid_argument(format!(
                "filter.class {} is not an ErrorClass (0 any, 1 retryable, 2 permanent)",
                filter.class
            )));
        }
    };
    Ok(Filter {
        since_micros,
        until_micros,
        class,
    })
}

pub(super) fn dlq_status(error: DlqError) -> Status {
    match error {
        DlqError::Usage(message) => Status::failed_precondition(message),
        DlqError::Broker(message) => Status::unavailable(message),
        DlqError::Stopped => Status::unavailable(error.to_string()),
    }
}
