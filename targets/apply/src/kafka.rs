//! The kafka target: publishes the payload to a topic, as is. This is also "retry my failed
//! Kafka write later": the caller writes the record through the WAL with a delay.
//!
//! Settings: `{"topic": "orders"}`. The record's key is the entry's key; its headers carry
//! `wal-entry-id`, `wal-namespace`, `wal-original-write-time-micros` and the `traceparent`.
//!
//! Idempotent by id: at-least-once delivery may publish an entry twice (a crash after the
//! broker's acknowledgement and before the WAL's); consumers of the topic drop repeats by the
//! `wal-entry-id` header. The producer is idempotent, so its own retries add no duplicates.

use std::sync::Arc;

use async_trait::async_trait;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::producer::FutureRecord;
use rdkafka::util::Timeout;
use wal_queue::kafka::broker_away;
use wal_targets::kafka::KafkaTopicSettings;

use super::{Mutation, Target, TargetError, TargetKind};
use crate::clients::{Clients, TargetProducer};

#[derive(Debug)]
pub struct KafkaTopic;

impl TargetKind for KafkaTopic {
    type Settings = KafkaTopicSettings;

    /// One Kafka cluster per consumer.
    fn endpoint(_settings: &KafkaTopicSettings, clients: &Clients) -> String {
        clients.settings().kafka_bootstrap.clone()
    }

    async fn build(
        settings: KafkaTopicSettings,
        clients: Arc<Clients>,
    ) -> Result<Arc<dyn Target>, TargetError> {
        let producer = clients.kafka().await?.clone();
        Ok(Arc::new(KafkaTopicTarget { producer, settings }))
    }
}

#[derive(Debug)]
pub struct KafkaTopicTarget {
    producer: TargetProducer,
    settings: KafkaTopicSettings,
}

#[async_trait]
impl Target for KafkaTopicTarget {
    async fn apply(&self, mutation: Mutation<'_>) -> Result<(), TargetError> {
        let entry = mutation.entry;
        let written = entry.original_write_time_micros.to_string();
        let mut headers = OwnedHeaders::new()
            .insert(Header {
                key: "wal-entry-id",
                value: Some(entry.id.as_bytes()),
            })
            .insert(Header {
                key: "wal-namespace",
                value: Some(entry.namespace.as_bytes()),
            })
            .insert(Header {
                key: "wal-original-write-time-micros",
                value: Some(written.as_bytes()),
            });
        for (name, value) in mutation.trace.into_iter().flatten() {
            headers = headers.insert(Header {
                key: name,
                value: Some(value.as_bytes()),
            });
        }
        let mut record = FutureRecord::to(&self.settings.topic)
            .payload(mutation.payload)
            .headers(headers);
        // An entry without a key gets a record without one (spread by the partitioner), not an
        // empty key that would send every such record to one partition.
        if !entry.key.is_empty() {
            record = record.key(entry.key.as_bytes());
        }
        // The producer's own message timeout bounds the wait; queueing never blocks.
        match self
            .producer
            .producer
            .send(record, Timeout::After(std::time::Duration::ZERO))
            .await
        {
            Ok(_) => {
                self.producer.outage.answered();
                Ok(())
            }
            Err((error, _)) => Err(classify(&self.settings.topic, error)),
        }
    }
}

/// Refusals of the record itself are permanent; a cluster it cannot reach is unavailable; the
/// rest retries.
fn classify(topic: &str, error: KafkaError) -> TargetError {
    let code = match &error {
        KafkaError::MessageProduction(code) => Some(*code),
        _ => None,
    };
    let reason = format!("publishing to kafka topic '{topic}'");
    let failure = match code {
        Some(
            RDKafkaErrorCode::MessageSizeTooLarge
            | RDKafkaErrorCode::InvalidMessageSize
            | RDKafkaErrorCode::InvalidMessage
            | RDKafkaErrorCode::InvalidRecord
            | RDKafkaErrorCode::InvalidTopic
            | RDKafkaErrorCode::TopicAuthorizationFailed
            | RDKafkaErrorCode::ClusterAuthorizationFailed,
        ) => TargetError::permanent(reason),
        // The cluster cannot take records now: its brokers are away, or the record waited out
        // its timeout in the producer's queue.
        Some(code) if broker_away(code) || code == RDKafkaErrorCode::MessageTimedOut => {
            TargetError::unavailable(reason)
        }
        _ => TargetError::retryable(reason),
    };
    failure.caused_by(error)
}
