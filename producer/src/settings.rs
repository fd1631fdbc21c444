//! What the producer library runs on, apart from where it listens: plain values the binary makes
//! from its flags (`ProducerOptions::settings`), or a test or an embedding program makes itself.

use std::time::Duration;

use wal_core::queue::kafka::KafkaSettings;
use wal_core::queue::sqs::SqsSettings;

#[derive(Debug, Clone)]
pub struct ProducerSettings {
    /// The Kafka cluster of namespaces on Kafka; its delivery timeout is the write timeout.
    pub kafka: KafkaSettings,
    /// The SQS endpoint or region of namespaces on SQS.
    pub sqs: SqsSettings,
    /// CQL contact points, for namespaces with durable storage (claim checks, the archive).
    pub cql_nodes: Vec<String>,
    /// Written on every entry as its origin.
    pub region: String,
    /// How long one write may wait for the broker before the answer is UNKNOWN.
    pub write_timeout: Duration,
    /// Create the queues of every namespace served (local use; in production the control plane
    /// provisions).
    pub provision: bool,
}
