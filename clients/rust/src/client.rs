//! The client: writes with their retries, on the producers, batched or one call each.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;
use tonic::metadata::MetadataValue;
use wal_proto::v1::WriteToLogResponse;
use wal_proto::v1::write_ahead_log_client::WriteAheadLogClient;

use crate::answer::{self, Answer};
use crate::batcher::Batcher;
use crate::error::Error;
use crate::producers::Producers;
use crate::retry::{Ended, Next, Retry};
use crate::settings::Settings;
use crate::write::{Applied, Outcome, Write, Written};

/// A client of the platform's producers. Cheap to clone; clones share the producers' channels
/// and the batcher. Made inside a Tokio runtime (the batcher is a task of it).
#[derive(Debug, Clone)]
pub struct Client {
    pub(crate) settings: Arc<Settings>,
    pub(crate) producers: Arc<Producers>,
    batcher: Option<Batcher>,
}

impl Client {
    /// A client for `settings.producers`; connections are made on first use.
    pub fn new(settings: Settings) -> Result<Self, Error> {
        let producers = Arc::new(Producers::new(&settings)?);
        let batcher = settings
            .batching
            .map(|batching| Batcher::start(batching, Arc::clone(&producers)));
        Ok(Self {
            settings: Arc::new(settings),
            producers,
            batcher,
        })
    }

    /// This client with `chunk` items per AppendItems call of the two-phase helper; it shares
    /// the producers and the batcher.
    pub fn with_chunk(mut self, chunk: usize) -> Self {
        let mut settings = (*self.settings).clone();
        settings.chunk = chunk.max(1);
        self.settings = Arc::new(settings);
        self
    }

    /// Writes through the batcher (when batching is on), retrying UNKNOWN, lost calls and sheds
    /// with the same idempotency id until TRUE, FALSE, a refusal or the write's deadline.
    /// A write awaiting its destinations goes as a call of its own: in a batch it would hold
    /// back every write batched with it.
    pub async fn write(&self, write: Write) -> Result<Written, Error> {
        let batcher = self
            .batcher
            .as_ref()
            .filter(|_| write.await_destinations.is_none());
        self.write_with(write, batcher).await
    }

    /// Like [`write`](Self::write), as a WriteToLog call of its own, even with batching on.
    pub async fn write_unbatched(&self, write: Write) -> Result<Written, Error> {
        self.write_with(write, None).await
    }

    async fn write_with(&self, write: Write, batcher: Option<&Batcher>) -> Result<Written, Error> {
        let id = if write.idempotency_id.is_empty() {
            uuid::Uuid::now_v7().to_string()
        } else {
            write.idempotency_id.clone()
        };
        let request = write.request(&id);
        let deadline = Instant::now() + write.deadline.unwrap_or(self.settings.deadline);
        let mut retry = Retry::new(&self.settings, deadline);
        let mut avoid = None;
        let ended = loop {
            let Some(left) = retry.next_attempt() else {
                break retry.ended();
            };
            let answer = match batcher {
                Some(batcher) => {
                    let trace = (write.traceparent.clone(), write.tracestate.clone());
                    batcher.attempt(request.clone(), deadline, trace).await
                }
                None => {
                    self.attempt(request.clone(), &write, left, &mut avoid)
                        .await
                }
            };
            match retry.after(answer) {
                Next::Return(ended) => break ended,
                Next::Wait(wait) => tokio::time::sleep(wait).await,
            }
        };
        finish(ended, id, retry.attempts)
    }

    /// One WriteToLog call on the next producer, avoiding the one whose call was lost last.
    async fn attempt(
        &self,
        request: wal_proto::v1::WriteToLogRequest,
        write: &Write,
        left: Duration,
        avoid: &mut Option<usize>,
    ) -> Answer<WriteToLogResponse> {
        let (producer, channel) = self.producers.pick(*avoid);
        let mut request = tonic::Request::new(request);
        request.set_timeout(left);
        trace_metadata(&mut request, write);
        let answer = match WriteAheadLogClient::new(channel)
            .write_to_log(request)
            .await
        {
            Ok(response) => answer::of_response(response.into_inner()),
            Err(status) => answer::of_status(&status),
        };
        self.settled(producer, &answer, avoid);
        answer
    }

    /// Keeps the rotation's view of `producer` after its answer; a retry after a lost call
    /// avoids it.
    pub(crate) fn settled<T>(
        &self,
        producer: usize,
        answer: &Answer<T>,
        avoid: &mut Option<usize>,
    ) {
        self.producers.settle(producer, answer);
        *avoid = matches!(answer, Answer::Lost(_)).then_some(producer);
    }
}

fn trace_metadata<T>(request: &mut tonic::Request<T>, write: &Write) {
    for (name, value) in [
        ("traceparent", &write.traceparent),
        ("tracestate", &write.tracestate),
    ] {
        if let Some(value) = value
            .as_ref()
            .and_then(|v| MetadataValue::try_from(v.as_str()).ok())
        {
            request.metadata_mut().insert(name, value);
        }
    }
}

/// A write's retried end as its result: TRUE or FALSE as answered, UNKNOWN at the deadline, or
/// the refusal.
pub(crate) fn finish(
    ended: Ended<WriteToLogResponse>,
    id: String,
    attempts: u32,
) -> Result<Written, Error> {
    match ended {
        Ended::Done(response) => Ok(Written {
            outcome: if response.durable() == wal_proto::v1::Trilean::True {
                Outcome::True
            } else {
                Outcome::False
            },
            entry_id: if response.entry_id.is_empty() {
                id
            } else {
                response.entry_id
            },
            attempts,
            destinations: response
                .destinations
                .iter()
                .map(|d| {
                    let applied = match d.state() {
                        wal_proto::v1::DestinationState::Applied => Applied::Applied,
                        wal_proto::v1::DestinationState::DeadLettered => Applied::DeadLettered,
                        _ => Applied::Pending,
                    };
                    (d.destination.clone(), applied)
                })
                .collect(),
            message: response.message,
        }),
        Ended::Unknown(message) => Ok(Written {
            outcome: Outcome::Unknown,
            entry_id: id,
            attempts,
            message,
            destinations: Vec::new(),
        }),
        Ended::NotStored(message) => Ok(Written {
            outcome: Outcome::False,
            entry_id: id,
            attempts,
            message,
            destinations: Vec::new(),
        }),
        Ended::Refused {
            code,
            field,
            message,
        } => Err(Error::Refused {
            code,
            field,
            message,
            attempts,
        }),
    }
}
