//! The region target: an entry sent to one destination region's writer (`wal-writer`), which
//! applies it to that region's cache or CQL table.
//!
//! Settings: see `wal_targets::region`. A region target is built for one destination: the
//! consumer reads a replicated namespace once per destination region (see `crew`), each reader
//! delivering with the namespace's settings narrowed to its region
//! ([`RegionSettings::only`]), so each region has its own breaker, position, retries and DLQ
//! copies.
//!
//! Entries are sent in batches: every apply in progress is queued for its region's sender, which
//! takes what is queued (up to [`MAX_BATCH`]) into one `ApplyReplicated` call, with up to
//! [`CALLS_IN_FLIGHT`] calls at once; each entry's apply ends with its own outcome. One entry per
//! key is in progress at a time (the reader's key lanes), so a call never holds two writes of a
//! key.
//!
//! Outcomes: the writer's per-entry answer maps one to one onto [`TargetError`]. A call that
//! fails as a whole is `Unavailable` when the writer cannot be reached, is overloaded
//! (RESOURCE_EXHAUSTED) or cannot serve the call (the breaker opens and the entries wait in
//! place, using no attempt), and `Retryable` when it timed out or was cut off.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use tokio::sync::{Semaphore, mpsc, oneshot};
use tonic::Code;
use tonic::transport::{Channel, Endpoint};
use wal_proto::v1::region_writer_client::RegionWriterClient;
use wal_proto::v1::{ApplyReplicatedRequest, ApplyResult};
use wal_queue::entry::{Body, Entry, Target as TargetSpec};
use wal_targets::region::RegionSettings;

use super::{Mutation, Target, TargetError, TargetKind};
use crate::clients::Clients;

/// The most entries one call carries.
pub const MAX_BATCH: usize = 256;
/// Calls to one writer in flight at once.
pub const CALLS_IN_FLIGHT: usize = 4;
/// Applies queued for the sender; past it an apply waits for room.
const QUEUED: usize = 4096;
/// How long connecting to a writer may take before the call counts as unavailable.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

#[derive(Debug)]
pub struct Region;

impl TargetKind for Region {
    type Settings = RegionSettings;

    fn endpoint(settings: &RegionSettings, _clients: &Clients) -> String {
        let writers: Vec<String> = settings
            .destinations()
            .values()
            .map(|d| d.writer_uri())
            .collect();
        writers.join(",")
    }

    async fn build(
        settings: RegionSettings,
        clients: Arc<Clients>,
    ) -> Result<Arc<dyn Target>, TargetError> {
        let destinations = settings.destinations();
        let mut enabled = destinations.iter().filter(|(_, d)| d.enabled);
        let (Some((region, destination)), None) = (enabled.next(), enabled.next()) else {
            return Err(TargetError::permanent(format!(
                "a region target is delivered by one reader per destination region, each with its region alone; these settings name {} enabled regions",
                destinations.values().filter(|d| d.enabled).count()
            )));
        };
        let tls = &clients.settings().writer_tls;
        let uri = match (tls, destination.writer_uri()) {
            (Some(_), uri) if uri.starts_with("http://") => uri.replacen("http://", "https://", 1),
            (_, uri) => uri,
        };
        let mut endpoint = Endpoint::from_shared(uri.clone())
            .map_err(|e| TargetError::permanent(format!("region '{region}': writer {uri:?}: {e}")))?
            .connect_timeout(CONNECT_TIMEOUT)
            .tcp_nodelay(true);
        if let Some(tls) = tls {
            // Unavailable, not permanent: certificate files are fixed (or mounted) without
            // touching the entries, which wait.
            endpoint = tls.apply(endpoint).map_err(|reason| {
                TargetError::unavailable(format!(
                    "region '{region}': TLS to writer {uri:?}: {reason}"
                ))
            })?;
        }
        let (kind, settings_json) = destination.apply_target();
        let apply = TargetSpec {
            kind: kind.name().to_owned(),
            settings_json,
        };
        let (queue, queued) = mpsc::channel(QUEUED);
        let client = RegionWriterClient::new(endpoint.connect_lazy())
            .max_decoding_message_size(16 * 1024 * 1024);
        tokio::spawn(send_batches(queued, client, region.clone()));
        Ok(Arc::new(RegionTarget {
            region: region.clone(),
            apply,
            queue,
        }))
    }
}

/// One destination region's writer, and the sender its applies are queued for.
#[derive(Debug)]
struct RegionTarget {
    region: String,
    /// What the writer applies with: the destination's cache or cql target.
    apply: TargetSpec,
    queue: mpsc::Sender<Pending>,
}

/// An entry waiting to be sent, and where its outcome goes.
#[derive(Debug)]
struct Pending {
    entry: Entry,
    outcome: oneshot::Sender<Result<(), TargetError>>,
}

#[async_trait]
impl Target for RegionTarget {
    async fn apply(&self, mutation: Mutation<'_>) -> Result<(), TargetError> {
        // The payload is resolved (a claim check read here: the destination cannot reach this
        // region's durable storage); the rest of the envelope travels as written, so the
        // writer sees the id, the original write time and the origin region. Its trace context
        // is this attempt's: the writer's apply is the attempt's child, in the write's trace.
        let mut entry = Entry {
            body: Some(Body::Payload(mutation.payload.to_vec())),
            target: Some(self.apply.clone()),
            destination_region: self.region.clone(),
            ..mutation.entry.clone()
        };
        // Only that: none of the platform's own marks (a retry's) travel to another region.
        entry.trace_context = mutation.trace.cloned().unwrap_or_default();
        let (outcome, answer) = oneshot::channel();
        let gone =
            || TargetError::unavailable(format!("the sender to region '{}' stopped", self.region));
        self.queue
            .send(Pending { entry, outcome })
            .await
            .map_err(|_| gone())?;
        answer.await.map_err(|_| gone())?
    }
}

/// Takes what is queued into calls until every target handle is gone.
async fn send_batches(
    mut queued: mpsc::Receiver<Pending>,
    client: RegionWriterClient<Channel>,
    region: String,
) {
    let calls = Arc::new(Semaphore::new(CALLS_IN_FLIGHT));
    let mut batch = Vec::with_capacity(MAX_BATCH);
    while queued.recv_many(&mut batch, MAX_BATCH).await > 0 {
        let Ok(permit) = Arc::clone(&calls).acquire_owned().await else {
            return;
        };
        // What queued up while waiting for a free call goes along.
        while batch.len() < MAX_BATCH {
            match queued.try_recv() {
                Ok(pending) => batch.push(pending),
                Err(_) => break,
            }
        }
        let call = std::mem::replace(&mut batch, Vec::with_capacity(MAX_BATCH));
        let client = client.clone();
        let region = region.clone();
        tokio::spawn(async move {
            send(client, &region, call).await;
            drop(permit);
        });
    }
}

/// One call; every entry of it gets its outcome.
async fn send(mut client: RegionWriterClient<Channel>, region: &str, call: Vec<Pending>) {
    let (entries, outcomes): (Vec<Entry>, Vec<_>) =
        call.into_iter().map(|p| (p.entry, p.outcome)).unzip();
    let count = entries.len();
    let source_region = entries
        .first()
        .map(|e| e.origin_region.clone())
        .unwrap_or_default();
    let answered = client
        .apply_replicated(ApplyReplicatedRequest {
            source_region,
            entries,
        })
        .await;
    match answered {
        Ok(response) => {
            let answers = response.into_inner().outcomes;
            if answers.len() != count {
                let error = TargetError::retryable(format!(
                    "region '{region}': the writer answered {} outcomes for {count} entries",
                    answers.len()
                ));
                for outcome in outcomes {
                    let _ = outcome.send(Err(error.clone()));
                }
                return;
            }
            for (outcome, answer) in outcomes.into_iter().zip(answers) {
                let reason = || format!("region '{region}': {}", answer.reason);
                let result = match answer.result() {
                    ApplyResult::Applied => Ok(()),
                    ApplyResult::Unavailable => Err(TargetError::unavailable(reason())),
                    ApplyResult::Permanent => Err(TargetError::permanent(reason())),
                    ApplyResult::Retryable | ApplyResult::Unspecified => {
                        Err(TargetError::retryable(reason()))
                    }
                };
                let _ = outcome.send(result);
            }
        }
        Err(status) => {
            let reason = format!(
                "region '{region}': the writer's call failed: {}: {}",
                status.code(),
                status.message()
            );
            let error = match status.code() {
                Code::DeadlineExceeded | Code::Cancelled | Code::Aborted => {
                    TargetError::retryable(reason)
                }
                // Unreachable, overloaded, or not a writer / not letting us in: nobody's entry
                // goes through until that changes, so they wait in place.
                _ => TargetError::unavailable(reason),
            };
            for outcome in outcomes {
                let _ = outcome.send(Err(error.clone()));
            }
        }
    }
}
