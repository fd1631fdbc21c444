//! `WriteToLog`: validate -> admit -> build the entry -> claim-check if too large -> enqueue ->
//! answer. The answer is TRUE only after the queue acknowledged the entry.

use std::collections::HashMap;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::FutureExt as _;
use tokio::sync::OwnedSemaphorePermit;
use tonic::{Request, Response, Status};
use tracing::{Instrument, field};
use wal_namespaces::Action;
use wal_proto::v1::write_ahead_log_server::WriteAheadLog;
use wal_proto::v1::{
    Trilean, WriteResult, WriteToLogBatchRequest, WriteToLogBatchResponse, WriteToLogRequest,
    WriteToLogResponse,
};
use wal_queue::entry::{Entry, now_micros};
use wal_queue::{Durability, Produce};
use wal_runtime::authorize::Authorizer;
use wal_runtime::tls::Peer;
use wal_runtime::trace_context;

use crate::faults::{Fault, Faults};
use crate::finish::Finishing;
use crate::fit::{Fitted, fit};
use crate::live::LiveRegistry;
use crate::metrics::{self, NamespaceMetrics, Outcome};
use crate::registry::NamespaceRuntime;
use crate::{request, status};

/// Extra time the producer gives a queue beyond its own write timeout before it stops waiting
/// and answers UNKNOWN itself.
const TIMEOUT_GRACE: Duration = Duration::from_secs(1);

#[derive(Debug, Clone)]
pub struct WriteService {
    registry: Arc<LiveRegistry>,
    region: String,
    write_timeout: Duration,
    authorizer: Authorizer,
    /// Requests naming no configured namespace.
    unknown: NamespaceMetrics,
    faults: Arc<Faults>,
    /// Writes waiting for their destinations (`await_destinations_millis`).
    waiting: crate::destinations::Waiting,
}

impl WriteService {
    pub fn new(
        registry: Arc<LiveRegistry>,
        region: &str,
        write_timeout: Duration,
        authorizer: Authorizer,
        faults: Arc<Faults>,
    ) -> Self {
        Self {
            registry,
            region: region.to_owned(),
            write_timeout,
            authorizer,
            unknown: NamespaceMetrics::new(metrics::UNKNOWN_NAMESPACE),
            faults,
            waiting: crate::destinations::Waiting::default(),
        }
    }

    /// The namespace's runtime, if this producer serves it.
    pub(crate) fn runtime(&self, name: &str) -> Option<Arc<NamespaceRuntime>> {
        self.registry.current().get(name).cloned()
    }

    /// Whether `peer` may write to the namespace: checked before anything is stored.
    pub(crate) fn authorize(
        &self,
        peer: Option<&Peer>,
        runtime: &NamespaceRuntime,
    ) -> Result<(), Status> {
        self.authorizer
            .check(peer, &runtime.config, Action::Write)
            .map(drop)
    }

    /// The region this producer writes from.
    pub(crate) fn region(&self) -> &str {
        &self.region
    }

    /// The namespaces served now.
    pub(crate) fn namespaces(&self) -> Vec<String> {
        self.registry.current().names()
    }

    /// The longest one write waits for the broker before it is answered.
    pub(crate) fn write_timeout(&self) -> Duration {
        self.write_timeout + TIMEOUT_GRACE
    }

    /// An entry the platform made (a transaction's commit marker): admitted, fitted and enqueued
    /// as a write is, and answered the same way.
    pub(crate) async fn write_entry(
        &self,
        runtime: &NamespaceRuntime,
        entry: Entry,
    ) -> Result<WriteToLogResponse, Status> {
        self.write(
            runtime,
            request::Write {
                entry,
                payload_len: 0,
                await_destinations: Duration::ZERO,
            },
        )
        .await
    }

    async fn write(
        &self,
        runtime: &NamespaceRuntime,
        write: request::Write,
    ) -> Result<WriteToLogResponse, Status> {
        let permit = runtime
            .admission
            .admit()
            .map_err(|shed| status::shed(&shed))?;
        runtime.metrics.in_flight(runtime.admission.in_flight());
        let queue = Arc::clone(runtime.queue_for(&write.entry.key));
        let fitted = fit(runtime, queue.as_ref(), write).await;
        let answer = match fitted {
            Ok(Fitted::Entry(entry)) => {
                let namespace = &runtime.config.name;
                if self.faults.hits(Fault::False, namespace, &entry.id) {
                    Ok(answer(
                        Trilean::False,
                        "not stored: the test fault 'false'".to_owned(),
                        entry.id,
                    ))
                } else {
                    let answered = self.enqueue(queue, *entry, permit).await;
                    Ok(self.withheld(namespace, answered))
                }
            }
            Ok(Fitted::NotStored(reason)) => Ok(answer(Trilean::False, reason, String::new())),
            Err(status) => Err(status),
        };
        runtime.metrics.in_flight(runtime.admission.in_flight());
        answer
    }

    /// Enqueues holding the write's in-flight slot until the broker answers, even when the
    /// client gives up early: its record still occupies the Kafka producer's buffer meanwhile
    /// (see `finish`).
    async fn enqueue(
        &self,
        queue: Arc<dyn Produce>,
        entry: Entry,
        permit: OwnedSemaphorePermit,
    ) -> WriteToLogResponse {
        let id = entry.id.clone();
        let deadline = self.write_timeout + TIMEOUT_GRACE;
        // The broker's part of the write, timed on its own in a trace: only when the write's
        // own span was sampled (the entry carries its decision), as nothing else would read it.
        let span = if trace_context::sampled(&entry.trace_context) {
            wal_runtime::process::trace_span(
                || tracing::info_span!("enqueue", queue = %queue.spec().name),
            )
        } else {
            tracing::Span::none()
        };
        let sent = Finishing::new(
            AssertUnwindSafe(
                async move {
                    let _slot = permit;
                    tokio::time::timeout(deadline, queue.enqueue(&entry)).await
                }
                .instrument(span),
            )
            .catch_unwind(),
        )
        .await;
        match sent {
            Ok(Ok(Ok(()))) => answer(Trilean::True, String::new(), id),
            Ok(Ok(Err(error))) => match error.durability() {
                Durability::NotStored => answer(Trilean::False, error.to_string(), id),
                Durability::Unknown => answer(Trilean::Unknown, error.to_string(), id),
            },
            Ok(Err(_elapsed)) => answer(
                Trilean::Unknown,
                format!("the queue did not answer within {deadline:?}"),
                id,
            ),
            Err(_panicked) => answer(
                Trilean::Unknown,
                "the write failed after it may have been sent".to_owned(),
                id,
            ),
        }
    }
}

impl WriteService {
    /// The faults' UNKNOWN for an entry the broker did store: an acknowledgement lost on its way.
    fn withheld(&self, namespace: &str, answered: WriteToLogResponse) -> WriteToLogResponse {
        if answered.durable != Trilean::True as i32 {
            return answered;
        }
        let id = &answered.entry_id;
        let fault = [Fault::UnknownAlways, Fault::UnknownOnce]
            .into_iter()
            .find(|fault| self.faults.hits(*fault, namespace, id));
        match fault {
            Some(fault) => answer(
                Trilean::Unknown,
                format!(
                    "stored, but the answer is withheld by the test fault '{}'",
                    fault.name()
                ),
                answered.entry_id,
            ),
            None => answered,
        }
    }

    /// Whether the faults fail this AppendItems call after it staged its items.
    pub(crate) fn append_fails(&self, namespace: &str, transaction: &str, first: u64) -> bool {
        self.faults.hits(
            Fault::AppendUnavailableOnce,
            namespace,
            &format_args!("{transaction}/{first}"),
        )
    }
}

fn answer(durable: Trilean, message: String, entry_id: String) -> WriteToLogResponse {
    WriteToLogResponse {
        durable: durable as i32,
        message,
        entry_id,
        destinations: Vec::new(),
    }
}

fn outcome_of(result: &Result<&WriteToLogResponse, &Status>) -> Outcome {
    match result {
        Ok(response) => match Trilean::try_from(response.durable) {
            Ok(Trilean::True) => Outcome::True,
            Ok(Trilean::False) => Outcome::False,
            _ => Outcome::Unknown,
        },
        Err(status) if status.code() == tonic::Code::ResourceExhausted => Outcome::Shed,
        Err(status) if status.code() == tonic::Code::NotFound => Outcome::NotFound,
        Err(_) => Outcome::Invalid,
    }
}

impl WriteService {
    /// One write, start to answer: what WriteToLog returns for it.
    async fn handle(
        &self,
        request: WriteToLogRequest,
        trace: HashMap<String, String>,
        peer: Option<&Peer>,
        deadline: Option<Duration>,
    ) -> Result<WriteToLogResponse, Status> {
        let started = Instant::now();
        // Checked before the name is looked up, logged or echoed in any answer.
        if request.namespace.len() > MAX_NAMESPACE_BYTES {
            self.unknown.request(Outcome::Invalid, started.elapsed());
            return Err(status::refused(
                tonic::Code::InvalidArgument,
                "namespace",
                format!(
                    "namespace is {} bytes long; expected a name of at most {MAX_NAMESPACE_BYTES}",
                    request.namespace.len()
                ),
            ));
        }
        let span = tracing::info_span!(
            "write_to_log",
            namespace = %request.namespace,
            entry_id = field::Empty,
            outcome = field::Empty,
            trace_id = field::Empty,
        );
        // The caller's trace is this call's parent, and the entry carries this call on: the
        // consumer's attempts are its children, one trace per write.
        trace_context::follow(&span, &trace);
        let trace = trace_context::carried(&span, trace);
        if let Some(trace_id) = trace_context::trace_id(&trace) {
            span.record("trace_id", trace_id);
        }
        let Some(runtime) = self.registry.current().get(&request.namespace).cloned() else {
            self.unknown.request(Outcome::NotFound, started.elapsed());
            return Err(status::unknown_namespace(&request.namespace));
        };
        if let Err(denied) = self.authorize(peer, &runtime) {
            runtime.metrics.request(Outcome::Denied, started.elapsed());
            return Err(denied);
        }
        let result = async {
            let write = request::check(
                &runtime.config,
                request,
                now_micros(),
                &self.region,
                trace,
                &mut rand::rng(),
            )
            .map_err(|invalid| status::invalid(&invalid))?;
            tracing::Span::current().record("entry_id", field::display(&write.entry.id));
            let wait = write.await_destinations;
            self.write(&runtime, write).await.map(|r| (r, wait))
        }
        .instrument(span.clone())
        .await;
        let outcome = outcome_of(&result.as_ref().map(|(response, _)| response));
        span.record("outcome", outcome.as_str());
        // The write's own latency: a wait for its destinations is the caller's choice.
        runtime.metrics.request(outcome, started.elapsed());
        let result = match result {
            Ok((mut response, wait)) if !wait.is_zero() && outcome == Outcome::True => {
                // Never past the call's deadline, counted from its arrival, with a moment left
                // to answer.
                let left = deadline.map(|d| d.saturating_sub(started.elapsed() + ANSWER_MARGIN));
                let wait = left.map_or(wait, |left| wait.min(left));
                // Boxed, as the claim check in `fit`: only writes that wait for their
                // destinations take this path.
                let awaited = self
                    .await_destinations(&runtime, &response.entry_id, wait)
                    .instrument(span.clone());
                response.destinations = Box::pin(awaited).await;
                Ok(response)
            }
            other => other.map(|(response, _)| response),
        };
        if outcome != Outcome::True {
            let message = match &result {
                Ok(response) => response.message.as_str(),
                Err(status) => status.message(),
            };
            // FALSE and UNKNOWN are the broker's doing and worth an operator's look; refusals
            // are the caller's, and under overload there are many: those stay at debug.
            span.in_scope(|| match outcome {
                Outcome::False | Outcome::Unknown => {
                    tracing::info!(outcome = outcome.as_str(), %message, "write not durable")
                }
                _ => tracing::debug!(outcome = outcome.as_str(), %message, "write refused"),
            });
        }
        result
    }
}

/// What an awaiting write keeps of its call's deadline to send its answer: on a busy 2-core
/// machine 100 ms was seen not to be enough (the caller's deadline passed first).
const ANSWER_MARGIN: Duration = Duration::from_millis(500);

impl WriteService {
    /// What each destination had done with the stored entry `entry_id` when all had answered or
    /// `wait` was over (every one pending when the namespace has no durable storage open).
    async fn await_destinations(
        &self,
        runtime: &NamespaceRuntime,
        entry_id: &str,
        wait: Duration,
    ) -> Vec<wal_proto::v1::DestinationOutcome> {
        let namespace = &runtime.config;
        match &runtime.durable {
            Some(durable) => {
                self.waiting
                    .outcomes(durable, namespace, &self.region, entry_id, wait)
                    .await
            }
            None => namespace
                .destination_names(&self.region)
                .into_iter()
                .map(|destination| wal_proto::v1::DestinationOutcome {
                    destination,
                    state: wal_proto::v1::DestinationState::Pending as i32,
                })
                .collect(),
        }
    }
}

/// Namespace names are at most 64 bytes (see the namespace model).
const MAX_NAMESPACE_BYTES: usize = 64;

/// The most writes one WriteToLogBatch call may carry.
pub const MAX_BATCH: usize = 1000;

#[tonic::async_trait]
impl WriteAheadLog for WriteService {
    async fn write_to_log(
        &self,
        request: Request<WriteToLogRequest>,
    ) -> Result<Response<WriteToLogResponse>, Status> {
        let trace = request::trace_context(&request);
        let peer = request.extensions().get::<Peer>().cloned();
        let deadline = crate::destinations::deadline_of(request.metadata());
        self.handle(request.into_inner(), trace, peer.as_ref(), deadline)
            .await
            .map(Response::new)
    }

    async fn write_to_log_batch(
        &self,
        request: Request<WriteToLogBatchRequest>,
    ) -> Result<Response<WriteToLogBatchResponse>, Status> {
        let trace = request::trace_context(&request);
        let peer = request.extensions().get::<Peer>().cloned();
        let deadline = crate::destinations::deadline_of(request.metadata());
        let writes = request.into_inner().writes;
        if writes.is_empty() || writes.len() > MAX_BATCH {
            return Err(status::refused(
                tonic::Code::InvalidArgument,
                "writes",
                format!(
                    "a batch holds {} writes; expected 1 to {MAX_BATCH}",
                    writes.len()
                ),
            ));
        }
        // All writes of the batch go to their queues at once, so the Kafka producer batches them.
        let answers = futures::future::join_all(
            writes
                .into_iter()
                .map(|write| self.handle(write, trace.clone(), peer.as_ref(), deadline)),
        )
        .await;
        let results = answers
            .into_iter()
            .map(|answer| match answer {
                Ok(response) => WriteResult {
                    response: Some(response),
                    ..WriteResult::default()
                },
                Err(status) => status::batch_result(&status),
            })
            .collect();
        Ok(Response::new(WriteToLogBatchResponse { results }))
    }
}
