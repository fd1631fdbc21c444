//! Concurrent writes sent together: one task gathers the attempts waiting to be sent, sends them
//! in WriteToLogBatch calls (one call in flight at a time, so writes keep the order they were
//! made in), and answers each attempt on its own.

use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};
use std::time::Duration;

use tokio::sync::{Semaphore, mpsc, oneshot};
use tokio::time::Instant;
use tonic::metadata::MetadataValue;
use wal_proto::v1::write_ahead_log_client::WriteAheadLogClient;
use wal_proto::v1::{WriteToLogBatchRequest, WriteToLogRequest, WriteToLogResponse};

use crate::answer::{self, Answer};
use crate::producers::Producers;
use crate::settings::Batching;

/// One attempt of one write, waiting for its batch.
#[derive(Debug)]
pub(crate) struct Pending {
    pub request: WriteToLogRequest,
    pub deadline: Instant,
    /// When it was queued: its batch leaves by then plus the linger.
    pub queued_at: Instant,
    pub trace: Trace,
    pub reply: oneshot::Sender<Answer<WriteToLogResponse>>,
    /// [`QUEUED`], then [`SENT`] by the batcher or [`ABANDONED`] by a write whose deadline ended
    /// first: whichever comes first decides whether the attempt may have stored the entry.
    state: Arc<AtomicU8>,
}

/// The W3C trace context of a write, sent with its batch.
pub(crate) type Trace = (Option<String>, Option<String>);

const QUEUED: u8 = 0;
const SENT: u8 = 1;
const ABANDONED: u8 = 2;

/// The handle writes send their attempts through; the task ends when the client is dropped.
#[derive(Debug, Clone)]
pub(crate) struct Batcher {
    queue: mpsc::UnboundedSender<Pending>,
}

impl Batcher {
    pub fn start(batching: Batching, producers: Arc<Producers>) -> Self {
        let (queue, waiting) = mpsc::unbounded_channel();
        tokio::spawn(run(batching, producers, waiting));
        Self { queue }
    }

    /// One attempt: queued for the next batch, answered when its batch is, or at the write's
    /// own deadline, whatever the batch ahead of it is waiting for.
    pub async fn attempt(
        &self,
        request: WriteToLogRequest,
        deadline: Instant,
        trace: Trace,
    ) -> Answer<WriteToLogResponse> {
        let (reply, answer) = oneshot::channel();
        let state = Arc::new(AtomicU8::new(QUEUED));
        let pending = Pending {
            request,
            deadline,
            queued_at: Instant::now(),
            trace,
            reply,
            state: Arc::clone(&state),
        };
        if self.queue.send(pending).is_err() {
            return Answer::Unsent("the client's batcher has stopped".to_owned());
        }
        match tokio::time::timeout_at(deadline, answer).await {
            Ok(Ok(answer)) => answer,
            Ok(Err(_)) => Answer::Lost("the client's batcher has stopped".to_owned()),
            Err(_) => {
                let abandoned = state
                    .compare_exchange(QUEUED, ABANDONED, Ordering::AcqRel, Ordering::Acquire)
                    .is_ok();
                if abandoned {
                    Answer::Unsent("the deadline ended before its batch was sent".to_owned())
                } else {
                    Answer::Lost("the deadline ended before its batch was answered".to_owned())
                }
            }
        }
    }
}

async fn run(
    batching: Batching,
    producers: Arc<Producers>,
    mut waiting: mpsc::UnboundedReceiver<Pending>,
) {
    // A slot per batch that may be in flight; a batch is gathered only once it has one, so
    // what arrives while every slot is taken goes out together in the next batch.
    let slots = Arc::new(Semaphore::new(batching.max_in_flight.max(1)));
    loop {
        let Ok(slot) = Arc::clone(&slots).acquire_owned().await else {
            return;
        };
        let Some(first) = waiting.recv().await else {
            return;
        };
        let batch = gather(first, &mut waiting, batching).await;
        let producers = Arc::clone(&producers);
        tokio::spawn(async move {
            send(batch, &producers).await;
            drop(slot);
        });
    }
}

/// The first attempt and those that arrive until its linger ends (counted from when it was
/// queued), up to the size cap: attempts that waited while the previous batch was in flight go
/// at once.
async fn gather(
    first: Pending,
    waiting: &mut mpsc::UnboundedReceiver<Pending>,
    batching: Batching,
) -> Vec<Pending> {
    let linger = tokio::time::sleep_until(first.queued_at + batching.linger);
    let mut batch = vec![first];
    tokio::pin!(linger);
    while batch.len() < batching.max_writes {
        match waiting.try_recv() {
            Ok(pending) => {
                batch.push(pending);
                continue;
            }
            Err(mpsc::error::TryRecvError::Disconnected) => break,
            Err(mpsc::error::TryRecvError::Empty) => {}
        }
        tokio::select! {
            () = &mut linger => break,
            next = waiting.recv() => match next {
                Some(pending) => batch.push(pending),
                None => break,
            },
        }
    }
    batch
}

/// One WriteToLogBatch call for the attempts still waiting (not abandoned at their deadline);
/// each is answered with its own result, or all with the call's failure. The call may take as
/// long as its latest write may: each write stops waiting at its own deadline.
async fn send(batch: Vec<Pending>, producers: &Producers) {
    let live: Vec<Pending> = batch
        .into_iter()
        .filter(|p| {
            p.state
                .compare_exchange(QUEUED, SENT, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
        })
        .collect();
    let now = Instant::now();
    let Some(left) = live
        .iter()
        .map(|p| p.deadline.saturating_duration_since(now))
        .max()
    else {
        return;
    };
    let (replies, writes): (Vec<_>, Vec<_>) = live
        .into_iter()
        .map(|p| ((p.reply, p.trace), p.request))
        .unzip();
    // A batch call carries the trace context of its first write that has one.
    let trace = replies
        .iter()
        .find(|(_, (parent, _))| parent.is_some())
        .map(|(_, trace)| trace.clone());
    let mut request = tonic::Request::new(WriteToLogBatchRequest { writes });
    request.set_timeout(left.max(Duration::from_millis(1)));
    if let Some((parent, state)) = trace {
        for (name, value) in [("traceparent", parent), ("tracestate", state)] {
            if let Some(value) = value.and_then(|v| MetadataValue::try_from(v).ok()) {
                request.metadata_mut().insert(name, value);
            }
        }
    }
    let (producer, channel) = producers.pick(None);
    match WriteAheadLogClient::new(channel)
        .write_to_log_batch(request)
        .await
    {
        Ok(response) => {
            producers.answered(producer);
            let mut results = response.into_inner().results.into_iter();
            for (reply, _) in replies {
                let answer = results.next().map_or_else(
                    || Answer::Lost("the batch answered fewer writes than it carried".to_owned()),
                    answer::of_batch_result,
                );
                let _ = reply.send(answer);
            }
        }
        Err(status) => {
            let failed = answer::of_status::<WriteToLogResponse>(&status);
            producers.settle(producer, &failed);
            for (reply, _) in replies {
                let _ = reply.send(failed.clone());
            }
        }
    }
}
