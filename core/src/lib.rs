//! What the producer and the consumer share: the entry codec, the queue backends (Kafka, SQS)
//! behind one [`queue::Queue`] trait, durable storage in CQL, and the binaries' shutdown signal.

pub mod authorize;
pub mod clusters;
pub mod cql;
pub mod durable;
pub mod entry;
pub mod metrics;
pub mod outage;
pub mod process;
pub mod queue;
pub mod secret;
pub mod tls;
