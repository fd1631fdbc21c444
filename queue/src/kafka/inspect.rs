//! What operators read from a Kafka queue: the group's lag, the delay tiers' backlog, what no
//! consumer finished, where the group stands, one record by offset.

use super::*;

#[async_trait]
impl Inspect for KafkaQueue {
    async fn parked(&self) -> Result<Option<u64>, QueueError> {
        let mut parked = None;
        for (_, tier) in &self.tiers {
            if let Some(backlog) = tier.backlog().await? {
                parked = Some(parked.unwrap_or(0) + backlog);
            }
        }
        Ok(parked)
    }

    async fn unfinished(&self) -> Result<u64, QueueError> {
        let settings = self.backend.settings.clone();
        // Entries parked on the delay tiers belong to the queue as much as those on its topic.
        let mut topics = vec![self.spec.name.clone()];
        topics.extend(
            self.delay_tiers()
                .iter()
                .map(|t| t.queue.spec().name.clone()),
        );
        // Broker calls that block, so on a blocking thread.
        tokio::task::spawn_blocking(move || {
            topics.iter().try_fold(0, |sum, topic| {
                Ok::<u64, KafkaError>(sum + unfinished(&settings, topic)?)
            })
        })
        .await
        .map_err(|e| self.error(Operation::Backlog, true, e))?
        .map_err(|e| self.error(Operation::Backlog, true, e))
    }

    async fn backlog(&self) -> Result<Option<u64>, QueueError> {
        let Some(receiver) = self.receiver.get() else {
            return Ok(None);
        };
        // The group's committed offsets and the partitions' high watermarks come from the
        // broker, with blocking calls (each bounded by LAG_TIMEOUT), so apart.
        let consumer = Arc::clone(&receiver.consumer);
        let topic = self.spec.name.clone();
        let lag = apart::call(BACKLOG_WAIT, move || group_lag(&consumer, &topic))
            .await
            .map_err(|e| self.error(Operation::Backlog, true, e))?
            .map_err(|e| self.error(Operation::Backlog, true, e))?;
        Ok(Some(lag))
    }

    async fn positions(&self) -> Result<Option<Vec<Position>>, QueueError> {
        let settings = self.backend.settings.clone();
        let (group, topic) = (self.group(), self.spec.name.clone());
        let positions =
            tokio::task::spawn_blocking(move || lag::positions(&settings, &group, &topic))
                .await
                .map_err(|e| self.error(Operation::Backlog, true, e))?
                .map_err(|e| self.error(Operation::Backlog, true, e))?;
        Ok(Some(positions))
    }

    async fn entry_at(
        &self,
        partition: i32,
        offset: i64,
    ) -> Result<Option<Result<Entry, entry::CodecError>>, QueueError> {
        let settings = self.backend.settings.clone();
        let topic = self.spec.name.clone();
        tokio::task::spawn_blocking(move || lag::entry_at(&settings, &topic, partition, offset))
            .await
            .map_err(|e| self.error(Operation::Backlog, true, e))?
            .map_err(|e| self.error(Operation::Backlog, true, e))
    }
}
