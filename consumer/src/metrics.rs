//! The consumer's metrics, declared once. Labels are fixed up front: the namespace and queue
//! (bounded by config) and the target kind (bounded by the registry); never an entry id.

use std::sync::{Arc, RwLock};

use metrics::{
    Counter, Gauge, Histogram, Unit, counter, describe_counter, describe_gauge, describe_histogram,
    gauge, histogram,
};
use wal_runtime::process::series::{self, SeriesGuard};

pub const DELIVERED: &str = "wal_consumer_delivered_total";
pub const RETRIED: &str = "wal_consumer_retried_total";
pub const DEAD_LETTERED: &str = "wal_consumer_dead_lettered_total";
pub const APPLY_SECONDS: &str = "wal_consumer_apply_seconds";
pub const LATENESS_SECONDS: &str = "wal_consumer_lateness_seconds";
pub const IN_FLIGHT: &str = "wal_consumer_in_flight";
pub const HELD: &str = "wal_consumer_held";
pub const BACKLOG: &str = "wal_consumer_backlog";
pub const QUEUE_ERRORS: &str = "wal_consumer_queue_errors_total";
pub const PARKED: &str = "wal_consumer_parked";
/// Not `wal_consumer_parked_total`: under OpenMetrics that is the `wal_consumer_parked` family's
/// counter sample, which the gauge [`PARKED`] already names.
pub const PARKED_TOTAL: &str = "wal_consumer_parks_total";
pub const EARLY: &str = "wal_consumer_early_total";
pub const CANCELLED: &str = "wal_consumer_cancelled_total";
pub const REPLICATION_LAG_ENTRIES: &str = "wal_replication_lag_entries";
pub const REPLICATION_LAG_SECONDS: &str = "wal_replication_lag_seconds";
pub const REPLICATION_CONNECTED: &str = "wal_replication_connected";
pub const REPLICATION_HEARTBEATS: &str = "wal_replication_heartbeats_total";

/// Buckets for apply latency and lateness: 1 ms to 5 minutes.
pub const BUCKETS: &[f64] = &[
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0,
];

pub fn describe() {
    wal_namespaces::feed::describe_metrics();
    wal_runtime::metrics::describe();
    describe_gauge!(
        REPLICATION_LAG_ENTRIES,
        "Entries of a replicated namespace its destination region's reader has yet to apply (the group's lag on this consumer's partitions), by namespace and region."
    );
    describe_gauge!(
        REPLICATION_LAG_SECONDS,
        Unit::Seconds,
        "How far a destination region trails: 0 while its reader has nothing waiting, else the age of the newest entry it applied (heartbeats keep it current when nobody writes); never negative."
    );
    describe_gauge!(
        REPLICATION_CONNECTED,
        "1 while a destination region's writer answers, 0 while its breaker is open."
    );
    describe_counter!(
        REPLICATION_HEARTBEATS,
        "Heartbeats written on a replicated namespace's topic for a destination region."
    );
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
    describe_gauge!(
        PARKED,
        "Entries waiting on the broker for their deliver-at, per queue (SQS delayed messages, Kafka delay tiers' backlog)."
    );
    describe_counter!(
        CANCELLED,
        "Entries an operator cancelled (Operations.CancelEntry), acknowledged without being applied."
    );
    describe_counter!(
        PARKED_TOTAL,
        "Entries given back to wait on the broker because their deliver-at was far (one per SQS step or Kafka tier hop)."
    );
    describe_counter!(
        EARLY,
        "Entries applied before their deliver-at by the consumer's clock. Must stay 0."
    );
    wal_apply::metrics::describe();
    describe_counter!(
        QUEUE_ERRORS,
        "Failed receive, acknowledge, release or dead-letter calls (retried)."
    );
}

/// One queue's metric handles, registered once so a delivery records without building labels.
#[derive(Debug)]
pub struct QueueMetrics {
    namespace: String,
    /// The destination of a reader with a group of its own, as its series' label:
    /// `("region", region)` or `("destination", store)`. Its series end with the reader (the
    /// region or store removed).
    destination: Option<(&'static str, String)>,
    _series: Option<SeriesGuard>,
    pub in_flight: Gauge,
    pub held: Gauge,
    pub backlog: Gauge,
    pub parked: Gauge,
    pub parked_total: Counter,
    pub early: Counter,
    pub cancelled: Counter,
    pub queue_errors: Counter,
    /// Per target kind; a handful at most (the registry's kinds, plus "none").
    kinds: RwLock<Vec<(String, Arc<KindMetrics>)>>,
}

/// The handles for one namespace and target kind.
#[derive(Debug)]
pub struct KindMetrics {
    pub delivered: Counter,
    pub retried: Counter,
    pub dead_lettered_permanent: Counter,
    pub dead_lettered_exhausted: Counter,
    pub apply_seconds: Histogram,
    pub lateness_seconds: Histogram,
}

impl QueueMetrics {
    /// The handles of `queue`, read for `destination` (see `Destination::series_label`).
    pub fn new(namespace: &str, queue: &str, destination: Option<(&'static str, &str)>) -> Self {
        let mut labels = vec![
            ("namespace", namespace.to_owned()),
            ("queue", queue.to_owned()),
        ];
        labels.extend(destination.map(|(label, value)| (label, value.to_owned())));
        Self {
            namespace: namespace.to_owned(),
            destination: destination.map(|(label, value)| (label, value.to_owned())),
            _series: destination
                .map(|(label, value)| series::hold(&[("namespace", namespace), (label, value)])),
            in_flight: gauge!(IN_FLIGHT, &labels),
            held: gauge!(HELD, &labels),
            backlog: gauge!(BACKLOG, &labels),
            parked: gauge!(PARKED, &labels),
            parked_total: counter!(PARKED_TOTAL, &labels),
            early: counter!(EARLY, &labels),
            cancelled: counter!(CANCELLED, &labels),
            queue_errors: counter!(QUEUE_ERRORS, &labels),
            kinds: RwLock::new(Vec::new()),
        }
    }

    pub fn kind(&self, kind: &str) -> Arc<KindMetrics> {
        if let Ok(kinds) = self.kinds.read()
            && let Some((_, metrics)) = kinds.iter().find(|(k, _)| k == kind)
        {
            return Arc::clone(metrics);
        }
        let mut labels = vec![
            ("namespace", self.namespace.clone()),
            ("target", kind.to_owned()),
        ];
        labels.extend(self.destination.clone());
        let dead = |class: &str| {
            let mut labels = labels.to_vec();
            labels.push(("class", class.to_owned()));
            counter!(DEAD_LETTERED, &labels)
        };
        let metrics = Arc::new(KindMetrics {
            delivered: counter!(DELIVERED, &labels),
            retried: counter!(RETRIED, &labels),
            dead_lettered_permanent: dead("permanent"),
            dead_lettered_exhausted: dead("exhausted"),
            apply_seconds: histogram!(APPLY_SECONDS, &labels),
            lateness_seconds: histogram!(LATENESS_SECONDS, &labels),
        });
        if let Ok(mut kinds) = self.kinds.write()
            && !kinds.iter().any(|(k, _)| k == kind)
        {
            kinds.push((kind.to_owned(), Arc::clone(&metrics)));
        }
        metrics
    }
}

/// A destination region's replication gauges. They leave the scrape once the region's reader
/// stops (the region removed), so a region that is gone raises no lag alert.
#[derive(Debug)]
pub struct ReplicationMetrics {
    pub lag_entries: Gauge,
    pub lag_seconds: Gauge,
    pub connected: Gauge,
    pub heartbeats: Counter,
    _series: SeriesGuard,
}

impl ReplicationMetrics {
    pub fn new(namespace: &str, region: &str) -> Self {
        let labels = [
            ("namespace", namespace.to_owned()),
            ("region", region.to_owned()),
        ];
        Self {
            lag_entries: gauge!(REPLICATION_LAG_ENTRIES, &labels),
            lag_seconds: gauge!(REPLICATION_LAG_SECONDS, &labels),
            connected: gauge!(REPLICATION_CONNECTED, &labels),
            heartbeats: counter!(REPLICATION_HEARTBEATS, &labels),
            _series: series::hold(&[("namespace", namespace), ("region", region)]),
        }
    }
}
