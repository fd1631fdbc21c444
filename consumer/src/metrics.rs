//! The consumer's metrics, declared once. Labels are fixed up front: the namespace and queue
//! (bounded by config) and the target kind (bounded by the registry); never an entry id.

use metrics::{Unit, describe_counter, describe_gauge, describe_histogram};

pub const DELIVERED: &str = "wal_consumer_delivered_total";
pub const RETRIED: &str = "wal_consumer_retried_total";
pub const DEAD_LETTERED: &str = "wal_consumer_dead_lettered_total";
pub const APPLY_SECONDS: &str = "wal_consumer_apply_seconds";
pub const LATENESS_SECONDS: &str = "wal_consumer_lateness_seconds";
pub const IN_FLIGHT: &str = "wal_consumer_in_flight";
pub const HELD: &str = "wal_consumer_held";
pub const BACKLOG: &str = "wal_consumer_backlog";
pub const QUEUE_ERRORS: &str = "wal_consumer_queue_errors_total";

/// Buckets for apply latency and lateness: 1 ms to 5 minutes.
pub const BUCKETS: &[f64] = &[
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0,
];

pub fn describe() {
    describe_counter!(
        DELIVERED,
        "Entries applied to their target and acknowledged, by namespace and target kind."
    );
    describe_counter!(
        RETRIED,
        "Failed attempts put back on the queue for a later retry."
    );
    describe_counter!(
        DEAD_LETTERED,
        "Entries moved to the DLQ (permanent failure or retries exhausted), by class."
    );
    describe_histogram!(
        APPLY_SECONDS,
        Unit::Seconds,
        "Time one apply to the target took, successful or not."
    );
    describe_histogram!(
        LATENESS_SECONDS,
        Unit::Seconds,
        "Time an entry was applied minus its deliver-at (its delay, or its retry's backoff)."
    );
    describe_gauge!(
        IN_FLIGHT,
        "Entries received and not yet acknowledged, released or dead-lettered, per queue."
    );
    describe_gauge!(
        HELD,
        "Entries in flight that wait in memory for their deliver-at, per queue."
    );
    describe_gauge!(
        BACKLOG,
        "Entries on the queue not yet received by this consumer group (Kafka lag, SQS visible messages)."
    );
    describe_counter!(
        QUEUE_ERRORS,
        "Failed receive, acknowledge, release or dead-letter calls (retried)."
    );
}
