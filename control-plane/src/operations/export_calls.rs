//! ExportDeadLetters: every dead letter a filter takes, payload included, streamed.

use std::pin::Pin;

use futures::Stream;
use tokio::sync::mpsc;
use tonic::{Request, Response, Status};
use wal_proto::v1::{DeadLetter, ExportDeadLettersRequest};
use wal_runtime::tls::Peer;

use super::dead_letters::{dlq_status, filter_of};
use super::dlq::Verdict;
use super::{Call, OperationsService, actor, record};

pub type ExportStream = Pin<Box<dyn Stream<Item = Result<DeadLetter, Status>> + Send>>;

/// Dead letters in flight between the DLQ reader and the caller.
const IN_FLIGHT: usize = 64;

impl OperationsService {
    pub(super) async fn export_dead_letters_call(
        &self,
        request: Request<ExportDeadLettersRequest>,
    ) -> Result<Response<ExportStream>, Status> {
        let peer = request.extensions().get::<Peer>().cloned();
        let request = request.into_inner();
        let filter = filter_of(request.filter.as_ref())?;
        let call = Call {
            actor: actor(peer.as_ref(), &request.operator),
            verb: "export",
            namespace: request.namespace.clone(),
            subject: String::new(),
            detail: filter.key(),
        };
        let namespace = self.namespace(&request.namespace).await?;
        self.check_admin(peer.as_ref(), &namespace, &call).await?;
        let dead = self.dead_letters(&namespace).await?;
        // Recorded before a payload leaves: a crash midway still leaves a trace.
        self.record(&call, "started").await;
        let (out, stream) = mpsc::channel::<Result<DeadLetter, Status>>(IN_FLIGHT);
        let store = self.store.clone();
        let stopping = self.stopping.clone();
        self.jobs.spawn(async move {
            let (found, mut taken) = mpsc::channel::<super::dlq::Found>(IN_FLIGHT);
            let names: Vec<String> = dead.dlqs.iter().map(|d| d.name.clone()).collect();
            let forward = {
                let out = out.clone();
                async move {
                    let mut exported = 0u64;
                    while let Some(one) = taken.recv().await {
                        // A caller gone, or the control plane stopping: dropping `taken`
                        // stops the reading.
                        if out.is_closed() || stopping.is_cancelled() {
                            return (exported, false);
                        }
                        if filter.judge(&one.entry) != Verdict::Take {
                            continue;
                        }
                        let letter = DeadLetter {
                            dlq: names[one.dlq].clone(),
                            position: one.locator,
                            entry: Some(one.entry),
                        };
                        let sent = tokio::select! {
                            sent = out.send(Ok(letter)) => sent.is_ok(),
                            () = stopping.cancelled() => false,
                        };
                        if !sent {
                            return (exported, false);
                        }
                        exported += 1;
                    }
                    (exported, true)
                }
            };
            let (read, (exported, whole)) = tokio::join!(dead.send_all(found), forward);
            let result = match read {
                Ok(()) if whole => format!("done: {exported} exported"),
                Ok(()) => {
                    format!("stopped after {exported} exported (the caller left, or shutdown)")
                }
                Err(error) => {
                    let status = dlq_status(error);
                    let result = format!("failed after {exported} exported: {}", status.message());
                    let _ = out.send(Err(status)).await;
                    result
                }
            };
            record(&store, &call, &result).await;
        });
        let stream = futures::stream::unfold(stream, |mut stream| async move {
            stream.recv().await.map(|item| (item, stream))
        });
        Ok(Response::new(Box::pin(stream)))
    }
}
