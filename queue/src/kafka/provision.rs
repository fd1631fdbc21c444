//! Creating a queue's topics (the queue, its DLQ and its delay tiers) and waiting until the
//! brokers serve them.

use std::sync::Arc;
use std::time::Duration;

use rdkafka::error::KafkaError;
use tokio::time::Instant;

use super::KafkaQueue;
use super::{Operation, QueueError};

/// How long `provision` waits for new topics to be served.
const PROVISION_TIMEOUT: Duration = Duration::from_secs(30);

impl KafkaQueue {
    /// Waits until the broker's metadata lists every topic with its partitions and each
    /// partition's leader answers for it. CreateTopics returns once the controller has the
    /// topic, before every broker serves it; a queue is provisioned when it can be used.
    pub(super) async fn await_metadata(&self, topics: &[&str]) -> Result<(), QueueError> {
        let deadline = Instant::now() + PROVISION_TIMEOUT;
        for topic in topics {
            loop {
                let backend = Arc::clone(&self.backend);
                let name = (*topic).to_owned();
                // fetch_metadata blocks on the network; keep it off the async workers.
                let visible = tokio::task::spawn_blocking(move || {
                    let client = backend.admin.inner();
                    let metadata = client.fetch_metadata(Some(&name), Duration::from_secs(5))?;
                    let Some(described) = metadata.topics().iter().find(|t| {
                        t.name() == name && t.error().is_none() && !t.partitions().is_empty()
                    }) else {
                        return Ok::<bool, KafkaError>(false);
                    };
                    // Listed is not yet served: a partition whose leader has not taken it up
                    // answers NOT_LEADER, to a producer (whose failed first batch librdkafka may
                    // then count as delivered, see `produce`) and to a reader alike. A
                    // watermark query goes to the leader, so every partition must answer one.
                    Ok(described.partitions().iter().all(|p| {
                        client
                            .fetch_watermarks(&name, p.id(), Duration::from_secs(5))
                            .is_ok()
                    }))
                })
                .await
                .map_err(|e| self.error(Operation::Provision, true, e))?
                .map_err(|e| self.error(Operation::Provision, true, e))?;
                if visible {
                    break;
                }
                if Instant::now() >= deadline {
                    return Err(self.error(
                        Operation::Provision,
                        true,
                        format!("topic '{topic}' was created but is not served after {PROVISION_TIMEOUT:?}"),
                    ));
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
        Ok(())
    }
}
