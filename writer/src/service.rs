//! The RegionWriter service: a call's entries checked, admitted against the in-flight bound,
//! applied concurrently to this region's targets, and answered one outcome each.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::Semaphore;
use tonic::{Request, Response, Status};
use tracing::Instrument as _;
use wal_apply::clients::{ClientSettings, Clients};
use wal_apply::{Mutation, TargetError, TargetRegistry, cache, cql};
use wal_namespaces::Action;
use wal_proto::v1::region_writer_server::RegionWriter;
use wal_proto::v1::{ApplyOutcome, ApplyReplicatedRequest, ApplyReplicatedResponse, ApplyResult};
use wal_queue::entry::{Body, Entry};
use wal_runtime::authorize::Authorizer;
use wal_runtime::tls::Peer;
use wal_targets::region::{APPLY_KINDS, same_region};

use crate::metrics;

/// What a writer's denials are counted under, in place of a namespace.
const WRITER_SCOPE: &str = "(region writer)";

/// The most entries one call may carry.
pub const MAX_ENTRIES_PER_CALL: usize = 1000;

/// What a writer runs on.
#[derive(Debug, Clone)]
pub struct WriterSettings {
    /// This writer's region; entries that started here are refused.
    pub region: String,
    /// TLS on the gRPC port, or plaintext.
    pub tls: Option<wal_runtime::tls::ServerTls>,
    /// Who may call: with authorization on, the super-users only.
    pub authorizer: Authorizer,
    /// Where this region's caches and CQL nodes are.
    pub clients: ClientSettings,
    /// Entries applied at once, across calls.
    pub max_in_flight: u32,
    /// The longest one apply may take.
    pub apply_timeout: Duration,
}

#[derive(Debug)]
pub struct RegionWriterService {
    region: String,
    authorizer: Authorizer,
    targets: TargetRegistry,
    in_flight: Arc<Semaphore>,
    max_in_flight: u32,
    apply_timeout: Duration,
}

impl RegionWriterService {
    /// The service, with clients that connect on first use: a cache or CQL cluster down at
    /// start-up is answered UNAVAILABLE per entry until it is back, not a failed start.
    pub fn new(settings: WriterSettings) -> anyhow::Result<Self> {
        let clients = Arc::new(Clients::new(settings.clients)?);
        // Only stores that do not replicate themselves: nothing applied here is published on.
        let targets = TargetRegistry::empty(clients)
            .with::<cache::Cache>()
            .with::<cql::Cql>();
        Ok(Self {
            region: settings.region,
            authorizer: settings.authorizer,
            targets,
            in_flight: Arc::new(Semaphore::new(settings.max_in_flight as usize)),
            max_in_flight: settings.max_in_flight,
            apply_timeout: settings.apply_timeout,
        })
    }

    /// One entry applied here, or why not.
    async fn apply(&self, entry: &Entry) -> Result<(), TargetError> {
        if same_region(&entry.origin_region, &self.region) {
            return Err(TargetError::permanent(format!(
                "entry {} started in this writer's region '{}'; a writer applies only what other regions replicate to it",
                entry.id, self.region
            )));
        }
        if !entry.destination_region.is_empty()
            && !same_region(&entry.destination_region, &self.region)
        {
            return Err(TargetError::permanent(format!(
                "entry {} is for region '{}', not this writer's region '{}'",
                entry.id, entry.destination_region, self.region
            )));
        }
        if entry.heartbeat {
            // Answered, nothing applied: the sender learns how far behind it is.
            return Ok(());
        }
        let Some(target) = &entry.target else {
            return Err(TargetError::permanent(
                "the entry names no target; expected the destination's cache or cql target",
            ));
        };
        let applies = wal_targets::Kind::from_name(&target.kind)
            .is_ok_and(|kind| APPLY_KINDS.contains(&kind));
        if !applies {
            return Err(TargetError::permanent(format!(
                "a writer applies to cache and cql targets, not '{}'",
                target.kind
            )));
        }
        let payload = match &entry.body {
            Some(Body::Payload(payload)) => payload,
            Some(Body::ClaimCheck(_) | Body::Transaction(_)) | None => {
                return Err(TargetError::permanent(
                    "the entry carries no payload; the sender resolves claim checks before replicating, and replicates no transaction markers",
                ));
            }
        };
        let attempt = async {
            let target = self.targets.resolve(target).await?;
            let mutation = Mutation {
                entry,
                payload,
                trace: None,
            };
            target.apply(mutation).await
        };
        match tokio::time::timeout(self.apply_timeout, attempt).await {
            Ok(applied) => applied,
            Err(_) => Err(TargetError::retryable(format!(
                "the {} target did not answer within {:?}",
                target.kind, self.apply_timeout
            ))),
        }
    }
}

#[tonic::async_trait]
impl RegionWriter for RegionWriterService {
    async fn apply_replicated(
        &self,
        request: Request<ApplyReplicatedRequest>,
    ) -> Result<Response<ApplyReplicatedResponse>, Status> {
        // Before anything is admitted or applied: a denied call changes nothing.
        let peer = request.extensions().get::<Peer>().cloned();
        self.authorizer
            .check_super_user(peer.as_ref(), WRITER_SCOPE, Action::Replicate)?;
        let request = request.into_inner();
        let count = request.entries.len();
        if count == 0 || count > MAX_ENTRIES_PER_CALL {
            return Err(Status::invalid_argument(format!(
                "entries: {count} in one call; expected 1 to {MAX_ENTRIES_PER_CALL}"
            )));
        }
        // Admitted whole or not at all, before anything is applied, so a refusal is safe to send
        // again.
        let Ok(_permits) = Arc::clone(&self.in_flight).try_acquire_many_owned(count as u32) else {
            metrics::overloaded(&request.source_region);
            return Err(Status::resource_exhausted(format!(
                "the writer of region '{}' has no room for {count} more entries (it applies at most {} at once); send again after a backoff",
                self.region, self.max_in_flight
            )));
        };
        let started = Instant::now();
        let applied = futures::future::join_all(
            request
                .entries
                .iter()
                .map(|e| self.apply(e).instrument(apply_span(e))),
        )
        .await;
        let outcomes: Vec<ApplyOutcome> = request
            .entries
            .iter()
            .zip(applied)
            .map(|(entry, applied)| {
                let outcome = outcome(applied);
                if outcome.result() == ApplyResult::Permanent {
                    tracing::warn!(namespace = %entry.namespace, entry_id = %entry.id, origin = %entry.origin_region, reason = %outcome.reason, "replicated entry refused");
                }
                outcome
            })
            .collect();
        metrics::entries(
            request
                .entries
                .iter()
                .zip(&outcomes)
                .map(|(entry, outcome)| {
                    (
                        entry.namespace.as_str(),
                        entry.origin_region.as_str(),
                        outcome.result(),
                    )
                }),
        );
        metrics::call_seconds(started.elapsed());
        Ok(Response::new(ApplyReplicatedResponse { outcomes }))
    }
}

fn outcome(applied: Result<(), TargetError>) -> ApplyOutcome {
    let (result, reason) = match applied {
        Ok(()) => (ApplyResult::Applied, String::new()),
        Err(error) => {
            let result = match error {
                TargetError::Retryable { .. } => ApplyResult::Retryable,
                // The sending consumer holds the region's entries either way. The wait the
                // target asked for does not cross regions: the sender's breaker probes this
                // writer at its own pace, and each probe that reaches a throttled target is
                // answered Unavailable again.
                TargetError::Unavailable { .. } | TargetError::Throttled { .. } => {
                    ApplyResult::Unavailable
                }
                TargetError::Permanent { .. } => ApplyResult::Permanent,
            };
            (result, error.to_string())
        }
    };
    ApplyOutcome {
        result: result as i32,
        reason,
    }
}

/// Serves the RegionWriter service, with health and reflection, on `listener` until `shutdown`
/// completes; then reports NOT_SERVING, takes no new calls and answers those in progress.
pub async fn serve(
    settings: WriterSettings,
    listener: tokio::net::TcpListener,
    shutdown: impl std::future::Future<Output = ()> + Send,
) -> anyhow::Result<()> {
    use wal_proto::v1::region_writer_server::RegionWriterServer;
    let tls = settings.tls.clone();
    let service = RegionWriterServer::new(RegionWriterService::new(settings)?)
        // A call of 1000 entries of a namespace's largest payloads.
        .max_decoding_message_size(64 * 1024 * 1024);
    let (health, router) =
        wal_runtime::process::standard_services(tonic::transport::Server::builder())?;
    health
        .set_serving::<RegionWriterServer<RegionWriterService>>()
        .await;
    let signal = async move {
        shutdown.await;
        health
            .set_not_serving::<RegionWriterServer<RegionWriterService>>()
            .await;
    };
    let router = router.add_service(service);
    match tls {
        Some(tls) => {
            router
                .serve_with_incoming_shutdown(tls.incoming(listener), signal)
                .await?
        }
        None => {
            let incoming =
                tonic::transport::server::TcpIncoming::from(listener).with_nodelay(Some(true));
            router
                .serve_with_incoming_shutdown(incoming, signal)
                .await?
        }
    }
    Ok(())
}

/// A replicated entry's apply as a span of the write's trace (the sending attempt's child), when
/// this writer exports spans; none otherwise.
fn apply_span(entry: &Entry) -> tracing::Span {
    let span = wal_runtime::process::trace_span(|| {
        tracing::info_span!(
            "replicated_apply",
            namespace = %entry.namespace,
            entry_id = %entry.id,
            origin = %entry.origin_region,
        )
    });
    wal_runtime::trace_context::follow(&span, &entry.trace_context);
    span
}
