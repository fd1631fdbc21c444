//! The two-phase helper: items staged in chunks, then the commit, every call retried as
//! clients/BEHAVIOUR.md says, so calling it again with the same id and items resumes it.

use std::future::Future;
use std::time::Duration;

use tokio::time::Instant;
use tonic::transport::Channel;
use tonic::{Request, Status};
use wal_proto::v1::transactions_client::TransactionsClient;
use wal_proto::v1::{
    AbortTransactionRequest, AppendItemsRequest, CommitTransactionRequest, Target, TransactionItem,
    WriteToLogResponse,
};

use crate::answer::{self, Answer};
use crate::client::{Client, finish};
use crate::error::Error;
use crate::retry::{Ended, Next, Retry};
use crate::write::Written;

/// One item of a transaction; the helper numbers items 0 to n-1 in the order given.
#[derive(Debug, Clone, Default)]
pub struct Item {
    pub payload: Vec<u8>,
    /// `None`: the namespace's default target.
    pub target: Option<Target>,
}

impl Item {
    pub fn new(payload: impl Into<Vec<u8>>) -> Self {
        Self {
            payload: payload.into(),
            target: None,
        }
    }
}

impl Client {
    /// Stages `items` in chunks of the client's `chunk` size and commits them, all within
    /// `deadline` (the client's default when `None`). The result is the commit's.
    pub async fn transaction(
        &self,
        namespace: &str,
        transaction_id: &str,
        items: Vec<Item>,
        deadline: Option<Duration>,
    ) -> Result<Written, Error> {
        let deadline = Instant::now() + deadline.unwrap_or(self.settings.deadline);
        let count = items.len() as u64;
        let numbered: Vec<TransactionItem> = items
            .into_iter()
            .zip(0..)
            .map(|(item, sequence)| TransactionItem {
                sequence,
                target: item.target,
                payload: item.payload,
            })
            .collect();
        for chunk in numbered.chunks(self.settings.chunk.max(1)) {
            // An append to a transaction already committed (or aborted, or expired) is refused
            // with FAILED_PRECONDITION: resuming after a commit whose answer was lost goes on to
            // the commit, which answers TRUE for a committed transaction and names why otherwise.
            let request = AppendItemsRequest {
                namespace: namespace.to_owned(),
                transaction_id: transaction_id.to_owned(),
                items: chunk.to_vec(),
            };
            let (ended, attempts) = self
                .retried(deadline, Answer::Done, move |mut client, left| {
                    let request = timed(request.clone(), left);
                    async move { client.append_items(request).await }
                })
                .await;
            match ended {
                Ended::Done(_) => {}
                Ended::Refused {
                    code: tonic::Code::FailedPrecondition,
                    ..
                } => break,
                // Nothing is committed, so nothing will be applied: FALSE, and calling again
                // with the same id and items resumes the staging.
                Ended::Unknown(message) | Ended::NotStored(message) => {
                    let message = format!(
                        "not committed: staging ended at the deadline ({message}); call again with the same id and items to resume"
                    );
                    return finish(
                        Ended::NotStored(message),
                        transaction_id.to_owned(),
                        attempts,
                    );
                }
                refused => {
                    return finish(ended_as_write(refused), transaction_id.to_owned(), attempts);
                }
            }
        }
        self.commit_by(namespace, transaction_id, count, deadline)
            .await
    }

    /// Commits a transaction whose `item_count` items are staged; UNKNOWN is sent again until
    /// TRUE or the deadline. A commit never answers FALSE.
    pub async fn commit(
        &self,
        namespace: &str,
        transaction_id: &str,
        item_count: u64,
        deadline: Option<Duration>,
    ) -> Result<Written, Error> {
        let deadline = Instant::now() + deadline.unwrap_or(self.settings.deadline);
        self.commit_by(namespace, transaction_id, item_count, deadline)
            .await
    }

    async fn commit_by(
        &self,
        namespace: &str,
        transaction_id: &str,
        item_count: u64,
        deadline: Instant,
    ) -> Result<Written, Error> {
        let request = CommitTransactionRequest {
            namespace: namespace.to_owned(),
            transaction_id: transaction_id.to_owned(),
            item_count,
        };
        let (ended, attempts) = self
            .retried(deadline, answer::of_response, move |mut client, left| {
                let request = timed(request.clone(), left);
                async move { client.commit_transaction(request).await }
            })
            .await;
        finish(ended, transaction_id.to_owned(), attempts)
    }

    /// Drops a transaction that is not committed.
    pub async fn abort(
        &self,
        namespace: &str,
        transaction_id: &str,
        deadline: Option<Duration>,
    ) -> Result<(), Error> {
        let deadline = Instant::now() + deadline.unwrap_or(self.settings.deadline);
        let request = AbortTransactionRequest {
            namespace: namespace.to_owned(),
            transaction_id: transaction_id.to_owned(),
        };
        let (ended, attempts) = self
            .retried(deadline, Answer::Done, move |mut client, left| {
                let request = timed(request.clone(), left);
                async move { client.abort_transaction(request).await }
            })
            .await;
        match ended {
            Ended::Done(_) => Ok(()),
            Ended::Unknown(message) | Ended::NotStored(message) => {
                Err(Error::Unanswered { message, attempts })
            }
            refused => {
                finish(ended_as_write(refused), transaction_id.to_owned(), attempts).map(drop)
            }
        }
    }

    /// One Transactions call retried until a final answer or the deadline, on the rotation.
    async fn retried<T, R, F, Fut>(
        &self,
        deadline: Instant,
        answer_of: impl Fn(T) -> Answer<R>,
        mut call: F,
    ) -> (Ended<R>, u32)
    where
        F: FnMut(TransactionsClient<Channel>, Duration) -> Fut,
        Fut: Future<Output = Result<tonic::Response<T>, Status>>,
    {
        let mut retry = Retry::new(&self.settings, deadline);
        let mut avoid = None;
        loop {
            let Some(left) = retry.next_attempt() else {
                return (retry.ended(), retry.attempts);
            };
            let (producer, channel) = self.producers.pick(avoid);
            let answer = match call(TransactionsClient::new(channel), left).await {
                Ok(response) => answer_of(response.into_inner()),
                Err(status) => answer::of_status(&status),
            };
            self.settled(producer, &answer, &mut avoid);
            match retry.after(answer) {
                Next::Return(ended) => return (ended, retry.attempts),
                Next::Wait(wait) => tokio::time::sleep(wait).await,
            }
        }
    }
}

/// A step that ended without its own answer, as a commit's would end.
fn ended_as_write<T>(ended: Ended<T>) -> Ended<WriteToLogResponse> {
    match ended {
        Ended::Done(_) => Ended::Done(WriteToLogResponse::default()),
        Ended::Unknown(message) => Ended::Unknown(message),
        Ended::NotStored(message) => Ended::NotStored(message),
        Ended::Refused {
            code,
            field,
            message,
        } => Ended::Refused {
            code,
            field,
            message,
        },
    }
}

/// A request whose gRPC deadline is the attempt's time left.
fn timed<T>(message: T, left: Duration) -> Request<T> {
    let mut request = Request::new(message);
    request.set_timeout(left);
    request
}
