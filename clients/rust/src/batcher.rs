//! Concurrent writes sent together: one task gathers the attempts waiting to be sent, sends them
//! in WriteToLogBatch calls (one call in flight at a time, so writes keep the order they were
//! made in), and answers each attempt on its own.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, oneshot};
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
    pub traceparent: Option<String>,
    pub reply: oneshot::Sender<Answer<WriteToLogResponse>>,
}

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

    /// One attempt: queued for the next batch, answered when its batch is.
    pub async fn attempt(
        &self,
        request: WriteToLogRequest,
        deadline: Instant,
        traceparent: Option<String>,
    ) -> Answer<WriteToLogResponse> {
        let (reply, answer) = oneshot::channel();
        let pending = Pending {
            request,
            deadline,
            traceparent,
            reply,
        };
        if self.queue.send(pending).is_err() {
            return Answer::Lost("the client's batcher has stopped".to_owned());
        }
        answer
            .await
            .unwrap_or_else(|_| Answer::Lost("the client's batcher has stopped".to_owned()))
    }
}

async fn run(
    batching: Batching,
    producers: Arc<Producers>,
    mut waiting: mpsc::UnboundedReceiver<Pending>,
) {
    while let Some(first) = waiting.recv().await {
        let batch = gather(first, &mut waiting, batching).await;
        send(batch, &producers).await;
    }
}

/// The first attempt and those that arrive within the linger, up to the size cap. Attempts
/// already queued while the previous batch was in flight go at once.
async fn gather(
    first: Pending,
    waiting: &mut mpsc::UnboundedReceiver<Pending>,
    batching: Batching,
) -> Vec<Pending> {
    let mut batch = vec![first];
    let linger = tokio::time::sleep(batching.linger);
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

/// One WriteToLogBatch call for the attempts whose deadline has not passed; each is answered
/// with its own result, or all with the call's failure.
async fn send(batch: Vec<Pending>, producers: &Producers) {
    let now = Instant::now();
    let (live, late): (Vec<_>, Vec<_>) = batch.into_iter().partition(|p| p.deadline > now);
    for pending in late {
        // Never sent: the write's own loop ends at its deadline with what it knew before.
        let _ = pending.reply.send(Answer::Unsent(
            "the deadline ended before its batch was sent".to_owned(),
        ));
    }
    let Some(left) = live.iter().map(|p| p.deadline - now).min() else {
        return;
    };
    let (replies, writes): (Vec<_>, Vec<_>) = live
        .into_iter()
        .map(|p| ((p.reply, p.traceparent), p.request))
        .unzip();
    let traceparent = replies.iter().find_map(|(_, trace)| trace.clone());
    let mut request = tonic::Request::new(WriteToLogBatchRequest { writes });
    request.set_timeout(left.max(Duration::from_millis(1)));
    if let Some(value) = traceparent.and_then(|t| MetadataValue::try_from(t).ok()) {
        request.metadata_mut().insert("traceparent", value);
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
            if matches!(failed, Answer::Lost(_)) {
                producers.failed(producer);
            } else {
                producers.answered(producer);
            }
            for (reply, _) in replies {
                let _ = reply.send(failed.clone());
            }
        }
    }
}
