//! A Kafka producer that failed for good, replaced.
//!
//! An idempotent producer that can no longer vouch for its sequence numbers (a broker that lost
//! or rewound them, a producer id the cluster forgot while records were in flight) raises a
//! fatal error, and from then on librdkafka fails every record with it until the process ends:
//! every write would be answered FALSE until someone restarted the process. A new producer (a
//! new producer id) takes writes at once.

use std::sync::Arc;
use std::time::{Duration, Instant};

use rdkafka::producer::{FutureProducer, Producer as _};

use super::backend::{KafkaBackend, create_producer};
use super::context::OutageContext;

/// The least time between two replacements. A fatal error with a lasting cause (a cluster that
/// refuses this principal a producer id, a broker without idempotence) fails every new producer
/// the same way: it is replaced this often, not at every failed write.
const REPLACE_EVERY: Duration = Duration::from_secs(30);

/// How long a replaced producer waits for the writes still holding it before it is closed
/// regardless (each has its answer well before: its delivery timeout is shorter).
const RETIRE_WAIT: Duration = Duration::from_secs(150);

impl KafkaBackend {
    /// Replaces `used` with a new producer when librdkafka has declared it unusable (see above);
    /// called by a write whose record failed. Records still on the old one fail with the fatal
    /// error or are purged, and each is answered UNKNOWN unless it certainly never left (see
    /// `classify`). Of several writes that saw the same failure, the first replaces it; the
    /// others, and any within [`REPLACE_EVERY`] of the last replacement, leave it.
    pub(super) fn replace_if_fatal(&self, used: &Arc<FutureProducer<OutageContext>>) {
        let Some((code, reason)) = used.client().fatal_error() else {
            return;
        };
        // One replacement at a time; a write that finds one under way leaves it to it.
        let Ok(mut last) = self.replaced.try_lock() else {
            return;
        };
        if !Arc::ptr_eq(&self.producer(), used) {
            return;
        }
        if last.is_some_and(|at| at.elapsed() < REPLACE_EVERY) {
            tracing::debug!(?code, %reason, "the Kafka producer failed for good again, less than {REPLACE_EVERY:?} after its last replacement");
            return;
        }
        *last = Some(Instant::now());
        // Made outside the producer's lock, which every write takes: a new client starts
        // threads and reads its TLS files.
        let context = OutageContext::sharing(&self.producer_outage, &self.producer_refusal);
        let fresh = match create_producer(&self.settings, context) {
            Ok(fresh) => Arc::new(fresh),
            // The same settings made the first producer, so this is not expected; the old one
            // stays, and a failed write tries again after REPLACE_EVERY.
            Err(error) => {
                tracing::error!(?code, %reason, %error, "the Kafka producer failed for good and a new one could not be made");
                return;
            }
        };
        let old = std::mem::replace(
            &mut *self.producer.write().unwrap_or_else(|p| p.into_inner()),
            fresh,
        );
        tracing::error!(
            servers = %self.settings.bootstrap_servers,
            ?code,
            %reason,
            "the Kafka producer failed for good (a fatal error); writes go to a new producer from now on"
        );
        wal_runtime::metrics::kafka_producer_replaced().increment(1);
        retire(old);
    }
}

/// Closes a replaced producer once the writes still holding it have their answers, on a thread
/// of its own: closing joins librdkafka's threads and flushes, which must not hold an async
/// worker.
fn retire(old: Arc<FutureProducer<OutageContext>>) {
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        return;
    };
    runtime.spawn_blocking(move || {
        let until = Instant::now() + RETIRE_WAIT;
        while Arc::strong_count(&old) > 1 && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(100));
        }
        drop(old);
    });
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use rdkafka::mocking::MockCluster;
    use rdkafka::types::{RDKafkaApiKey, RDKafkaRespErr};

    use super::*;
    use crate::entry::{ENTRY_VERSION, Entry};
    use crate::kafka::backend::KafkaSettings;
    use crate::{Durability, Produce as _, QueueSpec};

    fn entry(id: &str) -> Entry {
        Entry {
            version: ENTRY_VERSION,
            id: id.to_owned(),
            key: "k".to_owned(),
            ..Entry::default()
        }
    }

    /// librdkafka's own mock cluster, in this process: a real broker cannot be made to answer
    /// a first produce request with "out of order sequence" on demand, and that answer is what
    /// makes an idempotent producer fail for good ("sequence desynchronization").
    fn out_of_order(cluster: &MockCluster<'_, impl rdkafka::ClientContext>) {
        cluster.request_errors(
            RDKafkaApiKey::Produce,
            &[RDKafkaRespErr::RD_KAFKA_RESP_ERR_OUT_OF_ORDER_SEQUENCE_NUMBER],
        );
    }

    #[tokio::test]
    async fn a_producer_that_failed_for_good_is_replaced_and_the_next_write_is_stored() {
        let cluster = MockCluster::new(1).unwrap();
        cluster.create_topic("orders", 1, 1).unwrap();
        let backend = KafkaBackend::new(KafkaSettings::new(&cluster.bootstrap_servers())).unwrap();
        let queue = backend.queue(QueueSpec::new("ns", "orders", "orders-dlq"));
        let first = backend.producer();
        out_of_order(&cluster);

        let failed = queue.enqueue(&entry("a")).await.unwrap_err();
        assert_eq!(failed.durability(), Durability::Unknown, "{failed}");
        assert!(first.client().fatal_error().is_some(), "{failed}");
        let second = backend.producer();
        assert!(!Arc::ptr_eq(&first, &second), "not replaced");
        // Without the replacement this write is refused: "Fatal (Local: Fatal error)".
        queue.enqueue(&entry("b")).await.unwrap();

        // A second fatal error soon after is not met with a second replacement: a lasting
        // cause would fail every new producer, and each failed write would make one.
        out_of_order(&cluster);
        queue.enqueue(&entry("c")).await.unwrap_err();
        assert!(second.client().fatal_error().is_some());
        assert!(Arc::ptr_eq(&second, &backend.producer()), "replaced again");
    }
}
