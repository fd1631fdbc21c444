//! The metrics of what the producer and consumer share, declared once. Labels are fixed up front:
//! the service ("kafka", "sqs") and the client (the producer, a consumer's topic or queue: bounded
//! by config).

use metrics::{Counter, Gauge, counter, describe_counter, describe_gauge, gauge};

pub const BROKER_ERRORS: &str = "wal_broker_errors_total";
pub const BROKER_AWAY: &str = "wal_broker_away";
pub const BROKER_OUTAGES: &str = "wal_broker_outages_total";
pub const GAP_ENTRIES: &str = "wal_queue_gap_entries_total";
pub const KAFKA_PRODUCER_REPLACED: &str = "wal_kafka_producer_replaced_total";

/// Describes the metrics; the binaries call it once with their own.
pub fn describe() {
    describe_counter!(
        BROKER_ERRORS,
        "Failures that say a client's broker is away (refused connections, every broker down), by service and client."
    );
    describe_gauge!(
        BROKER_AWAY,
        "1 while a client's broker does not answer, 0 once it answers again."
    );
    describe_counter!(
        BROKER_OUTAGES,
        "Times a client lost its broker (Kafka, SQS, or the CQL driver's cluster), by service and client."
    );
    describe_counter!(
        GAP_ENTRIES,
        "Entries a reader never received because the queue no longer held them (Kafka retention removed them before it read them): data loss for that reader, by topic and consumer group."
    );
    describe_counter!(
        KAFKA_PRODUCER_REPLACED,
        "Times the Kafka producer failed for good (a librdkafka fatal error) and a new one took its place; the writes still on it were answered UNKNOWN, or FALSE where they had certainly not left."
    );
}

pub fn kafka_producer_replaced() -> Counter {
    counter!(KAFKA_PRODUCER_REPLACED)
}

pub fn gap_entries(topic: &str, group: &str) -> Counter {
    counter!(GAP_ENTRIES, "topic" => topic.to_owned(), "group" => group.to_owned())
}

pub(crate) fn broker_errors(service: &'static str, client: &str) -> Counter {
    counter!(BROKER_ERRORS, "service" => service, "client" => client.to_owned())
}

pub(crate) fn broker_outages(service: &'static str, client: &str) -> Counter {
    counter!(BROKER_OUTAGES, "service" => service, "client" => client.to_owned())
}

pub(crate) fn broker_away(service: &'static str, client: &str) -> Gauge {
    gauge!(BROKER_AWAY, "service" => service, "client" => client.to_owned())
}
