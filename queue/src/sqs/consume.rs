//! What a consumer does with an SQS queue: receive with a visibility timeout, acknowledge by
//! deleting, extend the visibility of an entry in progress, requeue with DelaySeconds in steps.

use super::*;

#[async_trait]
impl Consume for SqsQueue {
    async fn requeue(&self, entry: &Entry) -> Result<(), EnqueueError> {
        let url = self.url_of(&self.url, &self.spec.name).await;
        self.send(&self.spec.name, url, entry, ENTRY_LIMIT_BYTES)
            .await
    }

    fn hold_limit(&self) -> Duration {
        SQS_HOLD_LIMIT
    }

    async fn enqueue_dead_letter(&self, entry: &Entry) -> Result<(), EnqueueError> {
        let Some(dlq) = &self.spec.dlq else {
            return Err(EnqueueError::no_dlq(Backend::Sqs, &self.spec.name));
        };
        let url = self.url_of(&self.dlq_url, dlq).await;
        self.send(dlq, url, entry, ENTRY_LIMIT_BYTES).await
    }

    async fn receive(&self, max: usize, wait: Duration) -> Result<Vec<Delivery>, QueueError> {
        if max == 0 {
            return Ok(Vec::new());
        }
        let url = self
            .url_of(&self.url, &self.spec.name)
            .await
            .map_err(|e| self.error(Operation::Receive, false, e))?;
        let batch = i32::try_from(max.min(10)).unwrap_or(10);
        let wait_seconds = wait.as_secs().min(MAX_WAIT_SECONDS);
        let output = self
            .client()
            .receive_message()
            .queue_url(url)
            .max_number_of_messages(batch)
            .wait_time_seconds(i32::try_from(wait_seconds).unwrap_or(0))
            .visibility_timeout(seconds(self.backend.settings.visibility_timeout))
            .send()
            .await;
        let outage = self
            .outage
            .get_or_init(|| Outage::new("sqs", &self.spec.name));
        let output = match output {
            Ok(output) => {
                outage.answered();
                output
            }
            // Unreachable, timing out or failing on its side: counted in the outage, which
            // logs the loss and the return once each; the caller tries again shortly.
            Err(e) if service_away(&e) => {
                let reason = describe(&e);
                outage.failed(&reason);
                return Err(self.error(Operation::Receive, true, reason));
            }
            // SQS answered, and refused: a missing queue or a credential, the same next time.
            Err(e) => {
                outage.answered();
                return Err(self.error(Operation::Receive, false, describe(&e)));
            }
        };
        let deliveries = output
            .messages()
            .iter()
            .filter_map(|message| {
                let handle = message.receipt_handle()?.to_owned();
                let body = message.body().unwrap_or_default();
                Some(Delivery {
                    entry: entry::decode_text(body),
                    raw: Bytes::copy_from_slice(body.as_bytes()),
                    receipt: Receipt::Sqs {
                        message_id: message.message_id().unwrap_or_default().to_owned(),
                        handle,
                    },
                })
            })
            .collect();
        Ok(deliveries)
    }

    async fn acknowledge(&self, delivery: &Delivery) -> Result<(), QueueError> {
        let (url, handle) = self.receipt(delivery, Operation::Acknowledge).await?;
        self.client()
            .delete_message()
            .queue_url(url)
            .receipt_handle(handle)
            .send()
            .await
            .map(|_| ())
            .map_err(|e| {
                self.error(
                    Operation::Acknowledge,
                    !is_invalid_receipt(&e),
                    describe(&e),
                )
            })
    }

    async fn extend(&self, delivery: &Delivery, by: Duration) -> Result<(), QueueError> {
        let (url, handle) = self.receipt(delivery, Operation::Extend).await?;
        self.client()
            .change_message_visibility()
            .queue_url(url)
            .receipt_handle(handle)
            .visibility_timeout(seconds(by))
            .send()
            .await
            .map(|_| ())
            .map_err(|e| self.error(Operation::Extend, true, describe(&e)))
    }

    async fn close(&self) -> Result<(), QueueError> {
        // Deletes are acknowledgements already; nothing is pending.
        Ok(())
    }
}
