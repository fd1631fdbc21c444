//! A Kafka producer that failed for good, replaced.
//!
//! An idempotent producer that can no longer vouch for its sequence numbers (a broker that lost
//! or rewound them, a producer id the cluster forgot while records were in flight) raises a
//! fatal error, and from then on librdkafka fails every record with it until the process ends:
//! every write would be answered UNKNOWN or FALSE until someone restarted the producer. A new
//! producer (a new producer id) takes writes at once.

use std::sync::Arc;

use rdkafka::error::KafkaError;
use rdkafka::producer::{FutureProducer, Producer as _};

use super::PRODUCER_BUFFER_MESSAGES;
use super::backend::{KafkaBackend, KafkaSettings, millis};
use super::context::OutageContext;

impl KafkaBackend {
    /// Replaces `used` with a new producer when librdkafka has declared it unusable (see above);
    /// called by a write whose record failed. Records in flight on the old one fail with the
    /// fatal error, which is UNKNOWN: the client sends them again under the same entry id, and
    /// targets apply by the id. Of several writes that saw the same failure, the first replaces
    /// it; the old producer ends when the last of them lets go of it.
    pub(super) fn renew_if_fatal(&self, used: &Arc<FutureProducer<OutageContext>>) {
        let Some((code, reason)) = used.client().fatal_error() else {
            return;
        };
        let mut current = self.producer.write().unwrap_or_else(|p| p.into_inner());
        if !Arc::ptr_eq(&current, used) {
            return;
        }
        let context = OutageContext::sharing(&self.producer_outage, &self.producer_refusal);
        match create_producer(&self.settings, context) {
            Ok(renewed) => {
                tracing::error!(
                    servers = %self.settings.bootstrap_servers,
                    ?code,
                    %reason,
                    "the Kafka producer failed for good (a fatal error); writes go to a new producer from now on"
                );
                wal_runtime::metrics::kafka_producer_renewed().increment(1);
                *current = Arc::new(renewed);
            }
            // The same settings made the first producer, so this is not expected; the old one
            // stays, and the next failed write tries again.
            Err(error) => tracing::error!(
                ?code,
                %reason,
                %error,
                "the Kafka producer failed for good and a new one could not be made"
            ),
        }
    }
}

/// The platform's idempotent producer: acks from every in-sync copy, ordered per partition.
pub(super) fn create_producer(
    settings: &KafkaSettings,
    context: OutageContext,
) -> Result<FutureProducer<OutageContext>, KafkaError> {
    settings
        .client_config()
        .set("client.id", "wal")
        .set("enable.idempotence", "true")
        .set("acks", "all")
        .set("message.timeout.ms", millis(settings.delivery_timeout))
        .set("linger.ms", millis(settings.linger))
        .set("message.max.bytes", "1048576")
        .set(
            "queue.buffering.max.messages",
            PRODUCER_BUFFER_MESSAGES.to_string(),
        )
        .create_with_context(context)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use rdkafka::mocking::MockCluster;
    use rdkafka::types::{RDKafkaApiKey, RDKafkaRespErr};

    use super::*;
    use crate::entry::{ENTRY_VERSION, Entry};
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
    #[tokio::test]
    async fn a_producer_that_failed_for_good_is_replaced_and_the_next_write_is_stored() {
        let cluster = MockCluster::new(1).unwrap();
        cluster.create_topic("orders", 1, 1).unwrap();
        let backend = KafkaBackend::new(KafkaSettings::new(&cluster.bootstrap_servers())).unwrap();
        let queue = backend.queue(QueueSpec::new("ns", "orders", "orders-dlq"));
        let first = backend.producer();
        cluster.request_errors(
            RDKafkaApiKey::Produce,
            &[RDKafkaRespErr::RD_KAFKA_RESP_ERR_OUT_OF_ORDER_SEQUENCE_NUMBER],
        );

        let failed = queue.enqueue(&entry("a")).await.unwrap_err();
        assert_eq!(failed.durability(), Durability::Unknown, "{failed}");
        assert!(first.client().fatal_error().is_some(), "{failed}");
        assert!(!Arc::ptr_eq(&first, &backend.producer()), "not replaced");

        queue.enqueue(&entry("b")).await.unwrap();
        // The old producer stays failed: it is the new one that stored "b".
        assert!(first.client().fatal_error().is_some());
    }
}
