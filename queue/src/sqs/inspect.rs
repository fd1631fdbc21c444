//! What operators read from an SQS queue: its visible, delayed and in-flight messages.

use super::*;

#[async_trait]
impl Inspect for SqsQueue {
    async fn backlog(&self) -> Result<Option<u64>, QueueError> {
        self.count(QueueAttributeName::ApproximateNumberOfMessages)
            .await
    }

    async fn parked(&self) -> Result<Option<u64>, QueueError> {
        self.count(QueueAttributeName::ApproximateNumberOfMessagesDelayed)
            .await
    }

    async fn unfinished(&self) -> Result<u64, QueueError> {
        let mut total = 0;
        for attribute in [
            QueueAttributeName::ApproximateNumberOfMessages,
            QueueAttributeName::ApproximateNumberOfMessagesNotVisible,
            QueueAttributeName::ApproximateNumberOfMessagesDelayed,
        ] {
            total += self.count(attribute).await?.unwrap_or(0);
        }
        Ok(total)
    }
}
