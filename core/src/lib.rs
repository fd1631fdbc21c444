//! What the producer and the consumer share: the entry codec, the queue backends (Kafka, SQS)
//! behind one [`queue::Queue`] trait, and durable storage in CQL.

pub mod durable;
pub mod entry;
pub mod queue;
