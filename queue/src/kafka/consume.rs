//! What a consumer does with a Kafka queue: receive through the group's receiver, acknowledge by
//! offset (committed only past entries finished in order), park on delay tiers, hold by pausing
//! the assigned partitions, and close with a final commit.

use super::*;

#[async_trait]
impl Consume for KafkaQueue {
    async fn requeue(&self, entry: &Entry) -> Result<(), EnqueueError> {
        let remaining = entry.deliver_at_micros.saturating_sub(entry::now_micros());
        let remaining = Duration::from_micros(u64::try_from(remaining).unwrap_or(0));
        let tier = delay::kafka_tier_for(&self.tier_waits, remaining)
            .and_then(|wait| self.tiers.iter().find(|(w, _)| *w == wait));
        let Some((_, tier)) = tier else {
            return self
                .produce(&self.spec.name, entry, RECORD_LIMIT_BYTES)
                .await;
        };
        // The tier's reader moves the entry on `wait` after it was parked, which it reads here.
        let mut parked = entry.clone();
        parked.enqueued_at_micros = entry::now_micros();
        self.produce(&tier.spec.name, &parked, RECORD_LIMIT_BYTES)
            .await
    }

    fn hold_limit(&self) -> Duration {
        if self.tiers.is_empty() {
            Duration::MAX
        } else {
            KAFKA_HOLD_LIMIT
        }
    }

    fn delay_tiers(&self) -> Vec<DelayTier> {
        self.tiers
            .iter()
            .map(|(wait, tier)| DelayTier {
                wait: *wait,
                queue: Arc::clone(tier) as Arc<dyn Queue>,
            })
            .collect()
    }

    async fn enqueue_dead_letter(&self, entry: &Entry) -> Result<(), EnqueueError> {
        let Some(dlq) = &self.spec.dlq else {
            return Err(EnqueueError::no_dlq(Backend::Kafka, &self.spec.name));
        };
        self.produce(dlq, entry, RECORD_LIMIT_BYTES).await
    }

    async fn receive(&self, max: usize, wait: Duration) -> Result<Vec<Delivery>, QueueError> {
        let receiver = self.receiver().await?;
        // A caller's "wait forever" (Duration::MAX) must not overflow the clock.
        let deadline = Instant::now()
            .checked_add(wait)
            .unwrap_or_else(|| Instant::now() + Duration::from_secs(86_400));
        // Sized up front: growing it moved every delivery received so far, several times a poll.
        let mut deliveries = Vec::with_capacity(max.min(PREALLOCATED_DELIVERIES));
        // What arrived while the queue was held comes first (see `receiver`).
        let kept: Vec<_> = {
            let mut kept = self::context::lock_any(&receiver.kept);
            let taken = kept.len().min(max);
            kept.drain(..taken).collect()
        };
        for message in &kept {
            deliveries.extend(self.delivery(receiver, message));
        }
        // One stream for the whole receive: each makes its own waker slot in the client.
        let mut stream = receiver.consumer.stream();
        while deliveries.len() < max {
            // Wait for the first entry; after it, take only what librdkafka already fetched:
            // one look, without a timer.
            let next = if deliveries.is_empty() {
                let budget = deadline.saturating_duration_since(Instant::now());
                tokio::time::timeout(budget, stream.next()).await.ok()
            } else {
                stream.next().now_or_never()
            };
            let message = match next.flatten() {
                None => break,
                Some(Ok(message)) => message,
                // The broker is away (or was: librdkafka queues an error per failed connection
                // attempt, and they wait here behind the records). The client context counted
                // it already, and librdkafka reconnects by itself: read on, so nothing fetched
                // after the broker returned waits for the errors queued before.
                Some(Err(error)) if error.rdkafka_error_code().is_some_and(broker_away) => continue,
                // Anything else fails the same way until someone acts (a missing topic, a
                // denied group): the caller backs off and says so.
                Some(Err(error)) if deliveries.is_empty() => {
                    let missing = error.rdkafka_error_code()
                        == Some(RDKafkaErrorCode::UnknownTopicOrPartition);
                    let reason = if missing {
                        format!("{error}; provision the queue first")
                    } else {
                        error.to_string()
                    };
                    return Err(self.error(Operation::Receive, false, reason));
                }
                Some(Err(_)) => break,
            };
            deliveries.extend(self.delivery(receiver, &message));
        }
        if !deliveries.is_empty() {
            receiver.outage.answered();
        } else if receiver.outage.is_away() {
            self.probe(receiver).await;
        }
        Ok(deliveries)
    }

    async fn acknowledge(&self, delivery: &Delivery) -> Result<(), QueueError> {
        let Receipt::Kafka { partition, offset } = delivery.receipt else {
            return Err(self.error(Operation::Acknowledge, false, "not a Kafka receipt"));
        };
        let Some(receiver) = self.receiver.get() else {
            return Err(self.error(
                Operation::Acknowledge,
                false,
                "nothing was received through this handle",
            ));
        };
        // The store happens under the lock, so concurrent acknowledgements store commit points
        // in the order they were computed and the stored offset never moves backwards.
        let mut tracker = lock(&receiver.tracker);
        let Some(point) = tracker.acknowledged(partition, offset) else {
            return Ok(());
        };
        // Recorded only once stored: after a failed store, the retried acknowledgement (or the
        // next one) stores the point again.
        self.store_commit_point(&receiver.consumer, partition, point)?;
        tracker.stored(partition, point);
        Ok(())
    }

    async fn extend(&self, _delivery: &Delivery, _by: Duration) -> Result<(), QueueError> {
        // A Kafka entry stays with this consumer until its partition is revoked; there is no
        // per-entry timeout to push back.
        Ok(())
    }

    async fn pause(&self) -> Result<(), QueueError> {
        self.pause_or_resume(true).await
    }

    async fn resume(&self) -> Result<(), QueueError> {
        self.pause_or_resume(false).await
    }

    async fn close(&self) -> Result<(), QueueError> {
        let Some(receiver) = self.receiver.get() else {
            return Ok(());
        };
        // Commits the offsets stored on acknowledgement, for the partitions assigned now only
        // (librdkafka skips an assignment it has lost). It blocks on the broker for as long as
        // there is no group coordinator, so it runs apart and is waited for a bounded time.
        let consumer = Arc::clone(&receiver.consumer);
        let committed = apart::call(FINAL_COMMIT_WAIT, move || {
            consumer.commit_consumer_state(CommitMode::Sync)
        })
        .await;
        match committed {
            Ok(Ok(()) | Err(KafkaError::ConsumerCommit(RDKafkaErrorCode::NoOffset))) => Ok(()),
            Ok(Err(e)) => Err(self.error(Operation::Close, true, e)),
            Err(not_returned) => Err(self.error(
                Operation::Close,
                true,
                format!("the final commit: {not_returned}"),
            )),
        }
    }
}
